/* The GPU build of the track-density mapping (runtime/fodtrack/fodtrack_gpu.c compiles it with
 * NVRTC and --fmad=false in both precisions of the tracker: tckmap's sampling is computed in
 * float, and a fused multiply-add would round a sample differently from the host and, once in a
 * while, put it in the neighbouring voxel). */
#define DM_FN static __device__ __forceinline__
#define DM_ATOMIC_ADD_U32(p, v) atomicAdd((p), (v))
#include "fodtrack/tdi_map.h"

/* The track-density image of the streamlines a launch left in xyz (the ones kept: their first
 * points and counts listed), a thread per streamline, each voxel counted once per streamline
 * (templates/fodtrack/tdi_map.h, the host's source too), by the grid's mode: grid.ratio >= 1
 * tckmap's samples at that upsampling ratio, 0 the exact walk. */
extern "C" __global__ void dm_fodtrack_tdi_kernel(dm_tdi_grid grid, const float *xyz,
                                                  const long *start, const long *npts, long n,
                                                  unsigned int *scratch, int cap)
{
    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = t; i < n; i += stride)
        dm_tdi_add(&grid, xyz + 3 * start[i], npts[i], scratch + t * cap, cap);
}
