/* dimoc angles: a map of directions (a tensor's V1, a fit's dyads) as the angles th, ph that
 * the shipped models use, and with a second direction the Bingham models' fanning angle psi:
 * maps that `dimoc fit --init-from DIR` takes as starting values in a cascade. */
#include "args.h"
#include "cli.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/volume.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt angles_opts[] = {
    {"out", "DIR", NULL, "output folder (created when missing)"},
    {"fanning", "VECTORS", NULL, "a second direction map (e.g. the tensor's V2): also write psi"},
    {"suffix", "TEXT", NULL, "put TEXT after every map name (e.g. 1 for th1, ph1, psi1)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_angles(FILE *out)
{
    dm_args_help(out, "dimoc angles VECTORS.nii.gz --out DIR [--fanning VECTORS2.nii.gz] [--suffix TEXT]",
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

/* th, ph and (when w is given) psi of the axis v; 0 when v is zero or not finite. */
static void axis_angles(const double v[3], const double *w, double *th, double *ph, double *psi)
{
    *th = *ph = *psi = 0;
    double n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (!(n > 0) || !isfinite(n)) return;
    double x = v[0] / n, y = v[1] / n, z = v[2] / n;
    *th = acos(fmax(-1.0, fmin(1.0, z)));
    *ph = atan2(y, x);
    if (*ph < 0) *ph += 2 * M_PI;
    if (!w) return;
    /* n2 = v x n1 = cos(psi) e_ph - sin(psi) e_th, so psi = atan2(-w.e_th, w.e_ph); the e_th
     * and e_ph parts are those of w's part perpendicular to v. */
    double ct = cos(*th), st = sin(*th), cp = cos(*ph), sp = sin(*ph);
    double w_th = w[0] * ct * cp + w[1] * ct * sp - w[2] * st;
    double w_ph = -w[0] * sp + w[1] * cp;
    if (!(w_th * w_th + w_ph * w_ph > 0)) return;
    *psi = fmod(atan2(-w_th, w_ph), M_PI);
    if (*psi < 0) *psi += M_PI;
}

static int read_vectors(const char *path, dm_volume *v)
{
    if (dm_volume_read(path, v) != 0) return -1;
    if (v->nt != 3) return dm_set_error("angles: %s has %d volume%s; a direction map has 3 (x, y, z)",
                                        path, v->nt, v->nt == 1 ? "" : "s");
    return 0;
}

static int write_map(const char *dir, const char *name, const char *suffix, const dm_volume *like,
                     const double *data)
{
    char file[256];
    snprintf(file, sizeof file, "%s%s.nii.gz", name, suffix ? suffix : "");
    char *path = dm_path_join(dir, file);
    int rc = dm_volume_write(path, like, 1, data, DM_OUT_FLOAT32);
    free(path);
    return rc;
}

int dm_cmd_angles(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("angles", angles_opts, argc, argv, &a) != 0) return dm_report_error();
    int rc = 0;
    dm_volume vec = {0}, fan = {0};
    double *th = NULL, *ph = NULL, *psi = NULL;
    const char *out = dm_arg(&a, angles_opts, "out");
    const char *fpath = dm_arg(&a, angles_opts, "fanning");
    const char *suffix = dm_arg(&a, angles_opts, "suffix");
    if (a.npositional != 1) {
        rc = dm_set_error("angles: give one direction map (got %d)", a.npositional);
        goto done;
    }
    if (!out) {
        rc = dm_set_error("angles: --out is required");
        goto done;
    }
    if ((rc = read_vectors(a.positional[0], &vec)) != 0) goto done;
    if (fpath && ((rc = read_vectors(fpath, &fan)) != 0 ||
                  (rc = dm_volume_check_same_grid(&fan, fpath, &vec, a.positional[0])) != 0))
        goto done;
    size_t nvox = DM_NVOX(&vec);
    th = calloc(nvox ? nvox : 1, sizeof *th);
    ph = calloc(nvox ? nvox : 1, sizeof *ph);
    psi = calloc(nvox ? nvox : 1, sizeof *psi);
    for (size_t i = 0; i < nvox; i++) {
        double v[3] = {vec.data[i], vec.data[i + nvox], vec.data[i + 2 * nvox]};
        double w[3] = {0, 0, 0};
        if (fan.data)
            for (int c = 0; c < 3; c++) w[c] = fan.data[i + c * nvox];
        axis_angles(v, fan.data ? w : NULL, &th[i], &ph[i], &psi[i]);
    }
    if ((rc = dm_mkdir_p(out)) != 0 || (rc = write_map(out, "th", suffix, &vec, th)) != 0 ||
        (rc = write_map(out, "ph", suffix, &vec, ph)) != 0)
        goto done;
    if (fan.data && (rc = write_map(out, "psi", suffix, &vec, psi)) != 0) goto done;
done:
    dm_volume_free(&vec);
    dm_volume_free(&fan);
    free(th);
    free(ph);
    free(psi);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
