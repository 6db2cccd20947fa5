/* The CUDA driver API and NVRTC, loaded at run time with dlopen so that dimoc starts and runs
 * on machines with neither.  Only the calls dimoc uses are declared, with the types of the
 * stable driver ABI (the _v2 entry points that cuda.h maps the plain names to). */
#ifndef DIMOC_CUDA_API_H
#define DIMOC_CUDA_API_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
typedef struct _nvrtcProgram *nvrtcProgram;

enum {
    DM_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    DM_CU_ATTR_CC_MAJOR = 75,
    DM_CU_ATTR_CC_MINOR = 76,
    DM_CU_ATTR_L2_CACHE_SIZE = 38,
    DM_CU_ATTR_SHARED_PER_BLOCK_OPTIN = 97, /* the dynamic shared memory a block may opt into */
    DM_CU_FUNC_MAX_DYNAMIC_SHARED = 8,      /* a kernel's: the dynamic shared memory it may take */
    DM_CU_FUNC_PREFERRED_CARVEOUT = 9, /* a kernel's: the share of L1 it prefers as shared memory */
    DM_CU_MEMHOSTALLOC_DEVICEMAP = 2,  /* host memory the device can read and write */
};

typedef struct dm_cuda {
    void *libcuda, *libnvrtc;
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemGetInfo)(size_t *, size_t *);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemAllocHost)(void **, size_t);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
    CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
    CUresult (*cuMemHostRegister)(void *, size_t, unsigned);
    CUresult (*cuMemHostUnregister)(void *);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
    CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    int (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                              const char *const *);
    int (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
    int (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
    int (*nvrtcGetProgramLog)(nvrtcProgram, char *);
    int (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
    int (*nvrtcGetCUBIN)(nvrtcProgram, char *);
    int (*nvrtcDestroyProgram)(nvrtcProgram *);
    const char *(*nvrtcGetErrorString)(int);
    int (*nvrtcVersion)(int *, int *);
    int ndevices;
} dm_cuda;

/* Loads libcuda and initialises the driver (need_driver) and/or loads NVRTC (need_nvrtc).
 * Returns NULL with dm_last_error() saying plainly why a GPU cannot be used. */
dm_cuda *dm_cuda_open(int need_driver, int need_nvrtc);
/* Frees the table (NULL is fine); the libraries stay loaded. */
void dm_cuda_close(dm_cuda *cu);
/* Runs a driver call; on failure records "what: CUDA error N (text)" and jumps to `fail`.
 * Needs `cu` (the dm_cuda table) in scope. */
#define CK(call, what)                                                                             \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != 0) {                                                                            \
            dm_cuda_error(cu, rc_, what);                                                          \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* dm_set_error with the driver's description of `rc` after `what`; returns -1. */
int dm_cuda_error(const dm_cuda *cu, CUresult rc, const char *what);

#endif
