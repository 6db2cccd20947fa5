/* dimoc select: per voxel, which of several maps is lowest (model selection by BIC or AIC,
 * as thesis Table 5.4; runtime/maps/select.c), as a label map and a table of percentages. */
#include "args.h"
#include "cli.h"
#include "provenance_args.h"
#include "maps/select.h"
#include "util/error.h"

#include <stdio.h>

static const dm_opt select_opts[] = {
    {"out", "FILE", NULL, "label map: i where MAPi is the lowest (1-based), 0 where not compared"},
    {"names", "NAMES", NULL,
     "names of the maps in the table (comma list; default: the map's folder)"},
    {"mask", "FILE", NULL,
     "compare where non-zero (default: where every map is finite and non-zero)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_select(FILE *out)
{
    dm_args_help(
        out, "dimoc select MAP1 MAP2 [MAP3 ..] --out FILE [--names ..] [--mask FILE]",
        "For model selection: give the BIC (or AIC) maps of fits of several models\n"
        "(dimoc fit --ic); writes, per voxel, the number of the lowest one and prints the\n"
        "percentage of voxels where each is lowest.  Ties go to the earlier map.",
        select_opts);
    return 0;
}

int dm_cmd_select(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("select", select_opts, argc, argv, &a) != 0) return dm_report_error();
    static const char *const inputs[] = {"mask", NULL};
    dm_provenance prov;
    dm_provenance_begin(&prov, "select");
    dm_provenance_args(&prov, &a, select_opts, inputs);
    dm_select_settings s = {
        .maps = a.positional,
        .nmaps = a.npositional,
        .names = dm_arg(&a, select_opts, "names"),
        .mask = dm_arg(&a, select_opts, "mask"),
        .out = dm_arg(&a, select_opts, "out"),
        .prov = &prov,
    };
    dm_select_result r;
    int rc = 0;
    if (s.nmaps < 2 || s.nmaps > DM_SELECT_MAX_MAPS)
        rc = dm_set_error("select: give 2 to %d maps to compare (got %d)", DM_SELECT_MAX_MAPS,
                          s.nmaps);
    else if (!s.out)
        rc = dm_set_error("select: --out is required");
    else
        rc = dm_select_lowest(&s, &r);
    if (rc == 0) {
        printf("%-24s %8s %8s\n", "lowest", "voxels", "percent");
        for (int i = 0; i < s.nmaps; i++)
            printf("%-24s %8ld %7.1f%%\n", r.names[i], r.count[i],
                   100.0 * (double)r.count[i] / (double)r.total);
    }
    dm_provenance_free(&prov);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
