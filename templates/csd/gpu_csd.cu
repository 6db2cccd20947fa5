/* The GPU build of the CSD solver (runtime/csd/csd_gpu.c compiles it with NVRTC):
 * templates/csd/csd_solve.h as the host runs it.  The includer defines `real` and the
 * problem's sizes DM_CSD_N (unknowns) and DM_CSD_K (constraints), and DM_CSD_WARP for the hard
 * solver on a warp a voxel.
 *
 * Without DM_CSD_WARP, a thread a voxel (single-shell CSD), or a thread a run of DM_CSD_RUN
 * voxels (hard constraints whose workspace does not fit in shared memory): each thread's
 * workspace is a fixed-size local array, which the compiler interleaves across the threads of
 * a warp, so a warp's lanes touching the same entry make one coalesced access.
 *
 * With DM_CSD_WARP, a warp a run of DM_CSD_RUN voxels, one after the other, each starting from
 * the active set of the one before: the warp's 32 lanes share the voxel's workspace in shared
 * memory (the factor of Q_WW and the vectors; csd_solve.h says how the work is shared out),
 * where local memory would send every step's factor through DRAM. */
#define DM_FN static __device__ __forceinline__
#define DM_CSD_SUM_BY_ENTRY

#ifdef DM_CSD_WARP
#define DM_CSD_LANES 32
#define DM_CSD_LANE ((int)(threadIdx.x & 31u))
#define DM_CSD_SYNC() __syncwarp()
DM_FN double dm_csd_lanes_max_(double v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncwarp();
    return v;
}
DM_FN double dm_csd_lanes_min_(double v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmin(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncwarp();
    return v;
}
/* The reductions over the warp, every lane getting the result, each ending as DM_CSD_SYNC
 * does.  dm_csd_lanes_best_: the largest score and its index, the lowest index of equal
 * scores (index -1: none). */
DM_FN void dm_csd_lanes_best_(double *score, int *index)
{
    for (int o = 16; o > 0; o >>= 1) {
        const double s = __shfl_xor_sync(0xffffffffu, *score, o);
        const int i = __shfl_xor_sync(0xffffffffu, *index, o);
        if (i >= 0 && (*index < 0 || s > *score || (s == *score && i < *index))) {
            *score = s;
            *index = i;
        }
    }
    __syncwarp(); /* as a DM_CSD_SYNC: the lanes' reads before it are done */
}
#endif

#include "csd/csd_solve.h"

/* The signals arrive piece by piece while the kernel runs (csd_gpu.c): piece c holds the
 * voxels at run positions c piece ... (c + 1) piece - 1 (a voxel's run position is its index
 * plus lead), measurement-major with as many columns as it has voxels, from Y + c region.
 * *ready counts the pieces whole on the GPU; a run waits for its piece, which pieces are never
 * split across (piece is a multiple of the run). */
typedef struct dm_csd_pieces {
    const volatile int *ready;
    long piece, region;
} dm_csd_pieces;

/* The piece of the run that starts at run position q, once it is on the GPU: its signals,
 * *first the voxel of its first column, *stride its columns. */
DM_FN const real *dm_csd_piece_wait_(const real *Y, long nvox, int lead, dm_csd_pieces pc, long q,
                                     long *first, long *stride)
{
    const long c = q / pc.piece;
    while (pc.ready[0] <= c) __nanosleep(2000);
    __threadfence(); /* the piece's words after the count that says they are there */
    *first = c * pc.piece - lead > 0 ? c * pc.piece - lead : 0;
    const long end = (c + 1) * pc.piece - lead < nvox ? (c + 1) * pc.piece - lead : nvox;
    *stride = end - *first;
    return Y + c * pc.region;
}

#ifdef DM_CSD_WARP
#define WARPS DM_CSD_WARPS(DM_CSD_N, DM_CSD_K)

/* X: nvox x n.  Warp w of the grid solves the run of voxels w DM_CSD_RUN - lead ...
 * (w + 1) DM_CSD_RUN - lead - 1 (the first run lead voxels short). */
extern "C" __global__ void dm_csd_kernel(dm_csd_problem p, const real *__restrict__ Y, long nvox,
                                         int lead, dm_csd_pieces pieces, real *__restrict__ X,
                                         unsigned char *__restrict__ status,
                                         int *__restrict__ iters)
{
    __shared__ double work[WARPS][DM_CSD_HARD_WORK(DM_CSD_N)];
    __shared__ int iwork[WARPS][DM_CSD_IWORK(DM_CSD_N, DM_CSD_K)];
    const int w = (int)(threadIdx.x >> 5);
    const long q = ((long)blockIdx.x * WARPS + w) * DM_CSD_RUN, start = q - lead;
    if (start >= nvox) return;
    long first, stride;
    const real *Yc = dm_csd_piece_wait_(Y, nvox, lead, pieces, q, &first, &stride);
    int nact = 0;
    for (long i = start > 0 ? start : 0; i < start + DM_CSD_RUN && i < nvox; i++) {
        int it = 0;
        const int st = dm_csd_solve(&p, Yc + (i - first), stride, X + i * DM_CSD_N, work[w],
                                    iwork[w], &it, &nact);
        if (DM_CSD_LANE == 0) {
            status[i] = (unsigned char)st;
            iters[i] = it;
        }
    }
}
#else
/* X: nvox x n.  Thread t solves voxel t (single-shell), or the run of voxels t DM_CSD_RUN -
 * lead ... (t + 1) DM_CSD_RUN - lead - 1 (hard); consecutive threads read consecutive words of
 * a piece's rows. */
extern "C" __global__ void dm_csd_kernel(dm_csd_problem p, const real *__restrict__ Y, long nvox,
                                         int lead, dm_csd_pieces pieces, real *__restrict__ X,
                                         unsigned char *__restrict__ status,
                                         int *__restrict__ iters)
{
    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x, run = p.soft ? 1 : DM_CSD_RUN;
    const int lv = p.soft ? 0 : lead;
    const long q = t * run, start = q - lv;
    if (start >= nvox) return;
    long first, stride;
    const real *Yc = dm_csd_piece_wait_(Y, nvox, lv, pieces, q, &first, &stride);
    double work[DM_CSD_WORK(DM_CSD_N, DM_CSD_K)];
    int iwork[DM_CSD_IWORK(DM_CSD_N, DM_CSD_K)];
    int nact = 0;
    for (long i = start > 0 ? start : 0; i < start + run && i < nvox; i++) {
        int it = 0;
        status[i] = (unsigned char)dm_csd_solve(&p, Yc + (i - first), stride, X + i * DM_CSD_N,
                                                work, iwork, &it, &nact);
        iters[i] = it;
    }
}
#endif
