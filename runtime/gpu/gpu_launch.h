/* Running a compiled GPU program on one GPU: its context and kernel, input uploads, launches. */
#ifndef DIMOC_GPU_LAUNCH_H
#define DIMOC_GPU_LAUNCH_H

#include "gpu/cuda_api.h"
#include "gpu/gpu_compile.h"

/* One kernel of a loaded program, in the GPU's primary context. */
typedef struct dm_gpu_kernel {
    CUdevice dev;
    CUcontext ctx; /* NULL until retained */
    CUmodule mod;  /* NULL until loaded */
    CUfunction fn;
} dm_gpu_kernel;

/* On GPU `ordinal`: makes its primary context current for the calling thread, loads prog and
 * finds the kernel `name`.  Messages name the program ("loading the compiled " + prog_what)
 * and the kernel ("finding the " + kernel_what).  0, or -1 with the CUDA error; either way
 * dm_gpu_kernel_close releases what was taken. */
int dm_gpu_kernel_open(const dm_cuda *cu, int ordinal, const dm_gpu_program *prog, const char *name,
                       const char *prog_what, const char *kernel_what, dm_gpu_kernel *k);
/* Unloads the program and releases the context (nothing for what was never taken). */
void dm_gpu_kernel_close(const dm_cuda *cu, dm_gpu_kernel *k);

/* Allocates n bytes on the current GPU and copies host there, waiting for the copy (*d 0 and
 * nothing done for NULL or 0 bytes).  `what` names the data in messages ("allocating device
 * memory for WHAT", "copying WHAT to the GPU"); NULL leaves it out.  0, or -1. */
int dm_gpu_upload(const dm_cuda *cu, CUdeviceptr *d, const void *host, size_t n, const char *what);
/* An upload's messages: "allocating device memory for WHAT", "copying WHAT to the GPU" (without
 * " WHAT" for NULL). */
typedef struct {
    char alloc[200], copy[200];
} dm_gpu_upload_message;
void dm_gpu_upload_messages(const char *what, dm_gpu_upload_message *m);

/* Launches fn on `threads` threads, in blocks of `block` (the last one partly idle), on
 * stream; `what` for the message when it fails.  0, or -1. */
int dm_gpu_launch(const dm_cuda *cu, CUfunction fn, unsigned long long threads, unsigned block,
                  CUstream stream, void **args, const char *what);
/* The same, with shared_bytes of dynamic shared memory a block (at most 48 KB). */
int dm_gpu_launch_shared(const dm_cuda *cu, CUfunction fn, unsigned long long threads,
                         unsigned block, unsigned shared_bytes, CUstream stream, void **args,
                         const char *what);

#endif
