/* Output maps of a fit: estimates, posterior summaries, derived outputs, information
 * criteria, predicted signal and the status map, each written whole or not at all. */
#include "fit/fit_outputs.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "fit/stats_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Scatters nt values per fitted voxel (vals[i * nt + t]) onto the grid and writes them. */
static int write_map(const char *dir, const char *name, const dm_problem *p, int nt,
                     const double *vals, int type)
{
    double *vol = calloc(p->nvox * (size_t)nt, sizeof *vol);
    if (!vol) return dm_set_error("%s: out of memory for output '%s'", dir, name);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p->nfit; i++) {
        int st = p->status[p->index[i]];
        if (!DM_STATUS_HAS_ESTIMATE(st)) continue;
        for (int t = 0; t < nt; t++) vol[p->index[i] + (size_t)t * p->nvox] = vals[i * nt + t];
    }
    char file[256];
    snprintf(file, sizeof file, "%s.nii.gz", name);
    char *path = dm_path_join(dir, file);
    int rc = dm_volume_write(path, &p->data, nt, vol, type);
    free(path);
    free(vol);
    return rc;
}

/* Derived outputs of one voxel: from the estimate, or averaged over its MCMC samples (scalars
 * and vectors by their mean, axes through the mean dyadic tensor).  disp receives, per
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
    for (int s = 0; s < ns; s++)
        f->derived(samples + (size_t)s * mi->nparams, vox, work + (size_t)s * W);
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

int dm_fit_write_outputs(const dm_fit_request *r, const char *dir, dm_problem *p,
                         const dm_cpu_fitter *f, dm_fit_results *res)
{
    const dm_model_info *mi = &p->mi;
    int P = mi->nparams, ns = res->nsamples;
    size_t n = p->nfit;
    const int map_type = r->out_float64 ? DM_OUT_FLOAT64 : DM_OUT_FLOAT32;
    int rc = 0;
    /* The estimate is the fitter's (after MCMC its posterior mean, at which it also computed
     * SSE and log L for the information criteria); the samples give the sd. */
    const double *est = res->params;
    double *sd = ns ? malloc(n * P * sizeof *sd) : NULL;
    /* Voxel by voxel, independent: every loop over voxels below runs on all cores. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < (ns ? n : 0); i++) {
        for (int k = 0; k < P; k++) {
            const dm_param_info *x = &mi->params[k];
            const double *smp = res->samples + i * ns * P + k;
            double mean_unused;
            if (x->periodic)
                dm_circular_mean_std(smp, ns, P, x->lo, x->hi, &mean_unused, &sd[i * P + k]);
            else
                dm_mean_std(smp, ns, P, &mean_unused, &sd[i * P + k]);
        }
    }
    /* One map per parameter, and its posterior sd and samples after MCMC. */
    double *col = malloc(n * (ns > 1 ? ns : 1) * sizeof *col);
    for (int k = 0; k < P && rc == 0; k++) {
        char name[128];
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) col[i] = est[i * P + k];
        rc = write_map(dir, mi->params[k].name, p, 1, col, map_type);
        if (rc == 0 && ns) {
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < n; i++) col[i] = sd[i * P + k];
            snprintf(name, sizeof name, "%s_std", mi->params[k].name);
            rc = write_map(dir, name, p, 1, col, map_type);
        }
        if (rc == 0 && ns && r->save_samples) {
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < n; i++)
                for (int s = 0; s < ns; s++) col[i * ns + s] = res->samples[(i * ns + s) * P + k];
            snprintf(name, sizeof name, "%s_samples", mi->params[k].name);
            rc = write_map(dir, name, p, ns, col, map_type);
        }
    }
    free(col);

    /* Derived outputs. */
    if (rc == 0 && mi->noutputs > 0) {
        int W = mi->output_width;
        double *out = calloc(n * W, sizeof *out);
        double *disp = calloc(n * mi->noutputs, sizeof *disp);
#pragma omp parallel
        {
            double *work = malloc((size_t)(ns ? ns : 1) * W * sizeof *work);
#pragma omp for schedule(static)
            for (size_t i = 0; i < n; i++)
                derive_voxel(mi, f, est + i * P, ns ? res->samples + i * ns * P : NULL, ns,
                             p->voxin + i * mi->voxel_width, out + i * W, disp + i * mi->noutputs,
                             work);
            free(work);
        }
        double *buf = malloc(n * 3 * sizeof *buf);
        for (int o = 0; o < mi->noutputs && rc == 0; o++) {
            const dm_output_info *x = &mi->outputs[o];
            for (size_t i = 0; i < n; i++)
                for (int c = 0; c < x->width; c++)
                    buf[i * x->width + c] = out[i * W + x->column + c];
            rc = write_map(dir, x->name, p, x->width, buf, map_type);
            if (rc == 0 && ns && x->kind == DM_OUTK_AXIS) {
                char name[128];
                snprintf(name, sizeof name, "%s_dispersion", x->name);
                for (size_t i = 0; i < n; i++) buf[i] = disp[i * mi->noutputs + o];
                rc = write_map(dir, name, p, 1, buf, map_type);
            }
        }
        free(buf);
        free(out);
        free(disp);
    }

    /* Information criteria from the log-likelihood at the estimate; P counts free parameters. */
    if (rc == 0 && r->ic) {
        int free_params = 0;
        for (int k = 0; k < P; k++)
            if (!(p->cfg.fixed_mask >> k & 1)) free_params++;
        double *bic = malloc(n * sizeof *bic), *aic = malloc(n * sizeof *aic);
        for (size_t i = 0; i < n; i++) {
            double logl = res->stats[i * DM_NSTATS + DM_STAT_LOGL];
            bic[i] = free_params * log((double)p->M) - 2 * logl;
            aic[i] = 2 * free_params - 2 * logl;
        }
        rc = write_map(dir, "BIC", p, 1, bic, map_type);
        if (rc == 0) rc = write_map(dir, "AIC", p, 1, aic, map_type);
        free(bic);
        free(aic);
    }
    if (rc == 0 && r->predicted) {
        double *pred = malloc(n * p->M * sizeof *pred);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            f->predict(est + i * P, p->meas, p->M, p->voxin + i * mi->voxel_width, pred + i * p->M);
        rc = write_map(dir, "predicted", p, p->M, pred, map_type);
        free(pred);
    }
    /* The status map covers every voxel of the grid (0 outside the mask). */
    if (rc == 0) {
        double *st = malloc(p->nvox * sizeof *st);
        for (size_t v = 0; v < p->nvox; v++) st[v] = p->status[v];
        char *path = dm_path_join(dir, "status.nii.gz");
        rc = dm_volume_write(path, &p->data, 1, st, DM_OUT_UINT8);
        free(path);
        free(st);
    }
    free(sd);
    return rc;
}
