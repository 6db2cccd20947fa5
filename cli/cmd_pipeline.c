/* dimoc pipeline NAME ARGS...: runs a shipped pipeline, the shell script pipelines/NAME.sh
 * (found like the shipped models: the build tree's pipelines/, or share/dimoc/pipelines when
 * installed), with DIMOC set to this program so that the script's dimoc calls run the same
 * build. */
#include "cli.h"
#include "util/error.h"
#include "util/paths.h"
#include "model/model_info.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Prints the shipped pipelines, one per line, sorted. */
static void list_pipelines(FILE *out)
{
    char *dir = dm_data_path("pipelines");
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) {
        fprintf(out, "  (no pipelines folder found)\n");
        free(dir);
        return;
    }
    char *names[256];
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && count < 256) {
        size_t n = strlen(e->d_name);
        if (n > 3 && !strcmp(e->d_name + n - 3, ".sh") && e->d_name[0] != '.')
            names[count++] = strndup(e->d_name, n - 3);
    }
    closedir(d);
    free(dir);
    qsort(names, count, sizeof *names, cmp_names);
    for (int i = 0; i < count; i++) {
        fprintf(out, "  %s\n", names[i]);
        free(names[i]);
    }
}

int dm_help_pipeline(FILE *out)
{
    fprintf(out,
            "usage: dimoc pipeline NAME [ARGS...]\n\n"
            "Runs the shipped pipeline NAME (pipelines/NAME.sh, a bash script of dimoc commands\n"
            "that you can copy and change) with ARGS.  Run it without ARGS for its usage.\n\n"
            "pipelines:\n");
    list_pipelines(out);
    return 0;
}

int dm_cmd_pipeline(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        dm_help_pipeline(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    const char *name = argv[0];
    /* A plain name: no path can lead the lookup out of the pipelines folder. */
    if (!*name ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
            strlen(name)) {
        dm_set_error("pipeline: '%s' is not a pipeline name (letters, digits, '_' and '-')", name);
        return dm_report_error();
    }
    char rel[300];
    snprintf(rel, sizeof rel, "pipelines/%.200s.sh", name);
    char *script = dm_data_path(rel);
    if (!script) {
        fprintf(stderr, "dimoc: error: no pipeline named '%s'; the shipped ones:\n", name);
        list_pipelines(stderr);
        return 1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        setenv("DIMOC", self, 1);
    }
    char **args = calloc((size_t)argc + 2, sizeof *args);
    args[0] = "bash";
    args[1] = script;
    for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
    fflush(stdout);
    execvp("bash", args);
    dm_set_error("pipeline: cannot run bash for %s: %s", script, strerror(errno));
    free(args);
    free(script);
    return dm_report_error();
}
