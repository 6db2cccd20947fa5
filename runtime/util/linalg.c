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
