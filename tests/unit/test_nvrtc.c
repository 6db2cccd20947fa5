/* The generated source of every model compiles under NVRTC, as the GPU backend will compile
 * it: a prologue (`real`, DM_FN), templates/maths/mathlib.h, the generated model.h and a kernel
 * that calls every function of templates/fit/model_api.h, for compute_80 (PTX) and sm_90
 * (cubin), in float and in double.  The float PTX (built with fast math) must hold no double-precision
 * instruction (a literal without its (real) cast would promote the arithmetic), and the
 * NVRTC log must be free of warnings.  libnvrtc is loaded at run time ($CUDA_HOME/lib64, /usr/local/cuda/lib64, or the
 * loader's path); not finding it is a failure, since CI has the toolkit. */
#include "compiler.h"
#include "util/fsutil.h"
#include "all_builtins_model.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The few NVRTC entry points used, declared here so the test needs no CUDA header. */
typedef struct nvrtc_program *nvrtc_program;
typedef int (*create_fn)(nvrtc_program *, const char *, const char *, int, const char *const *,
                         const char *const *);
typedef int (*compile_fn)(nvrtc_program, int, const char *const *);
typedef int (*size_fn)(nvrtc_program, size_t *);
typedef int (*text_fn)(nvrtc_program, char *);
typedef int (*destroy_fn)(nvrtc_program *);
typedef const char *(*error_string_fn)(int);

static struct {
    create_fn create;
    compile_fn compile;
    size_fn log_size, ptx_size;
    text_fn log, ptx;
    destroy_fn destroy;
    error_string_fn error_string;
} nvrtc;

static int failures;

static void *open_nvrtc(char *tried, size_t len)
{
    const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
    const char *dirs[] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
    char path[4096];
    tried[0] = 0;
    for (int d = 0; d < 2; d++) {
        if (!dirs[d]) continue;
        for (int n = 0; n < 3; n++) {
            snprintf(path, sizeof path, "%s/lib64/%s", dirs[d], names[n]);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
            snprintf(tried + strlen(tried), len - strlen(tried), "%s ", path);
        }
    }
    for (int n = 0; n < 3; n++) {
        void *h = dlopen(names[n], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

/* Calls every model function so that none is left uncompiled. */
static const char *kernel =
    "\nextern \"C\" __global__ void dm_test_kernel(const real *p, const real *m, const real *v,\n"
    "                                          real *result)\n"
    "{\n"
    "    real ds[DM_NPARAMS + 1], x[DM_NPARAMS + 1], q[DM_NPARAMS + 1], d[DM_NPARAMS + 1];\n"
    "    real o[DM_OUTPUT_WIDTH + 1];\n"
    "    real s = dm_signal(p, m, v) + dm_signal_grad(p, m, v, ds);\n"
    "    s += (real)(dm_in_bounds(p) + dm_constraints_ok(p, v)) + dm_prior_energy(p, v);\n"
    "    for (int k = 0; k < DM_NPARAMS; k++)\n"
    "        q[k] = p[k];\n"
    "    dm_wrap_periodic(q);\n"
    "    dm_to_free(q, x);\n"
    "    dm_from_free(x, q, d);\n"
    "    s += (real)dm_near_bound(q);\n"
    "    dm_outputs(p, v, o);\n"
    "    for (int k = 0; k < DM_NPARAMS; k++)\n"
    "        s += ds[k] + q[k] + d[k] + dm_proposal_sd(k, p);\n"
    "    for (int k = 0; k < DM_OUTPUT_WIDTH; k++)\n"
    "        s += o[k];\n"
    "    result[threadIdx.x] = s;\n"
    "}\n";

static void compile_one(const char *name, const char *mathlib, const char *model_src,
                        int use_double, const char *arch)
{
    char test[512];
    snprintf(test, sizeof test, "%s-nvrtc-%s-%s", name, use_double ? "double" : "float", arch);
    size_t len = strlen(mathlib) + strlen(model_src) + strlen(kernel) + 256;
    char *src = malloc(len);
    snprintf(src, len, "typedef %s real;\n#define DM_FN static __device__ inline\n%s\n%s%s",
             use_double ? "double" : "float", mathlib, model_src, kernel);
    char option[64];
    snprintf(option, sizeof option, "--gpu-architecture=%s", arch);
    /* Fast math for the float PTX check: the precise sinf/cosf have a double-precision slow
     * path of their own (huge-argument reduction), which would hide ours. */
    int float_ptx = !use_double && strncmp(arch, "compute_", 8) == 0;
    const char *opts[] = {option, "--std=c++17", "--use_fast_math"};
    nvrtc_program prog;
    int rc = nvrtc.create(&prog, src, "model.h", 0, NULL, NULL);
    if (rc != 0) {
        printf("FAIL %s: nvrtcCreateProgram: %s\n", test, nvrtc.error_string(rc));
        failures++;
        free(src);
        return;
    }
    rc = nvrtc.compile(prog, float_ptx ? 3 : 2, opts);
    size_t log_len = 0;
    nvrtc.log_size(prog, &log_len);
    char *log = calloc(1, log_len + 1);
    nvrtc.log(prog, log);
    if (rc != 0) {
        printf("FAIL %s: %s\n%s\n", test, nvrtc.error_string(rc), log);
        failures++;
    } else if (strstr(log, "warning")) {
        printf("FAIL %s: NVRTC warnings\n%s\n", test, log);
        failures++;
    } else {
        int ok = 1;
        if (float_ptx) {
            size_t n = 0;
            nvrtc.ptx_size(prog, &n);
            char *ptx = calloc(1, n + 1);
            nvrtc.ptx(prog, ptx);
            if (strstr(ptx, ".f64")) {
                printf("FAIL %s: the float build has double-precision instructions\n", test);
                failures++;
                ok = 0;
            }
            free(ptx);
        }
        if (ok) printf("PASS %s\n", test);
    }
    free(log);
    nvrtc.destroy(&prog);
    free(src);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    char tried[8192];
    void *h = open_nvrtc(tried, sizeof tried);
    if (!h) {
        printf("FAIL nvrtc-load: libnvrtc not found (tried %s and the loader path; set "
               "CUDA_HOME)\n",
               tried);
        return 1;
    }
    nvrtc.create = (create_fn)dlsym(h, "nvrtcCreateProgram");
    nvrtc.compile = (compile_fn)dlsym(h, "nvrtcCompileProgram");
    nvrtc.log_size = (size_fn)dlsym(h, "nvrtcGetProgramLogSize");
    nvrtc.log = (text_fn)dlsym(h, "nvrtcGetProgramLog");
    nvrtc.ptx_size = (size_fn)dlsym(h, "nvrtcGetPTXSize");
    nvrtc.ptx = (text_fn)dlsym(h, "nvrtcGetPTX");
    nvrtc.destroy = (destroy_fn)dlsym(h, "nvrtcDestroyProgram");
    nvrtc.error_string = (error_string_fn)dlsym(h, "nvrtcGetErrorString");
    if (!nvrtc.create || !nvrtc.compile || !nvrtc.log_size || !nvrtc.log || !nvrtc.ptx_size ||
        !nvrtc.ptx || !nvrtc.destroy || !nvrtc.error_string) {
        printf("FAIL nvrtc-load: missing NVRTC symbols\n");
        return 1;
    }
    printf("PASS nvrtc-load\n");

    const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
    char path[4096];
    snprintf(path, sizeof path, "%s/templates/maths/mathlib.h", root);
    char *mathlib = dm_read_file(path, NULL);
    if (!mathlib) {
        printf("FAIL mathlib: cannot read %s\n", path);
        return 1;
    }
    snprintf(path, sizeof path, "%s/models", root);
    DIR *d = opendir(path);
    if (!d) {
        printf("FAIL models: cannot open %s\n", path);
        return 1;
    }
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t len = strlen(e->d_name);
        if (len > 6 && strcmp(e->d_name + len - 6, ".model") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    if (n == 0) {
        printf("FAIL models: none found\n");
        failures++;
    }
    for (int i = 0; i <= n; i++) { /* the last one: the model calling every built-in */
        char file[8192], name[256];
        if (i == n) {
            dm_model *m =
                dm_front_string("all_builtins.model", all_builtins_model, stdout, NULL, NULL);
            dm_generated g;
            if (!m || dm_generate(m, &g, stdout) != 0) {
                printf("FAIL all_builtins-generate: the model does not compile\n");
                failures++;
            } else {
                for (int dbl = 0; dbl <= 1; dbl++)
                    compile_one("all_builtins", mathlib, g.source, dbl, "compute_80");
                dm_generated_free(&g);
            }
            dm_model_free(m);
            break;
        }
        snprintf(file, sizeof file, "%s/models/%s", root, names[i]);
        snprintf(name, sizeof name, "%.*s", (int)(strlen(names[i]) - 6), names[i]);
        dm_model *m = dm_front_file(file, stdout, NULL, NULL);
        dm_generated g;
        if (!m || dm_generate(m, &g, stdout) != 0) {
            printf("FAIL %s-generate: the model does not compile\n", name);
            failures++;
        } else {
            for (int dbl = 0; dbl <= 1; dbl++) {
                compile_one(name, mathlib, g.source, dbl, "compute_80");
                compile_one(name, mathlib, g.source, dbl, "sm_90");
            }
            dm_generated_free(&g);
        }
        dm_model_free(m);
        free(names[i]);
    }
    free(mathlib);
    /* _exit, not return: after NVRTC has compiled the large all-built-ins program, a thread it
     * keeps makes LeakSanitizer's exit-time check crash (under `make test-asan`); the only
     * allocations left are NVRTC's own caches, which tests/lsan.supp ignores anyway. */
    fflush(stdout);
    _exit(failures ? 1 : 0);
}
