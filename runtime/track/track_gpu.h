/* dimoc track on GPUs: templates/track/gpu_tracker.cu (the same stepping kernel as the CPU path,
 * compiled by NVRTC) on every GPU of --gpus, each taking chunks of streamlines from a shared
 * queue.  The orientation samples and masks are uploaded once per GPU; counts are summed with
 * atomics on the device; matrix entries come back as keys and are merged into the host's
 * sparse matrices.  Results equal the CPU path's (same Philox streams, same float rounding). */
#ifndef DIMOC_TRACK_GPU_H
#define DIMOC_TRACK_GPU_H

#include "gpu/cuda_api.h"
#include "gpu/gpu_compile.h"
#include "track/track_run.h"

/* NVRTC-compiles the tracker for sm_<arch> (cached on disk unless use_cache is 0). */
int dm_track_gpu_compile(const dm_cuda *cu, int arch, int use_cache, dm_gpu_program *out);
/* `dimoc warm`: the tracker compiled into the cache for compute capability arch. */
int dm_track_gpu_precompile(const dm_cuda *cu, int arch, int quiet);

/* The GPU twin of dm_track_run (o->gpus, o->gpu_memory_mb); r->device names the GPUs. */
int dm_track_run_gpu(const dm_track_field *f, const dm_track_seeds *s, const dm_track_masks *m,
                     const dm_track_options *o, dm_track_result *r);

#endif
