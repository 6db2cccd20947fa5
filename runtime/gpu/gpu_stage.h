/* Uploads (and downloads) of large arrays from ordinary (pageable) host memory at the speed of pinned memory:
 * each array goes through two pinned staging buffers in turn, the host's threads copying the
 * next part into one while the GPU copies the last part out of the other.  The driver's own
 * copy from pageable memory runs at about a third of that. */
#ifndef DIMOC_GPU_STAGE_H
#define DIMOC_GPU_STAGE_H

#include "gpu/cuda_api.h"

#include <stddef.h>

typedef struct dm_gpu_stager dm_gpu_stager;

/* Two pinned buffers of `bytes` each and a stream for each, in the context current to the
 * calling thread; `threads` host threads copy into them.  NULL with the error set. */
dm_gpu_stager *dm_gpu_stager_open(const dm_cuda *cu, size_t bytes, int threads);
/* Allocates n bytes on the GPU (*d; 0 for NULL or 0 bytes) and starts copying host there.  The
 * copy may still run at the return: host must stay as it is until dm_gpu_stager_wait.  `what`
 * names the data in messages, as dm_gpu_upload's.  0, or -1. */
int dm_gpu_stager_put(dm_gpu_stager *s, CUdeviceptr *d, const void *host, size_t n,
                      const char *what);
/* Copies n bytes from the GPU (d) to host through the same buffers (waiting for the puts in
 * flight first), the GPU filling one while the host's threads empty the other; done at the
 * return.  `what` names the data in the message ("copying WHAT from the GPU").  0, or -1. */
int dm_gpu_stager_get(dm_gpu_stager *s, void *host, CUdeviceptr d, size_t n, const char *what);
/* Waits until every copy started has arrived.  0, or -1. */
int dm_gpu_stager_wait(dm_gpu_stager *s);
/* Frees the buffers and streams (the context current to the calling thread); NULL is nothing. */
void dm_gpu_stager_close(dm_gpu_stager *s);

/* Pinned host memory of `bytes` for the context current to the calling thread: huge pages
 * (io/bigalloc.h) touched on all threads, then registered with the driver, where that is
 * possible, else the driver's own allocation.  On an H200 host the driver's took 0.12-0.13 s
 * for each of a NODDI grid stage's two buffer sets (about 100 MB each), longer than the grid's
 * kernels, where most of that time is the kernel zeroing and pinning 4 KiB pages one by one.
 * 0, or -1 with the error set; freed by dm_gpu_pinned_free (a freed or failed one is nothing). */
typedef struct dm_gpu_pinned {
    void *host;
    int registered; /* 1: huge pages registered; 0: the driver's allocation */
} dm_gpu_pinned;
int dm_gpu_pinned_alloc(const dm_cuda *cu, size_t bytes, dm_gpu_pinned *out);
void dm_gpu_pinned_free(const dm_cuda *cu, dm_gpu_pinned *p);

#endif
