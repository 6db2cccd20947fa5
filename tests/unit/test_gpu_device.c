/* The device layer that dimoc fit and dimoc track share (gpu/gpu_device.h, gpu/gpu_launch.h),
 * without a GPU: --gpus lists, --device resolution and its messages, and, on a driver table of
 * stand-ins, the GPUs' description and architecture check, the memory budget and launches. */
#include "check.h"
#include "gpu/gpu_device.h"
#include "gpu/gpu_launch.h"
#include "util/error.h"

#include <string.h>

/* Stand-in driver: GPU i has compute capability fake_cc[i] and fake_free[i] bytes free. */
static int fake_cc[4] = {90, 90, 80, 90};
static size_t fake_free[4] = {1000u << 20, 500u << 20, 0, 2000u << 20};
static int current = -1, fail_meminfo, retained;
static unsigned launched_blocks, launched_block;

static CUresult f_device_get(CUdevice *d, int i)
{
    *d = i;
    return 0;
}
static CUresult f_name(char *s, int n, CUdevice d)
{
    snprintf(s, n, "Fake GPU %d", d);
    return 0;
}
static CUresult f_attr(int *v, int a, CUdevice d)
{
    *v = a == DM_CU_ATTR_CC_MAJOR   ? fake_cc[d] / 10
         : a == DM_CU_ATTR_CC_MINOR ? fake_cc[d] % 10
                                    : 0;
    return 0;
}
static CUresult f_retain(CUcontext *c, CUdevice d)
{
    *c = (CUcontext)(fake_free + d); /* any distinct non-NULL pointer */
    retained++;
    return 0;
}
static CUresult f_release(CUdevice d)
{
    (void)d;
    retained--;
    return 0;
}
static CUresult f_set_current(CUcontext c)
{
    current = (int)((size_t *)c - fake_free);
    return 0;
}
static CUresult f_meminfo(size_t *fr, size_t *tot)
{
    if (fail_meminfo) return 2;
    *fr = fake_free[current];
    *tot = 4000u << 20;
    return 0;
}
static CUresult f_error_string(CUresult rc, const char **s)
{
    (void)rc;
    *s = "fake failure";
    return 0;
}
static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shm, CUstream st, void **args,
                         void **ex)
{
    (void)f, (void)gy, (void)gz, (void)by, (void)bz, (void)shm, (void)st, (void)args, (void)ex;
    launched_blocks = gx;
    launched_block = bx;
    return 0;
}

static void test_parse_list(void)
{
    int ord[DM_GPU_MAX], n = -1;
    int rc = dm_gpu_parse_list("all", 3, ord, &n);
    check(rc == 0 && n == 3 && ord[0] == 0 && ord[2] == 2, "gpus-all", "rc %d, n %d", rc, n);
    rc = dm_gpu_parse_list(NULL, 2, ord, &n);
    check(rc == 0 && n == 2, "gpus-null-is-all", "rc %d, n %d", rc, n);
    rc = dm_gpu_parse_list("2,0", 3, ord, &n);
    check(rc == 0 && n == 2 && ord[0] == 2 && ord[1] == 0, "gpus-list", "rc %d, n %d", rc, n);
    rc = dm_gpu_parse_list("0,3", 3, ord, &n);
    check(rc != 0 &&
              !strcmp(dm_last_error(), "--gpus: '3' is not a GPU of this machine (it has 3)"),
          "gpus-out-of-range", "%s", dm_last_error());
    rc = dm_gpu_parse_list("1x", 3, ord, &n);
    check(rc != 0 && strstr(dm_last_error(), "'1x'"), "gpus-not-a-number", "%s", dm_last_error());
    rc = dm_gpu_parse_list(",", 3, ord, &n);
    check(rc != 0 && strstr(dm_last_error(), "names no GPU"), "gpus-empty", "%s", dm_last_error());
}

static void test_resolve_device(void)
{
    int use = -1;
    int rc = dm_gpu_resolve_device("cpu", NULL, &use);
    check(rc == 0 && use == 0, "device-cpu", "rc %d, use %d", rc, use);
    rc = dm_gpu_resolve_device("bogus", NULL, &use);
    check(rc != 0 && !strcmp(dm_last_error(), "--device: 'bogus' is not one of cpu, gpu, auto"),
          "device-bad-fit-wording", "%s", dm_last_error());
    rc = dm_gpu_resolve_device("bogus", "track", &use);
    check(rc != 0 &&
              !strcmp(dm_last_error(), "track: --device must be cpu, gpu or auto, not 'bogus'"),
          "device-bad-track-wording", "%s", dm_last_error());
    int have = dm_gpu_available();
    rc = dm_gpu_resolve_device("auto", NULL, &use);
    check(rc == 0 && use == have, "device-auto", "rc %d, use %d, available %d", rc, use, have);
    rc = dm_gpu_resolve_device(NULL, "track", &use);
    check(rc == 0 && use == have, "device-null-is-auto", "rc %d, use %d", rc, use);
    rc = dm_gpu_resolve_device("gpu", NULL, &use);
    check(have ? rc == 0 && use == 1
               : rc != 0 && !strncmp(dm_last_error(), "--device gpu: no usable GPU: ", 29),
          "device-gpu-fit", "%s", rc ? dm_last_error() : "ok");
    rc = dm_gpu_resolve_device("gpu", "track", &use);
    check(have ? rc == 0 && use == 1
               : rc != 0 && !strncmp(dm_last_error(), "track: --device gpu: no usable GPU: ", 36),
          "device-gpu-track", "%s", rc ? dm_last_error() : "ok");
}

static void test_fake_driver(void)
{
    dm_cuda cu;
    memset(&cu, 0, sizeof cu);
    cu.ndevices = 4;
    cu.cuDeviceGet = f_device_get;
    cu.cuDeviceGetName = f_name;
    cu.cuDeviceGetAttribute = f_attr;
    cu.cuDevicePrimaryCtxRetain = f_retain;
    cu.cuDevicePrimaryCtxRelease = f_release;
    cu.cuCtxSetCurrent = f_set_current;
    cu.cuMemGetInfo = f_meminfo;
    cu.cuGetErrorString = f_error_string;
    cu.cuLaunchKernel = f_launch;

    dm_gpu_set gs;
    int rc = dm_gpu_select(&cu, "3,0", &gs);
    check(rc == 0 && gs.n == 2 && gs.arch == 90 && !strcmp(gs.device, "Fake GPU 3 x2 (sm_90)"),
          "select-describes", "rc %d, arch %d, '%s'", rc, gs.arch, gs.device);
    rc = dm_gpu_select(&cu, "0,2", &gs);
    check(rc != 0 && !strcmp(dm_last_error(),
                             "--gpus: GPUs of different architectures (sm_90, sm_80) in one run"),
          "select-one-architecture", "%s", dm_last_error());

    size_t allow = 1;
    current = 0;
    rc = dm_gpu_memory_budget(&cu, 0, &allow);
    check(rc == 0 && allow == (size_t)((1000u << 20) * 0.7), "budget-70-percent", "%zu", allow);
    rc = dm_gpu_memory_budget(&cu, 100, &allow);
    check(rc == 0 && allow == 100u << 20, "budget-cap", "%zu", allow);
    rc = dm_gpu_memory_budget(&cu, 5000, &allow);
    check(rc == 0 && allow == (size_t)((1000u << 20) * 0.7), "budget-cap-above-free", "%zu", allow);
    fail_meminfo = 1;
    rc = dm_gpu_memory_budget(&cu, 0, &allow);
    check(rc != 0 && allow == 0 && strstr(dm_last_error(), "reading the free GPU memory"),
          "budget-error", "rc %d, %zu, %s", rc, allow, dm_last_error());
    size_t least = dm_gpu_memory_budget_min(&cu, &gs, 0);
    check(least == 0, "budget-min-unreadable-is-0", "%zu", least);
    fail_meminfo = 0;
    dm_gpu_select(&cu, "0,1,3", &gs);
    least = dm_gpu_memory_budget_min(&cu, &gs, 0);
    check(least == (size_t)((500u << 20) * 0.7) && retained == 0, "budget-min",
          "%zu, %d contexts held", least, retained);

    rc = dm_gpu_launch(&cu, NULL, 257, 128, NULL, NULL, "launching");
    check(rc == 0 && launched_blocks == 3 && launched_block == 128, "launch-blocks", "%u x %u",
          launched_blocks, launched_block);
    CUdeviceptr d = 7;
    rc = dm_gpu_upload(&cu, &d, NULL, 100, "nothing");
    check(rc == 0 && d == 0, "upload-nothing", "rc %d", rc);
}

int main(void)
{
    test_parse_list();
    test_resolve_device();
    test_fake_driver();
    return failures != 0;
}
