/* Eigen-decomposition of a symmetric 3x3 matrix (diffusion tensors, mean dyadic tensors). */
#ifndef DIMOC_EIG3_H
#define DIMOC_EIG3_H

/* Cyclic Jacobi rotations on a (only the symmetric part is used: a[i][j] for i <= j).
 * lambda: eigenvalues in descending order; vec[k]: the unit eigenvector of lambda[k], its sign
 * chosen so that its largest-magnitude component is positive (a deterministic choice, since
 * v and -v are the same axis). */
void dm_eig3_sym(const double a[3][3], double lambda[3], double vec[3][3]);

#endif
