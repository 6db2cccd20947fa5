/* Running a compiled GPU program on one GPU (see gpu_launch.h); the fitter's and the tracker's
 * per-GPU threads share it. */
#include "gpu/gpu_launch.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>

int dm_gpu_kernel_open(const dm_cuda *cu, int ordinal, const dm_gpu_program *prog, const char *name,
                       const char *prog_what, const char *kernel_what, dm_gpu_kernel *k)
{
    char loading[200], finding[200];
    snprintf(loading, sizeof loading, "loading the compiled %s", prog_what);
    snprintf(finding, sizeof finding, "finding the %s", kernel_what);
    memset(k, 0, sizeof *k);
    CK(cu->cuDeviceGet(&k->dev, ordinal), "opening the GPU");
    CK(cu->cuDevicePrimaryCtxRetain(&k->ctx, k->dev), "creating a GPU context");
    CK(cu->cuCtxSetCurrent(k->ctx), "selecting the GPU context");
    CK(cu->cuModuleLoadData(&k->mod, prog->cubin), loading);
    CK(cu->cuModuleGetFunction(&k->fn, k->mod, name), finding);
    return 0;
fail:
    return -1;
}

void dm_gpu_kernel_close(const dm_cuda *cu, dm_gpu_kernel *k)
{
    if (k->mod) cu->cuModuleUnload(k->mod);
    if (k->ctx) cu->cuDevicePrimaryCtxRelease(k->dev);
    k->mod = NULL;
    k->ctx = NULL;
}

void dm_gpu_upload_messages(const char *what, dm_gpu_upload_message *m)
{
    snprintf(m->alloc, sizeof m->alloc, "allocating device memory%s%s", what ? " for " : "",
             what ? what : "");
    snprintf(m->copy, sizeof m->copy, "copying%s%s to the GPU", what ? " " : "", what ? what : "");
}

int dm_gpu_upload(const dm_cuda *cu, CUdeviceptr *d, const void *host, size_t n, const char *what)
{
    dm_gpu_upload_message m;
    dm_gpu_upload_messages(what, &m);
    const char *alloc = m.alloc, *copy = m.copy;
    *d = 0;
    if (!host || n == 0) return 0;
    CK(cu->cuMemAlloc(d, n), alloc);
    CK(cu->cuMemcpyHtoDAsync(*d, host, n, NULL), copy);
    CK(cu->cuCtxSynchronize(), copy);
    return 0;
fail:
    return -1;
}

int dm_gpu_launch(const dm_cuda *cu, CUfunction fn, unsigned long long threads, unsigned block,
                  CUstream stream, void **args, const char *what)
{
    return dm_gpu_launch_shared(cu, fn, threads, block, 0, stream, args, what);
}

int dm_gpu_launch_shared(const dm_cuda *cu, CUfunction fn, unsigned long long threads,
                         unsigned block, unsigned shared_bytes, CUstream stream, void **args,
                         const char *what)
{
    unsigned blocks = (unsigned)((threads + block - 1) / block);
    CK(cu->cuLaunchKernel(fn, blocks, 1, 1, block, 1, 1, shared_bytes, stream, args, NULL), what);
    return 0;
fail:
    return -1;
}
