/* The GPU build of COMMIT's solver backend (runtime/commit/commit_gpu.c compiles it with NVRTC,
 * --fmad=false, so that A x rounds as on the host).  The prologue defines DM_COMMIT_K, the
 * samples a lane holds (ceil(ns / 32)).
 *
 * A x: a warp per voxel, its runs taken up to 32 at a time: lane j sums run j's weights (one run
 * per lane, into shared memory), then lane l adds samples l, l + 32, ... of every run's response row
 * in registers (each row read once, coalesced): the runs' weights are never stored in global
 * memory.  The same functions as the host's (commit_ops.h), each sum's terms in the same order.
 * A^T y: a warp per voxel for the dots of its direction runs and its EC and ISO entries (lanes
 * as for A x, the dots summed by shuffles in a fixed order: the same result every run), then a
 * thread per streamline over its segments' dots.
 * The vector operations of FISTA (commit_solve.h) reduce per block into `part`, summed on the
 * host in block order: deterministic. */
#define DM_FN static __device__ __forceinline__

/* a dot's lane shares summed, every lane getting the sum (the loops stay in step) */
static __device__ __forceinline__ double dm_commit_warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
#define DM_COMMIT_WARP_SUM(v) dm_commit_warp_sum(v)
#define DM_COMMIT_LEADER ((threadIdx.x & 31) == 0)
#include "commit/commit_ops.h"

#define WARPS 8 /* per block of 256 threads */

/* The block's sum of v (every thread's), a fixed tree; thread 0 holds it. */
static __device__ double block_sum(double v, double *shared)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    double s = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < WARPS; w++) s += shared[w];
    __syncthreads();
    return s;
}

/* dm_commit_ax_runs with one IC response (the stick): four runs' rows loaded before any is
 * added, so that their loads are in flight together (the loop's time is their latency); the
 * terms added in the same order, zero weights skipped, so the sums are the host's bit for bit. */
static __device__ void ax_runs_one_response(const dm_commit_op *A, const double *w,
                                            const unsigned short *dir, long n, int lane,
                                            double *acc)
{
    const int ns = A->ns;
    long j = 0;
    for (; j + 4 <= n; j += 4) {
        float v[4][DM_COMMIT_K];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const float *row = A->lut_ic + (long)dir[j + u] * ns;
#pragma unroll
            for (int k = 0; k < DM_COMMIT_K; k++)
                v[u][k] = lane + 32 * k < ns ? row[lane + 32 * k] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const double wu = w[j + u];
            if (wu == 0) continue;
#pragma unroll
            for (int k = 0; k < DM_COMMIT_K; k++)
                if (lane + 32 * k < ns) acc[k] += wu * (double)v[u][k];
        }
    }
    dm_commit_ax_runs(A, w + j, dir + j, n - j, lane, 32, DM_COMMIT_K, acc);
}

/* out = A x - y (y NULL: A x); part[block] = its share of ||out||^2.  Runs are taken `runs`
 * (<= 32) at a time; dynamic shared memory holds their nic weights and direction a warp. */
extern "C" __global__ void dm_commit_ax_kernel(dm_commit_op A, const double *x, const double *y,
                                               double *out, double *part, int runs)
{
    extern __shared__ double chunk[];
    __shared__ double shared[WARPS];
    const int lane = threadIdx.x & 31;
    double *w = chunk + (threadIdx.x >> 5) * runs * A.nic;
    unsigned short *dir =
        (unsigned short *)(chunk + WARPS * runs * A.nic) + (threadIdx.x >> 5) * runs;
    const long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long warps = ((long)gridDim.x * blockDim.x) >> 5;
    double sq = 0;
    for (long v = warp; v < A.nv; v += warps) {
        double acc[DM_COMMIT_K];
#pragma unroll
        for (int k = 0; k < DM_COMMIT_K; k++) acc[k] = 0;
        for (long r0 = A.run_start[v], r1 = A.run_start[v + 1]; r0 < r1; r0 += runs) {
            const long n = r1 - r0 < runs ? r1 - r0 : runs;
            if (lane < n) {
                dm_commit_run_weights(&A, x, r0 + lane, w + lane * A.nic);
                dir[lane] = A.run_dir[r0 + lane];
            }
            __syncwarp();
            if (A.nic == 1)
                ax_runs_one_response(&A, w, dir, n, lane, acc);
            else
                dm_commit_ax_runs(&A, w, dir, n, lane, 32, DM_COMMIT_K, acc);
            __syncwarp(); /* before the next runs overwrite w and dir */
        }
        dm_commit_ax_rest(&A, x, v, lane, 32, DM_COMMIT_K, acc);
#pragma unroll
        for (int k = 0; k < DM_COMMIT_K; k++) {
            const int s = lane + 32 * k;
            if (s < A.ns) {
                double r = acc[k] - (y ? y[v * A.ns + s] : 0.0);
                out[v * A.ns + s] = r;
                sq += r * r;
            }
        }
    }
    double b = block_sum(sq, shared);
    if (threadIdx.x == 0) part[blockIdx.x] = b;
}

/* A^T r, first part: the dots of every voxel's direction runs, and the EC and ISO entries of g. */
extern "C" __global__ void dm_commit_aty_voxel_kernel(dm_commit_op A, const double *r, double *dots,
                                                      double *g)
{
    const int lane = threadIdx.x & 31;
    const long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long warps = ((long)gridDim.x * blockDim.x) >> 5;
    for (long v = warp; v < A.nv; v += warps)
        dm_commit_aty_voxel(&A, r, v, lane, 32, DM_COMMIT_K, dots, g);
}

/* A^T r, second part: the IC entries, a thread per streamline. */
extern "C" __global__ void dm_commit_aty_streamline_kernel(dm_commit_op A, const double *dots,
                                                           double *g)
{
    for (long f = (long)blockIdx.x * blockDim.x + threadIdx.x; f < A.nf;
         f += (long)gridDim.x * blockDim.x)
        dm_commit_aty_streamline(&A, dots, f, g);
}

/* x = xhat - step g, soft-thresholded by step x column j's lasso threshold (its block's lambda,
 * IC [0, nf) l_ic, EC [nf, ec_end) l_ec, ISO the rest l_iso, 0: none; times w[j], w NULL: 1),
 * then with `finish` each block's constraint (dm_commit_project: free_blocks);
 * part[3 block + 0, 1, 2] = shares of <x - xhat, g>, ||x - xhat||^2 and sum_j lambda_j |x_j|.
 * Without finish (a group lasso shrinks the groups next) part is left alone. */
extern "C" __global__ void dm_commit_prox_kernel(const double *xhat, const double *g, double step,
                                                 double l_ic, double l_ec, double l_iso, long nf,
                                                 long ec_end, const double *w, unsigned free_blocks,
                                                 int finish, double *x, long n, double *part)
{
    __shared__ double shared[WARPS];
    double lin = 0, sq = 0, l1 = 0;
    for (long j = (long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long)gridDim.x * blockDim.x) {
        const double lam = dm_commit_col_lambda(j, nf, ec_end, l_ic, l_ec, l_iso, w);
        double v = dm_commit_soft_threshold(xhat[j] - step * g[j], step * lam);
        if (!finish) {
            x[j] = v;
            continue;
        }
        v = dm_commit_project(v, j, nf, ec_end, free_blocks);
        x[j] = v;
        double d = v - xhat[j];
        lin += d * g[j];
        sq += d * d;
        l1 += lam * fabs(v);
    }
    if (!finish) return;
    double a = block_sum(lin, shared), b = block_sum(sq, shared), c = block_sum(l1, shared);
    if (threadIdx.x == 0) {
        part[3 * blockIdx.x] = a;
        part[3 * blockIdx.x + 1] = b;
        part[3 * blockIdx.x + 2] = c;
    }
}

/* The group lasso's shrink (commit_solve.h), a thread per group: the group's entries of x
 * scaled by max(0, 1 - wl / ||x_g||) (wl = step lambda_g w_k), the negatives set to 0 unless
 * ic_free (the IC block without its non-negativity); part[block] = the block's share of
 * sum_k w_k ||x_{g_k}|| after it. */
extern "C" __global__ void dm_commit_group_kernel(double *x, const long *group_start,
                                                  const long *group_cols, const double *group_w,
                                                  long ngroups, double step_lambda, int ic_free,
                                                  double *part)
{
    __shared__ double shared[WARPS];
    double om = 0;
    for (long k = (long)blockIdx.x * blockDim.x + threadIdx.x; k < ngroups;
         k += (long)gridDim.x * blockDim.x) {
        double n2 = 0, m2 = 0, wl = step_lambda * group_w[k];
        for (long i = group_start[k]; i < group_start[k + 1]; i++)
            n2 += x[group_cols[i]] * x[group_cols[i]];
        double nrm = sqrt(n2), f = nrm <= wl ? 0 : (nrm - wl) / nrm;
        for (long i = group_start[k]; i < group_start[k + 1]; i++) {
            double v = x[group_cols[i]] * f;
            v = ic_free || v > 0 ? v : 0;
            x[group_cols[i]] = v;
            m2 += v * v;
        }
        om += group_w[k] * sqrt(m2);
    }
    double b = block_sum(om, shared);
    if (threadIdx.x == 0) part[blockIdx.x] = b;
}

/* After the group shrink: each block's constraint and part[3 block + 0, 1, 2] as
 * dm_commit_prox_kernel's. */
extern "C" __global__ void dm_commit_prox_sums_kernel(const double *xhat, const double *g,
                                                      double *x, double l_ic, double l_ec,
                                                      double l_iso, long nf, long ec_end,
                                                      const double *w, unsigned free_blocks, long n,
                                                      double *part)
{
    __shared__ double shared[WARPS];
    double lin = 0, sq = 0, l1 = 0;
    for (long j = (long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long)gridDim.x * blockDim.x) {
        double v = dm_commit_project(x[j], j, nf, ec_end, free_blocks);
        x[j] = v;
        double d = v - xhat[j];
        lin += d * g[j];
        sq += d * d;
        l1 += dm_commit_col_lambda(j, nf, ec_end, l_ic, l_ec, l_iso, w) * fabs(v);
    }
    double a = block_sum(lin, shared), b = block_sum(sq, shared), c = block_sum(l1, shared);
    if (threadIdx.x == 0) {
        part[3 * blockIdx.x] = a;
        part[3 * blockIdx.x + 1] = b;
        part[3 * blockIdx.x + 2] = c;
    }
}

/* part[2 block + 0, 1] = shares of ||a - b||^2 (b NULL: ||a||^2) and ||a||^2. */
extern "C" __global__ void dm_commit_norms_kernel(const double *a, const double *b, long n,
                                                  double *part)
{
    __shared__ double shared[WARPS];
    double d2 = 0, a2 = 0;
    for (long j = (long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long)gridDim.x * blockDim.x) {
        double d = a[j] - (b ? b[j] : 0.0);
        d2 += d * d;
        a2 += a[j] * a[j];
    }
    double s = block_sum(d2, shared), t = block_sum(a2, shared);
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = s;
        part[2 * blockIdx.x + 1] = t;
    }
}

/* xhat = x + a (x - prev), then prev = x. */
extern "C" __global__ void dm_commit_advance_kernel(const double *x, double *prev, double *xhat,
                                                    double a, long n)
{
    for (long j = (long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long)gridDim.x * blockDim.x) {
        xhat[j] = x[j] + a * (x[j] - prev[j]);
        prev[j] = x[j];
    }
}

/* ---- the dictionary (commit_walk.h): a thread per streamline, in three passes ---- */
#define DM_WALK_GROW(s, k) (-1) /* a sink is sized by the counting pass: never short */
#include "commit/commit_walk.h"

/* Pass 1: streamline s's pieces counted as they come (folded), into count[s].  Streamline s is
 * npoints[s] points from xyz + 3 start[s]. */
extern "C" __global__ void dm_commit_walk_count_kernel(dm_walk_geom g, const float *xyz,
                                                       const long *start, const long *npoints,
                                                       long n, long *count)
{
    for (long s = blockIdx.x * (long)blockDim.x + threadIdx.x; s < n;
         s += (long)gridDim.x * blockDim.x) {
        dm_walk_sink k = {0, 0, 0, 1, 1, 0, 0};
        double len = 0;
        dm_walk_line(&g, xyz + 3 * start[s], npoints[s], &k, &len);
        count[s] = k.n;
    }
}

/* Pass 2: the pieces again, into pieces[at[s], at[s] + count[s]), sorted and merged: count[s]
 * becomes the merged count (-1 had the sink been short), length[s] and norm[s] the
 * streamline's length and norm, as the host's cut computes them. */
extern "C" __global__ void dm_commit_walk_cut_kernel(dm_walk_geom g, const float *xyz,
                                                     const long *start, const long *npoints, long n,
                                                     const long *at, long *count,
                                                     dm_walk_piece *pieces, double *length,
                                                     float *norm)
{
    for (long s = blockIdx.x * (long)blockDim.x + threadIdx.x; s < n;
         s += (long)gridDim.x * blockDim.x) {
        dm_walk_sink k = {pieces + at[s], 0, count[s], 1, 0, 0, 0};
        double len = 0, nrm = 0;
        if (dm_walk_line(&g, xyz + 3 * start[s], npoints[s], &k, &len) != 0) {
            count[s] = -1;
            continue;
        }
        if (k.n > 0) {
            dm_walk_sort(k.p, NULL, k.n);
            k.n = dm_walk_merge(k.p, k.n, &nrm);
        }
        count[s] = k.n;
        length[s] = len;
        norm[s] = (float)nrm;
    }
}

/* Pass 3: each kept streamline's merged pieces (dest[s] >= 0) into the segment arrays from
 * dest[s] on. */
extern "C" __global__ void dm_commit_walk_place_kernel(const dm_walk_piece *pieces, const long *at,
                                                       const long *count, const long *dest, long n,
                                                       unsigned *seg_vox, unsigned short *seg_dir,
                                                       float *seg_len)
{
    for (long s = blockIdx.x * (long)blockDim.x + threadIdx.x; s < n;
         s += (long)gridDim.x * blockDim.x) {
        if (dest[s] < 0) continue;
        const dm_walk_piece *p = pieces + at[s];
        for (long i = 0; i < count[s]; i++) {
            seg_vox[dest[s] + i] = p[i].vox;
            seg_dir[dest[s] + i] = p[i].dir;
            seg_len[dest[s] + i] = p[i].len;
        }
    }
}
