#include "commit/commit_gpu.h"

#include "gpu/gpu_compile.h"
#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"
#include "gpu/gpu_stage.h"
#include "util/error.h"
#include "util/progress.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the walk's types (templates/commit/commit_walk.h), for the dictionary's kernels' arguments */
#define DM_FN static inline __attribute__((unused))
#define DM_WALK_GROW(s, k) (-1)
#include "commit/commit_walk.h"
#undef DM_FN

#define BLOCK 256
#define STAGE_BYTES ((size_t)32 << 20) /* each of the two pinned buffers of the upload */

static const char *const commit_templates[] = {"commit/gpu_commit.cu", "commit/commit_ops.h",
                                               "commit/commit_walk.h", NULL};

enum {
    K_RUN_WEIGHTS,
    K_AX_ROWS,
    K_ATY_DOTS,
    K_ATY_BAND,
    K_BAND_CUT,
    K_PROX,
    K_GROUP,
    K_PROX_SUMS,
    K_NORMS,
    K_ADVANCE,
    K_EXTRAPOLATE,
    K_WALK_COUNT,
    K_WALK_CUT,
    K_WALK_PLACE,
    NK
};
static const char *const kernel_names[NK] = {
    "dm_commit_run_weights_kernel", "dm_commit_ax_rows_kernel",     "dm_commit_aty_dots_kernel",
    "dm_commit_aty_band_kernel",    "dm_commit_band_cut_kernel",    "dm_commit_prox_kernel",
    "dm_commit_group_kernel",       "dm_commit_prox_sums_kernel",   "dm_commit_norms_kernel",
    "dm_commit_advance_kernel",     "dm_commit_extrapolate_kernel", "dm_commit_walk_count_kernel",
    "dm_commit_walk_cut_kernel",    "dm_commit_walk_place_kernel"};

#define MAX_BANDS 64

struct dm_commit_gpu {
    dm_cuda *cu;
    dm_gpu_set gs;
    dm_gpu_program prog;
    dm_gpu_kernel k[NK];
    dm_commit_op op; /* device pointers */
    long ncols, nrows, nruns;
    CUdeviceptr arrays[40]; /* everything allocated: the operator's arrays, y, 8 vectors, part,
                             * the groups' 3 arrays, the column weights, the IC mask */
    int narrays;
    CUdeviceptr y, x, xhat, prev, g, ag, part;
    /* the residuals at XHAT (r, the gradient's), X (rx) and PREV (rp), in two arrays (as
     * commit_cpu.c's) */
    CUdeviceptr buf[2], r, rx, rp;
    CUdeviceptr runs; /* the runs' weights in A x, their dots in A^T y */
    /* A^T y's streamline part in bands of band_runs runs; cut: each streamline's bands */
    int bands;
    long band_runs;
    CUdeviceptr cut;
    const long *groups_of; /* the group_start of the groups uploaded */
    CUdeviceptr group_start, group_cols, group_w;
    const double *weights_of; /* the lasso's column weights uploaded (dm_commit_reg.col_w) */
    CUdeviceptr col_w;
    CUdeviceptr ic_fixed; /* dm_commit_gpu_fix_ic's mask */
    double *part_host;
    dm_gpu_stager *stage; /* the operator's upload, made ready with the context */
    int blocks;           /* of every grid-stride launch */
    int ns;               /* the measurements the program was built for */
    double setup;
};

static int up(dm_commit_gpu *g, CUdeviceptr *d, const void *host, size_t bytes)
{
    if (dm_gpu_upload(g->cu, d, host, bytes ? bytes : 1, "COMMIT's operator") != 0) return -1;
    g->arrays[g->narrays++] = *d;
    return 0;
}

/* As up, through the pinned buffers: the copy may still run until dm_gpu_stager_wait. */
static int up_staged(dm_commit_gpu *g, CUdeviceptr *d, const void *host, size_t bytes)
{
    if (dm_gpu_stager_put(g->stage, d, host, bytes ? bytes : 1, "COMMIT's operator") != 0)
        return -1;
    g->arrays[g->narrays++] = *d;
    return 0;
}

static int launch(dm_commit_gpu *g, int k, void **args)
{
    return dm_gpu_launch(g->cu, g->k[k].fn, (unsigned long long)g->blocks * BLOCK, BLOCK, 0, args,
                         "a COMMIT kernel");
}

/* The sums of `per` values per block that the last launch left in part. */
static int sums(dm_commit_gpu *g, int per, double *out)
{
    const dm_cuda *cu = g->cu;
    CK(cu->cuMemcpyDtoHAsync(g->part_host, g->part, (size_t)g->blocks * per * sizeof(double), 0),
       "copying from the GPU");
    CK(cu->cuStreamSynchronize(0), "running a COMMIT kernel");
    for (int k = 0; k < per; k++) out[k] = 0;
    for (int b = 0; b < g->blocks; b++)
        for (int k = 0; k < per; k++) out[k] += g->part_host[b * per + k];
    return 0;
fail:
    return -1;
}

/* out = A x - y (y 0: A x); *sq = ||out||^2 (sq NULL: not summed). */
static int ax(dm_commit_gpu *g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr out, double *sq)
{
    void *wa[] = {&g->op, &x, &g->runs};
    void *ra[] = {&g->op, &x, &g->runs, &y, &out, &g->part};
    if (launch(g, K_RUN_WEIGHTS, wa) != 0 || launch(g, K_AX_ROWS, ra) != 0) return -1;
    return sq ? sums(g, 1, sq) : 0;
}

static int start(void *ctx, const double *x0)
{
    dm_commit_gpu *g = ctx;
    const dm_cuda *cu = g->cu;
    size_t bytes = (size_t)g->ncols * sizeof(double);
    double *h = malloc(bytes ? bytes : 1);
    if (!h) return dm_set_error("commit: out of memory");
    for (long j = 0; j < g->ncols; j++) h[j] = x0[j] > 0 ? x0[j] : 0;
    int rc = 0;
    if (cu->cuMemcpyHtoDAsync(g->xhat, h, bytes, 0) != 0 ||
        cu->cuMemcpyHtoDAsync(g->prev, h, bytes, 0) != 0 || cu->cuStreamSynchronize(0) != 0)
        rc = dm_set_error("commit: copying the start to the GPU failed");
    free(h);
    return rc;
}

static int residual(void *ctx, int which, double *half_sq)
{
    dm_commit_gpu *g = ctx;
    CUdeviceptr x = which == DM_COMMIT_X ? g->x : g->xhat;
    if (which == DM_COMMIT_XHAT) { /* the start: XHAT = PREV */
        g->r = g->rp = g->buf[0];
        g->rx = g->buf[1];
    }
    double s;
    if (ax(g, x, g->y, which == DM_COMMIT_X ? g->rx : g->r, &s) != 0) return -1;
    *half_sq = 0.5 * s;
    return 0;
}

static int gradient(void *ctx)
{
    dm_commit_gpu *g = ctx;
    int band;
    void *da[] = {&g->op, &g->r, &g->runs, &g->g};
    if (launch(g, K_ATY_DOTS, da) != 0) return -1;
    void *ba[] = {&g->op, &g->runs, &g->cut, &g->bands, &band, &g->g};
    for (band = 0; band < g->bands; band++)
        if (launch(g, K_ATY_BAND, ba) != 0) return -1;
    return 0;
}

static int curvature(void *ctx, double *agag, double *gg)
{
    dm_commit_gpu *g = ctx;
    CUdeviceptr none = 0;
    if (ax(g, g->g, none, g->ag, agag) != 0) return -1;
    void *nr[] = {&g->g, &none, &g->ncols, &g->part};
    double s[2];
    if (launch(g, K_NORMS, nr) != 0 || sums(g, 2, s) != 0) return -1;
    *gg = s[1];
    return 0;
}

/* The prox step: each block's lasso (lambdas 0 without one; the columns' weights when reg has
 * them), the group lasso's shrink when reg has one, each block's constraint; *omega = Omega(X)
 * (commit_solve.h). */
static int prox(dm_commit_gpu *g, double step, const dm_commit_reg *reg, double *lin, double *sq,
                double *omega)
{
    double l_ic = reg ? reg->lambda : 0, l_ec = reg ? reg->lambda_ec : 0,
           l_iso = reg ? reg->lambda_iso : 0, s[3], om = 0;
    long nf = reg ? reg->nf : 0, ec_end = reg ? reg->ec_end : 0;
    unsigned free_blocks = reg ? reg->free_blocks : 0;
    int grouped = reg && reg->lambda_group > 0, finish = !grouped, ic_free = free_blocks & 1u;
    CUdeviceptr w = 0;
    if (reg && reg->col_w) {
        if (g->weights_of != reg->col_w) { /* the same weights for the whole fit: uploaded once */
            if (up(g, &g->col_w, reg->col_w, (size_t)g->ncols * sizeof(double)) != 0) return -1;
            g->weights_of = reg->col_w;
        }
        w = g->col_w;
    }
    void *args[] = {&g->xhat, &g->g, &step,        &l_ic,   &l_ec, &l_iso,    &nf,
                    &ec_end,  &w,    &free_blocks, &finish, &g->x, &g->ncols, &g->part};
    if (launch(g, K_PROX, args) != 0) return -1;
    if (grouped) {
        if (g->groups_of !=
            reg->group_start) { /* the same groups for the whole fit: uploaded once */
            long ng = reg->ngroups, nc = reg->group_start[ng];
            if (up(g, &g->group_start, reg->group_start, (size_t)(ng + 1) * sizeof(long)) != 0 ||
                up(g, &g->group_cols, reg->group_cols, (size_t)nc * sizeof(long)) != 0 ||
                up(g, &g->group_w, reg->group_w, (size_t)ng * sizeof(double)) != 0)
                return -1;
            g->groups_of = reg->group_start;
        }
        double sl = step * reg->lambda_group;
        long ng = reg->ngroups;
        void *ga[] = {&g->x, &g->group_start, &g->group_cols, &g->group_w, &ng,
                      &sl,   &ic_free,        &g->part};
        void *sa[] = {&g->xhat, &g->g,   &g->x, &l_ic,        &l_ec,     &l_iso,
                      &nf,      &ec_end, &w,    &free_blocks, &g->ncols, &g->part};
        if (launch(g, K_GROUP, ga) != 0 || sums(g, 1, &om) != 0 || launch(g, K_PROX_SUMS, sa) != 0)
            return -1;
    }
    if (sums(g, 3, s) != 0) return -1;
    *lin = s[0];
    *sq = s[1];
    *omega = reg ? s[2] + reg->lambda_group * om : 0;
    return 0;
}

static int prox_step(void *ctx, double step, double *lin, double *sq)
{
    double omega;
    return prox(ctx, step, NULL, lin, sq, &omega);
}

static int prox_step_reg(void *ctx, double step, const dm_commit_reg *reg, double *lin, double *sq,
                         double *omega)
{
    return prox(ctx, step, reg, lin, sq, omega);
}

/* G to the host (for the lambdas' scale). */
static int get_g(void *ctx, double *gh)
{
    dm_commit_gpu *g = ctx;
    const dm_cuda *cu = g->cu;
    CK(cu->cuMemcpyDtoHAsync(gh, g->g, (size_t)g->ncols * sizeof(double), 0),
       "copying from the GPU");
    CK(cu->cuStreamSynchronize(0), "copying from the GPU");
    return 0;
fail:
    return -1;
}

static int change(void *ctx, double *dx2, double *x2)
{
    dm_commit_gpu *g = ctx;
    void *args[] = {&g->x, &g->prev, &g->ncols, &g->part};
    double s[2];
    if (launch(g, K_NORMS, args) != 0 || sums(g, 2, s) != 0) return -1;
    *dx2 = s[0];
    *x2 = s[1];
    return 0;
}

static int advance(void *ctx, double a, double *half_sq)
{
    dm_commit_gpu *g = ctx;
    void *args[] = {&g->x, &g->prev, &g->xhat, &a, &g->ncols};
    void *ra[] = {&g->rx, &g->rp, &a, &g->nrows, &g->part};
    double s;
    if (launch(g, K_ADVANCE, args) != 0 || launch(g, K_EXTRAPOLATE, ra) != 0 || sums(g, 1, &s) != 0)
        return -1;
    g->r = g->rp; /* the kernel wrote R over R_PREV */
    g->rp = g->rx;
    g->rx = g->r; /* R is not needed after the gradient, before the next RX */
    *half_sq = 0.5 * s;
    return 0;
}

static int get_x(void *ctx, double *x)
{
    dm_commit_gpu *g = ctx;
    const dm_cuda *cu = g->cu;
    CK(cu->cuMemcpyDtoHAsync(x, g->x, (size_t)g->ncols * sizeof(double), 0),
       "copying from the GPU");
    CK(cu->cuStreamSynchronize(0), "copying from the GPU");
    return 0;
fail:
    return -1;
}

int dm_commit_gpu_set_y(dm_commit_gpu *g, const double *y)
{
    const dm_cuda *cu = g->cu;
    CK(cu->cuMemcpyHtoDAsync(g->y, y, (size_t)g->nrows * sizeof *y, 0), "copying to the GPU");
    CK(cu->cuStreamSynchronize(0), "copying to the GPU");
    return 0;
fail:
    return -1;
}

int dm_commit_gpu_fix_ic(dm_commit_gpu *g, const unsigned char *fixed)
{
    const dm_cuda *cu = g->cu;
    const size_t n = (size_t)g->op.nic * g->op.nf;
    if (!g->ic_fixed) {
        if (up(g, &g->ic_fixed, fixed, n) != 0) return -1;
    } else {
        CK(cu->cuMemcpyHtoDAsync(g->ic_fixed, fixed, n ? n : 1, 0), "copying to the GPU");
        CK(cu->cuStreamSynchronize(0), "copying to the GPU");
    }
    g->op.ic_fixed = (const unsigned char *)(uintptr_t)g->ic_fixed;
    return 0;
fail:
    return -1;
}

int dm_commit_gpu_ax(dm_commit_gpu *g, double *yhat)
{
    const dm_cuda *cu = g->cu;
    if (ax(g, g->x, 0, g->ag, NULL) != 0) return -1;
    CK(cu->cuMemcpyDtoHAsync(yhat, g->ag, (size_t)g->nrows * sizeof(double), 0),
       "copying from the GPU");
    CK(cu->cuStreamSynchronize(0), "copying from the GPU");
    return 0;
fail:
    return -1;
}

/* The solver's program for ns samples a voxel, its prologue in the caller's storage, as a run and
 * `dimoc warm` compile it. */
static dm_gpu_source solver(char *prologue, size_t size, int ns)
{
    static const char *const options[] = {"--fmad=false", NULL};
    snprintf(prologue, size, "#define DM_COMMIT_K %d\n#include \"commit/gpu_commit.cu\"\n",
             (ns + 31) / 32);
    return (dm_gpu_source){.name = "commit",
                           .what = "COMMIT's solver",
                           .prologue = prologue,
                           .templates = commit_templates,
                           .options = options};
}

int dm_commit_gpu_precompile(const dm_cuda *cu, int arch, int ns, int quiet)
{
    char prologue[128], label[48];
    const dm_gpu_source src = solver(prologue, sizeof prologue, ns);
    snprintf(label, sizeof label, "commit %d volumes", ns);
    const char *labels[1] = {label};
    return dm_gpu_precompile(cu, arch, &src, labels, 1, quiet);
}

dm_commit_gpu *dm_commit_gpu_prepare(int ns, const char *gpus, int threads)
{
    double t0 = dm_now_seconds();
    dm_commit_gpu *g = calloc(1, sizeof *g);
    if (!g) {
        dm_set_error("commit: out of memory");
        return NULL;
    }
    g->cu = dm_cuda_open(1, 1);
    if (!g->cu) goto fail;
    const dm_cuda *cu = g->cu;
    if (dm_gpu_select(cu, gpus ? gpus : "0", &g->gs) != 0) goto fail;
    char prologue[128];
    const dm_gpu_source src = solver(prologue, sizeof prologue, ns);
    if (dm_gpu_compile_source(cu, &src, g->gs.arch, 1, &g->prog) != 0) goto fail;
    for (int k = 0; k < NK; k++)
        if (dm_gpu_kernel_open(cu, g->gs.ord[0], &g->prog, kernel_names[k], "COMMIT's solver",
                               kernel_names[k], &g->k[k]) != 0)
            goto fail;
    int sms = 0;
    CK(cu->cuDeviceGetAttribute(&sms, DM_CU_ATTR_MULTIPROCESSOR_COUNT, g->k[0].dev),
       "reading the GPU's attributes");
    g->blocks = 8 * (sms > 0 ? sms : 1);
    CK(cu->cuMemAlloc(&g->part, (size_t)g->blocks * 3 * sizeof(double)), "allocating GPU memory");
    g->arrays[g->narrays++] = g->part;
    g->part_host = malloc((size_t)g->blocks * 3 * sizeof(double));
    if (!g->part_host) {
        dm_set_error("commit: out of memory");
        goto fail;
    }
    if (!(g->stage = dm_gpu_stager_open(cu, STAGE_BYTES, threads))) goto fail;
    g->ns = ns;
    g->setup = dm_now_seconds() - t0;
    return g;
fail:
    dm_commit_gpu_close(g);
    return NULL;
}

/* The per-voxel kernels read the response rows through L1: shared memory's share of it left at
 * its least (they use 64 bytes a block of it). */
static int prefer_cache(dm_commit_gpu *g)
{
    const dm_cuda *cu = g->cu;
    const int ks[2] = {K_AX_ROWS, K_ATY_DOTS};
    for (int i = 0; i < 2; i++)
        CK(cu->cuFuncSetAttribute(g->k[ks[i]].fn, DM_CU_FUNC_PREFERRED_CARVEOUT, 0),
           "setting a COMMIT kernel's cache");
    return 0;
fail:
    return -1;
}

/* A^T y's streamline part: in bands of runs whose dots fill a quarter of L2 each, where the
 * streamlines' segments are in run order (each band a stretch of every streamline's); else in
 * one. */
static int plan_bands(dm_commit_gpu *g)
{
    const dm_cuda *cu = g->cu;
    int l2 = 0, unsorted = 0;
    CK(cu->cuDeviceGetAttribute(&l2, DM_CU_ATTR_L2_CACHE_SIZE, g->k[0].dev),
       "reading the GPU's attributes");
    g->bands = 1;
    g->cut = 0;
    const double dots = (double)g->nruns * g->op.nic * sizeof(double);
    const double want = ceil(dots / (l2 > 0 ? l2 / 4.0 : 8e6));
    const int bands = want < 2 ? 1 : want > MAX_BANDS ? MAX_BANDS : (int)want;
    if (bands < 2 || g->op.nf == 0) return 0;
    long band_runs = (g->nruns + bands - 1) / bands;
    CUdeviceptr cut, flag;
    CK(cu->cuMemAlloc(&cut, (size_t)(bands - 1) * g->op.nf * sizeof(int)),
       "allocating GPU memory for COMMIT's vectors");
    g->arrays[g->narrays++] = cut;
    CK(cu->cuMemAlloc(&flag, sizeof(int)), "allocating GPU memory for COMMIT's vectors");
    g->arrays[g->narrays++] = flag;
    CK(cu->cuMemsetD32Async(flag, 0, 1, 0), "clearing GPU memory");
    int nb = bands;
    void *args[] = {&g->op, &band_runs, &nb, &cut, &flag};
    if (launch(g, K_BAND_CUT, args) != 0) return -1;
    CK(cu->cuMemcpyDtoHAsync(&unsorted, flag, sizeof(int), 0), "copying from the GPU");
    CK(cu->cuStreamSynchronize(0), "running a COMMIT kernel");
    if (unsorted) return 0;
    g->bands = bands;
    g->band_runs = band_runs;
    g->cut = cut;
    return 0;
fail:
    return -1;
}

int dm_commit_gpu_load(dm_commit_gpu *g, const dm_commit_operator *A, const double *y,
                       dm_commit_backend *B)
{
    double t0 = dm_now_seconds();
    const dm_cuda *cu = g->cu;
    const dm_commit_op *h = &A->op;
    if (h->ns != g->ns)
        return dm_set_error("commit: the GPU program was built for %d measurements, not %d", g->ns,
                            h->ns);
    /* the context is current in the thread that prepared it: made current in this one too */
    CK(cu->cuCtxSetCurrent(g->k[0].ctx), "selecting the GPU context");
    g->ncols = A->ncols;
    g->nrows = A->nrows;
    const long nv = h->nv, nseg = h->str_start[h->nf], ne = h->ne, nruns = A->nruns;
    g->op = *h;
    CUdeviceptr d;
#define UP(field, count)                                                                           \
    do {                                                                                           \
        if (up_staged(g, &d, h->field, (size_t)(count) * sizeof *h->field) != 0) return -1;        \
        g->op.field = (void *)(uintptr_t)d;                                                        \
    } while (0)
    UP(run_start, nv + 1);
    UP(run_first, nruns + 1);
    UP(run_dir, nruns);
    UP(seg_str, nseg);
    UP(seg_len, nseg);
    UP(str_start, h->nf + 1);
    UP(str_run, nseg);
    UP(str_len, nseg);
    UP(ec_start, nv + 1);
    UP(ec_dir, ne);
    UP(lut, ((long)(h->nic + h->nec) * h->ndirs + h->niso) * h->nsp);
    if (h->iso_index) UP(iso_index, nv);         /* --iso-mask */
    if (h->row_w) UP(row_w, (size_t)nv * h->ns); /* --confidence-map */
#undef UP
    g->op.ic_fixed = NULL; /* none at first; dm_commit_gpu_fix_ic uploads a mask */
    if (up_staged(g, &g->y, y, (size_t)g->nrows * sizeof *y) != 0 ||
        dm_gpu_stager_wait(g->stage) != 0)
        return -1;
    g->nruns = nruns;
    CUdeviceptr *vecs[] = {&g->x,      &g->xhat,   &g->prev, &g->g,
                           &g->buf[0], &g->buf[1], &g->ag,   &g->runs};
    for (int k = 0; k < 8; k++) {
        size_t n = (size_t)(k < 4 ? g->ncols : k < 7 ? g->nrows : nruns * h->nic) * sizeof(double);
        CK(cu->cuMemAlloc(vecs[k], n ? n : 8), "allocating GPU memory for COMMIT's vectors");
        CK(cu->cuMemsetD32Async(*vecs[k], 0, (n ? n : 8) / 4, 0), "clearing GPU memory");
        g->arrays[g->narrays++] = *vecs[k];
    }
    CK(cu->cuStreamSynchronize(0), "clearing GPU memory");
    if (prefer_cache(g) != 0 || plan_bands(g) != 0) return -1;
    *B = (dm_commit_backend){g,      start,   residual, gradient,      curvature, prox_step,
                             change, advance, get_x,    prox_step_reg, get_g};
    g->setup += dm_now_seconds() - t0;
    return 0;
fail:
    return -1;
}

const char *dm_commit_gpu_device(const dm_commit_gpu *g)
{
    return g->gs.device;
}

double dm_commit_gpu_setup_seconds(const dm_commit_gpu *g)
{
    return g->setup;
}

void dm_commit_gpu_close(dm_commit_gpu *g)
{
    if (!g) return;
    if (g->cu) {
        if (g->k[0].ctx) g->cu->cuCtxSetCurrent(g->k[0].ctx); /* prepared on another thread */
        dm_gpu_stager_close(g->stage);
        for (int i = 0; i < g->narrays; i++)
            if (g->arrays[i]) g->cu->cuMemFree(g->arrays[i]);
        for (int k = 0; k < NK; k++) dm_gpu_kernel_close(g->cu, &g->k[k]);
        dm_gpu_program_free(&g->prog);
        dm_cuda_close(g->cu);
    }
    free(g->part_host);
    free(g);
}

/* ---- the dictionary's cut ---- */

/* Device bytes a block's point and streamline take beyond its pieces (xyz; start, npoints,
 * count, at, length, norm, dest), and the pieces a point is allowed for (a step is rarely cut
 * into more than two). */
#define BYTES_PER_POINT 12
#define BYTES_PER_STREAMLINE 52
#define PIECE_BYTES (sizeof(dm_walk_piece) + 10) /* scratch, then the segment arrays */

/* Device arrays of one cut, freed together. */
typedef struct {
    const dm_cuda *cu;
    CUdeviceptr a[24];
    int n;
} dev_list;

static int dev_alloc(dev_list *l, CUdeviceptr *d, size_t bytes)
{
    const dm_cuda *cu = l->cu;
    CK(cu->cuMemAlloc(d, bytes ? bytes : 8), "allocating GPU memory for the dictionary");
    l->a[l->n++] = *d;
    return 0;
fail:
    *d = 0;
    return -1;
}

static int dev_up(dev_list *l, CUdeviceptr *d, const void *host, size_t bytes)
{
    const dm_cuda *cu = l->cu;
    if (dev_alloc(l, d, bytes) != 0) return -1;
    CK(cu->cuMemcpyHtoDAsync(*d, host, bytes, 0), "copying the dictionary's inputs to the GPU");
    return 0;
fail:
    return -1;
}

static int dev_down(const dm_cuda *cu, void *host, CUdeviceptr d, size_t bytes)
{
    CK(cu->cuMemcpyDtoHAsync(host, d, bytes, 0), "copying the dictionary from the GPU");
    CK(cu->cuStreamSynchronize(0), "copying the dictionary from the GPU");
    return 0;
fail:
    return -1;
}

/* Frees the arrays from index `keep` on. */
static void dev_free_from(dev_list *l, int keep)
{
    for (; l->n > keep; l->n--) l->cu->cuMemFree(l->a[l->n - 1]);
}

static int walk_launch(dm_commit_gpu *g, int k, void **args)
{
    return dm_gpu_launch(g->cu, g->k[k].fn, (unsigned long long)g->blocks * BLOCK, BLOCK, 0, args,
                         "the dictionary's walk");
}

/* The end of the block of streamlines from b0: as many as fit `room` device bytes with their
 * points and a piece and a half a point (at least one streamline). */
static long block_end(const dm_tck *t, long b0, long end, size_t room)
{
    long lo = b0 + 1, hi = end; /* the largest b1 in [lo, hi] that fits */
    while (lo < hi) {
        const long mid = lo + (hi - lo + 1) / 2;
        const double pts = (double)(t->start[mid] - t->start[b0]), str = (double)(mid - b0);
        if (pts * (BYTES_PER_POINT + 1.5 * PIECE_BYTES) + str * BYTES_PER_STREAMLINE <=
            (double)room)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Room for n segments in the host arrays of d (cap: their capacity, grown to at least n). */
static int host_room(dm_commit_dict *d, long n, long *cap)
{
    if (n <= *cap) return 0;
    long c = *cap ? *cap : n;
    while (c < n) c += c / 2;
    unsigned *v = realloc(d->seg_vox, (size_t)c * sizeof *v);
    if (v) d->seg_vox = v;
    unsigned short *r = realloc(d->seg_dir, (size_t)c * sizeof *r);
    if (r) d->seg_dir = r;
    float *l = realloc(d->seg_len, (size_t)c * sizeof *l);
    if (l) d->seg_len = l;
    if (!v || !r || !l) return dm_set_error("commit: out of memory for the dictionary");
    *cap = c;
    return 0;
}

int dm_commit_dict_cut_gpu(dm_commit_gpu *g, const dm_tck *t, long first, long end,
                           const dm_commit_grid *grid, const dm_commit_dirs *dirs,
                           const dm_commit_dict_options *o, dm_commit_dict *d)
{
    const long n = t->count;
    if ((size_t)grid->nx * grid->ny * grid->nz > UINT_MAX)
        return dm_set_error("commit: an image of more than %u voxels is not supported", UINT_MAX);
    const dm_cuda *cu = g->cu;
    const CUresult ctx = cu->cuCtxSetCurrent(g->k[0].ctx);
    if (ctx != 0) return dm_cuda_error(cu, ctx, "selecting the GPU context");
    if (dm_commit_dict_begin(d, n) != 0) return -1;
    const int threads = o->threads > 0 ? o->threads : 1;
    dev_list dev = {cu, {0}, 0};
    unsigned long long *bits = grid->mask ? dm_commit_mask_bits(grid, threads) : NULL;
    long *count = calloc((size_t)n + 1, sizeof *count), cap = 0;
    const long most = end - first; /* a block's per-streamline arrays at most */
    long *rel = malloc((size_t)(most ? most : 1) * sizeof *rel),
         *cnt = malloc((size_t)(most ? most : 1) * sizeof *cnt),
         *at = malloc((size_t)(most ? most : 1) * sizeof *at),
         *dest = malloc((size_t)(most ? most : 1) * sizeof *dest);
    double *len = malloc((size_t)(most ? most : 1) * sizeof *len);
    float *nrm = malloc((size_t)(most ? most : 1) * sizeof *nrm);
    int rc = -1;
    if ((grid->mask && !bits) || !count || !rel || !cnt || !at || !dest || !len || !nrm) {
        dm_set_error("commit: out of memory for the dictionary");
        goto done;
    }
    /* the grid, the mask's bits and the direction table on the GPU */
    dm_walk_geom geom;
    memset(&geom, 0, sizeof geom);
    geom.nx = grid->nx, geom.ny = grid->ny, geom.nz = grid->nz;
    memcpy(geom.w2v, grid->w2v, sizeof geom.w2v);
    memcpy(geom.shift, o->shift, sizeof geom.shift);
    geom.min_seg = o->min_seg_len;
    CUdeviceptr d_bits = 0, d_table, d_tedge, d_pedge;
    const size_t nw = (size_t)grid->nx * grid->ny * grid->nz / 64 + 1;
    if ((bits && dev_up(&dev, &d_bits, bits, nw * sizeof *bits) != 0) ||
        dev_up(&dev, &d_table, dirs->table, (size_t)dirs->nt * dirs->np * sizeof *dirs->table) ||
        dev_up(&dev, &d_tedge, dirs->t_edge, 2 * (size_t)dirs->nt * sizeof *dirs->t_edge) ||
        dev_up(&dev, &d_pedge, dirs->p_edge, 2 * (size_t)dirs->np * sizeof *dirs->p_edge))
        goto done;
    geom.mask_bits = (const unsigned long long *)d_bits;
    geom.dirs = (dm_walk_dirs){dirs->nt, dirs->np, (const unsigned short *)d_table,
                               (const double *)d_tedge, (const double *)d_pedge};
    const int fixed = dev.n;
    size_t room;
    if (dm_gpu_memory_budget(cu, 0, &room) != 0) goto done;
    long nseg = 0;
    for (long b0 = first; b0 < end;) {
        const long b1 = block_end(t, b0, end, room), nb = b1 - b0, p0 = t->start[b0];
        const size_t npts = (size_t)(t->start[b1] - p0);
        for (long i = 0; i < nb; i++) rel[i] = t->start[b0 + i] - p0;
        CUdeviceptr d_xyz, d_rel, d_np, d_cnt, d_at, d_pieces, d_len, d_nrm, d_dest, d_vox, d_dir,
            d_seg;
        const int put = dm_gpu_stager_put(g->stage, &d_xyz, t->xyz + 3 * p0,
                                          npts * 3 * sizeof(float), "the streamlines");
        if (d_xyz) dev.a[dev.n++] = d_xyz;
        if (put != 0) goto done;
        if (dev_up(&dev, &d_rel, rel, (size_t)nb * sizeof *rel) != 0 ||
            dev_up(&dev, &d_np, t->npoints + b0, (size_t)nb * sizeof *t->npoints) != 0 ||
            dev_alloc(&dev, &d_cnt, (size_t)nb * sizeof *cnt) != 0 ||
            dm_gpu_stager_wait(g->stage) != 0)
            goto done;
        /* pass 1: the pieces counted; each streamline's place in the scratch */
        void *a1[] = {&geom, &d_xyz, &d_rel, &d_np, (void *)&nb, &d_cnt};
        if (walk_launch(g, K_WALK_COUNT, a1) != 0 ||
            dev_down(cu, cnt, d_cnt, (size_t)nb * sizeof *cnt))
            goto done;
        long raw = 0;
        for (long i = 0; i < nb; i++) at[i] = raw, raw += cnt[i];
        /* pass 2: cut, sorted and merged */
        if (dev_up(&dev, &d_at, at, (size_t)nb * sizeof *at) != 0 ||
            dev_alloc(&dev, &d_pieces, (size_t)raw * sizeof(dm_walk_piece)) != 0 ||
            dev_alloc(&dev, &d_len, (size_t)nb * sizeof *len) != 0 ||
            dev_alloc(&dev, &d_nrm, (size_t)nb * sizeof *nrm) != 0)
            goto done;
        void *a2[] = {&geom, &d_xyz, &d_rel,    &d_np,  (void *)&nb,
                      &d_at, &d_cnt, &d_pieces, &d_len, &d_nrm};
        if (walk_launch(g, K_WALK_CUT, a2) != 0 ||
            dev_down(cu, cnt, d_cnt, (size_t)nb * sizeof *cnt) ||
            dev_down(cu, len, d_len, (size_t)nb * sizeof *len) ||
            dev_down(cu, nrm, d_nrm, (size_t)nb * sizeof *nrm))
            goto done;
        /* which are kept (as the host's cut decides) and where their segments go */
        const long seg0 = nseg;
        for (long i = 0; i < nb; i++) {
            const long s = b0 + i;
            if (cnt[i] < 0) {
                dm_set_error("commit: the GPU's dictionary walk ran out of room (a bug)");
                goto done;
            }
            dest[i] = -1;
            if (!(cnt[i] > 0 && len[i] > o->min_len && len[i] < o->max_len)) continue;
            d->kept[s] = 1;
            d->length[s] = (float)len[i];
            d->norm[s] = nrm[i];
            count[s] = cnt[i];
            dest[i] = nseg - seg0;
            nseg += cnt[i];
        }
        /* pass 3: the kept streamlines' segments in place, then to the host */
        const size_t kb = (size_t)(nseg - seg0);
        if (dev_up(&dev, &d_dest, dest, (size_t)nb * sizeof *dest) != 0 ||
            dev_alloc(&dev, &d_vox, kb * sizeof *d->seg_vox) != 0 ||
            dev_alloc(&dev, &d_dir, kb * sizeof *d->seg_dir) != 0 ||
            dev_alloc(&dev, &d_seg, kb * sizeof *d->seg_len) != 0)
            goto done;
        void *a3[] = {&d_pieces, &d_at, &d_cnt, &d_dest, (void *)&nb, &d_vox, &d_dir, &d_seg};
        if (walk_launch(g, K_WALK_PLACE, a3) != 0 || host_room(d, nseg, &cap) != 0 ||
            dm_gpu_stager_get(g->stage, d->seg_vox + seg0, d_vox, kb * sizeof *d->seg_vox,
                              "the dictionary") != 0 ||
            dm_gpu_stager_get(g->stage, d->seg_dir + seg0, d_dir, kb * sizeof *d->seg_dir,
                              "the dictionary") != 0 ||
            dm_gpu_stager_get(g->stage, d->seg_len + seg0, d_seg, kb * sizeof *d->seg_len,
                              "the dictionary") != 0)
            goto done;
        dev_free_from(&dev, fixed);
        b0 = b1;
    }
    if (host_room(d, nseg ? nseg : 1, &cap) != 0) goto done;
    dm_commit_dict_columns(d, count);
    rc = 0;
done:
    dev_free_from(&dev, 0);
    free(bits);
    free(count);
    free(rel);
    free(cnt);
    free(at);
    free(dest);
    free(len);
    free(nrm);
    if (rc != 0) dm_commit_dict_free(d);
    return rc;
}
