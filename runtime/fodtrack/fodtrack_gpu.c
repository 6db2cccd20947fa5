#include "fodtrack/fodtrack_gpu.h"
#include "util/progress.h"

#include "gpu/gpu_compile.h"
#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"
#include "sphere/sh.h"
#include "util/error.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DM_FN static inline __attribute__((unused))
#define DM_ATOMIC_ADD_U32(p, v) (*(p) += (v)) /* unused here: the grid's type only */
#include "fodtrack/tdi_map.h"

#define BLOCK_THREADS 128
#define RETRY 255 /* DM_FT_GPU_RETRY of gpu_fodtrack.cu */
#define MAX_BATCH (1L << 22)
#define RECORD_BYTES 40      /* per id of a batch: verdict, ends, a record, an id to retry */
#define MIN_POINTS_PER_ID 64 /* room for points per id of a batch at least (more: traced again) */
#define TDI_SCRATCH 2048     /* voxels a mapping thread collects before deduplicating */
#define STAGE_BYTES (64UL << 20) /* pinned host memory the points come back through */
#define STAGE_HALF (STAGE_BYTES / 2)
#define MOVE_PIECE (1UL << 20) /* a thread's share of a half moved into the batch */

static const char *const fodtrack_templates[] = {"fodtrack/gpu_fodtrack.cu", "fodtrack/ft_types.h",
                                                 "fodtrack/det_math.h",      "fodtrack/fod_field.h",
                                                 "fodtrack/fod_track.h",     "fodtrack/tdi_map.h",
                                                 "maths/philox.h",           NULL};
/* No register cap by default: since the amplitude holds no basis array, the uncapped kernel is
 * the fastest (docs/performance.md, 2026-11-25: iFOD2 tracing 0.84 s uncapped, 1.29 s at 128,
 * 1.91 s at 96 for 200k streamlines on an H100; iFOD1 1.61, 2.26, 2.88 s).  DIMOC_FT_MAXREG=N
 * sets one, a benchmark knob. */
#define DEFAULT_MAXREG 0

/* The tracker's program for one algorithm, precision, FOD order, arc and ACT on or off, in the
 * caller's storage (ts), as a run and `dimoc warm` compile it. */
typedef struct tracker_source {
    char prologue[256], regopt[48];
    const char *options[3];
} tracker_source;

static dm_gpu_source tracker(tracker_source *ts, int use_double, int lmax, int nsub, int algorithm,
                             int act)
{
    snprintf(ts->prologue, sizeof ts->prologue,
             "#define DM_FT_DOUBLE %d\n#define DM_FT_LMAX %d\n#define DM_FT_NCOEF %d\n"
             "#define DM_FT_NSUB %d\n#define DM_FT_ALGORITHM %d\n#define DM_FT_ACT %d\n"
             "#include \"fodtrack/gpu_fodtrack.cu\"\n",
             use_double, lmax, dm_sh_ncoef(lmax), nsub, algorithm, act ? 1 : 0);
    const char *knob = getenv("DIMOC_FT_MAXREG");
    int maxreg = knob ? atoi(knob) : DEFAULT_MAXREG, nopt = 0;
    snprintf(ts->regopt, sizeof ts->regopt, "--maxrregcount=%d", maxreg);
    ts->options[0] = ts->options[1] = ts->options[2] = NULL;
    if (use_double)
        ts->options[nopt++] = "--fmad=false"; /* every operation rounded as the host's */
    if (maxreg > 0) ts->options[nopt++] = ts->regopt;
    return (dm_gpu_source){.name = "fodtrack",
                           .what = "the FOD tracker",
                           .prologue = ts->prologue,
                           .templates = fodtrack_templates,
                           .options = ts->options};
}

static const char *const tdi_templates[] = {"fodtrack/gpu_tdi.cu", "fodtrack/tdi_map.h", NULL};
static const char *const tdi_options[] = {"--fmad=false", NULL};
static const dm_gpu_source tdi_source = {.name = "fodtrack_tdi",
                                         .what = "the track-density mapping",
                                         .prologue = "#include \"fodtrack/gpu_tdi.cu\"\n",
                                         .templates = tdi_templates,
                                         .options = tdi_options};

int dm_ft_gpu_precompile(const dm_cuda *cu, int arch, const int use_double[2], int quiet)
{
    enum { MAX = 2 * 3 * 2 + 1 };
    static const char *const algorithm[3] = {"ifod2", "ifod1", "sd_stream"};
    tracker_source ts[MAX];
    dm_gpu_source src[MAX];
    char label[MAX][48];
    const char *labels[MAX];
    int n = 0;
    for (int d = 0; d < 2; d++)
        for (int a = 0; a < 3 && use_double[d]; a++)
            for (int act = 0; act < 2; act++) {
                /* tckgen's defaults: the FOD's usual lmax 8, --samples 4 */
                src[n] = tracker(&ts[n], d, 8, 3, a, act);
                snprintf(label[n], sizeof label[n], "track %s %s%s", algorithm[a],
                         d ? "double" : "float", act ? " act" : "");
                labels[n] = label[n];
                n++;
            }
    src[n] = tdi_source;
    labels[n++] = "track tdi";
    return dm_gpu_precompile(cu, arch, src, labels, n, quiet);
}

/* dm_ft_gpu_out of gpu_fodtrack.cu, with device pointers. */
typedef struct {
    CUdeviceptr verdict, ends, rec_id, rec_start, rec_npts, rec_seed, xyz;
    unsigned long long cap_points;
    CUdeviceptr counters;
} gpu_out;

typedef struct {
    gpu_out out;
    CUstream stream;
    CUdeviceptr bufs, ids; /* per-thread point buffers; ids of a retry */
    unsigned long long first;
    long n;
} slot;

struct dm_ft_gpu {
    dm_cuda *cu;
    dm_gpu_set gs;
    dm_gpu_program prog;
    dm_gpu_kernel kern;
    dm_gpu_program tdi_prog;
    dm_gpu_kernel tdi_kern;
    dm_ft_ctx ctx; /* device pointers */
    CUdeviceptr row, coef, sh, calib, seed_vox, seed_weight, tissue, roi;
    slot slots[2];
    int submitted, collected; /* batches so far: slot k % 2 */
    /* the track-density image on the device */
    dm_tdi_grid tdi_grid; /* its count on the device */
    CUdeviceptr tdi_count, tdi_scratch, tdi_start, tdi_npts;
    long tdi_list_cap;
    /* STAGE_BYTES of pinned host memory, the points' way back (a copy into pageable memory
     * runs at a fraction of the bus's rate: 1 GB/s for 1.6 GB of points on an H100 host), and
     * a stream for each of its halves */
    void *stage;
    CUstream copy[2];
    int use_double, buf_points;
    long threads, max_batch;
    dm_ft_gpu_times times;
};

static int alloc_slot(dm_ft_gpu *g, slot *s, size_t per_thread, size_t cap_points)
{
    s->out.cap_points = cap_points;
    const dm_cuda *cu = g->cu;
    size_t mb = (size_t)g->max_batch;
    CK(cu->cuStreamCreate(&s->stream, 1 /* non-blocking */), "creating a stream");
    CK(cu->cuMemAlloc(&s->bufs, (size_t)g->threads * per_thread),
       "allocating GPU memory for the streamlines being traced");
    CK(cu->cuMemAlloc(&s->ids, mb * 8), "allocating GPU memory for a batch");
    CK(cu->cuMemAlloc(&s->out.verdict, mb), "allocating GPU memory for a batch");
    CK(cu->cuMemAlloc(&s->out.ends, 2 * mb), "allocating GPU memory for a batch");
    CK(cu->cuMemAlloc(&s->out.rec_id, mb * 8), "allocating GPU memory for a batch");
    CK(cu->cuMemAlloc(&s->out.rec_start, mb * 8), "allocating GPU memory for a batch");
    CK(cu->cuMemAlloc(&s->out.rec_npts, mb * 4), "allocating GPU memory for a batch");
    CK(cu->cuMemAlloc(&s->out.rec_seed, mb * 4), "allocating GPU memory for a batch");
    CK(cu->cuMemAlloc(&s->out.xyz, s->out.cap_points * 12), "allocating GPU memory for points");
    CK(cu->cuMemAlloc(&s->out.counters, 5 * 8), "allocating GPU memory for a batch");
    return 0;
fail:
    return -1;
}

dm_ft_gpu *dm_ft_gpu_open(const dm_ft_plan *p, int use_double, const char *gpus, long gpu_memory_mb)
{
    dm_ft_gpu *g = calloc(1, sizeof *g);
    g->use_double = use_double;
    g->buf_points = p->buf_points;
    g->cu = dm_cuda_open(1, 1);
    if (!g->cu) goto fail;
    const dm_cuda *cu = g->cu;
    if (dm_gpu_select(cu, gpus ? gpus : "0", &g->gs) != 0) goto fail;
    tracker_source ts;
    const dm_gpu_source src =
        tracker(&ts, use_double, p->fod.lmax, p->ctx.nsub, p->ctx.algorithm, p->ctx.act.on);
    double t0 = dm_now_seconds();
    if (dm_gpu_compile_source(cu, &src, g->gs.arch, 1, &g->prog) != 0) goto fail;
    if (dm_gpu_kernel_open(cu, g->gs.ord[0], &g->prog, "dm_fodtrack_kernel", "FOD tracker",
                           "FOD tracking kernel", &g->kern) != 0)
        goto fail;
    if (dm_gpu_compile_source(cu, &tdi_source, g->gs.arch, 1, &g->tdi_prog) != 0 ||
        dm_gpu_kernel_open(cu, g->gs.ord[0], &g->tdi_prog, "dm_fodtrack_tdi_kernel",
                           "track-density mapping", "track-density kernel", &g->tdi_kern) != 0)
        goto fail;
    g->times.compile = dm_now_seconds() - t0;
    t0 = dm_now_seconds();
    const dm_ft_fod *f = &p->fod;
    size_t nvox = (size_t)f->nx * f->ny * f->nz;
    /* rows padded to whole float4s (DM_FT_ROW4 of fod_field.h) */
    size_t stride = (size_t)(f->ncoef + 3) / 4 * 4;
    float *padded = calloc((size_t)(f->nrows ? f->nrows : 1) * stride, sizeof *padded);
    for (long r = 0; r < f->nrows; r++)
        memcpy(padded + r * stride, f->coef + r * f->ncoef, f->ncoef * sizeof(float));
    int up =
        dm_gpu_upload(cu, &g->coef, padded, (size_t)f->nrows * stride * sizeof(float), "the FOD");
    free(padded);
    if (up != 0 || dm_gpu_upload(cu, &g->row, f->row, nvox * sizeof(int), "the FOD") != 0 ||
        dm_gpu_upload(cu, &g->sh, &f->table, sizeof f->table, "the SH tables") != 0 ||
        (p->ctx.ncalib &&
         dm_gpu_upload(cu, &g->calib, p->ctx.calib, 3 * (size_t)p->ctx.ncalib * sizeof(double),
                       "the calibration") != 0) ||
        dm_gpu_upload(cu, &g->seed_vox, p->ctx.seed_vox, p->ctx.nseed_vox * sizeof(int),
                      "the seeds") != 0 ||
        dm_gpu_upload(cu, &g->seed_weight, p->seed_weight, p->ctx.nseed_vox * sizeof(float),
                      "the seeds") != 0 ||
        (p->ctx.act.on &&
         dm_gpu_upload(cu, &g->tissue, p->tissue,
                       5 * sizeof(float) * p->ctx.act.nx * p->ctx.act.ny * p->ctx.act.nz,
                       "the ACT image") != 0) ||
        (p->roi_bytes &&
         dm_gpu_upload(cu, &g->roi, p->roi_data, (size_t)p->roi_bytes, "the regions") != 0))
        goto fail;
    g->ctx = p->ctx;
    g->ctx.fod.row = (const int *)(uintptr_t)g->row;
    g->ctx.fod.coef = (const float *)(uintptr_t)g->coef;
    g->ctx.fod.sh = (const dm_fod_sh_table *)(uintptr_t)g->sh;
    g->ctx.calib = (const double *)(uintptr_t)g->calib;
    g->ctx.seed_vox = (const int *)(uintptr_t)g->seed_vox;
    g->ctx.seed_weight = (const float *)(uintptr_t)g->seed_weight;
    g->ctx.act.tissue = (const float *)(uintptr_t)g->tissue;
    g->ctx.roi_data = (const unsigned char *)(uintptr_t)g->roi;

    /* resident threads, each with a point buffer per slot; then each slot's outputs */
    int sms = 0, per_sm = 0;
    CK(cu->cuDeviceGetAttribute(&sms, DM_CU_ATTR_MULTIPROCESSOR_COUNT, g->kern.dev),
       "reading the GPU's attributes");
    CK(cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, g->kern.fn, BLOCK_THREADS, 0),
       "reading the tracking kernel's occupancy");
    size_t budget = 0;
    if (dm_gpu_memory_budget(cu, gpu_memory_mb, &budget) != 0) goto fail;
    size_t rs = use_double ? sizeof(double) : sizeof(float);
    size_t per_thread = 3 * (size_t)g->buf_points * rs;
    g->threads = (long)sms * (per_sm > 0 ? per_sm : 1) * BLOCK_THREADS;
    while (g->threads > BLOCK_THREADS && 2 * (size_t)g->threads * per_thread > budget / 2)
        g->threads -= BLOCK_THREADS;
    /* each slot: its records, and the rest of its half of the budget for points */
    size_t per_slot = (budget - 2 * (size_t)g->threads * per_thread) / 2;
    g->max_batch = (long)(per_slot / (RECORD_BYTES + MIN_POINTS_PER_ID * 12));
    if (g->max_batch > MAX_BATCH) g->max_batch = MAX_BATCH;
    if (g->max_batch < 1024) {
        dm_set_error("track: the GPU's memory budget leaves no room for a batch of streamlines");
        goto fail;
    }
    size_t cap_points = (per_slot - (size_t)g->max_batch * RECORD_BYTES) / 12;
    for (int k = 0; k < 2; k++)
        if (alloc_slot(g, &g->slots[k], per_thread, cap_points) != 0) goto fail;
    CK(cu->cuMemAllocHost(&g->stage, STAGE_BYTES), "allocating pinned host memory");
    for (int k = 0; k < 2; k++) CK(cu->cuStreamCreate(&g->copy[k], 1), "creating a stream");
    g->times.upload = dm_now_seconds() - t0;
    return g;
fail:
    dm_ft_gpu_close(g);
    return NULL;
}

long dm_ft_gpu_max_batch(const dm_ft_gpu *g)
{
    return g->max_batch;
}

long dm_ft_gpu_threads(const dm_ft_gpu *g)
{
    return g->threads;
}

const char *dm_ft_gpu_device(const dm_ft_gpu *g)
{
    return g->gs.device;
}

const dm_ft_gpu_times *dm_ft_gpu_timing(const dm_ft_gpu *g)
{
    return &g->times;
}

int dm_ft_gpu_pending(const dm_ft_gpu *g)
{
    return g->submitted - g->collected;
}

/* Queues a launch on slot s over n indices (ids first + i, or s->ids when with_ids). */
static int launch(dm_ft_gpu *g, slot *s, unsigned long long first, long n, int with_ids)
{
    const dm_cuda *cu = g->cu;
    CK(cu->cuMemsetD32Async(s->out.counters, 0, 10, s->stream), "clearing the GPU's counters");
    unsigned long long nn = (unsigned long long)n;
    CUdeviceptr ids = with_ids ? s->ids : 0;
    void *args[] = {&g->ctx, &s->out, &s->bufs, &g->buf_points, &first, &nn, &ids};
    return dm_gpu_launch(cu, g->kern.fn, (unsigned long long)g->threads, BLOCK_THREADS, s->stream,
                         args, "the FOD tracking kernel");
fail:
    return -1;
}

int dm_ft_gpu_submit(dm_ft_gpu *g, unsigned long long first, long n)
{
    if (n > g->max_batch) return dm_set_error("track: a GPU batch of %ld ids is too large", n);
    if (g->submitted - g->collected >= 2)
        return dm_set_error("track: two GPU batches are already under way");
    slot *s = &g->slots[g->submitted % 2];
    s->first = first;
    s->n = n;
    if (launch(g, s, first, n, 0) != 0) return -1;
    g->submitted++;
    return 0;
}

/* Copies `bytes` of points from the GPU to dst through the stage's halves in turn: the GPU
 * copies a chunk into one half while the host's threads move the chunk before it out of the
 * other.  The move is the slow part, into pages that a batch touches for the first time: on
 * one thread it ran at 2 GB/s (1.1 s for iFOD1's 1.8 GB of points from 200,000 streamlines,
 * docs/performance.md, 2026-11-29). */
static int move_points(dm_ft_gpu *g, CUdeviceptr src, size_t bytes, char *dst, int threads)
{
    const dm_cuda *cu = g->cu;
    size_t chunks = (bytes + STAGE_HALF - 1) / STAGE_HALF;
    for (size_t k = 0; k < chunks + 1; k++) {
        if (k < chunks) { /* the copy of chunk k starts, into half k % 2 */
            size_t off = k * STAGE_HALF, len = bytes - off < STAGE_HALF ? bytes - off : STAGE_HALF;
            CK(cu->cuMemcpyDtoHAsync((char *)g->stage + (k % 2) * STAGE_HALF, src + off, len,
                                     g->copy[k % 2]),
               "copying from the GPU");
        }
        if (k == 0) continue;
        size_t c = k - 1, off = c * STAGE_HALF; /* chunk c, copied into half c % 2: moved */
        size_t len = bytes - off < STAGE_HALF ? bytes - off : STAGE_HALF;
        CK(cu->cuStreamSynchronize(g->copy[c % 2]), "copying from the GPU");
        const char *half = (const char *)g->stage + (c % 2) * STAGE_HALF;
        long pieces = (long)((len + MOVE_PIECE - 1) / MOVE_PIECE);
#pragma omp parallel for schedule(static) num_threads(threads) if (pieces > 1)
        for (long i = 0; i < pieces; i++) {
            size_t at = (size_t)i * MOVE_PIECE, n = len - at < MOVE_PIECE ? len - at : MOVE_PIECE;
            memcpy(dst + off + at, half + at, n);
        }
    }
    return 0;
fail:
    return -1;
}

/* Waits for slot s's launch and appends its results to b: verdicts and ends at the batch index
 * of each id (verdict[i] for index i of the launch, or of the retried id list), the accepted
 * streamlines at the end of b's lists. */
static int download(dm_ft_gpu *g, slot *s, long n, dm_ft_batch *b, unsigned char *verdict,
                    unsigned char *ends, int threads)
{
    const dm_cuda *cu = g->cu;
    double t0 = dm_now_seconds();
    CK(cu->cuStreamSynchronize(s->stream), "running the FOD tracking kernel");
    g->times.wait += dm_now_seconds() - t0;
    t0 = dm_now_seconds();
    unsigned long long counters[5];
    CK(cu->cuMemcpyDtoHAsync(counters, s->out.counters, sizeof counters, s->stream),
       "copying from the GPU");
    CK(cu->cuStreamSynchronize(s->stream), "copying from the GPU");
    long count = (long)counters[1];
    size_t used = counters[2] < s->out.cap_points ? counters[2] : s->out.cap_points;
    if (dm_ft_batch_room(b, b->npoints + used + 1) != 0) return -1;
    unsigned long long *start = malloc((count ? count : 1) * 8);
    CK(cu->cuMemcpyDtoHAsync(verdict, s->out.verdict, (size_t)n, s->stream),
       "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(ends, s->out.ends, 2 * (size_t)n, s->stream), "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(b->id + b->count, s->out.rec_id, count * 8, s->stream),
       "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(start, s->out.rec_start, count * 8, s->stream),
       "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(b->npts + b->count, s->out.rec_npts, count * 4, s->stream),
       "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(b->seed_index + b->count, s->out.rec_seed, count * 4, s->stream),
       "copying from the GPU");
    CK(cu->cuStreamSynchronize(s->stream), "copying from the GPU");
    if (move_points(g, s->out.xyz, used * 12, (char *)(b->xyz + 3 * b->npoints), threads) != 0)
        goto fail;
    for (long i = 0; i < count; i++) b->start[b->count + i] = b->npoints + start[i];
    free(start);
    b->count += count;
    b->npoints += used;
    b->truncations += counters[3];
    b->evals += counters[4];
    g->times.download += dm_now_seconds() - t0;
    return 0;
fail:
    return -1;
}

int dm_ft_gpu_collect(dm_ft_gpu *g, dm_ft_batch *b, int threads)
{
    if (g->collected == g->submitted) return dm_set_error("track: no GPU batch under way");
    slot *s = &g->slots[g->collected % 2];
    g->collected++;
    const long n = s->n;
    const unsigned long long first = s->first;
    dm_ft_batch_reset(b, first, n, 0);
    if (download(g, s, n, b, b->verdict, b->ends, threads) != 0) return -1;
    b->device_points = b->npoints;
    /* streamlines whose points did not fit: traced again, alone, until all are in (a launch
     * always places at least its first streamline) */
    unsigned long long *retry = NULL;
    unsigned char *v = NULL, *e = NULL;
    int rc = 0;
    for (;;) {
        long nr = 0;
        for (long i = 0; i < n; i++)
            if (b->verdict[i] == RETRY) {
                retry = realloc(retry, (nr + 1) * sizeof *retry);
                retry[nr++] = first + (unsigned long long)i;
            }
        if (!nr) break;
        v = realloc(v, nr);
        e = realloc(e, 2 * nr);
        if (g->cu->cuMemcpyHtoDAsync(s->ids, retry, nr * 8, s->stream) != 0 ||
            launch(g, s, 0, nr, 1) != 0 || download(g, s, nr, b, v, e, threads) != 0) {
            rc = dm_set_error("track: tracing streamlines again on the GPU failed");
            break;
        }
        for (long k = 0; k < nr; k++) {
            long i = (long)(retry[k] - first);
            b->verdict[i] = v[k];
            b->ends[2 * i] = e[2 * k];
            b->ends[2 * i + 1] = e[2 * k + 1];
        }
    }
    free(retry);
    free(v);
    free(e);
    if (rc == 0) dm_ft_batch_sort(b);
    return rc;
}

int dm_ft_gpu_tdi_start(dm_ft_gpu *g, const dm_tdi *m)
{
    const dm_cuda *cu = g->cu;
    size_t n = (size_t)m->nx * m->ny * m->nz;
    dm_tdi_grid_of(m, &g->tdi_grid); /* the host's mode and frames; the count goes below */
    CK(cu->cuMemAlloc(&g->tdi_count, n * sizeof(unsigned)), "allocating the track-density image");
    g->tdi_grid.count = (unsigned int *)(uintptr_t)g->tdi_count;
    CK(cu->cuMemsetD32Async(g->tdi_count, 0, n, NULL), "clearing the track-density image");
    CK(cu->cuMemAlloc(&g->tdi_scratch, (size_t)g->threads * TDI_SCRATCH * sizeof(unsigned)),
       "allocating GPU memory for the track-density mapping");
    CK(cu->cuStreamSynchronize(NULL), "clearing the track-density image");
    return 0;
fail:
    return -1;
}

int dm_ft_gpu_tdi_add(dm_ft_gpu *g, const dm_ft_batch *b, long kept, dm_tdi *m, int threads)
{
    const dm_cuda *cu = g->cu;
    slot *s = &g->slots[(g->collected - 1) % 2]; /* the batch just collected */
    long *start = malloc((kept ? kept : 1) * sizeof *start),
         *npts = malloc((kept ? kept : 1) * sizeof *npts);
    long on_gpu = 0, on_host = 0;
    dm_tck host = {0};
    long *hs = malloc((kept + 1) * sizeof *hs), *hn = malloc((kept ? kept : 1) * sizeof *hn);
    for (long i = 0; i < kept; i++) {
        if (b->start[i] + (size_t)b->npts[i] <= b->device_points) {
            start[on_gpu] = (long)b->start[i];
            npts[on_gpu++] = b->npts[i];
        } else {
            hs[on_host] = (long)b->start[i];
            hn[on_host++] = b->npts[i];
        }
    }
    int rc = 0;
    if (on_gpu) {
        if (on_gpu > g->tdi_list_cap) {
            if (g->tdi_start) cu->cuMemFree(g->tdi_start);
            if (g->tdi_npts) cu->cuMemFree(g->tdi_npts);
            g->tdi_start = g->tdi_npts = 0;
            g->tdi_list_cap = on_gpu;
            if (cu->cuMemAlloc(&g->tdi_start, on_gpu * sizeof(long)) != 0 ||
                cu->cuMemAlloc(&g->tdi_npts, on_gpu * sizeof(long)) != 0)
                rc = dm_set_error("track: allocating GPU memory for the track-density lists");
        }
        if (rc == 0) {
            cu->cuMemcpyHtoDAsync(g->tdi_start, start, on_gpu * sizeof(long), s->stream);
            cu->cuMemcpyHtoDAsync(g->tdi_npts, npts, on_gpu * sizeof(long), s->stream);
            long n = on_gpu;
            int cap = TDI_SCRATCH;
            void *args[] = {&g->tdi_grid, &s->out.xyz,     &g->tdi_start, &g->tdi_npts,
                            &n,           &g->tdi_scratch, &cap};
            rc = dm_gpu_launch(cu, g->tdi_kern.fn, (unsigned long long)g->threads, BLOCK_THREADS,
                               s->stream, args, "the track-density kernel");
            /* the lists are read by the kernel: wait before they are freed or reused */
            if (rc == 0 && cu->cuStreamSynchronize(s->stream) != 0)
                rc = dm_set_error("track: running the track-density kernel failed");
        }
    }
    if (rc == 0 && on_host) {
        host.xyz = b->xyz;
        host.start = hs;
        host.npoints = hn;
        host.count = on_host;
        rc = dm_tdi_add_tracks(m, &host, threads, NULL);
    }
    free(start);
    free(npts);
    free(hs);
    free(hn);
    return rc;
}

int dm_ft_gpu_tdi_finish(dm_ft_gpu *g, dm_tdi *m)
{
    const dm_cuda *cu = g->cu;
    size_t n = (size_t)m->nx * m->ny * m->nz;
    unsigned *counts = malloc(n * sizeof *counts);
    CK(cu->cuMemcpyDtoHAsync(counts, g->tdi_count, n * sizeof *counts, NULL),
       "copying the track-density image from the GPU");
    CK(cu->cuStreamSynchronize(NULL), "copying the track-density image from the GPU");
    for (size_t i = 0; i < n; i++) m->count[i] += counts[i];
    free(counts);
    return 0;
fail:
    free(counts);
    return -1;
}

void dm_ft_gpu_close(dm_ft_gpu *g)
{
    if (!g) return;
    if (g->cu) {
        const dm_cuda *cu = g->cu;
        for (int k = 0; k < 2; k++) {
            slot *s = &g->slots[k];
            if (s->stream) cu->cuStreamSynchronize(s->stream);
            CUdeviceptr all[] = {s->bufs,       s->ids,           s->out.verdict,  s->out.ends,
                                 s->out.rec_id, s->out.rec_start, s->out.rec_npts, s->out.rec_seed,
                                 s->out.xyz,    s->out.counters};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                if (all[i]) cu->cuMemFree(all[i]);
            if (s->stream) cu->cuStreamDestroy(s->stream);
        }
        CUdeviceptr all[] = {g->row, g->coef,      g->sh,          g->calib,     g->seed_vox,
                             g->roi, g->tdi_count, g->tdi_scratch, g->tdi_start, g->tdi_npts};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i]) cu->cuMemFree(all[i]);
        for (int k = 0; k < 2; k++) /* a copy into the stage may be under way after an error */
            if (g->copy[k]) {
                cu->cuStreamSynchronize(g->copy[k]);
                cu->cuStreamDestroy(g->copy[k]);
            }
        if (g->stage) cu->cuMemFreeHost(g->stage);
        dm_gpu_kernel_close(cu, &g->tdi_kern);
        dm_gpu_program_free(&g->tdi_prog);
        dm_gpu_kernel_close(cu, &g->kern);
        dm_gpu_program_free(&g->prog);
        dm_cuda_close(g->cu);
    }
    free(g);
}
