/* The derived outputs of many parameter rows at once (a posterior's samples, fit_api.h's
 * dm_derived_rows): the host build's second translation unit, compiled with cpu_fitter.c.
 *
 * With DM_LIBMVEC (the runtime links glibc's libmvec) the model's sin and cos here are names of
 * their own for libmvec's functions, declared const and with vector variants, so that the loop
 * over rows below runs 4 or 8 rows at once.  They are this file's alone: in cpu_fitter.c the
 * compiler keeps its own sin and cos, which it merges into one sincos where both take the same
 * angle (a merged pair has no vector variant, which is why the names here are other names). */
#include <math.h>
#include <stddef.h>

#include "fit/host_build.h"

#ifdef DM_LIBMVEC
#pragma omp declare simd notinbranch
extern double dm_vector_sin(double) __asm__("sin") __attribute__((const));
#pragma omp declare simd notinbranch
extern double dm_vector_cos(double) __asm__("cos") __attribute__((const));
#define sin dm_vector_sin
#define cos dm_vector_cos
#endif

#include "maths/mathlib.h"
#include "fit/model_api.h"
#include DM_MODEL_FILE

#ifdef DM_LIBMVEC
#undef sin
#undef cos
#endif

/* Rows go through the model in blocks, each parameter's values of the block side by side (the
 * compiler vectorises the loop over a block's rows from such arrays, not from the rows). */
enum { DERIVED_BLOCK = 64 };

DM_EXPORT void dm_derived_rows(const double *params, int n, const double *vox, double *out)
{
#if DM_OUTPUT_WIDTH > 0
    real v[DM_VOXEL_WIDTH > 0 ? DM_VOXEL_WIDTH : 1];
    for (int j = 0; j < DM_VOXEL_WIDTH; j++) v[j] = (real)vox[j];
    for (int b = 0; b < n; b += DERIVED_BLOCK) {
        const int m = n - b < DERIVED_BLOCK ? n - b : DERIVED_BLOCK;
        real in[DM_NPARAMS * DERIVED_BLOCK], res[DM_OUTPUT_WIDTH * DERIVED_BLOCK];
        for (int s = 0; s < m; s++)
            for (int k = 0; k < DM_NPARAMS; k++)
                in[k * DERIVED_BLOCK + s] = (real)params[(size_t)(b + s) * DM_NPARAMS + k];
        for (int s = 0; s < m; s++) {
            real p[DM_NPARAMS], o[DM_OUTPUT_WIDTH];
            for (int k = 0; k < DM_NPARAMS; k++) p[k] = in[k * DERIVED_BLOCK + s];
            dm_outputs(p, v, o);
            for (int j = 0; j < DM_OUTPUT_WIDTH; j++) res[j * DERIVED_BLOCK + s] = o[j];
        }
        for (int s = 0; s < m; s++)
            for (int j = 0; j < DM_OUTPUT_WIDTH; j++)
                out[(size_t)(b + s) * DM_OUTPUT_WIDTH + j] = (double)res[j * DERIVED_BLOCK + s];
    }
#else
    (void)params;
    (void)n;
    (void)vox;
    (void)out;
#endif
}
