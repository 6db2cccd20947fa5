/* Elementwise log, exp, sin and cos: libmvec's SSE variants, or libm's. */
#include "vecmath/vecmath.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GLIBC__)
#include <emmintrin.h>

/* libmvec's exports (GLIBC_2.22): the x86-64 vector function ABI's names of log, exp, sin and
 * cos on two doubles in an SSE register, not masked. */
__m128d _ZGVbN2v_log(__m128d x);
__m128d _ZGVbN2v_exp(__m128d x);
__m128d _ZGVbN2v_sin(__m128d x);
__m128d _ZGVbN2v_cos(__m128d x);

#define PAIRS(f, x, n, y)                                                                          \
    do {                                                                                           \
        int i_ = 0;                                                                                \
        for (; i_ + 2 <= (n); i_ += 2) _mm_storeu_pd((y) + i_, f(_mm_loadu_pd((x) + i_)));       \
        if (i_ < (n)) (y)[i_] = _mm_cvtsd_f64(f(_mm_set1_pd((x)[i_])));                           \
    } while (0)

void dm_vec_log(const double *x, int n, double *y)
{
    PAIRS(_ZGVbN2v_log, x, n, y);
}

void dm_vec_exp(const double *x, int n, double *y)
{
    PAIRS(_ZGVbN2v_exp, x, n, y);
}

void dm_vec_sincos(const double *x, int n, double *s, double *c)
{
    int i = 0;
    for (; i + 2 <= n; i += 2) {
        const __m128d v = _mm_loadu_pd(x + i);
        _mm_storeu_pd(c + i, _ZGVbN2v_cos(v));
        _mm_storeu_pd(s + i, _ZGVbN2v_sin(v));
    }
    if (i < n) {
        const __m128d v = _mm_set1_pd(x[i]);
        c[i] = _mm_cvtsd_f64(_ZGVbN2v_cos(v));
        s[i] = _mm_cvtsd_f64(_ZGVbN2v_sin(v));
    }
}

#else

void dm_vec_log(const double *x, int n, double *y)
{
    for (int i = 0; i < n; i++) y[i] = log(x[i]);
}

void dm_vec_exp(const double *x, int n, double *y)
{
    for (int i = 0; i < n; i++) y[i] = exp(x[i]);
}

void dm_vec_sincos(const double *x, int n, double *s, double *c)
{
    for (int i = 0; i < n; i++) {
        const double v = x[i];
        c[i] = cos(v);
        s[i] = sin(v);
    }
}

#endif
