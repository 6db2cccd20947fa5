/* dimoc angles: a map of directions (a tensor's V1, a fit's dyads) as the angles th, ph that
 * the shipped models use, and with a second direction the Bingham models' fanning angle psi:
 * maps that `dimoc fit --init-from DIR` takes as starting values in a cascade
 * (runtime/maps/angles.c). */
#include "args.h"
#include "cli.h"
#include "provenance_args.h"
#include "maps/angles.h"
#include "util/error.h"

#include <stdio.h>

static const dm_opt angles_opts[] = {
    {"out", "DIR", NULL, "output folder (created when missing)"},
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
    if (dm_args_parse("angles", angles_opts, argc, argv, &a) != 0) return dm_report_error();
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
