/* The GPU build of the tracker (runtime/track/track_gpu.c compiles it with NVRTC, --fmad=false so
 * that every float operation rounds as on the host: streamlines match the CPU's step for
 * step).  The stepping is templates/track/track_kernel.h, the accumulation track_gpu_gather.h. */
#define DM_FN static __device__ __forceinline__
#define DM_ATOMIC_ADD_U32(p, v) atomicAdd((p), (v))
#define DM_ATOMIC_ADD_U64(p, v) atomicAdd((p), (unsigned long long)(v))

#include "maths/philox.h"
#include "track/track_kernel.h"
#include "track/track_gpu_gather.h"

/* Persistent threads: each takes the next streamline of the launch from a shared counter as soon
 * as its last one ends, so that the long tail of streamline lengths (roughly exponential: Xu
 * et al.) does not leave lanes idle until a whole block is done (dm_tg_thread).  persistent 0
 * (a benchmark knob): static assignment instead, thread t taking t, t + threads, ...
 * Streamline i of the launch is first + i, or ids[i] when ids is given (the re-runs of
 * overflowed streamlines). */
extern "C" __global__ void dm_track_kernel(dm_track_ctx c, dm_track_gpu_out o,
                                           dm_track_gpu_scratch s, unsigned long long first,
                                           unsigned long long n, const unsigned long long *ids,
                                           int what, unsigned long long *next, int persistent)
{
    const unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    dm_track_gpu_scratch mine = s;
    mine.a = s.a + t * s.la;
    mine.b = s.b + t * s.lb;
    mine.set = s.set + (t << s.set_bits);
    for (int i = 0; i < (1 << s.set_bits); i++) mine.set[i] = -1;
    dm_track_loop loop, *lp = 0;
    if (s.loop_keys) {
        loop.keys = s.loop_keys + t * s.loop_cap;
        loop.used = s.loop_used + t * s.loop_cap;
        loop.dirs = s.loop_dirs + 3 * t * s.loop_cap;
        loop.cap = s.loop_cap;
        loop.nused = 0;
        for (int i = 0; i < s.loop_cap; i++) loop.keys[i] = -1;
        lp = &loop;
    }
    unsigned long long st[DM_TG_NSTATS];
    for (int i = 0; i < DM_TG_NSTATS; i++) st[i] = 0;
    dm_tg_thread(&c, &o, &mine, lp, first, n, ids, what, next, persistent, t, stride, st);
    __shared__ unsigned long long block_st[DM_TG_NSTATS];
    if (threadIdx.x < DM_TG_NSTATS) block_st[threadIdx.x] = 0;
    __syncthreads();
    for (int i = 0; i < DM_TG_NSTATS; i++)
        if (st[i]) atomicAdd(&block_st[i], st[i]);
    __syncthreads();
    if (threadIdx.x < DM_TG_NSTATS && block_st[threadIdx.x])
        atomicAdd(&o.stats[threadIdx.x], block_st[threadIdx.x]);
}
