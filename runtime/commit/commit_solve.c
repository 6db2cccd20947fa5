#include "commit/commit_solve.h"

#include "util/error.h"
#include "util/interrupt.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double dot(const double *a, const double *b, long n)
{
    double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (long i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* r = A x - y and 0.5 ||r||^2 */
static int residual(const dm_commit_products *P, const double *x, const double *y, double *r,
                    double *half_sq)
{
    if (P->ax(P->ctx, x, r) != 0) return -1;
    const long n = P->nrows;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) r[i] -= y[i];
    *half_sq = 0.5 * dot(r, r, n);
    return 0;
}

/* x = max(0, xhat - step g) */
static void projected_step(const double *xhat, const double *g, double step, double *x, long n)
{
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        double v = xhat[i] - step * g[i];
        x[i] = v > 0 ? v : 0;
    }
}

/* The quadratic bound of the backtracking test: qfval + <x - xhat, g> + ||x - xhat||^2 / 2 step */
static double bound(double qfval, const double *x, const double *xhat, const double *g, double step,
                    long n)
{
    double lin = 0, sq = 0;
#pragma omp parallel for reduction(+ : lin, sq) schedule(static)
    for (long i = 0; i < n; i++) {
        double d = x[i] - xhat[i];
        lin += d * g[i];
        sq += d * d;
    }
    return qfval + lin + 0.5 / step * sq;
}

int dm_commit_fista(const dm_commit_products *P, const double *y, const dm_commit_fista_options *o,
                    double *x, dm_commit_fista_result *out)
{
    const long n = P->ncols, m = P->nrows;
    const double eps = DBL_EPSILON;
    memset(out, 0, sizeof *out);
    double *xhat = malloc(n * sizeof *xhat), *prev = malloc(n * sizeof *prev),
           *g = malloc(n * sizeof *g), *r = malloc(m * sizeof *r), *ag = malloc(m * sizeof *ag);
    int rc = -1;
    if (!xhat || !prev || !g || !r || !ag) {
        dm_set_error("commit: out of memory for the solver's vectors");
        goto done;
    }
    for (long i = 0; i < n; i++) xhat[i] = x[i] > 0 ? x[i] : 0;
    double prev_obj, qfval, curr_obj = 0;
    if (residual(P, xhat, y, r, &prev_obj) != 0 || P->aty(P->ctx, r, g) != 0) goto done;
    qfval = prev_obj;
    memcpy(prev, xhat, n * sizeof *prev);
    /* step 1.9 / L, L = (||A g|| / ||g||)^2: the curvature along the first gradient */
    double gg = dot(g, g, n), step = 1;
    if (gg > 0) {
        if (P->ax(P->ctx, g, ag) != 0) goto done;
        double agag = dot(ag, ag, m);
        if (agag > 0) step = 1.9 / (agag / gg);
    }
    double told = 1, rel_obj = 0, rel_x = 0;
    int iter = 1;
    for (;;) {
        projected_step(xhat, g, step, x, n);
        double q = bound(qfval, x, xhat, g, step, n);
        if (residual(P, x, y, r, &curr_obj) != 0) goto done;
        while (curr_obj > q) { /* backtracking */
            step *= 0.9;
            projected_step(xhat, g, step, x, n);
            q = bound(qfval, x, xhat, g, step, n);
            if (residual(P, x, y, r, &curr_obj) != 0) goto done;
        }
        double abs_obj = fabs(curr_obj - prev_obj), dx2 = 0, x2 = 0;
#pragma omp parallel for reduction(+ : dx2, x2) schedule(static)
        for (long i = 0; i < n; i++) {
            double d = x[i] - prev[i];
            dx2 += d * d;
            x2 += x[i] * x[i];
        }
        double abs_x = sqrt(dx2);
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
        if (dm_stop_requested()) {
            rc = dm_stop_error(); /* a fit stopped midway is no result: nothing is written */
            goto done;
        }
        /* FISTA's extrapolation, then the gradient there */
        double t = 0.5 * (1 + sqrt(1 + 4 * told * told)), a = (told - 1) / t;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) xhat[i] = x[i] + a * (x[i] - prev[i]);
        if (residual(P, xhat, y, r, &qfval) != 0 || P->aty(P->ctx, r, g) != 0) goto done;
        iter++;
        prev_obj = curr_obj;
        memcpy(prev, x, n * sizeof *prev);
        told = t;
    }
    out->iterations = iter;
    out->objective = curr_obj;
    out->rel_objective = rel_obj;
    out->rel_x = rel_x;
    rc = 0;
done:
    free(xhat);
    free(prev);
    free(g);
    free(r);
    free(ag);
    return rc;
}
