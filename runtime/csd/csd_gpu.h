/* The GPU run of the per-voxel CSD solver: templates/gpu_csd.cu, compiled by NVRTC for the
 * problem's sizes and precision (cached), one thread per voxel. */
#ifndef DIMOC_CSD_GPU_H
#define DIMOC_CSD_GPU_H

#include "csd/csd_plan.h"

#include <stddef.h>

typedef struct dm_csd_gpu_times {
    double compile, upload, solve, download; /* seconds */
    int cached;                              /* the program came from the disk cache */
    char device[256];
} dm_csd_gpu_times;

/* As dm_csd_cpu_run, on the first GPU of `gpus` (NULL: GPU 0).  0, or -1 with
 * dm_last_error(). */
int dm_csd_gpu_run(const dm_csd_plan *p, const double *Y, size_t nvox, int use_double,
                   const char *gpus, int max_iter, double *X, unsigned char *status, int *iters,
                   dm_csd_gpu_times *times);

#endif
