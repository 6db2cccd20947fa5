/* Where dimoc finds what it ships (models, templates, pipelines) and where it caches what it
 * compiles. */
#define _GNU_SOURCE /* dladdr */
#include "util/paths.h"
#include "util/fsutil.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The folder set by dm_set_data_dir, ahead of every other place. */
static pthread_mutex_t data_dir_lock = PTHREAD_MUTEX_INITIALIZER;
static char *data_dir_set;

void dm_set_data_dir(const char *dir)
{
    char *copy = dir ? strdup(dir) : NULL;
    pthread_mutex_lock(&data_dir_lock);
    free(data_dir_set);
    data_dir_set = copy;
    pthread_mutex_unlock(&data_dir_lock);
}

/* The folder of the shared library this code was linked into (libdimoc.so), or NULL inside
 * the program itself. */
static char *library_dir(void)
{
    Dl_info info;
    if (!dladdr((void *)library_dir, &info) || !info.dli_fname || !*info.dli_fname) return NULL;
    char lib[PATH_MAX], exe[PATH_MAX];
    if (!realpath(info.dli_fname, lib)) return NULL;
    if (realpath("/proc/self/exe", exe) && strcmp(lib, exe) == 0) return NULL;
    *strrchr(lib, '/') = 0;
    return strdup(lib);
}

/* Looks for `rel` in the folder dm_set_data_dir gave, $DIMOC_DATA_DIR, then beside the shared
 * library when this code is one (lib/.. and lib/../share/dimoc: a build tree's build/, an install
 * tree's PREFIX/lib, the Python package's dimoc/lib), then under the program's build tree
 * (exe/..) and install tree (exe/../share/dimoc). */
static char *find_data(const char *rel)
{
    pthread_mutex_lock(&data_dir_lock);
    char *set = data_dir_set ? strdup(data_dir_set) : NULL;
    pthread_mutex_unlock(&data_dir_lock);
    const char *env = getenv("DIMOC_DATA_DIR");
    char *exe = dm_exe_dir(), *lib = library_dir();
    char b[4][PATH_MAX + 32];
    const char *bases[6] = {set, env, NULL, NULL, NULL, NULL};
    int n = 2;
    const char *dirs[2] = {lib, exe};
    for (int k = 0; k < 2; k++) {
        if (!dirs[k]) continue;
        snprintf(b[2 * k], sizeof b[0], "%s/..", dirs[k]);
        snprintf(b[2 * k + 1], sizeof b[0], "%s/../share/dimoc", dirs[k]);
        bases[n++] = b[2 * k];
        bases[n++] = b[2 * k + 1];
    }
    char *found = NULL;
    for (int i = 0; i < n && !found; i++) {
        if (!bases[i]) continue;
        char *path = dm_path_join(bases[i], rel);
        if (access(path, R_OK) == 0)
            found = path;
        else
            free(path);
    }
    free(set);
    free(exe);
    free(lib);
    return found;
}

char *dm_data_path(const char *rel)
{
    return find_data(rel);
}

char *dm_shipped_model_path(const char *name)
{
    char rel[512];
    snprintf(rel, sizeof rel, "models/%s.model", name);
    return find_data(rel);
}

char *dm_templates_dir(void)
{
    /* the folder that holds fit/fit_api.h, a file of every tree */
    static const char mark[] = "/fit/fit_api.h";
    char *f = find_data("templates/fit/fit_api.h");
    if (!f) return NULL;
    f[strlen(f) - (sizeof mark - 1)] = 0;
    return f;
}

char *dm_cache_dir(void)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char base[4096];
    if (xdg && *xdg)
        snprintf(base, sizeof base, "%s/dimoc", xdg);
    else if (home && *home)
        snprintf(base, sizeof base, "%s/.cache/dimoc", home);
    else
        snprintf(base, sizeof base, "/tmp/dimoc-cache-%d", (int)getuid());
    if (dm_mkdir_p(base) != 0) return NULL;
    return strdup(base);
}
