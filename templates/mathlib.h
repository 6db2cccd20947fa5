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
#define DM_REAL_EPS (sizeof(real) == sizeof(float) ? (real)1.1920928955078125e-07 \
                                                   : (real)2.220446049250313e-16)
#define DM_PI ((real)3.141592653589793)

/* Library functions may go unused by a model; say so, or NVRTC warns (#177). */
#if defined(__GNUC__) || defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define DM_LIB_FN DM_FN __attribute__((unused))
#else
#define DM_LIB_FN DM_FN
#endif

DM_LIB_FN real dm_sq(real x) { return x * x; }

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
            if (term < sum * DM_REAL_EPS)
                break;
        }
        r = sum / (2 * ax);
    } else {
        real x2 = ax * ax, power = ax, sum = ax; /* power = x^(2n+1) / n! */
        for (int n = 1; n < 200; n++) {
            power *= x2 / n;
            real add = power / (2 * n + 1);
            sum += add;
            if (add < sum * DM_REAL_EPS * (real)0.5)
                break;
        }
        r = exp(-x2) * sum;
    }
    return x < 0 ? -r : r;
}

/* D'(x) = 1 - 2 x D(x). */
DM_LIB_FN real dm_dawson_deriv(real x) { return 1 - 2 * x * dm_dawson(x); }

/* Sums of the modified Bessel functions I0 and I1 used below.  For |x| < 15 the power series
 * (positive terms); beyond, I_nu(x) ~ e^x / sqrt(2 pi x) * A_nu(x) with the asymptotic series
 * A_nu = sum_k a_k, a_k = a_(k-1) * -(4 nu^2 - (2k-1)^2) / (8 k x), stopped at its smallest
 * term (far below double precision for x >= 15). */
DM_LIB_FN real dm_bessel_asym_sum_(real ax, real mu)
{
    real term = 1, sum = 1;
    for (int k = 1; k < 60; k++) {
        real next = term * -(mu - (real)((2 * k - 1) * (2 * k - 1))) / (8 * k * ax);
        if (fabs(next) >= fabs(term))
            break; /* the series started to diverge */
        term = next;
        sum += term;
        if (fabs(term) < fabs(sum) * DM_REAL_EPS)
            break;
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
        if (t0 < (1 + s0) * DM_REAL_EPS * (real)0.5 && t1 < s1 * DM_REAL_EPS * (real)0.5)
            break;
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

DM_LIB_FN real dm_log_i0_deriv(real x) { return dm_bessel_i1_i0(x); }

/* Legendre polynomial P_n(x) by the three-term recurrence
 * (k+1) P_(k+1) = (2k+1) x P_k - k P_(k-1).  n < 0 gives 0. */
DM_LIB_FN real dm_legendre(int n, real x)
{
    if (n <= 0)
        return n == 0 ? (real)1 : (real)0;
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
    if (n <= 0)
        return 0;
    real p_prev = 1, p_cur = x;   /* P_(k-1), P_k */
    real d_prev = 0, d_cur = 1;   /* P'_(k-1), P'_k */
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

DM_LIB_FN real dm_erf(real x) { return erf(x); }
DM_LIB_FN real dm_erfc(real x) { return erfc(x); }
DM_LIB_FN real dm_lgamma(real x) { return lgamma(x); }

/* Step of the central difference that differentiates a built-in with no analytic rule:
 * h = cbrt(eps) * max(|x|, 1), which balances truncation (h^2) against roundoff (eps/h).
 * The result is accurate to ~eps^(2/3): ~1e-11 relative in double, ~1e-5 in float. */
DM_LIB_FN real dm_fd_step(real x)
{
    real scale = fabs(x) > 1 ? fabs(x) : (real)1;
    return (sizeof(real) == sizeof(float) ? (real)4.921566601151848e-03
                                          : (real)6.055454452393343e-06) * scale;
}

/* x mapped into [lo, hi) by adding a multiple of hi - lo (periodic parameters). */
DM_LIB_FN real dm_wrap(real x, real lo, real hi)
{
    real width = hi - lo, turns = (x - lo) / width;
    real y = lo + (turns - floor(turns)) * width;
    return y < hi ? y : lo; /* rounding can land on hi itself */
}

#endif
