/* dimoc select: per voxel, which of several maps is lowest (model selection by BIC or AIC,
 * as thesis Table 5.4), as a label map and a table of percentages. */
#include "args.h"
#include "cli.h"
#include "util/error.h"
#include "io/volume.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MAPS 15

static const dm_opt select_opts[] = {
    {"out", "FILE", NULL, "label map: i where MAPi is the lowest (1-based), 0 where not compared"},
    {"names", "NAMES", NULL, "names of the maps in the table (comma list; default: the map's folder)"},
    {"mask", "FILE", NULL, "compare where non-zero (default: where every map is finite and non-zero)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_select(FILE *out)
{
    dm_args_help(out, "dimoc select MAP1 MAP2 [MAP3 ..] --out FILE [--names ..] [--mask FILE]",
                 "For model selection: give the BIC (or AIC) maps of fits of several models\n"
                 "(dimoc fit --ic); writes, per voxel, the number of the lowest one and prints the\n"
                 "percentage of voxels where each is lowest.  Ties go to the earlier map.",
                 select_opts);
    return 0;
}

/* Default name of a map: its folder's last component ("fits/ball_2_sticks/BIC.nii.gz" ->
 * "ball_2_sticks"), else the file name. */
static void default_name(const char *path, char *name, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(name, size, "%s", path);
        return;
    }
    const char *start = slash;
    while (start > path && start[-1] != '/') start--;
    snprintf(name, size, "%.*s", (int)(slash - start), start);
    if (!name[0]) snprintf(name, size, "%s", slash + 1);
}

int dm_cmd_select(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("select", select_opts, argc, argv, &a) != 0) return dm_report_error();
    int n = a.npositional, rc = 0;
    dm_volume maps[MAX_MAPS] = {{0}}, mask = {0};
    double *labels = NULL;
    char names[MAX_MAPS][64];
    const char *out = dm_arg(&a, select_opts, "out");
    if (n < 2 || n > MAX_MAPS) {
        rc = dm_set_error("select: give 2 to %d maps to compare (got %d)", MAX_MAPS, n);
        goto done;
    }
    if (!out) {
        rc = dm_set_error("select: --out is required");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if ((rc = dm_volume_read(a.positional[i], &maps[i])) != 0) goto done;
        if (i > 0 && (rc = dm_volume_check_same_grid(&maps[i], a.positional[i], &maps[0], a.positional[0])) != 0)
            goto done;
        default_name(a.positional[i], names[i], sizeof names[i]);
    }
    const char *given = dm_arg(&a, select_opts, "names");
    if (given) {
        char *copy = strdup(given), *save = NULL;
        int k = 0;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save), k++)
            if (k < n) snprintf(names[k], sizeof names[k], "%s", t);
        free(copy);
        if (k != n) {
            rc = dm_set_error("--names: %d names for %d maps", k, n);
            goto done;
        }
    }
    const char *mpath = dm_arg(&a, select_opts, "mask");
    if (mpath && ((rc = dm_volume_read(mpath, &mask)) != 0 ||
                  (rc = dm_volume_check_same_grid(&mask, mpath, &maps[0], a.positional[0])) != 0))
        goto done;

    size_t nvox = DM_NVOX(&maps[0]);
    labels = calloc(nvox ? nvox : 1, sizeof *labels);
    long count[MAX_MAPS] = {0}, total = 0;
    for (size_t v = 0; v < nvox; v++) {
        if (mask.data && !(mask.data[v] != 0)) continue;
        int best = -1, usable = 1;
        for (int i = 0; i < n && usable; i++) {
            double x = maps[i].data[v];
            if (!isfinite(x) || (!mask.data && x == 0)) usable = 0;
            else if (best < 0 || x < maps[best].data[v]) best = i;
        }
        if (!usable) continue;
        labels[v] = best + 1;
        count[best]++;
        total++;
    }
    if (total == 0) {
        rc = dm_set_error("select: no voxel where every map has a value");
        goto done;
    }
    if ((rc = dm_volume_write(out, &maps[0], 1, labels, DM_OUT_UINT8)) != 0) goto done;
    printf("%-24s %8s %8s\n", "lowest", "voxels", "percent");
    for (int i = 0; i < n; i++)
        printf("%-24s %8ld %7.1f%%\n", names[i], count[i], 100.0 * (double)count[i] / (double)total);
done:
    for (int i = 0; i < n && i < MAX_MAPS; i++) dm_volume_free(&maps[i]);
    dm_volume_free(&mask);
    free(labels);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
