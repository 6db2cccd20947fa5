/* The FOD image as the tracker reads it: SH coefficients interpolated trilinearly at a point,
 * and the amplitude of that FOD in a direction (MRtrix's basis: real, orthonormal, even
 * degrees, index l(l+1)/2 + m, m < 0 with sin(|m| phi), Condon-Shortley phase, world frame;
 * runtime/sphere/sh.h).
 *
 * Storage.  Only voxels with a non-zero FOD hold coefficients: `row` maps each voxel of the
 * grid to its row of `coef` (ncoef floats), or -1.  A whole brain's rows (about 200k x 45
 * floats, 36 MB) then fit the GPU's L2 cache, which the 8 corner reads of every sample hit.
 * A row holds its coefficients in the order the amplitude's recurrence meets them
 * (dm_fod_row_order in runtime/fodtrack/fod_image.c): m = 0, 1, ..., lmax, and within each m
 * the even l >= m, with (l, m) before (l, -m); so the amplitude reads the rows front to back
 * while the recurrence runs, and holds no basis array.
 *
 * The amplitude needs no angle: with d = (x, y, z) a unit vector, sin^m(theta) e^{i m phi} =
 * (x + i y)^m, so Y_lm = Q_lm(z) Re or Im (x + i y)^m where Q_lm is the normalised associated
 * Legendre function without its sin^m(theta) factor, which obeys the same recurrence in l.
 *
 * No include guard (once per precision; see ft_types.h).  Before including: `real`, DM_FN,
 * DM_FT, ft_types.h. */
#ifdef DM_FT_NCOEF
#define DM_FT_NC(f) DM_FT_NCOEF
#define DM_FT_LM(f) DM_FT_LMAX
#define DM_FT_UNROLL _Pragma("unroll")
/* the GPU's rows: padded to whole float4s, read as such through the read-only cache */
#define DM_FT_ROW4 ((DM_FT_NCOEF + 3) / 4)
#else
#define DM_FT_NC(f) ((f)->ncoef)
#define DM_FT_LM(f) ((f)->lmax)
#define DM_FT_UNROLL
#endif

/* m p: a world point to the continuous voxel coordinates of an image with this world-to-voxel
 * matrix (or any 3x4 affine map). */
DM_FN void DM_FT(fod_affine)(const double m[3][4], const real p[3], real v[3])
{
    for (int i = 0; i < 3; i++)
        v[i] = (real)m[i][0] * p[0] + (real)m[i][1] * p[1] + (real)m[i][2] * p[2] + (real)m[i][3];
}

/* Where p falls on a grid of n voxels with this world-to-voxel matrix, as MRtrix's linear
 * interpolator sees it: 0 unless every voxel coordinate lies in (-0.5, n - 0.5); else the lower
 * and upper neighbours and the weight of the upper one on each axis (in the outer half voxel the
 * edge voxel alone; weights below 1e-6 count as 0), and the nearest voxel. */
DM_FN int DM_FT(fod_corners)(const double m[3][4], const int n[3], const real p[3], int lo[3],
                             int hi[3], real w[3], int near[3])
{
    real v[3];
    DM_FT(fod_affine)(m, p, v);
    for (int i = 0; i < 3; i++) {
        if (!(v[i] > (real)-0.5 && v[i] < (real)n[i] - (real)0.5)) return 0;
        real fl = floor(v[i]);
        near[i] = (int)floor(v[i] + (real)0.5);
        lo[i] = (int)fl;
        hi[i] = lo[i] + 1;
        w[i] = v[i] - fl;
        if (lo[i] < 0) {
            lo[i] = hi[i] = 0;
            w[i] = 0;
        } else if (hi[i] > n[i] - 1) {
            hi[i] = lo[i];
            w[i] = 0;
        }
        if (w[i] < (real)1e-6) w[i] = 0;
    }
    return 1;
}

/* The 8 corners around p on the FOD's grid: their rows and trilinear weights (weight 0 for a
 * corner whose FOD is zero, or that counts nothing).  0 where the FOD is not valid at p, as
 * MRtrix's masked linear interpolator has it: outside the image (see fod_corners) or where the
 * nearest voxel's FOD is zero; else 1. */
DM_FN int DM_FT(fod_cell)(const dm_fod_field *f, const real p[3], int rows[8], real wt[8])
{
    const int n[3] = {f->nx, f->ny, f->nz};
    int lo[3], hi[3], near[3];
    real w[3];
    if (!DM_FT(fod_corners)(f->w2v, n, p, lo, hi, w, near)) return 0;
    if (f->row[((long)near[2] * n[1] + near[1]) * n[0] + near[0]] < 0) return 0;
    DM_FT_UNROLL
    for (int corner = 0; corner < 8; corner++) {
        real wc = (corner & 1 ? w[0] : 1 - w[0]) * (corner & 2 ? w[1] : 1 - w[1]) *
                  (corner & 4 ? w[2] : 1 - w[2]);
        int r = -1;
        if (wc != 0) {
            int x = corner & 1 ? hi[0] : lo[0], y = corner & 2 ? hi[1] : lo[1],
                z = corner & 4 ? hi[2] : lo[2];
            r = f->row[((long)z * n[1] + y) * n[0] + x];
        }
        rows[corner] = r < 0 ? 0 : r;
        wt[corner] = r < 0 ? 0 : wc;
    }
    return 1;
}

/* Coefficients j0 .. j0 + 3 (in row order) interpolated at the cell: the corners' rows summed
 * with their weights, corner by corner (the GPU reads each row's 4 as one float4; entries past
 * the last coefficient are left unused). */
DM_FN void DM_FT(fod_chunk)(const dm_fod_field *f, const int rows[8], const real wt[8], int j0,
                            real out[4])
{
    for (int q = 0; q < 4; q++) out[q] = 0;
    DM_FT_UNROLL
    for (int corner = 0; corner < 8; corner++) {
        const real w = wt[corner];
        if (w == 0) continue;
#ifdef DM_FT_ROW4
        float4 v = __ldg((const float4 *)f->coef + (long)rows[corner] * DM_FT_ROW4 + j0 / 4);
        out[0] += w * (real)v.x;
        out[1] += w * (real)v.y;
        out[2] += w * (real)v.z;
        out[3] += w * (real)v.w;
#else
        const float *src = f->coef + (long)rows[corner] * f->ncoef + j0;
        const int nq = f->ncoef - j0 < 4 ? f->ncoef - j0 : 4;
        for (int q = 0; q < nq; q++) out[q] += w * (real)src[q];
#endif
    }
}

/* Coefficient j of the amplitude's sum: c[j], or with c NULL from the cell's chunks (the next
 * chunk read when j reaches it; j runs 0, 1, 2, ... in order). */
DM_FN real DM_FT(fod_coef)(const dm_fod_field *f, const real *c, const int *rows, const real *wt,
                           int j, real chunk[4])
{
    if (c) return c[j];
    if ((j & 3) == 0) DM_FT(fod_chunk)(f, rows, wt, j, chunk);
    return chunk[j & 3];
}

/* sum_j coef_j Y_j(d), the recurrence meeting the coefficients in row order: from c, or with
 * c NULL interpolated at the cell (rows, wt) as the sum goes, so that no basis or coefficient
 * array is held (on the GPU the unrolled loops turn every index into a constant). */
DM_FN real DM_FT(fod_sum)(const dm_fod_field *f, const real *c, const int *rows, const real *wt,
                          const real d[3])
{
    const dm_fod_sh_table *t = f->sh;
    real z = d[2], sum = 0, re = 1, im = 0, chunk[4] = {0, 0, 0, 0}; /* re, im: (x + i y)^m */
    int j = 0;
    DM_FT_UNROLL
    for (int m = 0; m <= DM_FT_LM(f); m++) {
        if (m > 0) {
            real r2 = re * d[0] - im * d[1];
            im = re * d[1] + im * d[0];
            re = r2;
        }
        real q2 = 0, q1 = (real)t->start[m]; /* Q_{m-1}, Q_m */
        DM_FT_UNROLL
        for (int l = m; l <= DM_FT_LM(f); l++) {
            if (l > m) {
                real q = (real)t->a[l][m] * (z * q1 - (real)t->b[l][m] * q2);
                q2 = q1;
                q1 = q;
            }
            if (l & 1) continue;
            if (m == 0) {
                sum += DM_FT(fod_coef)(f, c, rows, wt, j++, chunk) * q1;
            } else {
                const real yc = q1 * re, ys = q1 * im; /* Y_{l,m}, Y_{l,-m} */
                sum += DM_FT(fod_coef)(f, c, rows, wt, j++, chunk) * yc;
                sum += DM_FT(fod_coef)(f, c, rows, wt, j++, chunk) * ys;
            }
        }
    }
    return sum;
}

/* The coefficients at world point p (in row order), interpolated as MRtrix's masked linear
 * interpolator does; 0 where the FOD is not valid there (fod_cell), else 1. */
DM_FN int DM_FT(fod_interp)(const dm_fod_field *f, const real p[3], real *c)
{
    int rows[8];
    real wt[8];
    if (!DM_FT(fod_cell)(f, p, rows, wt)) return 0;
    DM_FT_UNROLL
    for (int j = 0; j < DM_FT_NC(f); j += 4) {
        real q[4];
        DM_FT(fod_chunk)(f, rows, wt, j, q);
        for (int k = 0; k < 4 && j + k < DM_FT_NC(f); k++) c[j + k] = q[k];
    }
    return 1;
}

/* The amplitude in the unit direction d of the FOD with coefficients c (fod_interp's). */
DM_FN real DM_FT(fod_amplitude)(const dm_fod_field *f, const real *c, const real d[3])
{
    return DM_FT(fod_sum)(f, c, (const int *)0, (const real *)0, d);
}

/* The FOD amplitude along d at world point p without storing the coefficients: exactly
 * fod_amplitude of fod_interp's coefficients (the same operations in the same order).  0 where
 * the FOD is not valid at p, else 1 with the amplitude in *amp. */
DM_FN int DM_FT(fod_amp_at)(const dm_fod_field *f, const real p[3], const real d[3], real *amp)
{
    int rows[8];
    real wt[8];
    if (!DM_FT(fod_cell)(f, p, rows, wt)) return 0;
    *amp = DM_FT(fod_sum)(f, (const real *)0, rows, wt, d);
    return 1;
}
