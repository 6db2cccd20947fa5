#include "fodtrack/fodtrack_gpu.h"

#include "gpu/gpu_compile.h"
#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"
#include "util/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_THREADS 128
#define RETRY 255         /* DM_FT_GPU_RETRY of gpu_fodtrack.cu */
#define MAX_BATCH (1L << 22)

static const char *const fodtrack_templates[] = {
    "fodtrack/gpu_fodtrack.cu", "fodtrack/ft_types.h",  "fodtrack/det_math.h",
    "fodtrack/fod_field.h",     "fodtrack/fod_track.h", "philox.h",
    NULL};
/* Double: no fused multiply-adds, every operation rounded as on the host (the same points). */
static const char *const double_options[] = {"--fmad=false", NULL};

/* dm_ft_gpu_out of gpu_fodtrack.cu, with device pointers. */
typedef struct {
    CUdeviceptr verdict, ends, rec_id, rec_start, rec_npts, rec_seed, xyz;
    unsigned long long cap_points;
    CUdeviceptr counters;
} gpu_out;

struct dm_ft_gpu {
    dm_cuda *cu;
    dm_gpu_set gs;
    dm_gpu_program prog;
    dm_gpu_kernel kern;
    dm_ft_ctx ctx; /* device pointers */
    CUdeviceptr row, coef, sh, calib, seed_vox, roi, bufs, ids;
    gpu_out out;
    int use_double, buf_points;
    long threads, max_batch;
    dm_ft_gpu_times times;
};

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

dm_ft_gpu *dm_ft_gpu_open(const dm_ft_plan *p, int use_double, const char *gpus,
                          long gpu_memory_mb)
{
    dm_ft_gpu *g = calloc(1, sizeof *g);
    g->use_double = use_double;
    g->buf_points = p->buf_points;
    g->cu = dm_cuda_open(1, 1);
    if (!g->cu) goto fail;
    const dm_cuda *cu = g->cu;
    if (dm_gpu_select(cu, gpus ? gpus : "0", &g->gs) != 0) goto fail;
    char prologue[192];
    snprintf(prologue, sizeof prologue,
             "#define DM_FT_DOUBLE %d\n#define DM_FT_LMAX %d\n#define DM_FT_NCOEF %d\n"
             "#include \"fodtrack/gpu_fodtrack.cu\"\n",
             use_double, p->fod.lmax, p->fod.ncoef);
    dm_gpu_source src = {.name = "fodtrack",
                         .what = "the FOD tracker",
                         .prologue = prologue,
                         .templates = fodtrack_templates,
                         .options = use_double ? double_options : NULL};
    double t0 = now_seconds();
    if (dm_gpu_compile_source(cu, &src, g->gs.arch, 1, &g->prog) != 0) goto fail;
    if (dm_gpu_kernel_open(cu, g->gs.ord[0], &g->prog, "dm_fodtrack_kernel", "FOD tracker",
                           "FOD tracking kernel", &g->kern) != 0)
        goto fail;
    g->times.compile = now_seconds() - t0;
    t0 = now_seconds();
    const dm_ft_fod *f = &p->fod;
    size_t nvox = (size_t)f->nx * f->ny * f->nz;
    if (dm_gpu_upload(cu, &g->row, f->row, nvox * sizeof(int), "the FOD") != 0 ||
        dm_gpu_upload(cu, &g->coef, f->coef, (size_t)f->nrows * f->ncoef * sizeof(float),
                      "the FOD") != 0 ||
        dm_gpu_upload(cu, &g->sh, &f->table, sizeof f->table, "the SH tables") != 0 ||
        (p->ctx.ncalib && dm_gpu_upload(cu, &g->calib, p->ctx.calib,
                                        3 * (size_t)p->ctx.ncalib * sizeof(double),
                                        "the calibration") != 0) ||
        dm_gpu_upload(cu, &g->seed_vox, p->ctx.seed_vox, p->ctx.nseed_vox * sizeof(int),
                      "the seeds") != 0 ||
        (p->roi_bytes &&
         dm_gpu_upload(cu, &g->roi, p->roi_data, (size_t)p->roi_bytes, "the regions") != 0))
        goto fail;
    g->ctx = p->ctx;
    g->ctx.fod.row = (const int *)(uintptr_t)g->row;
    g->ctx.fod.coef = (const float *)(uintptr_t)g->coef;
    g->ctx.fod.sh = (const dm_fod_sh_table *)(uintptr_t)g->sh;
    g->ctx.calib = (const double *)(uintptr_t)g->calib;
    g->ctx.seed_vox = (const int *)(uintptr_t)g->seed_vox;
    g->ctx.roi_data = (const unsigned char *)(uintptr_t)g->roi;

    /* resident threads, each with its point buffer; then the batch's outputs */
    int sms = 0, per_sm = 0;
    CUdevice dev = g->kern.dev;
    CK(cu->cuDeviceGetAttribute(&sms, DM_CU_ATTR_MULTIPROCESSOR_COUNT, dev),
       "reading the GPU's attributes");
    CK(cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, g->kern.fn, BLOCK_THREADS, 0),
       "reading the tracking kernel's occupancy");
    size_t budget = 0;
    if (dm_gpu_memory_budget(cu, gpu_memory_mb, &budget) != 0) goto fail;
    size_t rs = use_double ? sizeof(double) : sizeof(float);
    size_t per_thread = 3 * (size_t)g->buf_points * rs;
    g->threads = (long)sms * (per_sm > 0 ? per_sm : 1) * BLOCK_THREADS;
    while (g->threads > BLOCK_THREADS && (size_t)g->threads * per_thread > budget / 2)
        g->threads -= BLOCK_THREADS;
    CK(cu->cuMemAlloc(&g->bufs, (size_t)g->threads * per_thread),
       "allocating GPU memory for the streamlines being traced");
    size_t left = budget - (size_t)g->threads * per_thread;
    /* per id: verdict, ends, a record (24 bytes) and room for 32 points on average */
    size_t per_id = 3 + 24 + 8 + 32 * 12;
    g->max_batch = (long)(left / per_id);
    if (g->max_batch > MAX_BATCH) g->max_batch = MAX_BATCH;
    if (g->max_batch < 1024) {
        dm_set_error("track: the GPU's memory budget leaves no room for a batch of streamlines");
        goto fail;
    }
    size_t mb = (size_t)g->max_batch;
    g->out.cap_points = 32 * (unsigned long long)mb;
    CK(cu->cuMemAlloc(&g->out.verdict, mb), "allocating GPU memory for the batch");
    CK(cu->cuMemAlloc(&g->out.ends, 2 * mb), "allocating GPU memory for the batch");
    CK(cu->cuMemAlloc(&g->out.rec_id, mb * 8), "allocating GPU memory for the batch");
    CK(cu->cuMemAlloc(&g->out.rec_start, mb * 8), "allocating GPU memory for the batch");
    CK(cu->cuMemAlloc(&g->out.rec_npts, mb * 4), "allocating GPU memory for the batch");
    CK(cu->cuMemAlloc(&g->out.rec_seed, mb * 4), "allocating GPU memory for the batch");
    CK(cu->cuMemAlloc(&g->out.xyz, g->out.cap_points * 12), "allocating GPU memory for points");
    CK(cu->cuMemAlloc(&g->out.counters, 4 * 8), "allocating GPU memory for the batch");
    CK(cu->cuMemAlloc(&g->ids, mb * 8), "allocating GPU memory for the batch");
    g->times.upload = now_seconds() - t0;
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

/* One launch over n indices (ids first + i, or the uploaded ids list), its results appended to
 * b: verdicts and ends at b's index of each id, the accepted streamlines at the end of its
 * lists.  Indices whose points did not fit are left with verdict RETRY. */
static int launch(dm_ft_gpu *g, unsigned long long first, long n, int with_ids, dm_ft_batch *b,
                  unsigned char *verdict, unsigned char *ends)
{
    const dm_cuda *cu = g->cu;
    double t0 = now_seconds();
    CK(cu->cuMemsetD32Async(g->out.counters, 0, 8, NULL), "clearing the GPU's counters");
    unsigned long long nn = (unsigned long long)n;
    CUdeviceptr ids = with_ids ? g->ids : 0;
    void *args[] = {&g->ctx, &g->out, &g->bufs, &g->buf_points, &first, &nn, &ids};
    if (dm_gpu_launch(cu, g->kern.fn, (unsigned long long)g->threads, BLOCK_THREADS, NULL, args,
                      "the FOD tracking kernel") != 0)
        goto fail;
    CK(cu->cuStreamSynchronize(NULL), "running the FOD tracking kernel");
    g->times.kernel += now_seconds() - t0;
    t0 = now_seconds();
    unsigned long long counters[4];
    CK(cu->cuMemcpyDtoHAsync(counters, g->out.counters, sizeof counters, NULL),
       "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(verdict, g->out.verdict, (size_t)n, NULL), "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(ends, g->out.ends, 2 * (size_t)n, NULL), "copying from the GPU");
    long count = (long)counters[1];
    size_t used = counters[2] < g->out.cap_points ? counters[2] : g->out.cap_points;
    b->xyz = realloc(b->xyz, 3 * (b->npoints + used + 1) * sizeof *b->xyz);
    CK(cu->cuMemcpyDtoHAsync(b->id + b->count, g->out.rec_id, count * 8, NULL),
       "copying from the GPU");
    unsigned long long *start = malloc((count ? count : 1) * 8);
    CK(cu->cuMemcpyDtoHAsync(start, g->out.rec_start, count * 8, NULL), "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(b->npts + b->count, g->out.rec_npts, count * 4, NULL),
       "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(b->seed_index + b->count, g->out.rec_seed, count * 4, NULL),
       "copying from the GPU");
    CK(cu->cuMemcpyDtoHAsync(b->xyz + 3 * b->npoints, g->out.xyz, used * 12, NULL),
       "copying from the GPU");
    CK(cu->cuStreamSynchronize(NULL), "copying from the GPU");
    for (long i = 0; i < count; i++) b->start[b->count + i] = b->npoints + start[i];
    free(start);
    b->count += count;
    b->npoints += used;
    b->truncations += counters[3];
    g->times.download += now_seconds() - t0;
    return 0;
fail:
    return -1;
}

int dm_ft_gpu_batch(dm_ft_gpu *g, unsigned long long first, long n, dm_ft_batch *b)
{
    if (n > g->max_batch) return dm_set_error("track: a GPU batch of %ld ids is too large", n);
    dm_ft_batch_reset(b, first, n, 0);
    if (launch(g, first, n, 0, b, b->verdict, b->ends) != 0) return -1;
    /* streamlines whose points did not fit: again, alone, until all are in */
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
        long chunk = nr; /* a retry of one streamline always fits */
        if (g->cu->cuMemcpyHtoDAsync(g->ids, retry, chunk * 8, NULL) != 0 ||
            launch(g, 0, chunk, 1, b, v, e) != 0) {
            rc = dm_set_error("track: re-running streamlines on the GPU failed");
            break;
        }
        for (long k = 0; k < chunk; k++) {
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

void dm_ft_gpu_close(dm_ft_gpu *g)
{
    if (!g) return;
    if (g->cu) {
        const dm_cuda *cu = g->cu;
        CUdeviceptr all[] = {g->row,          g->coef,          g->sh,
                             g->calib,        g->seed_vox,      g->roi,
                             g->bufs,         g->ids,           g->out.verdict,
                             g->out.ends,     g->out.rec_id,    g->out.rec_start,
                             g->out.rec_npts, g->out.rec_seed,  g->out.xyz,
                             g->out.counters};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i]) cu->cuMemFree(all[i]);
        dm_gpu_kernel_close(cu, &g->kern);
        dm_gpu_program_free(&g->prog);
        dm_cuda_close(g->cu);
    }
    free(g);
}
