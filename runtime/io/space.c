#include "io/space.h"
#include "util/error.h"
#include "io/textio.h"

#include <math.h>
#include <nifti2_io.h>
#include <stdlib.h>
#include <string.h>

void dm_affine_identity(dm_affine *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < 4; i++) a->m[i][i] = 1;
}

dm_affine dm_affine_mul(const dm_affine *a, const dm_affine *b)
{
    dm_affine r;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double s = 0;
            for (int k = 0; k < 4; k++) s += a->m[i][k] * b->m[k][j];
            r.m[i][j] = s;
        }
    return r;
}

/* Gauss-Jordan with partial pivoting on the 4x4. */
int dm_affine_invert(const dm_affine *a, dm_affine *inv)
{
    double w[4][8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) w[i][j] = j < 4 ? a->m[i][j] : (j - 4 == i);
    for (int col = 0; col < 4; col++) {
        int piv = col;
        for (int r = col + 1; r < 4; r++)
            if (fabs(w[r][col]) > fabs(w[piv][col])) piv = r;
        if (fabs(w[piv][col]) < 1e-12) return dm_set_error("a coordinate transform is singular");
        if (piv != col)
            for (int j = 0; j < 8; j++) {
                double t = w[col][j];
                w[col][j] = w[piv][j];
                w[piv][j] = t;
            }
        double d = w[col][col];
        for (int j = 0; j < 8; j++) w[col][j] /= d;
        for (int r = 0; r < 4; r++) {
            if (r == col) continue;
            double f = w[r][col];
            for (int j = 0; j < 8; j++) w[r][j] -= f * w[col][j];
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) inv->m[i][j] = w[i][j + 4];
    return 0;
}

void dm_affine_apply(const dm_affine *a, const double in[3], double out[3])
{
    double r[3];
    for (int i = 0; i < 3; i++)
        r[i] = a->m[i][0] * in[0] + a->m[i][1] * in[1] + a->m[i][2] * in[2] + a->m[i][3];
    memcpy(out, r, sizeof r);
}

void dm_volume_vox2world(const dm_volume *v, dm_affine *a)
{
    const nifti_image *nim = v->geometry;
    dm_affine_identity(a);
    if (!nim) return;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            a->m[i][j] = nim->sform_code > 0 ? nim->sto_xyz.m[i][j] : nim->qto_xyz.m[i][j];
    if (nim->sform_code <= 0 && nim->qform_code <= 0) {
        dm_affine_identity(a);
        a->m[0][0] = nim->dx > 0 ? nim->dx : 1;
        a->m[1][1] = nim->dy > 0 ? nim->dy : 1;
        a->m[2][2] = nim->dz > 0 ? nim->dz : 1;
    }
}

int dm_volume_has_orientation(const dm_volume *v)
{
    const nifti_image *nim = v->geometry;
    return nim && (nim->sform_code > 0 || nim->qform_code > 0);
}

/* "[a b c d; e f g h; i j k l]": the three rows that matter. */
static void affine_text(const dm_affine *a, char *buf, size_t size)
{
    size_t n = 0;
    for (int i = 0; i < 3 && n < size; i++)
        for (int j = 0; j < 4 && n < size; j++)
            n += (size_t)snprintf(buf + n, size - n, "%s%.6g%s", j == 0 ? (i ? " " : "[") : " ",
                                  a->m[i][j] == 0 ? 0.0 : a->m[i][j],
                                  j < 3   ? ""
                                  : i < 2 ? ";"
                                          : "]");
}

/* (declared in io/volume.h) Here, beside the other checks of space, so that what reads only
 * the sizes and headers of images links no image reading. */
int dm_volume_check_same_grid(const dm_volume *vol, const char *path, const dm_volume *ref,
                              const char *ref_path)
{
    if (vol->nx == ref->nx && vol->ny == ref->ny && vol->nz == ref->nz) return 0;
    return dm_set_error("%s: grid %dx%dx%d differs from %s (%dx%dx%d)", path, vol->nx, vol->ny,
                        vol->nz, ref_path, ref->nx, ref->ny, ref->nz);
}

int dm_volume_check_same_space(const dm_volume *vol, const char *path, const dm_volume *ref,
                               const char *ref_path)
{
    if (dm_volume_check_same_grid(vol, path, ref, ref_path) != 0) return -1;
    if (!dm_volume_has_orientation(vol) || !dm_volume_has_orientation(ref)) return 0;
    dm_affine a, b;
    dm_volume_vox2world(vol, &a);
    dm_volume_vox2world(ref, &b);
    int same = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            if (fabs(a.m[i][j] - b.m[i][j]) > 1e-4 * (1 + fmax(fabs(a.m[i][j]), fabs(b.m[i][j]))))
                same = 0;
    if (same) return 0;
    char ta[256], tb[256];
    affine_text(&a, ta, sizeof ta);
    affine_text(&b, tb, sizeof tb);
    return dm_set_error("%s: same grid as %s but another voxel-to-world affine: %s against %s "
                        "(resample it onto %s, or fix its header)",
                        path, ref_path, ta, tb, ref_path);
}

void dm_volume_voxel_size(const dm_volume *v, double vox[3])
{
    const nifti_image *nim = v->geometry;
    double d[3] = {nim ? fabs(nim->dx) : 1, nim ? fabs(nim->dy) : 1, nim ? fabs(nim->dz) : 1};
    for (int i = 0; i < 3; i++) vox[i] = d[i] > 0 ? d[i] : 1;
}

/* The determinant of a's 3 x 3 part. */
static double det3(const dm_affine *a)
{
    const double(*m)[4] = a->m;
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
           m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
}

int dm_volume_is_neurological(const dm_volume *v)
{
    dm_affine a;
    dm_volume_vox2world(v, &a);
    return det3(&a) > 0;
}

void dm_volume_vox2fsl(const dm_volume *v, dm_affine *a)
{
    double vox[3];
    dm_volume_voxel_size(v, vox);
    dm_affine_identity(a);
    for (int i = 0; i < 3; i++) a->m[i][i] = vox[i];
    if (dm_volume_is_neurological(v)) {
        a->m[0][0] = -vox[0];
        a->m[0][3] = (v->nx - 1) * vox[0];
    }
}

dm_image_view dm_view_of_volume(const dm_volume *v, const char *name)
{
    dm_image_view w;
    memset(&w, 0, sizeof w);
    w.data = v->data;
    w.type = DM_VIEW_F64;
    w.ndim = v->nt > 1 ? 4 : 3;
    const size_t n[4] = {(size_t)v->nx, (size_t)v->ny, (size_t)v->nz, (size_t)v->nt};
    ptrdiff_t stride = (ptrdiff_t)sizeof(double);
    for (int k = 0; k < 4; k++) {
        w.shape[k] = n[k];
        w.stride[k] = stride;
        stride *= (ptrdiff_t)n[k];
    }
    dm_volume_vox2world(v, &w.v2w);
    dm_volume_voxel_size(v, w.voxel);
    w.name = name;
    return w;
}

int dm_affine_read(const char *path, dm_affine *a)
{
    int rows, cols;
    double *d;
    if (dm_read_matrix(path, &rows, &cols, &d) != 0) return -1;
    if (rows != 4 || cols != 4) {
        free(d);
        return dm_set_error("%s: expected a 4x4 matrix, found %dx%d", path, rows, cols);
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) a->m[i][j] = d[i * 4 + j];
    free(d);
    return 0;
}

void dm_volume_bvec_rotation(const dm_volume *v, double R[3][3])
{
    dm_affine a;
    dm_volume_vox2world(v, &a);
    dm_affine_bvec_rotation(&a, R);
}

void dm_affine_bvec_rotation(const dm_affine *affine, double R[3][3])
{
    const dm_affine a = *affine;
    double flip = det3(&a) > 0 ? -1.0 : 1.0; /* dm_volume_is_neurological's test */
    /* The orthogonal factor of the polar decomposition of the voxel axes' unit directions (the
     * orthogonal matrix nearest to them, as MRtrix takes the rotation of its transform): Newton's
     * iteration X <- (X + X^-T) / 2, quadratic from the first step for a near-orthogonal X. */
    double X[3][3];
    for (int j = 0; j < 3; j++) {
        double n = sqrt(a.m[0][j] * a.m[0][j] + a.m[1][j] * a.m[1][j] + a.m[2][j] * a.m[2][j]);
        for (int i = 0; i < 3; i++) X[i][j] = n > 0 ? a.m[i][j] / n : (double)(i == j);
    }
    for (int it = 0; it < 60; it++) {
        double c[3][3]; /* cofactors: X^-T = cofactor matrix / det */
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                int i1 = (i + 1) % 3, i2 = (i + 2) % 3, j1 = (j + 1) % 3, j2 = (j + 2) % 3;
                c[i][j] = X[i1][j1] * X[i2][j2] - X[i1][j2] * X[i2][j1];
            }
        double det = X[0][0] * c[0][0] + X[0][1] * c[0][1] + X[0][2] * c[0][2];
        if (!(fabs(det) > 1e-12)) break; /* degenerate axes: keep what there is */
        double change = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double next = 0.5 * (X[i][j] + c[i][j] / det);
                change = fmax(change, fabs(next - X[i][j]));
                X[i][j] = next;
            }
        if (change < 1e-15) break;
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) R[i][j] = X[i][j] * (j == 0 ? flip : 1.0);
}

void dm_rotate3(const double R[3][3], const double in[3], double out[3], int inverse)
{
    double t[3];
    for (int i = 0; i < 3; i++)
        t[i] = inverse ? R[0][i] * in[0] + R[1][i] * in[1] + R[2][i] * in[2]
                       : R[i][0] * in[0] + R[i][1] * in[1] + R[i][2] * in[2];
    out[0] = t[0];
    out[1] = t[1];
    out[2] = t[2];
}
