/* Where dimoc finds what it ships (models, templates, pipelines) and where it caches what it
 * compiles. */
#include "util/paths.h"
#include "util/fsutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Looks for `rel` under the build tree (exe/..) and the install tree (exe/../share/dimoc). */
static char *find_data(const char *rel)
{
    const char *env = getenv("DIMOC_DATA_DIR");
    char *exe = dm_exe_dir();
    const char *bases[3] = {env, NULL, NULL};
    char b1[4096], b2[4096];
    if (exe) {
        snprintf(b1, sizeof b1, "%s/..", exe);
        snprintf(b2, sizeof b2, "%s/../share/dimoc", exe);
        bases[1] = b1;
        bases[2] = b2;
    }
    char *found = NULL;
    for (int i = 0; i < 3 && !found; i++) {
        if (!bases[i]) continue;
        char *path = dm_path_join(bases[i], rel);
        if (access(path, R_OK) == 0)
            found = path;
        else
            free(path);
    }
    free(exe);
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
