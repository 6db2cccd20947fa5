/* FOD tractography on a GPU: the kernel (templates/fodtrack/fod_track.h) compiled by NVRTC
 * (templates/fodtrack/gpu_fodtrack.cu), the FOD, seeds and regions uploaded once, then batches
 * of streamline ids traced by persistent threads.  Two batches may be under way, each in its
 * own slot (stream, point buffers, outputs): the GPU traces one while the host writes the
 * other.  The track-density image is mapped on the GPU from the points a batch left there. */
#ifndef DIMOC_FODTRACK_GPU_H
#define DIMOC_FODTRACK_GPU_H

#include "fodtrack/fodtrack_batch.h"
#include "fodtrack/fodtrack_plan.h"
#include "fodtrack/tdi.h"
#include "gpu/cuda_api.h"

typedef struct dm_ft_gpu dm_ft_gpu;

typedef struct dm_ft_gpu_times {
    double compile, upload, wait, download; /* seconds; wait: the host waiting for kernels */
} dm_ft_gpu_times;

/* Compiles (or finds in the cache) the tracker and uploads the plan; NULL with an error. */
dm_ft_gpu *dm_ft_gpu_open(const dm_ft_plan *p, int use_double, const char *gpus,
                          long gpu_memory_mb);
/* The most ids one batch may hold in the GPU's memory budget. */
long dm_ft_gpu_max_batch(const dm_ft_gpu *g);
/* The resident threads (a batch should be several times as many ids). */
long dm_ft_gpu_threads(const dm_ft_gpu *g);
/* Starts tracing ids [first, first + n) (n <= max_batch) in the free slot; at most two batches
 * are under way.  0, or -1 with an error. */
int dm_ft_gpu_submit(dm_ft_gpu *g, unsigned long long first, long n);
/* Batches submitted and not yet collected. */
int dm_ft_gpu_pending(const dm_ft_gpu *g);
/* Waits for the oldest batch under way and puts it, complete and sorted, in b (streamlines
 * whose points did not fit are traced again first), its points moved by `threads` host
 * threads.  0, or -1 with an error. */
int dm_ft_gpu_collect(dm_ft_gpu *g, dm_ft_batch *b, int threads);
/* Track-density mapping on the GPU into a copy of m's grid (counts from 0). */
int dm_ft_gpu_tdi_start(dm_ft_gpu *g, const dm_tdi *m);
/* Maps the first `kept` streamlines of b, the batch just collected: those whose points are
 * still on the GPU there, the others (traced again after an overflow) on the host into m. */
int dm_ft_gpu_tdi_add(dm_ft_gpu *g, const dm_ft_batch *b, long kept, dm_tdi *m, int threads);
/* Adds the GPU's counts into m. */
int dm_ft_gpu_tdi_finish(dm_ft_gpu *g, dm_tdi *m);
const char *dm_ft_gpu_device(const dm_ft_gpu *g);
const dm_ft_gpu_times *dm_ft_gpu_timing(const dm_ft_gpu *g);
void dm_ft_gpu_close(dm_ft_gpu *g);
/* `dimoc warm`: the tracker's programs for tckgen's defaults (lmax 8, --samples 4), each
 * algorithm with and without ACT, in the precisions use_double[0] (float) and [1] (double) ask
 * for, and the track-density mapping, compiled into the cache for compute capability arch. */
int dm_ft_gpu_precompile(const dm_cuda *cu, int arch, const int use_double[2], int quiet);

#endif
