/* dimoc compare: fitted maps against known truth, region by region, as a table
 * (runtime/maps/compare.c). */
#include "args.h"
#include "cli.h"
#include "maps/compare.h"
#include "util/error.h"

#include <stdio.h>

static const dm_opt compare_opts[] = {
    {"truth", "DIR", NULL, "folder of true maps NAME.nii.gz"},
    {"fit", "DIR", NULL, "folder of fitted maps NAME.nii.gz"},
    {"params", "NAMES", NULL, "scalar maps to compare (comma list)"},
    {"axes", "NAMES", NULL,
     "direction maps (3 volumes) to compare by angle; two names are "
     "matched to the truth in the better order per voxel"},
    {"regions", "MAP", NULL, "integer label map; one table row per label (default: one region)"},
    {"region-names", "NAMES", NULL, "names of labels 1, 2, ... (comma list)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_compare(FILE *out)
{
    dm_args_help(
        out, "dimoc compare --truth DIR --fit DIR [--params ..] [--axes ..] [--regions MAP]",
        "Prints, per region, the mean true and fitted value and the mean absolute error of\n"
        "each scalar map, and the median angle (degrees) between true and fitted axes.\n"
        "Voxels whose fit status is not 1 (fitted), 2 or 6 are left out.",
        compare_opts);
    return 0;
}

int dm_cmd_compare(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("compare", compare_opts, argc, argv, &a) != 0) return dm_report_error();
    dm_compare_settings s = {
        .truth_dir = dm_arg(&a, compare_opts, "truth"),
        .fit_dir = dm_arg(&a, compare_opts, "fit"),
        .params = dm_arg(&a, compare_opts, "params"),
        .axes = dm_arg(&a, compare_opts, "axes"),
        .regions = dm_arg(&a, compare_opts, "regions"),
        .region_names = dm_arg(&a, compare_opts, "region-names"),
    };
    int rc = !s.truth_dir || !s.fit_dir ? dm_set_error("compare: --truth and --fit are required")
                                        : dm_compare_maps(&s, stdout);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
