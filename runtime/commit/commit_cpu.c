#include "commit/commit_cpu.h"

#include "io/bigalloc.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct dm_commit_cpu {
    const dm_commit_operator *A;
    const double *y;
    double *x, *xhat, *prev, *g, *ag, *runs; /* runs: the runs' weights or dots */
    double *ax;                              /* the last residual's A v */
    /* the residuals at XHAT (r, the gradient's), X (rx) and PREV (rp), in two arrays: rx is
     * written where r was, r where rp was (commit_solve.h) */
    double *buf[2], *r, *rx, *rp;
    int ax_of_x; /* 1 while ax is A x of the current x (dm_commit_cpu_fitted) */
    int threads;
    double *group_term; /* each group's part of Omega, summed in group order */
    long group_cap;
    double *part; /* the pieces' sums (below) */
};

/* Sums that are the same bits for every number of threads: [0, n) in pieces of PIECE values,
 * each piece summed in order by whichever thread has it, then the pieces' sums added in order.
 * (An OpenMP reduction adds the threads' sums in the order they finish: with three threads or
 * more, other bits from one run to the next, and other bits for each thread count.) */
enum { PIECE = 4096, MAX_SUMS = 3 };

static long pieces_of(long n)
{
    return (n + PIECE - 1) / PIECE;
}

static long piece_end(long p, long n)
{
    return (p + 1) * PIECE < n ? (p + 1) * PIECE : n;
}

/* sum[0 .. k) from the pieces' sums part[p MAX_SUMS + 0 .. k), in piece order */
static void add_pieces(const double *part, long np, int k, double *sum)
{
    for (int i = 0; i < k; i++) sum[i] = 0;
    for (long p = 0; p < np; p++)
        for (int i = 0; i < k; i++) sum[i] += part[p * MAX_SUMS + i];
}

void dm_commit_cpu_ax(const dm_commit_operator *A, const double *x, double *yhat, double *runs,
                      int threads)
{
    const long nv = A->op.nv;
    const int ns = A->op.ns;
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(static)
        for (long r = 0; r < A->nruns; r++)
            dm_commit_run_weights(&A->op, x, r, runs + r * A->op.nic);
#pragma omp for schedule(dynamic, 64)
        for (long v = 0; v < nv; v++) dm_commit_ax_voxel(&A->op, x, runs, v, yhat + v * ns);
    }
}

static double sum_of_squares(dm_commit_cpu *c, const double *v, long n)
{
    const long np = pieces_of(n);
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (long p = 0; p < np; p++) {
        double s = 0;
        for (long i = p * PIECE; i < piece_end(p, n); i++) s += v[i] * v[i];
        c->part[p * MAX_SUMS] = s;
    }
    double s;
    add_pieces(c->part, np, 1, &s);
    return s;
}

static int start(void *ctx, const double *x0)
{
    dm_commit_cpu *c = ctx;
    for (long j = 0; j < c->A->ncols; j++) c->xhat[j] = c->prev[j] = x0[j] > 0 ? x0[j] : 0;
    c->ax_of_x = 0;
    return 0;
}

static int residual(void *ctx, int which, double *half_sq)
{
    dm_commit_cpu *c = ctx;
    dm_commit_cpu_ax(c->A, which == DM_COMMIT_X ? c->x : c->xhat, c->ax, c->runs, c->threads);
    c->ax_of_x = which == DM_COMMIT_X;
    if (which == DM_COMMIT_XHAT) { /* the start: XHAT = PREV */
        c->r = c->rp = c->buf[0];
        c->rx = c->buf[1];
    }
    double *out = which == DM_COMMIT_X ? c->rx : c->r;
    const long n = c->A->nrows, np = pieces_of(n);
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (long p = 0; p < np; p++) {
        double s = 0;
        for (long i = p * PIECE; i < piece_end(p, n); i++) {
            out[i] = c->ax[i] - c->y[i];
            s += out[i] * out[i];
        }
        c->part[p * MAX_SUMS] = s;
    }
    double s;
    add_pieces(c->part, np, 1, &s);
    *half_sq = 0.5 * s;
    return 0;
}

void dm_commit_cpu_aty(const dm_commit_operator *A, const double *r, double *g, double *runs,
                       int threads)
{
    const dm_commit_op *op = &A->op;
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(dynamic, 64)
        for (long v = 0; v < op->nv; v++) dm_commit_aty_voxel(op, r, v, runs, g);
#pragma omp for schedule(dynamic, 256)
        for (long f = 0; f < op->nf; f++) dm_commit_aty_streamline(op, runs, f, g);
    }
}

static int gradient(void *ctx)
{
    dm_commit_cpu *c = ctx;
    dm_commit_cpu_aty(c->A, c->r, c->g, c->runs, c->threads);
    return 0;
}

static int curvature(void *ctx, double *agag, double *gg)
{
    dm_commit_cpu *c = ctx;
    dm_commit_cpu_ax(c->A, c->g, c->ag, c->runs, c->threads);
    *agag = sum_of_squares(c, c->ag, c->A->nrows);
    *gg = sum_of_squares(c, c->g, c->A->ncols);
    return 0;
}

static int prox_step(void *ctx, double step, double *lin, double *sq)
{
    dm_commit_cpu *c = ctx;
    const long n = c->A->ncols, np = pieces_of(n);
    c->ax_of_x = 0;
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (long p = 0; p < np; p++) {
        double l = 0, q = 0;
        for (long j = p * PIECE; j < piece_end(p, n); j++) {
            double v = c->xhat[j] - step * c->g[j];
            c->x[j] = v > 0 ? v : 0;
            double d = c->x[j] - c->xhat[j];
            l += d * c->g[j];
            q += d * d;
        }
        c->part[p * MAX_SUMS] = l;
        c->part[p * MAX_SUMS + 1] = q;
    }
    double sum[2];
    add_pieces(c->part, np, 2, sum);
    *lin = sum[0];
    *sq = sum[1];
    return 0;
}

/* The lasso's threshold of column j per unit step (commit_ops.h). */
static double lambda_of(const dm_commit_reg *reg, long j)
{
    return dm_commit_col_lambda(j, reg->nf, reg->ec_end, reg->lambda, reg->lambda_ec,
                                reg->lambda_iso, reg->col_w);
}

/* The prox step with a regularisation (commit_solve.h: dm_commit_reg). */
static int prox_step_reg(void *ctx, double step, const dm_commit_reg *reg, double *lin, double *sq,
                         double *omega)
{
    dm_commit_cpu *c = ctx;
    const long n = c->A->ncols;
    const int ic_free = reg->free_blocks & 1u;
    c->ax_of_x = 0;
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (long j = 0; j < n; j++)
        c->x[j] = dm_commit_soft_threshold(c->xhat[j] - step * c->g[j], step * lambda_of(reg, j));
    double om = 0;
    if (reg->lambda_group > 0) { /* each group shrunk towards 0 by its weight */
        if (reg->ngroups > c->group_cap) {
            double *t = realloc(c->group_term, (size_t)reg->ngroups * sizeof *t);
            if (!t) return dm_set_error("commit: out of memory for the group lasso");
            c->group_term = t;
            c->group_cap = reg->ngroups;
        }
        /* the groups' terms kept apart and summed in order below: a reduction over a dynamic
         * schedule would add them in an order of the threads' timing, other bits each run */
#pragma omp parallel for schedule(dynamic, 64) num_threads(c->threads)
        for (long k = 0; k < reg->ngroups; k++) {
            double n2 = 0, wl = step * reg->lambda_group * reg->group_w[k];
            for (long i = reg->group_start[k]; i < reg->group_start[k + 1]; i++)
                n2 += c->x[reg->group_cols[i]] * c->x[reg->group_cols[i]];
            double nrm = sqrt(n2), f = nrm <= wl ? 0 : (nrm - wl) / nrm, m2 = 0;
            for (long i = reg->group_start[k]; i < reg->group_start[k + 1]; i++) {
                double *v = &c->x[reg->group_cols[i]];
                *v = ic_free || *v * f > 0 ? *v * f : 0;
                m2 += *v * *v;
            }
            c->group_term[k] = reg->group_w[k] * sqrt(m2);
        }
        for (long k = 0; k < reg->ngroups; k++) om += c->group_term[k];
    }
    const long np = pieces_of(n);
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (long p = 0; p < np; p++) {
        double l = 0, q = 0, l1 = 0;
        for (long j = p * PIECE; j < piece_end(p, n); j++) {
            c->x[j] = dm_commit_project(c->x[j], j, reg->nf, reg->ec_end, reg->free_blocks);
            double d = c->x[j] - c->xhat[j];
            l += d * c->g[j];
            q += d * d;
            l1 += lambda_of(reg, j) * fabs(c->x[j]);
        }
        c->part[p * MAX_SUMS] = l;
        c->part[p * MAX_SUMS + 1] = q;
        c->part[p * MAX_SUMS + 2] = l1;
    }
    double sum[3];
    add_pieces(c->part, np, 3, sum);
    *lin = sum[0];
    *sq = sum[1];
    *omega = sum[2] + reg->lambda_group * om;
    return 0;
}

static int get_g(void *ctx, double *g)
{
    dm_commit_cpu *c = ctx;
    memcpy(g, c->g, (size_t)c->A->ncols * sizeof *g);
    return 0;
}

static int change(void *ctx, double *dx2, double *x2)
{
    dm_commit_cpu *c = ctx;
    const long n = c->A->ncols, np = pieces_of(n);
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (long p = 0; p < np; p++) {
        double a = 0, b = 0;
        for (long j = p * PIECE; j < piece_end(p, n); j++) {
            double d = c->x[j] - c->prev[j];
            a += d * d;
            b += c->x[j] * c->x[j];
        }
        c->part[p * MAX_SUMS] = a;
        c->part[p * MAX_SUMS + 1] = b;
    }
    double sum[2];
    add_pieces(c->part, np, 2, sum);
    *dx2 = sum[0];
    *x2 = sum[1];
    return 0;
}

static int advance(void *ctx, double a, double *half_sq)
{
    dm_commit_cpu *c = ctx;
    const long n = c->A->ncols, m = c->A->nrows;
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (long j = 0; j < n; j++) {
        c->xhat[j] = c->x[j] + a * (c->x[j] - c->prev[j]);
        c->prev[j] = c->x[j];
    }
    double *out = c->rp; /* R over R_PREV, whose values are read first */
    const long mp = pieces_of(m);
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (long p = 0; p < mp; p++) {
        double s = 0;
        for (long i = p * PIECE; i < piece_end(p, m); i++) {
            out[i] = dm_commit_extrapolate(c->rx[i], c->rp[i], a);
            s += out[i] * out[i];
        }
        c->part[p * MAX_SUMS] = s;
    }
    double s;
    add_pieces(c->part, mp, 1, &s);
    c->r = out;
    c->rp = c->rx;
    c->rx = out; /* R is not needed after the gradient, before the next RX */
    *half_sq = 0.5 * s;
    return 0;
}

const double *dm_commit_cpu_fitted(const dm_commit_cpu *c)
{
    return c && c->ax_of_x ? c->ax : NULL;
}

static int get_x(void *ctx, double *x)
{
    dm_commit_cpu *c = ctx;
    memcpy(x, c->x, (size_t)c->A->ncols * sizeof *x);
    return 0;
}

dm_commit_cpu *dm_commit_cpu_open(const dm_commit_operator *A, const double *y, int threads,
                                  dm_commit_backend *B)
{
    dm_commit_cpu *c = calloc(1, sizeof *c);
    if (!c) {
        dm_set_error("commit: out of memory for the solver");
        return NULL;
    }
    c->A = A;
    c->y = y;
    c->threads = threads > 0 ? threads : 1;
    size_t n = (size_t)(A->ncols ? A->ncols : 1), m = (size_t)(A->nrows ? A->nrows : 1);
    c->x = calloc(n, sizeof *c->x);
    c->xhat = calloc(n, sizeof *c->xhat);
    c->prev = calloc(n, sizeof *c->prev);
    c->g = calloc(n, sizeof *c->g);
    c->buf[0] = dm_big_alloc(m * sizeof(double));
    c->buf[1] = dm_big_alloc(m * sizeof(double));
    c->r = c->rp = c->buf[0];
    c->rx = c->buf[1];
    c->ax = dm_big_alloc(m * sizeof *c->ax);
    c->ag = calloc(m, sizeof *c->ag);
    c->runs = calloc((size_t)(A->nruns ? A->nruns : 1) * A->op.nic, sizeof *c->runs);
    const long np = pieces_of((long)(m > n ? m : n));
    c->part = malloc((size_t)np * MAX_SUMS * sizeof *c->part);
    if (!c->x || !c->xhat || !c->prev || !c->g || !c->buf[0] || !c->buf[1] || !c->ag || !c->runs ||
        !c->ax || !c->part) {
        dm_commit_cpu_close(c);
        dm_set_error("commit: out of memory for the solver's vectors");
        return NULL;
    }
    *B = (dm_commit_backend){c,      start,   residual, gradient,      curvature, prox_step,
                             change, advance, get_x,    prox_step_reg, get_g};
    return c;
}

void dm_commit_cpu_close(dm_commit_cpu *c)
{
    if (!c) return;
    free(c->x);
    free(c->xhat);
    free(c->prev);
    free(c->g);
    free(c->buf[0]);
    free(c->buf[1]);
    free(c->ax);
    free(c->ag);
    free(c->runs);
    free(c->group_term);
    free(c->part);
    free(c);
}
