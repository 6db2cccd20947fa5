/* The solver's backend on host threads: its vectors in memory, the operator's products
 * (templates/commit/commit_ops.h) and the vector operations of commit_solve.h with OpenMP. */
#ifndef DIMOC_COMMIT_CPU_H
#define DIMOC_COMMIT_CPU_H

#include "commit/commit_operator.h"
#include "commit/commit_solve.h"

typedef struct dm_commit_cpu dm_commit_cpu;

/* y: the measured rows (A->nrows), kept by pointer.  NULL with the error set (out of memory). */
dm_commit_cpu *dm_commit_cpu_open(const dm_commit_operator *A, const double *y, int threads,
                                  dm_commit_backend *B);
void dm_commit_cpu_close(dm_commit_cpu *c);
/* A x of the solver's x, as dm_commit_cpu_ax computes it, when the last residual was taken there
 * (so after dm_commit_fista: its last product); NULL otherwise.  Valid until the next call. */
const double *dm_commit_cpu_fitted(const dm_commit_cpu *c);
/* yhat = A x and g = A^T r on host threads (the preconditioned problem's; runs: room for a
 * double per run and IC response, A->nruns x A->op.nic). */
void dm_commit_cpu_ax(const dm_commit_operator *A, const double *x, double *yhat, double *runs,
                      int threads);
void dm_commit_cpu_aty(const dm_commit_operator *A, const double *r, double *g, double *runs,
                       int threads);

#endif
