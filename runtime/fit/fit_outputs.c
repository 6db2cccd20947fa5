/* Output maps of a fit: estimates, posterior summaries, derived outputs, information
 * criteria, predicted signal and the status map, made once and handed to a sink: files, each
 * written whole or not at all (the command, fit_files.c), or arrays in memory (the C API,
 * here). */
#include "fit/fit_outputs.h"
#include "util/error.h"
#include "fit/stats_util.h"
#include "io/bigalloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dm_fit_scatter(const dm_problem *p, int nt, const double *vals, size_t stride,
                    size_t volume_stride, int type, void *out)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p->nfit; i++) {
        int st = p->status[p->index[i]];
        if (!DM_STATUS_HAS_ESTIMATE(st)) continue;
        for (int t = 0; t < nt; t++) {
            size_t at = p->index[i] + (size_t)t * p->nvox;
            double v = vals[i * stride + (size_t)t * volume_stride];
            if (type == DM_OUT_FLOAT32)
                ((float *)out)[at] = (float)v;
            else
                ((double *)out)[at] = v;
        }
    }
}

/* The C API's sink: each map on the grid, in the output type (the status as bytes). */
typedef struct memory_sink {
    dm_fit_sink base;
    const dm_problem *p;
    int type;
    dm_fit_maps *maps;
} memory_sink;

/* A new map of the sink's list, its nvox * nt values zeroed; NULL when out of memory. */
static void *memory_map(memory_sink *m, const char *name, int kind, int nt, int type)
{
    dm_fit_maps *maps = m->maps;
    size_t size = type == DM_OUT_UINT8 ? 1 : type == DM_OUT_FLOAT32 ? 4 : 8;
    void *data = calloc(m->p->nvox * (size_t)nt, size);
    dm_fit_map *more = maps->n < maps->cap ? maps->map
                                           : realloc(maps->map, (size_t)(2 * maps->cap + 16) *
                                                                    sizeof *maps->map);
    if (!data || !more) {
        free(data);
        dm_set_error("out of memory for output '%s'", name);
        return NULL;
    }
    if (more != maps->map) maps->cap = 2 * maps->cap + 16;
    maps->map = more;
    dm_fit_map *x = &maps->map[maps->n++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->kind = kind;
    x->nt = nt;
    x->type = type;
    x->data = data;
    return data;
}

static int memory_put(dm_fit_sink *s, const char *name, int kind, int nt, double *vals)
{
    memory_sink *m = (memory_sink *)s;
    const dm_problem *p = m->p;
    int type = kind == DM_MAP_STATUS ? DM_OUT_UINT8 : m->type;
    void *data = memory_map(m, name, kind, nt, type);
    if (data && kind == DM_MAP_STATUS)
        for (size_t v = 0; v < p->nvox; v++) ((unsigned char *)data)[v] = (unsigned char)vals[v];
    else if (data)
        dm_fit_scatter(p, nt, vals, (size_t)nt, 1, type, data);
    free(vals);
    return data ? 0 : -1;
}

static int memory_samples(dm_fit_sink *s, const double *samples, int P, int ns)
{
    memory_sink *m = (memory_sink *)s;
    for (int k = 0; k < P; k++) {
        if (!(m->p->samples_mask >> k & 1)) continue;
        char name[160];
        snprintf(name, sizeof name, "%s_samples", m->p->mi.params[k].name);
        void *data = memory_map(m, name, DM_MAP_SAMPLES, ns, m->type);
        if (!data) return -1;
        dm_fit_scatter(m->p, ns, samples + k, (size_t)ns * P, (size_t)P, m->type, data);
    }
    return 0;
}

void dm_fit_maps_free(dm_fit_maps *m)
{
    for (int i = 0; i < m->n; i++) free(m->map[i].data);
    free(m->map);
    memset(m, 0, sizeof *m);
}

/* count values, zeroed; NULL with the error. */
static double *values(size_t count, const char *name)
{
    double *v = calloc(count ? count : 1, sizeof *v);
    if (!v) dm_set_error("out of memory for output '%s'", name);
    return v;
}

/* Derived outputs of one voxel: from the estimate (and after MCMC with one sample, which is
 * the estimate), or averaged over its MCMC samples (scalars and vectors by their mean, axes
 * through the mean dyadic tensor).  disp receives, per
 * output, the dispersion 1 - lambda1 of an axis (0 otherwise).  work: ns x output_width. */
static void derive_voxel(const dm_model_info *mi, const dm_cpu_fitter *f, const double *params,
                         const double *samples, int ns, const double *vox, double *out,
                         double *disp, double *work)
{
    int W = mi->output_width;
    for (int o = 0; o < mi->noutputs; o++) disp[o] = 0;
    if (!samples) {
        f->derived(params, vox, out);
        return;
    }
    f->derived_rows(samples, ns, vox, work);
    for (int o = 0; o < mi->noutputs; o++) {
        const dm_output_info *x = &mi->outputs[o];
        if (x->kind == DM_OUTK_AXIS) {
            dm_dyadic_mean(work + x->column, ns, W, out + x->column, &disp[o]);
            continue;
        }
        for (int c = 0; c < x->width; c++) {
            double sd;
            dm_mean_std(work + x->column + c, ns, W, &out[x->column + c], &sd);
        }
    }
}

int dm_fit_make_outputs(const dm_fit_request *r, dm_problem *p, const dm_cpu_fitter *f,
                        dm_fit_results *res, dm_fit_sink *sink)
{
    const dm_model_info *mi = &p->mi;
    int P = mi->nparams, ns = res->nsamples;
    size_t n = p->nfit;
    int rc = 0;
    /* The estimate is the fitter's (after MCMC its posterior mean, at which it also computed
     * SSE and log L for the information criteria); the samples give the sd. */
    const double *est = res->params;
    /* The samples first: a file sink writes them on threads of its own beside what follows. */
    if (ns && r->save_samples && (rc = sink->samples(sink, res->samples, P, ns)) != 0) return rc;
    /* The posterior sd, from two samples or more. */
    double *sd = ns > 1 ? dm_big_alloc(n * P * sizeof *sd) : NULL;
    if (ns > 1 && !sd) return dm_set_error("out of memory for the posterior sd");
    /* Voxel by voxel, independent: every loop over voxels below runs on all cores. */
#pragma omp parallel for schedule(dynamic, 256)
    for (size_t i = 0; i < (sd ? n : 0); i++) {
        for (int k = 0; k < P; k++) {
            const dm_param_info *x = &mi->params[k];
            const double *smp = res->samples + i * ns * P + k;
            if (x->periodic)
                dm_circular_mean_std(smp, ns, P, x->lo, x->hi, NULL, &sd[i * P + k]);
            else
                dm_mean_std(smp, ns, P, NULL, &sd[i * P + k]);
        }
    }
    /* One map per parameter and its posterior sd, their columns filled in one pass. */
    const int ncols = sd ? 2 * P : P;
    double **col = calloc((size_t)ncols, sizeof *col);
    if (!col) rc = dm_set_error("out of memory for the parameters' maps");
    for (int c = 0; rc == 0 && c < ncols; c++)
        if (!(col[c] = values(n, mi->params[c % P].name))) rc = -1;
    if (rc == 0) {
#pragma omp parallel for schedule(dynamic, 4096)
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < P; k++) {
                col[k][i] = est[i * P + k];
                if (sd) col[P + k][i] = sd[i * P + k];
            }
    }
    for (int k = 0; k < P && rc == 0; k++) {
        rc = sink->put(sink, mi->params[k].name, DM_MAP_PARAMETER, 1, col[k]);
        col[k] = NULL; /* the sink's now */
        if (rc == 0 && sd) {
            char name[160];
            snprintf(name, sizeof name, "%s_sd", mi->params[k].name);
            rc = sink->put(sink, name, DM_MAP_STD, 1, col[P + k]);
            col[P + k] = NULL;
        }
    }
    for (int c = 0; col && c < ncols; c++) free(col[c]);
    free(col);

    /* Derived outputs. */
    if (rc == 0 && mi->noutputs > 0) {
        int W = mi->output_width;
        double *out = calloc(n * W, sizeof *out);
        double *disp = calloc(n * mi->noutputs, sizeof *disp);
        if (!out || !disp) rc = dm_set_error("out of memory for the derived outputs");
        int short_of_memory = 0;
        /* dynamic: beside a file sink's writer threads, a static share of a descheduled
         * thread would hold up the whole loop */
#pragma omp parallel if (rc == 0)
        if (rc == 0) {
            double *work = malloc((size_t)(ns ? ns : 1) * W * sizeof *work);
            if (!work) {
#pragma omp atomic write
                short_of_memory = 1;
            }
#pragma omp for schedule(dynamic, 256)
            for (size_t i = 0; i < n; i++)
                if (work)
                    derive_voxel(mi, f, est + i * P, ns > 1 ? res->samples + i * ns * P : NULL,
                                 ns, p->voxin + i * mi->voxel_width, out + i * W,
                                 disp + i * mi->noutputs, work);
            free(work);
        }
        if (short_of_memory) rc = dm_set_error("out of memory for the derived outputs");
        for (int o = 0; o < mi->noutputs && rc == 0; o++) {
            const dm_output_info *x = &mi->outputs[o];
            double *buf = values(n * x->width, x->name);
            if (!buf) {
                rc = -1;
                break;
            }
#pragma omp parallel for schedule(dynamic, 4096)
            for (size_t i = 0; i < n; i++)
                for (int c = 0; c < x->width; c++)
                    buf[i * x->width + c] = out[i * W + x->column + c];
            if ((rc = sink->put(sink, x->name, DM_MAP_OUTPUT, x->width, buf)) != 0) break;
            if (ns > 1 && x->kind == DM_OUTK_AXIS) {
                char name[160];
                snprintf(name, sizeof name, "%s_dispersion", x->name);
                if (!(buf = values(n, name))) {
                    rc = -1;
                    break;
                }
#pragma omp parallel for schedule(dynamic, 4096)
                for (size_t i = 0; i < n; i++) buf[i] = disp[i * mi->noutputs + o];
                rc = sink->put(sink, name, DM_MAP_DISPERSION, 1, buf);
            }
        }
        free(out);
        free(disp);
    }

    /* Information criteria from the log-likelihood at the estimate; P counts free parameters. */
    if (rc == 0 && r->ic) {
        int free_params = 0;
        for (int k = 0; k < P; k++)
            if (!(p->cfg.fixed_mask >> k & 1)) free_params++;
        double *bic = values(n, "BIC"), *aic = values(n, "AIC");
        for (size_t i = 0; bic && aic && i < n; i++) {
            double logl = res->stats[i * DM_NSTATS + DM_STAT_LOGL];
            bic[i] = free_params * log((double)p->M) - 2 * logl;
            aic[i] = 2 * free_params - 2 * logl;
        }
        if (!bic || !aic) {
            free(bic);
            free(aic);
            rc = -1;
        } else if ((rc = sink->put(sink, "BIC", DM_MAP_IC, 1, bic)) == 0) {
            rc = sink->put(sink, "AIC", DM_MAP_IC, 1, aic);
        } else {
            free(aic);
        }
    }
    if (rc == 0 && r->predicted) {
        double *pred = malloc(n * p->M * sizeof *pred);
        if (!pred) rc = dm_set_error("out of memory for the predicted signal");
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < (pred ? n : 0); i++)
            f->predict(est + i * P, p->meas, p->M, p->voxin + i * mi->voxel_width, pred + i * p->M);
        if (rc == 0) rc = sink->put(sink, "predicted", DM_MAP_PREDICTED, p->M, pred);
    }
    /* The status map covers every voxel of the grid (0 outside the mask). */
    if (rc == 0) {
        double *st = values(p->nvox, "status");
        if (!st) rc = -1;
        for (size_t v = 0; st && v < p->nvox; v++) st[v] = p->status[v];
        if (st) rc = sink->put(sink, "status", DM_MAP_STATUS, 1, st);
    }
    free(sd);
    return rc;
}

int dm_fit_make_maps(const dm_fit_request *r, dm_problem *p, const dm_cpu_fitter *f,
                     dm_fit_results *res, dm_fit_maps *maps)
{
    memory_sink s = {{memory_put, memory_samples}, p, r->out_float64 ? DM_OUT_FLOAT64 : DM_OUT_FLOAT32, maps};
    int rc = dm_fit_make_outputs(r, p, f, res, &s.base);
    if (rc != 0) dm_fit_maps_free(maps);
    return rc;
}
