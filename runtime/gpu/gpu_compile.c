/* NVRTC compilation of a program of template files, with the cubin cached on disk. */
#include "gpu/gpu_compile.h"
#include "util/progress.h"
#include "compiler.h" /* dm_hash64 */
#include "util/error.h"
#include "util/paths.h"
#include "util/fsutil.h"
#include "util/interrupt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int nvrtc_compile(const dm_cuda *cu, const char *tdir, const dm_gpu_source *src, int arch,
                         dm_gpu_program *out)
{
    int nhdr = src->header ? 1 : 0;
    const char *hdr_src[1] = {src->header};
    const char *hdr_name[1] = {src->header_name};
    nvrtcProgram prog;
    int rc = cu->nvrtcCreateProgram(&prog, src->prologue, "dimoc_main.cu", nhdr, hdr_src, hdr_name);
    if (rc != 0)
        return dm_set_error("NVRTC: cannot create program: %s", cu->nvrtcGetErrorString(rc));
    char arch_opt[64], inc_opt[4200];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    snprintf(inc_opt, sizeof inc_opt, "--include-path=%s", tdir);
    /* DIMOC_NVRTC_OPTIONS: one extra option (e.g. --maxrregcount=64), for tuning runs. */
    const char *extra = getenv("DIMOC_NVRTC_OPTIONS");
    const char *opts[16] = {arch_opt, inc_opt, "--std=c++17", "-DDM_NVRTC=1"};
    int nopts = 4;
    for (int i = 0; src->options && src->options[i] && nopts < 15; i++)
        opts[nopts++] = src->options[i];
    if (extra && *extra) opts[nopts++] = extra;
    rc = cu->nvrtcCompileProgram(prog, nopts, opts);
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
        dm_set_error("NVRTC failed to compile %s for sm_%d: %s", src->what, arch, first);
        free(log);
        cu->nvrtcDestroyProgram(&prog);
        return -1;
    }
    /* DIMOC_NVRTC_LOG: a tuning run's log on stderr (registers and spills per kernel with
     * DIMOC_NVRTC_OPTIONS=--ptxas-options=-v). */
    if (getenv("DIMOC_NVRTC_LOG")) {
        size_t n = 0;
        cu->nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n + 1);
        if (log) {
            cu->nvrtcGetProgramLog(prog, log);
            log[n] = 0;
            fprintf(stderr, "%s: %s\n", src->name, log);
            free(log);
        }
    }
    cu->nvrtcGetCUBINSize(prog, &out->size);
    out->cubin = malloc(out->size);
    cu->nvrtcGetCUBIN(prog, out->cubin);
    cu->nvrtcDestroyProgram(&prog);
    return 0;
}

int dm_gpu_compile_source(const dm_cuda *cu, const dm_gpu_source *src, int arch, int use_cache,
                          dm_gpu_program *out)
{
    memset(out, 0, sizeof *out);
    char *tdir = dm_templates_dir();
    if (!tdir) return dm_set_error("cannot find the templates folder (looked beside the program)");
    int major = 0, minor = 0;
    cu->nvrtcVersion(&major, &minor);
    unsigned long long h = dm_hash64(src->prologue, strlen(src->prologue), 0);
    if (src->header) h = dm_hash64(src->header, strlen(src->header), h);
    for (int i = 0; src->templates[i]; i++) {
        char *path = dm_path_join(tdir, src->templates[i]);
        size_t n = 0;
        char *text = dm_read_file(path, &n);
        if (text) h = dm_hash64(text, n, h);
        free(text);
        free(path);
    }
    for (int i = 0; src->options && src->options[i]; i++)
        h = dm_hash64(src->options[i], strlen(src->options[i]), h);
    char key[160];
    const char *extra = getenv("DIMOC_NVRTC_OPTIONS");
    snprintf(key, sizeof key, "nvrtc%d.%d-sm%d %s", major, minor, arch, extra ? extra : "");
    h = dm_hash64(key, strlen(key), h);

    char *cache = use_cache ? dm_cache_dir() : NULL;
    char path[4600] = "";
    if (cache) {
        snprintf(path, sizeof path, "%s/%s-sm%d-%016llx.cubin", cache, src->name, arch, h);
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
    double t0 = dm_now_seconds();
    /* Another process (a job array's tasks, parallel tests) compiling the same program: wait
     * for its cubin rather than compile it a second time. */
    int lock = path[0] ? dm_cache_entry_lock(path) : -1;
    if (lock >= 0 && (out->cubin = dm_read_file(path, &out->size)) != NULL && out->size > 0) {
        out->cached = 1;
        out->compile_seconds = dm_now_seconds() - t0; /* the wait */
        close(lock);
        free(tdir);
        return 0;
    }
    free(out->cubin);
    out->cubin = NULL;
    int rc = nvrtc_compile(cu, tdir, src, arch, out);
    out->compile_seconds = dm_now_seconds() - t0;
    free(tdir);
    if (rc == 0 && path[0] && dm_write_file_atomic(path, out->cubin, out->size) != 0)
        dm_warn("cannot cache %s in %s: %s", src->what, path, dm_last_error());
    if (lock >= 0) close(lock);
    return rc;
}

void dm_gpu_program_free(dm_gpu_program *p)
{
    free(p->cubin);
    p->cubin = NULL;
}

typedef struct precompile_job {
    const dm_gpu_source *src;
    int rc, done;
    dm_gpu_program prog;
    char error[512]; /* errors are per thread (util/error.c) */
} precompile_job;

typedef struct precompile_pool {
    const dm_cuda *cu;
    int arch, n, quiet;
    precompile_job *job;
    const char *const *labels;
    int next;              /* the next job to take (atomic) */
    pthread_mutex_t print; /* one line a program, as each is done */
} precompile_pool;

static void *precompile_main(void *arg)
{
    precompile_pool *p = arg;
    for (int i;
         !dm_stop_requested() && (i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED)) < p->n;) {
        precompile_job *j = &p->job[i];
        j->rc = dm_gpu_compile_source(p->cu, j->src, p->arch, 1, &j->prog);
        if (j->rc != 0) snprintf(j->error, sizeof j->error, "%s", dm_last_error());
        dm_gpu_program_free(&j->prog);
        j->done = 1;
        if (p->quiet || j->rc != 0) continue;
        pthread_mutex_lock(&p->print);
        if (j->prog.cached)
            printf("%-22s gpu sm_%d: in the cache\n", p->labels[i], p->arch);
        else
            printf("%-22s gpu sm_%d: compiled in %.1f s\n", p->labels[i], p->arch,
                   j->prog.compile_seconds);
        fflush(stdout);
        pthread_mutex_unlock(&p->print);
    }
    return NULL;
}

int dm_gpu_precompile(const dm_cuda *cu, int arch, const dm_gpu_source *src,
                      const char *const *labels, int n, int quiet)
{
    /* NVRTC compiles a program on one core: the programs side by side, a thread a core at most
     * (each compile holds up to a few hundred MB), this one among them */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = (cores < 1 ? 1 : cores < n ? (int)cores : n) - 1;
    precompile_pool pool = {.cu = cu,
                            .arch = arch,
                            .n = n,
                            .quiet = quiet,
                            .labels = labels,
                            .job = calloc((size_t)n, sizeof *pool.job)};
    pthread_mutex_init(&pool.print, NULL);
    pthread_t *th = calloc((size_t)(nth + 1), sizeof *th);
    char *started = calloc((size_t)(nth + 1), 1);
    int rc = 0;
    if (!pool.job || !th || !started) {
        rc = dm_set_error("out of memory compiling GPU programs");
        goto done;
    }
    for (int i = 0; i < n; i++) pool.job[i].src = src + i;
    for (int t = 0; t < nth; t++)
        started[t] = pthread_create(&th[t], NULL, precompile_main, &pool) == 0;
    precompile_main(&pool); /* every job is taken even when no thread started */
    for (int t = 0; t < nth; t++)
        if (started[t]) pthread_join(th[t], NULL);
    for (int i = 0; i < n && rc == 0; i++)
        if (!pool.job[i].done)
            rc = dm_stop_error();
        else if (pool.job[i].rc != 0)
            rc = dm_set_error("%s", pool.job[i].error);
done:
    pthread_mutex_destroy(&pool.print);
    free(pool.job);
    free(th);
    free(started);
    return rc;
}
