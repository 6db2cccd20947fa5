/* A pipeline's plan as SLURM jobs: the scripts, their submission (slurm.h). */
#include "slurm.h"
#include "slurm_jobs.h"
#include "util/cmdline.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A growing string. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) DM_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)need + 1 > b->cap) {
        b->cap = 2 * (b->n + (size_t)need + 1);
        b->s = realloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

static char *quote(const char *s)
{
    char *v[1] = {(char *)s};
    return dm_shell_quote_argv(1, v);
}

char *dm_slurm_abs_path(const char *path)
{
    char cwd[PATH_MAX];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    if (path[0] == '/') return strndup(path, n);
    if (!getcwd(cwd, sizeof cwd)) {
        dm_set_error("the current folder: %s", strerror(errno));
        return NULL;
    }
    char *r = malloc(strlen(cwd) + n + 2);
    sprintf(r, "%s/%.*s", cwd, (int)n, path);
    return r;
}

char *dm_slurm_work_dir(const char *out)
{
    char *abs = dm_slurm_abs_path(out);
    if (!abs) return NULL;
    char *slash = strrchr(abs, '/');
    char *w = malloc(strlen(abs) + 16);
    sprintf(w, "%.*s/.%s.slurm", (int)(slash - abs), abs, slash + 1);
    free(abs);
    return w;
}

int dm_slurm_capture(char *const argv[], char **output)
{
    const char *tmp = getenv("TMPDIR");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/dimoc-slurm.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return dm_set_error("a temporary file %s: %s", path, strerror(errno));
    close(fd);
    int status = dm_run_child(argv, path);
    size_t len = 0;
    char *text = status < 0 ? NULL : dm_read_file(path, &len);
    unlink(path);
    if (!text) return -1;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = 0;
    *output = text;
    return status;
}

int dm_slurm_sbatch(const char *script, const char *after, const char *tasks, char *jobid)
{
    char dep[160], arr[DM_SLURM_MAX_TASKS * 5 + 16];
    char *argv[6] = {"sbatch", "--parsable", NULL, NULL, NULL, NULL};
    int k = 2;
    if (after) {
        snprintf(dep, sizeof dep, "--dependency=afterok:%s", after);
        argv[k++] = dep;
    }
    if (tasks) {
        snprintf(arr, sizeof arr, "--array=%s", tasks);
        argv[k++] = arr;
    }
    argv[k] = (char *)script;
    char *text = NULL;
    int status = dm_slurm_capture(argv, &text);
    if (status < 0) return dm_set_error("sbatch %s: %s", script, dm_last_error());
    /* The last line: "123" or "123;cluster" (warnings may come before it). */
    const char *nl = strrchr(text, '\n'), *last = nl ? nl + 1 : text;
    size_t n = strspn(last, "0123456789");
    if (status != 0 || n == 0 || n > 30 || (last[n] && last[n] != ';')) {
        dm_set_error("sbatch %s failed (exit %d): %s", script, status, *last ? last : "no message");
        free(text);
        return -1;
    }
    memcpy(jobid, last, n);
    jobid[n] = 0;
    free(text);
    return 0;
}

int dm_slurm_record(const char *dir, const char *id, const char *jobid, const char *tasks)
{
    char *path = dm_path_join(dir, "slurm/jobs.tsv");
    FILE *f = fopen(path, "a");
    if (!f || fprintf(f, "%s\t%s\t%s\n", id, jobid, tasks) < 0 || fclose(f) != 0) {
        dm_set_error("%s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    free(path);
    return 0;
}

int dm_slurm_read_stages(const char *dir, dm_slurm_stage **stages)
{
    char *path = dm_path_join(dir, "slurm/stages.tsv");
    size_t len;
    char *text = dm_read_file(path, &len);
    if (!text) {
        free(path);
        return -1;
    }
    int n = 0, cap = 16;
    dm_slurm_stage *st = malloc(cap * sizeof *st);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (n == cap) st = realloc(st, (cap *= 2) * sizeof *st);
        char *tab = strchr(line, '\t');
        if (!tab || (size_t)(tab - line) >= sizeof st[n].id) {
            dm_set_error("%s: line %d is not 'STAGE<tab>PARTS'", path, n + 1);
            free(st), free(text), free(path);
            return -1;
        }
        snprintf(st[n].id, sizeof st[n].id, "%.*s", (int)(tab - line), line);
        st[n].ntasks = atoi(tab + 1);
        n++;
    }
    free(text);
    free(path);
    *stages = st;
    return n;
}

/* One job of the plan. */
typedef struct job {
    char id[128];
    int ntasks; /* 0: one job; N: an array */
    int gpu;    /* gets --gpus-per-task */
    char *body; /* its command lines */
} job;

typedef struct jobs {
    job *v;
    int n, cap;
} jobs;

static job *add_job(jobs *js, const char *name, const char *suffix, int ntasks, int gpu)
{
    if (js->n == js->cap) js->v = realloc(js->v, (js->cap = 2 * js->cap + 8) * sizeof *js->v);
    job *j = &js->v[js->n++];
    snprintf(j->id, sizeof j->id, "%02d-%.60s%s", js->n, name, suffix);
    j->ntasks = ntasks;
    j->gpu = gpu;
    j->body = NULL;
    return j;
}

static int word_in(const char *w, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(w, *set)) return 1;
    return 0;
}

/* The plan's lines (pipelines/lib/flags.bash) as jobs. */
static int plan_jobs(const char *plan_path, const char *work, const char *program, int parts,
                     jobs *js)
{
    static const char *const takes_part[] = {"fit", "csd", "track", NULL};
    static const char *const on_gpu[] = {"fit", "csd", "track", "commit", NULL};
    size_t len;
    char *text = dm_read_file(plan_path, &len);
    if (!text) return -1;
    char *qprog = quote(program);
    int rc = 0, lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        char *f[6] = {0};
        int nf = 0;
        lineno++;
        for (char *p = line; nf < 6; nf++) {
            f[nf] = p;
            char *tab = strchr(p, '\t');
            if (!tab) {
                nf++;
                break;
            }
            *tab = 0;
            p = tab + 1;
        }
        sbuf b = {0};
        if (nf == 6 && !strcmp(f[0], "stage")) {
            const char *name = f[1], *cmd = f[2], *qout = f[3], *pre = f[4], *post = f[5];
            int split = parts > 1 && *qout && word_in(cmd, takes_part);
            job *j = add_job(js, name, "", split ? parts : 0, word_in(cmd, on_gpu));
            if (split) {
                char *pdir = malloc(strlen(work) + strlen(j->id) + 32);
                sprintf(pdir, "%s/slurm/parts/%s", work, j->id);
                char *qp = quote(pdir);
                sb_printf(&b, "%s %s --out %s/part-\"$task\"%s%s --part \"$task\"/%d\n", qprog, pre,
                          qp, *post ? " " : "", post, parts);
                j->body = b.s;
                sbuf m = {0};
                sb_printf(&m, "%s merge", qprog);
                for (int k = 1; k <= parts; k++) sb_printf(&m, " %s/part-%d", qp, k);
                char *qw = quote(work);
                sb_printf(&m,
                          " --out %s &&\n    rm -rf %s && { rmdir %s/slurm/parts 2>/dev/null "
                          "|| true; }\n",
                          qout, qp, qw);
                free(qw);
                job *mj = add_job(js, name, "-merge", 0, 0);
                mj->body = m.s;
                free(qp);
                free(pdir);
            } else {
                sb_printf(&b, "%s %s%s%s%s%s\n", qprog, pre, *qout ? " --out " : "", qout,
                          *post ? " " : "", post);
                j->body = b.s;
            }
        } else if (nf == 5 && !strcmp(f[0], "finish")) {
            job *j = add_job(js, "finish-", f[1], 0, 0);
            sb_printf(&b,
                      "DIMOC_PIPELINE_PHASE=finish DIMOC_FINISH_DEPTH=%s DIMOC_PIPELINE_DEPTH=%s "
                      "bash %s %s\n",
                      f[2], f[2], f[3], f[4]);
            j->body = b.s;
        } else {
            rc = dm_set_error("%s: line %d is not a plan line of pipelines/lib/flags.bash",
                              plan_path, lineno);
        }
    }
    free(qprog);
    free(text);
    return rc;
}

/* One job's script. */
static char *job_script(const job *j, const char *name, const char *work, const char *out,
                        const char *program, const dm_slurm_opts *o, const char *cwd)
{
    sbuf b = {0};
    char *qprog = quote(program), *qwork = quote(work), *qout = quote(out);
    sb_printf(&b, "#!/bin/bash\n#SBATCH --job-name=dimoc-%s-%.2s\n", name, j->id);
    sb_printf(&b, "#SBATCH --output=%s/slurm/logs/%s%s.log\n", work, j->id, j->ntasks ? "_%a" : "");
    sb_printf(&b, "#SBATCH --chdir=%s\n", cwd);
    if (j->ntasks) sb_printf(&b, "#SBATCH --array=1-%d\n", j->ntasks);
    const char *part = !j->gpu && o->cpu_partition ? o->cpu_partition : o->partition;
    if (part) sb_printf(&b, "#SBATCH --partition=%s\n", part);
    if (o->time) sb_printf(&b, "#SBATCH --time=%s\n", o->time);
    if (o->account) sb_printf(&b, "#SBATCH --account=%s\n", o->account);
    if (o->cpus_per_task) sb_printf(&b, "#SBATCH --cpus-per-task=%s\n", o->cpus_per_task);
    if (o->gpus_per_task && j->gpu) sb_printf(&b, "#SBATCH --gpus-per-task=%s\n", o->gpus_per_task);
    sb_printf(&b, "# Stage %s of `dimoc pipeline %s --slurm`%s, written by dimoc.\n", j->id, name,
              j->ntasks ? ", part $SLURM_ARRAY_TASK_ID" : "");
    sb_printf(&b, "# Its exit status goes to slurm/state/%s_TASK.rc for --slurm-status.\n", j->id);
    sb_printf(&b,
              "unset DIMOC_PIPELINE_PHASE DIMOC_PLAN DIMOC_PIPELINE_DEPTH DIMOC_FINISH_DEPTH\n");
    sb_printf(&b, "export DIMOC=%s DIMOC_PROGRAM=%s\n", qprog, qprog);
    sb_printf(&b, "task=${SLURM_ARRAY_TASK_ID:-0}\n(\n");
    if (o->setup) {
        char *qs = quote(o->setup);
        sb_printf(&b, "    . %s || exit $?\n", qs);
        free(qs);
    }
    sb_printf(&b, "    %s)\nrc=$?\n", j->body);
    /* The last job renames the work folder to --out: its state file goes there. */
    sb_printf(&b,
              "for d in %s %s; do\n"
              "    if [ -d \"$d/slurm/state\" ]; then\n"
              "        s=$d/slurm/state/%s_$task.rc\n"
              "        echo \"$rc\" >\"$s.tmp\" && mv -f \"$s.tmp\" \"$s\"\n"
              "        break\n"
              "    fi\n"
              "done\n"
              "exit \"$rc\"\n",
              qwork, qout, j->id);
    free(qprog), free(qwork), free(qout);
    return b.s;
}

static void cancel(const char *jobid)
{
    char *argv[] = {"scancel", (char *)jobid, NULL};
    char *text = NULL;
    if (dm_slurm_capture(argv, &text) >= 0) free(text);
}

/* A value that goes on an #SBATCH line as it is. */
static int plain_value(const char *opt, const char *v)
{
    if (v && (!*v || strpbrk(v, " \t\n\r'\"\\$`%")))
        return dm_set_error("pipeline --slurm: --%s '%s': a SLURM value holds no spaces, quotes "
                            "or '%%'",
                            opt, v);
    return 0;
}

int dm_slurm_submit(const char *plan_path, const char *work, const char *out, const char *program,
                    const char *name, const char *finish_cmd, const dm_slurm_opts *o, FILE *to)
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return dm_set_error("the current folder: %s", strerror(errno));
    if (plain_value("partition", o->partition) || plain_value("time", o->time) ||
        plain_value("cpu-partition", o->cpu_partition) ||
        plain_value("cpus-per-task", o->cpus_per_task) || plain_value("account", o->account) ||
        plain_value("gpus-per-task", o->gpus_per_task))
        return -1;
    if (strpbrk(work, " \t\n\r%") || strpbrk(cwd, " \t\n\r%"))
        return dm_set_error("pipeline --slurm: '%s' holds a space or '%%', which SLURM's "
                            "#SBATCH lines cannot take: choose another --out or folder",
                            strpbrk(work, " \t\n\r%") ? work : cwd);
    if (o->parts < 1 || o->parts > DM_SLURM_MAX_TASKS)
        return dm_set_error("pipeline --slurm: --parts must lie in 1..%d", DM_SLURM_MAX_TASKS);
    jobs js = {0};
    int rc = plan_jobs(plan_path, work, program, o->parts, &js);
    if (rc == 0 && js.n == 0)
        rc = dm_set_error("pipeline --slurm: the plan holds no dimoc command");
    if (rc == 0) {
        job *j = add_job(&js, "finish", "", 0, 0);
        sbuf b = {0};
        sb_printf(&b, "DIMOC_PIPELINE_PHASE=finish DIMOC_FINISH_DEPTH=0 %s\n", finish_cmd);
        j->body = b.s;
    }
    char *dir = dm_path_join(work, "slurm");
    sbuf stages = {0};
    for (int i = 0; rc == 0 && i < js.n; i++)
        sb_printf(&stages, "%s\t%d\n", js.v[i].id, js.v[i].ntasks);
    if (rc == 0 && !o->dry_run) {
        char *logs = dm_path_join(dir, "logs"), *state = dm_path_join(dir, "state");
        char *st = dm_path_join(dir, "stages.tsv");
        rc = dm_mkdir_p(logs);
        if (rc == 0) rc = dm_mkdir_p(state);
        if (rc == 0) rc = dm_write_file_atomic(st, stages.s, stages.n);
        free(logs), free(state), free(st);
    }
    char prev[32] = "", **ids = calloc(js.n + 1, sizeof *ids);
    for (int i = 0; rc == 0 && i < js.n; i++) {
        job *j = &js.v[i];
        char *text = job_script(j, name, work, out, program, o, cwd);
        char file[160];
        snprintf(file, sizeof file, "%s.sbatch", j->id);
        char *path = dm_path_join(dir, file);
        if (o->dry_run) {
            fprintf(to, "%s==> %s <==\n%s", i ? "\n" : "", path, text);
        } else {
            char jobid[32], tasks[32];
            snprintf(tasks, sizeof tasks, j->ntasks ? "1-%d" : "-", j->ntasks);
            rc = dm_write_file_atomic(path, text, strlen(text));
            if (rc == 0) rc = dm_slurm_sbatch(path, *prev ? prev : NULL, NULL, jobid);
            if (rc == 0) {
                ids[i] = strdup(jobid);
                snprintf(prev, sizeof prev, "%s", jobid);
                rc = dm_slurm_record(work, j->id, jobid, tasks);
                fprintf(to, "%s: job %s%s\n", j->id, jobid, j->ntasks ? " (array)" : "");
            }
        }
        free(path);
        free(text);
    }
    if (rc != 0 && !o->dry_run) /* a half-submitted chain would wait forever: none of it */
        for (int i = 0; i < js.n; i++)
            if (ids[i]) cancel(ids[i]);
    for (int i = 0; i < js.n; i++) free(ids[i]), free(js.v[i].body);
    free(ids);
    free(js.v);
    free(stages.s);
    free(dir);
    return rc;
}
