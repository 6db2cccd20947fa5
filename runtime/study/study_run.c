/* The participant level of `dimoc bids`: the units in order, each run's stages in this
 * process, the read-ahead and the writing beside the fits, all-or-nothing unit folders (see
 * study_run.h). */
#define _GNU_SOURCE
#include "study/study_run.h"
#include "io/bigalloc.h"
#include "fit/fit_inputs.h"
#include "io/volume.h"
#include "mask/dwi_mask.h"
#include "study/bids_layout.h"
#include "study/study_outputs.h"
#include "study/study_plan.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One run of a unit, as its stages leave it for the writing of its outputs. */
typedef struct run_job {
    dm_bids_run *r;
    char *pdir;      /* the pipeline's --out: TMP/dwi/dimoc/P */
    char *plan_path; /* TMP/.P.plan.tsv */
    char *mask;      /* the mask used */
    char *mask_source, *sources[4];
    char *final_dir, *model, *tracks;
    double started, read_s, stages_s, plan_s, finish_s, fit_s;
    dm_study_plan plan; /* its stages, kept for their timings (read once written) */
    void *writes;       /* its last command's writes still under way (take_writes) */
    pthread_t preload;
    int preloading;
} run_job;

/* The plan of the study's first run, reused for the others with their own paths put in place
 * of its paths (pipelines/lib/flags.bash: a script's plan depends on its words only): one bash
 * plan phase for the whole study instead of one per run.  The second run that reuses it is
 * also planned by bash and the two compared: a difference plans every run with bash. */
enum { TEMPLATE_NONE = 0, TEMPLATE_UNCHECKED, TEMPLATE_CHECKED, TEMPLATE_PATHS = 5 };
typedef struct plan_template {
    int state;
    dm_study_plan plan;
    char *paths[TEMPLATE_PATHS]; /* its run's dwi, mask, bval, bvec and pipeline folder */
    const void *made_for;        /* its run (no check against itself) */
} plan_template;

typedef struct unit_job {
    const dm_study_options *o;
    plan_template *plans;
    const char *out; /* OUTPUT_DIR, absolute */
    dm_bids_unit *u;
    char *name;        /* "sub-01 ses-1" */
    char *tmp;         /* OUTPUT_DIR/.sub-01_ses-1.tmp.PID */
    char *final;       /* OUTPUT_DIR/sub-01[/ses-1] */
    char *subject_dir; /* OUTPUT_DIR/sub-01 */
    run_job *runs;
    int failed;
    char *error; /* the failure's line (malloc'd) */
} unit_job;

/* The console: the process's stdout and stderr as they were, while fds 1 and 2 go to a run's
 * log during its stages. */
typedef struct console {
    FILE *out, *err;
    int saved_out, saved_err;
} console;

static char *path_of(const char *dir, const char *fmt, const char *a, const char *b)
{
    char *name = NULL;
    if (asprintf(&name, fmt, a, b) < 0) return NULL;
    char *p = dm_path_join(dir, name);
    free(name);
    return p;
}

/* `path` relative to `root` when inside it. */
static char *relative_to(const char *root, const char *path)
{
    size_t n = strlen(root);
    if (!strncmp(path, root, n) && path[n] == '/') return strdup(path + n + 1);
    return strdup(path);
}

/* fds 1 and 2 to the log file (appended), or back to the console (log NULL). */
static void redirect(console *c, const char *log)
{
    fflush(stdout);
    fflush(stderr);
    if (!log) {
        dup2(c->saved_out, 1);
        dup2(c->saved_err, 2);
        return;
    }
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) return; /* the output stays on the console */
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
}

/* The last "error: " line of a log (malloc'd), NULL when none. */
static char *last_error_line(const char *log)
{
    size_t len;
    char *text = dm_read_file(log, &len);
    if (!text) return NULL;
    char *found = NULL, *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *e = strstr(line, "error: ");
        if (e) found = e + 7;
    }
    char *r = found ? strdup(found) : NULL;
    free(text);
    return r;
}

/* Runs bash SCRIPT WORDS.. with the phase's environment; its exit status. */
static int run_script(const dm_study_options *o, const char *phase, int depth, const char *plan,
                      const char *script, char *const *words, int nwords, const char *log)
{
    char **argv = calloc((size_t)nwords + 16, sizeof *argv);
    char e_phase[64], e_depth[64], e_pdepth[64], *e_plan = NULL, *e_prog = NULL, *e_dimoc = NULL;
    int n = 0;
    snprintf(e_phase, sizeof e_phase, "DIMOC_PIPELINE_PHASE=%s", phase);
    snprintf(e_depth, sizeof e_depth, "DIMOC_FINISH_DEPTH=%d", depth);
    snprintf(e_pdepth, sizeof e_pdepth, "DIMOC_PIPELINE_DEPTH=%d", depth);
    if (asprintf(&e_prog, "DIMOC_PROGRAM=%s", o->program) < 0) e_prog = NULL;
    if (asprintf(&e_dimoc, "DIMOC=%s", o->program) < 0) e_dimoc = NULL;
    argv[n++] = "env";
    if (depth == 0) { /* a pipeline named on our command line: no depth inherited */
        argv[n++] = "-u";
        argv[n++] = "DIMOC_PIPELINE_DEPTH";
    }
    argv[n++] = e_phase;
    argv[n++] = "DIMOC_BIDS=1"; /* flags.bash: cascades whole, no pictures of its own */
    argv[n++] = e_prog;
    argv[n++] = e_dimoc;
    if (plan && asprintf(&e_plan, "DIMOC_PLAN=%s", plan) >= 0) argv[n++] = e_plan;
    argv[n++] = e_depth;
    if (depth > 0) argv[n++] = e_pdepth;
    argv[n++] = "bash";
    argv[n++] = (char *)script;
    for (int i = 0; i < nwords; i++) argv[n++] = words[i];
    argv[n] = NULL;
    int status = dm_run_child(argv, log);
    free(e_plan), free(e_prog), free(e_dimoc);
    free(argv);
    return status;
}

/* The script's words: the five inputs, then the user's options. */
static char **script_words(const dm_study_options *o, const run_job *j, int *n)
{
    char **w = calloc((size_t)o->nargs + 12, sizeof *w);
    int k = 0;
    w[k++] = "--data", w[k++] = j->r->dwi;
    w[k++] = "--mask", w[k++] = j->mask;
    w[k++] = "--bvals", w[k++] = j->r->bval;
    w[k++] = "--bvecs", w[k++] = j->r->bvec;
    w[k++] = "--out", w[k++] = j->pdir;
    for (int i = 0; i < o->nargs; i++) w[k++] = o->args[i];
    *n = k;
    return w;
}

/* The threads of the work beside the fits, as the cores over these: the next run's read-ahead
 * and the last unit's derivatives.  Each has the whole of the current run's fits to finish in,
 * and a team on every core slowed the fits' own host work (the starts made from the signal,
 * the batches' copies) by a quarter.  On an H200's 16 cores, 2 and 4 threads left the grid
 * stage's fits 5% faster inside a 24-subject study than 4 and 16 (medians 0.272-0.284 s
 * against 0.293-0.295 s); the study's wall time moved within its runs' spread
 * (docs/performance.md).  Since the read-ahead also gathers the next run's signals (0.14 s
 * more on 2 threads: longer than a run), it has 4, and both run at a lower priority
 * (util/interrupt.h), the fits' threads first. */
enum { PRELOAD_SHARE = 4, WRITER_SHARE = 4 };

static void share_of_cores(int share)
{
    const int threads = omp_get_max_threads() / share;
    omp_set_num_threads(threads > 1 ? threads : 1);
}

/* The next run's DWI read while this one fits, and with the dataset's mask the signals of its
 * voxels gathered for its fit (fit/fit_inputs.h). */
static void *preload_main(void *arg)
{
    const dm_bids_run *r = arg;
    dm_thread_background();
    share_of_cores(PRELOAD_SHARE);
    if (r->mask)
        dm_fit_signal_ahead(r->dwi, r->mask);
    else
        dm_volume_preload(r->dwi);
    return NULL;
}

/* The n-th --out of a command's words (a cascade `fit ... --then --out ...` has one per
 * stage), NULL past the last. */
static const char *nth_out(const dm_study_stage *s, int n)
{
    for (int k = 1; k + 1 < s->argc; k++)
        if (!strcmp(s->argv[k], "--out") && n-- == 0) return s->argv[k + 1];
    return NULL;
}

/* The final stage of a plan: the last fit or csd (the maps; a cascade's last stage), and a
 * tractogram. */
static void final_stage(const dm_study_plan *p, run_job *j)
{
    for (int i = 0; i < p->n; i++) {
        const dm_study_stage *s = &p->stage[i];
        if (s->finish || !*s->out) continue;
        if (!strcmp(s->cmd, "fit") && s->argc > 1) {
            const char *last = s->out;
            for (int k = 0; nth_out(s, k); k++) last = nth_out(s, k);
            free(j->final_dir), free(j->model);
            j->final_dir = strdup(last);
            j->model = strdup(s->argv[1]);
        } else if (!strcmp(s->cmd, "csd")) {
            free(j->final_dir), free(j->model);
            j->final_dir = strdup(s->out);
            j->model = strdup("csd");
        } else if (!strcmp(s->cmd, "track")) {
            static const char *const names[] = {"tracks.tck", "tracks.trx", "tracks.trk", NULL};
            for (int k = 0; names[k]; k++) {
                char *t = dm_path_join(s->out, names[k]);
                if (access(t, F_OK) == 0) {
                    free(j->tracks);
                    j->tracks = t;
                    break;
                }
                free(t);
            }
        }
    }
}

/* The seconds the plan's stages spent fitting (their provenance.json's timings_seconds.fit:
 * the engines' work, without their loads, compiles and writes), the measure a unit's whole time
 * is held against. */
static double engine_seconds(const dm_study_plan *p)
{
    double sum = 0;
    for (int i = 0; i < p->n; i++) {
        const dm_study_stage *s = &p->stage[i];
        if (s->finish || !*s->out) continue;
        for (int k = 0; k == 0 || nth_out(s, k); k++) { /* every stage of a cascade */
            char *path = dm_path_join(k == 0 ? s->out : nth_out(s, k), "provenance.json");
            json_t *root = path ? json_load_file(path, 0, NULL) : NULL;
            json_t *fit = json_object_get(json_object_get(root, "timings_seconds"), "fit");
            if (json_is_number(fit)) sum += json_number_value(fit);
            json_decref(root);
            free(path);
        }
    }
    return sum;
}

/* Sets the unit's failure from the current error (once). */
static int fail(unit_job *U, const char *what)
{
    if (!U->failed) {
        U->failed = 1;
        if (asprintf(&U->error, "%s: %s", U->name, what ? what : dm_last_error()) < 0)
            U->error = NULL;
    }
    return -1;
}

/* The mask a run uses: the dataset's, or the one dimoc makes into the unit's folder. */
static void run_mask_path(unit_job *U, run_job *j)
{
    if (j->mask) return;
    dm_bids_run *r = j->r;
    if (r->mask) {
        j->mask = strdup(r->mask);
        j->mask_source = relative_to(U->o->bids_dir, r->mask);
    } else {
        j->mask = path_of(U->tmp, "dwi/%s_space-dwi_desc-brain_mask.nii.gz", r->prefix, "");
    }
}

/* The paths a plan depends on, in the order of plan_template.paths. */
static void run_paths(const run_job *j, const char *paths[TEMPLATE_PATHS])
{
    paths[0] = j->r->dwi, paths[1] = j->mask, paths[2] = j->r->bval, paths[3] = j->r->bvec;
    paths[4] = j->pdir;
}

/* A file name's ending from its first dot (".nii.gz"): a template serves runs whose DWI and
 * mask end alike only (a script may choose by the ending). */
static const char *ending_of(const char *path)
{
    const char *base = strrchr(path, '/');
    const char *dot = strchr(base ? base + 1 : path, '.');
    return dot ? dot : "";
}

/* `word` with every occurrence of from[k] replaced by to[k] (the longest match first). */
static char *substitute(const char *word, const char *const from[TEMPLATE_PATHS],
                        const char *const to[TEMPLATE_PATHS])
{
    size_t cap = strlen(word) + 1, n = 0;
    for (int k = 0; k < TEMPLATE_PATHS; k++) cap += 4 * (strlen(to[k]) + 1);
    char *r = malloc(cap);
    for (const char *s = word; *s;) {
        int best = -1;
        size_t best_len = 0;
        for (int k = 0; k < TEMPLATE_PATHS; k++) {
            size_t len = strlen(from[k]);
            if (len > best_len && !strncmp(s, from[k], len)) best = k, best_len = len;
        }
        if (best < 0) {
            r[n++] = *s++;
            continue;
        }
        size_t len = strlen(to[best]);
        if (n + len + strlen(s) + 1 > cap) r = realloc(r, cap = 2 * (n + len + strlen(s) + 1));
        memcpy(r + n, to[best], len);
        n += len;
        s += best_len;
    }
    r[n] = 0;
    return r;
}

/* The template's plan with a run's paths in place of its own. */
static void plan_substitute(const plan_template *t, const char *const to[TEMPLATE_PATHS],
                            dm_study_plan *p)
{
    const char *from[TEMPLATE_PATHS];
    for (int k = 0; k < TEMPLATE_PATHS; k++) from[k] = t->paths[k];
    p->n = t->plan.n;
    p->stage = calloc((size_t)p->n + 1, sizeof *p->stage);
    for (int i = 0; i < p->n; i++) {
        const dm_study_stage *a = &t->plan.stage[i];
        dm_study_stage *b = &p->stage[i];
        b->finish = a->finish, b->depth = a->depth, b->argc = a->argc;
        b->name = strdup(a->name);
        b->cmd = substitute(a->cmd, from, to);
        b->out = substitute(a->out, from, to);
        b->argv = calloc((size_t)a->argc + 1, sizeof *b->argv);
        for (int k = 0; k < a->argc; k++) b->argv[k] = substitute(a->argv[k], from, to);
    }
}

static int plans_equal(const dm_study_plan *a, const dm_study_plan *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        const dm_study_stage *x = &a->stage[i], *y = &b->stage[i];
        if (x->finish != y->finish || x->depth != y->depth || x->argc != y->argc ||
            strcmp(x->name, y->name) || strcmp(x->cmd, y->cmd) || strcmp(x->out, y->out))
            return 0;
        for (int k = 0; k < x->argc; k++)
            if (strcmp(x->argv[k], y->argv[k])) return 0;
    }
    return 1;
}

static void template_free(plan_template *t)
{
    dm_study_plan_free(&t->plan);
    for (int k = 0; k < TEMPLATE_PATHS; k++) free(t->paths[k]), t->paths[k] = NULL;
    t->state = TEMPLATE_NONE;
}

/* The last line of a script's output that says what is wrong (its "error: " line, else its
 * last line), malloc'd; NULL when it wrote nothing. */
static char *failure_line(const char *log)
{
    char *line = last_error_line(log);
    if (line) return line;
    size_t len;
    char *text = dm_read_file(log, &len);
    if (!text) return NULL;
    char *found = NULL, *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (*l) found = l;
    char *r = found ? strdup(found) : NULL;
    free(text);
    return r;
}

/* The script's plan phase for run j into *plan, its output on fds 1 and 2 (the run's log,
 * `log`).  0, or -1 with the error: the script's own line. */
static int plan_with_bash(unit_job *U, run_job *j, const char *log, dm_study_plan *plan)
{
    const dm_study_options *o = U->o;
    int nw;
    char **words = script_words(o, j, &nw);
    unlink(j->plan_path);
    int status = run_script(o, "plan", 0, j->plan_path, o->script, words, nw, NULL);
    free(words);
    if (status != 0) {
        char *line = failure_line(log);
        dm_set_error("%s", line ? line : "the pipeline's plan phase failed");
        free(line);
        return -1;
    }
    int rc = dm_study_plan_read(j->plan_path, plan);
    unlink(j->plan_path);
    return rc;
}

/* The folders the commands write into (the --out of each, and of each cascade stage): the
 * plan phase makes them; a plan reused has not. */
static int make_out_parents(const dm_study_plan *p)
{
    for (int i = 0; i < p->n; i++) {
        const dm_study_stage *s = &p->stage[i];
        for (int k = 0; !s->finish && nth_out(s, k); k++) {
            char *dir = strdup(nth_out(s, k)), *slash = strrchr(dir, '/');
            if (slash && slash != dir) *slash = 0;
            int rc = slash ? dm_mkdir_p(dir) : 0;
            free(dir);
            if (rc != 0) return -1;
        }
    }
    return 0;
}

/* Run j's plan: the template's with its paths, else the script's plan phase (the template made
 * from it when there is none yet).  0, or -1 with the error. */
static int plan_run(unit_job *U, run_job *j, const char *log, dm_study_plan *plan)
{
    plan_template *t = U->plans;
    const char *paths[TEMPLATE_PATHS];
    run_paths(j, paths);
    int usable = t->state != TEMPLATE_NONE &&
                 !strcmp(ending_of(paths[0]), ending_of(t->paths[0])) &&
                 !strcmp(ending_of(paths[1]), ending_of(t->paths[1]));
    if (!usable) return plan_with_bash(U, j, log, plan);
    plan_substitute(t, paths, plan);
    if (t->state == TEMPLATE_UNCHECKED && t->made_for != j) {
        dm_study_plan own;
        if (plan_with_bash(U, j, log, &own) != 0) {
            dm_study_plan_free(plan);
            return -1;
        }
        if (plans_equal(plan, &own)) {
            t->state = TEMPLATE_CHECKED;
            dm_study_plan_free(&own);
        } else { /* the plan depends on more than the paths: every run planned by bash */
            template_free(t);
            dm_study_plan_free(plan);
            *plan = own;
        }
    }
    return make_out_parents(plan);
}

/* Before any work: the first run's plan, made by the script (a bad option of the pipeline's
 * fails it the same for every run: the whole study is refused in one line), kept as the
 * template of the others.  0, or -1 with dm_last_error(). */
static int plan_first(unit_job *U, run_job *j)
{
    run_mask_path(U, j);
    char *log = NULL;
    if (asprintf(&log, "%s/.plan.%ld.log", U->out, (long)getpid()) < 0) return -1;
    char *saved_plan = j->plan_path;
    if (asprintf(&j->plan_path, "%s/.plan.%ld.tsv", U->out, (long)getpid()) < 0) {
        j->plan_path = saved_plan;
        free(log);
        return -1;
    }
    /* The plan phase's output to the scratch log: run_script's child inherits fds 1, 2. */
    const dm_study_options *o = U->o;
    int nw;
    char **words = script_words(o, j, &nw);
    int status = run_script(o, "plan", 0, j->plan_path, o->script, words, nw, log);
    free(words);
    int rc = 0;
    plan_template *t = U->plans;
    if (status != 0) {
        char *line = failure_line(log);
        if (line) /* the script's line names it ("pipeline bedpostx: ...", "dki.sh: ...") */
            rc = dm_set_error("bids: %s", line);
        else
            rc = dm_set_error("bids: pipeline %s: its plan phase failed", o->pipeline);
        free(line);
    } else if ((rc = dm_study_plan_read(j->plan_path, &t->plan)) == 0) {
        const char *paths[TEMPLATE_PATHS];
        run_paths(j, paths);
        for (int k = 0; k < TEMPLATE_PATHS; k++) t->paths[k] = strdup(paths[k]);
        t->state = TEMPLATE_UNCHECKED;
        t->made_for = j;
    }
    unlink(j->plan_path), unlink(log);
    free(j->plan_path), free(log);
    j->plan_path = saved_plan;
    dm_remove_tree(U->tmp); /* what the plan phase made there (the stages' folders) */
    return rc;
}

/* Waits for the writes run j's last command left under way; 0, or -1 with the unit failed. */
static int join_run_writes(unit_job *U, run_job *j)
{
    if (!j->writes) return 0;
    int rc = U->o->join_writes(j->writes);
    j->writes = NULL;
    return rc == 0 ? 0 : fail(U, NULL);
}

/* Waits for every run's writes under way (the unit failed or stopped: its folder goes next). */
static void unit_join_writes(unit_job *U)
{
    for (int i = 0; U->runs && i < U->u->nruns; i++) join_run_writes(U, &U->runs[i]);
}

/* One run's mask and stages, with fds 1 and 2 on its log.  0, or -1 with the unit failed. */
static int run_stages(unit_job *U, run_job *j, const char *log)
{
    const dm_study_options *o = U->o;
    dm_bids_run *r = j->r;
    run_mask_path(U, j);
    if (!r->mask) {
        dm_dwi_mask_report rep;
        if (dm_mask_run(r->dwi, r->bval, r->bvec, NULL, j->mask, DM_MASK_CLEAN_SCALE, o->threads, NULL,
                        &rep) != 0)
            return fail(U, NULL);
        if (rep.voxels == 0) {
            dm_set_error("%s: dimoc mask found no brain in it (an empty mask)", r->dwi);
            return fail(U, NULL);
        }
    }
    j->read_s = dm_study_now() - j->started;
    double t_fit = dm_study_now();

    dm_study_plan plan = {0};
    int rc = 0;
    if (o->script) {
        rc = plan_run(U, j, log, &plan);
        if (rc != 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s: %s", r->dwi, dm_last_error());
            return fail(U, msg);
        }
    } else {
        dm_study_inputs in = {r->dwi, r->bval, r->bvec, j->mask, j->pdir};
        rc = dm_study_plan_builtin(o->pipeline, &in, o->args, o->nargs, &plan);
        if (rc != 0) return fail(U, NULL);
    }
    j->plan_s = dm_study_now() - t_fit;
    /* The last command that reads the DWI takes the read-ahead's volume itself (no copy). */
    int last_read = -1;
    for (int i = 0; i < plan.n; i++)
        for (int k = 1; !plan.stage[i].finish && k < plan.stage[i].argc; k++)
            if (!strcmp(plan.stage[i].argv[k], r->dwi)) last_read = i;
    for (int i = 0; rc == 0 && i < plan.n; i++) {
        const dm_study_stage *s = &plan.stage[i];
        if (dm_stop_requested()) {
            rc = dm_stop_error();
            fail(U, NULL);
            break;
        }
        if (s->finish) { /* a nested pipeline's closing work: a later stage may read it */
            int status = run_script(o, "finish", s->depth, NULL, s->cmd, s->argv, s->argc, NULL);
            if (status != 0) {
                char *line = last_error_line(log);
                char msg[512];
                snprintf(msg, sizeof msg, "%s: %s", s->cmd,
                         line ? line : "its closing work failed");
                free(line);
                rc = fail(U, msg);
            }
            continue;
        }
        if (i == last_read) dm_volume_preload_hand_over(r->dwi);
        /* The earlier commands' maps whole before a later command may read them. */
        if (o->take_writes && o->join_writes(o->take_writes()) != 0) {
            rc = fail(U, NULL);
            break;
        }
        /* The command may change its argv (getopt-style parsers do): a copy. */
        char **argv = calloc((size_t)s->argc + 1, sizeof *argv);
        memcpy(argv, s->argv, (size_t)s->argc * sizeof *argv);
        dm_set_error("%s: failed", s->cmd);
        int status = o->exec(s->argc, argv, o->exec_ctx);
        free(argv);
        if (status != 0) rc = fail(U, NULL);
    }
    if (rc == 0 && dm_stop_requested()) rc = dm_stop_error(), fail(U, NULL);
    if (rc == 0) {
        final_stage(&plan, j);
        if (!j->final_dir) rc = fail(U, "the pipeline ran no fit or csd stage: no maps to name");
    }
    j->stages_s = dm_study_now() - t_fit;
    j->plan = plan;
    if (o->take_writes) {
        j->writes = o->take_writes();
        if (rc != 0) join_run_writes(U, j);
    }
    return rc;
}

/* The pipeline's closing work (its finish phase: links, its own files) for run j, on the writer
 * thread: its output appended to the run's log.  0, or -1 with the unit failed (the log kept
 * in OUTPUT_DIR/logs/). */
static int finish_run(unit_job *U, run_job *j)
{
    const dm_study_options *o = U->o;
    if (!o->script) return 0;
    if (dm_stop_requested()) return dm_stop_error(), fail(U, NULL);
    double t = dm_study_now();
    char *log = dm_path_join(j->pdir, "dimoc.log");
    char *tmp_log = path_of(U->tmp, ".%s.finish.log", j->r->prefix, "");
    int nw;
    char **words = script_words(o, j, &nw);
    int status = run_script(o, "finish", 0, NULL, o->script, words, nw, tmp_log);
    free(words);
    size_t len;
    char *text = dm_read_file(tmp_log, &len);
    FILE *f = text ? fopen(log, "a") : NULL;
    if (f) fwrite(text, 1, len, f), fclose(f);
    free(text);
    unlink(tmp_log);
    j->finish_s = dm_study_now() - t;
    int rc = 0;
    if (status != 0) {
        char *line = last_error_line(log);
        char msg[512];
        snprintf(msg, sizeof msg, "%s: %s", o->script,
                 line ? line : "the pipeline's closing work failed");
        free(line);
        rc = fail(U, msg);
        char *logs = dm_path_join(U->out, "logs");
        char *kept = path_of(logs, "%s.log", j->r->prefix, "");
        if (dm_mkdir_p(logs) == 0) rename(log, kept);
        free(logs), free(kept);
    }
    free(log), free(tmp_log);
    return rc;
}

/* Moves `from` to `to`, replacing a folder already there (exchanged, then removed). */
static int put_in_place(const char *from, const char *to)
{
    if (rename(from, to) == 0) return 0;
    if (errno != EEXIST && errno != ENOTEMPTY)
        return dm_set_error("cannot rename %s to %s: %s", from, to, strerror(errno));
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) == 0) {
        dm_remove_tree(from);
        return 0;
    }
    dm_remove_tree(to);
    if (rename(from, to) != 0)
        return dm_set_error("cannot rename %s to %s: %s", from, to, strerror(errno));
    return 0;
}

/* The unit's folder in place (a session's pictures into its subject's figures/ first), with
 * signals held off.  0, or -1 with dm_last_error(). */
static int commit_unit(unit_job *U)
{
    sigset_t saved;
    dm_interrupt_block(&saved);
    int rc = 0;
    if (U->u->session) {
        char *figs = dm_path_join(U->tmp, "figures"), *to = dm_path_join(U->subject_dir, "figures");
        rc = dm_mkdir_p(to);
        DIR *d = rc == 0 ? opendir(figs) : NULL;
        for (struct dirent *e; d && rc == 0 && (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.') continue;
            char *a = dm_path_join(figs, e->d_name), *b = dm_path_join(to, e->d_name);
            if (rename(a, b) != 0)
                rc = dm_set_error("cannot move %s to %s: %s", a, b, strerror(errno));
            free(a), free(b);
        }
        if (d) closedir(d);
        if (rc == 0) rmdir(figs);
        free(figs), free(to);
    }
    if (rc == 0) rc = put_in_place(U->tmp, U->final);
    dm_interrupt_unblock(&saved);
    return rc;
}

/* The unit's outputs after its stages: every run's derivatives, then the commit.  On the
 * writer thread, beside the next unit's fits. */
static void *write_unit(void *arg)
{
    unit_job *U = arg;
    int rc = 0;
    const int threads = omp_get_max_threads(); /* restored: the caller's thread, without one */
    share_of_cores(WRITER_SHARE);
    for (int i = 0; rc == 0 && i < U->u->nruns; i++) {
        run_job *j = &U->runs[i];
        rc = join_run_writes(U, j);
        if (rc != 0) break;
        j->fit_s = engine_seconds(&j->plan);
        rc = finish_run(U, j);
        if (rc != 0) break;
        char *dwi_dir = dm_path_join(U->tmp, "dwi"), *figs = dm_path_join(U->tmp, "figures");
        dm_study_run_out ro = {.subject = U->u->subject,
                               .session = U->u->session,
                               .prefix = j->r->prefix,
                               .pipeline = U->o->pipeline,
                               .model = j->model,
                               .final_dir = j->final_dir,
                               .tracks = j->tracks,
                               .dwi_dir = dwi_dir,
                               .figures_dir = figs,
                               .mask = j->mask,
                               .mask_source = j->mask_source,
                               .seconds_read = j->read_s,
                               .seconds_stages = j->stages_s,
                               .seconds_plan = j->plan_s,
                               .seconds_finish = j->finish_s,
                               .seconds_fit = j->fit_s,
                               .started = j->started};
        for (int k = 0; k < 4; k++) ro.sources[k] = j->sources[k];
        rc = dm_study_write_run(&ro);
        free(dwi_dir), free(figs);
    }
    if (rc == 0) rc = commit_unit(U);
    if (rc != 0) {
        fail(U, NULL);
        unit_join_writes(U);
        dm_remove_tree(U->tmp);
    }
    omp_set_num_threads(threads);
    return NULL;
}

/* write_unit on a thread of its own, beside the next unit's fits. */
static void *write_unit_main(void *arg)
{
    dm_thread_background();
    return write_unit(arg);
}

static void unit_free(unit_job *U)
{
    for (int i = 0; U->runs && i < U->u->nruns; i++) {
        run_job *j = &U->runs[i];
        join_run_writes(U, j); /* normally joined already */
        dm_study_plan_free(&j->plan);
        free(j->pdir), free(j->plan_path), free(j->mask), free(j->mask_source);
        for (int k = 0; k < 4; k++) free(j->sources[k]);
        free(j->final_dir), free(j->model), free(j->tracks);
    }
    free(U->runs), free(U->name), free(U->tmp), free(U->final), free(U->subject_dir);
    free(U->error);
    free(U);
}

int dm_study_unit_complete(const char *output_dir, const dm_bids_unit *u)
{
    struct stat st;
    char *rel = dm_bids_unit_rel(u), *dir = dm_path_join(output_dir, rel);
    int ok = u->nruns > 0 && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    for (int i = 0; ok && i < u->nruns; i++) {
        char *qc = path_of(dir, "dwi/%s_qc.json", u->runs[i].prefix, "");
        ok = access(qc, F_OK) == 0;
        free(qc);
    }
    free(rel), free(dir);
    return ok;
}

/* The temporary folders in OUTPUT_DIR when the run starts (".NAME.tmp.PID"), listed once: a
 * study of thousands of units would otherwise read the whole folder again for each. */
typedef struct leftovers {
    char **name;
    int n;
} leftovers;

static void leftovers_list(const char *output_dir, leftovers *l)
{
    memset(l, 0, sizeof *l);
    DIR *d = opendir(output_dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] != '.' || !strstr(e->d_name, ".tmp.")) continue;
        l->name = realloc(l->name, (size_t)(l->n + 1) * sizeof *l->name);
        l->name[l->n++] = strdup(e->d_name);
    }
    closedir(d);
}

static void leftovers_free(leftovers *l)
{
    for (int i = 0; i < l->n; i++) free(l->name[i]);
    free(l->name);
}

/* Removes the unit's OUTPUT_DIR/.NAME.tmp.PID folders (of the list) whose process is gone. */
static void sweep(const char *output_dir, const leftovers *l, const char *base)
{
    size_t n = strlen(base);
    for (int i = 0; i < l->n; i++) {
        const char *s = l->name[i];
        if (s[0] != '.' || strncmp(s + 1, base, n) || strncmp(s + 1 + n, ".tmp.", 5)) continue;
        char *end;
        long pid = strtol(s + 6 + n, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *p = dm_path_join(output_dir, s);
        dm_remove_tree(p);
        free(p);
    }
}

static unit_job *unit_new(const dm_study_options *o, plan_template *plans, const char *out,
                          dm_bids_unit *u)
{
    unit_job *U = calloc(1, sizeof *U);
    U->o = o;
    U->plans = plans;
    U->out = out;
    U->u = u;
    U->name = dm_bids_unit_name(u);
    char *rel = dm_bids_unit_rel(u), base[256];
    snprintf(base, sizeof base, u->session ? "sub-%s_ses-%s" : "sub-%s", u->subject, u->session);
    U->final = dm_path_join(out, rel);
    U->subject_dir = path_of(out, "sub-%s", u->subject, "");
    char tmpname[320];
    snprintf(tmpname, sizeof tmpname, ".%s.tmp.%ld", base, (long)getpid());
    U->tmp = dm_path_join(out, tmpname);
    free(rel);
    U->runs = calloc((size_t)u->nruns + 1, sizeof *U->runs);
    for (int i = 0; i < u->nruns; i++) {
        run_job *j = &U->runs[i];
        dm_bids_run *r = &u->runs[i];
        j->r = r;
        j->pdir = path_of(U->tmp, "dwi/dimoc/%s", r->prefix, "");
        j->plan_path = path_of(U->tmp, ".%s.plan.tsv", r->prefix, "");
    }
    return U;
}

/* The runs of the units to do, in order: the read-ahead takes the next one. */
typedef struct run_ref {
    unit_job *U;
    int i;
} run_ref;

int dm_study_participant(const dm_study_options *o)
{
    /* OUTPUT_DIR: made, writable; then the dataset, then the description. */
    if (dm_mkdir_p(o->output_dir) != 0) return -1;
    if (access(o->output_dir, W_OK | X_OK) != 0)
        return dm_set_error("%s: not writable: %s", o->output_dir, strerror(errno));
    char *out = realpath(o->output_dir, NULL);
    if (!out) return dm_set_error("%s: %s", o->output_dir, strerror(errno));
    dm_bids_layout L;
    if (dm_bids_discover(o->bids_dir, o->subjects, o->nsubjects, o->sessions, o->nsessions, out,
                         &L) != 0) {
        free(out);
        return -1;
    }
    if (!strcmp(out, L.root) || !strncmp(L.root, out, strlen(out))) {
        dm_set_error("%s: the output folder holds the dataset %s; give a folder beside it or "
                     "under its derivatives/",
                     o->output_dir, o->bids_dir);
        dm_bids_layout_free(&L);
        free(out);
        return -1;
    }
    dm_study_options opts = *o;
    opts.bids_dir = L.root;
    plan_template plans = {0};
    dm_big_keep(1); /* each fit's gathered signal in the buffer of the one before */

    console con = {0};
    fflush(stdout);
    fflush(stderr);
    con.saved_out = fcntl(1, F_DUPFD_CLOEXEC, 3);
    con.saved_err = fcntl(2, F_DUPFD_CLOEXEC, 3);
    con.out = fdopen(fcntl(1, F_DUPFD_CLOEXEC, 3), "w");
    con.err = fdopen(fcntl(2, F_DUPFD_CLOEXEC, 3), "w");
    setvbuf(con.out, NULL, _IOLBF, 0);
    setvbuf(con.err, NULL, _IOLBF, 0);

    unit_job **units = calloc((size_t)L.nunits + 1, sizeof *units);
    run_ref *order = calloc(1, sizeof *order);
    int nunits = 0, norder = 0, skipped = 0, failed = 0, done = 0;
    char **failures = calloc((size_t)L.nunits + 1, sizeof *failures);
    /* The units' first lines wait for the checks below: a refused study prints one line. */
    char *early_out = NULL, *early_err = NULL;
    size_t early_out_len = 0, early_err_len = 0;
    FILE *eout = open_memstream(&early_out, &early_out_len);
    FILE *eerr = open_memstream(&early_err, &early_err_len);
    for (int k = 0; k < L.nunits; k++) {
        unit_job *U = unit_new(&opts, &plans, out, &L.units[k]);
        /* Faults found by reading the dataset: one line each, no work. */
        int faults = U->u->error != NULL;
        if (U->u->error) fprintf(eerr, "%s: %s\n", U->name, U->u->error);
        for (int i = 0; i < U->u->nruns; i++)
            if (U->u->runs[i].error) {
                fprintf(eerr, "%s: %s\n", U->name, U->u->runs[i].error);
                faults++;
            }
        if (faults) {
            fail(U, U->u->error ? U->u->error : NULL);
            if (!U->u->error)
                for (int i = 0; i < U->u->nruns && !U->u->error; i++)
                    if (U->u->runs[i].error) {
                        free(U->error);
                        U->error = NULL;
                        if (asprintf(&U->error, "%s: %s", U->name, U->u->runs[i].error) < 0)
                            U->error = NULL;
                        break;
                    }
            failures[failed++] = U->error ? strdup(U->error) : NULL;
            unit_free(U);
            continue;
        }
        if (dm_study_unit_complete(out, U->u)) {
            fprintf(eout, "%s: complete, skipped\n", U->name);
            skipped++;
            unit_free(U);
            continue;
        }
        units[nunits++] = U;
        order = realloc(order, (size_t)(norder + U->u->nruns + 1) * sizeof *order);
        for (int i = 0; i < U->u->nruns; i++) order[norder++] = (run_ref){U, i};
    }

    /* The pipeline's plan, once before any work: a bad option refuses the study here; then
     * the output folder's description (one of another pipeline refuses it too). */
    if ((nunits > 0 && opts.script && plan_first(units[0], &units[0]->runs[0]) != 0) ||
        dm_study_description(out, o->pipeline, o->version, o->command_line, L.root) != 0) {
        fclose(eout), fclose(eerr);
        free(early_out), free(early_err);
        for (int k = 0; k < nunits; k++) unit_free(units[k]);
        for (int i = 0; i < failed; i++) free(failures[i]);
        free(failures), free(units), free(order);
        fclose(con.out), fclose(con.err);
        close(con.saved_out), close(con.saved_err);
        dm_bids_layout_free(&L);
        free(out);
        dm_big_keep(0);
        return -1;
    }

    fclose(eout), fclose(eerr);
    fputs(early_out, con.out), fputs(early_err, con.err);
    free(early_out), free(early_err);

    leftovers left;
    leftovers_list(out, &left);
    unit_job *writing = NULL; /* the unit on the writer thread */
    pthread_t writer;
    int writer_threaded = 0;
    int at = 0; /* the run's index in `order` */
    for (int k = 0; k < nunits && !dm_stop_requested(); k++) {
        unit_job *U = units[k];
        double t0 = dm_study_now();
        char base[256];
        snprintf(base, sizeof base, U->u->session ? "sub-%s_ses-%s" : "sub-%s", U->u->subject,
                 U->u->session);
        sweep(out, &left, base);
        dm_remove_tree(U->tmp);
        int rc = dm_mkdir_p(U->tmp);
        char *figs = dm_path_join(U->tmp, "figures");
        if (rc == 0) rc = dm_mkdir_p(figs);
        free(figs);
        if (rc != 0) fail(U, NULL);
        for (int i = 0; rc == 0 && i < U->u->nruns; i++, at++) {
            run_job *j = &U->runs[i];
            j->started = dm_study_now();
            /* The next run's DWI read meanwhile. */
            if (at + 1 < norder) {
                run_job *next = &order[at + 1].U->runs[order[at + 1].i];
                next->preloading =
                    pthread_create(&next->preload, NULL, preload_main, next->r) == 0;
            }
            if (!j->preloading) dm_volume_preload(j->r->dwi);
            j->sources[0] = relative_to(L.root, j->r->dwi);
            j->sources[1] = relative_to(L.root, j->r->bval);
            j->sources[2] = relative_to(L.root, j->r->bvec);
            rc = dm_mkdir_p(j->pdir);
            if (rc != 0) {
                fail(U, NULL);
                break;
            }
            char *log = dm_path_join(j->pdir, "dimoc.log");
            redirect(&con, log);
            rc = run_stages(U, j, log);
            redirect(&con, NULL);
            if (j->preloading) pthread_join(j->preload, NULL), j->preloading = 0;
            if (j->mask_source) {
                j->sources[3] = strdup(j->mask_source);
            } else { /* dimoc's mask: its place in OUTPUT_DIR once the unit is in */
                char *rel = dm_bids_unit_rel(U->u);
                if (asprintf(&j->sources[3], "%s/dwi/%s_space-dwi_desc-brain_mask.nii.gz", rel,
                             j->r->prefix) < 0)
                    j->sources[3] = NULL;
                free(rel);
            }
            if (rc != 0) { /* keep the failed run's log */
                char *logs = dm_path_join(out, "logs");
                char *kept = path_of(logs, "%s.log", j->r->prefix, "");
                if (dm_mkdir_p(logs) == 0) rename(log, kept);
                free(logs), free(kept);
            }
            free(log);
        }
        /* Runs preloaded for this unit but never reached. */
        for (int i = 0; i < U->u->nruns; i++)
            if (U->runs[i].preloading)
                pthread_join(U->runs[i].preload, NULL), U->runs[i].preloading = 0;
        /* The unit before this one is written: report it. */
        if (writing) {
            if (writer_threaded) pthread_join(writer, NULL);
            if (writing->failed) {
                fprintf(con.err, "%s\n", writing->error);
                failures[failed++] = strdup(writing->error);
            } else {
                fprintf(con.out, "%s: done\n", writing->name);
                done++;
            }
            unit_free(writing);
            writing = NULL;
        }
        if (U->failed || dm_stop_requested()) {
            unit_join_writes(U);
            dm_remove_tree(U->tmp);
            if (!dm_stop_requested()) {
                fprintf(con.err, "%s\n", U->error);
                failures[failed++] = strdup(U->error);
            }
            unit_free(U);
            units[k] = NULL;
            continue;
        }
        fprintf(con.out, "%s: %d run%s fitted in %.1f s\n", U->name, U->u->nruns,
                U->u->nruns == 1 ? "" : "s", dm_study_now() - t0);
        writing = U;
        units[k] = NULL;
        writer_threaded = pthread_create(&writer, NULL, write_unit_main, U) == 0;
        if (!writer_threaded) write_unit(U);
    }
    if (writing) {
        if (writer_threaded) pthread_join(writer, NULL);
        if (writing->failed) {
            if (!dm_stop_requested()) {
                fprintf(con.err, "%s\n", writing->error);
                failures[failed++] = strdup(writing->error);
            }
        } else {
            fprintf(con.out, "%s: done\n", writing->name);
            done++;
        }
        unit_free(writing);
    }
    for (int k = 0; k < nunits; k++)
        if (units[k]) {
            unit_join_writes(units[k]);
            dm_remove_tree(units[k]->tmp);
            unit_free(units[k]);
        }
    dm_fit_signal_ahead_clear();
    dm_volume_preload_clear();
    dm_big_keep(0);
    template_free(&plans);
    leftovers_free(&left);
    int rc = 0;
    if (dm_stop_requested()) {
        rc = dm_stop_error();
    } else {
        fprintf(con.out, "participant level: %d unit%s done, %d complete already, %d failed\n",
                done, done == 1 ? "" : "s", skipped, failed);
        for (int i = 0; i < failed; i++)
            if (failures[i]) fprintf(con.err, "failed: %s\n", failures[i]);
        rc = failed ? 1 : 0;
    }
    for (int i = 0; i < failed; i++) free(failures[i]);
    free(failures), free(units), free(order);
    fclose(con.out), fclose(con.err);
    close(con.saved_out), close(con.saved_err);
    dm_bids_layout_free(&L);
    free(out);
    return rc;
}
