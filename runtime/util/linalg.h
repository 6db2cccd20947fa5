/* Small dense linear algebra: the eigen-decomposition of a symmetric 3x3 matrix (diffusion
 * tensors, mean dyadic tensors) and the Cholesky factorisation of small symmetric positive
 * definite systems (tensor fits, CSD's matrices, response fits).  Matrices are row-major. */
#ifndef DIMOC_LINALG_H
#define DIMOC_LINALG_H

/* Cyclic Jacobi rotations on a (only the symmetric part is used: a[i][j] for i <= j).
 * lambda: eigenvalues in descending order; vec[k]: the unit eigenvector of lambda[k], its sign
 * chosen so that its largest-magnitude component is positive (a deterministic choice, since
 * v and -v are the same axis). */
void dm_eig3_sym(const double a[3][3], double lambda[3], double vec[3][3]);

/* The largest eigenvalue of a (its symmetric part, as dm_eig3_sym) and its unit eigenvector,
 * with dm_eig3_sym's sign: in closed form (the characteristic cubic, then a cross product of
 * two rows of a - lambda I, its eigenvalue refined by a Rayleigh quotient), a few times faster
 * than the Jacobi rotations, which it falls back to where the two largest eigenvalues nearly
 * coincide. */
void dm_eig3_sym_principal(const double a[3][3], double *lambda, double vec[3]);

/* In-place Cholesky factorisation A = L L' of a symmetric n x n matrix: the lower triangle is
 * read and overwritten by L, the strict upper triangle set to 0.  -1 (A partly overwritten)
 * when a pivot falls below rel_tol times its original diagonal entry (rel_tol 0: when it is
 * not positive). */
int dm_cholesky(double *A, int n, double rel_tol);
/* Solves L L' x = b in place (b becomes x), L from dm_cholesky. */
void dm_cholesky_solve(const double *L, int n, double *b);

#endif
