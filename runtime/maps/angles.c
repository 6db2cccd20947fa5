/* Angle maps (th, ph, psi) from direction maps. */
#include "maps/angles.h"
#include "io/volume.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void dm_axis_angles(const double v[3], const double *w, double *th, double *ph, double *psi)
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
    if (v->nt != 3)
        return dm_set_error("angles: %s has %d volume%s; a direction map has 3 (x, y, z)", path,
                            v->nt, v->nt == 1 ? "" : "s");
    return 0;
}

static int write_map(const char *dir, const char *name, const char *suffix, const dm_volume *like,
                     const double *data)
{
    char file[256];
    snprintf(file, sizeof file, "%s%s.nii.gz", name, suffix ? suffix : "");
    char *path = dm_volume_output_path(dir, file);
    int rc = path ? dm_volume_write(path, like, 1, data, DM_OUT_FLOAT32) : -1;
    free(path);
    return rc;
}

int dm_angles_write(const char *vectors, const char *fanning, const char *out, const char *suffix,
                    dm_provenance *prov)
{
    dm_outdir od = {0};
    const char *dir = NULL;
    int rc = 0;
    dm_volume vec = {0}, fan = {0};
    double *th = NULL, *ph = NULL, *psi = NULL;
    if ((rc = read_vectors(vectors, &vec)) != 0) goto done;
    if (fanning && ((rc = read_vectors(fanning, &fan)) != 0 ||
                    (rc = dm_volume_check_same_grid(&fan, fanning, &vec, vectors)) != 0))
        goto done;
    size_t nvox = DM_NVOX(&vec);
    th = calloc(nvox ? nvox : 1, sizeof *th);
    ph = calloc(nvox ? nvox : 1, sizeof *ph);
    psi = calloc(nvox ? nvox : 1, sizeof *psi);
    if (!th || !ph || !psi) {
        rc = dm_set_error("out of memory");
        goto done;
    }
    for (size_t i = 0; i < nvox; i++) {
        double v[3] = {vec.data[i], vec.data[i + nvox], vec.data[i + 2 * nvox]};
        double w[3] = {0, 0, 0};
        if (fan.data)
            for (int c = 0; c < 3; c++) w[c] = fan.data[i + c * nvox];
        dm_axis_angles(v, fan.data ? w : NULL, &th[i], &ph[i], &psi[i]);
    }
    /* Merged into --out: two runs with different suffixes share a folder. */
    if ((rc = dm_outdir_begin(&od, out, DM_OUTDIR_MERGE)) != 0) goto done;
    dir = od.path;
    if ((rc = write_map(dir, "th", suffix, &vec, th)) != 0 ||
        (rc = write_map(dir, "ph", suffix, &vec, ph)) != 0)
        goto done;
    if (fan.data && (rc = write_map(dir, "psi", suffix, &vec, psi)) != 0) goto done;
    char name[300];
    snprintf(name, sizeof name, "provenance%.200s.json", suffix ? suffix : "");
    char *path = dm_path_join(dir, name);
    rc = path ? dm_provenance_write(prov, path) : dm_set_error("out of memory");
    free(path);
    if (rc == 0) rc = dm_outdir_commit(&od);
done:
    if (rc != 0) dm_outdir_abort(&od);
    dm_volume_free(&vec);
    dm_volume_free(&fan);
    free(th);
    free(ph);
    free(psi);
    return rc;
}
