/* A study's units as one SLURM job array (see study_slurm.h). */
#define _GNU_SOURCE
#include "study/study_slurm.h"
#include "cluster/slurm.h"
#include "cluster/slurm_jobs.h"
#include "study/bids_layout.h"
#include "study/study_run.h"
#include "util/cmdline.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct text {
    char *s;
    size_t n;
    FILE *f;
} text;

static char *quoted(const char *s)
{
    char *v[1] = {(char *)s};
    return dm_shell_quote_argv(1, v);
}

/* A value that goes on an #SBATCH line as it is. */
static int plain(const char *opt, const char *v)
{
    if (v && (!*v || strpbrk(v, " \t\n\r'\"\\$`%")))
        return dm_set_error("bids --slurm: --%s '%s': a SLURM value holds no spaces, quotes or "
                            "'%%'",
                            opt, v);
    return 0;
}

/* The start of a task's `dimoc bids` line, up to its labels. */
static void line_start(FILE *f, const char *qprog, const char *qb, const char *qo, const char *qp,
                       char *const *opts, int nopts)
{
    fprintf(f, "    %s bids %s %s participant --pipeline %s", qprog, qb, qo, qp);
    for (int k = 0; k < nopts; k++) fprintf(f, " %s", opts[k]);
    fprintf(f, " --participant-label");
}

/* The command lines of one task: ONE `dimoc bids` for every subject whose every unit to do is
 * in the batch (--participant-label A B ...: the program and the GPU started once for them), and
 * one for each other subject, with its sessions of the batch (--session-label). */
static void task_lines(FILE *f, const dm_study_slurm_options *o, const char *bids, const char *out,
                       dm_bids_unit **units, int n, int all_sessions_of[])
{
    char *qprog = quoted(o->program), *qb = quoted(bids), *qo = quoted(out);
    char *qp = quoted(o->pipeline);
    char **opts = calloc((size_t)o->nargs + 1, sizeof *opts);
    for (int i = 0; i < o->nargs; i++) opts[i] = quoted(o->args[i]);
    int *done = calloc((size_t)n + 1, sizeof *done), nwhole = 0;
    for (int i = 0; i < n; i++) {
        if (done[i] || (units[i]->session && !all_sessions_of[i])) continue;
        if (nwhole++ == 0) line_start(f, qprog, qb, qo, qp, opts, o->nargs);
        fprintf(f, " %s", units[i]->subject);
        for (int k = i; k < n; k++)
            if (!strcmp(units[k]->subject, units[i]->subject)) done[k] = 1;
    }
    if (nwhole) fprintf(f, " || rc=$?\n");
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        line_start(f, qprog, qb, qo, qp, opts, o->nargs);
        fprintf(f, " %s --session-label", units[i]->subject);
        for (int k = i; k < n; k++)
            if (!strcmp(units[k]->subject, units[i]->subject)) {
                fprintf(f, " %s", units[k]->session);
                done[k] = 1;
            }
        fprintf(f, " || rc=$?\n");
    }
    free(done);
    for (int i = 0; i < o->nargs; i++) free(opts[i]);
    free(opts), free(qprog), free(qb), free(qo), free(qp);
}

int dm_study_slurm_submit(const char *bids_dir, const char *output_dir,
                          const dm_study_slurm_options *o, FILE *to)
{
    if (plain("partition", o->partition) || plain("time", o->time) ||
        plain("account", o->account) || plain("gpus-per-task", o->gpus_per_task) ||
        plain("cpus-per-task", o->cpus_per_task))
        return -1;
    char *out = dm_slurm_abs_path(output_dir), *bids = dm_slurm_abs_path(bids_dir);
    char cwd[PATH_MAX];
    if (!out || !bids || !getcwd(cwd, sizeof cwd)) {
        free(out), free(bids);
        return dm_set_error("the current folder: %s", strerror(errno));
    }
    if (strpbrk(out, " \t\n\r%"))
        return dm_set_error("bids --slurm: '%s' holds a space or '%%', which SLURM's #SBATCH "
                            "lines cannot take",
                            out);
    dm_bids_layout L;
    if (dm_bids_discover(bids, o->subjects, o->nsubjects, o->sessions, o->nsessions, out, &L) !=
        0) {
        free(out), free(bids);
        return -1;
    }
    /* The units still to do: the tasks' batches in order. */
    dm_bids_unit **todo = calloc((size_t)L.nunits + 1, sizeof *todo);
    int *whole = calloc((size_t)L.nunits + 1, sizeof *whole), n = 0;
    for (int i = 0; i < L.nunits; i++)
        if (!dm_study_unit_complete(out, &L.units[i])) todo[n++] = &L.units[i];
    int rc = 0;
    if (n == 0) {
        fprintf(to, "bids --slurm: every unit is complete in %s; nothing to submit\n", out);
        goto done;
    }
    int ntasks = (n + o->batch - 1) / o->batch;
    if (ntasks > DM_SLURM_MAX_TASKS * 100) {
        rc = dm_set_error("bids --slurm: %d tasks; give a larger --slurm-batch", ntasks);
        goto done;
    }
    char *slurm_dir = dm_path_join(out, ".slurm"), *logs = dm_path_join(slurm_dir, "logs");
    char *script = dm_path_join(slurm_dir, "participant.sbatch");
    text t = {0};
    t.f = open_memstream(&t.s, &t.n);
    fprintf(t.f, "#!/bin/bash\n#SBATCH --job-name=dimoc-bids-%s\n", o->pipeline);
    fprintf(t.f, "#SBATCH --output=%s/participant_%%a.log\n", logs);
    fprintf(t.f, "#SBATCH --chdir=%s\n#SBATCH --array=1-%d\n", cwd, ntasks);
    if (o->partition) fprintf(t.f, "#SBATCH --partition=%s\n", o->partition);
    if (o->time) fprintf(t.f, "#SBATCH --time=%s\n", o->time);
    if (o->account) fprintf(t.f, "#SBATCH --account=%s\n", o->account);
    if (o->cpus_per_task) fprintf(t.f, "#SBATCH --cpus-per-task=%s\n", o->cpus_per_task);
    if (o->gpus_per_task) fprintf(t.f, "#SBATCH --gpus-per-task=%s\n", o->gpus_per_task);
    fprintf(t.f, "# `dimoc bids --slurm`, written by dimoc: %d unit%s, %d per task.\n", n,
            n == 1 ? "" : "s", o->batch);
    fprintf(t.f, "unset DIMOC_PIPELINE_PHASE DIMOC_PLAN DIMOC_PIPELINE_DEPTH DIMOC_FINISH_DEPTH\n");
    if (o->setup) {
        char *abs = dm_slurm_abs_path(o->setup), *qs = quoted(abs);
        fprintf(t.f, ". %s || exit $?\n", qs);
        free(abs), free(qs);
    }
    fprintf(t.f, "rc=0\ncase ${SLURM_ARRAY_TASK_ID:-1} in\n");
    for (int k = 0; k < ntasks; k++) {
        int first = k * o->batch, count = n - first < o->batch ? n - first : o->batch;
        /* Subjects whose every unit to do is in this batch are named without sessions. */
        for (int i = first; i < first + count; i++) {
            int inside = 1;
            for (int m = 0; m < n && inside; m++)
                if (!strcmp(todo[m]->subject, todo[i]->subject) &&
                    (m < first || m >= first + count))
                    inside = 0;
            /* ... and without any complete session, which a plain label would not skip
             * anyway: a complete unit is skipped by the task. */
            whole[i] = inside;
        }
        fprintf(t.f, "%d)\n", k + 1);
        task_lines(t.f, o, bids, out, todo + first, count, whole + first);
        fprintf(t.f, "    ;;\n");
    }
    fprintf(t.f, "esac\nexit $rc\n");
    fclose(t.f);
    if (o->dry_run) {
        fprintf(to, "==> %s <==\n%s", script, t.s);
    } else {
        char jobid[32];
        rc = dm_mkdir_p(logs);
        if (rc == 0) rc = dm_write_file_atomic(script, t.s, t.n);
        if (rc == 0) rc = dm_slurm_sbatch(script, NULL, NULL, jobid);
        if (rc == 0)
            fprintf(to,
                    "bids --slurm: job %s, %d task%s for %d unit%s; logs in %s; run this command "
                    "again without --slurm, or with it, to resume what failed\n",
                    jobid, ntasks, ntasks == 1 ? "" : "s", n, n == 1 ? "" : "s", logs);
    }
    free(t.s), free(slurm_dir), free(logs), free(script);
done:
    free(todo), free(whole);
    dm_bids_layout_free(&L);
    free(out), free(bids);
    return rc;
}
