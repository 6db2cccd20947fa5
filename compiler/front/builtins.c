/* The built-in function table (see builtins.h) and nearest-name suggestions. */
#include "builtins.h"

#include <math.h>
#include <string.h>

/* The Bessel functions and their roots are evaluated on constants by the math library of the
 * generated code itself (in double), so that a folded value is the value the model computes. */
typedef double real;
#define DM_FN static inline __attribute__((unused))
#include "maths/mathlib.h"

static double bessel_j0(double x)
{
    return dm_bessel_j0(x);
}
static double bessel_j1(double x)
{
    return dm_bessel_j1(x);
}
static double bessel_j1p_root(double n)
{
    return dm_bessel_j1p_root((int)n);
}
static double bessel_sj1p_root(double n)
{
    return dm_bessel_sj1p_root((int)n);
}

#define S DM_T_SCALAR
#define V DM_T_VEC3
#define M DM_T_MAT3

/* Rows are in dm_builtin_id order; builtins_table_ok() in the unit tests checks it. */
const dm_builtin dm_builtins[DM_FN_COUNT] = {
    {"exp", DM_FN_EXP, 1, {S}, S, 0, 0, 0, exp, NULL, "exponential"},
    {"log", DM_FN_LOG, 1, {S}, S, 0, 0, 0, log, NULL, "natural logarithm"},
    {"sqrt", DM_FN_SQRT, 1, {S}, S, 0, 0, 0, sqrt, NULL, "square root"},
    {"sin", DM_FN_SIN, 1, {S}, S, 0, 0, 0, sin, NULL, "sine (radians)"},
    {"cos", DM_FN_COS, 1, {S}, S, 0, 0, 0, cos, NULL, "cosine (radians)"},
    {"tan", DM_FN_TAN, 1, {S}, S, 0, 0, 0, tan, NULL, "tangent (radians)"},
    {"asin", DM_FN_ASIN, 1, {S}, S, 0, 0, 0, asin, NULL, "arc sine (radians)"},
    {"acos", DM_FN_ACOS, 1, {S}, S, 0, 0, 0, acos, NULL, "arc cosine (radians)"},
    {"atan", DM_FN_ATAN, 1, {S}, S, 0, 0, 0, atan, NULL, "arc tangent (radians)"},
    {"atan2",
     DM_FN_ATAN2,
     2,
     {S, S},
     S,
     0,
     0,
     0,
     NULL,
     atan2,
     "atan2(y, x): angle of the point (x, y), in (-pi, pi]"},
    {"sinh", DM_FN_SINH, 1, {S}, S, 0, 0, 0, sinh, NULL, "hyperbolic sine"},
    {"cosh", DM_FN_COSH, 1, {S}, S, 0, 0, 0, cosh, NULL, "hyperbolic cosine"},
    {"tanh", DM_FN_TANH, 1, {S}, S, 0, 0, 0, tanh, NULL, "hyperbolic tangent"},
    {"abs", DM_FN_ABS, 1, {S}, S, 0, 0, 0, fabs, NULL, "absolute value"},
    {"pow", DM_FN_POW, 2, {S, S}, S, 0, 0, 0, NULL, pow, "pow(x, y) = x^y"},
    {"min", DM_FN_MIN, 2, {S, S}, S, 0, 0, 0, NULL, fmin, "smaller of two values"},
    {"max", DM_FN_MAX, 2, {S, S}, S, 0, 0, 0, NULL, fmax, "larger of two values"},
    {"erf", DM_FN_ERF, 1, {S}, S, 0, 0, 0, erf, NULL, "error function"},
    {"dawson",
     DM_FN_DAWSON,
     1,
     {S},
     S,
     0,
     0,
     0,
     NULL,
     NULL,
     "Dawson's integral exp(-x^2) * integral from 0 to x of exp(t^2) dt"},
    {"lgamma",
     DM_FN_LGAMMA,
     1,
     {S},
     S,
     0,
     0,
     0,
     lgamma,
     NULL,
     "log of the absolute value of the gamma function"},
    {"log_i0",
     DM_FN_LOG_I0,
     1,
     {S},
     S,
     0,
     0,
     0,
     NULL,
     NULL,
     "log of the modified Bessel function of the first kind of order 0"},
    {"legendre",
     DM_FN_LEGENDRE,
     2,
     {S, S},
     S,
     1u << 0,
     0,
     20,
     NULL,
     NULL,
     "legendre(n, x): Legendre polynomial P_n(x), n a constant integer 0..20"},
    {"dot", DM_FN_DOT, 2, {V, V}, S, 0, 0, 0, NULL, NULL, "dot product of two 3-vectors"},
    {"cross", DM_FN_CROSS, 2, {V, V}, V, 0, 0, 0, NULL, NULL, "cross product of two 3-vectors"},
    {"norm", DM_FN_NORM, 1, {V}, S, 0, 0, 0, NULL, NULL, "Euclidean length of a 3-vector"},
    {"dir",
     DM_FN_DIR,
     2,
     {S, S},
     V,
     0,
     0,
     0,
     NULL,
     NULL,
     "dir(theta, phi): unit vector (sin theta cos phi, sin theta sin phi, cos theta)"},
    {"vec", DM_FN_VEC, 3, {S, S, S}, V, 0, 0, 0, NULL, NULL, "vec(x, y, z): a 3-vector"},
    {"log1p",
     DM_FN_LOG1P,
     1,
     {S},
     S,
     0,
     0,
     0,
     log1p,
     NULL,
     "log1p(x) = log(1 + x), accurate also for small x"},
    {"watson_sh",
     DM_FN_WATSON_SH,
     2,
     {S, S},
     S,
     1u << 0,
     0,
     20,
     NULL,
     NULL,
     "watson_sh(l, kappa): mean of P_l(n.v) under a Watson distribution of concentration kappa"},
    {"stick_sh",
     DM_FN_STICK_SH,
     2,
     {S, S},
     S,
     1u << 0,
     0,
     20,
     NULL,
     NULL,
     "stick_sh(l, x): integral from -1 to 1 of exp(-x u^2) P_l(u) du"},
    {"watson_stick",
     DM_FN_WATSON_STICK,
     3,
     {S, S, S},
     S,
     0,
     0,
     0,
     NULL,
     NULL,
     "watson_stick(x, t, kappa): stick signal exp(-x (g.n)^2) averaged over a Watson "
     "distribution, t = g.v (Legendre series to degree 12, as NODDI)"},
    {"log_hyp1f1_bingham",
     DM_FN_LOG_HYP1F1_BINGHAM,
     3,
     {S, S, S},
     S,
     0,
     0,
     0,
     NULL,
     NULL,
     "log 1F1(1/2; 3/2; diag(a1, a2, a3)) by the saddle-point approximation (Kume & Wood)"},
    {"bingham_moments",
     DM_FN_BINGHAM_MOMENTS,
     3,
     {S, S, S},
     V,
     0,
     0,
     0,
     NULL,
     NULL,
     "bingham_moments(a1, a2, a3): (<n1^2>, <n2^2>, <n3^2>) under exp(sum a_i n_i^2)"},
    {"bingham_stick",
     DM_FN_BINGHAM_STICK,
     4,
     {S, V, S, S},
     S,
     0,
     0,
     0,
     NULL,
     NULL,
     "bingham_stick(x, q, k1, k2): stick signal averaged over the Bingham distribution "
     "exp(-k1 n1^2 - k2 n2^2), q the gradient in its frame"},
    {"bessel_j0",
     DM_FN_BESSEL_J0,
     1,
     {S},
     S,
     0,
     0,
     0,
     bessel_j0,
     NULL,
     "Bessel function of the first kind of order 0, J0(x)"},
    {"bessel_j1",
     DM_FN_BESSEL_J1,
     1,
     {S},
     S,
     0,
     0,
     0,
     bessel_j1,
     NULL,
     "Bessel function of the first kind of order 1, J1(x)"},
    {"bessel_j1p_root",
     DM_FN_BESSEL_J1P_ROOT,
     1,
     {S},
     S,
     1u << 0,
     1,
     1000,
     bessel_j1p_root,
     NULL,
     "bessel_j1p_root(n): the n-th positive root of J1'(x) (cylinders), n a constant integer "
     "1..1000"},
    {"bessel_sj1p_root",
     DM_FN_BESSEL_SJ1P_ROOT,
     1,
     {S},
     S,
     1u << 0,
     1,
     1000,
     bessel_sj1p_root,
     NULL,
     "bessel_sj1p_root(n): the n-th positive root of the spherical j1'(x), i.e. of "
     "x J_3/2'(x) - J_3/2(x)/2 (spheres), n a constant integer 1..1000"},
    {"mat",
     DM_FN_MAT,
     9,
     {S, S, S, S, S, S, S, S, S},
     M,
     0,
     0,
     0,
     NULL,
     NULL,
     "mat(a11, a12, a13, a21, ..., a33): a 3x3 matrix, row by row"},
    {"sym",
     DM_FN_SYM,
     6,
     {S, S, S, S, S, S},
     M,
     0,
     0,
     0,
     NULL,
     NULL,
     "sym(dxx, dxy, dxz, dyy, dyz, dzz): the symmetric 3x3 matrix of these entries"},
    {"diag", DM_FN_DIAG, 3, {S, S, S}, M, 0, 0, 0, NULL, NULL, "diag(a, b, c): a diagonal matrix"},
    {"outer", DM_FN_OUTER, 2, {V, V}, M, 0, 0, 0, NULL, NULL, "outer(u, v): the matrix u v^T"},
    {"mul", DM_FN_MUL, 2, {M, M}, M, 0, 0, 0, NULL, NULL, "mul(A, B): the matrix product A B"},
    {"mv", DM_FN_MV, 2, {M, V}, V, 0, 0, 0, NULL, NULL, "mv(A, v): the 3-vector A v"},
    {"quad", DM_FN_QUAD, 2, {V, M}, S, 0, 0, 0, NULL, NULL, "quad(v, A): the scalar v^T A v"},
    {"transpose", DM_FN_TRANSPOSE, 1, {M}, M, 0, 0, 0, NULL, NULL, "transpose of a matrix"},
    {"trace", DM_FN_TRACE, 1, {M}, S, 0, 0, 0, NULL, NULL, "trace of a matrix"},
    {"det", DM_FN_DET, 1, {M}, S, 0, 0, 0, NULL, NULL, "determinant of a matrix"},
    {"rotation",
     DM_FN_ROTATION,
     3,
     {S, S, S},
     M,
     0,
     0,
     0,
     NULL,
     NULL,
     "rotation(theta, phi, psi): the rotation whose third column is dir(theta, phi), its first "
     "two columns turned by psi about it"},
};

const dm_builtin *dm_builtin_find(const char *name)
{
    for (int i = 0; i < DM_FN_COUNT; i++)
        if (strcmp(dm_builtins[i].name, name) == 0) return &dm_builtins[i];
    return NULL;
}

/* Edit distance counting an insertion, a deletion, a substitution or a swap of two
 * neighbouring letters as one edit ("inti" is one edit from "init"); names longer than 63
 * characters are never near anything. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 1000;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *dm_nearest_name(const char *name, const char *const *candidates)
{
    int limit = (int)strlen(name) / 2;
    if (limit > 2) limit = 2;
    if (limit < 1) limit = 1;
    const char *best = NULL;
    int best_d = limit + 1;
    for (int i = 0; candidates[i]; i++) {
        int d = edit_distance(name, candidates[i]);
        if (d < best_d && strcmp(name, candidates[i]) != 0) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best;
}

const char *dm_builtin_nearest(const char *name)
{
    const char *names[DM_FN_COUNT + 1];
    for (int i = 0; i < DM_FN_COUNT; i++) names[i] = dm_builtins[i].name;
    names[DM_FN_COUNT] = NULL;
    return dm_nearest_name(name, names);
}
