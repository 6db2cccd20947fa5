/* The non-negative least-squares fit of COMMIT, min_x 0.5 ||A x - y||^2 subject to x >= 0, by
 * FISTA (Beck & Teboulle 2009), optionally with COMMIT's lasso on the streamlines' weights, with
 * COMMIT's schedule: the first step 1.9 / L with L the
 * curvature along the first gradient, (||A g|| / ||g||)^2, backtracking by 0.9 while the
 * quadratic bound fails, and its stopping tests (relative change of the objective below
 * tol_fun, relative change of x below tol_x, changes below machine precision, or max_iter).
 *
 * One implementation for every device: the loop is here, the vectors live where the backend
 * keeps them (host threads: commit_cpu.c; the GPU: commit_gpu.c), and the backend does the
 * few fused operations below on its own vectors X, XHAT, PREV, G (unknowns) and R, RX, R_PREV,
 * AG (rows: the residuals at XHAT, X and PREV, and A G).  An iteration takes one A x (at the
 * new X) and one A^T y: the residual at the extrapolated XHAT is a sum of the two it is
 * extrapolated from, where COMMIT computes it with a second A x. */
#ifndef DIMOC_COMMIT_SOLVE_H
#define DIMOC_COMMIT_SOLVE_H

enum { DM_COMMIT_X, DM_COMMIT_XHAT }; /* which unknowns a residual is taken at */

/* COMMIT's regularisations (set_regularisation), each with the non-negativity kept, Omega added
 * to the objective; the blocks of columns: IC [0, nf) (every IC response's streamline columns),
 * EC [nf, ec_end), ISO [ec_end, ncols):
 *   lasso        per block b, Omega = lambda_b sum_{j in b} x_j; prox: the soft threshold by
 *                step lambda_b (signed, as COMMIT's), then the negatives set to 0
 *   group lasso  (IC only) Omega = lambda_g sum_k w_k ||x_{g_k}||; prox: each group shrunk by
 *                max(0, 1 - step lambda_g w_k / ||v_{g_k}||), then the negatives set to 0
 *                (COMMIT2; groups given as column lists, w_k their weights).
 * The lambdas are set by dm_commit_fista from fractions of their lambda_max.
 * Two options of COMMIT's set_regularisation: col_w, a weight per column (its coeff_weights:
 * the lasso becomes lambda_b sum_j w_j |x_j|, its threshold step lambda_b w_j, and lambda_max
 * max_j |A^T y|_j / w_j over the columns of w_j > 0; NULL: all 1); free_blocks, the blocks
 * without the non-negativity (is_nonnegative False: bit 0 IC, 1 EC, 2 ISO; commit_ops.h:
 * dm_commit_project), whose lasso is then the plain soft threshold and Omega sums |x_j|. */
typedef struct dm_commit_reg {
    long nf, ec_end, ncols;
    const double *col_w;
    unsigned free_blocks;
    double lambda, lambda_ec, lambda_iso, lambda_group;
    long ngroups;
    const long *group_start; /* ngroups + 1 */
    const long *group_cols;  /* the IC columns of group k: [group_start[k], group_start[k+1]) */
    const double *group_w;
} dm_commit_reg;

typedef struct dm_commit_backend {
    void *ctx;
    /* XHAT = PREV = max(0, x0) */
    int (*start)(void *ctx, const double *x0);
    /* the residual A v - y at v = X (into RX), or at v = XHAT (into R, where XHAT = PREV: the
     * start, so that it is the residual at PREV too); *half_sq = 0.5 ||it||^2 */
    int (*residual)(void *ctx, int v, double *half_sq);
    /* G = A^T R */
    int (*gradient)(void *ctx);
    /* AG = A G; *agag = ||AG||^2, *gg = ||G||^2 */
    int (*curvature)(void *ctx, double *agag, double *gg);
    /* X = max(0, XHAT - step G); *lin = <X - XHAT, G>, *sq = ||X - XHAT||^2 */
    int (*prox_step)(void *ctx, double step, double *lin, double *sq);
    /* *dx2 = ||X - PREV||^2, *x2 = ||X||^2 */
    int (*change)(void *ctx, double *dx2, double *x2);
    /* XHAT = X + a (X - PREV), then PREV = X; R = RX + a (RX - R_PREV), the residual at XHAT
     * without a product (A is linear), then R_PREV = RX; *half_sq = 0.5 ||R||^2 */
    int (*advance)(void *ctx, double a, double *half_sq);
    /* X to the host */
    int (*get_x)(void *ctx, double *x);
    /* with a regularisation (every backend has both; dm_commit_fista calls them only with
     * one): the prox step of dm_commit_reg (as prox_step, and *omega = Omega(X)), and G to the
     * host */
    int (*prox_step_reg)(void *ctx, double step, const struct dm_commit_reg *reg, double *lin,
                         double *sq, double *omega);
    int (*get_g)(void *ctx, double *g);
} dm_commit_backend;

typedef struct dm_commit_fista_options {
    double tol_fun, tol_x; /* COMMIT's fit(): 1e-3 and 1e-6 */
    /* the regularisation (NULL: plain NNLS) and its fractions, as COMMIT's
     * set_regularisation(..., lambdas=(F_IC, F_EC, F_ISO)): a block's lasso lambda = its
     * fraction x max_{j in block} |A^T y|_j, group lambda = group_frac x
     * max_k ||(A^T y)_{g_k}|| / w_k over the IC columns */
    const dm_commit_reg *reg;
    double lambda_frac, lambda_ec_frac, lambda_iso_frac, group_frac;
    const double *aty; /* A^T y (ncols) for the lambdas (NULL: the first gradient's; COMMIT's
                        * is of the data unweighted by a confidence map) */
    int max_iter;      /* 100 */
    void (*progress)(void *arg, int iter, double objective);
    void *progress_arg;
    /* a caller's cancel, polled between iterations (util/progress.h; NULL: signals only) */
    struct dm_watch *watch;
} dm_commit_fista_options;

typedef struct dm_commit_fista_result {
    int iterations, products; /* products: A x and A^T y computed */
    double objective;         /* 0.5 ||A x - y||^2 + Omega(x) at the end */
    double lambda, lambda_ec, lambda_iso, lambda_group; /* the lambdas used (0: none) */
    double rel_objective, rel_x;
    const char *stopped; /* which test stopped it */
} dm_commit_fista_result;

/* x0 (the start, usually 0) in, the solution out in x (both ncols long, on the host).  -1 with
 * the error set when the backend fails or on SIGINT/SIGTERM (dm_stop_error). */
int dm_commit_fista(const dm_commit_backend *B, const double *x0, const dm_commit_fista_options *o,
                    double *x, dm_commit_fista_result *r);

#endif
