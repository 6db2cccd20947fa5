/* Real spherical harmonics in MRtrix 3's basis and storage order, the frame in which dimoc's
 * FODs, responses and peaks live.
 *
 * Only even degrees l = 0, 2, ..., lmax are stored (diffusion signals and FODs are antipodally
 * symmetric); coefficient (l, m), -l <= m <= l, sits at index l(l+1)/2 + m, so lmax 8 has 45.
 * With N_lm P_l^|m| the orthonormal associated Legendre function (Condon-Shortley phase
 * included):
 *     Y_lm = sqrt(2) N P_l^|m|(cos theta) sin(|m| phi)   m < 0
 *          =         N P_l^0 (cos theta)                 m = 0
 *          = sqrt(2) N P_l^m  (cos theta) cos(m phi)     m > 0
 * with theta, phi the polar and azimuth angles of the direction in scanner (world) space.  The
 * sign conventions were pinned against MRtrix's sh2amp (tests/py/test_sh_mrtrix.py). */
#ifndef DIMOC_SPHERE_SH_H
#define DIMOC_SPHERE_SH_H

#define DM_SH_LMAX_MAX 20 /* highest degree any routine here accepts */

/* Coefficients of even degrees up to lmax. */
static inline int dm_sh_ncoef(int lmax)
{
    return (lmax + 1) * (lmax + 2) / 2;
}
/* Index of (l, m) in the storage order (l even). */
static inline int dm_sh_index(int l, int m)
{
    return l * (l + 1) / 2 + m;
}
/* The largest even lmax whose coefficient count is at most n (-1 when n < 1). */
int dm_sh_lmax_for(int n);

/* The basis at the unit vector dir: Y[dm_sh_ncoef(lmax)]. */
void dm_sh_basis(int lmax, const double dir[3], double *Y);
/* The basis and its derivatives in theta and phi at (theta, phi): Y, dtheta, dphi each
 * dm_sh_ncoef(lmax) long; dtheta and dphi may be NULL. */
void dm_sh_basis_angles(int lmax, double theta, double phi, double *Y, double *dtheta,
                        double *dphi);
/* The function with coefficients c at the unit vector dir. */
double dm_sh_value(int lmax, const double *c, const double dir[3]);

/* As dm_sh_basis_angles at the unit vector u (its theta and phi), from u's coordinates: no
 * inverse trigonometry, cos and sin (m phi) by the angle-addition formulas (the same values to
 * rounding).  0, with nothing written, at a pole (sin theta <= 1e-12: phi undefined), else 1. */
int dm_sh_basis_unit(int lmax, const double u[3], double *Y, double *dtheta, double *dphi);
/* The zonal (m = 0) basis at cos(theta): z[l/2] = Y_l0, l = 0, 2, ..., lmax. */
void dm_sh_zonal(int lmax, double cos_theta, double *z);
/* The factor that turns the zonal coefficient r_l of an axially symmetric kernel into its
 * rotational harmonic: convolving f with the kernel multiplies f_lm by
 * dm_sh_rh_factor(l) * r_l = sqrt(4 pi / (2l + 1)) r_l. */
double dm_sh_rh_factor(int l);

/* Unit vector <-> polar angle theta (from +z) and azimuth phi. */
void dm_sh_dir_to_angles(const double dir[3], double *theta, double *phi);
void dm_sh_angles_to_dir(double theta, double phi, double dir[3]);

#endif
