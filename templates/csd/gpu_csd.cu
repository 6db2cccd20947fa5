/* The GPU build of the CSD solver (runtime/csd/csd_gpu.c compiles it with NVRTC): one thread
 * per voxel, templates/csd/csd_solve.h as the host runs it.  The includer defines `real` and the
 * problem's sizes DM_CSD_N (unknowns) and DM_CSD_K (constraints), so that each thread's
 * workspace is a fixed-size local array: the compiler interleaves local memory across the
 * threads of a warp, so a warp's lanes touching the same entry make one coalesced access. */
#define DM_FN static __device__ __forceinline__
#define DM_CSD_SUM_BY_ENTRY

#include "csd/csd_solve.h"

/* Y: m x nvox (measurement-major: consecutive threads read consecutive words); X: nvox x n. */
extern "C" __global__ void dm_csd_kernel(dm_csd_problem p, const real *__restrict__ Y, long nvox,
                                         real *__restrict__ X, unsigned char *__restrict__ status,
                                         int *__restrict__ iters)
{
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvox) return;
    double work[DM_CSD_WORK(DM_CSD_N, DM_CSD_K)];
    int iwork[DM_CSD_IWORK(DM_CSD_N, DM_CSD_K)];
    int it = 0;
    status[i] = (unsigned char)dm_csd_solve(&p, Y + i, nvox, X + i * DM_CSD_N, work, iwork, &it);
    iters[i] = it;
}
