/* The GPU run of the per-voxel CSD solver: templates/csd/gpu_csd.cu, compiled by NVRTC for the
 * problem's sizes and precision (cached), one thread per voxel. */
#ifndef DIMOC_CSD_GPU_H
#define DIMOC_CSD_GPU_H

#include "csd/csd_plan.h"
#include "gpu/cuda_api.h"
#include "gpu/gpu_compile.h"
#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"

#include <pthread.h>
#include <stddef.h>

/* A GPU made ready on a thread of its own -- driver and NVRTC loaded, the device chosen, its
 * primary context created -- while the caller reads its inputs, so that CUDA's start-up (a
 * few tenths of a second) overlaps the reading instead of following it. */
enum { DM_CSD_GPU_KEPT = 2 }; /* programs kept loaded: the passes' and the solve's */

typedef struct dm_csd_gpu_warm {
    pthread_t thread;
    int started, joined, ok;
    const char *gpus;
    dm_cuda *cu;
    dm_gpu_set gs;
    CUdevice dev;
    CUcontext ctx; /* the retained primary context; NULL when none */
    char error[512];
    struct dm_csd_gpu_kept { /* solver programs loaded, kept until dm_csd_gpu_warm_end */
        char prologue[256];
        dm_gpu_program prog;
        dm_gpu_kernel kern;
    } kept[DM_CSD_GPU_KEPT];
    int nkept;
} dm_csd_gpu_warm;

/* Starts the warm-up of the first GPU of `gpus` (NULL: GPU 0); its errors are reported by
 * dm_csd_gpu_run.  w must stay in place until dm_csd_gpu_warm_end. */
void dm_csd_gpu_warm_start(dm_csd_gpu_warm *w, const char *gpus);
/* Waits for the warm-up (when started) and releases what it took. */
void dm_csd_gpu_warm_end(dm_csd_gpu_warm *w);

typedef struct dm_csd_gpu_times {
    double compile, upload, solve, download; /* seconds */
    int cached;                              /* the program came from the disk cache */
    char device[256];
} dm_csd_gpu_times;

/* The plan's measurements of voxels from .. from + n into Y, measurement-major (n apart). */
typedef void (*dm_csd_fill)(void *ctx, size_t from, size_t n, double *Y);

/* As dm_csd_cpu_run, on the GPU that w made ready (waiting for it), the signals from `fill`
 * a chunk of voxels at a time while the GPU solves the chunk before; iters may be NULL.  0, or
 * -1 with dm_last_error(). */
int dm_csd_gpu_run(dm_csd_gpu_warm *w, const dm_csd_plan *p, dm_csd_fill fill, void *fill_ctx,
                   size_t nvox, size_t mask_first, int use_double, int max_iter, double *X,
                   unsigned char *status, int *iters, dm_csd_gpu_times *times);
/* `dimoc warm`: the solver's programs for lmax 8 -- single-shell in the precisions use_double[0]
 * (float) and [1] (double) ask for, multi-tissue with 2 and 3 tissues when double is asked for
 * (it solves in double) -- compiled into the cache for compute capability arch. */
int dm_csd_gpu_precompile(const dm_cuda *cu, int arch, const int use_double[2], int quiet);

#endif
