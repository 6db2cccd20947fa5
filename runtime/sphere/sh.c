/* Real spherical harmonics (sh.h): the orthonormal associated Legendre functions by the
 * standard three-term recurrences, which stay accurate to high degree because every term is
 * normalised as it is formed (no factorials). */
#include "sphere/sh.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>

int dm_sh_lmax_for(int n)
{
    int lmax = -1;
    for (int l = 0; l <= DM_SH_LMAX_MAX && dm_sh_ncoef(l) <= n; l += 2) lmax = l;
    return lmax;
}

#define LDIM (DM_SH_LMAX_MAX + 2)

/* The recurrences' and the ladder's square roots, made once (pthread_once) by the very
 * expressions that computed them in place before, so the basis keeps its bits: diag[m] and
 * sub[m] for P_m^m and P_{m+1}^m, a[l][m] and b[l][m] for the three-term recurrence, up[l][m]
 * and down[l][m] for d/dtheta. */
static double diag[LDIM], sub[LDIM], ra[LDIM][LDIM], rb[LDIM][LDIM], up_f[LDIM][LDIM],
    down_f[LDIM][LDIM];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void make_tables(void)
{
    for (int m = 1; m < LDIM; m++) diag[m] = sqrt((2.0 * m + 1.0) / (2.0 * m));
    for (int m = 0; m < LDIM; m++) {
        sub[m] = sqrt(2.0 * m + 3.0);
        for (int l = m + 2; l < LDIM; l++) {
            ra[l][m] = sqrt((4.0 * l * l - 1.0) / ((double)l * l - (double)m * m));
            rb[l][m] =
                sqrt(((l - 1.0) * (l - 1.0) - (double)m * m) / (4.0 * (l - 1.0) * (l - 1.0) - 1.0));
        }
    }
    for (int l = 0; l < LDIM; l++)
        for (int m = 0; m <= l; m++) {
            up_f[l][m] = m < l ? sqrt((double)(l - m) * (l + m + 1)) : 0.0;
            down_f[l][m] = m > 0 ? sqrt((double)(l + m) * (l - m + 1)) : 0.0;
        }
}

/* P[l][m] = N_lm P_l^m(x), 0 <= m <= l <= lmax (all degrees: the recurrence needs the odd
 * ones), Condon-Shortley phase included; s = sqrt(1 - x^2) >= 0. */
static void legendre(int lmax, double x, double s, double P[LDIM][LDIM])
{
    P[0][0] = 0.5 / sqrt(M_PI);
    for (int m = 1; m <= lmax + 1; m++) P[m][m] = -diag[m] * s * P[m - 1][m - 1];
    for (int m = 0; m <= lmax; m++) {
        P[m + 1][m] = x * sub[m] * P[m][m];
        for (int l = m + 2; l <= lmax + 1; l++)
            P[l][m] = ra[l][m] * (x * P[l - 1][m] - rb[l][m] * P[l - 2][m]);
    }
}

/* The basis and its derivatives from cos and sin of theta and cm[m], sm[m] = cos, sin (m phi). */
static void basis_core(int lmax, double ct, double st, const double *cm, const double *sm, double *Y,
                       double *dtheta, double *dphi)
{
    pthread_once(&tables_once, make_tables);
    double P[LDIM][LDIM];
    legendre(lmax, ct, st, P);
    for (int l = 0; l <= lmax; l += 2) {
        for (int m = 0; m <= l; m++) {
            double p = P[l][m];
            /* d/dtheta of N P_l^m(cos theta), from the ladder relations of the normalised
             * functions (with N P_l^-m = (-1)^m N P_l^m for the m = 0 end).  With the
             * Condon-Shortley phase in P the ladder's sign is up minus down (m = 0:
             * d/dtheta N P_l = sqrt(l(l+1)) N P_l^1); tests/unit/test_sh.c checks it against
             * finite differences. */
            double up = m < l ? up_f[l][m] * P[l][m + 1] : 0.0;
            double down = m > 0 ? down_f[l][m] * P[l][m - 1] : -up;
            double dp = 0.5 * (up - down);
            int i0 = dm_sh_index(l, 0);
            if (m == 0) {
                Y[i0] = p;
                if (dtheta) dtheta[i0] = dp;
                if (dphi) dphi[i0] = 0.0;
                continue;
            }
            double c = cm[m], s = sm[m], r2 = M_SQRT2;
            Y[i0 + m] = r2 * p * c;
            Y[i0 - m] = r2 * p * s;
            if (dtheta) {
                dtheta[i0 + m] = r2 * dp * c;
                dtheta[i0 - m] = r2 * dp * s;
            }
            if (dphi) {
                dphi[i0 + m] = -r2 * p * m * s;
                dphi[i0 - m] = r2 * p * m * c;
            }
        }
    }
}

void dm_sh_basis_angles(int lmax, double theta, double phi, double *Y, double *dtheta, double *dphi)
{
    double cm[LDIM], sm[LDIM];
    for (int m = 1; m <= lmax; m++) { /* cos(m phi), sin(m phi): the same for every degree */
        cm[m] = cos(m * phi);
        sm[m] = sin(m * phi);
    }
    basis_core(lmax, cos(theta), sin(theta), cm, sm, Y, dtheta, dphi);
}

int dm_sh_basis_unit(int lmax, const double u[3], double *Y, double *dtheta, double *dphi)
{
    const double st = sqrt(u[0] * u[0] + u[1] * u[1]); /* |u| = 1: no overflow to guard */
    if (!(st > 1e-12)) return 0;
    double cm[LDIM], sm[LDIM];
    cm[1] = u[0] / st;
    sm[1] = u[1] / st;
    for (int m = 2; m <= lmax; m++) { /* the angle-addition formulas, m phi = (m - 1) phi + phi */
        cm[m] = cm[m - 1] * cm[1] - sm[m - 1] * sm[1];
        sm[m] = sm[m - 1] * cm[1] + cm[m - 1] * sm[1];
    }
    const double ct = u[2] > 1.0 ? 1.0 : u[2] < -1.0 ? -1.0 : u[2];
    basis_core(lmax, ct, st, cm, sm, Y, dtheta, dphi);
    return 1;
}

void dm_sh_dir_to_angles(const double dir[3], double *theta, double *phi)
{
    double z = dir[2];
    if (z > 1.0) z = 1.0;
    if (z < -1.0) z = -1.0;
    *theta = acos(z);
    *phi = atan2(dir[1], dir[0]);
}

void dm_sh_angles_to_dir(double theta, double phi, double dir[3])
{
    dir[0] = sin(theta) * cos(phi);
    dir[1] = sin(theta) * sin(phi);
    dir[2] = cos(theta);
}

void dm_sh_basis(int lmax, const double dir[3], double *Y)
{
    double theta, phi;
    dm_sh_dir_to_angles(dir, &theta, &phi);
    dm_sh_basis_angles(lmax, theta, phi, Y, NULL, NULL);
}

double dm_sh_value(int lmax, const double *c, const double dir[3])
{
    double Y[dm_sh_ncoef(DM_SH_LMAX_MAX)];
    dm_sh_basis(lmax, dir, Y);
    double v = 0.0;
    for (int i = 0; i < dm_sh_ncoef(lmax); i++) v += c[i] * Y[i];
    return v;
}

void dm_sh_zonal(int lmax, double cos_theta, double *z)
{
    /* Y_l0 = sqrt((2l + 1) / 4pi) P_l by Bonnet's recurrence. */
    double p0 = 1.0, p1 = cos_theta;
    for (int l = 0; l <= lmax; l++) {
        double p = l == 0 ? p0 : l == 1 ? p1 : 0.0;
        if (l >= 2) {
            p = ((2.0 * l - 1.0) * cos_theta * p1 - (l - 1.0) * p0) / l;
            p0 = p1;
            p1 = p;
        }
        if (l % 2 == 0) z[l / 2] = sqrt((2.0 * l + 1.0) / (4.0 * M_PI)) * p;
    }
}

double dm_sh_rh_factor(int l)
{
    return sqrt(4.0 * M_PI / (2.0 * l + 1.0));
}
