/* Run-time compilation of GPU programs (the fitters, the trackers, CSD, COMMIT) with NVRTC,
 * cached on disk.  The programs themselves are described by their engines: fit/fit_gpu.c,
 * track/track_gpu.c, fodtrack/fodtrack_gpu.c, csd/csd_gpu.c, commit/commit_gpu.c. */
#ifndef DIMOC_GPU_COMPILE_H
#define DIMOC_GPU_COMPILE_H

#include "gpu/cuda_api.h"

typedef struct dm_gpu_program {
    char *cubin;
    size_t size;
    double compile_seconds; /* 0 when it came from the cache */
    int cached;
} dm_gpu_program;

/* A program made of files of the templates folder, for dm_gpu_compile_source. */
typedef struct dm_gpu_source {
    const char *name;                 /* cache file stem, e.g. "tracker" */
    const char *what;                 /* for messages: "the fitter" */
    const char *prologue;             /* the main source text (it #includes the templates) */
    const char *header, *header_name; /* one in-memory header, or NULL */
    const char *const *templates;     /* NULL-terminated: template files the program reads */
    const char *const *options;       /* NULL-terminated extra NVRTC options, or NULL */
} dm_gpu_source;

/* Compiles src for compute capability arch, cached under the cache folder keyed by the
 * prologue, the header, the templates' text, the options and the NVRTC version; use_cache 0
 * skips the cache.  0, or -1 with the first lines of the NVRTC log in dm_last_error(). */
int dm_gpu_compile_source(const dm_cuda *cu, const dm_gpu_source *src, int arch, int use_cache,
                          dm_gpu_program *out);
/* Frees the cubin (the struct may be reused). */
void dm_gpu_program_free(dm_gpu_program *p);

/* `dimoc warm`: compiles n programs into the cache side by side (a thread a core at most),
 * reporting each on stdout as it is done unless quiet: "LABEL gpu sm_ARCH: compiled in S s" or
 * "...: in the cache".  0, or -1 with the first failure's error (or the stop's, after Ctrl-C:
 * the programs under way finish, no new one starts). */
int dm_gpu_precompile(const dm_cuda *cu, int arch, const dm_gpu_source *src,
                      const char *const *labels, int n, int quiet);

#endif
