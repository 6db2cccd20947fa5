/* Symmetric 3x3 eigen-decomposition by cyclic Jacobi rotations: each rotation zeroes one
 * off-diagonal pair; a few sweeps reach machine precision for 3x3 matrices. */
#include "util/linalg.h"

#include <float.h>
#include <math.h>

/* A <- J^T A J and V <- V J, with J the rotation in the (p, q) plane that zeroes A[p][q]. */
static void rotate(double A[3][3], double V[3][3], int p, int q)
{
    double apq = A[p][q];
    if (apq == 0) return;
    double theta = (A[q][q] - A[p][p]) / (2 * apq);
    /* The smaller root of t^2 + 2 theta t - 1 = 0 (rotation angle at most 45 degrees). */
    double t = 1 / (fabs(theta) + sqrt(theta * theta + 1));
    if (theta < 0) t = -t;
    if (isinf(theta)) /* apq negligible against the diagonal gap */
        t = 0;
    double c = 1 / sqrt(t * t + 1), s = t * c;
    for (int k = 0; k < 3; k++) { /* columns */
        double akp = A[k][p], akq = A[k][q];
        A[k][p] = c * akp - s * akq;
        A[k][q] = s * akp + c * akq;
    }
    for (int k = 0; k < 3; k++) { /* rows */
        double apk = A[p][k], aqk = A[q][k];
        A[p][k] = c * apk - s * aqk;
        A[q][k] = s * apk + c * aqk;
    }
    A[p][q] = A[q][p] = 0; /* exactly zero in exact arithmetic */
    for (int k = 0; k < 3; k++) {
        double vkp = V[k][p], vkq = V[k][q];
        V[k][p] = c * vkp - s * vkq;
        V[k][q] = s * vkp + c * vkq;
    }
}

void dm_eig3_sym(const double a[3][3], double lambda[3], double vec[3][3])
{
    double A[3][3], V[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) A[i][j] = i <= j ? a[i][j] : a[j][i];
    double scale = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) scale += A[i][j] * A[i][j];
    for (int sweep = 0; sweep < 50; sweep++) {
        double off = A[0][1] * A[0][1] + A[0][2] * A[0][2] + A[1][2] * A[1][2];
        if (off <= DBL_EPSILON * DBL_EPSILON * 1e-4 * scale || off == 0) break;
        rotate(A, V, 0, 1);
        rotate(A, V, 0, 2);
        rotate(A, V, 1, 2);
    }
    /* Sort descending; eigenvector k is column k of V. */
    int order[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (A[order[j]][order[j]] > A[order[i]][order[i]]) {
                int tmp = order[i];
                order[i] = order[j];
                order[j] = tmp;
            }
    for (int k = 0; k < 3; k++) {
        int c = order[k];
        lambda[k] = A[c][c];
        int big = 0;
        for (int i = 1; i < 3; i++)
            if (fabs(V[i][c]) > fabs(V[big][c])) big = i;
        double sign = V[big][c] < 0 ? -1 : 1;
        double norm = sqrt(V[0][c] * V[0][c] + V[1][c] * V[1][c] + V[2][c] * V[2][c]);
        for (int i = 0; i < 3; i++) vec[k][i] = sign * V[i][c] / norm;
    }
}

int dm_cholesky(double *A, int n, double rel_tol)
{
    for (int j = 0; j < n; j++) {
        double d = A[j * n + j], orig = d;
        for (int k = 0; k < j; k++) d -= A[j * n + k] * A[j * n + k];
        if (!(orig > 0) || !(d > rel_tol * orig)) return -1;
        d = sqrt(d);
        A[j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = A[i * n + j];
            for (int k = 0; k < j; k++) s -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = s / d;
        }
        for (int i = 0; i < j; i++) A[i * n + j] = 0.0;
    }
    return 0;
}

void dm_cholesky_solve(const double *L, int n, double *b)
{
    for (int i = 0; i < n; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++) s -= L[i * n + k] * b[k];
        b[i] = s / L[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = b[i];
        for (int k = i + 1; k < n; k++) s -= L[k * n + i] * b[k];
        b[i] = s / L[i * n + i];
    }
}

/* The largest eigenvalue of the symmetric T (both triangles filled) and its unit eigenvector, in
 * closed form: the eigenvalue by the trigonometric solution of the characteristic cubic, the
 * vector as the largest cross product of two rows of T - lambda I (each row is orthogonal to
 * it).  0 when the two largest eigenvalues are too close for that vector to be accurate. */
static int principal_closed_form(const double T[3][3], double *lambda, double axis[3])
{
    const double q = (T[0][0] + T[1][1] + T[2][2]) / 3;
    const double p1 = T[0][1] * T[0][1] + T[0][2] * T[0][2] + T[1][2] * T[1][2];
    const double d0 = T[0][0] - q, d1 = T[1][1] - q, d2 = T[2][2] - q;
    const double p2 = d0 * d0 + d1 * d1 + d2 * d2 + 2 * p1;
    if (!(p2 > 1e-24)) return 0; /* isotropic: no axis stands out */
    const double pp = sqrt(p2 / 6);
    /* B = (T - q I) / pp; r = det(B) / 2 lies in [-1, 1] up to rounding */
    const double b00 = d0 / pp, b11 = d1 / pp, b22 = d2 / pp;
    const double b01 = T[0][1] / pp, b02 = T[0][2] / pp, b12 = T[1][2] / pp;
    double r = (b00 * (b11 * b22 - b12 * b12) - b01 * (b01 * b22 - b12 * b02) +
                b02 * (b01 * b12 - b11 * b02)) / 2;
    r = r < -1 ? -1 : r > 1 ? 1 : r;
    const double phi = acos(r) / 3;
    const double l1 = q + 2 * pp * cos(phi), l3 = q + 2 * pp * cos(phi + 2.0943951023931954923);
    const double l2 = 3 * q - l1 - l3;
    /* separation of the two largest relative to the spread: below this the cross products
     * lose the digits that Jacobi keeps */
    if (!(l1 - l2 > 1e-6 * (l1 - l3))) return 0;
    /* acos near +-1 leaves l1 a few 1e-8 off where the two smallest eigenvalues are equal (the
     * usual case: samples about one axis); the Rayleigh quotient of the first vector, whose
     * error is that vector's squared, sets it right for the second */
    double lambda1 = l1;
    for (int pass = 0; pass < 2; pass++) {
        const double m[3][3] = {{T[0][0] - lambda1, T[0][1], T[0][2]},
                                {T[0][1], T[1][1] - lambda1, T[1][2]},
                                {T[0][2], T[1][2], T[2][2] - lambda1}};
        double best[3] = {0, 0, 0}, best2 = 0;
        for (int i = 0; i < 3; i++) {
            const double *u = m[i], *v = m[(i + 1) % 3];
            const double c[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                                 u[0] * v[1] - u[1] * v[0]};
            const double n2 = c[0] * c[0] + c[1] * c[1] + c[2] * c[2];
            if (n2 > best2) {
                best2 = n2;
                for (int k = 0; k < 3; k++) best[k] = c[k];
            }
        }
        if (!(best2 > 0)) return 0;
        const double inv = 1 / sqrt(best2);
        for (int k = 0; k < 3; k++) axis[k] = best[k] * inv;
        double rq = 0;
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) rq += axis[a] * T[a][b] * axis[b];
        lambda1 = rq;
    }
    *lambda = lambda1;
    return 1;
}

void dm_eig3_sym_principal(const double a[3][3], double *lambda, double vec[3])
{
    double T[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) T[i][j] = i <= j ? a[i][j] : a[j][i];
    if (!principal_closed_form((const double(*)[3])T, lambda, vec)) {
        /* Jacobi, whose axis is as good as any where the two largest eigenvalues are equal */
        double all[3], vecs[3][3];
        dm_eig3_sym(a, all, vecs);
        *lambda = all[0];
        for (int k = 0; k < 3; k++) vec[k] = vecs[0][k];
        return;
    }
    /* dm_eig3_sym's sign: the largest-magnitude component positive */
    int big = 0;
    for (int k = 1; k < 3; k++)
        if (fabs(vec[k]) > fabs(vec[big])) big = k;
    if (vec[big] < 0)
        for (int k = 0; k < 3; k++) vec[k] = -vec[k];
}
