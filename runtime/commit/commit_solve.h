/* The non-negative least-squares fit of COMMIT, min_x 0.5 ||A x - y||^2 subject to x >= 0, by
 * FISTA (Beck & Teboulle 2009), optionally with COMMIT's lasso on the streamlines' weights, with
 * COMMIT's schedule: the first step 1.9 / L with L the
 * curvature along the first gradient, (||A g|| / ||g||)^2, backtracking by 0.9 while the
 * quadratic bound fails, and its stopping tests (relative change of the objective below
 * tol_fun, relative change of x below tol_x, changes below machine precision, or max_iter).
 *
 * One implementation for every device: the loop is here, the vectors live where the backend
 * keeps them (host threads: commit_cpu.c; the GPU: commit_gpu.c), and the backend does the
 * few fused operations below on its own vectors X, XHAT, PREV, G (unknowns) and R, AG (rows). */
#ifndef DIMOC_COMMIT_SOLVE_H
#define DIMOC_COMMIT_SOLVE_H

enum { DM_COMMIT_X, DM_COMMIT_XHAT }; /* which unknowns a residual is taken at */

typedef struct dm_commit_backend {
    void *ctx;
    /* XHAT = PREV = max(0, x0) */
    int (*start)(void *ctx, const double *x0);
    /* R = A v - y (v: X or XHAT); *half_sq = 0.5 ||R||^2 */
    int (*residual)(void *ctx, int v, double *half_sq);
    /* G = A^T R */
    int (*gradient)(void *ctx);
    /* AG = A G; *agag = ||AG||^2, *gg = ||G||^2 */
    int (*curvature)(void *ctx, double *agag, double *gg);
    /* X = max(0, XHAT - step G); *lin = <X - XHAT, G>, *sq = ||X - XHAT||^2 */
    int (*prox_step)(void *ctx, double step, double *lin, double *sq);
    /* *dx2 = ||X - PREV||^2, *x2 = ||X||^2 */
    int (*change)(void *ctx, double *dx2, double *x2);
    /* XHAT = X + a (X - PREV), then PREV = X */
    int (*advance)(void *ctx, double a);
    /* X to the host */
    int (*get_x)(void *ctx, double *x);
    /* for the lasso on the IC block (NULL where the backend has none yet): the prox step with
     * the soft threshold, X = max(0, XHAT - step G - step lambda) on the IC columns (as
     * prox_step elsewhere), also *l1 = sum of X over the IC columns; and max |G| over them */
    int (*prox_step_l1)(void *ctx, double step, double lambda, double *lin, double *sq, double *l1);
    int (*grad_max_ic)(void *ctx, double *m);
} dm_commit_backend;

typedef struct dm_commit_fista_options {
    double tol_fun, tol_x; /* COMMIT's fit(): 1e-3 and 1e-6 */
    double lambda_frac;    /* the lasso on the IC block, as COMMIT's set_regularisation(('lasso',
                              None, None), (lambda_frac, ...)): lambda = lambda_frac x max |A^T y|
                              over the IC columns; 0: plain NNLS */
    int max_iter;          /* 100 */
    void (*progress)(void *arg, int iter, double objective);
    void *progress_arg;
} dm_commit_fista_options;

typedef struct dm_commit_fista_result {
    int iterations, products; /* products: A x and A^T y computed */
    double objective;         /* 0.5 ||A x - y||^2 (+ lambda ||x_IC||_1) at the end */
    double lambda;            /* the lasso's lambda used (0: none) */
    double rel_objective, rel_x;
    const char *stopped; /* which test stopped it */
} dm_commit_fista_result;

/* x0 (the start, usually 0) in, the solution out in x (both ncols long, on the host).  -1 with
 * the error set when the backend fails or on SIGINT/SIGTERM (dm_stop_error). */
int dm_commit_fista(const dm_commit_backend *B, const double *x0, const dm_commit_fista_options *o,
                    double *x, dm_commit_fista_result *r);

#endif
