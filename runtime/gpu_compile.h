/* Run-time compilation of GPU fitters with NVRTC, cached on disk. */
#ifndef DIMOC_GPU_COMPILE_H
#define DIMOC_GPU_COMPILE_H

#include "cuda_api.h"
#include "model_info.h"

typedef struct dm_gpu_program {
    char *cubin;
    size_t size;
    double compile_seconds; /* 0 when it came from the cache */
    int cached;
} dm_gpu_program;

/* Compiles templates/gpu_fitter.cu with the model's CUDA source for compute capability
 * arch (e.g. 90), real_size 4 or 8, `lanes` lanes per voxel.  The cubin is cached under the
 * cache folder keyed by the sources, the options and the NVRTC version; use_cache 0 skips the
 * cache (tests).  0, or -1 with the first lines of the NVRTC log in dm_last_error(). */
int dm_gpu_compile(const dm_cuda *cu, const dm_model_info *mi, int arch, int real_size, int lanes,
                   int use_cache, dm_gpu_program *out);
void dm_gpu_program_free(dm_gpu_program *p);

#endif
