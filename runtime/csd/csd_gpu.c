/* CSD on a GPU (csd_gpu.h).  The voxels go in chunks that fit the GPU's memory budget (whole
 * runs of the hard solver's warm starts); the plan's matrices are uploaded once. */
#include "csd/csd_gpu.h"
#include "util/progress.h"

#include "csd/csd_cpu.h"
#include "csd/csd_solve.h"

#include "gpu/gpu_compile.h"
#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"
#include "gpu/gpu_stage.h"
#include "util/error.h"
#include "util/interrupt.h"

#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_THREADS 128
#define PIECES 16                      /* a chunk's signals go to the GPU in this many pieces */
#define PIECE_MIN 4096                 /* voxels of a piece at least */
#define STAGE_BYTES ((size_t)32 << 20) /* each of the two pinned buffers the FODs come back by */

static const char *const csd_templates[] = {"csd/gpu_csd.cu", "csd/csd_solve.h", NULL};
/* Double: no fused multiply-adds, so every operation rounds as the host's and the FODs match the
 * CPU's to the last bits (the soft solver's set of negative directions, a discrete choice, then
 * cannot differ).  Float is compared with a tolerance and keeps them. */
static const char *const double_options[] = {"--fmad=false", NULL};

/* 1 when the hard solver of n unknowns and k constraints runs a warp a voxel (its workspace
 * fits in a block's shared memory), 0 for a thread a run of voxels. */
static int warp_solver(int soft, int n, int k)
{
    return !soft && DM_CSD_WARPS(n, k) > 0;
}

/* The solver's program for n unknowns, k constraints and a precision, its prologue in the
 * caller's storage, as a run and `dimoc warm` compile it. */
static dm_gpu_source solver(char *prologue, size_t size, int use_double, int soft, int n, int k)
{
    snprintf(prologue, size,
             "#define real %s\n#define DM_CSD_N %d\n#define DM_CSD_K %d\n%s#include "
             "\"csd/gpu_csd.cu\"\n",
             use_double ? "double" : "float", n, k,
             warp_solver(soft, n, k) ? "#define DM_CSD_WARP\n" : "");
    return (dm_gpu_source){.name = "csd",
                           .what = "the CSD solver",
                           .prologue = prologue,
                           .templates = csd_templates,
                           .options = use_double ? double_options : NULL};
}

int dm_csd_gpu_precompile(const dm_cuda *cu, int arch, const int use_double[2], int quiet)
{
    /* lmax 8 (45 WM coefficients): single-shell in the precisions asked for; multi-tissue (in
     * double only) with one or two isotropic tissues besides WM (dwi2response dhollander's). */
    enum { LMAX8 = 45, DIRS = DM_CSD_CONSTRAINT_DIRS };
    static const char *const names[4] = {"csd single-shell float", "csd single-shell double",
                                         "csd msmt 2 tissues", "csd msmt 3 tissues"};
    char prologue[4][256];
    dm_gpu_source src[4];
    const char *labels[4];
    int n = 0;
    for (int v = 0; v < 4; v++) {
        if (!use_double[v < 2 ? v : 1]) continue; /* multi-tissue solves in double */
        const int iso = v < 2 ? 0 : v - 1;
        src[n] = solver(prologue[n], sizeof prologue[n], v != 0, v < 2, LMAX8 + iso, DIRS + iso);
        labels[n++] = names[v];
    }
    return dm_gpu_precompile(cu, arch, src, labels, n, quiet);
}

/* The kernel's view of dm_csd_problem (templates/csd/csd_solve.h), with device pointers. */
typedef struct {
    int n, m, k, soft;
    CUdeviceptr G, C, P, Qd, At, Hp, Ct;
    int max_iter;
    double tol, pivot_tol;
    CUdeviceptr Q;
} problem_d;
typedef struct {
    int n, m, k, soft;
    CUdeviceptr G, C, P, Qd, At, Hp, Ct;
    int max_iter;
    float tol, pivot_tol;
    CUdeviceptr Q;
} problem_f;
/* gpu_csd.cu's dm_csd_pieces */
typedef struct {
    CUdeviceptr ready;
    long piece, region;
} pieces_d;

static void *warm_up(void *arg)
{
    dm_csd_gpu_warm *w = arg;
    w->cu = dm_cuda_open(1, 1);
    if (w->cu && dm_gpu_select(w->cu, w->gpus, &w->gs) == 0) {
        const dm_cuda *cu = w->cu;
        CK(cu->cuDeviceGet(&w->dev, w->gs.ord[0]), "opening the GPU");
        CK(cu->cuDevicePrimaryCtxRetain(&w->ctx, w->dev), "creating a GPU context");
        w->ok = 1;
    }
fail:
    if (!w->ok) snprintf(w->error, sizeof w->error, "%s", dm_last_error());
    return NULL;
}

void dm_csd_gpu_warm_start(dm_csd_gpu_warm *w, const char *gpus)
{
    memset(w, 0, sizeof *w);
    w->gpus = gpus;
    w->started = pthread_create(&w->thread, NULL, warm_up, w) == 0;
    if (!w->started) {
        warm_up(w); /* no thread: warm up here and now */
        w->joined = 1;
    }
}

/* Waits for the warm-up; 0 when the GPU is ready, else -1 with its error. */
static int warm_wait(dm_csd_gpu_warm *w)
{
    if (w->started && !w->joined) {
        pthread_join(w->thread, NULL);
        w->joined = 1;
    }
    return w->ok ? 0 : dm_set_error("%s", w->error[0] ? w->error : "the GPU was not made ready");
}

void dm_csd_gpu_warm_end(dm_csd_gpu_warm *w)
{
    warm_wait(w);
    for (int i = 0; i < w->nkept; i++) {
        dm_gpu_kernel_close(w->cu, &w->kept[i].kern);
        dm_gpu_program_free(&w->kept[i].prog);
    }
    if (w->ctx) w->cu->cuDevicePrimaryCtxRelease(w->dev);
    dm_cuda_close(w->cu);
    memset(w, 0, sizeof *w);
}

/* The program of src on the warmed GPU, loaded once for the command: response estimation's
 * passes run the same solver up to ten times, then the solve its own. */
static int kept_kernel(dm_csd_gpu_warm *w, const dm_gpu_source *src, dm_csd_gpu_times *times,
                       CUfunction *fn)
{
    for (int i = 0; i < w->nkept; i++)
        if (!strcmp(w->kept[i].prologue, src->prologue)) {
            times->cached = 1;
            *fn = w->kept[i].kern.fn;
            return 0;
        }
    if (w->nkept == DM_CSD_GPU_KEPT) { /* the oldest goes */
        dm_gpu_kernel_close(w->cu, &w->kept[0].kern);
        dm_gpu_program_free(&w->kept[0].prog);
        memmove(&w->kept[0], &w->kept[1], (DM_CSD_GPU_KEPT - 1) * sizeof w->kept[0]);
        w->nkept--;
    }
    struct dm_csd_gpu_kept *k = &w->kept[w->nkept];
    memset(k, 0, sizeof *k);
    snprintf(k->prologue, sizeof k->prologue, "%s", src->prologue);
    if (dm_gpu_compile_source(w->cu, src, w->gs.arch, 1, &k->prog) != 0) return -1;
    if (dm_gpu_kernel_open(w->cu, w->gs.ord[0], &k->prog, "dm_csd_kernel", "CSD solver",
                           "CSD kernel", &k->kern) != 0) {
        dm_gpu_kernel_close(w->cu, &k->kern);
        dm_gpu_program_free(&k->prog);
        return -1;
    }
    w->nkept++;
    times->cached = k->prog.cached;
    *fn = k->kern.fn;
    return 0;
}

int dm_csd_gpu_run(dm_csd_gpu_warm *w, const dm_csd_plan *p, dm_csd_fill fill, void *fill_ctx,
                   size_t nvox, size_t mask_first, int use_double, int max_iter, double *X,
                   unsigned char *status, int *iters, dm_csd_gpu_times *times)
{
    memset(times, 0, sizeof *times);
    const int n = p->n, m = p->m, k = p->k;
    const size_t rs = use_double ? sizeof(double) : sizeof(float);
    int rc = -1;
    if (nvox == 0) return 0;
    double t_wait = dm_now_seconds();
    if (warm_wait(w) != 0) return -1;
    t_wait = dm_now_seconds() - t_wait;
    const dm_cuda *cu = w->cu;
    const dm_gpu_set gs = w->gs;
    CUfunction fn = NULL;
    CUdeviceptr dG = 0, dC = 0, dP = 0, dQ = 0, dAt = 0, dH = 0, dCt = 0, dQt = 0;
    CUdeviceptr dY = 0, dX = 0, dS = 0, dI = 0, dReady = 0;
    CUstream stream[2] = {NULL, NULL};
    double *hY = NULL;             /* a chunk's signals as the caller gathers them */
    void *hYf = NULL, *hXf = NULL; /* float's copies */
    dm_gpu_stager *stage = NULL;
    double *Qt = NULL;
    snprintf(times->device, sizeof times->device, "%s", gs.device);
    char prologue[256];
    const dm_gpu_source src = solver(prologue, sizeof prologue, use_double, p->soft, n, k);
    const int warp = warp_solver(p->soft, n, k);
    /* Voxels a thread (a warp for the warp solver): the hard solver's runs, as the CPU's. */
    const size_t run = p->soft ? 1 : DM_CSD_RUN;
    const unsigned block = warp ? 32 * DM_CSD_WARPS(n, k) : BLOCK_THREADS;
    double t0 = dm_now_seconds(), t_kernel = 0.0;
    if (kept_kernel(w, &src, times, &fn) != 0) goto fail;
    times->compile = dm_now_seconds() - t0 + t_wait; /* what of CUDA's start was not hidden */
    t0 = dm_now_seconds();
    CK(cu->cuCtxSetCurrent(w->ctx), "selecting the GPU context");
    {
        size_t ng = (size_t)n * m, nc = (size_t)k * n;
        void *G = use_double ? (void *)p->G : (void *)p->Gf;
        void *C = use_double ? (void *)p->C : (void *)p->Cf;
        void *P = use_double ? (void *)p->P : (void *)p->Pf;
        void *At = use_double ? (void *)p->At : (void *)p->Atf;
        void *H = use_double ? (void *)p->Hp : (void *)p->Hpf;
        void *Ct = use_double ? (void *)p->Ct : (void *)p->Ctf;
        if (dm_gpu_upload(cu, &dG, G, ng * rs, "the CSD matrices") != 0 ||
            dm_gpu_upload(cu, &dC, C, nc * rs, "the CSD matrices") != 0 ||
            dm_gpu_upload(cu, &dP, P, nc * rs, "the CSD matrices") != 0 ||
            dm_gpu_upload(cu, &dQ, use_double ? (void *)p->Qd : (void *)p->Qdf, (size_t)k * rs,
                          "the CSD matrices") != 0 ||
            dm_gpu_upload(cu, &dAt, At, ng * rs, "the CSD matrices") != 0 ||
            dm_gpu_upload(cu, &dH, H, (size_t)n * (n + 1) / 2 * rs, "the CSD matrices") != 0 ||
            dm_gpu_upload(cu, &dCt, Ct, nc * rs, "the CSD matrices") != 0)
            goto fail;
        /* The hard solver's table Q = C P', in double (the host's bits). */
        if (!p->soft && use_double &&
            (!(Qt = dm_csd_q_table(p, 0)) ||
             dm_gpu_upload(cu, &dQt, Qt, (size_t)k * k * sizeof *Qt, "the CSD matrices") != 0))
            goto fail;
    }
    /* The voxels go in chunks of whole runs (the hard solver's warm starts) that fit the GPU's
     * memory budget -- one, unless the subject is very large -- and each chunk in pieces:
     * the kernel starts once the first piece is on the GPU, and its runs wait for their own
     * piece (gpu_csd.cu) while the host gathers and copies the next ones. */
    size_t budget = 0;
    if (dm_gpu_memory_budget(cu, 0, &budget) != 0) goto fail;
    const size_t per_voxel = (size_t)(m + n) * rs + 1 + sizeof(int);
    size_t chunk = budget / 2 / per_voxel;
    if (chunk > nvox + 2 * run) chunk = nvox + 2 * run; /* room for the first run's lead */
    if (chunk > ((size_t)1 << 22)) chunk = (size_t)1 << 22;
    chunk = chunk / run * run; /* whole runs: each chunk starts a run */
    if (chunk < run) chunk = run;
    size_t piece = (chunk + PIECES - 1) / PIECES;
    if (piece < PIECE_MIN) piece = PIECE_MIN;
    piece = (piece + run - 1) / run * run;
    if (piece > chunk) piece = chunk;
    const size_t npieces = (chunk + piece - 1) / piece;
    /* Each piece's rows from a boundary of 64 words: no cache line holds two pieces' words. */
    const size_t region = (piece * (size_t)m + 63) / 64 * 64;
    /* The runs count from voxel -lead (csd_cpu.h): the first chunk is lead voxels short of
     * whole runs, the others start runs. */
    const int lead0 = p->soft ? 0 : (int)(mask_first % DM_CSD_RUN);
    CK(cu->cuStreamCreate(&stream[0], 0), "creating a GPU stream");
    CK(cu->cuStreamCreate(&stream[1], 0), "creating a GPU stream");
    CK(cu->cuMemAlloc(&dY, npieces * region * rs), "allocating GPU memory for the signals");
    CK(cu->cuMemAlloc(&dX, chunk * n * rs), "allocating GPU memory for the FODs");
    CK(cu->cuMemAlloc(&dS, chunk), "allocating GPU memory for the status");
    CK(cu->cuMemAlloc(&dI, chunk * sizeof(int)), "allocating GPU memory for the status");
    CK(cu->cuMemAlloc(&dReady, sizeof(int)), "allocating GPU memory");
    /* A copy from pageable memory is staged before it returns: one host buffer serves. */
    if (!(hY = malloc(piece * m * sizeof(double))) ||
        (!use_double && (!(hYf = malloc(piece * m * sizeof(float))) ||
                         !(hXf = malloc(chunk * n * sizeof(float)))))) {
        dm_set_error("out of memory for %zu voxels' signals", piece);
        goto fail;
    }
    problem_d pd = {n, m, k, p->soft, dG, dC, dP, dQ, dAt, dH, dCt, max_iter, 1e-10, 1e-12, dQt};
    problem_f pf = {n, m, k, p->soft, dG, dC, dP, dQ, dAt, dH, dCt, max_iter, 1e-10f, 1e-12f, 0};
    pieces_d pc = {dReady, (long)piece, (long)region};
    const CUstream copies = stream[0], kernel = stream[1];
    times->upload = dm_now_seconds() - t0; /* the matrices and the buffers */
    for (size_t first = 0; first < nvox;) {
        const int lead = first == 0 ? lead0 : 0;
        const size_t cn = nvox - first < chunk - lead ? nvox - first : chunk - lead;
        CK(cu->cuMemsetD32Async(dReady, 0, 1, copies), "starting the CSD kernel");
        for (size_t c = 0; c * piece < lead + cn; c++) {
            if (dm_stop_requested()) {
                dm_stop_error();
                goto fail;
            }
            /* piece c: voxels (of the chunk) from c piece - lead to (c + 1) piece - lead */
            const size_t from = c * piece > (size_t)lead ? c * piece - lead : 0;
            const size_t end = (c + 1) * piece - lead < cn ? (c + 1) * piece - lead : cn;
            double t1 = dm_now_seconds();
            fill(fill_ctx, first + from, end - from, hY);
            const void *up = hY;
            if (!use_double) {
                float *f = hYf;
#pragma omp parallel for schedule(static)
                for (size_t i = 0; i < (end - from) * m; i++) f[i] = (float)hY[i];
                up = f;
            }
            CK(cu->cuMemcpyHtoDAsync(dY + c * region * rs, up, (end - from) * m * rs, copies),
               "copying the signals to the GPU");
            CK(cu->cuMemsetD32Async(dReady, (unsigned)(c + 1), 1, copies),
               "copying the signals to the GPU");
            if (c == 0) { /* the kernel, its runs waiting for the pieces still to come */
                CK(cu->cuStreamSynchronize(copies), "copying the signals to the GPU");
                times->upload += dm_now_seconds() - t1;
                t1 = dm_now_seconds();
                long nv = (long)cn;
                int lv = lead;
                void *args[] = {
                    use_double ? (void *)&pd : (void *)&pf, &dY, &nv, &lv, &pc, &dX, &dS, &dI};
                const unsigned long long threads = (lead + cn + run - 1) / run * (warp ? 32 : 1);
                if (dm_gpu_launch(cu, fn, threads, block, kernel, args, "the CSD kernel") != 0)
                    goto fail;
                t_kernel = t1;
            }
        }
        /* The FODs come back through two pinned buffers (gpu_stage.h): 0.01 s for a subject's,
         * where a copy to pageable memory took 0.1 s (H200); made as the kernel runs. */
        const size_t back = chunk * n * rs < STAGE_BYTES ? chunk * n * rs : STAGE_BYTES;
        if (!stage && !(stage = dm_gpu_stager_open(cu, back, omp_get_max_threads()))) goto fail;
        CK(cu->cuStreamSynchronize(kernel), "running the CSD kernel");
        times->solve += dm_now_seconds() - t_kernel;
        t0 = dm_now_seconds();
        void *hx = use_double ? (void *)(X + first * n) : hXf;
        if (dm_gpu_stager_get(stage, hx, dX, cn * n * rs, "the FODs") != 0) goto fail;
        CK(cu->cuMemcpyDtoHAsync(status + first, dS, cn, copies), "copying from the GPU");
        if (iters)
            CK(cu->cuMemcpyDtoHAsync(iters + first, dI, cn * sizeof(int), copies),
               "copying from the GPU");
        CK(cu->cuStreamSynchronize(copies), "copying the FODs from the GPU");
        if (!use_double) {
            const float *f = hXf;
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < cn * n; i++) X[first * n + i] = f[i];
        }
        times->download += dm_now_seconds() - t0;
        first += cn;
    }
    rc = 0;
fail:
    free(hY);
    free(hYf);
    free(hXf);
    free(Qt);
    if (w->ctx) cu->cuCtxSetCurrent(w->ctx);
    if (rc != 0 && dReady && stream[0]) /* a kernel waiting for pieces that will not come: let go */
        cu->cuMemsetD32Async(dReady, (unsigned)INT_MAX, 1, stream[0]);
    dm_gpu_stager_close(stage);
    for (int b = 0; b < 2; b++)
        if (stream[b]) {
            cu->cuStreamSynchronize(stream[b]); /* a failed run's copies and kernels: done */
            cu->cuStreamDestroy(stream[b]);
        }
    CUdeviceptr all[] = {dG, dC, dP, dQ, dAt, dH, dCt, dQt, dY, dX, dS, dI, dReady};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]) cu->cuMemFree(all[i]);
    return rc;
}
