/* dimoc phantom: a small ball & two sticks phantom with known truth, for the demo and tests
 * (runtime/simulate/phantom.c). */
#include "args.h"
#include "io/formats.h"
#include "cli.h"
#include "simulate/phantom.h"
#include "util/error.h"

#include <stdio.h>

static const dm_opt phantom_opts[] = {
    {"out", "DIR", NULL, "folder for the truth maps, regions.nii.gz and mask.nii.gz"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"size", "N", "6", "each region is N x N x 2 voxels"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_phantom(FILE *out)
{
    dm_args_help(
        out, "dimoc phantom --out DIR [--size N]",
        "Writes ball_2_sticks parameter maps (S0 d f1 th1 ph1 f2 th2 ph2), the fibre\n"
        "directions dyads1/dyads2, regions.nii.gz (1 one fibre, 2 crossing at 90 degrees,\n"
        "3 crossing at 60 degrees, 4 free water) and mask.nii.gz.  Simulate with\n"
        "'dimoc simulate ball_2_sticks --params S0=DIR/S0.nii.gz,...'.",
        phantom_opts);
    return 0;
}

int dm_cmd_phantom(int argc, char **argv)
{
    dm_args a;
    long n = 6;
    if (dm_args_parse("phantom", phantom_opts, dm_help_phantom, argc, argv, &a) != 0 ||
        dm_arg_long(&a, phantom_opts, "size", 1, 256, &n) != 0)
        return dm_report_error();
    const char *dir = dm_arg(&a, phantom_opts, "out");
    dm_provenance prov;
    dm_provenance_begin(&prov, "phantom");
    int rc =
        dir ? dm_phantom_write(dir, (int)n, &prov) : dm_set_error("phantom: --out is required");
    dm_provenance_free(&prov);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
