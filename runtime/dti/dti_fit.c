/* Linear diffusion-tensor fit: OLS, then WLS weighted by the OLS-predicted signal squared; or
 * dwi2tensor's iterated WLS (a fit weighted by the measured signal, then reweightings by the
 * predicted one).  The 7x7 normal equations are solved by Cholesky on an equilibrated design
 * (every column scaled to unit norm), so that the b ~ 1000 columns and the log S0 column have
 * the same size and the factorisation stays well conditioned. */
#include "dti/dti_fit.h"

#include "util/linalg.h"
#include "util/error.h"
#include "vecmath/vecmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The per-voxel fit is compiled three times on x86-64 with GCC, for AVX-512, AVX2 and any
 * processor, and the loader picks one (an ifunc): the weighted sums run on up to four times the
 * lanes.  No copy may contract a product and a sum into a fused multiply-add (AVX-512 has
 * them, and GCC contracts by default), whatever the build's flags: so every copy, and every
 * build (a sanitised one too), gives the same bits.  Its helpers are inlined into each copy.
 * The logarithms of the signal and the exponentials of the weights, two a measurement and most
 * of a voxel's time, are vecmath's (the same in every copy). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#define VOXEL_FIT __attribute__((target_clones("avx512f", "avx2", "default")))
#define VOXEL_STEP static inline __attribute__((always_inline))
#else
#define VOXEL_FIT
#define VOXEL_STEP static
#endif

#define NB 7                   /* unknowns: log S0, Dxx, Dyy, Dzz, Dxy, Dxz, Dyz */
#define NT (NB * (NB + 1) / 2) /* entries of the lower triangle of XᵀWX */

int dm_dti_protocol_init(dm_dti_protocol *p, int M, const double *b, const double *g)
{
    memset(p, 0, sizeof *p);
    if (M < NB)
        return dm_set_error("a tensor needs at least 7 measurements, the protocol has %d", M);
    p->M = M;
    p->weighted = 1;
    p->iterations = -1;
    p->min_signal = DM_DTI_MIN_SIGNAL;
    p->design = malloc((size_t)M * NB * sizeof *p->design);
    if (!p->design) return dm_set_error("out of memory for the tensor design matrix");
    double largest = 0;
    for (int j = 0; j < M; j++) {
        const double *v = g + 3 * j;
        double *x = p->design + (size_t)j * NB;
        x[0] = 1;
        x[1] = -b[j] * v[0] * v[0];
        x[2] = -b[j] * v[1] * v[1];
        x[3] = -b[j] * v[2] * v[2];
        x[4] = -2 * b[j] * v[0] * v[1];
        x[5] = -2 * b[j] * v[0] * v[2];
        x[6] = -2 * b[j] * v[1] * v[2];
        for (int k = 1; k < NB; k++) largest = fmax(largest, fabs(x[k]));
    }
    /* DIPY's floor on the eigenvalues: a small positive diffusivity on the scale of 1/b. */
    p->min_diffusivity = largest > 0 ? 1e-6 / largest : 0;
    for (int k = 0; k < NB; k++) {
        double s = 0;
        for (int j = 0; j < M; j++) s += p->design[j * NB + k] * p->design[j * NB + k];
        p->scale[k] = sqrt(s);
        if (!(p->scale[k] > 0)) {
            dm_dti_protocol_free(p);
            return dm_set_error("the protocol cannot determine a tensor: every direction has a "
                                "zero %s component or b = 0",
                                k <= 3 ? (k == 1   ? "x"
                                          : k == 2 ? "y"
                                                   : "z")
                                       : "cross");
        }
        for (int j = 0; j < M; j++) p->design[j * NB + k] /= p->scale[k];
    }
    for (int r = 0; r < NB; r++)
        for (int c = 0; c <= r; c++) {
            double s = 0;
            for (int j = 0; j < M; j++) s += p->design[j * NB + r] * p->design[j * NB + c];
            p->ols[r * NB + c] = s;
        }
    p->outer = malloc((size_t)M * NT * sizeof *p->outer);
    p->columns = malloc((size_t)M * NB * sizeof *p->columns);
    if (!p->outer || !p->columns) {
        dm_dti_protocol_free(p);
        return dm_set_error("out of memory for the tensor design matrix");
    }
    for (int j = 0; j < M; j++)
        for (int k = 0; k < NB; k++) p->columns[(size_t)k * M + j] = p->design[(size_t)j * NB + k];
    for (int j = 0; j < M; j++) {
        const double *x = p->design + (size_t)j * NB;
        double *xx = p->outer + (size_t)j * NT;
        for (int a = 0, t = 0; a < NB; a++)
            for (int c = 0; c <= a; c++) xx[t++] = x[a] * x[c];
    }
    /* The scaled XᵀX has a unit diagonal: a pivot below 1e-10 means condition ~1e10. */
    if (dm_cholesky(p->ols, NB, 1e-10) != 0) {
        dm_dti_protocol_free(p);
        return dm_set_error("the protocol cannot determine a tensor: it needs b = 0 (or a second "
                            "shell) and at least 6 non-coplanar, non-collinear directions");
    }
    return 0;
}

void dm_dti_protocol_free(dm_dti_protocol *p)
{
    free(p->design);
    free(p->outer);
    free(p->columns);
    p->design = p->outer = p->columns = NULL;
}

void dm_dti_scalars(const double lambda[3], double *FA, double *MD, double *MO)
{
    double l1 = lambda[0], l2 = lambda[1], l3 = lambda[2];
    double md = (l1 + l2 + l3) / 3, sq = l1 * l1 + l2 * l2 + l3 * l3;
    double e1 = l1 - md, e2 = l2 - md, e3 = l3 - md, dev = e1 * e1 + e2 * e2 + e3 * e3;
    *MD = md;
    *FA = sq > 0 ? sqrt(1.5 * dev / sq) : 0;
    /* mode = 3√6 det(Ã / |Ã|), Ã the deviatoric tensor: 3√6 e1 e2 e3 / |e|³ in eigenvalues.
     * Undefined for an isotropic tensor (Ã = 0): reported as 0, as is a deviatoric part at
     * the level of rounding errors (FA below ~1e-6), where the mode would be noise. */
    double mo = 0;
    if (dev > 1e-12 * sq) mo = 3 * sqrt(6.0) * e1 * e2 * e3 / (dev * sqrt(dev));
    *MO = fmax(-1, fmin(1, mo));
}

/* The unscaled coefficients beta (log S0, Dxx, Dyy, Dzz, Dxy, Dxz, Dyz) into the result. */
VOXEL_STEP void finish(const dm_dti_protocol *p, const double *scaled, dm_dti_result *r)
{
    double beta[NB];
    for (int k = 0; k < NB; k++) beta[k] = scaled[k] / p->scale[k];
    r->S0 = exp(beta[0]);
    /* FSL's order: xx, xy, xz, yy, yz, zz */
    r->tensor[0] = beta[1];
    r->tensor[1] = beta[4];
    r->tensor[2] = beta[5];
    r->tensor[3] = beta[2];
    r->tensor[4] = beta[6];
    r->tensor[5] = beta[3];
    const double a[3][3] = {
        {beta[1], beta[4], beta[5]}, {beta[4], beta[2], beta[6]}, {beta[5], beta[6], beta[3]}};
    dm_eig3_sym(a, r->lambda, r->vec);
    for (int k = 0; k < 3; k++) r->lambda[k] = fmax(r->lambda[k], p->min_diffusivity);
    dm_dti_scalars(r->lambda, &r->FA, &r->MD, &r->MO);
}

/* eta = X beta: the log signal the scaled coefficients predict, each entry summed over the
 * columns in order; from the design by columns, so that a vector's lanes are measurements. */
VOXEL_STEP void predict_log(const dm_dti_protocol *p, const double *beta, double *eta)
{
    const int M = p->M;
    const double *col = p->columns;
    for (int j = 0; j < M; j++) {
        double s = 0;
        for (int k = 0; k < NB; k++) s += col[(size_t)k * M + j] * beta[k];
        eta[j] = s;
    }
}

/* The least squares of log signals y weighted by exp(eta)² (a signal squared), into beta.
 * -1 when the weighted system is singular (beta unchanged). */
VOXEL_STEP int weighted_solve(const dm_dti_protocol *p, const double *y, const double *eta,
                              double *beta)
{
    const int M = p->M;
    /* The weights are taken relative to the largest one (the solution does not change, and
     * exp cannot overflow on a wild estimate). */
    double top = -INFINITY;
    for (int j = 0; j < M; j++)
        if (eta[j] > top) top = eta[j];
    double sum[NT] = {0}, rhs[NB] = {0};
    enum { BLOCK = 64 };
    double weight[BLOCK];
    for (int b = 0; b < M; b += BLOCK) {
        const int n = M - b < BLOCK ? M - b : BLOCK;
        for (int i = 0; i < n; i++) weight[i] = 2 * (eta[b + i] - top);
        dm_vec_exp(weight, n, weight);
        for (int i = 0; i < n; i++) {
            const int j = b + i;
            const double w = weight[i], wy = w * y[j];
            const double *x = p->design + (size_t)j * NB, *xx = p->outer + (size_t)j * NT;
            for (int t = 0; t < NT; t++) sum[t] += w * xx[t];
            for (int a = 0; a < NB; a++) rhs[a] += wy * x[a];
        }
    }
    double A[NB * NB] = {0};
    for (int a = 0, t = 0; a < NB; a++)
        for (int c = 0; c <= a; c++) A[a * NB + c] = sum[t++];
    if (dm_cholesky(A, NB, 1e-13) != 0) return -1;
    dm_cholesky_solve(A, NB, rhs);
    memcpy(beta, rhs, sizeof rhs);
    return 0;
}

/* OLS: (XᵀX) β = Xᵀy with the factor computed once for the protocol. */
VOXEL_STEP void ols_solve(const dm_dti_protocol *p, const double *y, double *beta)
{
    double s[NB] = {0}; /* the sums in registers (beta could alias the design, for all the
                         * compiler knows) */
    for (int j = 0; j < p->M; j++) {
        const double *x = p->design + (size_t)j * NB;
        for (int k = 0; k < NB; k++) s[k] += x[k] * y[j];
    }
    memcpy(beta, s, sizeof s);
    dm_cholesky_solve(p->ols, NB, beta);
}

/* dwi2tensor's fit: the first step weighted by the measured (floored) signal squared, or OLS,
 * then p->iterations steps each weighted by the previous step's predicted signal squared.  A
 * singular step keeps the estimate before it. */
VOXEL_STEP int fit_iterated(const dm_dti_protocol *p, const double *y, double *eta,
                            dm_dti_result *r)
{
    double beta[NB];
    int status = DM_DTI_FITTED;
    if (!p->weighted || weighted_solve(p, y, y, beta) != 0) {
        ols_solve(p, y, beta);
        status = p->weighted ? DM_DTI_OLS_ONLY : DM_DTI_FITTED;
    }
    for (int it = 0; it < p->iterations && status == DM_DTI_FITTED; it++) {
        predict_log(p, beta, eta);
        if (weighted_solve(p, y, eta, beta) != 0) status = DM_DTI_OLS_ONLY;
    }
    finish(p, beta, r);
    return status;
}

VOXEL_FIT int dm_dti_fit_voxel(const dm_dti_protocol *p, const double *signal, double *work,
                               dm_dti_result *r)
{
    const int M = p->M;
    memset(r, 0, sizeof *r);
    int nonzero = 0;
    for (int j = 0; j < M; j++) {
        if (!isfinite(signal[j])) return DM_DTI_SKIPPED_NONFINITE;
        nonzero |= signal[j] != 0;
    }
    if (!nonzero) return DM_DTI_SKIPPED_ZERO;

    double lowest = p->min_signal;
    if (p->min_signal_relative > 0) {
        /* dwi2tensor's floor, relative to the voxel; the absolute one where it is not positive */
        double largest = signal[0];
        for (int j = 1; j < M; j++) largest = fmax(largest, signal[j]);
        if (p->min_signal_relative * largest > 0) lowest = p->min_signal_relative * largest;
    }
    double *y = work, *eta = work + M;
    for (int j = 0; j < M; j++) y[j] = signal[j] > lowest ? signal[j] : lowest;
    dm_vec_log(y, M, y);
    if (p->iterations >= 0) return fit_iterated(p, y, eta, r);

    double beta[NB];
    ols_solve(p, y, beta);
    if (!p->weighted) {
        finish(p, beta, r);
        return DM_DTI_FITTED;
    }
    /* WLS: weights Ŝ² = exp(2 Xβ_OLS). */
    predict_log(p, beta, eta);
    double wls[NB];
    if (weighted_solve(p, y, eta, wls) != 0) {
        finish(p, beta, r);
        return DM_DTI_OLS_ONLY;
    }
    finish(p, wls, r);
    return DM_DTI_FITTED;
}

double dm_dti_predict(const dm_dti_protocol *p, const dm_dti_result *r, int j)
{
    const double *x = p->design + (size_t)j * NB, *D = r->tensor;
    /* the unscaled diffusion columns times the tensor: -b gᵀDg */
    double q = x[1] * p->scale[1] * D[0] + x[2] * p->scale[2] * D[3] + x[3] * p->scale[3] * D[5] +
               x[4] * p->scale[4] * D[1] + x[5] * p->scale[5] * D[2] + x[6] * p->scale[6] * D[4];
    return r->S0 * exp(q);
}
