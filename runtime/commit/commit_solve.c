#include "commit/commit_solve.h"

#include "util/error.h"
#include "util/progress.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x = prox(xhat - step g): the projection on x >= 0, with the regularisation's shrinking when
 * there is one (*omega: its Omega(x), else 0). */
static int prox(const dm_commit_backend *B, const dm_commit_reg *reg, double step, double *lin,
                double *sq, double *omega)
{
    *omega = 0;
    return reg ? B->prox_step_reg(B->ctx, step, reg, lin, sq, omega)
               : B->prox_step(B->ctx, step, lin, sq);
}

/* max |g_j| / w_j over columns [a, b) of w_j > 0 (w NULL: 1; COMMIT's compute_lambda_max_lasso) */
static double max_abs(const double *g, const double *w, long a, long b)
{
    double m = 0;
    for (long j = a; j < b; j++)
        if (!w || w[j] > 0) m = fmax(m, fabs(g[j]) / (w ? w[j] : 1.0));
    return m;
}

/* The lambdas from their fractions of lambda_max, A^T y being -G at x = 0 (COMMIT's
 * compute_lambda_max_lasso over each block / _group). */
static int set_lambdas(const dm_commit_backend *B, const dm_commit_fista_options *o,
                       dm_commit_reg *reg)
{
    double *g = malloc((size_t)(reg->ncols ? reg->ncols : 1) * sizeof *g);
    if (!g) return dm_set_error("commit: out of memory");
    if (o->aty)
        memcpy(g, o->aty, (size_t)reg->ncols * sizeof *g);
    else if (B->get_g(B->ctx, g) != 0) {
        free(g);
        return -1;
    }
    double mg = 0;
    for (long k = 0; k < reg->ngroups; k++) {
        double n2 = 0;
        for (long i = reg->group_start[k]; i < reg->group_start[k + 1]; i++)
            n2 += g[reg->group_cols[i]] * g[reg->group_cols[i]];
        mg = fmax(mg, sqrt(n2) / reg->group_w[k]);
    }
    reg->lambda = o->lambda_frac * max_abs(g, reg->col_w, 0, reg->nf);
    reg->lambda_ec = o->lambda_ec_frac * max_abs(g, reg->col_w, reg->nf, reg->ec_end);
    reg->lambda_iso = o->lambda_iso_frac * max_abs(g, reg->col_w, reg->ec_end, reg->ncols);
    reg->lambda_group = o->group_frac * mg;
    free(g);
    return 0;
}

int dm_commit_fista(const dm_commit_backend *B, const double *x0, const dm_commit_fista_options *o,
                    double *x, dm_commit_fista_result *out)
{
    const double eps = DBL_EPSILON;
    void *c = B->ctx;
    memset(out, 0, sizeof *out);
    dm_commit_reg reg_used;
    const dm_commit_reg *reg = NULL;
    double prev_obj, qfval, curr_obj = 0;
    if (B->start(c, x0) != 0 || B->residual(c, DM_COMMIT_XHAT, &prev_obj) != 0 ||
        B->gradient(c) != 0)
        return -1;
    out->products = 2;
    qfval = prev_obj;
    if (o->reg) {
        reg_used = *o->reg;
        if (set_lambdas(B, o, &reg_used) != 0) return -1;
        reg = &reg_used;
    }
    double agag, gg, step = 1;
    if (B->curvature(c, &agag, &gg) != 0) return -1;
    out->products++;
    if (gg > 0 && agag > 0) step = 1.9 / (agag / gg);
    double told = 1, rel_obj = 0, rel_x = 0;
    int iter = 1;
    for (;;) {
        double lin, sq, omega = 0;
        /* x = prox(xhat - step g), and the objective there (with the regularisation's term) */
        if (prox(B, reg, step, &lin, &sq, &omega) != 0 ||
            B->residual(c, DM_COMMIT_X, &curr_obj) != 0)
            return -1;
        out->products++;
        curr_obj += omega;
        while (curr_obj > qfval + lin + 0.5 / step * sq + omega) { /* backtracking */
            step *= 0.9;
            if (prox(B, reg, step, &lin, &sq, &omega) != 0 ||
                B->residual(c, DM_COMMIT_X, &curr_obj) != 0)
                return -1;
            out->products++;
            curr_obj += omega;
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
        if (dm_watch_stopping(o->watch)) /* a fit stopped midway is no result */
            return dm_watch_stop_error(o->watch);
        /* FISTA's extrapolation (its residual too), then the gradient there */
        double t = 0.5 * (1 + sqrt(1 + 4 * told * told));
        if (B->advance(c, (told - 1) / t, &qfval) != 0 || B->gradient(c) != 0) return -1;
        out->products++;
        iter++;
        prev_obj = curr_obj;
        told = t;
    }
    out->iterations = iter;
    out->objective = curr_obj;
    out->rel_objective = rel_obj;
    out->rel_x = rel_x;
    out->lambda = reg ? reg->lambda : 0;
    out->lambda_ec = reg ? reg->lambda_ec : 0;
    out->lambda_iso = reg ? reg->lambda_iso : 0;
    out->lambda_group = reg ? reg->lambda_group : 0;
    return B->get_x(c, x);
}
