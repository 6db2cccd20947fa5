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

int dm_ft_fod_load(const char *path, dm_ft_fod *im)
{
    memset(im, 0, sizeof *im);
    dm_volume v;
    if (dm_volume_read(path, &v) != 0) return -1;
    int lmax = dm_sh_lmax_for(v.nt);
    if (lmax < 2 || lmax > DM_FOD_LMAX_MAX || dm_sh_ncoef(lmax) != v.nt) {
        int nt = v.nt;
        dm_volume_free(&v);
        return dm_set_error("%s: %d volume%s is not an FOD image (SH coefficients of even "
                            "degree: 6, 15, 28, 45, 66 or 91 volumes)",
                            path, nt, nt == 1 ? "" : "s");
    }
    im->nx = v.nx;
    im->ny = v.ny;
    im->nz = v.nz;
    im->ncoef = v.nt;
    im->lmax = lmax;
    size_t nvox = DM_NVOX(&v);
    im->row = malloc(nvox * sizeof *im->row);
    long nrows = 0;
    for (size_t i = 0; i < nvox; i++) {
        int any = 0;
        for (int k = 0; k < v.nt && !any; k++) {
            double c = v.data[(size_t)k * nvox + i];
            any = c != 0 && isfinite(c);
        }
        im->row[i] = any ? (int)nrows++ : -1;
    }
    im->nrows = nrows;
    im->coef = malloc((size_t)(nrows ? nrows : 1) * v.nt * sizeof *im->coef);
    int natural[DM_FOD_NCOEF_MAX];
    dm_fod_row_order(lmax, natural);
    for (size_t i = 0; i < nvox; i++) {
        if (im->row[i] < 0) continue;
        float *dst = im->coef + (size_t)im->row[i] * v.nt;
        for (int k = 0; k < v.nt; k++) {
            double c = v.data[(size_t)natural[k] * nvox + i];
            dst[k] = isfinite(c) ? (float)c : 0.0f;
        }
    }
    dm_volume_vox2world(&v, &im->v2w);
    if (dm_affine_invert(&im->v2w, &im->w2v) != 0) {
        dm_volume_free(&v);
        dm_ft_fod_free(im);
        return dm_set_error("%s: the voxel -> world matrix is singular", path);
    }
    double vox[3];
    dm_volume_voxel_size(&v, vox);
    im->min_voxel = fmin(vox[0], fmin(vox[1], vox[2]));
    dm_fod_sh_table_fill(&im->table);
    free(v.data); /* the geometry stays: the TDI and the outputs are on this grid */
    v.data = NULL;
    v.nt = 1;
    im->header = v;
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
    dm_volume_free(&im->header);
    memset(im, 0, sizeof *im);
}
