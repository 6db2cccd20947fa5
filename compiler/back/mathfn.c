/* The functions generated code may call: their C names, arities, and values on constants
 * (the compiler folds calls whose arguments are all constant).  Folding uses the very same
 * templates/maths/mathlib.h as the generated code, built here in double precision. */
#include "lower.h"

#include <math.h>

typedef double real;
#define DM_FN static inline __attribute__((unused))
#include "maths/mathlib.h"

#define FOLD1(NAME, EXPR)                                                                          \
    static double NAME(const double *a, int order)                                                 \
    {                                                                                              \
        (void)order;                                                                               \
        return EXPR;                                                                               \
    }
FOLD1(fold_exp, exp(a[0]))
FOLD1(fold_log, log(a[0]))
FOLD1(fold_log1p, log1p(a[0]))
FOLD1(fold_sqrt, sqrt(a[0]))
FOLD1(fold_sin, sin(a[0]))
FOLD1(fold_cos, cos(a[0]))
FOLD1(fold_tan, tan(a[0]))
FOLD1(fold_asin, asin(a[0]))
FOLD1(fold_acos, acos(a[0]))
FOLD1(fold_atan, atan(a[0]))
FOLD1(fold_atan2, atan2(a[0], a[1]))
FOLD1(fold_sinh, sinh(a[0]))
FOLD1(fold_cosh, cosh(a[0]))
FOLD1(fold_tanh, tanh(a[0]))
FOLD1(fold_fabs, fabs(a[0]))
FOLD1(fold_pow, pow(a[0], a[1]))
FOLD1(fold_floor, floor(a[0]))
FOLD1(fold_erf, erf(a[0]))
FOLD1(fold_dawson, dm_dawson(a[0]))
FOLD1(fold_lgamma, lgamma(a[0]))
FOLD1(fold_log_i0, dm_log_i0(a[0]))
FOLD1(fold_i1_i0, dm_bessel_i1_i0(a[0]))
FOLD1(fold_fd_step, dm_fd_step(a[0]))
FOLD1(fold_bessel_j0, dm_bessel_j0(a[0]))
FOLD1(fold_bessel_j1, dm_bessel_j1(a[0]))
FOLD1(fold_bessel_j1_deriv, dm_bessel_j1_deriv(a[0]))
static double fold_bessel_j1p_root(const double *a, int order)
{
    (void)a;
    return dm_bessel_j1p_root(order);
}
static double fold_bessel_sj1p_root(const double *a, int order)
{
    (void)a;
    return dm_bessel_sj1p_root(order);
}
static double fold_legendre(const double *a, int order)
{
    return dm_legendre(order, a[0]);
}
static double fold_stick_sh(const double *a, int order)
{
    return dm_stick_sh(order, a[0]);
}
static double fold_watson_sh(const double *a, int order)
{
    return dm_watson_sh(order, a[0]);
}
static double fold_log_hyp1f1_dep(const double *a, int order)
{
    return dm_log_hyp1f1_dep(order, a[0], a[1]);
}
static double fold_bingham_moment(const double *a, int order)
{
    return dm_bingham_moment(order, a[0], a[1], a[2]);
}
static double fold_legendre_deriv(const double *a, int order)
{
    return dm_legendre_deriv(order, a[0]);
}

/* Indexed by dm_mathfn. */
static const dm_mathfn_info mathfns[DM_MF_COUNT] = {
    [DM_MF_EXP] = {"exp", 1, 1, fold_exp},
    [DM_MF_LOG] = {"log", 1, 1, fold_log},
    [DM_MF_LOG1P] = {"log1p", 1, 1, fold_log1p},
    [DM_MF_SQRT] = {"sqrt", 1, 1, fold_sqrt},
    [DM_MF_SIN] = {"sin", 1, 1, fold_sin},
    [DM_MF_COS] = {"cos", 1, 1, fold_cos},
    [DM_MF_TAN] = {"tan", 1, 1, fold_tan},
    [DM_MF_ASIN] = {"asin", 1, 1, fold_asin},
    [DM_MF_ACOS] = {"acos", 1, 1, fold_acos},
    [DM_MF_ATAN] = {"atan", 1, 1, fold_atan},
    [DM_MF_ATAN2] = {"atan2", 2, 1, fold_atan2},
    [DM_MF_SINH] = {"sinh", 1, 1, fold_sinh},
    [DM_MF_COSH] = {"cosh", 1, 1, fold_cosh},
    [DM_MF_TANH] = {"tanh", 1, 1, fold_tanh},
    [DM_MF_FABS] = {"fabs", 1, 0, fold_fabs},
    [DM_MF_POW] = {"pow", 2, 1, fold_pow},
    [DM_MF_FLOOR] = {"floor", 1, 0, fold_floor},
    [DM_MF_ERF] = {"erf", 1, 1, fold_erf},
    [DM_MF_DAWSON] = {"dm_dawson", 1, 1, fold_dawson},
    [DM_MF_LGAMMA] = {"lgamma", 1, 1, fold_lgamma},
    [DM_MF_LOG_I0] = {"dm_log_i0", 1, 1, fold_log_i0},
    [DM_MF_LEGENDRE] = {"dm_legendre", 1, 0, fold_legendre, 1},
    [DM_MF_STICK_SH] = {"dm_stick_sh", 1, 1, fold_stick_sh, 1},
    [DM_MF_WATSON_SH] = {"dm_watson_sh", 1, 1, fold_watson_sh, 1, "dm_watson_sh_family", 0},
    [DM_MF_LOG_HYP1F1_DEP] = {"dm_log_hyp1f1_dep", 2, 1, fold_log_hyp1f1_dep, 1,
                              "dm_log_hyp1f1_family", 3},
    [DM_MF_BINGHAM_MOMENT] = {"dm_bingham_moment", 3, 1, fold_bingham_moment, 1,
                              "dm_bingham_moment_family", 3},
    [DM_MF_BESSEL_J0] = {"dm_bessel_j0", 1, 1, fold_bessel_j0},
    [DM_MF_BESSEL_J1] = {"dm_bessel_j1", 1, 1, fold_bessel_j1},
    [DM_MF_BESSEL_J1P_ROOT] = {"dm_bessel_j1p_root", 0, 0, fold_bessel_j1p_root, 1},
    [DM_MF_BESSEL_SJ1P_ROOT] = {"dm_bessel_sj1p_root", 0, 0, fold_bessel_sj1p_root, 1},
    [DM_MF_BESSEL_J1_DERIV] = {"dm_bessel_j1_deriv", 1, 1, fold_bessel_j1_deriv},
    [DM_MF_BESSEL_I1_I0] = {"dm_bessel_i1_i0", 1, 1, fold_i1_i0},
    [DM_MF_LEGENDRE_DERIV] = {"dm_legendre_deriv", 1, 0, fold_legendre_deriv, 1},
    [DM_MF_FD_STEP] = {"dm_fd_step", 1, 0, fold_fd_step},
};

const dm_mathfn_info *dm_mathfn_get(dm_mathfn f)
{
    return f >= 0 && f < DM_MF_COUNT ? &mathfns[f] : NULL;
}
