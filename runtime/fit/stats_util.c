/* Summaries of posterior samples. */
#include "fit/stats_util.h"
#include "util/linalg.h"
#include "vecmath/vecmath.h"

#include <math.h>

static const double TWO_PI = 6.283185307179586476925;

void dm_mean_std(const double *x, long n, long stride, double *mean, double *std)
{
    double sum = 0;
    for (long i = 0; i < n; i++) sum += x[i * stride];
    double m = n > 0 ? sum / n : 0;
    double ss = 0; /* two passes: exact enough for samples of any magnitude */
    for (long i = 0; i < n; i++) {
        double d = x[i * stride] - m;
        ss += d * d;
    }
    if (mean) *mean = m;
    if (std) *std = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

void dm_circular_mean_std(const double *x, long n, long stride, double lo, double hi, double *mean,
                          double *std)
{
    double period = hi - lo, to_angle = TWO_PI / period;
    double c = 0, s = 0;
    enum { BLOCK = 64 };
    double a[BLOCK], ca[BLOCK], sa[BLOCK];
    for (long b = 0; b < n; b += BLOCK) {
        int m = n - b < BLOCK ? (int)(n - b) : BLOCK;
        for (int i = 0; i < m; i++) a[i] = (x[(b + i) * stride] - lo) * to_angle;
        dm_vec_sincos(a, m, sa, ca);
        for (int i = 0; i < m; i++) {
            c += ca[i];
            s += sa[i];
        }
    }
    double m = lo;
    double r = 0;
    if (n > 0) {
        c /= n;
        s /= n;
        r = sqrt(c * c + s * s);
        double a = atan2(s, c);
        if (a < 0) a += TWO_PI;
        m = lo + a / to_angle;
        if (m >= hi) /* rounding at the top of the range */
            m = lo;
    }
    if (mean) *mean = m;
    if (std) {
        /* R = 0 (samples spread evenly round the circle) would give an infinite std; a
         * floor keeps the output map finite. */
        r = fmin(fmax(r, 1e-300), 1);
        *std = n > 1 ? sqrt(-2 * log(r)) / to_angle : 0;
    }
}

/* The largest eigenvalue of the symmetric T and its unit eigenvector, in closed form: the
 * eigenvalue by the trigonometric solution of the characteristic cubic, the vector as the
 * largest cross product of two rows of T - lambda I (each row is orthogonal to it).  0 when
 * the two largest eigenvalues are too close for that vector to be accurate (the caller then
 * asks Jacobi, whose axis there is as good as any in the plane). */
static int principal_axis(const double T[3][3], double *lambda, double axis[3])
{
    const double q = (T[0][0] + T[1][1] + T[2][2]) / 3;
    const double p1 = T[0][1] * T[0][1] + T[0][2] * T[0][2] + T[1][2] * T[1][2];
    const double d0 = T[0][0] - q, d1 = T[1][1] - q, d2 = T[2][2] - q;
    const double p2 = d0 * d0 + d1 * d1 + d2 * d2 + 2 * p1;
    if (!(p2 > 1e-24)) return 0; /* isotropic: no axis stands out */
    const double pp = sqrt(p2 / 6);
    /* B = (T - q I) / pp; r = det(B) / 2 lies in [-1, 1] up to rounding */
    const double b00 = d0 / pp, b11 = d1 / pp, b22 = d2 / pp;
    const double b01 = T[0][1] / pp, b02 = T[0][2] / pp, b12 = T[1][2] / pp;
    double r = (b00 * (b11 * b22 - b12 * b12) - b01 * (b01 * b22 - b12 * b02) +
                b02 * (b01 * b12 - b11 * b02)) / 2;
    r = r < -1 ? -1 : r > 1 ? 1 : r;
    const double phi = acos(r) / 3;
    const double l1 = q + 2 * pp * cos(phi), l3 = q + 2 * pp * cos(phi + 2.0943951023931954923);
    const double l2 = 3 * q - l1 - l3;
    /* separation of the two largest relative to the spread: below this the cross products
     * lose the digits that Jacobi keeps */
    if (!(l1 - l2 > 1e-6 * (l1 - l3))) return 0;
    /* acos near +-1 leaves l1 a few 1e-8 off where the two smallest eigenvalues are equal (the
     * usual case: samples about one axis); the Rayleigh quotient of the first vector, whose
     * error is that vector's squared, sets it right for the second */
    double lambda1 = l1;
    for (int pass = 0; pass < 2; pass++) {
        const double m[3][3] = {{T[0][0] - lambda1, T[0][1], T[0][2]},
                                {T[0][1], T[1][1] - lambda1, T[1][2]},
                                {T[0][2], T[1][2], T[2][2] - lambda1}};
        double best[3] = {0, 0, 0}, best2 = 0;
        for (int i = 0; i < 3; i++) {
            const double *u = m[i], *v = m[(i + 1) % 3];
            const double c[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                                 u[0] * v[1] - u[1] * v[0]};
            const double n2 = c[0] * c[0] + c[1] * c[1] + c[2] * c[2];
            if (n2 > best2) {
                best2 = n2;
                for (int k = 0; k < 3; k++) best[k] = c[k];
            }
        }
        if (!(best2 > 0)) return 0;
        const double inv = 1 / sqrt(best2);
        for (int k = 0; k < 3; k++) axis[k] = best[k] * inv;
        double rq = 0;
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) rq += axis[a] * T[a][b] * axis[b];
        lambda1 = rq;
    }
    *lambda = lambda1;
    return 1;
}

long dm_dyadic_mean(const double *axes, long n, long stride, double axis[3], double *dispersion)
{
    double T[3][3] = {{0}};
    long used = 0;
    for (long i = 0; i < n; i++) {
        const double *v = axes + i * stride;
        double norm2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
        if (!(norm2 > 0) || !isfinite(norm2)) continue;
        for (int a = 0; a < 3; a++)
            for (int b = a; b < 3; b++) T[a][b] += v[a] * v[b] / norm2;
        used++;
    }
    if (used == 0) {
        axis[0] = axis[1] = axis[2] = 0;
        if (dispersion) *dispersion = 1;
        return 0;
    }
    for (int a = 0; a < 3; a++)
        for (int b = a; b < 3; b++) T[a][b] /= used;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < a; b++) T[a][b] = T[b][a];
    double lambda1;
    if (!principal_axis((const double(*)[3])T, &lambda1, axis)) {
        double lambda[3], vec[3][3];
        dm_eig3_sym((const double(*)[3])T, lambda, vec);
        for (int k = 0; k < 3; k++) axis[k] = vec[0][k];
        lambda1 = lambda[0];
    }
    /* dm_eig3_sym's sign: the largest-magnitude component positive */
    int big = 0;
    for (int k = 1; k < 3; k++)
        if (fabs(axis[k]) > fabs(axis[big])) big = k;
    if (axis[big] < 0)
        for (int k = 0; k < 3; k++) axis[k] = -axis[k];
    if (dispersion) *dispersion = 1 - lambda1;
    return used;
}
