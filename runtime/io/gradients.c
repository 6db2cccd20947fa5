/* Gradient tables: FSL's files through io/textio.h, MRtrix's world-frame rows turned into FSL's
 * bvecs frame through io/space.h's rotation of the image. */
#include "io/gradients.h"
#include "io/space.h"
#include "io/textio.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>

/* rows x 4 world-frame rows (x y z b) of `what` into b and FSL-frame g, R the rotation from
 * FSL's frame to world. */
static int rotate_rows(const double *rows, int n, const double R[3][3], const char *what,
                       double **b_out, double **g_out)
{
    double *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    double *g = calloc((size_t)(n > 0 ? n : 1) * 3, sizeof *g);
    if (!b || !g) {
        free(b);
        free(g);
        return dm_set_error("%s: out of memory reading the gradient table", what);
    }
    int renormalised = 0, first = -1;
    for (int i = 0; i < n; i++) {
        const double *r = rows + 4 * (size_t)i;
        b[i] = r[3];
        if (!isfinite(r[0]) || !isfinite(r[1]) || !isfinite(r[2]) || !isfinite(r[3]) || r[3] < 0) {
            free(b);
            free(g);
            return dm_set_error("%s: gradient row %d (%g %g %g %g) is not finite directions and a "
                                "b-value >= 0",
                                what, i + 1, r[0], r[1], r[2], r[3]);
        }
        double norm = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
        if (norm == 0) continue;
        double u[3] = {r[0], r[1], r[2]};
        if (b[i] > 0 && fabs(1 - norm) > 0.01 && renormalised++ == 0) first = i;
        if (b[i] > 0)
            for (int k = 0; k < 3; k++) u[k] /= norm;
        dm_rotate3(R, u, g + 3 * (size_t)i, 1);
    }
    if (renormalised)
        dm_warn("%s: %d direction%s of b>0 not of unit length (first: row %d); normalised", what,
                renormalised, renormalised > 1 ? "s" : "", first + 1);
    *b_out = b;
    *g_out = g;
    return 0;
}

static int from_world(const double *rows, int n, const dm_volume *data, const char *what,
                      double **b_out, double **g_out)
{
    double R[3][3]; /* FSL frame -> world; its transpose takes world back */
    dm_volume_bvec_rotation(data, R);
    return rotate_rows(rows, n, R, what, b_out, g_out);
}

int dm_gradients_from_world(const double *rows, int n, const double vox2world[16],
                            const char *what, double **b, double **g)
{
    dm_affine a;
    for (int i = 0; i < 16; i++) a.m[i / 4][i % 4] = vox2world[i];
    double R[3][3];
    dm_affine_bvec_rotation(&a, R);
    return rotate_rows(rows, n, R, what, b, g);
}

int dm_read_gradients(const dm_grad_files *f, const dm_volume *data, const char *data_path,
                      double **b, double **g, const char **source)
{
    *b = *g = NULL;
    const int nvol = data->nt;
    if (f->bvals || f->bvecs) {
        if (!f->bvals || !f->bvecs)
            return dm_set_error("%s given without %s: %s is required with %s (or --grad FILE "
                                "instead of both)",
                                f->bvals ? "--bvals" : "--bvecs", f->bvals ? "--bvecs" : "--bvals",
                                f->bvals ? "--bvecs" : "--bvals", f->bvals ? "--bvals" : "--bvecs");
        if (source) *source = f->bvals;
        int n;
        return dm_read_bvals_bvecs(f->bvals, f->bvecs, nvol, b, g, &n);
    }
    if (f->grad) {
        if (source) *source = f->grad;
        int rows, cols;
        double *m;
        if (dm_read_matrix(f->grad, &rows, &cols, &m) != 0) return -1;
        int rc = 0;
        if (cols != 4)
            rc = dm_set_error("%s: an MRtrix gradient table has 4 columns (x y z b), this has %d",
                              f->grad, cols);
        else if (rows != nvol)
            rc = dm_set_error("%s: %d rows but %s has %d volumes", f->grad, rows, data_path, nvol);
        if (rc == 0) rc = from_world(m, rows, data, f->grad, b, g);
        free(m);
        return rc;
    }
    if (data->dw_scheme) {
        if (source) *source = data_path;
        if (data->dw_rows != nvol)
            return dm_set_error("%s: dw_scheme has %d rows but the image has %d volumes", data_path,
                                data->dw_rows, nvol);
        return from_world(data->dw_scheme, nvol, data, data_path, b, g);
    }
    return dm_set_error("%s: no gradient table: give --bvals and --bvecs, or --grad FILE, or an "
                        "MRtrix image with a dw_scheme",
                        data_path);
}
