/* FOD tractography on a GPU: the kernel (templates/fodtrack/fod_track.h) compiled by NVRTC
 * (templates/fodtrack/gpu_fodtrack.cu), the FOD, seeds and regions uploaded once, then batches
 * of streamline ids traced by persistent threads. */
#ifndef DIMOC_FODTRACK_GPU_H
#define DIMOC_FODTRACK_GPU_H

#include "fodtrack/fodtrack_batch.h"
#include "fodtrack/fodtrack_plan.h"

typedef struct dm_ft_gpu dm_ft_gpu;

typedef struct dm_ft_gpu_times {
    double compile, upload, kernel, download;
} dm_ft_gpu_times;

/* Compiles (or finds in the cache) the tracker and uploads the plan; NULL with an error. */
dm_ft_gpu *dm_ft_gpu_open(const dm_ft_plan *p, int use_double, const char *gpus,
                          long gpu_memory_mb);
/* The most ids one batch may hold in the GPU's memory budget. */
long dm_ft_gpu_max_batch(const dm_ft_gpu *g);
/* The resident threads (a batch should be several times as many ids). */
long dm_ft_gpu_threads(const dm_ft_gpu *g);
/* Traces ids [first, first + n) into b.  0, or -1 with an error. */
int dm_ft_gpu_batch(dm_ft_gpu *g, unsigned long long first, long n, dm_ft_batch *b);
const char *dm_ft_gpu_device(const dm_ft_gpu *g);
const dm_ft_gpu_times *dm_ft_gpu_timing(const dm_ft_gpu *g);
void dm_ft_gpu_close(dm_ft_gpu *g);

#endif
