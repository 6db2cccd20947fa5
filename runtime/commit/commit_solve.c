#include "commit/commit_solve.h"

#include "util/error.h"
#include "util/interrupt.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* x = prox(xhat - step g): the projection on x >= 0, with the lasso's soft threshold on the IC
 * columns when lambda > 0 (*l1: the IC columns' sum then, else 0). */
static int prox(const dm_commit_backend *B, double step, double lambda, double *lin, double *sq,
                double *l1)
{
    *l1 = 0;
    return lambda > 0 ? B->prox_step_l1(B->ctx, step, lambda, lin, sq, l1)
                      : B->prox_step(B->ctx, step, lin, sq);
}

int dm_commit_fista(const dm_commit_backend *B, const double *x0, const dm_commit_fista_options *o,
                    double *x, dm_commit_fista_result *out)
{
    const double eps = DBL_EPSILON;
    void *c = B->ctx;
    memset(out, 0, sizeof *out);
    double lambda = 0;
    if (o->lambda_frac > 0 && (!B->prox_step_l1 || !B->grad_max_ic))
        return dm_set_error("commit: --lambda (the lasso) is not available on this device yet; "
                            "use --device cpu");
    double prev_obj, qfval, curr_obj = 0;
    if (B->start(c, x0) != 0 || B->residual(c, DM_COMMIT_XHAT, &prev_obj) != 0 ||
        B->gradient(c) != 0)
        return -1;
    out->products = 2;
    qfval = prev_obj;
    if (o->lambda_frac > 0) { /* lambda_max from A^T y: the gradient at x = 0 is -A^T y */
        double m;
        if (B->grad_max_ic(c, &m) != 0) return -1;
        lambda = o->lambda_frac * m;
    }
    double agag, gg, step = 1;
    if (B->curvature(c, &agag, &gg) != 0) return -1;
    out->products++;
    if (gg > 0 && agag > 0) step = 1.9 / (agag / gg);
    double told = 1, rel_obj = 0, rel_x = 0;
    int iter = 1;
    for (;;) {
        double lin, sq, l1 = 0;
        /* x = prox(xhat - step g), and the objective there (with the lasso's term) */
        if (prox(B, step, lambda, &lin, &sq, &l1) != 0 ||
            B->residual(c, DM_COMMIT_X, &curr_obj) != 0)
            return -1;
        out->products++;
        curr_obj += lambda * l1;
        while (curr_obj > qfval + lin + 0.5 / step * sq + lambda * l1) { /* backtracking */
            step *= 0.9;
            if (prox(B, step, lambda, &lin, &sq, &l1) != 0 ||
                B->residual(c, DM_COMMIT_X, &curr_obj) != 0)
                return -1;
            out->products++;
            curr_obj += lambda * l1;
        }
        double dx2, x2;
        if (B->change(c, &dx2, &x2) != 0) return -1;
        double abs_obj = fabs(curr_obj - prev_obj), abs_x = sqrt(dx2);
        rel_obj = abs_obj / curr_obj;
        rel_x = abs_x / (sqrt(x2) + eps);
        if (o->progress) o->progress(o->progress_arg, iter, curr_obj);
        if (abs_obj < eps) {
            out->stopped = "absolute change of the objective below machine precision";
            break;
        } else if (rel_obj < o->tol_fun) {
            out->stopped = "relative change of the objective below tol_fun";
            break;
        } else if (abs_x < eps) {
            out->stopped = "absolute change of x below machine precision";
            break;
        } else if (rel_x < o->tol_x) {
            out->stopped = "relative change of x below tol_x";
            break;
        } else if (iter >= o->max_iter) {
            out->stopped = "maximum number of iterations";
            break;
        }
        if (dm_stop_requested()) return dm_stop_error(); /* a fit stopped midway is no result */
        /* FISTA's extrapolation, then the gradient there */
        double t = 0.5 * (1 + sqrt(1 + 4 * told * told));
        if (B->advance(c, (told - 1) / t) != 0 || B->residual(c, DM_COMMIT_XHAT, &qfval) != 0 ||
            B->gradient(c) != 0)
            return -1;
        out->products += 2;
        iter++;
        prev_obj = curr_obj;
        told = t;
    }
    out->iterations = iter;
    out->objective = curr_obj;
    out->rel_objective = rel_obj;
    out->rel_x = rel_x;
    out->lambda = lambda;
    return B->get_x(c, x);
}
