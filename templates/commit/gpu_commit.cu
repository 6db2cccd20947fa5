/* The GPU build of COMMIT's solver backend (runtime/commit/commit_gpu.c compiles it with NVRTC,
 * --fmad=false, so that the dictionary's walk and the runs' weights round as on the host; the
 * products' fused multiply-adds are asked for by name).  The prologue defines DM_COMMIT_K,
 * ceil(ns / 32).
 *
 * The products are bound less by the segment records' bytes than by what each record leads to:
 * a response row of ns floats per run (7 M runs, 3.5 GB of rows a product on the bench's case)
 * and a gather per segment (x in A x, the runs' dots in A^T y).  So (Nsight Compute figures in
 * docs/performance.md):
 *   - the response tables' rows (one array, each row padded to 4 floats: commit_kernels.h) are
 *     read as float4 through L1 (the per-voxel kernels leave L1 its largest share: commit_gpu.c);
 *   - A x: the runs' weights first (dm_commit_run_weights_kernel: a warp's lanes compute 32
 *     consecutive segment products at a time, records read coalesced and gathers in flight
 *     together, then each lane sums its run's in order: the host's sums bit for bit), then a
 *     warp per voxel adds each term's weight times its row, in the host's order of terms
 *     (commit_ops.h) but by fused multiply-adds (A x rounds apart from the host's in the last
 *     bits);
 *   - A^T y: a warp per voxel forms its terms' dots with its residual, 8 at a time reduced over
 *     the warp together (a fixed tree: the same result every run); then each streamline's IC
 *     entries from its segments' dots, in bands of runs whose dots fit a quarter of L2 (a
 *     streamline's segments are listed in run order, so each band is a stretch of them).
 * The vector operations of FISTA (commit_solve.h) reduce per block into `part`, summed on the
 * host in block order: deterministic. */
#define DM_FN static __device__ __forceinline__
#include "commit/commit_ops.h"

#define WARPS 8 /* per block of 256 threads (the grid-stride kernels) */
#define FULL 0xffffffffu

/* The block's sum of v (every thread's), a fixed tree; thread 0 holds it. */
static __device__ double block_sum(double v, double *shared)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    double s = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) s += shared[w];
    __syncthreads();
    return s;
}

#define RUN_WINDOW 256 /* segment products a warp holds in shared memory */

/* A x, first part: w[r nic + c] = run r's weight for IC response c (dm_commit_run_weights: the
 * sum of its segments' length x x_(c nf + f), in their order).  A warp takes 32 runs at a
 * time. */
extern "C" __global__ void __launch_bounds__(256)
    dm_commit_run_weights_kernel(dm_commit_op A, const double *x, double *w)
{
    __shared__ double prod[WARPS][RUN_WINDOW];
    const int lane = threadIdx.x & 31;
    double *p = prod[threadIdx.x >> 5];
    const long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long warps = ((long)gridDim.x * blockDim.x) >> 5, nruns = A.run_start[A.nv];
    for (long r0 = warp * 32; r0 < nruns; r0 += warps * 32) {
        const long n = nruns - r0 < 32 ? nruns - r0 : 32, r = r0 + lane;
        const long q0 = A.run_first[r0], q1 = A.run_first[r0 + n];
        const long my0 = lane < n ? A.run_first[r] : 0, my1 = lane < n ? A.run_first[r + 1] : 0;
        for (int c = 0; c < A.nic; c++) {
            const double *xc = x + (long)c * A.nf;
            double s = 0;
            for (long b = q0; b < q1; b += RUN_WINDOW) {
                const long e = b + RUN_WINDOW < q1 ? b + RUN_WINDOW : q1;
                for (long q = b + lane; q < e; q += 32)
                    p[q - b] = (double)A.seg_len[q] * xc[A.seg_str[q]];
                __syncwarp();
                const long lo = my0 > b ? my0 : b, hi = my1 < e ? my1 : e;
                for (long q = lo; q < hi; q++) s += p[q - b];
                __syncwarp(); /* before the next window overwrites p */
            }
            if (lane < n) w[r * A.nic + c] = s;
        }
    }
}

/* The response rows are read as float4 (rows of nsp floats, ns rounded up to a multiple of 4,
 * the pad 0: commit_kernels.h): lane l takes samples 4 l .. 4 l + 3, then those 128 on, ...
 * (DM_COMMIT_K4 float4 a lane). */
#define DM_COMMIT_K4 ((DM_COMMIT_K + 3) / 4)

static __device__ __forceinline__ float4 row_quad(const float *row, int c, int nsp)
{
    return 4 * c < nsp ? __ldg((const float4 *)row + c) : make_float4(0.f, 0.f, 0.f, 0.f);
}

/* A x, second part: out = A x - y (y NULL: A x) from the runs' weights w and x; part[block] =
 * the block's share of ||out||^2.  A warp per voxel takes its terms 32 at a time (a lane each:
 * weight and row), then adds them in order to its samples, four rows loaded before they are
 * added (their loads in flight together), each by one fused multiply-add and without a branch
 * (a zero weight adds an exact 0: the rows are finite), so the sums round apart from the host's
 * in the last bits. */
extern "C" __global__ void dm_commit_ax_rows_kernel(dm_commit_op A, const double *x,
                                                    const double *w, const double *y, double *out,
                                                    double *part)
{
    __shared__ double red[WARPS];
    const int lane = threadIdx.x & 31, ns = A.ns, nsp = A.nsp;
    const long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long warps = ((long)gridDim.x * blockDim.x) >> 5;
    double sq = 0;
    for (long v = warp; v < A.nv; v += warps) {
        const dm_commit_terms T = dm_commit_terms_of(&A, v);
        double acc[DM_COMMIT_K4][4];
#pragma unroll
        for (int c = 0; c < DM_COMMIT_K4; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0;
        for (int u0 = 0; u0 < T.n; u0 += 32) {
            double wl = 0; /* lanes past the last term: weight 0, adding nothing */
            int tl = 0;
            if (u0 + lane < T.n) {
                long at;
                int ic;
                tl = (int)dm_commit_term(&A, &T, u0 + lane, &at, &ic);
                wl = ic ? w[at] : x[at];
            }
            const int m = T.n - u0 < 32 ? T.n - u0 : 32;
            for (int j = 0; j < m; j += 4) {
                double wq[4];
                float4 val[4][DM_COMMIT_K4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    wq[u] = __shfl_sync(FULL, wl, (j + u) & 31);
                    const float *row = A.lut + (long)__shfl_sync(FULL, tl, (j + u) & 31) * nsp;
#pragma unroll
                    for (int c = 0; c < DM_COMMIT_K4; c++)
                        val[u][c] = row_quad(row, lane + 32 * c, nsp);
                }
#pragma unroll
                for (int u = 0; u < 4; u++)
#pragma unroll
                    for (int c = 0; c < DM_COMMIT_K4; c++) {
                        acc[c][0] = __fma_rn(wq[u], (double)val[u][c].x, acc[c][0]);
                        acc[c][1] = __fma_rn(wq[u], (double)val[u][c].y, acc[c][1]);
                        acc[c][2] = __fma_rn(wq[u], (double)val[u][c].z, acc[c][2]);
                        acc[c][3] = __fma_rn(wq[u], (double)val[u][c].w, acc[c][3]);
                    }
            }
        }
#pragma unroll
        for (int c = 0; c < DM_COMMIT_K4; c++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int s = 4 * (lane + 32 * c) + e;
                if (s >= ns) continue;
                const long i = v * ns + s;
                double a = acc[c][e];
                if (A.row_w) a *= (double)A.row_w[i];
                a -= y ? y[i] : 0.0;
                out[i] = a;
                sq += a * a;
            }
    }
    const double b = block_sum(sq, red);
    if (threadIdx.x == 0) part[blockIdx.x] = b;
}

/* The warp's sums of p[0 .. 8) (each lane's shares), reduced together: lane l ends with the sum
 * of p[(l >> 2) & 7] (the same bits in its four lanes). */
static __device__ __forceinline__ double warp_sum8(double p[8], int lane)
{
#pragma unroll
    for (int h = 4, bit = 16; h > 0; h >>= 1, bit >>= 1) {
        const bool up = lane & bit;
#pragma unroll
        for (int i = 0; i < h; i++) {
            const double send = up ? p[i] : p[i + h], keep = up ? p[i + h] : p[i];
            p[i] = keep + __shfl_xor_sync(FULL, send, bit);
        }
    }
    p[0] += __shfl_xor_sync(FULL, p[0], 2);
    return p[0] + __shfl_xor_sync(FULL, p[0], 1);
}

/* A^T r, first part: each voxel's terms' dots with its residual (weighed by row_w), into dots
 * (IC terms) and g (EC and ISO columns).  A warp per voxel, lanes with samples as in A x, the
 * dots formed 8 at a time and reduced over the warp together (a fixed tree).  Held to 64
 * registers (four blocks an SM): 12% faster on an H200 than at its own 68, for 16 bytes of
 * spills. */
extern "C" __global__ void __launch_bounds__(256, 4)
    dm_commit_aty_dots_kernel(dm_commit_op A, const double *r, double *dots, double *g)
{
    const int lane = threadIdx.x & 31, ns = A.ns, nsp = A.nsp;
    const long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long warps = ((long)gridDim.x * blockDim.x) >> 5;
    for (long v = warp; v < A.nv; v += warps) {
        const dm_commit_terms T = dm_commit_terms_of(&A, v);
        double yk[DM_COMMIT_K4][4];
#pragma unroll
        for (int c = 0; c < DM_COMMIT_K4; c++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int s = 4 * (lane + 32 * c) + e;
                const long i = v * ns + s;
                yk[c][e] = s < ns ? r[i] * (A.row_w ? (double)A.row_w[i] : 1.0) : 0.0;
            }
        for (int u0 = 0; u0 < T.n; u0 += 32) {
            long at = 0;
            int ic = 0, tl = 0;
            if (u0 + lane < T.n) tl = (int)dm_commit_term(&A, &T, u0 + lane, &at, &ic);
            const int m = T.n - u0 < 32 ? T.n - u0 : 32;
            for (int j0 = 0; j0 < m; j0 += 8) {
                double p[8];
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    const float *row = A.lut + (long)__shfl_sync(FULL, tl, j0 + u) * nsp;
                    double s = 0;
#pragma unroll
                    for (int c = 0; c < DM_COMMIT_K4; c++) {
                        const float4 q = row_quad(row, lane + 32 * c, nsp);
                        s = __fma_rn((double)q.x, yk[c][0], s);
                        s = __fma_rn((double)q.y, yk[c][1], s);
                        s = __fma_rn((double)q.z, yk[c][2], s);
                        s = __fma_rn((double)q.w, yk[c][3], s);
                    }
                    p[u] = s;
                }
                const double d = warp_sum8(p, lane);
                const int k = j0 + ((lane >> 2) & 7);
                const long at_k = __shfl_sync(FULL, at, k);
                const int ic_k = __shfl_sync(FULL, ic, k);
                if ((lane & 3) == 0 && k < m) (ic_k ? dots : g)[at_k] = d;
            }
        }
    }
}

/* For the bands of A^T r's second part: cut[(b - 1) nf + f] = streamline f's first segment in
 * band b (runs from b band_runs on), counted from its first, for b = 1 .. bands - 1; *unsorted
 * = 1 where a streamline's segments are not in run order (then bands cannot be used). */
extern "C" __global__ void dm_commit_band_cut_kernel(dm_commit_op A, long band_runs, int bands,
                                                     int *cut, int *unsorted)
{
    for (long f = (long)blockIdx.x * blockDim.x + threadIdx.x; f < A.nf;
         f += (long)gridDim.x * blockDim.x) {
        const long q0 = A.str_start[f], q1 = A.str_start[f + 1];
        unsigned prev = 0;
        int b = 1;
        for (long q = q0; q < q1; q++) {
            const unsigned r = A.str_run[q];
            if (r < prev) *unsorted = 1;
            prev = r;
            for (; b < bands && r >= (unsigned long)b * band_runs; b++)
                cut[(long)(b - 1) * A.nf + f] = (int)(q - q0);
        }
        for (; b < bands; b++) cut[(long)(b - 1) * A.nf + f] = (int)(q1 - q0);
    }
}

/* A^T r, second part, band `band` of `bands` (dm_commit_band_cut_kernel's cut; NULL for one
 * band): each streamline's IC entries of g go on with the sum of its segments in the band.  A
 * warp takes 32 streamlines, and their stretches of the band four at a time, eight lanes over
 * each stretch's segments together (records read in runs, the dots' gathers in flight together),
 * summed over the eight by a fixed tree; the last band applies the IC mask. */
extern "C" __global__ void dm_commit_aty_band_kernel(dm_commit_op A, const double *dots,
                                                     const int *cut, int bands, int band, double *g)
{
    const int lane = threadIdx.x & 31, last = band == bands - 1;
    const long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long warps = ((long)gridDim.x * blockDim.x) >> 5;
    for (long f0 = warp * 32; f0 < A.nf; f0 += warps * 32) {
        const long f = f0 + lane;
        const int n = A.nf - f0 < 32 ? (int)(A.nf - f0) : 32;
        long a = 0, b = 0;
        if (lane < n) {
            const long q = A.str_start[f];
            a = band == 0 ? q : q + cut[(long)(band - 1) * A.nf + f];
            b = last ? A.str_start[f + 1] : q + cut[(long)band * A.nf + f];
        }
        for (int k = 0; k < A.nic; k++) {
            double mine = 0; /* lane l: streamline f0 + l's sum in the band */
            for (int s0 = 0; s0 < n; s0 += 4) {
                /* lanes 8 i .. 8 i + 7 over streamline f0 + s0 + i's stretch (lanes past n: a
                 * = b = 0, none) */
                const int sub = lane & 7;
                const long as = __shfl_sync(FULL, a, (s0 + (lane >> 3)) & 31);
                const long bs = __shfl_sync(FULL, b, (s0 + (lane >> 3)) & 31);
                double sum = 0;
                for (long q = as + sub; q < bs; q += 8)
                    sum += (double)A.str_len[q] * dots[(long)A.str_run[q] * A.nic + k];
                for (int o = 4; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL, sum, o);
                const double got = __shfl_sync(FULL, sum, ((lane - s0) & 3) << 3);
                if (lane >= s0 && lane < s0 + 4) mine = got;
            }
            if (lane >= n) continue;
            const long j = (long)k * A.nf + f;
            const double s = band == 0 ? mine : g[j] + mine;
            g[j] = last && A.ic_fixed && A.ic_fixed[j] ? 0.0 : s;
        }
    }
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

/* rp = dm_commit_extrapolate(rx, rp, a), the residual at the extrapolated point written over the
 * residual at the previous one; part[block] = its share of ||rp||^2 after. */
extern "C" __global__ void dm_commit_extrapolate_kernel(const double *rx, double *rp, double a,
                                                        long n, double *part)
{
    __shared__ double shared[WARPS];
    double sq = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x) {
        const double v = dm_commit_extrapolate(rx[i], rp[i], a);
        rp[i] = v;
        sq += v * v;
    }
    const double b = block_sum(sq, shared);
    if (threadIdx.x == 0) part[blockIdx.x] = b;
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
