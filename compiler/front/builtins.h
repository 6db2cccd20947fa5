/* The table of built-in functions of the model language.
 *
 * The front end uses it to resolve calls and check their arguments; the back end keys its
 * derivative rules and emission on dm_builtin_id.  To add a function: append an id before
 * DM_FN_COUNT (never renumber existing ones), append its row to dm_builtins[] in builtins.c
 * (rows are indexed by id), give the back end its rule, and document it in
 * docs/model-language.md. */
#ifndef DIMOC_BUILTINS_H
#define DIMOC_BUILTINS_H

#include "ast.h"

typedef enum dm_builtin_id {
    DM_FN_EXP,
    DM_FN_LOG,
    DM_FN_SQRT,
    DM_FN_SIN,
    DM_FN_COS,
    DM_FN_TAN,
    DM_FN_ASIN,
    DM_FN_ACOS,
    DM_FN_ATAN,
    DM_FN_ATAN2, /* atan2(y, x) */
    DM_FN_SINH,
    DM_FN_COSH,
    DM_FN_TANH,
    DM_FN_ABS,
    DM_FN_POW, /* pow(x, y) */
    DM_FN_MIN,
    DM_FN_MAX,
    DM_FN_ERF,
    DM_FN_DAWSON, /* Dawson's integral F(x) = exp(-x^2) int_0^x exp(t^2) dt */
    DM_FN_LGAMMA,
    DM_FN_LOG_I0,             /* log of the modified Bessel function I0 */
    DM_FN_LEGENDRE,           /* legendre(n, x): Legendre polynomial P_n(x), n a constant integer */
    DM_FN_DOT,                /* dot(u, v): vec3 x vec3 -> scalar */
    DM_FN_CROSS,              /* cross(u, v): vec3 x vec3 -> vec3 */
    DM_FN_NORM,               /* norm(v): Euclidean length */
    DM_FN_DIR,                /* dir(theta, phi) = (sin th cos ph, sin th sin ph, cos th) */
    DM_FN_VEC,                /* vec(x, y, z) */
    DM_FN_LOG1P,              /* log1p(x) = log(1 + x), accurate for small x */
    DM_FN_WATSON_SH,          /* watson_sh(l, kappa): Watson coefficient, mean of P_l(n.v) */
    DM_FN_STICK_SH,           /* stick_sh(l, x): integral_-1^1 exp(-x u^2) P_l(u) du */
    DM_FN_WATSON_STICK,       /* watson_stick(x, t, kappa): Watson-averaged stick, l <= 12 */
    DM_FN_LOG_HYP1F1_BINGHAM, /* log 1F1(1/2; 3/2; diag(a1, a2, a3)), saddle point */
    DM_FN_BINGHAM_MOMENTS,    /* bingham_moments(a1, a2, a3) -> vec3 of <n_i^2> */
    DM_FN_BINGHAM_STICK,      /* bingham_stick(x, q, k1, k2): Bingham-averaged stick */
    DM_FN_BESSEL_J0,          /* Bessel function of the first kind J0(x) */
    DM_FN_BESSEL_J1,          /* Bessel function of the first kind J1(x) */
    DM_FN_BESSEL_J1P_ROOT,    /* bessel_j1p_root(n): n-th positive root of J1'(x) */
    DM_FN_BESSEL_SJ1P_ROOT,   /* bessel_sj1p_root(n): n-th positive root of j1'(x), spherical */
    DM_FN_MAT,                /* mat(a11, a12, ..., a33): a 3x3 matrix, row by row */
    DM_FN_SYM,                /* sym(dxx, dxy, dxz, dyy, dyz, dzz): a symmetric matrix */
    DM_FN_DIAG,               /* diag(a, b, c) */
    DM_FN_OUTER,              /* outer(u, v) = u v^T */
    DM_FN_MUL,                /* mul(M, N): matrix product */
    DM_FN_MV,                 /* mv(M, v) = M v */
    DM_FN_QUAD,               /* quad(v, M) = v^T M v */
    DM_FN_TRANSPOSE,          /* transpose(M) */
    DM_FN_TRACE,              /* trace(M) */
    DM_FN_DET,                /* det(M) */
    DM_FN_ROTATION,           /* rotation(theta, phi, psi): third column dir(theta, phi) */
    DM_FN_COUNT
} dm_builtin_id;

#define DM_BUILTIN_MAX_ARGS 9

typedef struct dm_builtin {
    const char *name;
    dm_builtin_id id;
    int nargs;
    dm_type arg_types[DM_BUILTIN_MAX_ARGS]; /* DM_T_SCALAR, DM_T_VEC3 or DM_T_MAT3 */
    dm_type result;                         /* DM_T_SCALAR, DM_T_VEC3 or DM_T_MAT3 */
    /* Bit k set: argument k must be a constant integer in [int_min, int_max]
     * (the checker replaces that argument by a DM_E_NUM node holding the value). */
    unsigned const_int_args;
    int int_min, int_max;
    /* The C math function that evaluates it on constants (bounds, init values), or NULL
     * when the function cannot be used in a constant expression. */
    double (*eval1)(double);
    double (*eval2)(double, double);
    const char *summary; /* one line for documentation and `dimoc check` */
} dm_builtin;

extern const dm_builtin dm_builtins[DM_FN_COUNT];

/* The built-in called NAME, or NULL. */
const dm_builtin *dm_builtin_find(const char *name);

/* The candidate nearest to NAME by edit distance, or NULL when none is within
 * min(2, max(1, strlen(NAME) / 2)) edits.  Candidates are a NULL-terminated list. */
const char *dm_nearest_name(const char *name, const char *const *candidates);

/* The built-in nearest to NAME, as above, or NULL. */
const char *dm_builtin_nearest(const char *name);

#endif
