/* The engine: a planned fit executed on the CPU or the GPUs, its outputs written (through the
 * command's writer, fit_files.c) or kept in memory (the C API). */
#include "fit/cpu_backend.h"
#include "util/error.h"
#include "util/linalg.h"
#include "fit/fit.h"
#include "fit/fit_inputs.h"
#include "fit/fit_outputs.h"
#include "fit/fit_dictionary.h"
#include "util/fsutil.h"
#include "fit/fit_gpu.h"
#include "fit/fit_starts.h"
#include "gpu/gpu_device.h"
#include "io/bigalloc.h"
#include "util/progress.h"
#include "util/interrupt.h"
#include "util/outdir.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void dm_fit_request_defaults(dm_fit_request *r)
{
    memset(r, 0, sizeof *r);
    r->methods = "lm";
    r->noise = "gaussian";
    r->precision = "double";
    r->device = "auto";
    r->burnin = 1000;
    r->jumps = 1250;
    r->sample_every = 25;
    r->update_every = 40;
    r->lm_iterations = 200;
    r->seed = 42;
    r->threads = 0;
}

/* The host fitter, loaded (compiled at first use) on a thread of its own: a GPU fit needs it
 * only for its outputs, so its host compile runs while NVRTC compiles the GPU's fitter and the
 * GPU fits, instead of before them. */
typedef struct host_fitter_job {
    const dm_model_info *mi;
    dm_model_info own; /* mi's copy: the stages' planning changes the problem's meanwhile */
    int real_size;
    dm_cpu_fitter fitter;
    int rc;
    char error[2048]; /* dm_last_error() is per thread */
    pthread_t thread;
} host_fitter_job;

static void *host_fitter_load(void *arg)
{
    host_fitter_job *job = arg;
    job->rc = dm_cpu_fitter_load(job->mi, job->real_size, &job->fitter);
    if (job->rc != 0) snprintf(job->error, sizeof job->error, "%s", dm_last_error());
    return NULL;
}

static int host_fitter_start(host_fitter_job *job)
{
    if (pthread_create(&job->thread, NULL, host_fitter_load, job) != 0)
        return dm_set_error("cannot start a thread to load the host fitter");
    return 0;
}

/* Waits for the job; its fitter in *fitter.  0, or -1 with the job's error. */
static int host_fitter_join(host_fitter_job *job, dm_cpu_fitter *fitter)
{
    pthread_join(job->thread, NULL);
    *fitter = job->fitter;
    return job->rc == 0 ? 0 : dm_set_error("%s", job->error);
}

/* The GPU session (driver, GPUs, their contexts), opened on a thread of its own while the
 * inputs are read: making the contexts took 0.1-0.2 s of the fit's time. */
typedef struct gpu_open_job {
    const char *gpus;
    dm_fit_gpu_session *session;
    int rc;
    char error[2048];
    pthread_t thread;
} gpu_open_job;

static void *gpu_open_main(void *arg)
{
    gpu_open_job *job = arg;
    job->rc = dm_fit_gpu_open(job->gpus, job->session);
    if (job->rc != 0) snprintf(job->error, sizeof job->error, "%s", dm_last_error());
    return NULL;
}

static void count_work(const dm_problem *p, const dm_fit_results *res, dm_fit_timing *t)
{
    int nfree = 0;
    for (int k = 0; k < p->mi.nparams; k++) nfree += !(p->cfg.fixed_mask >> k & 1);
    double iters = 0, fitted = 0;
    for (size_t i = 0; i < p->nfit; i++) {
        int st = p->status[p->index[i]];
        if (!DM_STATUS_HAS_ESTIMATE(st)) continue;
        fitted++;
        iters += res->stats[i * DM_NSTATS + DM_STAT_ITERATIONS];
    }
    double M = p->M, evals = 0, grads = 0;
    if (p->cfg.methods & DM_METHOD_GRID) {
        double points = 1;
        for (int k = 0; k < p->mi.nparams; k++)
            if (p->cfg.grid_count[k] > 0) points *= p->cfg.grid_count[k];
        evals += fitted * points * M;
    }
    if (p->cfg.methods & DM_METHOD_LM) {
        evals += iters * M;
        grads += iters * M; /* an upper bound: the Jacobian is redone only after a success */
    }
    if (p->cfg.methods & DM_METHOD_MCMC)
        evals += fitted * (double)(p->cfg.burnin + p->cfg.jumps) *
                 (nfree + (p->cfg.noise == DM_NOISE_RICIAN)) * M;
    t->signal_evals = evals;
    t->gradient_evals = grads;
    /* Each sweep over the M measurements starts with one prepare of the voxel-invariant part. */
    t->gflop = (evals * (p->mi.flops_signal + (double)p->mi.flops_prepare / M) +
                grads * (p->mi.flops_gradient + (double)p->mi.flops_gradient_prepare / M)) *
               1e-9;
}

/* "199870 fitted, 130 skipped" for the progress report's last line. */
static const char *summary(const dm_problem *p, char *note, size_t size)
{
    size_t fitted = 0, skipped = 0;
    for (size_t i = 0; i < p->nfit; i++) {
        int st = p->status[p->index[i]];
        if (st == DM_STATUS_FITTED || st == DM_STATUS_NOT_CONVERGED)
            fitted++;
        else
            skipped++;
    }
    snprintf(note, size, "%zu fitted, %zu skipped or failed", fitted, skipped);
    return note;
}

/* Large arrays no longer needed, freed on a thread of their own: giving a gigabyte of touched
 * pages back to the system takes about 0.08 s, which the process's exit would otherwise spend
 * after the last map is written. */
typedef struct late_free {
    void *ptr;
    pthread_t thread;
    int started;
} late_free;

/* What the thread gives back (io/bigalloc.h's dm_big_release: freed, or kept for the next
 * subject of a study). */
typedef struct late_buffer {
    void *ptr;
    size_t bytes;
} late_buffer;

static void *late_free_main(void *arg)
{
    late_buffer *b = arg; /* its own copy: a late_free may be moved (copied) while this runs */
    dm_big_release(b->ptr, b->bytes);
    free(b);
    return NULL;
}

static void late_free_start(late_free *f, void *ptr, size_t bytes)
{
    f->ptr = ptr;
    late_buffer *b = malloc(sizeof *b);
    if (b) *b = (late_buffer){ptr, bytes};
    f->started = b && pthread_create(&f->thread, NULL, late_free_main, b) == 0;
    if (!f->started) {
        free(b);
        dm_big_release(ptr, bytes);
    }
}

static void late_free_join(late_free *f)
{
    if (f->started) pthread_join(f->thread, NULL);
    f->started = 0;
}

/* A later stage's GPU program, compiled on a thread while the stages before it compile and
 * fit, into the program cache where the stage finds it (with a cold cache NODDI-Watson's three
 * programs took 3.05, 2.12 and 2.67 s one after another on an H200's host).  Its stage takes
 * the stage program's model made here rather than making it again. */
typedef struct ahead_job {
    dm_fit_config cfg; /* the stage's settings as check_later_stages planned them */
    int planned;
    dm_model_info staged; /* the stage program's model (has_staged), for its stage */
    int has_staged;
    unsigned held;
    dm_model_info model;     /* the model's info (a copy: its strings are the problem's) */
    const dm_model_info *mi; /* the compiled one: &staged or &model */
    const dm_cuda *cu;
    int arch, real_size, lanes;
    pthread_t thread;
    int started;
} ahead_job;

/* What the stages of a cascade share: the precision, the host fitter (loaded once, on a thread
 * of its own while the GPU works) and the GPUs (opened at the first stage that fits there). */
typedef struct fit_machine {
    int use_gpu, real_size;
    const char *device; /* --device, for the dictionary's note */
    dm_cpu_fitter fitter;
    host_fitter_job host;
    int host_threaded;     /* the host fitter loads on its thread (a GPU fit) */
    int host_pending;      /* the host fitter's thread not joined yet */
    double fitter_seconds; /* the first stage's wait for a host fitter loaded at once */
    dm_fit_gpu_session gpu;
    int gpu_open;
    gpu_open_job opener;
    int opener_pending; /* the session's thread not joined yet */
    pthread_t closer;
    int closer_pending; /* the session being released on a thread */
    dm_fit_gpu_options gpu_options;
    late_free signal; /* the voxels' signal, after the last stage's fit */
    const dm_fit_io *io; /* files: the command's reader and writer */
    dm_fit_memory *mem;  /* or a run in memory (the C API) */
    dm_fit_watch *watch; /* its progress and cancel, or NULL */
    ahead_job *ahead;    /* per stage of a cascade (index 0 unused), or NULL */
} fit_machine;

/* The GPU session, from its thread or opened now.  0, or -1 with the error. */
static int machine_gpu(fit_machine *m)
{
    if (m->opener_pending) {
        m->opener_pending = 0;
        pthread_join(m->opener.thread, NULL);
        m->gpu_open = m->opener.rc == 0;
        if (!m->gpu_open) return dm_set_error("%s", m->opener.error);
    }
    if (!m->gpu_open) m->gpu_open = dm_fit_gpu_open(m->gpu_options.gpus, &m->gpu) == 0;
    return m->gpu_open ? 0 : -1;
}

static void *gpu_close_main(void *session)
{
    dm_fit_gpu_close(session);
    return NULL;
}

/* After the last stage's fit: the GPUs released on a thread while its maps are written. */
static void machine_release_gpu(fit_machine *m)
{
    if (!m->gpu_open) return;
    m->gpu_open = 0;
    m->closer_pending = pthread_create(&m->closer, NULL, gpu_close_main, &m->gpu) == 0;
    if (!m->closer_pending) dm_fit_gpu_close(&m->gpu);
}

/* Waits for the host fitter if its thread still runs; the seconds waited in *waited. */
static int machine_host_fitter(fit_machine *m, double *waited)
{
    double t = dm_now_seconds();
    int rc = 0;
    if (m->host_pending) {
        m->host_pending = 0;
        rc = host_fitter_join(&m->host, &m->fitter);
    }
    *waited = dm_now_seconds() - t;
    return rc;
}

/* The estimates as stage `r` wrote them (0 where a voxel has none, rounded to its --out-type):
 * exactly what `--init-from r->out` reads, so a cascade's next stage matches a separate
 * command's. */
static void written_estimates(const dm_fit_request *r, const dm_problem *p,
                              const dm_fit_results *res, double *out)
{
    int P = p->mi.nparams;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p->nfit; i++) {
        int has = DM_STATUS_HAS_ESTIMATE(p->status[p->index[i]]);
        for (int k = 0; k < P; k++) {
            double v = has ? res->params[i * P + k] : 0;
            out[i * P + k] = r->out_float64 ? v : (double)(float)v;
        }
    }
}

/* A stage's outputs, provenance and part manifest written into its temporary folder, which is
 * then put in place: on the stage's thread for the last stage, else on a thread of its own
 * while the next stage fits.  snap is the stage's problem as its writers read it (the mask,
 * the data's header, the per-voxel inputs, the configuration, the status). */
typedef struct stage_writer {
    const dm_fit_request *r;
    dm_problem snap;
    int own_status; /* snap.status is the writer's copy */
    dm_cpu_fitter fitter; /* a copy: the run closes it after every writer is joined */
    dm_fit_request req;   /* the stage's request, its strings owned (the writer may outlive the
                             caller's, under dm_fit_defer_final_writes) */
    char *owned[24];
    int nowned;
    dm_fit_results res;
    size_t params_bytes, stats_bytes; /* res's buffers (io/bigalloc.h's, given back so) */
    dm_fit_timing timing;
    double t_start;
    char device[512];
    int real_size, gpu_declined;
    dm_fit_stage_info info;
    dm_outdir od;
    const dm_fit_io *io; /* its writer of maps */
    dm_fit_memory *mem;  /* or the maps go there */
    int rc, dir_done;
    int last; /* the cascade's last stage, left to be written after it (defer_final) */
    struct stage_writer *before; /* the previous stage's writer: joined first, on this thread */
    char error[2048]; /* dm_last_error() is per thread */
    pthread_t thread;
} stage_writer;

/* The maps and the provenance of a run in memory. */
static void stage_writer_keep(stage_writer *w)
{
    dm_fit_memory *mem = w->mem;
    double t_write = dm_now_seconds();
    dm_fit_watch_stage(mem->watch, "outputs", 1);
    int rc = dm_fit_make_maps(w->r, &w->snap, &w->fitter, &w->res, &mem->maps);
    w->timing.write = dm_now_seconds() - t_write;
    w->timing.total = dm_now_seconds() - w->t_start;
    if (rc == 0)
        rc = dm_fit_provenance_text(w->r, &w->snap, w->device, w->real_size, &w->timing, &w->info,
                                    &mem->provenance);
    if (rc == 0) dm_fit_watch_done(mem->watch);
    w->dir_done = 1;
    if (rc != 0) snprintf(w->error, sizeof w->error, "%s", dm_last_error());
    w->rc = rc;
}

static int stage_writer_join(stage_writer *w);

static void stage_writer_write(stage_writer *w)
{
    /* One write at a time, in stage order: the previous stage's is done (or failed) first, on
     * this writer's thread, so that the next stage's fit never waits for it. */
    if (w->before) {
        int brc = stage_writer_join(w->before);
        w->before = NULL;
        if (brc != 0) {
            snprintf(w->error, sizeof w->error, "%s", dm_last_error());
            w->rc = brc;
            return; /* its folder is removed by stage_writer_finish */
        }
    }
    if (w->mem) {
        stage_writer_keep(w);
        return;
    }
    const dm_fit_request *r = w->r;
    dm_problem *p = &w->snap;
    double t_write = dm_now_seconds();
    int rc = w->io->write(r, w->od.path, p, &w->fitter, &w->res);
    if (rc == 0 && w->gpu_declined)
        dm_warn("--method dictionary ran on the CPU (its later methods too): --device gpu was "
                "not used");
    w->timing.write = dm_now_seconds() - t_write;
    w->timing.total = dm_now_seconds() - w->t_start;
    if (rc == 0)
        rc = dm_fit_write_provenance(r, w->od.path, p, w->device, w->real_size, &w->timing,
                                     &w->info);
    if (rc == 0 && r->part.n > 0) {
        static const dm_part_rule rules[] = {{"*.nii.gz", DM_MERGE_VOXELS}};
        char *command = dm_part_command();
        dm_part_info pinfo = {.command = command,
                              .voxel_first = p->own_first,
                              .voxel_end = p->own_end,
                              .nvox = p->nvox};
        rc = dm_part_write(w->od.path, &r->part, &pinfo, rules, 1);
        free(command);
    }
    if (rc == 0)
        rc = dm_outdir_commit(&w->od);
    else
        dm_outdir_abort(&w->od);
    w->dir_done = 1;
    if (rc != 0) snprintf(w->error, sizeof w->error, "%s", dm_last_error());
    w->rc = rc;
}

static void *stage_writer_main(void *arg)
{
    stage_writer *w = arg;
    dm_thread_background(); /* the next stage's planning and its GPU's feeding go first */
    if (w->r->threads > 0) omp_set_num_threads((int)w->r->threads); /* a per-thread setting */
    stage_writer_write(w);
    return NULL;
}

/* Removes the folder of a stage that failed before its write, and frees the writer; its rc
 * (its error in dm_last_error()). */
static int stage_writer_finish(stage_writer *w)
{
    if (w->before) { /* never started: the stage before it is still to be joined */
        int brc = stage_writer_join(w->before);
        w->before = NULL;
        if (brc != 0 && w->rc == 0) {
            w->rc = brc;
            snprintf(w->error, sizeof w->error, "%s", dm_last_error());
        }
    }
    if (!w->dir_done) dm_outdir_abort(&w->od); /* never written: the stage failed first */
    int rc = w->rc;
    if (rc != 0 && w->error[0]) dm_set_error("%s", w->error);
    dm_big_release(w->res.params, w->params_bytes);
    dm_big_release(w->res.stats, w->stats_bytes);
    free(w->res.samples);
    if (w->own_status) free(w->snap.status);
    for (int i = 0; i < w->nowned; i++) free(w->owned[i]);
    free(w);
    return rc;
}

/* Waits for a writer on its thread; its rc, its error in dm_last_error(). */
static int stage_writer_join(stage_writer *w)
{
    pthread_join(w->thread, NULL);
    return stage_writer_finish(w);
}

/* Deferred last writes (dm_fit_defer_final_writes): a cascade's last stage written on its
 * thread after the cascade returns.  The job owns what the writer reads: a copy of the stage's
 * request (its strings too), the problem and the host fitter. */
struct dm_fit_deferred {
    stage_writer *w;
    late_free frees[2]; /* the image as read and the voxels' signal, freed meanwhile */
    dm_problem p;
    dm_cpu_fitter fitter;
    pthread_t thread;
    struct dm_fit_deferred *next;
};

static int defer_final;
static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dm_fit_deferred *deferred_list; /* started since the last take, newest first */

void dm_fit_defer_final_writes(int on)
{
    defer_final = on;
}

static const char *own_string(stage_writer *w, const char *s)
{
    if (!s || w->nowned == (int)(sizeof w->owned / sizeof w->owned[0])) return s;
    return w->owned[w->nowned++] = strdup(s);
}

/* The writer's own copy of its stage's request and of the previous stage's --out. */
static void own_request(stage_writer *w, const dm_fit_request *r)
{
    w->req = *r;
    const char **fields[] = {&w->req.model,   &w->req.data,      &w->req.mask,    &w->req.bvals,
                             &w->req.bvecs,   &w->req.out,       &w->req.grad,    &w->req.methods,
                             &w->req.grid,    &w->req.fixed,     &w->req.dictionary_penalty,
                             &w->req.init,    &w->req.init_from, &w->req.voxel,   &w->req.measure,
                             &w->req.scheme,  &w->req.noise,     &w->req.precision,
                             &w->req.device,  &w->req.gpus,      &w->req.command_line};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        *fields[i] = own_string(w, *fields[i]);
    w->info.previous = own_string(w, w->info.previous);
    w->r = &w->req;
}

static void *deferred_main(void *arg)
{
    struct dm_fit_deferred *d = arg;
    stage_writer_main(d->w);
    return NULL;
}

/* Starts the last stage's write w on a thread of its own, taking over *p, *fitter and the late
 * frees (left empty): they must outlive every writer of the cascade.  0, or -1 (nothing taken:
 * the caller writes as usual). */
static int deferred_start(stage_writer *w, dm_problem *p, dm_cpu_fitter *fitter, late_free *image,
                          late_free *signal)
{
    struct dm_fit_deferred *d = calloc(1, sizeof *d);
    if (!d) return -1;
    d->w = w;
    if (pthread_create(&d->thread, NULL, deferred_main, d) != 0) {
        free(d);
        return -1;
    }
    d->p = *p;
    d->fitter = *fitter;
    memset(p, 0, sizeof *p);
    memset(fitter, 0, sizeof *fitter);
    d->frees[0] = *image, d->frees[1] = *signal; /* joined with the write (large frees take time) */
    memset(image, 0, sizeof *image);
    memset(signal, 0, sizeof *signal);
    pthread_mutex_lock(&deferred_lock);
    d->next = deferred_list;
    deferred_list = d;
    pthread_mutex_unlock(&deferred_lock);
    return 0;
}

dm_fit_deferred *dm_fit_deferred_take(void)
{
    pthread_mutex_lock(&deferred_lock);
    dm_fit_deferred *d = deferred_list;
    deferred_list = NULL;
    pthread_mutex_unlock(&deferred_lock);
    return d;
}

int dm_fit_deferred_join(dm_fit_deferred *d)
{
    int rc = 0;
    char error[2048] = "";
    while (d) {
        dm_fit_deferred *next = d->next;
        pthread_join(d->thread, NULL);
        if (stage_writer_finish(d->w) != 0 && rc == 0) {
            rc = -1;
            snprintf(error, sizeof error, "%s", dm_last_error());
        }
        dm_cpu_fitter_close(&d->fitter);
        late_free_join(&d->frees[0]);
        late_free_join(&d->frees[1]);
        dm_problem_free(&d->p);
        free(d);
        d = next;
    }
    if (rc != 0) dm_set_error("%s", error);
    return rc;
}

/* The parameters a stage holds at their starts at every point it tries (dm_fit_config's
 * held_mask): the fixed ones and, in a grid search alone, those it does not grid; never those
 * that multiple LM starts turn.  None for the dictionary fit, whose atoms the model's own
 * program evaluates. */
static unsigned stage_held(const dm_fit_config *c, int nparams)
{
    if (c->methods & DM_METHOD_DICT) return 0;
    unsigned held = c->fixed_mask & (nparams < 32 ? (1u << nparams) - 1 : ~0u);
    for (int k = 0; k < nparams && c->methods == DM_METHOD_GRID; k++)
        if (c->grid_count[k] <= 0) held |= 1u << k;
    for (int i = 0; i < c->norient && c->starts > 1 && (c->methods & DM_METHOD_LM); i++)
        held &= ~(1u << c->orient_theta[i] | 1u << c->orient_phi[i]);
    return held;
}

static void ahead_join(ahead_job *a)
{
    if (a->started) pthread_join(a->thread, NULL);
    a->started = 0;
}

/* Whether a stage holding `held` (settings c) is to run a stage program of mi: something held,
 * a model that is a file, DIMOC_STAGE_PROGRAMS not 0, and on a GPU a grid search or LM. */
static int stage_program_wanted(const dm_fit_config *c, unsigned held, const dm_model_info *mi,
                                int gpu)
{
    const char *env = getenv("DIMOC_STAGE_PROGRAMS");
    if (!held || (env && !strcmp(env, "0")) || access(mi->file, R_OK) != 0) return 0;
    return !gpu || !(c->methods & ~(DM_METHOD_GRID | DM_METHOD_LM));
}

/* A stage that holds parameters gets its own program, where they are constants
 * (dm_generate_stage): 1 and *staged, or 0 where the model's program serves (nothing held, a
 * model that is not a file, DIMOC_STAGE_PROGRAMS=0), or -1 on an error.  On a GPU a grid
 * search or LM stage takes it where its voxels' inputs are the same
 * (dm_fit_gpu_stage_shared): the rows' base values shared by a block, each row's stage values
 * made as it is read, and a grid search alone as templates/fit/grid.h's sweep.  (Each voxel's
 * own rows, made in and read from device memory at every grid point or LM step, had made
 * NODDI-Watson's fractions stage on an H200 0.25 s against the model program's 0.074 s,
 * docs/performance.md.)  The GPU is open (machine_gpu) before a GPU stage asks.  A later
 * stage of a cascade takes the model made for its compile ahead (ahead_job, joined). */
static int stage_program(dm_problem *p, fit_machine *m, int stage, int gpu, dm_model_info *staged)
{
    ahead_job *a = m->ahead && stage > 0 ? &m->ahead[stage] : NULL;
    unsigned held = stage_held(&p->cfg, p->mi.nparams);
    p->cfg.held_mask = held;
    if (!stage_program_wanted(&p->cfg, held, &p->mi, gpu)) return 0;
    if (a && a->has_staged && a->held == held) {
        *staged = a->staged;
        a->has_staged = 0;
    } else if (dm_model_stage(&p->mi, held, staged) != 0) {
        return -1;
    }
    if (!gpu || dm_fit_gpu_stage_shared(&m->gpu, p, staged, m->real_size) > 0) return 1;
    dm_model_info_free(staged);
    return 0;
}

static void *ahead_main(void *arg)
{
    ahead_job *a = arg;
    dm_fit_gpu_programs progs;
    if (dm_fit_gpu_compile_parts(a->cu, a->mi, a->arch, a->real_size, a->lanes, a->cfg.methods,
                                 a->cfg.noise, 1, &progs) == 0)
        dm_fit_gpu_programs_free(&progs);
    return NULL; /* a failure is reported by the stage, which compiles the program again */
}

/* Once the first stage has the GPU open: each later stage's program, chosen as stage_program
 * will choose it (its settings from check_later_stages, these voxels' inputs), compiled on a
 * thread of its own.  The stage programs' models are made here, on the calling thread (the
 * model compiler is not reentrant). */
static void ahead_begin(fit_machine *m, const dm_problem *p, const dm_model_info *model,
                        int nstages)
{
    for (int s = 1; s < nstages; s++) {
        ahead_job *a = &m->ahead[s];
        if (!a->planned || (a->cfg.methods & DM_METHOD_DICT)) continue; /* the CPU's */
        a->held = stage_held(&a->cfg, model->nparams);
        a->model = *model;
        a->mi = &a->model;
        if (stage_program_wanted(&a->cfg, a->held, model, 1) &&
            dm_model_stage(model, a->held, &a->staged) == 0) {
            a->has_staged = 1;
            dm_problem view = *p; /* these voxels with the stage's settings */
            view.cfg = a->cfg;
            view.mi = *model;
            if (dm_fit_gpu_stage_shared(&m->gpu, &view, &a->staged, m->real_size) > 0)
                a->mi = &a->staged;
        }
        a->cu = m->gpu.cu;
        a->arch = m->gpu.gs.arch;
        a->real_size = m->real_size;
        a->lanes = m->gpu_options.lanes > 0 ? m->gpu_options.lanes
                                             : dm_fit_gpu_auto_lanes(p->M, m->real_size);
        a->started = pthread_create(&a->thread, NULL, ahead_main, a) == 0;
    }
}

static void ahead_free(fit_machine *m, int nstages)
{
    for (int s = 0; m->ahead && s < nstages; s++) {
        ahead_join(&m->ahead[s]);
        if (m->ahead[s].has_staged) dm_model_info_free(&m->ahead[s].staged);
    }
    free(m->ahead);
    m->ahead = NULL;
}

/* Plans, fits and writes stage `stage` of `nstages`; prev: the previous stage's written
 * estimates (NULL for the first), replaced by this stage's when a stage follows.  t_start: when
 * this stage's work began (the first stage's: the run's start, its load included). */
static int run_stage(const dm_fit_request *r, int stage, int nstages, dm_problem *p, fit_machine *m,
                     double *prev, double t_start, stage_writer **pending)
{
    dm_fit_timing timing = {0};
    int methods;
    if (dm_fit_parse_methods(r->methods, &methods) != 0) return -1;
    /* The dictionary fit is CPU only (said after the fit, so that an error stays one line). */
    int use_gpu = m->use_gpu && !(methods & DM_METHOD_DICT);
    int gpu_declined = m->use_gpu && !use_gpu && !strcmp(m->device, "gpu");
    dm_fit_watch_stage(m->watch, "plan", 1);
    if (m->mem ? dm_problem_stage_items(r, NULL, m->mem->starts, m->mem->init_option, p)
               : m->io->stage(r, stage > 0 ? prev : NULL, p))
        return -1;
    if (!use_gpu) dm_fit_starts_fill(p);
    int P = p->mi.nparams;
    size_t M = p->M;
    int mcmc = (p->cfg.methods & DM_METHOD_MCMC) != 0;
    int ns = mcmc ? DM_NSAMPLES(&p->cfg) : 0;
    dm_fit_results res = {0};
    /* (in a study, buffers given back by the writers of earlier stages: pages faulted in) */
    const size_t params_bytes = (p->nfit ? p->nfit : 1) * P * sizeof(double),
                 stats_bytes = (p->nfit ? p->nfit : 1) * DM_NSTATS * sizeof(double);
    res.params = dm_big_reuse(params_bytes);
    res.stats = dm_big_reuse(stats_bytes);
    res.samples = mcmc ? malloc(p->nfit * (size_t)ns * P * sizeof(double)) : NULL;
    res.nsamples = ns;
    if (res.params) dm_big_copy(res.params, p->start, p->nfit * P * sizeof(double));
    if (res.stats) dm_big_clear(res.stats, stats_bytes);
    /* A GPU's starts from the signal are made on a thread of their own from here on, beside
     * the GPU's opening and its program's lookup; each batch copies its voxels' when they are
     * made. */
    if (use_gpu) dm_fit_starts_begin(p);
    /* Everything is written into a temporary folder beside --out, put in place at the end. */
    dm_outdir od = {0};
    if (!m->mem && dm_outdir_begin(&od, r->out, DM_OUTDIR_REPLACE) != 0) {
        dm_big_release(res.params, params_bytes), dm_big_release(res.stats, stats_bytes);
        free(res.samples);
        return -1; /* the starts' thread ends with the problem */
    }
    timing.load = dm_now_seconds() - t_start - (stage == 0 ? m->fitter_seconds : 0);
    /* The fit runs the stage's own program where it has one; the rest of the stage (the
     * counts, the outputs) the model's. */
    /* The GPU is opened first: whether its grid search sweeps depends on its shared memory. */
    double gpu_start = 0;
    int gpu_rc = 0;
    if (use_gpu) {
        const double t_gpu = dm_now_seconds();
        gpu_rc = machine_gpu(m);
        gpu_start = dm_now_seconds() - t_gpu;
    }
    dm_model_info model = p->mi, staged;
    double ahead_wait = 0; /* for this stage's program compiled ahead */
    if (m->ahead && stage > 0 && m->ahead[stage].started) {
        ahead_wait = dm_now_seconds();
        ahead_join(&m->ahead[stage]);
        ahead_wait = dm_now_seconds() - ahead_wait;
    }
    int own_program = gpu_rc == 0 ? stage_program(p, m, stage, use_gpu, &staged) : 0;
    if (own_program > 0) p->mi = staged;
    if (use_gpu && gpu_rc == 0 && stage == 0 && m->ahead) ahead_begin(m, p, &model, nstages);

    char device[512], note[128], label[64] = "fit";
    if (nstages > 1) snprintf(label, sizeof label, "fit stage %d/%d", stage + 1, nstages);
    double t_fit = dm_now_seconds();
    int rc = own_program < 0 ? -1 : 0;
    if (use_gpu) {
        dm_progress *prog = r->quiet ? NULL : dm_progress_start(label, (long)p->nfit, "voxels");
        dm_fit_gpu_report rep = {0};
        if (rc == 0) rc = gpu_rc;
        timing.gpu_start = gpu_start;
        dm_fit_gpu_options go = m->gpu_options;
        go.progress = prog;
        go.watch = m->watch;
        dm_fit_watch_stage(m->watch, "fit", (long)p->nfit);
        if (rc == 0) rc = dm_fit_gpu_run(&m->gpu, p, m->real_size, &go, &res, &rep);
        if (prog) dm_progress_finish(prog, rc == 0 ? summary(p, note, sizeof note) : NULL);
        /* The compile on the run's path: NVRTC's, and any wait for the host fitter after the
         * GPU is done. */
        double waited;
        int host_rc = machine_host_fitter(m, &waited);
        if (rc == 0) rc = host_rc;
        timing.compile = rep.compile_seconds + waited; /* taken off "fit" below, once */
        timing.starts_wait = rep.starts_wait_seconds;
        snprintf(device, sizeof device, "gpu: %s, %d lanes/voxel, %d batches of up to %ld voxels%s",
                 rep.device, rep.lanes, rep.batches, rep.batch_voxels,
                 rep.compile_cached ? ", fitter from cache" : "");
    } else {
        double waited;
        rc = machine_host_fitter(m, &waited);
        timing.compile = m->host_threaded ? waited : stage == 0 ? m->fitter.compile_seconds : 0;
        t_fit += waited;
        char dict_note[160] = "";
        if (rc == 0 && (p->cfg.methods & DM_METHOD_DICT)) {
            dm_fit_watch_stage(m->watch, "dictionary", (long)p->nfit);
            rc = dm_fit_dictionary_run(p, &m->fitter, &res, r->quiet, m->watch, dict_note,
                                       sizeof dict_note);
            p->cfg.methods &= ~DM_METHOD_DICT; /* the later methods start from its estimates */
        }
        snprintf(device, sizeof device, "cpu: %d threads%s%s", omp_get_max_threads(),
                 dict_note[0] ? ", " : "", dict_note);
        dm_progress *prog = r->quiet || rc != 0 || !p->cfg.methods
                                ? NULL
                                : dm_progress_start(label, (long)p->nfit, "voxels");
        const dm_cpu_fitter *fitter = &m->fitter;
        dm_cpu_fitter stage_fitter = {0};
        if (rc == 0 && own_program > 0) { /* compiled at first use, as the model's */
            rc = dm_cpu_fitter_load(&p->mi, m->real_size, &stage_fitter);
            timing.compile += stage_fitter.compile_seconds;
            t_fit += stage_fitter.compile_seconds;
            fitter = &stage_fitter;
        }
        dm_fit_watch *watch = m->watch;
        if (rc == 0 && p->cfg.methods) dm_fit_watch_stage(watch, "fit", (long)p->nfit);
#pragma omp parallel
        {
            void *work = rc == 0 ? fitter->work_new() : NULL; /* NULL: fit_voxel makes its own */
#pragma omp for schedule(dynamic, 16)
            for (size_t i = 0; i < p->nfit; i++) {
                if (dm_fit_stopping(watch) || rc != 0 || !p->cfg.methods) continue;
                unsigned char *st = &p->status[p->index[i]];
                if (*st == DM_STATUS_FITTED) {
                    *st = (unsigned char)fitter->fit_voxel(
                        &p->cfg, p->grid_values, p->meas, p->y + i * M,
                        p->voxin + i * p->mi.voxel_width, (unsigned long long)p->index[i],
                        res.params + i * P, mcmc ? res.samples + i * (size_t)ns * P : NULL,
                        res.stats + i * DM_NSTATS, work);
                }
                if (prog) dm_progress_add(prog, 1);
                dm_fit_watch_add(watch, 1); /* the caller's callbacks, on its thread */
            }
            if (work) fitter->work_free(work);
        }
        if (prog) dm_progress_finish(prog, summary(p, note, sizeof note));
        dm_cpu_fitter_close(&stage_fitter);
    }
    timing.starts = dm_fit_starts_finish(p);
    if (own_program > 0) {
        p->mi = model;
        dm_model_info_free(&staged);
    }
    if (rc == 0 && dm_fit_stopping(m->watch)) rc = dm_fit_stop_error(m->watch);
    timing.fit = dm_now_seconds() - t_fit - (use_gpu ? timing.compile : 0); /* gpu_start before */
    timing.compile += ahead_wait; /* (before t_fit) */
    count_work(p, &res, &timing);

    stage_writer *w = calloc(1, sizeof *w);
    *w = (stage_writer){.r = r,
                        .snap = *p,
                        .fitter = m->fitter,
                        .res = res,
                        .params_bytes = params_bytes,
                        .stats_bytes = stats_bytes,
                        .timing = timing,
                        .t_start = t_start,
                        .real_size = m->real_size,
                        .gpu_declined = gpu_declined,
                        .od = od,
                        .io = m->io,
                        .mem = m->mem,
                        .info = {stage, nstages, stage > 0 ? r[-1].out : NULL},
                        .before = *pending};
    *pending = NULL; /* the new writer joins it (the writers of a cascade form a chain) */
    own_request(w, r);
    snprintf(w->device, sizeof w->device, "%s", device);
    if (rc != 0) {
        w->rc = rc;
        return stage_writer_finish(w);
    }
    if (stage + 1 == nstages) {
        machine_release_gpu(m);
        /* the writers read the estimates only */
        late_free_start(&m->signal, p->y, dm_problem_signal_bytes(p));
        p->y = w->snap.y = NULL;
        if (defer_final && !m->mem) { /* written by the cascade's caller's deferral, or below */
            w->last = 1;
            *pending = w;
            return 0;
        }
        stage_writer_write(w);
        return stage_writer_finish(w);
    }
    /* A stage follows: it starts from these maps as written, and fits while they are written
     * (the writer holds its own copy of the status, which the next stage's planning resets). */
    written_estimates(r, p, &res, prev);
    w->snap.start = NULL; /* freed and remade by the next stage's planning: not the writers' */
    w->snap.grid_values = NULL;
    w->snap.status = malloc(p->nvox);
    memcpy(w->snap.status, p->status, p->nvox);
    w->own_status = 1;
    if (pthread_create(&w->thread, NULL, stage_writer_main, w) != 0) {
        stage_writer_write(w); /* no thread: written here */
        return stage_writer_finish(w);
    }
    *pending = w;
    return 0;
}

/* Every stage's own options are checked before the first fits: each later stage is planned on
 * the loaded inputs with stand-in starts, so that a mistake in the last stage costs no fit. */
static int check_later_stages(const dm_fit_io *io, const dm_fit_request *stages, int n,
                              dm_problem *p, double *prev, ahead_job *ahead)
{
    /* On one voxel: the options and the files they name are checked all the same, and the
     * planning of every voxel (its starts, copies of the whole grid) is left to the stages.
     * Each stage's settings are kept for its program's compile ahead. */
    size_t nfit = p->nfit;
    p->nfit = nfit < 1 ? nfit : 1;
    int rc = 0;
    for (int s = 1; s < n && rc == 0; s++) {
        rc = io->stage(&stages[s], prev, p);
        if (rc == 0) ahead[s] = (ahead_job){.cfg = p->cfg, .planned = 1};
    }
    p->nfit = nfit;
    return rc;
}

int dm_fit_run_engine(const dm_fit_request *stages, int n, const dm_fit_io *io,
                      dm_fit_memory *mem)
{
    double t_start = dm_now_seconds();
    const dm_fit_request *r = &stages[0];
    fit_machine m;
    memset(&m, 0, sizeof m);
    m.io = io;
    m.mem = mem;
    m.watch = mem ? mem->watch : NULL;
    m.device = r->device;
    m.gpu_options = (dm_fit_gpu_options){r->gpus, r->gpu_memory_mb, (int)r->lanes, NULL, NULL};
    int any_gpu = 0, any_mcmc = 0;
    for (int s = 0; s < n; s++) {
        int methods;
        if (dm_fit_parse_methods(stages[s].methods, &methods) != 0) return -1;
        any_gpu |= !(methods & DM_METHOD_DICT);
        any_mcmc |= (methods & DM_METHOD_MCMC) != 0;
    }
    const int auto_precision = !strcmp(r->precision, "auto");
    if (!strcmp(r->precision, "double") || auto_precision)
        m.real_size = 8;
    else if (!strcmp(r->precision, "float"))
        m.real_size = 4;
    else
        return dm_set_error("--precision: '%s' is neither float, double nor auto", r->precision);

    /* The driver starts, and the GPUs' contexts are made, on threads while the inputs load:
     * the contexts on the chance that the probe finds a GPU. */
    dm_gpu_probe probe;
    if (dm_gpu_probe_begin(&probe, r->device, NULL) != 0) return -1;
    if (strcmp(probe.device, "cpu") && any_gpu) {
        m.opener = (gpu_open_job){.gpus = r->gpus, .session = &m.gpu};
        m.opener_pending = pthread_create(&m.opener.thread, NULL, gpu_open_main, &m.opener) == 0;
    }
    dm_problem p;
    double *prev = NULL;
    late_free image = {0}; /* the data as read: the fits read their gathered copy */
    dm_fit_watch_stage(m.watch, "load", 1);
    int rc = mem ? dm_problem_build(r, mem->mi, mem->in, NULL, &p) : io->load(r, &p);
    if (rc == 0) {
        /* (every volume holds at least its grid's values: a size never above the buffer's) */
        late_free_start(&image, p.data.data, DM_NVOX(&p.data) * (size_t)p.data.nt * sizeof(double));
        p.data.data = NULL;
    }
    if (rc != 0)
        dm_gpu_probe_end(&probe, NULL); /* the read's error is the one reported */
    else
        rc = dm_gpu_probe_end(&probe, &m.use_gpu);
    if (rc == 0 && n > 1) {
        prev = calloc(p.nfit * (size_t)p.mi.nparams, sizeof *prev);
        m.ahead = calloc((size_t)n, sizeof *m.ahead);
        rc = check_later_stages(io, stages, n, &p, prev, m.ahead);
    }
    if (m.opener_pending && (rc != 0 || !m.use_gpu)) { /* no GPU after all, or an error */
        pthread_join(m.opener.thread, NULL);
        if (m.opener.rc == 0) dm_fit_gpu_close(&m.gpu);
        m.opener_pending = 0;
    }
    if (rc != 0) {
        late_free_join(&image);
        free(prev);
        ahead_free(&m, n);
        dm_problem_free(&p);
        return -1;
    }
    /* auto: a chain's Monte Carlo error is orders of magnitude above float's rounding, and a
     * GPU runs a float chain several times faster (ball & 3 sticks with gamma diffusivities:
     * 8x, docs/performance.md); FSL's bedpostx_gpu keeps its chains' parameters in float. */
    if (auto_precision && m.use_gpu && any_gpu && any_mcmc) m.real_size = 4;
    m.host = (host_fitter_job){.own = p.mi, .real_size = m.real_size};
    m.host.mi = &m.host.own;
    double t_fitter = dm_now_seconds();
    dm_fit_watch_stage(m.watch, "compile", 1);
    m.host_threaded = m.use_gpu && any_gpu;
    if (m.host_threaded) {
        rc = host_fitter_start(&m.host);
        m.host_pending = rc == 0;
    } else {
        rc = dm_cpu_fitter_load(&p.mi, m.real_size, &m.fitter);
    }
    m.fitter_seconds = dm_now_seconds() - t_fitter;
    if (r->threads > 0) omp_set_num_threads((int)r->threads);
    stage_writer *pending = NULL;
    for (int s = 0; s < n && rc == 0; s++)
        rc = run_stage(&stages[s], s, n, &p, &m, prev, s == 0 ? t_start : dm_now_seconds(),
                       &pending);
    ahead_free(&m, n); /* stopped early: their compiles end before the GPU is given back */
    if (pending && pending->last) { /* the last stage, its write deferred */
        if (deferred_start(pending, &p, &m.fitter, &image, &m.signal) != 0) {
            stage_writer_write(pending);
            rc = stage_writer_finish(pending);
        }
    } else if (pending) { /* a stage that failed before its write leaves the previous one's */
        int wrc = stage_writer_join(pending);
        if (rc == 0) rc = wrc;
    }
    double unused;
    if (machine_host_fitter(&m, &unused) != 0 && rc == 0) rc = -1;
    if (m.opener_pending) { /* no stage reached the GPU */
        pthread_join(m.opener.thread, NULL);
        m.gpu_open = m.opener.rc == 0;
    }
    if (m.closer_pending) pthread_join(m.closer, NULL);
    if (m.gpu_open) dm_fit_gpu_close(&m.gpu);
    late_free_join(&image);
    late_free_join(&m.signal);
    free(prev);
    dm_cpu_fitter_close(&m.fitter);
    dm_problem_free(&p);
    return rc;
}

int dm_fit_run_memory(const dm_fit_request *r, dm_fit_memory *mem)
{
    /* --threads is the calling thread's setting: the caller's own is given back */
    int threads = omp_get_max_threads();
    int rc = dm_fit_run_engine(r, 1, NULL, mem);
    omp_set_num_threads(threads);
    return rc;
}
