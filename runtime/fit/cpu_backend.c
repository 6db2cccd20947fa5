/* Host compilation of fitters, with an on-disk cache keyed by content. */
#define _GNU_SOURCE
#include "fit/cpu_backend.h"
#include "util/progress.h"
#include "compiler.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/paths.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* On x86-64 with glibc the derived outputs of samples call libmvec's vector sin and cos
 * (templates/fit/cpu_derived.c). */
#if defined(__x86_64__) && defined(__GLIBC__)
#define CC_VECTOR " -fopenmp-simd -DDM_LIBMVEC"
#define CC_LIBS "-lmvec -lm"
#else
#define CC_VECTOR ""
#define CC_LIBS "-lm"
#endif
#define CC_FLAGS "-O3 -march=native -fPIC -shared -fno-math-errno -std=gnu11 -w" CC_VECTOR

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Hash of every file in the templates folder and its subfolders, in name order. */
static unsigned long long hash_templates(const char *dir, unsigned long long h)
{
    DIR *d = opendir(dir);
    if (!d) return h;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char *path = dm_path_join(dir, names[i]);
        size_t len = 0;
        struct stat st;
        int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
        char *text = is_dir ? NULL : dm_read_file(path, &len);
        h = dm_hash64(names[i], strlen(names[i]), h);
        if (text) h = dm_hash64(text, len, h);
        if (is_dir) h = hash_templates(path, h);
        free(text);
        free(path);
        free(names[i]);
    }
    return h;
}

static void cpu_model_name(char *out, size_t n)
{
    snprintf(out, n, "unknown-cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            snprintf(out, n, "%s", line);
            break;
        }
    fclose(f);
}

static const char *host_cc(void)
{
    const char *cc = getenv("DIMOC_CC");
    if (!cc || !*cc) cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

/* Runs the compile command through the shell (CC may be "ccache gcc") as a child that a
 * SIGINT or SIGTERM stops (util/interrupt.h); its output goes to log_path. */
static int run_compiler(const char *cmd, const char *log_path)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    if (dm_stop_requested()) return dm_stop_error();
    int rc = dm_run_child(argv, log_path);
    if (dm_stop_requested()) return dm_stop_error();
    return rc == 0 ? 0 : -1;
}

int dm_cpu_fitter_load(const dm_model_info *mi, int real_size, dm_cpu_fitter *f)
{
    memset(f, 0, sizeof *f);
    f->real_size = real_size;
    char *tdir = dm_templates_dir();
    if (!tdir) return dm_set_error("cannot find the templates folder (looked beside the program)");
    char *cache = dm_cache_dir();
    if (!cache) {
        free(tdir);
        return -1;
    }
    const char *cc = host_cc();
    const char *real = real_size == 4 ? "float" : "double";
    char cpu[512];
    cpu_model_name(cpu, sizeof cpu);
    unsigned long long h = dm_hash64(mi->source, strlen(mi->source), 0);
    h = hash_templates(tdir, h);
    h = dm_hash64(cc, strlen(cc), h);
    h = dm_hash64(CC_FLAGS, strlen(CC_FLAGS), h);
    h = dm_hash64(real, strlen(real), h);
    h = dm_hash64(cpu, strlen(cpu), h);
    snprintf(f->so_path, sizeof f->so_path, "%s/%s-%s-%016llx.so", cache, mi->name, real, h);

    int rc = 0, lock = -1;
    double t0 = dm_now_seconds();
    if (access(f->so_path, R_OK) != 0) lock = dm_cache_entry_lock(f->so_path);
    if (access(f->so_path, R_OK) != 0) {
        /* Each process builds under its own temporary names and renames the result into
         * place, so two processes compiling the same model at once cannot see a half file. */
        char src[4200], tmp_so[4200], log[4200], cmd[16384];
        snprintf(src, sizeof src, "%s.%d.h", f->so_path, (int)getpid());
        snprintf(tmp_so, sizeof tmp_so, "%s.%d.tmp", f->so_path, (int)getpid());
        snprintf(log, sizeof log, "%s.%d.log", f->so_path, (int)getpid());
        FILE *out = fopen(src, "w");
        if (!out) {
            rc = dm_set_error("%s: cannot write to the cache folder", src);
        } else {
            fputs(mi->source, out);
            fclose(out);
            snprintf(cmd, sizeof cmd,
                     "%s " CC_FLAGS
                     " -DDM_REAL=%s -DDM_MODEL_FILE='\"%s\"' -I'%s' '%s/fit/cpu_fitter.c' "
                     "'%s/fit/cpu_derived.c' -o '%s' " CC_LIBS,
                     cc, real, src, tdir, tdir, tdir, tmp_so);
            if (run_compiler(cmd, log) != 0) {
                if (dm_stop_requested()) {
                    rc = -1; /* the temporary files are removed below */
                } else {
                    size_t n = 0;
                    char *msg = dm_read_file(log, &n);
                    char first[512] = "";
                    if (msg) sscanf(msg, "%511[^\n]", first);
                    rc = dm_set_error("host compiler failed on model '%s' (%s): %s", mi->name, cc,
                                      first);
                    free(msg);
                }
            } else if (rename(tmp_so, f->so_path) != 0) {
                rc = dm_set_error("%s: cannot rename into the cache", f->so_path);
            }
            unlink(src);
            unlink(log);
            unlink(tmp_so);
        }
        f->compile_seconds = dm_now_seconds() - t0;
    } else if (lock >= 0) {
        f->compile_seconds = dm_now_seconds() - t0; /* the wait for another's compile */
    }
    if (lock >= 0) close(lock);
    free(tdir);
    free(cache);
    if (rc != 0) return rc;

    f->handle = dlopen(f->so_path, RTLD_NOW | RTLD_LOCAL);
    if (!f->handle) return dm_set_error("%s: cannot load: %s", f->so_path, dlerror());
    int (*abi)(void) = (int (*)(void))dlsym(f->handle, "dm_fitter_abi");
    f->fit_voxel = (dm_fit_voxel_fn)dlsym(f->handle, "dm_fit_voxel");
    f->work_new = (dm_fit_work_new_fn)dlsym(f->handle, "dm_fit_work_new");
    f->work_free = (dm_fit_work_free_fn)dlsym(f->handle, "dm_fit_work_free");
    f->predict = (dm_predict_fn)dlsym(f->handle, "dm_predict");
    f->derived = (dm_derived_fn)dlsym(f->handle, "dm_derived");
    f->derived_rows = (dm_derived_rows_fn)dlsym(f->handle, "dm_derived_rows");
    f->dict_build = (dm_dict_build_fn)dlsym(f->handle, "dm_dict_build");
    f->dict_fit = (dm_dict_fit_fn)dlsym(f->handle, "dm_dict_fit_voxel");
    f->dict_free = (dm_dict_free_fn)dlsym(f->handle, "dm_dict_free");
    if (!abi || abi() != DM_FITTER_ABI || !f->fit_voxel || !f->work_new || !f->work_free ||
        !f->predict || !f->derived || !f->derived_rows || !f->dict_build || !f->dict_fit ||
        !f->dict_free) {
        dm_cpu_fitter_close(f);
        return dm_set_error("%s: not a dimoc fitter of this version (delete the cache)",
                            f->so_path);
    }
    return 0;
}

void dm_cpu_fitter_close(dm_cpu_fitter *f)
{
    if (f->handle) dlclose(f->handle);
    f->handle = NULL;
}
