/* A pipeline's SLURM run read back: each job's state from the exit status it left
 * (slurm/state/STAGE_TASK.rc), else from squeue, else from sacct or scontrol; the failed parts
 * resubmitted with everything downstream of them (slurm.h). */
#include "slurm.h"
#include "slurm_jobs.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { T_DONE, T_FAILED, T_RUNNING, T_PENDING, T_BLOCKED };

typedef struct task {
    char jobid[32]; /* the latest submission that holds this task ("" none) */
    int state;
    char word[64]; /* "exit 3", "CANCELLED", the reason a job waits */
} task;

typedef struct stage_run {
    dm_slurm_stage st;
    task *t; /* t[0] for one job, t[1..ntasks] for an array */
    int state;
} stage_run;

static int exists(const char *dir, const char *rel)
{
    char *p = dm_path_join(dir, rel);
    struct stat s;
    int ok = stat(p, &s) == 0;
    free(p);
    return ok;
}

/* The folder that holds slurm/: the work folder while the run is under way, --out after. */
static char *run_dir(const char *out)
{
    char *work = dm_slurm_work_dir(out);
    if (!work) return NULL;
    if (exists(work, "slurm/stages.tsv")) return work;
    char *abs = dm_slurm_abs_path(out);
    free(work);
    if (abs && exists(abs, "slurm/stages.tsv")) return abs;
    dm_set_error("pipeline: %s: no SLURM run of a pipeline there (no slurm/stages.tsv in it nor "
                 "in its work folder)",
                 out);
    free(abs);
    return NULL;
}

static int first_task(const stage_run *s)
{
    return s->st.ntasks ? 1 : 0;
}

static int last_task(const stage_run *s)
{
    return s->st.ntasks ? s->st.ntasks : 0;
}

/* jobs.tsv: the latest job id of every task. */
static int read_jobs(const char *dir, stage_run *sr, int n)
{
    char *path = dm_path_join(dir, "slurm/jobs.tsv");
    size_t len;
    char *text = dm_read_file(path, &len);
    free(path);
    if (!text) return -1;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char id[128], jobid[32], tasks[DM_SLURM_MAX_TASKS * 5];
        if (sscanf(line, "%127[^\t]\t%31[^\t]\t%4999s", id, jobid, tasks) != 3) continue;
        for (int i = 0; i < n; i++) {
            if (strcmp(sr[i].st.id, id)) continue;
            if (!strcmp(tasks, "-")) {
                snprintf(sr[i].t[0].jobid, sizeof sr[i].t[0].jobid, "%s", jobid);
                continue;
            }
            for (char *p = tasks; *p;) { /* "1-4" or "2,3" */
                int a = (int)strtol(p, &p, 10), b = a;
                if (*p == '-') b = (int)strtol(p + 1, &p, 10);
                for (int k = a; k <= b && k <= sr[i].st.ntasks; k++)
                    if (k >= 1) snprintf(sr[i].t[k].jobid, sizeof sr[i].t[k].jobid, "%s", jobid);
                if (*p == ',')
                    p++;
                else if (*p)
                    break;
            }
        }
    }
    free(text);
    return 0;
}

/* What the queue says of job `jobid`'s task k (0: a job that is no array).  Writes state and
 * word; 1 when the queue or the accounting knows it, else 0. */
static int queue_state(const char *jobid, int k, task *t)
{
    char want[48];
    snprintf(want, sizeof want, "%d", k);
    char *out = NULL;
    char *sq[] = {"squeue", "-h", "-r", "-j", (char *)jobid, "-o", "%K|%T|%r", NULL};
    int rc = dm_slurm_capture(sq, &out);
    if (rc != 0 && (!out || !strstr(out, "Invalid job id"))) {
        /* not "no such job": no answer at all (no controller, another cluster's config) */
        const char *nl = out ? strrchr(out, '\n') : NULL;
        dm_set_error("squeue -j %s: %s (is this the cluster the jobs went to?)", jobid,
                     out && *out ? (nl ? nl + 1 : out) : "cannot run it");
        free(out);
        return -1;
    }
    int found = 0;
    char *save = NULL;
    for (char *l = rc == 0 ? strtok_r(out, "\n", &save) : NULL; l && !found;
         l = strtok_r(NULL, "\n", &save)) {
        char tk[32], st[40], why[64] = "";
        if (sscanf(l, "%31[^|]|%39[^|]|%63[^\n]", tk, st, why) < 2) continue;
        if (strcmp(tk, k ? want : "N/A") && !(k == 0 && !strcmp(tk, "0"))) continue;
        found = 1;
        if (!strcmp(st, "RUNNING") || !strcmp(st, "COMPLETING") || !strcmp(st, "CONFIGURING")) {
            t->state = T_RUNNING;
            snprintf(t->word, sizeof t->word, "%s", st);
        } else if (!strcmp(st, "PENDING")) {
            t->state = strstr(why, "NeverSatisfied") ? T_BLOCKED : T_PENDING;
            snprintf(t->word, sizeof t->word, "%s", why);
        } else {
            t->state = T_FAILED;
            snprintf(t->word, sizeof t->word, "%s", st);
        }
    }
    free(out);
    if (found) return 1;
    /* Gone from the queue without leaving its exit status: ask the accounting, else the
     * controller's memory of finished jobs. */
    char jk[48];
    snprintf(jk, sizeof jk, k ? "%s_%d" : "%s", jobid, k);
    char *sa[] = {"sacct", "-n", "-P", "-X", "-j", jk, "-o", "State", NULL};
    out = NULL;
    rc = dm_slurm_capture(sa, &out);
    if (rc == 0 && out && *out) {
        t->state = T_FAILED;
        snprintf(t->word, sizeof t->word, "%.*s", (int)strcspn(out, " \n"), out);
        free(out);
        return 1;
    }
    free(out);
    out = NULL;
    char *sc[] = {"scontrol", "-o", "show", "job", (char *)jobid, NULL};
    rc = dm_slurm_capture(sc, &out);
    save = NULL;
    for (char *l = rc == 0 ? strtok_r(out, "\n", &save) : NULL; l && !found;
         l = strtok_r(NULL, "\n", &save)) {
        char *a = strstr(l, " ArrayTaskId="), *s = strstr(l, " JobState=");
        if (!s || (k && (!a || atoi(a + 13) != k)) || (!k && a)) continue;
        found = 1;
        t->state = T_FAILED;
        snprintf(t->word, sizeof t->word, "%.*s", (int)strcspn(s + 10, " \n"), s + 10);
    }
    free(out);
    return found;
}

/* The exit status task k of stage id left in slurm/state: 1 (state and word set), else 0. */
static int task_rc(const char *dir, const char *id, int k, task *t)
{
    char rel[200];
    snprintf(rel, sizeof rel, "slurm/state/%s_%d.rc", id, k);
    char *p = dm_path_join(dir, rel);
    size_t len;
    char *text = access(p, F_OK) == 0 ? dm_read_file(p, &len) : NULL;
    free(p);
    if (!text) return 0;
    int rc = atoi(text);
    free(text);
    t->state = rc == 0 ? T_DONE : T_FAILED;
    snprintf(t->word, sizeof t->word, "exit %d", rc);
    return 1;
}

static int task_state(const char *dir, const char *id, int k, task *t)
{
    if (task_rc(dir, id, k, t)) return 0;
    int q = *t->jobid ? queue_state(t->jobid, k, t) : 0;
    if (q < 0) return -1;
    /* a task that ended between the two looks has left its status by now */
    if ((!q || t->state == T_FAILED) && *t->jobid && task_rc(dir, id, k, t)) return 0;
    if (!*t->jobid) {
        t->state = T_FAILED;
        snprintf(t->word, sizeof t->word, "never submitted");
    } else if (!q) {
        t->state = T_FAILED;
        snprintf(t->word, sizeof t->word, "ended without a result");
    } else if (t->state == T_FAILED && !strcmp(t->word, "COMPLETED")) {
        snprintf(t->word, sizeof t->word, "COMPLETED without a result");
    }
    return 0;
}

/* Reads the run: its stages and the state of every task.  The count, or -1. */
static int read_run(const char *dir, stage_run **out)
{
    dm_slurm_stage *st;
    int n = dm_slurm_read_stages(dir, &st);
    if (n < 0) return -1;
    stage_run *sr = calloc(n, sizeof *sr);
    for (int i = 0; i < n; i++) {
        sr[i].st = st[i];
        sr[i].t = calloc(st[i].ntasks + 1, sizeof *sr[i].t);
    }
    free(st);
    if (read_jobs(dir, sr, n) != 0) {
        for (int i = 0; i < n; i++) free(sr[i].t);
        free(sr);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int any[5] = {0};
        for (int k = first_task(&sr[i]); k <= last_task(&sr[i]); k++) {
            if (task_state(dir, sr[i].st.id, k, &sr[i].t[k]) != 0) {
                for (int j = 0; j < n; j++) free(sr[j].t);
                free(sr);
                return -1;
            }
            any[sr[i].t[k].state]++;
        }
        /* A stage has failed once its last job has ended: until then it runs, and its
         * failed parts are shown already. */
        sr[i].state = any[T_RUNNING]                    ? T_RUNNING
                      : any[T_PENDING] && any[T_FAILED] ? T_RUNNING
                      : any[T_FAILED]                   ? T_FAILED
                      : any[T_PENDING]                  ? T_PENDING
                      : any[T_BLOCKED]                  ? T_BLOCKED
                                                        : T_DONE;
    }
    *out = sr;
    return n;
}

static void free_run(stage_run *sr, int n)
{
    for (int i = 0; i < n; i++) free(sr[i].t);
    free(sr);
}

/* The run's folder (malloc'd) and its stages with their states; the count, or -1. */
static int open_run(const char *out, char **dir, stage_run **sr)
{
    *dir = run_dir(out);
    if (!*dir) return -1;
    int n = read_run(*dir, sr);
    if (n < 0) {
        free(*dir);
        *dir = NULL;
    }
    return n;
}

static const char *state_name[] = {"done", "failed", "running", "pending", "blocked"};

int dm_slurm_status(const char *out, FILE *to)
{
    char *dir;
    stage_run *sr;
    int n = open_run(out, &dir, &sr);
    if (n < 0) return -1;
    fprintf(to, "%s: SLURM run in %s\n", out, dir);
    int failed = 0, done = 0;
    for (int i = 0; i < n; i++) {
        stage_run *s = &sr[i];
        task *t0 = &s->t[first_task(s)];
        /* the jobs of its tasks: one, or more after a resubmission of some parts */
        char ids[256] = "";
        size_t used = 0;
        int nids = 0;
        for (int k = first_task(s); k <= last_task(s); k++) {
            const char *j = s->t[k].jobid;
            int seen = 0;
            for (int m = first_task(s); m < k; m++) seen |= !strcmp(s->t[m].jobid, j);
            if (!seen && *j && used + strlen(j) + 2 < sizeof ids) {
                used += (size_t)snprintf(ids + used, sizeof ids - used, "%s%s", nids ? "," : "", j);
                nids++;
            }
        }
        fprintf(to, "  %-24s %-8s job%s %s", s->st.id, state_name[s->state], nids > 1 ? "s" : "",
                ids);
        if (s->st.ntasks) {
            int ok = 0, bad = 0;
            for (int k = 1; k <= s->st.ntasks; k++) {
                ok += s->t[k].state == T_DONE;
                bad += s->t[k].state == T_FAILED;
            }
            fprintf(to, ", %d parts: %d done", s->st.ntasks, ok);
            if (bad) fprintf(to, ", %d failed", bad);
        } else if (s->state != T_DONE && *t0->word) {
            fprintf(to, " (%s)", t0->word);
        }
        fputc('\n', to);
        for (int k = first_task(s); k <= last_task(s); k++) {
            if (s->t[k].state != T_FAILED) continue;
            char rel[200];
            snprintf(rel, sizeof rel, k ? "slurm/logs/%s_%d.log" : "slurm/logs/%s.log", s->st.id,
                     k);
            char *log = dm_path_join(dir, rel);
            if (k)
                fprintf(to, "    part %d: %s (job %s_%d), log %s\n", k, s->t[k].word, s->t[k].jobid,
                        k, log);
            else
                fprintf(to, "    %s (job %s), log %s\n", s->t[k].word, s->t[k].jobid, log);
            free(log);
        }
        failed += s->state == T_FAILED;
        done += s->state == T_DONE;
    }
    int rc = failed ? 1 : done == n ? 0 : 3;
    if (rc == 1)
        fprintf(to,
                "failed: 'dimoc pipeline --slurm-resubmit %s' resubmits what failed and "
                "every stage after it\n",
                out);
    else
        fprintf(to,
                rc == 0 ? "complete: %s is in place\n"
                        : "under way: the output folder %s "
                          "appears when the last job ends\n",
                out);
    free_run(sr, n);
    free(dir);
    return rc;
}

static void cancel_job(const char *jobid)
{
    char *argv[] = {"scancel", (char *)jobid, NULL}, *text = NULL;
    if (dm_slurm_capture(argv, &text) >= 0) free(text);
}

int dm_slurm_resubmit(const char *out, FILE *to)
{
    char *dir;
    stage_run *sr;
    int n = open_run(out, &dir, &sr);
    if (n < 0) return -1;
    int first = 0, rc = 0;
    while (first < n && sr[first].state == T_DONE) first++;
    if (first == n) {
        rc = dm_set_error("pipeline --slurm-resubmit: %s: nothing to resubmit, the run is "
                          "complete",
                          out);
    } else {
        stage_run *s = &sr[first];
        for (int k = first_task(s); k <= last_task(s) && rc == 0; k++)
            if (s->t[k].state == T_RUNNING || s->t[k].state == T_PENDING)
                rc = dm_set_error("pipeline --slurm-resubmit: %s: stage %s is still %s (job %s): "
                                  "resubmit once it has ended",
                                  out, s->st.id, state_name[s->t[k].state], s->t[k].jobid);
    }
    /* The earlier jobs of the stages to resubmit go (those still waiting on a failure). */
    for (int i = first; rc == 0 && i < n; i++)
        for (int k = first_task(&sr[i]); k <= last_task(&sr[i]); k++)
            if (*sr[i].t[k].jobid && sr[i].t[k].state != T_DONE &&
                (k <= first_task(&sr[i]) || strcmp(sr[i].t[k].jobid, sr[i].t[k - 1].jobid)))
                cancel_job(sr[i].t[k].jobid);
    char prev[32] = "";
    for (int i = first; rc == 0 && i < n; i++) {
        stage_run *s = &sr[i];
        char tasks[DM_SLURM_MAX_TASKS * 5] = "", jobid[32];
        size_t used = 0;
        for (int k = first_task(s); k <= last_task(s); k++) {
            if (i == first && s->t[k].state == T_DONE) continue;
            char rel[200];
            snprintf(rel, sizeof rel, "slurm/state/%s_%d.rc", s->st.id, k);
            char *p = dm_path_join(dir, rel);
            unlink(p);
            free(p);
            if (k)
                used +=
                    (size_t)snprintf(tasks + used, sizeof tasks - used, "%s%d", used ? "," : "", k);
        }
        char file[160];
        snprintf(file, sizeof file, "slurm/%s.sbatch", s->st.id);
        char *script = dm_path_join(dir, file);
        rc = dm_slurm_sbatch(script, *prev ? prev : NULL, s->st.ntasks ? tasks : NULL, jobid);
        free(script);
        if (rc == 0) rc = dm_slurm_record(dir, s->st.id, jobid, s->st.ntasks ? tasks : "-");
        if (rc == 0) {
            fprintf(to, "%s: job %s%s%s%s\n", s->st.id, jobid, s->st.ntasks ? " (parts " : "",
                    s->st.ntasks ? tasks : "", s->st.ntasks ? ")" : "");
            snprintf(prev, sizeof prev, "%s", jobid);
        }
    }
    free_run(sr, n);
    free(dir);
    return rc;
}
