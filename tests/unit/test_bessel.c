/* The Bessel functions of templates/maths/mathlib.h (J0, J1, J1', the roots of J1' and of the
 * spherical j1') against 120- to 500-digit references (bessel_ref.h), in double; built again
 * in float by test_bessel_float.c.  The error of J is measured in units of the precision's
 * epsilon times max(|J(x)|, A(x)), A(x) = min(1, sqrt(2 / (pi x))) the local amplitude: near
 * a zero, where J itself is small, no method keeps a relative error, and an absolute one of a
 * few units of the amplitude is what a model sees.  Measured: double 4.2 eps (Miller's
 * range, 1 <= x < 20), 1.5 eps beyond; float 3.8 eps.  Also: J0' = -J1 and J1' = J0 - J1/x
 * against central differences, J1'(0) = 1/2, parity, inf and NaN, and the sin/cos built from
 * + - * / against libm's. */
#include <math.h>
#include <stdio.h>

#ifndef TEST_REAL
#define TEST_REAL double
#endif
typedef TEST_REAL real;
#define DM_FN static inline
#include "maths/mathlib.h"

#include "bessel_ref.h"

#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))
#define IS_FLOAT (sizeof(real) == sizeof(float))

static int failures;

static void report(const char *name, double worst, double at, double tol)
{
    if (worst <= tol) {
        printf("PASS %s%s (worst %.3g at %g, tolerance %g)\n", IS_FLOAT ? "float-" : "", name,
               worst, at, tol);
    } else {
        printf("FAIL %s%s: worst %.3g at %g exceeds %g\n", IS_FLOAT ? "float-" : "", name, worst,
               at, tol);
        failures++;
    }
}

int main(void)
{
    const double eps = IS_FLOAT ? 1.1920928955078125e-07 : 2.220446049250313e-16;
    double w0 = 0, a0 = 0, w1 = 0, a1 = 0, wbig = 0, abig = 0;
    for (int i = 0; i < COUNT(bessel_j_ref); i++) {
        double x = bessel_j_ref[i][0];
        double amp = x < 2 / 3.141592653589793 ? 1 : sqrt(2 / (3.141592653589793 * x));
        double e0 = fabs(dm_bessel_j0((real)x) - bessel_j_ref[i][1]) /
                    fmax(fabs(bessel_j_ref[i][1]), amp) / eps;
        /* J1 ~ x/2 near 0: relative there */
        double s1 = fmax(fabs(bessel_j_ref[i][2]), x < 1 ? x / 2 : amp);
        double e1 = x == 0 ? fabs(dm_bessel_j1(0))
                           : fabs(dm_bessel_j1((real)x) - bessel_j_ref[i][2]) / s1 / eps;
        if (x > 100) {
            if (fmax(e0, e1) > wbig) wbig = fmax(e0, e1), abig = x;
            continue;
        }
        if (e0 > w0) w0 = e0, a0 = x;
        if (e1 > w1) w1 = e1, a1 = x;
    }
    report("bessel-j0-units-of-eps", w0, a0, 8);
    report("bessel-j1-units-of-eps", w1, a1, 8);
    report("bessel-j0-j1-100-to-1000-units-of-eps", wbig, abig, IS_FLOAT ? 400 : 8);

    /* parity, and the values no series reaches */
    int ok = 1;
    for (int i = 0; i < COUNT(bessel_j_ref); i++) {
        real x = (real)bessel_j_ref[i][0];
        ok &= dm_bessel_j0(-x) == dm_bessel_j0(x) && dm_bessel_j1(-x) == -dm_bessel_j1(x);
    }
    ok &= dm_bessel_j0(0) == 1 && dm_bessel_j1(0) == 0 && dm_bessel_j1_deriv(0) == (real)0.5;
    ok &= dm_bessel_j0((real)INFINITY) == 0 && dm_bessel_j1((real)-INFINITY) == 0;
    ok &= isnan(dm_bessel_j0((real)NAN)) && isnan(dm_bessel_j1((real)NAN));
    printf("%s %sbessel-parity-zero-inf-nan\n", ok ? "PASS" : "FAIL", IS_FLOAT ? "float-" : "");
    failures += !ok;

    /* J1' = J0 - J1/x against the references, and both derivatives against central
     * differences (h = 1e-5: ~1e-10 in double; float: h = 1e-2, ~1e-4) */
    double wd = 0, ad = 0, wfd = 0, afd = 0;
    for (int i = 0; i < COUNT(bessel_j_ref); i++) {
        double x = bessel_j_ref[i][0];
        if (x > 100 || x == 0) continue;
        double want = bessel_j_ref[i][1] - bessel_j_ref[i][2] / x;
        double amp = x < 1 ? 1 : sqrt(2 / (3.141592653589793 * x));
        double e = fabs(dm_bessel_j1_deriv((real)x) - want) / fmax(fabs(want), amp) / eps;
        if (e > wd) wd = e, ad = x;
    }
    report("bessel-j1-derivative-units-of-eps", wd, ad, 10);
    double h = IS_FLOAT ? 1e-2 : 1e-5;
    for (double x = -40; x <= 40; x += 0.731) {
        real xp = (real)(x + h), xm = (real)(x - h);
        double fd0 = (dm_bessel_j0(xp) - dm_bessel_j0(xm)) / ((double)xp - xm);
        double fd1 = (dm_bessel_j1(xp) - dm_bessel_j1(xm)) / ((double)xp - xm);
        double e =
            fmax(fabs(-dm_bessel_j1((real)x) - fd0), fabs(dm_bessel_j1_deriv((real)x) - fd1));
        if (e > wfd) wfd = e, afd = x;
    }
    report("bessel-derivatives-vs-finite-differences", wfd, afd, IS_FLOAT ? 2e-3 : 1e-9);

    /* roots (always folded in double by the compiler; the float build is checked too) */
    double wr = 0, ar = 0, ws = 0, as = 0;
    for (int n = 1; n <= COUNT(j1p_roots_ref); n++) {
        double e = fabs(dm_bessel_j1p_root(n) / j1p_roots_ref[n - 1] - 1) / eps;
        if (e > wr) wr = e, ar = n;
        e = fabs(dm_bessel_sj1p_root(n) / sj1p_roots_ref[n - 1] - 1) / eps;
        if (e > ws) ws = e, as = n;
    }
    report("bessel-j1p-roots-units-of-eps", wr, ar, 4);
    report("bessel-sj1p-roots-units-of-eps", ws, as, 4);
    ok = dm_bessel_j1p_root(0) == 0 && dm_bessel_sj1p_root(-1) == 0;
    for (int n = 1; n <= 1000 && ok; n++) { /* increasing, one per interval of ~pi */
        real r = dm_bessel_j1p_root(n), s = dm_bessel_sj1p_root(n);
        ok &= r > (n - (real)0.5) * (real)3.14159265 && r < n * (real)3.14159265;
        ok &= s > (n - (real)0.5) * (real)3.14159265 && s < n * (real)3.14159266;
    }
    printf("%s %sbessel-roots-1-to-1000-in-their-intervals\n", ok ? "PASS" : "FAIL",
           IS_FLOAT ? "float-" : "");
    failures += !ok;

    /* sin and cos from + - * / against libm's, |x| <= 1000 */
    double wsc = 0, asc = 0;
    for (double x = -1000; x <= 1000; x += 0.0917) {
        real s, c;
        dm_sincos_((real)x, &s, &c);
        double xr = (double)(real)x;
        double e = fmax(fabs(s - sin(xr)), fabs(c - cos(xr))) / eps;
        if (e > wsc) wsc = e, asc = x;
    }
    report("det-sincos-units-of-eps", wsc, asc, IS_FLOAT ? 2 : 2);
    return failures ? 1 : 0;
}
