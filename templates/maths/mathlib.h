/* The math library of the model language's built-in functions, and the helpers that the
 * generated derivative code calls.  Portable C compiled twice: by the host compiler (the
 * includer has included <math.h>) and by NVRTC (no libc headers; the CUDA math functions
 * exp, log, sqrt, erf, lgamma, ... are built in).  Before including it, the includer
 * defines `real` (float or double) and DM_FN (see model_api.h).
 *
 * Every loop below is bounded, and the series stop at the precision of `real`, so the float
 * build does no more work than it needs. */
#ifndef DIMOC_MATHLIB_H
#define DIMOC_MATHLIB_H

/* Unit roundoff of the build's precision (a constant expression in C and CUDA alike). */
#define DM_REAL_EPS                                                                                \
    (sizeof(real) == sizeof(float) ? (real)1.1920928955078125e-07 : (real)2.220446049250313e-16)
#define DM_PI ((real)3.141592653589793)

/* Library functions may go unused by a model; say so, or NVRTC warns (#177). */
#if defined(__GNUC__) || defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define DM_LIB_FN DM_FN __attribute__((unused))
#else
#define DM_LIB_FN DM_FN
#endif

/* The long NODDI functions (series, Newton iterations) are called from many places of a
 * model; under NVRTC they stay out of line, which keeps the kernels' code and compile time
 * small for the cost of a call. */
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define DM_LIB_BIG_FN DM_LIB_FN __noinline__
#else
#define DM_LIB_BIG_FN DM_LIB_FN
#endif

DM_LIB_FN real dm_sq(real x)
{
    return x * x;
}

/* Dawson's integral D(x) = exp(-x^2) * integral_0^x exp(t^2) dt, odd in x.
 * |x| < 6.5: D(x) = exp(-x^2) * sum_n x^(2n+1) / (n! (2n+1)); every term is positive, so the
 *   sum has no cancellation (at most ~110 terms at the top of the range).
 * |x| >= 6.5: the asymptotic series D(x) ~ 1/(2x) * sum_n (2n-1)!! / (2x^2)^n, whose
 *   smallest term (n ~ x^2) is below double precision there.
 * Relative error ~1e-15 in double against scipy.special.dawsn (tests/unit/test_mathlib.c). */
DM_LIB_FN real dm_dawson(real x)
{
    real ax = fabs(x), r;
    if (!(ax < (real)6.5)) {
        real inv = (real)1 / (2 * ax * ax), term = 1, sum = 1;
        for (int n = 1; n < 60; n++) {
            term *= (2 * n - 1) * inv;
            sum += term;
            if (term < sum * DM_REAL_EPS) break;
        }
        r = sum / (2 * ax);
    } else {
        real x2 = ax * ax, power = ax, sum = ax; /* power = x^(2n+1) / n! */
        for (int n = 1; n < 200; n++) {
            power *= x2 / n;
            real add = power / (2 * n + 1);
            sum += add;
            if (add < sum * DM_REAL_EPS * (real)0.5) break;
        }
        r = exp(-x2) * sum;
    }
    return x < 0 ? -r : r;
}

/* D'(x) = 1 - 2 x D(x). */
DM_LIB_FN real dm_dawson_deriv(real x)
{
    return 1 - 2 * x * dm_dawson(x);
}

/* Sums of the modified Bessel functions I0 and I1 used below.  For |x| < 15 the power series
 * (positive terms); beyond, I_nu(x) ~ e^x / sqrt(2 pi x) * A_nu(x) with the asymptotic series
 * A_nu = sum_k a_k, a_k = a_(k-1) * -(4 nu^2 - (2k-1)^2) / (8 k x), stopped at its smallest
 * term (far below double precision for x >= 15). */
DM_LIB_FN real dm_bessel_asym_sum_(real ax, real mu)
{
    real term = 1, sum = 1;
    for (int k = 1; k < 60; k++) {
        real next = term * -(mu - (real)((2 * k - 1) * (2 * k - 1))) / (8 * k * ax);
        if (fabs(next) >= fabs(term)) break; /* the series started to diverge */
        term = next;
        sum += term;
        if (fabs(term) < fabs(sum) * DM_REAL_EPS) break;
    }
    return sum;
}

/* Power series of I0 and I1 for |x| < 15: I0 = sum q^k/(k!)^2, I1 = (x/2) sum q^k/(k!(k+1)!),
 * q = x^2/4. */
/* I0 - 1 is returned rather than I0 so that log1p keeps log I0 accurate near x = 0. */
DM_LIB_FN void dm_bessel_i01_series_(real ax, real *i0_minus_1, real *i1)
{
    real q = ax * ax / 4, t0 = 1, t1 = 1, s0 = 0, s1 = 1;
    for (int k = 1; k < 100; k++) {
        t0 *= q / ((real)k * k);
        t1 *= q / ((real)k * (k + 1));
        s0 += t0;
        s1 += t1;
        if (t0 < (1 + s0) * DM_REAL_EPS * (real)0.5 && t1 < s1 * DM_REAL_EPS * (real)0.5) break;
    }
    *i0_minus_1 = s0;
    *i1 = s1 * ax / 2;
}

/* log I0(x), stable for any argument (the Rician likelihood needs x up to ~1e7). */
DM_LIB_FN real dm_log_i0(real x)
{
    real ax = fabs(x);
    if (ax < 15) {
        real i0m1, i1;
        dm_bessel_i01_series_(ax, &i0m1, &i1);
        return log1p(i0m1);
    }
    return ax - (real)0.5 * log(2 * DM_PI * ax) + log(dm_bessel_asym_sum_(ax, 0));
}

/* I1(x) / I0(x), the derivative of log I0, computed as a ratio of series (never of the
 * overflowing functions themselves).  Odd in x. */
DM_LIB_FN real dm_bessel_i1_i0(real x)
{
    real ax = fabs(x), r;
    if (ax < 15) {
        real i0m1, i1;
        dm_bessel_i01_series_(ax, &i0m1, &i1);
        r = i1 / (1 + i0m1);
    } else {
        r = dm_bessel_asym_sum_(ax, 4) / dm_bessel_asym_sum_(ax, 0);
    }
    return x < 0 ? -r : r;
}

DM_LIB_FN real dm_log_i0_deriv(real x)
{
    return dm_bessel_i1_i0(x);
}

/* ---- Bessel functions of the first kind, J0 and J1, and the roots that cylinder and sphere
 * models need.  Built from + - * / and sqrt only (no libm or CUDA sin, cos, exp), like
 * templates/fodtrack/det_math.h: with FMA contraction off (NVRTC's --fmad=false, the host's
 * -ffp-contract=off) the host and the GPU round every operation alike and return the same
 * bits (every sqrt is stored in a `real` before use, so that C's double sqrt of a float and
 * CUDA's sqrtf agree; not under fast math, whose sqrtf is approximate).
 *
 *   |x| < 1:           the power series J0 = sum (-q)^k / (k!)^2, J1 = x/2 sum (-q)^k /
 *                      (k! (k+1)!), q = x^2/4 (terms fall by 4x or more: no cancellation);
 *   1 <= |x| < 20:     Miller's backward recurrence J_(n-1) = (2n/x) J_n - J_(n+1) from a
 *                      start N beyond the turning point, normalised by
 *                      J0 + 2 (J2 + J4 + ...) = 1 (|x| < 10 in float);
 *   |x| >= 20:         Hankel's asymptotic expansion J_nu = sqrt(2/(pi x)) (P cos chi -
 *                      Q sin chi), chi = x - (2 nu + 1) pi/4, whose smallest term (k ~ 2x)
 *                      is below the precision there; sin x and cos x by a three-part
 *                      reduction modulo pi/2 (exact products k * c1 for |x| < 1.6e6, 6400 in
 *                      float) and Taylor series on |r| <= pi/4.
 * Error (tests/unit/test_bessel.c, against 120- to 500-digit series): at most ~5 units of the
 * precision's epsilon times max(|J|, the local amplitude min(1, sqrt(2/(pi x)))) for
 * |x| <= 1000 in double (largest in Miller's range; 1.5 in Hankel's), ~4 in float; so a few
 * ulp away from the zeros, and a few ulp of the amplitude next to them. */

/* sin and cos of r, |r| <= pi/4 + a little: Taylor series to r^17 and r^16. */
DM_LIB_FN void dm_sincos_small_(real r, real *s, real *c)
{
    real r2 = r * r;
    *s = r *
         (1 -
          r2 / 6 *
              (1 -
               r2 / 20 *
                   (1 - r2 / 42 *
                            (1 - r2 / 72 *
                                     (1 - r2 / 110 *
                                              (1 - r2 / 156 * (1 - r2 / 210 * (1 - r2 / 272))))))));
    *c = 1 -
         r2 / 2 *
             (1 -
              r2 / 12 *
                  (1 -
                   r2 / 30 *
                       (1 - r2 / 56 *
                                (1 - r2 / 90 * (1 - r2 / 132 * (1 - r2 / 182 * (1 - r2 / 240)))))));
}

/* sin x and cos x: x = k pi/2 + r with pi/2 = c1 + c2 + c3 (c1, c2 with few bits, so that
 * k c1 and k c2 are exact for |k| < 2^20, 2^12 in float), then the quadrant. */
DM_LIB_FN void dm_sincos_(real x, real *s, real *c)
{
    const int dbl = sizeof(real) == sizeof(double);
    const real c1 = dbl ? (real)1.5707963267341256 : (real)1.57080078125;
    const real c2 = dbl ? (real)6.077100506303966e-11 : (real)-4.453584551811218e-06;
    const real c3 = dbl ? (real)2.0222662487959506e-21 : (real)-8.705515752716053e-10;
    real k = floor(x * (real)0.6366197723675814 + (real)0.5);
    real r = ((x - k * c1) - k * c2) - k * c3, sr, cr;
    dm_sincos_small_(r, &sr, &cr);
    real quadrant = k - 4 * floor(k * (real)0.25);
    if (quadrant == 0) {
        *s = sr;
        *c = cr;
    } else if (quadrant == 1) {
        *s = cr;
        *c = -sr;
    } else if (quadrant == 2) {
        *s = -sr;
        *c = -cr;
    } else {
        *s = -cr;
        *c = sr;
    }
}

/* Hankel's P and Q for mu = 4 nu^2 at x >= 20 (10 in float):
 * P = sum (-1)^k a_2k / x^2k, Q = sum (-1)^k a_(2k+1) / x^(2k+1),
 * a_k = a_(k-1) (mu - (2k-1)^2) / (8k), a_0 = 1. */
DM_LIB_FN void dm_bessel_pq_(real x, real mu, real *p, real *q)
{
    real term = 1, sp = 1, sq = 0;
    for (int k = 1; k < 80; k++) {
        real next = term * (mu - (real)((2 * k - 1) * (2 * k - 1))) / (8 * k * x);
        if (fabs(next) >= fabs(term)) break; /* the smallest term: beyond, it diverges */
        term = next;
        int m = k & 3;
        if (m == 0)
            sp += term;
        else if (m == 1)
            sq += term;
        else if (m == 2)
            sp -= term;
        else
            sq -= term;
        if (fabs(term) < DM_REAL_EPS * (real)0.125) break;
    }
    *p = sp;
    *q = sq;
}

/* J0(x) and J1(x) / x for x >= 0 (J1 / x is finite at 0, where J1'(0) = 1/2 needs it). */
DM_LIB_BIG_FN void dm_bessel_j01_(real x, real *j0, real *j1_over_x)
{
    const real large = sizeof(real) == sizeof(float) ? 10 : 20;
    if (!(x < large)) {
        if (!(x - x == 0)) { /* inf: 0; NaN stays NaN */
            *j0 = x == x ? (real)0 : x;
            *j1_over_x = *j0;
            return;
        }
        real s, c, p0, q0, p1, q1;
        dm_sincos_(x, &s, &c);
        dm_bessel_pq_(x, 0, &p0, &q0);
        dm_bessel_pq_(x, 4, &p1, &q1);
        /* cos(x - pi/4) = (c + s)/sqrt 2, sin(x - pi/4) = (s - c)/sqrt 2, and for J1
         * cos(x - 3pi/4) = (s - c)/sqrt 2, sin(x - 3pi/4) = -(s + c)/sqrt 2. */
        real root = sqrt(DM_PI * x); /* rounded to real first: C's float sqrt is double's */
        real amp = 1 / root;
        *j0 = amp * (p0 * (c + s) - q0 * (s - c));
        *j1_over_x = amp * (p1 * (s - c) + q1 * (s + c)) / x;
        return;
    }
    if (x < 1) {
        real q = x * x / 4, t0 = 1, t1 = 1, s0 = 1, s1 = 1;
        for (int k = 1; k < 30; k++) {
            t0 *= -q / ((real)k * k);
            t1 *= -q / ((real)k * (k + 1));
            s0 += t0;
            s1 += t1;
            if (fabs(t0) < DM_REAL_EPS * (real)0.125) break;
        }
        *j0 = s0;
        *j1_over_x = s1 / 2;
        return;
    }
    /* Miller: the start N (even) grows with x past the turning point n = x; the values are
     * rescaled when they grow large, which leaves the normalised ratios unchanged. */
    real rx = sqrt(x); /* a real, so that C (double sqrt) and CUDA (sqrtf) agree in float */
    real extra = sizeof(real) == sizeof(float) ? 10 + 2 * rx : 20 + 3 * rx;
    int n_start = 2 * (int)((x + extra) / 2);
    real jp = 0, jn = (real)1e-30, norm = 0, j1 = 0;
    for (int n = n_start; n >= 1; n--) {
        real jm = (2 * n) / x * jn - jp; /* J_(n-1) */
        jp = jn;
        jn = jm;
        if (n - 1 >= 2 && !((n - 1) & 1)) norm += 2 * jm;
        if (n - 1 == 1) j1 = jm;
        if (fabs(jn) > (real)1e20) {
            jn *= (real)1e-20;
            jp *= (real)1e-20;
            norm *= (real)1e-20;
            j1 *= (real)1e-20;
        }
    }
    norm += jn; /* + J0 */
    *j0 = jn / norm;
    *j1_over_x = j1 / norm / x;
}

/* J0(x), even in x. */
DM_LIB_FN real dm_bessel_j0(real x)
{
    real j0, j1x;
    dm_bessel_j01_(fabs(x), &j0, &j1x);
    return j0;
}

/* J1(x), odd in x. */
DM_LIB_FN real dm_bessel_j1(real x)
{
    real j0, j1x;
    dm_bessel_j01_(fabs(x), &j0, &j1x);
    return x - x == 0 ? x * j1x : j1x; /* J1(+-inf) = 0, not inf * 0 */
}

/* J1'(x) = J0(x) - J1(x)/x, 1/2 at x = 0; even in x.  (J0' = -J1 needs no helper.) */
DM_LIB_FN real dm_bessel_j1_deriv(real x)
{
    real j0, j1x;
    dm_bessel_j01_(fabs(x), &j0, &j1x);
    return j0 - j1x;
}

/* The n-th positive root (n >= 1) of J1'(x) = 0 (a cylinder's radial eigenvalues): Newton
 * from McMahon's expansion beta - 7/(8 beta) - 1724/(1536 beta^3), beta = (n - 1/4) pi,
 * with J1'' = -J1'/x - (1 - 1/x^2) J1 (Bessel's equation).  0 for n < 1. */
DM_LIB_FN real dm_bessel_j1p_root(int n)
{
    if (n < 1) return 0;
    real beta = (n - (real)0.25) * DM_PI,
         x = beta - 7 / (8 * beta) - 1724 / (1536 * beta * beta * beta);
    for (int it = 0; it < 60; it++) {
        real j0, j1x;
        dm_bessel_j01_(x, &j0, &j1x);
        real f = j0 - j1x, j1 = x * j1x;
        real df = -f / x - (1 - 1 / (x * x)) * j1;
        real step = f / df;
        if (step > (real)0.5) step = (real)0.5; /* stay near the starting root */
        if (step < (real)-0.5) step = (real)-0.5;
        x -= step;
        if (fabs(step) <= 2 * DM_REAL_EPS * x) break;
    }
    return x;
}

/* The n-th positive root (n >= 1) of the spherical Bessel function's derivative j1'(x), i.e.
 * of x J_(3/2)'(x) - J_(3/2)(x)/2 = 0 (a sphere's radial eigenvalues in the Gaussian phase
 * approximation): with x^3 j1'(x) = g(x) = (x^2 - 2) sin x + 2 x cos x and g' = x^2 cos x,
 * the root lies in [n pi - pi/2, n pi] (g changes sign there); Newton, kept inside the
 * bracket by bisection.  0 for n < 1. */
DM_LIB_FN real dm_bessel_sj1p_root(int n)
{
    if (n < 1) return 0;
    real lo = n * DM_PI - DM_PI / 2, hi = n * DM_PI, s, c;
    dm_sincos_(lo, &s, &c);
    real g_lo = (lo * lo - 2) * s + 2 * lo * c;
    real x = hi - 2 / hi;
    if (x <= lo) x = (lo + hi) / 2;
    for (int it = 0; it < 100; it++) {
        dm_sincos_(x, &s, &c);
        real g = (x * x - 2) * s + 2 * x * c, dg = x * x * c;
        if ((g < 0) == (g_lo < 0))
            lo = x;
        else
            hi = x;
        real next = x - g / dg;
        if (!(next > lo && next < hi)) next = (lo + hi) / 2;
        real step = next - x;
        x = next;
        if (fabs(step) <= 2 * DM_REAL_EPS * x || hi - lo <= 2 * DM_REAL_EPS * x) break;
    }
    return x;
}

/* The sum of a cylinder's perpendicular attenuation in the Gaussian phase approximation (Van
 * Gelderen et al. 1994), for diffusivity d inside a cylinder of radius R and a pulsed gradient
 * of duration delta and separation Delta (any consistent units, e.g. m^2/s, m, s):
 *   S = sum_m [2 r delta - 2 + 2 e^(-r delta) + 2 e^(-r Delta) - e^(-r (Delta - delta))
 *              - e^(-r (Delta + delta))] / (d^2 a_m^6 (R^2 a_m^2 - 1)),   r = d a_m^2,
 * a_m = j'_1m / R with j'_1m the m-th root of J1' (dm_bessel_j1p_root), so that
 * ln E_perp = -2 gamma^2 G_perp^2 S.  The terms fall as m^-6 and stop below the precision of
 * the sum, or after `terms`.  Used by dimoc commit's cylinder responses (runtime/commit); the
 * model language writes the same formula with sum() (models/lib/compartments.model). */
DM_LIB_BIG_FN real dm_cylinder_gpd_sum(real d, real R, real delta, real Delta, int terms)
{
    real sum = 0;
    for (int m = 1; m <= terms; m++) {
        real root = dm_bessel_j1p_root(m), a = root / R, a2 = a * a, r = d * a2;
        real bracket = 2 * r * delta - 2 + 2 * exp(-r * delta) + 2 * exp(-r * Delta) -
                       exp(-r * (Delta - delta)) - exp(-r * (Delta + delta));
        real term = bracket / (d * d * a2 * a2 * a2 * (root * root - 1));
        sum += term;
        if (fabs(term) <= DM_REAL_EPS * fabs(sum)) break;
    }
    return sum;
}

/* Legendre polynomial P_n(x) by the three-term recurrence
 * (k+1) P_(k+1) = (2k+1) x P_k - k P_(k-1).  n < 0 gives 0. */
DM_LIB_FN real dm_legendre(int n, real x)
{
    if (n <= 0) return n == 0 ? (real)1 : (real)0;
    real prev = 1, cur = x;
    for (int k = 1; k < n; k++) {
        real next = ((2 * k + 1) * x * cur - k * prev) / (k + 1);
        prev = cur;
        cur = next;
    }
    return cur;
}

/* P_n'(x) by P'_(k+1) = P'_(k-1) + (2k+1) P_k, which (unlike n (x P_n - P_(n-1)) / (x^2-1))
 * has no singularity at x = +-1. */
DM_LIB_FN real dm_legendre_deriv(int n, real x)
{
    if (n <= 0) return 0;
    real p_prev = 1, p_cur = x; /* P_(k-1), P_k */
    real d_prev = 0, d_cur = 1; /* P'_(k-1), P'_k */
    for (int k = 1; k < n; k++) {
        real d_next = d_prev + (2 * k + 1) * p_cur;
        real p_next = ((2 * k + 1) * x * p_cur - k * p_prev) / (k + 1);
        p_prev = p_cur;
        p_cur = p_next;
        d_prev = d_cur;
        d_cur = d_next;
    }
    return d_cur;
}

/* ---- NODDI-Watson: the Legendre expansion of a Watson-dispersed stick (thesis appendix 5A).
 *
 * With t = g.v and x = b d, the stick signal averaged over a Watson distribution of
 * concentration kappa about v is
 *     S(x, t, kappa) = sum over even l of (2l+1)/2 * W_l(kappa) * J_l(x) * P_l(t),
 * W_l the Watson coefficients (the mean of P_l(n.v) over the distribution) and J_l the
 * Legendre coefficients of the stick, J_l(x) = integral_-1^1 exp(-x u^2) P_l(u) du (by the
 * Funk-Hecke theorem).  NODDI truncates the sum at l = 12.
 *
 * With l = 2n, J_l(x) = (-x)^n Gamma(n+1/2)/Gamma(2n+3/2) M(n+1/2, 2n+3/2, -x) (M: Kummer's
 * function), and by Kummer's transformation M(n+1/2, 2n+3/2, -x) = e^(-x) M(n+1, 2n+3/2, x):
 * each series has only positive terms on its side of 0, so neither cancels.  For large x the
 * e^(-x) part is below the precision and J_l is the finite sum
 *     (-1)^n Gamma(n+1/2)/n! x^(-1/2) sum_(s=0..n) (n+1/2)_s (-n)_s / (s! x^s). */

/* J_l(x) = integral_-1^1 exp(-x u^2) P_l(u) du; 0 for odd l.  Intended for x >= 0 (a stick's
 * b d); negative x works too (it grows like e^|x|).  Relative error ~1e-15 in double. */
DM_LIB_BIG_FN real dm_stick_sh(int l, real x)
{
    if (l < 0 || (l & 1)) return 0;
    int n = l / 2;
    const real large = sizeof(real) == sizeof(float) ? 20 : 40; /* e^-large below precision */
    if (x >= large) {
        real term = 1, sum = 1, g = sqrt(DM_PI); /* g = Gamma(n+1/2)/n! */
        for (int s = 0; s < n; s++) {
            term *= (n + (real)0.5 + s) * (s - n) / ((s + 1) * x);
            sum += term;
        }
        for (int k = 1; k <= n; k++) g *= (k - (real)0.5) / k;
        return (n & 1 ? -g : g) * sum / sqrt(x);
    }
    real pref = 1; /* (-x)^n Gamma(n+1/2)/Gamma(2n+3/2) */
    for (int j = 0; j <= n; j++) pref /= n + (real)0.5 + j;
    for (int j = 0; j < n; j++) pref *= -x;
    real a = x >= 0 ? (real)(n + 1) : n + (real)0.5, b = 2 * n + (real)1.5, z = fabs(x);
    real term = 1, sum = 1;
    for (int j = 0; j < 600; j++) {
        term *= (a + j) / (b + j) * z / (j + 1);
        sum += term;
        if (term < sum * DM_REAL_EPS * (real)0.5) break;
    }
    return pref * sum * (x >= 0 ? exp(-x) : (real)1);
}

/* W_l(kappa): the mean of P_l(n.v) under the Watson distribution exp(kappa (n.v)^2) / norm;
 * W_0 = 1, 0 for odd l.
 *
 * For kappa > 0 from a three-term recurrence in l.  Legendre's equation integrated by parts
 * against the density gives l(l+1) W_l = 2 kappa <u (1-u^2) P_l'(u)>, and expanding
 * u (1-u^2) P_l' in P_(l+2), P_l, P_(l-2) turns that into
 *     (l+2)(2l-1) W_(l+2) = ((2l+1) - (2l-1)(2l+1)(2l+3) / (2 kappa)) W_l + (l-1)(2l+3) W_(l-2).
 * W_l is its minimal solution (it decays with l), so it is run downwards, as the ratios
 * r_l = W_l / W_(l-2) = (l-1)(2l+3) / ((2l-1)(l+2) r_(l+2) - (2l+1)
 *                                     + (2l-1)(2l+1)(2l+3) / (2 kappa))
 * from r = 0 at an order L where W_L is below the precision (W_l ~ exp(-l^2 / 4 kappa) for
 * large kappa: L = 2 ceil(12 + 4 sqrt(kappa))), and W_l is the product r_2 r_4 ... r_l.  One
 * division per step, against four per term of each of the two Kummer series this replaced;
 * against those series (kept below for kappa < 0) it agrees to 2e-15 relative in double for
 * kappa up to 100 and 2e-14 up to 3000, and to 3e-7 absolute in float.
 *
 * For kappa < 0 (a girdle), J_l(-kappa) / J_0(-kappa) from the stick integrals. */
/* The recurrence's products for the even orders lo <= l <= hi (lo >= 2): w[(l - lo) / step]
 * = W_l, each the product of the ratios r_l r_(l-2) ... r_2 in that order.  kappa > 0. */
DM_LIB_FN void dm_watson_sh_orders_(int lo, int hi, int step, real kappa, real *w)
{
    /* in real arithmetic: a float build of a fitter holds no double-precision instruction */
    const int top = 2 * (int)ceil(12 + 4 * sqrt(kappa));
    const real half_inv = (real)0.5 / kappa;
    real r = 0;
    for (int l = lo; l <= hi; l += 2) w[(l - lo) / step] = 1;
    for (int j = top - 2; j >= 2; j -= 2) {
        r = (real)((j - 1) * (2 * j + 3)) /
            ((real)((2 * j - 1) * (j + 2)) * r - (real)(2 * j + 1) +
             (real)((2 * j - 1) * (2 * j + 1) * (2 * j + 3)) * half_inv);
        for (int l = j > lo ? j : lo; l <= hi; l += 2) w[(l - lo) / step] *= r;
    }
}

DM_LIB_BIG_FN real dm_watson_sh(int l, real kappa)
{
    if (l < 0 || (l & 1)) return 0;
    if (l == 0) return 1;
    if (kappa < 0) return dm_stick_sh(l, -kappa) / dm_stick_sh(0, -kappa);
    if (kappa == 0) return 0;
    real w;
    dm_watson_sh_orders_(l, l, 2, kappa, &w);
    return w;
}

/* The whole family at once: w[l] = dm_watson_sh(l, kappa) for l = 0 .. lmax, bit for bit,
 * from one run of the recurrence (its ratios are the same for every order).  A model that
 * needs several orders of one kappa (NODDI's series and its derivative) calls this once
 * instead of running the recurrence once per order. */
DM_LIB_BIG_FN void dm_watson_sh_family(int lmax, real kappa, real *w)
{
    for (int l = 0; l <= lmax; l++) w[l] = l == 0 ? (real)1 : (real)0;
    if (lmax < 2 || kappa == 0) return;
    if (kappa < 0) {
        const real j0 = dm_stick_sh(0, -kappa);
        for (int l = 2; l <= lmax; l += 2) w[l] = dm_stick_sh(l, -kappa) / j0;
        return;
    }
    dm_watson_sh_orders_(2, lmax, 1, kappa, w + 2);
}

/* ---- NODDI-Bingham: the confluent hypergeometric function of a 3x3 matrix argument,
 * 1F1(1/2; 3/2; A) = (1/4pi) integral over the unit sphere of exp(n' A n) dn, by the
 * saddle-point approximation of Kume & Wood (2005) with its second-order correction.
 *
 * With a_i the eigenvalues of A: theta > max a_i solves s1 = sum 1/(theta - a_i) = 2, and with
 * s_k = sum (theta - a_i)^-k,
 *     log 1F1 ~ log(sqrt(pi)/2) - log(pi s2)/2 - sum log(theta - a_i)/2 + theta + T,
 *     T = 3 s4 / (2 s2^2) - 5 s3^2 / (3 s2^3).
 * (The approximation is invariant under A -> A + cI, as 1F1 is up to the factor e^c.)
 * The eigenvalues are never needed one by one: every s_k and the sum of logs follow from the
 * characteristic polynomial Q(theta) = det(theta I - A) and its derivatives, which keeps the
 * function smooth where eigenvalues coincide.  The caller removes the trace first, so that
 * Q(theta) = theta^3 + c1 theta - c0 with c1 = sum of the principal 2x2 minors (<= 0) and
 * c0 = det A of the trace-free matrix, and adds trace/3 back.
 *
 * theta itself is a root of a cubic: s1 = Q'/Q = 2 reads 2 theta^3 - 3 theta^2 + 2 c1 theta
 * - (2 c0 + c1) = 0, which has one root in each gap between the eigenvalues and one above them
 * all, at least 1/2 above the largest.  theta is that largest root: the trigonometric solution,
 * then Newton steps until they stop moving it, one or two (where two roots come close, the
 * arccosine loses digits that they restore; a numerical derivative may step just outside the
 * (c1, c0) of symmetric matrices, where the cubic has one real root and r is clipped).
 * With s1 = 2, the derivatives of log Q give s2 = 4 - R2, s3 = 8 - 3 R2 + R3/2 and
 * s4 = 16 - 8 R2 + R2^2/2 + 4 R3/3, where R2 = Q''(theta)/Q = 6 theta/Q and R3 = Q'''/Q = 6/Q.
 * Error of the approximation itself: up to ~5% in 1F1 (against quadrature, test_mathlib.c),
 * largely cancelling in the ratios NODDI-Bingham uses (~0.3%, 1.5% at kappa = 1). */

typedef struct dm_hyp1f1_ {
    real v, d1, d0;
} dm_hyp1f1_; /* log 1F1 and its partials in c1 and c0 */

/* log 1F1(1/2; 3/2; A) for a trace-free symmetric 3x3 A given by c1 and c0 as above, and, when
 * `partials`, its partial derivatives in c1 and c0: exact derivatives of the approximation,
 * theta's through s1(theta, c1, c0) = 2 (implicit differentiation). */
DM_LIB_BIG_FN dm_hyp1f1_ dm_log_hyp1f1_(real c1, real c0, int partials)
{
    /* theta - 1/2 is the largest root of t^3 - pp t - qq, pp >= 3/4: all three are real */
    const real pp = (real)0.75 - c1, qq = c0 + (real)0.25;
    const real s = sqrt(pp / 3);
    real r = qq / (2 * s * s * s);
    if (!(r < 1)) /* also catches NaN */
        r = 1;
    if (r < -1) r = -1;
    real th = 2 * s * cos(acos(r) / 3) + (real)0.5;
    for (int it = 0; it < 8; it++) { /* one step, or two; more just outside the domain */
        const real step = (((2 * th - 3) * th + 2 * c1) * th - (2 * c0 + c1)) /
                          ((6 * th - 6) * th + 2 * c1);
        th -= step;
        if (fabs(step) <= 4 * DM_REAL_EPS * (th + 1)) break;
    }
    const real q = (th * th + c1) * th - c0, u = 1 / q;
    const real R3 = 6 * u, R2 = th * R3;
    const real S2 = 4 - R2, S3 = 8 - 3 * R2 + (real)0.5 * R3;
    const real S4 = 16 - 8 * R2 + (real)0.5 * R2 * R2 + (real)4 / 3 * R3;
    const real is2 = 1 / S2, is2sq = is2 * is2, is2cu = is2sq * is2;
    dm_hyp1f1_ out;
    out.v = (real)-0.12078223763524522 /* log(sqrt(pi)/2) */ - (real)0.5 * log(DM_PI * S2 * q) +
            th + (real)1.5 * S4 * is2sq - (real)5 / 3 * S3 * S3 * is2cu;
    out.d1 = 0;
    out.d0 = 0;
    if (partials) {
        /* backwards: the correction's partials in s2, s3, s4; then in R2 and R3 (with the
         * -log(s2)/2 term); then in Q at fixed theta (f_q), and in theta along s1 = 2 at fixed
         * Q (h: there the leading terms' 1 - s1/2 vanishes); dtheta/dc1 = (1 - 2 theta)/(Q s2),
         * dtheta/dc0 = 2/(Q s2), and at fixed theta dQ/dc1 = theta, dQ/dc0 = -1. */
        const real c_s2 = (5 * S3 * S3 * is2 - 3 * S4) * is2cu;
        const real c_s3 = -(real)10 / 3 * S3 * is2cu, c_s4 = (real)1.5 * is2sq;
        const real g_r2 = (real)0.5 * is2 - c_s2 - 3 * c_s3 + (R2 - 8) * c_s4;
        const real g_r3 = (real)0.5 * c_s3 + (real)4 / 3 * c_s4;
        const real f_q = -(real)0.5 * u - 6 * u * u * (g_r2 * th + g_r3);
        const real h = 6 * u * (g_r2 * (1 - 2 * th) - 2 * g_r3), uh = u * is2 * h;
        out.d1 = (1 - 2 * th) * uh + f_q * th;
        out.d0 = 2 * uh - f_q;
    }
    return out;
}

/* log 1F1 (which = 0) or its partial in c1 (which = 1) or c0 (which = 2), as above. */
DM_LIB_FN real dm_log_hyp1f1_dep(int which, real c1, real c0)
{
    dm_hyp1f1_ r = dm_log_hyp1f1_(c1, c0, which != 0);
    return which == 0 ? r.v : which == 1 ? r.d1 : r.d0;
}

/* out[which] = dm_log_hyp1f1_dep(which, c1, c0) for which = 0, 1, 2: the value and both
 * partials from one saddle-point solve. */
DM_LIB_FN void dm_log_hyp1f1_family(real c1, real c0, real *out)
{
    dm_hyp1f1_ r = dm_log_hyp1f1_(c1, c0, 1);
    out[0] = r.v;
    out[1] = r.d1;
    out[2] = r.d0;
}

/* <n_i^2> (i = 0, 1, 2) under the Bingham distribution exp(sum a_k n_k^2) / norm: the
 * derivative d log 1F1(1/2; 3/2; diag(a)) / d a_i of the approximation above, written with
 * the eigenvalues (known here) rather than with c1, c0, which avoids cancellation and lets
 * a numerical derivative step on the scale of the eigenvalues.  With y_k = 1/(theta - a_k),
 * s_m = sum y_k^m and T = T(s2, s3, s4):
 *   d/da_i = -y_i^3/s2 + y_i/2 + 2 y_i^3 T_s2 + 3 y_i^4 T_s3 + 4 y_i^5 T_s4
 *            + (s3/s2 - 2 s3 T_s2 - 3 s4 T_s3 - 4 s5 T_s4) y_i^2 / s2,
 * the last line through dtheta/da_i = y_i^2 / s2.  The three moments sum to 1.
 * out[i] = <n_i^2> for i = 0, 1, 2, from one Newton solve. */
DM_LIB_BIG_FN void dm_bingham_moment_family(real a0, real a1, real a2, real *out)
{
    real amax = a0 > a1 ? a0 : a1;
    amax = amax > a2 ? amax : a2;
    real b0 = a0 - amax, b1 = a1 - amax, b2 = a2 - amax; /* <= 0; theta - amax in [1/2, 3/2] */
    real th = (real)0.5;
    for (int it = 0; it < 100; it++) { /* Newton on 1/s1 = 1/2: monotone from theta = 1/2 */
        real y0 = 1 / (th - b0), y1 = 1 / (th - b1), y2 = 1 / (th - b2);
        real s1 = y0 + y1 + y2, s2 = y0 * y0 + y1 * y1 + y2 * y2;
        real step = (1 / s1 - (real)0.5) * s1 * s1 / s2;
        th -= step;
        if (fabs(step) <= 4 * DM_REAL_EPS * (th + 1)) break;
    }
    real y[3] = {1 / (th - b0), 1 / (th - b1), 1 / (th - b2)};
    real s2 = 0, s3 = 0, s4 = 0, s5 = 0;
    for (int k = 0; k < 3; k++) {
        real y2 = y[k] * y[k];
        s2 += y2;
        s3 += y2 * y[k];
        s4 += y2 * y2;
        s5 += y2 * y2 * y[k];
    }
    real s2sq = s2 * s2;
    real t_s2 = -3 * s4 / (s2sq * s2) + 5 * s3 * s3 / (s2sq * s2sq);
    real t_s3 = -(real)10 / 3 * s3 / (s2sq * s2), t_s4 = (real)1.5 / s2sq;
    real through_theta = s3 / s2 - 2 * s3 * t_s2 - 3 * s4 * t_s3 - 4 * s5 * t_s4;
    for (int i = 0; i < 3; i++) {
        real yi = y[i], yi2 = yi * yi, yi3 = yi2 * yi;
        real at_theta = -yi3 / s2 + (real)0.5 * yi + 2 * yi3 * t_s2 + 3 * yi3 * yi * t_s3 +
                        4 * yi3 * yi2 * t_s4;
        out[i] = at_theta + through_theta * yi2 / s2;
    }
}

/* One moment: the family's entry i (0, 1, 2). */
DM_LIB_FN real dm_bingham_moment(int i, real a0, real a1, real a2)
{
    real m[3];
    dm_bingham_moment_family(a0, a1, a2, m);
    return m[i < 0 ? 0 : i > 2 ? 2 : i];
}

DM_LIB_FN real dm_erf(real x)
{
    return erf(x);
}
DM_LIB_FN real dm_erfc(real x)
{
    return erfc(x);
}
DM_LIB_FN real dm_lgamma(real x)
{
    return lgamma(x);
}

/* Step of the central difference that differentiates a built-in with no analytic rule:
 * h = cbrt(eps) * max(|x|, 1), which balances truncation (h^2) against roundoff (eps/h).
 * The result is accurate to ~eps^(2/3): ~1e-11 relative in double, ~1e-5 in float. */
DM_LIB_FN real dm_fd_step(real x)
{
    real scale = fabs(x) > 1 ? fabs(x) : (real)1;
    return (sizeof(real) == sizeof(float) ? (real)4.921566601151848e-03
                                          : (real)6.055454452393343e-06) *
           scale;
}

/* x mapped into [lo, hi) by adding a multiple of hi - lo (periodic parameters). */
DM_LIB_FN real dm_wrap(real x, real lo, real hi)
{
    real width = hi - lo, turns = (x - lo) / width;
    real y = lo + (turns - floor(turns)) * width;
    return y < hi ? y : lo; /* rounding can land on hi itself */
}

#endif
