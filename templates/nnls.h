/* Non-negative least squares, Lawson and Hanson's active-set algorithm (Solving Least Squares
 * Problems, 1974, ch. 23): min ||A x - y|| subject to x >= 0, for a dense A of M rows and N
 * columns stored row by row (A[m * N + j]).
 *
 * It works on the normal equations: A^T y once, and the Gram column A^T a_j of an atom only
 * when j enters the passive set (the atoms with x_j > 0), so a voxel whose solution holds k
 * atoms costs about (k + 1) M N multiply-adds, never the whole N x N Gram matrix.  The
 * passive set's k x k system is solved by Cholesky; an atom whose column is (numerically) a
 * combination of the passive ones fails the pivot test and is left out for the rest of the
 * solve, which ends the degenerate cycles of nearly parallel atoms (neighbouring grid points).
 *
 * Plain C over double, without the model: the caller gives the workspace (dm_nnls_work_size
 * doubles). */
#ifndef DIMOC_NNLS_H
#define DIMOC_NNLS_H

/* Doubles of workspace for N atoms. */
static size_t dm_nnls_work_size(int N)
{
    return (size_t)N * N + (size_t)N * N + 6 * (size_t)N;
}

/* Cholesky solve of the passive set's normal equations G_PP z = c_P.  gram: N x N, column j
 * filled for every j in the set.  chol: k x k scratch.  0, or -1 when a pivot falls below
 * 1e-12 of its diagonal entry (the set is degenerate). */
static int dm_nnls_solve_passive(const double *gram, const double *c, const int *set, int k, int N,
                                 double *chol, double *z)
{
    for (int i = 0; i < k; i++)
        for (int j = 0; j <= i; j++) {
            double s = gram[(size_t)set[j] * N + set[i]];
            for (int l = 0; l < j; l++) s -= chol[i * k + l] * chol[j * k + l];
            if (i == j) {
                double d = gram[(size_t)set[i] * N + set[i]];
                if (!(s > 1e-12 * d)) return -1;
                chol[i * k + i] = sqrt(s);
            } else {
                chol[i * k + j] = s / chol[j * k + j];
            }
        }
    for (int i = 0; i < k; i++) { /* L u = c, then L^T z = u */
        double s = c[set[i]];
        for (int l = 0; l < i; l++) s -= chol[i * k + l] * z[l];
        z[i] = s / chol[i * k + i];
    }
    for (int i = k - 1; i >= 0; i--) {
        double s = z[i];
        for (int l = i + 1; l < k; l++) s -= chol[l * k + i] * z[l];
        z[i] = s / chol[i * k + i];
    }
    return 0;
}

/* Gram column j: gram[j * N + i] = sum_m A[m, i] A[m, j]. */
static void dm_nnls_gram_column(const double *A, int M, int N, int j, double *gram)
{
    double *col = gram + (size_t)j * N;
    for (int i = 0; i < N; i++) col[i] = 0;
    for (int m = 0; m < M; m++) {
        const double *row = A + (size_t)m * N;
        double a = row[j];
        if (a == 0) continue;
        for (int i = 0; i < N; i++) col[i] += a * row[i];
    }
}

/* x (N) receives the solution; returns the sum of squared residuals ||A x - y||^2.  With l1
 * and l2 (N each, or NULL) it solves the non-negative elastic net instead,
 * min 1/2 ||A x - y||^2 + sum_j (l1_j x_j + l2_j x_j^2 / 2) over x >= 0: the same active-set
 * algorithm, on A^T y - l1 and A^T A + diag(l2). */
static double dm_nnls(const double *A, const double *y, int M, int N, const double *l1,
                      const double *l2, double *x, double *work)
{
    double *gram = work;                 /* N x N, columns filled on demand */
    double *chol = gram + (size_t)N * N; /* up to N x N */
    double *aty = chol + (size_t)N * N;  /* A^T y */
    double *w = aty + N;                 /* the gradient A^T (y - A x) */
    double *z = w + N;                   /* the passive set's unconstrained solution */
    int *set = (int *)(z + N);           /* passive atoms, in entry order (2N ints) */
    unsigned char *state = (unsigned char *)(set + 2 * N); /* 0 free, 1 passive, 2 left out */
    for (int j = 0; j < N; j++) aty[j] = 0, x[j] = 0, state[j] = 0;
    for (int m = 0; m < M; m++) {
        const double *row = A + (size_t)m * N;
        for (int j = 0; j < N; j++) aty[j] += y[m] * row[j];
    }
    double amax = 0;
    for (int j = 0; j < N; j++) amax = fmax(amax, fabs(aty[j]));
    if (l1)
        for (int j = 0; j < N; j++) aty[j] -= l1[j];
    double tol = 1e-11 * amax;
    int k = 0;
    for (int j = 0; j < N; j++) w[j] = aty[j];
    for (int outer = 0; outer < 3 * N; outer++) {
        int best = -1;
        for (int j = 0; j < N; j++)
            if (state[j] == 0 && w[j] > tol && (best < 0 || w[j] > w[best])) best = j;
        if (best < 0) break;
        dm_nnls_gram_column(A, M, N, best, gram);
        if (l2) gram[(size_t)best * N + best] += l2[best];
        set[k++] = best;
        state[best] = 1;
        for (;;) {
            if (dm_nnls_solve_passive(gram, aty, set, k, N, chol, z) != 0) {
                /* The newcomer adds nothing independent: leave it out (x unchanged). */
                state[set[--k]] = 2;
                break;
            }
            double alpha = 1;
            int first = -1; /* the passive weight that reaches 0 first */
            for (int i = 0; i < k; i++)
                if (z[i] <= 0) {
                    double xi = x[set[i]];
                    double a = xi / (xi - z[i]);
                    if (first < 0 || a < alpha) alpha = a, first = i;
                }
            if (first < 0) {
                for (int i = 0; i < k; i++) x[set[i]] = z[i];
                break;
            }
            /* Move toward z until that weight reaches 0; drop it and any other at 0.  The
             * newcomer dropped at once (alpha 0) would be picked again: it is left out. */
            int kept = 0;
            for (int i = 0; i < k; i++) {
                int j = set[i];
                x[j] += alpha * (z[i] - x[j]);
                if (i != first && x[j] > 0) {
                    set[kept++] = j;
                } else {
                    x[j] = 0;
                    state[j] = j == best && alpha == 0 ? 2 : 0;
                }
            }
            k = kept;
            if (k == 0) break;
        }
        for (int j = 0; j < N; j++) { /* w = A^T y - G_P x_P */
            double s = aty[j];
            for (int i = 0; i < k; i++) s -= gram[(size_t)set[i] * N + j] * x[set[i]];
            w[j] = s;
        }
    }
    double sse = 0;
    for (int m = 0; m < M; m++) {
        double r = y[m];
        for (int i = 0; i < k; i++) r -= A[(size_t)m * N + set[i]] * x[set[i]];
        sse += r * r;
    }
    return sse;
}

#endif
