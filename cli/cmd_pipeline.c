/* dimoc pipeline NAME ARGS...: runs a shipped pipeline, the shell script pipelines/NAME.sh
 * (found like the shipped models: the build tree's pipelines/, or share/dimoc/pipelines when
 * installed), with DIMOC set to this program so that the script's dimoc calls run the same
 * build. */
#include "cli.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/json.h"
#include "util/outdir.h"
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

/* Where the output folder is among a pipeline's arguments: the value of --out DIR or
 * --out=DIR, else the fifth of the positional form DATA MASK BVALS BVECS OUTDIR [..]; -1
 * when there is none (a usage error the script reports). */
static int out_argument(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--out")) return i + 1 < argc ? i + 1 : -1;
        if (!strncmp(argv[i], "--out=", 6)) return i;
    }
    for (int i = 0; i < 5; i++)
        if (i >= argc || argv[i][0] == '-') return -1;
    return 4;
}

/* Runs `bash SCRIPT ARGS..` (args, NULL-ended) with the output folder args[at] replaced by a
 * temporary folder beside it, which is put in place with a provenance.json when the script
 * succeeds, and removed when it fails or is stopped by a signal (util/outdir.h): the output
 * folder is the earlier run's or this one's, never a mix.  Returns the exit status. */
static int run_all_or_nothing(const char *name, char **args, int at)
{
    int eq = !strncmp(args[at], "--out=", 6);
    const char *out = args[at] + (eq ? 6 : 0);
    dm_outdir od;
    if (dm_outdir_begin(&od, out, DM_OUTDIR_REPLACE) != 0) return dm_report_error();
    char *given = args[at], *tmp_arg = malloc(strlen(od.path) + 8);
    if (!tmp_arg) {
        dm_outdir_abort(&od);
        dm_set_error("out of memory");
        return dm_report_error();
    }
    sprintf(tmp_arg, "%s%s", eq ? "--out=" : "", od.path);
    args[at] = tmp_arg;
    dm_provenance prov;
    dm_provenance_begin(&prov, "pipeline");
    dm_provenance_str(&prov, DM_PROV_OPTION, "pipeline", name);
    dm_provenance_str(&prov, DM_PROV_INPUT, "script", args[1]);
    int status = dm_run_child(args, NULL);
    args[at] = given;
    int rc = status < 0 ? -1 : 0;
    if (rc == 0 && status != 0 && !dm_stop_requested())
        rc = dm_set_error("pipeline %s: the script failed (exit status %d); %s", name, status,
                          "its output folder is removed");
    if (rc == 0 && !dm_stop_requested()) {
        dm_provenance_num(&prov, DM_PROV_RESULT, "exit_status", status);
        char *path = dm_path_join(od.path, "provenance.json");
        rc = path ? dm_provenance_write(&prov, path) : dm_set_error("out of memory");
        free(path);
    }
    if (rc == 0 && dm_stop_requested()) rc = dm_stop_error();
    if (rc == 0)
        rc = dm_outdir_commit(&od);
    else
        dm_outdir_abort(&od);
    dm_provenance_free(&prov);
    free(tmp_arg);
    if (rc == 0) return 0;
    dm_report_error();
    return status > 0 ? status : 1;
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
    int at = out_argument(argc - 1, argv + 1);
    if (at >= 0) {
        int rc = run_all_or_nothing(name, args, at + 2);
        free(args);
        free(script);
        return rc;
    }
    fflush(stdout);
    execvp("bash", args);
    dm_set_error("pipeline: cannot run bash for %s: %s", script, strerror(errno));
    free(args);
    free(script);
    return dm_report_error();
}
