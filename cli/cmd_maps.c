/* The map tools, each a thin command over runtime/maps/:
 *   dimoc angles   a map of directions (a tensor's V1, a fit's dyads) as the angles th, ph the
 *                  shipped models use, and with a second direction the Bingham models' fanning
 *                  angle psi: starting values for `dimoc fit --init-from DIR` (maps/angles.c);
 *   dimoc compare  fitted maps against known truth, region by region, as a table
 *                  (maps/compare.c);
 *   dimoc select   per voxel, which of several maps is lowest (model selection by BIC or AIC,
 *                  as thesis Table 5.4), as a label map and a table of percentages
 *                  (maps/select.c). */
#include "args.h"
#include "io/formats.h"
#include "cli.h"
#include "maps/angles.h"
#include "maps/compare.h"
#include "maps/select.h"
#include "util/error.h"

#include <stdio.h>

static const dm_opt angles_opts[] = {
    {"out", "DIR", NULL, "output folder (created when missing)"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"fanning", "VECTORS", NULL, "a second direction map (e.g. the tensor's V2): also write psi"},
    {"suffix", "TEXT", NULL, "put TEXT after every map name (e.g. 1 for th1, ph1, psi1)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_angles(FILE *out)
{
    dm_args_help(
        out, "dimoc angles VECTORS.nii.gz --out DIR [--fanning VECTORS2.nii.gz] [--suffix TEXT]",
        "Writes the directions of VECTORS (3 volumes: x, y, z; e.g. dti's V1 or a fit's\n"
        "dyads1) as th.nii.gz (polar angle, 0..pi) and ph.nii.gz (azimuth, 0..2 pi), the\n"
        "angles of dir(th, ph) in the models, for `dimoc fit --init-from DIR`.  With\n"
        "--fanning, also psi.nii.gz (0..pi): the angle that makes the fanning axis\n"
        "n2 = v x n1, n1 = cos(psi) e_th + sin(psi) e_ph (the frame of noddi_bingham,\n"
        "ball_1_racket and noddi_2_binghams) the second direction's part perpendicular to\n"
        "the first.  Zero vectors (outside a mask) give 0.",
        angles_opts);
    return 0;
}

int dm_cmd_angles(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("angles", angles_opts, dm_help_angles, argc, argv, &a) != 0)
        return dm_report_error();
    const char *out = dm_arg(&a, angles_opts, "out");
    int rc;
    if (a.npositional != 1)
        rc = dm_set_error("angles: give one direction map (got %d)", a.npositional);
    else if (!out)
        rc = dm_set_error("angles: --out is required");
    else {
        static const char *const inputs[] = {"fanning", NULL};
        dm_provenance prov;
        dm_provenance_begin(&prov, "angles");
        dm_provenance_args(&prov, &a, angles_opts, inputs);
        rc = dm_angles_write(a.positional[0], dm_arg(&a, angles_opts, "fanning"), out,
                             dm_arg(&a, angles_opts, "suffix"), &prov);
        dm_provenance_free(&prov);
    }
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

static const dm_opt compare_opts[] = {
    {"truth", "DIR", NULL, "folder of true maps NAME.nii.gz"},
    {"fit", "DIR", NULL, "folder of fitted maps NAME.nii.gz"},
    {"params", "NAMES", NULL, "scalar maps to compare (comma list)"},
    {"axes", "NAMES", NULL,
     "direction maps (3 volumes) to compare by angle; two names are "
     "matched to the truth in the better order per voxel"},
    {"regions", "MAP", NULL, "integer label map; one table row per label (default: one region)"},
    {"region-names", "NAMES", NULL, "names of labels 1, 2, ... (comma list)"},
    {"status", "MAP", "FIT/status.nii.gz",
     "the status map of the voxels to count (e.g. a CSD's, for the peaks of its FODs)"},
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
    if (dm_args_parse("compare", compare_opts, dm_help_compare, argc, argv, &a) != 0)
        return dm_report_error();
    dm_compare_settings s = {
        .truth_dir = dm_arg(&a, compare_opts, "truth"),
        .fit_dir = dm_arg(&a, compare_opts, "fit"),
        .params = dm_arg(&a, compare_opts, "params"),
        .axes = dm_arg(&a, compare_opts, "axes"),
        .regions = dm_arg(&a, compare_opts, "regions"),
        .region_names = dm_arg(&a, compare_opts, "region-names"),
        .status =
            dm_arg_given(&a, compare_opts, "status") ? dm_arg(&a, compare_opts, "status") : NULL,
    };
    int rc = !s.truth_dir || !s.fit_dir ? dm_set_error("compare: --truth and --fit are required")
                                        : dm_compare_maps(&s, stdout);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

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
    if (dm_args_parse("select", select_opts, dm_help_select, argc, argv, &a) != 0)
        return dm_report_error();
    static const char *const inputs[] = {"mask", NULL};
    dm_provenance prov;
    dm_provenance_begin(&prov, "select");
    dm_provenance_args(&prov, &a, select_opts, inputs);
    dm_select_settings s = {
        .maps = (const char *const *)a.positional,
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
