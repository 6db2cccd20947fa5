/* Loading the CUDA driver API and NVRTC with dlopen (see cuda_api.h). */
#include "gpu/cuda_api.h"
#include "util/error.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *open_first(const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

#define LOAD(lib, field, symbol)                                                                   \
    do {                                                                                           \
        *(void **)&cu->field = dlsym(cu->lib, symbol);                                             \
        if (!cu->field) {                                                                          \
            dm_set_error("%s lacks %s: the CUDA installation is too old or broken", #lib, symbol); \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static int open_nvrtc(dm_cuda *cu)
{
    char a[512], b[512], c[512];
    const char *home = getenv("CUDA_HOME");
    snprintf(a, sizeof a, "%s/lib64/libnvrtc.so", home ? home : "/usr/local/cuda");
    snprintf(b, sizeof b, "%s/lib64/libnvrtc.so.13", home ? home : "/usr/local/cuda");
    snprintf(c, sizeof c, "%s/lib64/libnvrtc.so.12", home ? home : "/usr/local/cuda");
    const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", a, b, c, NULL};
    cu->libnvrtc = open_first(names);
    if (!cu->libnvrtc)
        return dm_set_error("NVRTC (libnvrtc.so) not found: install the CUDA toolkit or set "
                            "CUDA_HOME");
    return 0;
}

void dm_cuda_close(dm_cuda *cu)
{
    /* The libraries stay loaded: unloading the driver or NVRTC while their own threads and
     * caches live is not safe, and a later dm_cuda_open gets the same handles back. */
    free(cu);
}

dm_cuda *dm_cuda_open(int need_driver, int need_nvrtc)
{
    dm_cuda *cu = calloc(1, sizeof *cu);
    if (need_driver) {
        const char *names[] = {"libcuda.so.1", "libcuda.so", NULL};
        cu->libcuda = open_first(names);
        if (!cu->libcuda) {
            dm_set_error("no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)");
            goto fail;
        }
        LOAD(libcuda, cuInit, "cuInit");
        LOAD(libcuda, cuDeviceGetCount, "cuDeviceGetCount");
        LOAD(libcuda, cuDeviceGet, "cuDeviceGet");
        LOAD(libcuda, cuDeviceGetName, "cuDeviceGetName");
        LOAD(libcuda, cuDeviceGetAttribute, "cuDeviceGetAttribute");
        LOAD(libcuda, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
        LOAD(libcuda, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
        LOAD(libcuda, cuCtxSetCurrent, "cuCtxSetCurrent");
        LOAD(libcuda, cuCtxSynchronize, "cuCtxSynchronize");
        LOAD(libcuda, cuMemGetInfo, "cuMemGetInfo_v2");
        LOAD(libcuda, cuMemAlloc, "cuMemAlloc_v2");
        LOAD(libcuda, cuMemFree, "cuMemFree_v2");
        LOAD(libcuda, cuMemAllocHost, "cuMemAllocHost_v2");
        LOAD(libcuda, cuMemFreeHost, "cuMemFreeHost");
        LOAD(libcuda, cuMemHostAlloc, "cuMemHostAlloc");
        LOAD(libcuda, cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
        LOAD(libcuda, cuMemHostRegister, "cuMemHostRegister_v2");
        LOAD(libcuda, cuMemHostUnregister, "cuMemHostUnregister");
        LOAD(libcuda, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
        LOAD(libcuda, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
        LOAD(libcuda, cuMemsetD32Async, "cuMemsetD32Async");
        LOAD(libcuda, cuOccupancyMaxActiveBlocksPerMultiprocessor,
             "cuOccupancyMaxActiveBlocksPerMultiprocessor");
        LOAD(libcuda, cuFuncSetAttribute, "cuFuncSetAttribute");
        LOAD(libcuda, cuStreamCreate, "cuStreamCreate");
        LOAD(libcuda, cuStreamDestroy, "cuStreamDestroy_v2");
        LOAD(libcuda, cuStreamSynchronize, "cuStreamSynchronize");
        LOAD(libcuda, cuModuleLoadData, "cuModuleLoadData");
        LOAD(libcuda, cuModuleUnload, "cuModuleUnload");
        LOAD(libcuda, cuModuleGetFunction, "cuModuleGetFunction");
        LOAD(libcuda, cuLaunchKernel, "cuLaunchKernel");
        LOAD(libcuda, cuGetErrorString, "cuGetErrorString");
        CUresult rc = cu->cuInit(0);
        if (rc != 0) {
            dm_cuda_error(cu, rc, "the NVIDIA driver failed to start (cuInit)");
            goto fail;
        }
        if (cu->cuDeviceGetCount(&cu->ndevices) != 0 || cu->ndevices == 0) {
            dm_set_error("the NVIDIA driver is loaded but sees no GPU");
            goto fail;
        }
    }
    if (need_nvrtc) {
        if (open_nvrtc(cu) != 0) goto fail;
        LOAD(libnvrtc, nvrtcCreateProgram, "nvrtcCreateProgram");
        LOAD(libnvrtc, nvrtcCompileProgram, "nvrtcCompileProgram");
        LOAD(libnvrtc, nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
        LOAD(libnvrtc, nvrtcGetProgramLog, "nvrtcGetProgramLog");
        LOAD(libnvrtc, nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
        LOAD(libnvrtc, nvrtcGetCUBIN, "nvrtcGetCUBIN");
        LOAD(libnvrtc, nvrtcDestroyProgram, "nvrtcDestroyProgram");
        LOAD(libnvrtc, nvrtcGetErrorString, "nvrtcGetErrorString");
        LOAD(libnvrtc, nvrtcVersion, "nvrtcVersion");
    }
    return cu;
fail:
    dm_cuda_close(cu);
    return NULL;
}

int dm_cuda_error(const dm_cuda *cu, CUresult rc, const char *what)
{
    const char *s = NULL;
    if (cu && cu->cuGetErrorString) cu->cuGetErrorString(rc, &s);
    return dm_set_error("%s: CUDA error %d (%s)", what, rc, s ? s : "unknown");
}
