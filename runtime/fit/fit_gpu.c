/* The GPU fitter (see fit_gpu.h): one host thread per GPU, each with two buffer sets and two
 * streams so that the copies and packing of one batch overlap the kernel of the other.
 * Results land at the batch's place in the host arrays, and every voxel's random stream is
 * keyed by its index, so outputs do not depend on the number of GPUs or the batch size. */
#include "fit/fit_gpu.h"
#include "fit/fit_starts.h"
#include "gpu/cuda_api.h"
#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"
#include "gpu/gpu_stage.h"
#include "util/error.h"
#include "util/progress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_THREADS 128           /* templates/fit/gpu_fitter.cu: __launch_bounds__(128, 4) */
#define SHARED_ROWS_MAX (48u << 10) /* dynamic shared memory a block takes without opting in */
#define SWEEP_CHUNK 16              /* templates/fit/grid.h: DM_SWEEP_CHUNK */
#define PINNED_SET (96u << 20)      /* a buffer set's pinned host memory, about (below) */

typedef struct gpu_job {
    dm_fit_gpu_session *session;
    dm_problem *p;
    dm_fit_results *res;
    const dm_cuda *cu;
    const dm_fit_gpu_programs *progs;
    int real_size, lanes, ns;
    size_t *todo, ntodo, batch;
    /* While the starts are still being made on their thread (fit_starts.h), the batches grow:
     * each GPU's first is batch >> ramp, its next twice that, until they reach batch; so the
     * GPU waits for the starts of a small batch only and then keeps behind their thread. */
    int ramp, ngpu;
    atomic_size_t next; /* the next batch's number */
    atomic_int batches;
    struct dm_progress *progress;
    dm_fit_watch *watch; /* or NULL */
    atomic_int running;  /* workers not done yet */
    pthread_mutex_t lock; /* with `done`: a worker's end wakes the caller's thread */
    pthread_cond_t done;
} gpu_job;

typedef struct gpu_worker {
    gpu_job *job;
    int index, ordinal; /* the GPU's place in the session, its device ordinal */
    int rc;
    double starts_wait; /* seconds it waited for its batches' starts */
    char error[512];
    /* the kernels' stop flag (dm_fit_config.stop), in host memory the GPU reads: the caller's
     * thread sets it when the run is stopped; NULL until the worker has made it */
    _Atomic(volatile int *) stop; /* (the session's: it outlives the worker) */
} gpu_worker;

/* One buffer set: device arrays and their pinned host staging; rows (device only) holds the
 * batch's extended measurement rows when the model has fixed values (templates/fit/model_api.h). */
typedef struct slot {
    CUstream stream;
    CUdeviceptr y, vox, idx, params, samples, stats, status, rows;
    void *hy, *hvox, *hidx, *hparams, *hsamples, *hstats, *hstatus;
    dm_gpu_pinned host; /* the host arrays, one pinned region */
    size_t first, n; /* batch in flight: todo[first .. first+n) */
    int busy;
    size_t bytes[8]; /* each array's size as allocated (y .. status, rows) */
} slot;

/* A GPU's two buffer sets between the stages of a cascade (dm_fit_gpu_session.kept). */
struct gpu_buffers {
    slot set[2];
};

static const char *const fitter_templates[] = {"fit/gpu_fitter.cu",
                                               "maths/mathlib.h",
                                               "fit/model_api.h",
                                               "fit/fit_api.h",
                                               "fit/lanes.h",
                                               "maths/philox.h",
                                               "fit/fit_common.h",
                                               "fit/grid.h",
                                               "fit/lm.h",
                                               "fit/mcmc.h",
                                               "fit/multistart.h",
                                               "fit/fit_voxel.h",
                                               NULL};

/* A stage program on the GPU reads its rows as it makes them (templates/fit/fit_common.h's
 * DM_ROWS_AS_READ: the base values shared by a block, the stage's made at each reading); its
 * grid search alone runs as templates/fit/grid.h's sweep where the points' prepared values are
 * the same for every voxel of the same inputs and its signal calls only elementary functions.
 * (NODDI-Bingham's, whose signal calls the confluent hypergeometric function at every point
 * and measurement, swept its grid in 1.25-1.42 s on an H200, against 0.81-0.94 s on the
 * model's program: the chunk's 16 copies of that call spill.) */
static int rows_as_read(const dm_model_info *mi)
{
    return mi->stage_width > 0 && mi->fix_width > 0;
}

static int sweeps(const dm_model_info *mi, int methods)
{
    return rows_as_read(mi) && !mi->prepare_reads_stage && !mi->signal_special &&
           methods == DM_METHOD_GRID;
}

int dm_fit_gpu_compile(const dm_cuda *cu, const dm_model_info *mi, int arch, int real_size,
                       int lanes, int methods, int noise, int use_cache, dm_gpu_program *out)
{
    /* templates/fit/mcmc.h's DM_COMPILED_NOISE: 1 Gaussian, 2 Rician, 3 both; only MCMC reads it */
    const int noises = !(methods & DM_METHOD_MCMC) || noise < 0 ? 3 : 1 << noise;
    const int sweep = sweeps(mi, methods), as_read = rows_as_read(mi);
    char prologue[512], name[300];
    snprintf(prologue, sizeof prologue,
             "#define DM_NLANES %d\n#define DM_COMPILED_METHODS %d\n#define DM_COMPILED_NOISE %d\n"
             "%s%stypedef %s real;\n#include \"fit/gpu_fitter.cu\"\n",
             lanes, methods, noises, as_read ? "#define DM_ROWS_AS_READ 1\n" : "",
             sweep ? "#define DM_GRID_SWEEP 1\n#define DM_MIN_BLOCKS 3\n" : "",
             real_size == 4 ? "float" : "double");
    snprintf(name, sizeof name, "%s-gpu-%s-%dl-m%d-n%d%s", mi->name,
             real_size == 4 ? "float" : "double", lanes, methods, noises,
             sweep ? "-sweep" : as_read ? "-stage" : "");
    /* A float fitter is built with fast math: exp, sin, cos and log become the hardware's
     * approximations (a few ulp of float), the float build's choice of speed over the last
     * bits (ball & 2 sticks LM+MCMC 1.95 -> 1.46 s on an H200, docs/performance.md).  A
     * double fitter keeps the precise functions. */
    static const char *const float_options[] = {"--use_fast_math", NULL};
    dm_gpu_source src = {.name = name,
                         .what = "the fitter",
                         .prologue = prologue,
                         .header = mi->source,
                         .header_name = "dm_model.h",
                         .templates = fitter_templates,
                         .options = real_size == 4 ? float_options : NULL};
    return dm_gpu_compile_source(cu, &src, arch, use_cache, out);
}

typedef struct part_compile {
    const dm_cuda *cu;
    const dm_model_info *mi;
    int arch, real_size, lanes, methods, noise, use_cache, rc;
    dm_gpu_program *out;
    char error[512];
} part_compile;

static void *part_compile_main(void *arg)
{
    part_compile *c = arg;
    c->rc = dm_fit_gpu_compile(c->cu, c->mi, c->arch, c->real_size, c->lanes, c->methods, c->noise,
                               c->use_cache, c->out);
    if (c->rc != 0) snprintf(c->error, sizeof c->error, "%s", dm_last_error());
    return NULL;
}

int dm_fit_gpu_compile_parts(const dm_cuda *cu, const dm_model_info *mi, int arch, int real_size,
                             int lanes, int methods, int noise, int use_cache,
                             dm_fit_gpu_programs *out)
{
    memset(out, 0, sizeof *out);
    const int first = DM_METHOD_GRID | DM_METHOD_LM;
    int split = (methods & DM_METHOD_MCMC) && (methods & first);
    out->n = split ? 2 : 1;
    const int part_methods[2] = {split ? methods & first : methods, DM_METHOD_MCMC};
    part_compile c[2];
    for (int k = 0; k < out->n; k++)
        c[k] = (part_compile){.cu = cu,
                              .mi = mi,
                              .arch = arch,
                              .real_size = real_size,
                              .lanes = lanes,
                              .methods = part_methods[k],
                              .noise = noise,
                              .use_cache = use_cache,
                              .out = &out->part[k]};
    double t0 = dm_now_seconds();
    pthread_t th;
    int threaded = split && pthread_create(&th, NULL, part_compile_main, &c[1]) == 0;
    part_compile_main(&c[0]);
    if (threaded)
        pthread_join(th, NULL);
    else if (split)
        part_compile_main(&c[1]);
    out->cached = 1;
    int compiled = 0;
    for (int k = 0; k < out->n; k++) {
        out->cached &= out->part[k].cached;
        compiled |= c[k].rc == 0 && !out->part[k].cached;
    }
    out->compile_seconds = compiled ? dm_now_seconds() - t0 : 0;
    for (int k = 0; k < out->n; k++)
        if (c[k].rc != 0) {
            dm_fit_gpu_programs_free(out);
            return dm_set_error("%s", c[k].error);
        }
    return 0;
}

void dm_fit_gpu_programs_free(dm_fit_gpu_programs *progs)
{
    for (int k = 0; k < 2; k++) dm_gpu_program_free(&progs->part[k]);
}

int dm_fit_gpu_auto_lanes(int M, int real_size)
{
    /* The largest power of two that leaves each lane about 48 measurements.  Measured on an
     * H200, ball_2_sticks LM+MCMC, 200,000 voxels, M = 105, fit seconds for 1/2/4/8 lanes:
     * float 2.04/1.93/2.14/2.71, double 5.54/4.81/5.43/6.84 (32 lanes: about 2.5x slower).
     * More lanes repeat the per-voxel work (proposal, priors, bounds, the prepare step, the LM
     * solve) in every lane; fewer make the measurement loop long and serial. */
    (void)real_size; /* the same optimum was measured for both precisions */
    int lanes = 1;
    while (lanes < 32 && lanes * 2 * 48 <= M) lanes *= 2;
    return lanes;
}

static void put(void *dst, size_t i, double v, int rs)
{
    if (rs == 4)
        ((float *)dst)[i] = (float)v;
    else
        ((double *)dst)[i] = v;
}
static double get(const void *src, size_t i, int rs)
{
    return rs == 4 ? ((const float *)src)[i] : ((const double *)src)[i];
}

/* The bytes of a buffer set's arrays for batches of n voxels: y, vox, idx, params, samples,
 * stats, status, then rows (device only). */
static void slot_bytes(size_t n, size_t M, size_t VS, size_t P, size_t ns, size_t row_width, int rs,
                       size_t bytes[8])
{
    const size_t warps_n = (n + 31) / 32 * 32; /* whole warps' rows: a stage program interleaves */
    const size_t b[8] = {n * M * rs,
                         n * VS * rs,
                         n * 8,
                         n * P * rs,
                         (ns ? n * ns * P : 1) * rs,
                         n * DM_NSTATS * rs,
                         n * sizeof(int),
                         row_width ? warps_n * M * row_width * rs : 1};
    memcpy(bytes, b, sizeof b);
}

/* 1 when the set holds arrays of at least these sizes (a set kept from an earlier stage). */
static int slot_fits(const slot *s, const size_t bytes[8])
{
    if (!s->stream) return 0;
    for (int i = 0; i < 8; i++)
        if (s->bytes[i] < bytes[i]) return 0;
    return 1;
}

static int alloc_slot(const dm_cuda *cu, slot *s, const size_t bytes[8])
{
    memset(s, 0, sizeof *s);
    CUdeviceptr *dev[7] = {&s->y, &s->vox, &s->idx, &s->params, &s->samples, &s->stats, &s->status};
    void **host[7] = {&s->hy,       &s->hvox,   &s->hidx,   &s->hparams,
                      &s->hsamples, &s->hstats, &s->hstatus};
    CK(cu->cuStreamCreate(&s->stream, 1 /* non-blocking */), "creating a stream");
    size_t at[7], total = 0; /* the host arrays in one pinned region, each on 256 bytes */
    for (int i = 0; i < 7; i++) {
        at[i] = total;
        total += (bytes[i] + 255) / 256 * 256;
    }
    if (dm_gpu_pinned_alloc(cu, total, &s->host) != 0) goto fail;
    for (int i = 0; i < 7; i++) {
        CK(cu->cuMemAlloc(dev[i], bytes[i]), "allocating device memory");
        *host[i] = (char *)s->host.host + at[i];
    }
    CK(cu->cuMemAlloc(&s->rows, bytes[7]), "allocating device memory");
    memcpy(s->bytes, bytes, sizeof s->bytes);
    return 0;
fail:
    return -1;
}

static void free_slot(const dm_cuda *cu, slot *s)
{
    CUdeviceptr dev[7] = {s->y, s->vox, s->idx, s->params, s->samples, s->stats, s->status};
    for (int i = 0; i < 7; i++)
        if (dev[i]) cu->cuMemFree(dev[i]);
    dm_gpu_pinned_free(cu, &s->host);
    if (s->rows) cu->cuMemFree(s->rows);
    if (s->stream) cu->cuStreamDestroy(s->stream);
    memset(s, 0, sizeof *s);
}

/* Copies a finished batch's results from pinned memory into the host arrays. */
static void unpack(gpu_job *j, slot *s)
{
    dm_problem *p = j->p;
    int P = p->mi.nparams, rs = j->real_size, ns = j->ns;
    /* On all cores: a batch's samples are tens of millions of values, and the last batch's
     * copy is on the run's path (one thread took 0.24 s a 100,000-voxel batch). */
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < s->n; b++) {
        size_t i = j->todo[s->first + b];
        for (int k = 0; k < P; k++) j->res->params[i * P + k] = get(s->hparams, b * P + k, rs);
        for (int t = 0; t < DM_NSTATS; t++)
            j->res->stats[i * DM_NSTATS + t] = get(s->hstats, b * DM_NSTATS + t, rs);
        for (size_t t = 0; t < (size_t)ns * P; t++)
            j->res->samples[i * ns * P + t] = get(s->hsamples, b * ns * P + t, rs);
        p->status[p->index[i]] = (unsigned char)((int *)s->hstatus)[b];
    }
    if (j->progress) dm_progress_add(j->progress, (long)s->n);
    dm_fit_watch_add(j->watch, (long)s->n);
    s->busy = 0;
}

/* Batch k's voxels: todo[*first .. *first + *n); 0 when it is past the work. */
static size_t batch_size(const gpu_job *j, size_t k)
{
    const size_t step = k / (size_t)j->ngpu;
    return step < (size_t)j->ramp ? j->batch >> (j->ramp - step) : j->batch;
}

static int batch_range(const gpu_job *j, size_t k, size_t *first, size_t *n)
{
    size_t size = batch_size(j, k);
    *first = 0;
    for (size_t i = 0; i < k && i < (size_t)j->ramp * j->ngpu; i++) *first += batch_size(j, i);
    if (k > (size_t)j->ramp * j->ngpu) *first += (k - (size_t)j->ramp * j->ngpu) * j->batch;
    if (*first >= j->ntodo) return 0;
    *n = j->ntodo - *first < size ? j->ntodo - *first : size;
    return 1;
}

/* 1 when every voxel to fit has the same per-voxel inputs (none, or a model's defaults). */
static int voxel_inputs_uniform(const dm_problem *p)
{
    const size_t VW = p->mi.voxel_width;
    if (VW == 0) return 1;
    for (size_t i = 1; i < p->nfit; i++)
        if (memcmp(p->voxin + i * VW, p->voxin, VW * sizeof *p->voxin) != 0) return 0;
    return 1;
}

/* The dynamic shared memory of a block of a stage program that reads its rows as it makes them
 * (gpu_fitter.cu): its M rows of base values, on 16 bytes; a sweep's points' prepared values
 * after them (grid.h's DM_SWEEP_TABLE), rounded up to whole chunks.  0 where mi reads its rows
 * otherwise. */
static size_t as_read_bytes(const dm_problem *p, const dm_model_info *mi, int rs)
{
    if (!rows_as_read(mi)) return 0;
    const size_t rows = (p->M * (size_t)(mi->measure_width + mi->fix_base_width) + 3) / 4 * 4;
    if (!sweeps(mi, p->cfg.methods)) return rows * (size_t)rs;
    size_t points = 1;
    for (int k = 0; k < mi->nparams; k++)
        if (p->cfg.grid_count[k] > 0 && !((p->cfg.fixed_mask >> k) & 1u))
            points *= (size_t)p->cfg.grid_count[k];
    points = (points + SWEEP_CHUNK - 1) / SWEEP_CHUNK * SWEEP_CHUNK;
    return (rows + points * (size_t)mi->pre_width) * (size_t)rs;
}

size_t dm_fit_gpu_stage_shared(const dm_fit_gpu_session *s, const dm_problem *p,
                               const dm_model_info *staged, int real_size)
{
    size_t bytes = as_read_bytes(p, staged, real_size);
    /* a grid search alone: swept, else the model's program (its rows made at every point) */
    if (!bytes || (p->cfg.methods & ~(DM_METHOD_GRID | DM_METHOD_LM)) ||
        (p->cfg.methods == DM_METHOD_GRID && !sweeps(staged, p->cfg.methods)) ||
        !voxel_inputs_uniform(p))
        return 0;
    for (int g = 0; g < s->gs.n; g++) {
        CUdevice dev;
        int most = 0;
        if (s->cu->cuDeviceGet(&dev, s->gs.ord[g]) != 0 ||
            s->cu->cuDeviceGetAttribute(&most, DM_CU_ATTR_SHARED_PER_BLOCK_OPTIN, dev) != 0 ||
            bytes > (size_t)most)
            return 0;
    }
    return bytes;
}

static void *worker_main(void *arg)
{
    gpu_worker *w = arg;
    gpu_job *j = w->job;
    const dm_cuda *cu = j->cu;
    dm_problem *p = j->p;
    int rs = j->real_size, P = p->mi.nparams, ns = j->ns;
    size_t M = p->M, W = p->mi.measure_width, VW = p->mi.voxel_width, VS = VW ? VW : 1;
    size_t fix_rows = p->mi.fix_width ? W + (size_t)p->mi.fix_width : 0; /* extended row width */
    /* the extended rows made once a block where every voxel's are the same (gpu_fitter.cu); a
     * stage program's base rows (fit_run.c chose it for these voxels), with a sweep's points'
     * table after them */
    const size_t as_read = as_read_bytes(p, &p->mi, rs);
    int shared_rows =
        as_read || (fix_rows && M * fix_rows * rs <= SHARED_ROWS_MAX && voxel_inputs_uniform(p));
    unsigned shared_bytes = as_read       ? (unsigned)as_read
                            : shared_rows ? (unsigned)(M * fix_rows * rs)
                                          : 0;
    dm_gpu_kernel kern[2];
    memset(kern, 0, sizeof kern);
    CUdeviceptr d_meas = 0, d_grid = 0;
    slot slots[2];
    memset(slots, 0, sizeof slots);
    struct gpu_buffers *kept = j->session->kept[w->index];
    if (kept) { /* an earlier stage's, reused where large enough */
        memcpy(slots, kept->set, sizeof slots);
        free(kept);
        j->session->kept[w->index] = NULL;
    }
    size_t bytes[8], small_bytes[8]; /* a set for any batch; for the small first ones */
    /* each voxel's rows on the device: unless shared, and a stage program's own on them */
    const size_t own_rows = as_read || (shared_rows && !p->mi.rows_per_voxel) ? 0 : fix_rows;
    slot_bytes(j->batch, M, VS, P, ns, own_rows, rs, bytes);
    slot_bytes(j->batch >> j->ramp, M, VS, P, ns, own_rows, rs, small_bytes);
    w->rc = -1;
    dm_fit_config cfg = p->cfg;
    for (int k = 0; k < j->progs->n; k++)
        if (dm_gpu_kernel_open(cu, w->ordinal, &j->progs->part[k], "dm_fit_kernel", "fitter",
                               "fitting kernel", &kern[k]) != 0)
            goto fail;
    for (int k = 0; k < j->progs->n && shared_bytes > SHARED_ROWS_MAX; k++) /* opted in */
        CK(cu->cuFuncSetAttribute(kern[k].fn, DM_CU_FUNC_MAX_DYNAMIC_SHARED, (int)shared_bytes),
           "allowing the fitting kernel its shared memory");
    { /* the context is current: the stop flag, mapped into the device's space */
        void **flag = &j->session->stop_flag[w->index];
        CUdeviceptr d_stop = 0;
        if (!*flag)
            CK(cu->cuMemHostAlloc(flag, sizeof(int), DM_CU_MEMHOSTALLOC_DEVICEMAP),
               "allocating the stop flag");
        *(volatile int *)*flag = dm_fit_stopping(j->watch);
        CK(cu->cuMemHostGetDevicePointer(&d_stop, *flag, 0), "mapping the stop flag");
        cfg.stop = (const volatile int *)(uintptr_t)d_stop;
        atomic_store(&w->stop, (volatile int *)*flag);
    }
    {
        /* Inputs shared by every voxel: the measurement rows and the grid values. */
        size_t nm = M * (W ? W : 1), ng = p->ngrid_values ? p->ngrid_values : 1;
        void *h = malloc((nm > ng ? nm : ng) * 8);
        for (size_t i = 0; i < nm; i++) put(h, i, W ? p->meas[i] : 0, rs);
        int up = dm_gpu_upload(cu, &d_meas, h, nm * rs, NULL);
        if (up == 0) {
            for (size_t i = 0; i < ng; i++) put(h, i, p->ngrid_values ? p->grid_values[i] : 0, rs);
            up = dm_gpu_upload(cu, &d_grid, h, ng * rs, NULL);
        }
        free(h);
        if (up != 0) goto fail;
    }
    /* A buffer set is allocated at its first batch (pinning host memory takes time: the
     * second set's while the GPU fits the first batch), unless an earlier stage's is large
     * enough, and kept for the next stage. */

    for (int iter = 0;; iter++) {
        slot *s = &slots[iter & 1];
        if (s->busy) {
            CK(cu->cuStreamSynchronize(s->stream), "running the fitting kernel");
            unpack(j, s);
        }
        if (dm_fit_stopping(j->watch)) {
            /* Let the batch in flight finish before its buffers are freed. */
            slot *other = &slots[(iter + 1) & 1];
            if (other->busy) cu->cuStreamSynchronize(other->stream);
            dm_fit_stop_error(j->watch);
            goto fail;
        }
        size_t first, n;
        if (!batch_range(j, atomic_fetch_add(&j->next, 1), &first, &n)) {
            /* No work left: collect the batch still in flight in the other buffer set. */
            slot *other = &slots[(iter + 1) & 1];
            if (other->busy) {
                CK(cu->cuStreamSynchronize(other->stream), "running the fitting kernel");
                unpack(j, other);
            }
            break;
        }
        atomic_fetch_add(&j->batches, 1);
        /* a small first batch gets a small set (pinning 100 MB took 0.02-0.03 s before the
         * GPU had work); the set grows at its next, full batch, while the GPU fits another */
        const size_t *need = j->ramp && n <= j->batch >> j->ramp ? small_bytes : bytes;
        if (!slot_fits(s, need)) {
            free_slot(cu, s);
            if (alloc_slot(cu, s, need) != 0) goto fail;
        }
        /* the batch's starts from the signal (fit_starts.h), made on their thread */
        const double t_wait = dm_now_seconds();
        dm_fit_starts_wait(p, j->todo[first + n - 1] + 1);
        w->starts_wait += dm_now_seconds() - t_wait;
#pragma omp parallel for schedule(static)
        for (size_t b = 0; b < n; b++) {
            size_t i = j->todo[first + b];
            if (p->starts) memcpy(j->res->params + i * P, p->start + i * P, P * sizeof(double));
            for (size_t m = 0; m < M; m++) put(s->hy, b * M + m, p->y[i * M + m], rs);
            for (size_t c = 0; c < VS; c++)
                put(s->hvox, b * VS + c, VW ? p->voxin[i * VW + c] : 0, rs);
            for (int k = 0; k < P; k++) put(s->hparams, b * P + k, j->res->params[i * P + k], rs);
            ((unsigned long long *)s->hidx)[b] = p->index[i];
        }
        CK(cu->cuMemcpyHtoDAsync(s->y, s->hy, n * M * rs, s->stream), "copying to the GPU");
        CK(cu->cuMemcpyHtoDAsync(s->vox, s->hvox, n * VS * rs, s->stream), "copying to the GPU");
        CK(cu->cuMemcpyHtoDAsync(s->params, s->hparams, n * P * rs, s->stream),
           "copying to the GPU");
        CK(cu->cuMemcpyHtoDAsync(s->idx, s->hidx, n * 8, s->stream), "copying to the GPU");
        int nvox = (int)n;
        void *args[] = {&cfg,     &d_grid,      &d_meas,     &s->y,     &s->vox,
                        &s->idx,  &s->params,   &s->samples, &s->stats, &s->status,
                        &s->rows, &shared_rows, &nvox};
        for (int k = 0; k < j->progs->n; k++) /* the parts in turn, on the batch's stream */
            if (dm_gpu_launch_shared(cu, kern[k].fn, (unsigned long long)n * j->lanes,
                                     BLOCK_THREADS, shared_bytes, s->stream, args,
                                     "launching the fitting kernel") != 0)
                goto fail;
        CK(cu->cuMemcpyDtoHAsync(s->hparams, s->params, n * P * rs, s->stream),
           "copying from the GPU");
        CK(cu->cuMemcpyDtoHAsync(s->hstats, s->stats, n * DM_NSTATS * rs, s->stream),
           "copying from the GPU");
        CK(cu->cuMemcpyDtoHAsync(s->hstatus, s->status, n * sizeof(int), s->stream),
           "copying from the GPU");
        if (ns)
            CK(cu->cuMemcpyDtoHAsync(s->hsamples, s->samples, n * ns * P * rs, s->stream),
               "copying from the GPU");
        s->first = first;
        s->n = n;
        s->busy = 1;
    }
    w->rc = 0;
fail:
    if (w->rc != 0) snprintf(w->error, sizeof w->error, "GPU %d: %s", w->ordinal, dm_last_error());
    kept = w->rc == 0 ? malloc(sizeof *kept) : NULL;
    if (kept) {
        memcpy(kept->set, slots, sizeof slots);
        j->session->kept[w->index] = kept;
    } else {
        for (int s = 0; s < 2; s++) free_slot(cu, &slots[s]);
    }
    if (d_meas) cu->cuMemFree(d_meas);
    if (d_grid) cu->cuMemFree(d_grid);
    for (int k = 0; k < 2; k++) dm_gpu_kernel_close(cu, &kern[k]);
    return NULL;
}

/* A worker, counted while it runs (the caller's thread polls its callbacks meanwhile). */
static void *worker_run(void *arg)
{
    gpu_worker *w = arg;
    worker_main(w);
    pthread_mutex_lock(&w->job->lock);
    atomic_fetch_sub(&w->job->running, 1);
    pthread_cond_broadcast(&w->job->done);
    pthread_mutex_unlock(&w->job->lock);
    return NULL;
}

/* Buffers parked between the fits of a process that holds the GPUs' contexts
 * (dm_gpu_hold_contexts: `dimoc bids`), by device ordinal: a session takes its GPU's at its
 * open instead of pinning host memory and allocating device memory again for every subject;
 * they stay valid while the context lives. */
static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gpu_buffers *parked[DM_GPU_MAX];

int dm_fit_gpu_open(const char *gpus, dm_fit_gpu_session *s)
{
    memset(s, 0, sizeof *s);
    s->cu = dm_cuda_open(1, 1);
    if (!s->cu) return -1;
    if (dm_gpu_select(s->cu, gpus, &s->gs) != 0) {
        dm_cuda_close(s->cu);
        s->cu = NULL;
        return -1;
    }
    for (; s->held < s->gs.n; s->held++) {
        CUdevice dev;
        CUcontext ctx;
        if (s->cu->cuDeviceGet(&dev, s->gs.ord[s->held]) != 0 ||
            s->cu->cuDevicePrimaryCtxRetain(&ctx, dev) != 0) {
            dm_set_error("GPU %d: cannot create its context", s->gs.ord[s->held]);
            dm_fit_gpu_close(s);
            return -1;
        }
    }
    pthread_mutex_lock(&parked_lock);
    for (int g = 0; g < s->gs.n; g++) {
        const int ord = s->gs.ord[g];
        if (ord < 0 || ord >= DM_GPU_MAX || !dm_gpu_context_held(ord)) continue;
        s->kept[g] = parked[ord];
        parked[ord] = NULL;
    }
    pthread_mutex_unlock(&parked_lock);
    return 0;
}

void dm_fit_gpu_close(dm_fit_gpu_session *s)
{
    for (int g = 0; s->cu && g < s->held; g++) {
        CUdevice dev;
        CUcontext ctx;
        if (s->cu->cuDeviceGet(&dev, s->gs.ord[g]) != 0) continue;
        const int ord = s->gs.ord[g];
        if (s->kept[g] && ord >= 0 && ord < DM_GPU_MAX && dm_gpu_context_held(ord)) {
            pthread_mutex_lock(&parked_lock); /* for the next fit of the process */
            struct gpu_buffers *older = parked[ord];
            parked[ord] = s->kept[g];
            s->kept[g] = older; /* freed below */
            pthread_mutex_unlock(&parked_lock);
        }
        if ((s->kept[g] || s->stop_flag[g]) && s->cu->cuDevicePrimaryCtxRetain(&ctx, dev) == 0) {
            if (s->cu->cuCtxSetCurrent(ctx) == 0) {
                for (int k = 0; s->kept[g] && k < 2; k++) free_slot(s->cu, &s->kept[g]->set[k]);
                if (s->stop_flag[g]) s->cu->cuMemFreeHost(s->stop_flag[g]);
            }
            s->cu->cuDevicePrimaryCtxRelease(dev);
        }
        s->stop_flag[g] = NULL;
        free(s->kept[g]);
        s->kept[g] = NULL;
        s->cu->cuDevicePrimaryCtxRelease(dev);
    }
    s->held = 0;
    dm_cuda_close(s->cu);
    s->cu = NULL;
}

int dm_fit_gpu_run(dm_fit_gpu_session *s, dm_problem *p, int real_size, const dm_fit_gpu_options *o,
                   dm_fit_results *res, dm_fit_gpu_report *rep)
{
    memset(rep, 0, sizeof *rep);
    dm_cuda *cu = s->cu;
    const dm_gpu_set gs = s->gs;
    snprintf(rep->device, sizeof rep->device, "%s", gs.device);
    int ngpu = gs.n;
    int lanes = o->lanes > 0 ? o->lanes : dm_fit_gpu_auto_lanes(p->M, real_size);
    rep->lanes = lanes;
    rep->ngpus = ngpu;
    dm_fit_gpu_programs progs;
    if (dm_fit_gpu_compile_parts(cu, &p->mi, gs.arch, real_size, lanes, p->cfg.methods,
                                 p->cfg.noise, 1, &progs) != 0)
        return -1;
    rep->compile_seconds = progs.compile_seconds;
    rep->compile_cached = progs.cached;

    gpu_job j;
    memset(&j, 0, sizeof j);
    j.session = s;
    j.p = p;
    j.res = res;
    j.cu = cu;
    j.progs = &progs;
    j.real_size = real_size;
    j.lanes = lanes;
    j.ns = res->nsamples;
    j.progress = o->progress;
    j.watch = o->watch;
    pthread_mutex_init(&j.lock, NULL);
    pthread_cond_init(&j.done, NULL);
    j.todo = malloc(p->nfit * sizeof *j.todo);
    for (size_t i = 0; i < p->nfit; i++)
        if (p->status[p->index[i]] == DM_STATUS_FITTED) j.todo[j.ntodo++] = i;

    /* Batch size: two buffer sets must fit in the memory allowed (70% of the smallest free
     * memory, or the cap), and no GPU should get fewer than two batches when there is work
     * enough, so that copies overlap compute.  A set's pinned host memory is held to about
     * PINNED_SET bytes (but 16,384 voxels at least): pinning is slow, and two sets of half an
     * HCP-sized subject's signals (1 GB) took about 0.3 s of a cascade's first stage, as long
     * as its swept grid's kernels. */
    size_t P = p->mi.nparams, M = p->M, VS = p->mi.voxel_width ? p->mi.voxel_width : 1;
    size_t rows = p->mi.fix_width ? M * (p->mi.measure_width + (size_t)p->mi.fix_width) : 0;
    size_t per_voxel =
        (M + VS + P + (size_t)j.ns * P + DM_NSTATS + rows) * real_size + 8 + sizeof(int);
    size_t allow = dm_gpu_memory_budget_min(cu, &gs, o->memory_mb);
    size_t batch = allow / (2 * per_voxel);
    size_t spread = (j.ntodo + 2 * ngpu - 1) / (2 * ngpu);
    if (batch > spread) batch = spread;
    const size_t pinned_per_voxel =
        (M + VS + P + (size_t)j.ns * P + DM_NSTATS) * real_size + 8 + sizeof(int);
    const size_t pinned_batch = PINNED_SET / pinned_per_voxel > 16384 ? PINNED_SET / pinned_per_voxel
                                                                      : 16384;
    if (batch > pinned_batch) batch = pinned_batch;
    if (batch > 1 << 22) batch = 1 << 22;
    if (batch < 1) batch = 1;
    j.batch = batch;
    /* Starts still being made (fit_starts.h): each GPU's first batch an eighth of a batch,
     * then a quarter, a half. */
    j.ngpu = ngpu;
    if (p->starts && batch >= 8192) j.ramp = 3;
    rep->batch_voxels = (long)batch;

    int rc = 0;
    if (j.ntodo > 0) {
        gpu_worker w[DM_GPU_MAX];
        pthread_t th[DM_GPU_MAX];
        int started = 0;
        for (int g = 0; g < ngpu; g++) {
            w[g].job = &j;
            w[g].index = g;
            w[g].ordinal = gs.ord[g];
            w[g].rc = 0;
            w[g].starts_wait = 0;
            atomic_init(&w[g].stop, NULL);
            atomic_fetch_add(&j.running, 1);
            if (pthread_create(&th[g], NULL, worker_run, &w[g]) != 0) {
                atomic_fetch_sub(&j.running, 1);
                rc = dm_set_error("cannot start a thread for GPU %d", gs.ord[g]);
                break;
            }
            started++;
        }
        /* the caller's callbacks, on its thread, while the GPUs work; a stop (a cancel, Ctrl-C)
         * passed on to the kernels running, which leave their chains at once */
        while (atomic_load(&j.running) > 0) {
            dm_fit_watch_poll(o->watch);
            if (dm_fit_stopping(o->watch))
                for (int g = 0; g < started; g++) {
                    volatile int *flag = atomic_load(&w[g].stop);
                    if (flag) *flag = 1;
                }
            /* woken by the last worker's end, or after 10 ms for the next poll */
            pthread_mutex_lock(&j.lock);
            if (atomic_load(&j.running) > 0) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += 10000000;
                if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
                pthread_cond_timedwait(&j.done, &j.lock, &until);
            }
            pthread_mutex_unlock(&j.lock);
        }
        for (int g = 0; g < started; g++) pthread_join(th[g], NULL);
        for (int g = 0; g < started && rc == 0; g++)
            if (w[g].rc != 0) rc = dm_set_error("%s", w[g].error);
        for (int g = 0; g < started; g++)
            if (w[g].starts_wait > rep->starts_wait_seconds)
                rep->starts_wait_seconds = w[g].starts_wait;
    }
    rep->batches = atomic_load(&j.batches);
    pthread_mutex_destroy(&j.lock);
    pthread_cond_destroy(&j.done);
    free(j.todo);
    dm_fit_gpu_programs_free(&progs);
    return rc;
}
