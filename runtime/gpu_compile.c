#include "gpu_compile.h"
#include "compiler.h"
#include "cpu_backend.h"
#include "error.h"
#include "fsutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const template_files[] = {"gpu_fitter.cu", "mathlib.h", "model_api.h",
                                             "fit_api.h", "lanes.h", "philox.h", "fit_common.h",
                                             "grid.h", "lm.h", "mcmc.h", "fit_voxel.h", NULL};

static int nvrtc_compile(const dm_cuda *cu, const char *tdir, const char *prologue_and_main,
                         const char *model_source, int arch, dm_gpu_program *out)
{
    const char *hdr_src[1] = {model_source};
    const char *hdr_name[1] = {"dm_model.cu"};
    nvrtcProgram prog;
    int rc = cu->nvrtcCreateProgram(&prog, prologue_and_main, "dimoc_fitter.cu", 1, hdr_src, hdr_name);
    if (rc != 0) return dm_set_error("NVRTC: cannot create program: %s", cu->nvrtcGetErrorString(rc));
    char arch_opt[64], inc_opt[4200];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    snprintf(inc_opt, sizeof inc_opt, "--include-path=%s", tdir);
    /* DIMOC_NVRTC_OPTIONS: one extra option (e.g. --maxrregcount=64), for tuning runs. */
    const char *extra = getenv("DIMOC_NVRTC_OPTIONS");
    const char *opts[] = {arch_opt, inc_opt, "--std=c++17", "-DDM_NVRTC=1", extra};
    rc = cu->nvrtcCompileProgram(prog, extra && *extra ? 5 : 4, opts);
    if (rc != 0) {
        size_t n = 0;
        cu->nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n + 1);
        cu->nvrtcGetProgramLog(prog, log);
        log[n] = 0;
        char first[600];
        snprintf(first, sizeof first, "%s", log);
        for (char *c = first; *c; c++)
            if (*c == '\n') *c = ' ';
        dm_set_error("NVRTC failed to compile the fitter for sm_%d: %s", arch, first);
        free(log);
        cu->nvrtcDestroyProgram(&prog);
        return -1;
    }
    cu->nvrtcGetCUBINSize(prog, &out->size);
    out->cubin = malloc(out->size);
    cu->nvrtcGetCUBIN(prog, out->cubin);
    cu->nvrtcDestroyProgram(&prog);
    return 0;
}

int dm_gpu_compile(const dm_cuda *cu, const dm_model_info *mi, int arch, int real_size, int lanes,
                   int use_cache, dm_gpu_program *out)
{
    memset(out, 0, sizeof *out);
    char *tdir = dm_templates_dir();
    if (!tdir) return dm_set_error("cannot find the templates folder (looked beside the program)");
    char prologue[512];
    snprintf(prologue, sizeof prologue,
             "#define DM_NLANES %d\ntypedef %s real;\n#include \"gpu_fitter.cu\"\n", lanes,
             real_size == 4 ? "float" : "double");
    int major = 0, minor = 0;
    cu->nvrtcVersion(&major, &minor);
    unsigned long long h = dm_hash64(prologue, strlen(prologue), 0);
    h = dm_hash64(mi->cuda_source, strlen(mi->cuda_source), h);
    for (int i = 0; template_files[i]; i++) {
        char *path = dm_path_join(tdir, template_files[i]);
        size_t n = 0;
        char *text = dm_read_file(path, &n);
        if (text) h = dm_hash64(text, n, h);
        free(text);
        free(path);
    }
    char key[160];
    const char *extra = getenv("DIMOC_NVRTC_OPTIONS");
    snprintf(key, sizeof key, "nvrtc%d.%d-sm%d %s", major, minor, arch, extra ? extra : "");
    h = dm_hash64(key, strlen(key), h);

    char *cache = use_cache ? dm_cache_dir() : NULL;
    char path[4600] = "";
    if (cache) {
        snprintf(path, sizeof path, "%s/%s-gpu-%s-%dl-sm%d-%016llx.cubin", cache, mi->name,
                 real_size == 4 ? "float" : "double", lanes, arch, h);
        free(cache);
        out->cubin = dm_read_file(path, &out->size);
        if (out->cubin && out->size > 0) {
            out->cached = 1;
            free(tdir);
            return 0;
        }
        free(out->cubin);
        out->cubin = NULL;
    }
    double t0 = now_seconds();
    int rc = nvrtc_compile(cu, tdir, prologue, mi->cuda_source, arch, out);
    out->compile_seconds = now_seconds() - t0;
    free(tdir);
    if (rc == 0 && path[0] && dm_write_file_atomic(path, out->cubin, out->size) != 0)
        dm_warn("cannot cache the GPU fitter in %s: %s", path, dm_last_error());
    return rc;
}

void dm_gpu_program_free(dm_gpu_program *p)
{
    free(p->cubin);
    p->cubin = NULL;
}
