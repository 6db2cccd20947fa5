/* The FOD image as the tracker reads it: SH coefficients interpolated trilinearly at a point,
 * and the amplitude of that FOD in a direction (MRtrix's basis: real, orthonormal, even
 * degrees, index l(l+1)/2 + m, m < 0 with sin(|m| phi), Condon-Shortley phase, world frame;
 * runtime/sphere/sh.h).
 *
 * Storage.  Only voxels with a non-zero FOD hold coefficients: `row` maps each voxel of the
 * grid to its row of `coef` (ncoef floats), or -1.  A whole brain's rows (about 200k x 45
 * floats, 36 MB) then fit the GPU's L2 cache, which the 8 corner reads of every sample hit.
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
#define DM_FT_STRIDE(f) (4 * DM_FT_ROW4)
#else
#define DM_FT_NC(f) ((f)->ncoef)
#define DM_FT_LM(f) ((f)->lmax)
#define DM_FT_UNROLL
#define DM_FT_STRIDE(f) ((f)->ncoef)
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

/* The coefficients at world point p, interpolated trilinearly between voxel centres as MRtrix's
 * linear interpolator does: outside unless every voxel coordinate lies in (-0.5, n - 0.5) (returns
 * 0); in the outer half voxel the edge voxel alone; fractions below 1e-6 count as 0.  1 inside. */
DM_FN int DM_FT(fod_interp)(const dm_fod_field *f, const real p[3], real *c)
{
    const int n[3] = {f->nx, f->ny, f->nz};
    int lo[3], hi[3], near[3];
    real w[3];
    if (!DM_FT(fod_corners)(f->w2v, n, p, lo, hi, w, near)) return 0;
    for (int k = 0; k < f->ncoef; k++) c[k] = 0;
    for (int corner = 0; corner < 8; corner++) {
        real wt = (corner & 1 ? w[0] : 1 - w[0]) * (corner & 2 ? w[1] : 1 - w[1]) *
                  (corner & 4 ? w[2] : 1 - w[2]);
        if (wt == 0) continue;
        int x = corner & 1 ? hi[0] : lo[0], y = corner & 2 ? hi[1] : lo[1],
            z = corner & 4 ? hi[2] : lo[2];
        int r = f->row[((long)z * f->ny + y) * f->nx + x];
        if (r < 0) continue;
        const float *src = f->coef + (long)r * DM_FT_STRIDE(f);
        for (int k = 0; k < f->ncoef; k++) c[k] += wt * (real)src[k];
    }
    return 1;
}

/* The basis in the unit direction d: Y[ncoef] (the same recurrence as fod_amplitude). */
DM_FN void DM_FT(fod_basis)(const dm_fod_sh_table *t, int lmax, const real d[3], real *Y)
{
    real z = d[2], re = 1, im = 0;
    DM_FT_UNROLL
    for (int m = 0; m <= lmax; m++) {
        if (m > 0) {
            real r2 = re * d[0] - im * d[1];
            im = re * d[1] + im * d[0];
            re = r2;
        }
        real q2 = 0, q1 = (real)t->start[m];
        DM_FT_UNROLL
        for (int l = m; l <= lmax; l++) {
            if (l > m) {
                real q = (real)t->a[l][m] * (z * q1 - (real)t->b[l][m] * q2);
                q2 = q1;
                q1 = q;
            }
            if (l & 1) continue;
            int centre = l * (l + 1) / 2;
            if (m == 0) {
                Y[centre] = q1;
            } else {
                Y[centre + m] = q1 * re;
                Y[centre - m] = q1 * im;
            }
        }
    }
}

/* The FOD amplitude along d at world point p, with the coefficients interpolated as
 * fod_interp does but never stored: the sum over the 8 corners of weight x (row . Y(d)).
 * Returns 0 where p is outside the image or the nearest voxel's FOD is zero (MRtrix's masked
 * interpolator: the FOD is not valid there), else 1 with the amplitude in *amp. */
DM_FN int DM_FT(fod_amp_at)(const dm_fod_field *f, const real p[3], const real d[3], real *amp)
{
    const int n[3] = {f->nx, f->ny, f->nz};
    int lo[3], hi[3], near[3];
    real w[3];
    if (!DM_FT(fod_corners)(f->w2v, n, p, lo, hi, w, near)) return 0;
    if (f->row[((long)near[2] * n[1] + near[1]) * n[0] + near[0]] < 0) return 0;
    real Y[DM_FOD_NCOEF_MAX + 3];
    DM_FT(fod_basis)(f->sh, DM_FT_LM(f), d, Y);
#ifdef DM_FT_ROW4
    for (int k = DM_FT_NCOEF; k < 4 * DM_FT_ROW4; k++) Y[k] = 0;
#endif
    real sum = 0;
    for (int corner = 0; corner < 8; corner++) {
        real wt = (corner & 1 ? w[0] : 1 - w[0]) * (corner & 2 ? w[1] : 1 - w[1]) *
                  (corner & 4 ? w[2] : 1 - w[2]);
        if (wt == 0) continue;
        int x = corner & 1 ? hi[0] : lo[0], y = corner & 2 ? hi[1] : lo[1],
            z = corner & 4 ? hi[2] : lo[2];
        int r = f->row[((long)z * f->ny + y) * f->nx + x];
        if (r < 0) continue;
        real dot = 0;
#ifdef DM_FT_ROW4
        const float4 *src = (const float4 *)f->coef + (long)r * DM_FT_ROW4;
        DM_FT_UNROLL
        for (int k = 0; k < DM_FT_ROW4; k++) {
            float4 q = __ldg(src + k);
            dot += (real)q.x * Y[4 * k];
            dot += (real)q.y * Y[4 * k + 1];
            dot += (real)q.z * Y[4 * k + 2];
            dot += (real)q.w * Y[4 * k + 3];
        }
#else
        const float *src = f->coef + (long)r * DM_FT_NC(f);
        for (int k = 0; k < DM_FT_NC(f); k++) dot += (real)src[k] * Y[k];
#endif
        sum += wt * dot;
    }
    *amp = sum;
    return 1;
}

/* The amplitude in the unit direction d of the function with coefficients c (degree lmax). */
DM_FN real DM_FT(fod_amplitude)(const dm_fod_sh_table *t, int lmax, const real *c, const real d[3])
{
    real z = d[2], sum = 0;
    real re = 1, im = 0; /* (x + i y)^m */
    for (int m = 0; m <= lmax; m++) {
        if (m > 0) {
            real r2 = re * d[0] - im * d[1];
            im = re * d[1] + im * d[0];
            re = r2;
        }
        real q2 = 0, q1 = (real)t->start[m]; /* Q_{m-1}, Q_m */
        for (int l = m; l <= lmax; l++) {
            if (l > m) {
                real q = (real)t->a[l][m] * (z * q1 - (real)t->b[l][m] * q2);
                q2 = q1;
                q1 = q;
            }
            if (l & 1) continue;
            int centre = l * (l + 1) / 2;
            if (m == 0)
                sum += c[centre] * q1;
            else
                sum += q1 * (c[centre + m] * re + c[centre - m] * im);
        }
    }
    return sum;
}
