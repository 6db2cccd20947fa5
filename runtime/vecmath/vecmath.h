/* Elementwise log, exp, sin and cos over arrays of doubles, with the same bits in every build
 * of dimoc on a machine and across machines: on x86-64 with glibc, libmvec's two-lane SSE
 * variants called by name for every element (the last of an odd count paired with itself),
 * a few times as fast as libm's scalar functions and within 4 ulp of them; libm's elsewhere.
 * (A loop the compiler vectorised on its own would give other bits in another build, where
 * it is left scalar, as under a sanitizer, or on another processor, where libmvec's AVX2
 * variants round otherwise than its SSE ones.)  y, s or c may be x. */
#ifndef DIMOC_VECMATH_H
#define DIMOC_VECMATH_H

void dm_vec_log(const double *x, int n, double *y);
void dm_vec_exp(const double *x, int n, double *y);
void dm_vec_sincos(const double *x, int n, double *s, double *c);

#endif
