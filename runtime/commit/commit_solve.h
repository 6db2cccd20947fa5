/* The non-negative least-squares fit of COMMIT, min_x 0.5 ||A x - y||^2 subject to x >= 0, by
 * FISTA (Beck & Teboulle 2009) with COMMIT's schedule: the first step 1.9 / L with L estimated
 * from the first gradient, backtracking by 0.9 when the quadratic bound fails, and its stopping
 * tests (relative change of the objective below tol_fun, relative change of x below tol_x, or
 * max_iter iterations).  The products run wherever the backend runs them (host threads or a
 * GPU); the vectors' own arithmetic is here, on the host, with OpenMP. */
#ifndef DIMOC_COMMIT_SOLVE_H
#define DIMOC_COMMIT_SOLVE_H

/* y = A x and g = A^T r; 0 or -1 (with dm_set_error). */
typedef struct dm_commit_products {
    void *ctx;
    long nrows, ncols;
    int (*ax)(void *ctx, const double *x, double *y);
    int (*aty)(void *ctx, const double *r, double *g);
} dm_commit_products;

typedef struct dm_commit_fista_options {
    double tol_fun, tol_x; /* COMMIT's defaults: 1e-4 and 1e-6 */
    int max_iter;          /* 1000 */
    void (*progress)(void *arg, int iter, double objective);
    void *progress_arg;
} dm_commit_fista_options;

typedef struct dm_commit_fista_result {
    int iterations;
    double objective; /* 0.5 ||A x - y||^2 at the end */
    double rel_objective, rel_x;
    const char *stopped; /* which test stopped it */
} dm_commit_fista_result;

/* x (ncols, in: the start, usually 0; out: the solution).  -1 with the error set when a
 * product fails or on SIGINT/SIGTERM (dm_stop_error). */
int dm_commit_fista(const dm_commit_products *P, const double *y, const dm_commit_fista_options *o,
                    double *x, dm_commit_fista_result *r);

#endif
