/* The GPU tracker's per-streamline code (templates/track/track_gpu_gather.h) built for the host:
 * for its types in runtime/track_gpu.c and for tests that run it serially against the CPU
 * path.  The "atomics" here are plain additions: one thread only. */
#ifndef DIMOC_TRACK_GPU_HOST_H
#define DIMOC_TRACK_GPU_HOST_H

#include "track/track_kernel_host.h"

static inline unsigned int dm_host_add_u32(unsigned int *p, unsigned int v)
{
    unsigned int old = *p;
    *p = old + v;
    return old;
}
static inline unsigned long long dm_host_add_u64(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = *p;
    *p = old + v;
    return old;
}
#define DM_ATOMIC_ADD_U32(p, v) dm_host_add_u32((p), (v))
#define DM_ATOMIC_ADD_U64(p, v) dm_host_add_u64((p), (v))
#include "track/track_gpu_gather.h"

#endif
