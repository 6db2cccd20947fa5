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
    double lambda1;
    dm_eig3_sym_principal((const double(*)[3])T, &lambda1, axis);
    if (dispersion) *dispersion = 1 - lambda1;
    return used;
}
