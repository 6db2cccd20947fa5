/* Angle functions built from + - * / and sqrt only, so that the host build and the NVRTC build
 * (with --fmad=false) round every operation alike and return the same bits: libm's and CUDA's
 * sin, cos, acos, exp and log may differ in the last place, and one differing bit in a
 * rejection test sends a streamline elsewhere.  Accurate to a few units of `real`'s roundoff
 * over the ranges the tracker uses (angles within [0, pi]); not a general math library.
 *
 * No include guard: included once per precision, the names made distinct by DM_FT (see
 * ft_types.h).  Before including: `real` (float or double), DM_FN, DM_FT. */
#define DM_DET_PI ((real)3.14159265358979323846)

/* sin and cos of x, |x| <= pi: the Taylor series on x / 8 (|x / 8| < 0.4, terms to x^15), then
 * three doublings. */
DM_FN void DM_FT(det_sincos)(real x, real *s, real *c)
{
    real y = x * (real)0.125, y2 = y * y;
    real sy =
        y *
        (1 -
         y2 / 6 *
             (1 - y2 / 20 *
                      (1 - y2 / 42 *
                               (1 - y2 / 72 * (1 - y2 / 110 * (1 - y2 / 156 * (1 - y2 / 210)))))));
    real cy =
        1 - y2 / 2 *
                (1 - y2 / 12 *
                         (1 - y2 / 30 *
                                  (1 - y2 / 56 * (1 - y2 / 90 * (1 - y2 / 132 * (1 - y2 / 182))))));
    for (int i = 0; i < 3; i++) {
        real s2 = 2 * sy * cy, c2 = cy * cy - sy * sy;
        sy = s2;
        cy = c2;
    }
    *s = sy;
    *c = cy;
}

/* atan(t) for t >= 0: halve the angle (atan t = 2 atan(t / (1 + sqrt(1 + t^2)))) until t is
 * below 0.03, then the series to t^11. */
DM_FN real DM_FT(det_atan_pos)(real t)
{
    real scale = 1;
    for (int i = 0; i < 8 && t > (real)0.03; i++) {
        t = t / (1 + sqrt(1 + t * t));
        scale *= 2;
    }
    real t2 = t * t;
    return scale * t *
           (1 - t2 * ((real)1 / 3 -
                      t2 * ((real)1 / 5 - t2 * ((real)1 / 7 - t2 * ((real)1 / 9 - t2 / 11)))));
}

/* acos(c), c clamped to [-1, 1]: 2 atan(sqrt((1 - c) / (1 + c))). */
DM_FN real DM_FT(det_acos)(real c)
{
    if (c >= 1) return 0;
    if (c <= -1) return DM_DET_PI;
    return 2 * DM_FT(det_atan_pos)(sqrt((1 - c) / (1 + c)));
}

/* Natural logarithm of x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
 * log m = 2 atanh(z), z = (m - 1) / (m + 1), |z| < 0.172, the series to z^21. */
DM_FN real DM_FT(det_log)(real x)
{
    int e = 0;
    while (x >= (real)1.4142135623730951) {
        x *= (real)0.5;
        e++;
    }
    while (x < (real)0.7071067811865476) {
        x *= 2;
        e--;
    }
    real z = (x - 1) / (x + 1), z2 = z * z, sum = 0;
    for (int k = 21; k >= 1; k -= 2) sum = sum * z2 + (real)1 / k;
    return 2 * z * sum + e * (real)0.6931471805599453;
}

/* exp(x) for |x| < 700: x = k log 2 + r, |r| <= log(2) / 2, then the Taylor series on r / 16
 * and four squarings, and 2^k by repeated doubling. */
DM_FN real DM_FT(det_exp)(real x)
{
    const real ln2 = (real)0.6931471805599453;
    int k = (int)(x / ln2 + (x >= 0 ? (real)0.5 : (real)-0.5));
    real r = (x - k * ln2) * (real)0.0625, term = 1, sum = 1;
    for (int i = 1; i <= 10; i++) {
        term *= r / i;
        sum += term;
    }
    for (int i = 0; i < 4; i++) sum *= sum;
    for (; k > 0; k--) sum *= 2;
    for (; k < 0; k++) sum *= (real)0.5;
    return sum;
}
