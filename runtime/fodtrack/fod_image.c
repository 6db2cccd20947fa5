#include "fodtrack/fod_image.h"

#include "sphere/sh.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dm_fod_sh_table_fill(dm_fod_sh_table *t)
{
    memset(t, 0, sizeof *t);
    const double pi = 3.14159265358979323846;
    for (int m = 0; m <= DM_FOD_LMAX_MAX; m++) {
        /* Q_mm = (-1)^m (2m - 1)!! sqrt((2m + 1) / (4 pi (2m)!)), sqrt(2) for m > 0 */
        double q = sqrt((2.0 * m + 1) / (4 * pi));
        for (int k = 1; k <= m; k++) q *= -sqrt((2.0 * k - 1) / (2.0 * k));
        t->start[m] = m > 0 ? q * sqrt(2.0) : q;
        for (int l = m + 1; l <= DM_FOD_LMAX_MAX; l++) {
            t->a[l][m] = sqrt((4.0 * l * l - 1) / ((double)l * l - (double)m * m));
            t->b[l][m] = l - 1 > m ? sqrt(((l - 1.0) * (l - 1.0) - (double)m * m) /
                                          (4.0 * (l - 1.0) * (l - 1.0) - 1))
                                   : 0;
        }
    }
}

int dm_fod_row_order(int lmax, int *natural)
{
    int j = 0;
    for (int m = 0; m <= lmax; m++)
        for (int l = m + (m & 1); l <= lmax; l += 2) {
            int centre = l * (l + 1) / 2;
            natural[j++] = centre + m;
            if (m > 0) natural[j++] = centre - m;
        }
    return j;
}

int dm_ft_fod_from(const dm_image_view *v, dm_ft_fod *im)
{
    memset(im, 0, sizeof *im);
    int nt = (int)dm_view_nt(v);
    int lmax = dm_sh_lmax_for(nt);
    if (lmax < 2 || lmax > DM_FOD_LMAX_MAX || dm_sh_ncoef(lmax) != nt)
        return dm_set_error("%s: %d volume%s is not an FOD image (SH coefficients of even "
                            "degree: 6, 15, 28, 45, 66 or 91 volumes)",
                            v->name, nt, nt == 1 ? "" : "s");
    im->nx = (int)v->shape[0];
    im->ny = (int)v->shape[1];
    im->nz = (int)v->shape[2];
    im->ncoef = nt;
    im->lmax = lmax;
    size_t nvox = (size_t)im->nx * im->ny * im->nz;
    im->row = malloc((nvox ? nvox : 1) * sizeof *im->row);
    if (!im->row) return dm_set_error("%s: out of memory", v->name);
    long nrows = 0;
    size_t i = 0;
    for (int z = 0; z < im->nz; z++)
        for (int y = 0; y < im->ny; y++)
            for (int x = 0; x < im->nx; x++, i++) {
                int any = 0;
                for (int k = 0; k < nt && !any; k++) {
                    double c = dm_view_at(v, x, y, z, k);
                    any = c != 0 && isfinite(c);
                }
                im->row[i] = any ? (int)nrows++ : -1;
            }
    im->nrows = nrows;
    im->coef = malloc((size_t)(nrows ? nrows : 1) * nt * sizeof *im->coef);
    if (!im->coef) {
        dm_ft_fod_free(im);
        return dm_set_error("%s: out of memory", v->name);
    }
    int natural[DM_FOD_NCOEF_MAX];
    dm_fod_row_order(lmax, natural);
    i = 0;
    for (int z = 0; z < im->nz; z++)
        for (int y = 0; y < im->ny; y++)
            for (int x = 0; x < im->nx; x++, i++) {
                if (im->row[i] < 0) continue;
                float *dst = im->coef + (size_t)im->row[i] * nt;
                for (int k = 0; k < nt; k++) {
                    double c = dm_view_at(v, x, y, z, natural[k]);
                    dst[k] = isfinite(c) ? (float)c : 0.0f;
                }
            }
    im->v2w = v->v2w;
    if (dm_affine_invert(&im->v2w, &im->w2v) != 0) {
        dm_ft_fod_free(im);
        return dm_set_error("%s: the voxel -> world matrix is singular", v->name);
    }
    memcpy(im->voxel, v->voxel, sizeof im->voxel);
    im->min_voxel = fmin(v->voxel[0], fmin(v->voxel[1], v->voxel[2]));
    dm_fod_sh_table_fill(&im->table);
    return 0;
}

void dm_ft_fod_field(const dm_ft_fod *im, dm_fod_field *f)
{
    memset(f, 0, sizeof *f);
    f->nx = im->nx;
    f->ny = im->ny;
    f->nz = im->nz;
    f->ncoef = im->ncoef;
    f->lmax = im->lmax;
    f->row = im->row;
    f->coef = im->coef;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) f->w2v[i][j] = im->w2v.m[i][j];
    f->sh = &im->table;
}

void dm_ft_fod_free(dm_ft_fod *im)
{
    free(im->row);
    free(im->coef);
    memset(im, 0, sizeof *im);
}
