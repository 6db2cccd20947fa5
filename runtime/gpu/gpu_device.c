/* Choosing GPUs for a run (see gpu_device.h); dimoc fit and dimoc track share it. */
#include "gpu/gpu_device.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dm_gpu_available(void)
{
    dm_cuda *cu = dm_cuda_open(1, 1);
    if (!cu) return 0;
    dm_cuda_close(cu);
    return 1;
}

static void *probe_main(void *arg)
{
    dm_gpu_probe *p = arg;
    p->available = dm_gpu_available();
    if (!p->available) snprintf(p->why, sizeof p->why, "%s", dm_last_error());
    __atomic_store_n(&p->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

int dm_gpu_probe_ready(const dm_gpu_probe *p)
{
    return !p->running || __atomic_load_n(&p->finished, __ATOMIC_ACQUIRE);
}

int dm_gpu_device_check(const char *device, const char *command)
{
    if (!device || !strcmp(device, "cpu") || !strcmp(device, "gpu") || !strcmp(device, "auto"))
        return 0;
    return command
               ? dm_set_error("%s: --device must be cpu, gpu or auto, not '%s'", command, device)
               : dm_set_error("--device: '%s' is not one of cpu, gpu, auto", device);
}

/* threaded 0: probed at once, on the caller's thread */
static int probe_begin(dm_gpu_probe *p, const char *device, const char *command, int threaded)
{
    memset(p, 0, sizeof *p);
    p->device = device ? device : "auto";
    p->command = command;
    if (dm_gpu_device_check(device, command) != 0) return -1;
    if (!strcmp(p->device, "cpu")) return 0;
    p->running = threaded && pthread_create(&p->thread, NULL, probe_main, p) == 0;
    if (!p->running) probe_main(p); /* no thread: probed now */
    return 0;
}

int dm_gpu_probe_begin(dm_gpu_probe *p, const char *device, const char *command)
{
    return probe_begin(p, device, command, 1);
}

int dm_gpu_probe_end(dm_gpu_probe *p, int *use_gpu)
{
    if (p->running) pthread_join(p->thread, NULL);
    p->running = 0;
    if (!use_gpu) return 0;
    *use_gpu = 0;
    if (!strcmp(p->device, "cpu")) return 0;
    if (!p->available && !strcmp(p->device, "gpu"))
        return p->command ? dm_set_error("%s: --device gpu: no usable GPU: %s", p->command, p->why)
                          : dm_set_error("--device gpu: no usable GPU: %s", p->why);
    *use_gpu = p->available;
    return 0;
}

int dm_gpu_resolve_device(const char *device, const char *command, int *use_gpu)
{
    dm_gpu_probe p;
    *use_gpu = 0;
    if (probe_begin(&p, device, command, 0) != 0) return -1;
    return dm_gpu_probe_end(&p, use_gpu);
}

int dm_gpu_parse_list(const char *spec, int ndev, int *ord, int *n)
{
    *n = 0;
    if (!spec || !strcmp(spec, "all")) {
        for (int i = 0; i < ndev && i < DM_GPU_MAX; i++) ord[(*n)++] = i;
        return 0;
    }
    char *copy = strdup(spec), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 0 || v >= ndev || *n >= DM_GPU_MAX)
            rc = dm_set_error("--gpus: '%s' is not a GPU of this machine (it has %d)", t, ndev);
        else
            ord[(*n)++] = (int)v;
    }
    if (rc == 0 && *n == 0) rc = dm_set_error("--gpus: '%s' names no GPU", spec);
    free(copy);
    return rc;
}

int dm_gpu_select(const dm_cuda *cu, const char *spec, dm_gpu_set *set)
{
    memset(set, 0, sizeof *set);
    if (dm_gpu_parse_list(spec, cu->ndevices, set->ord, &set->n) != 0) return -1;
    for (int g = 0; g < set->n; g++) {
        CUdevice d;
        int ma = 0, mi = 0;
        cu->cuDeviceGet(&d, set->ord[g]);
        cu->cuDeviceGetAttribute(&ma, DM_CU_ATTR_CC_MAJOR, d);
        cu->cuDeviceGetAttribute(&mi, DM_CU_ATTR_CC_MINOR, d);
        if (g == 0) {
            char name[200] = "";
            cu->cuDeviceGetName(name, sizeof name, d);
            snprintf(set->device, sizeof set->device, "%s x%d (sm_%d%d)", name, set->n, ma, mi);
            set->arch = ma * 10 + mi;
        } else if (ma * 10 + mi != set->arch) {
            return dm_set_error("--gpus: GPUs of different architectures (sm_%d, sm_%d) in one run",
                                set->arch, ma * 10 + mi);
        }
    }
    return 0;
}

int dm_gpu_memory_budget(const dm_cuda *cu, long cap_mb, size_t *allow)
{
    size_t fr = 0, tot = 0;
    *allow = 0;
    CK(cu->cuMemGetInfo(&fr, &tot), "reading the free GPU memory");
    *allow = (size_t)(fr * 0.7); /* headroom for the module, the driver and other users */
    if (cap_mb > 0 && (size_t)cap_mb * 1048576 < *allow) *allow = (size_t)cap_mb * 1048576;
    return 0;
fail:
    return -1;
}

size_t dm_gpu_memory_budget_min(const dm_cuda *cu, const dm_gpu_set *set, long cap_mb)
{
    size_t least = (size_t)-1;
    for (int g = 0; g < set->n; g++) {
        CUdevice d;
        CUcontext c;
        size_t a = 0;
        cu->cuDeviceGet(&d, set->ord[g]);
        if (cu->cuDevicePrimaryCtxRetain(&c, d) == 0) {
            cu->cuCtxSetCurrent(c);
            dm_gpu_memory_budget(cu, cap_mb, &a); /* unreadable: a stays 0 */
            cu->cuDevicePrimaryCtxRelease(d);
        }
        if (a < least) least = a;
    }
    return least;
}

/* The driver's table and the devices whose primary context is held (dm_gpu_hold_contexts):
 * kept for the life of the process on purpose, never released. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static dm_cuda *hold_cu;
static int held[DM_GPU_MAX];

int dm_gpu_hold_contexts(const char *spec)
{
    pthread_mutex_lock(&hold_lock);
    int rc = 0;
    if (!hold_cu) hold_cu = dm_cuda_open(1, 0);
    if (!hold_cu) rc = -1;
    int ord[DM_GPU_MAX], n = 0;
    if (rc == 0) rc = dm_gpu_parse_list(spec, hold_cu->ndevices, ord, &n);
    for (int g = 0; rc == 0 && g < n; g++) {
        CUdevice d;
        CUcontext c;
        if (held[ord[g]]) continue;
        dm_cuda *cu = hold_cu;
        CK(cu->cuDeviceGet(&d, ord[g]), "cuDeviceGet");
        CK(cu->cuDevicePrimaryCtxRetain(&c, d), "retaining the GPU's primary context");
        held[ord[g]] = 1;
    }
    pthread_mutex_unlock(&hold_lock);
    return rc;
fail:
    pthread_mutex_unlock(&hold_lock);
    return -1;
}

int dm_gpu_context_held(int ordinal)
{
    pthread_mutex_lock(&hold_lock);
    int h = ordinal >= 0 && ordinal < DM_GPU_MAX && held[ordinal];
    pthread_mutex_unlock(&hold_lock);
    return h;
}
