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
    char *path = dm_volume_output_path(dir, file);
    /* the predicted signal of a .mif's measurements carries their gradient table */
    const double *dw =
        !strcmp(name, "predicted") && p->data.dw_rows == nt ? p->data.dw_scheme : NULL;
    int rc = path ? dm_volume_write_dwi(path, &p->data, nt, vol, type, dw) : -1;
    free(path);
    free(vol);
    return rc;
}

/* The small maps of a fit (a value or a vector per voxel), queued and then written at once,
 * one per thread: a 200,000-voxel map is one compressed block, so one map at a time left all
 * but one core idle.  vals holds nt values per fitted voxel; the status map (full_grid) one
 * value per voxel of the grid. */
typedef struct map_job {
    char name[128];
    int nt, full_grid;
    double *vals;
    int rc;
    char error[512];
} map_job;

typedef struct map_queue {
    map_job *job;
    int n, cap;
} map_queue;

/* A new job's values (count doubles, zeroed), or NULL with the error. */
static double *queue_map(map_queue *q, const char *name, int nt, size_t count)
{
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 32;
        map_job *j = realloc(q->job, (size_t)cap * sizeof *j);
        if (!j) {
            dm_set_error("out of memory for output '%s'", name);
            return NULL;
        }
        q->job = j, q->cap = cap;
    }
    map_job *j = &q->job[q->n];
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", name);
    j->nt = nt;
    if (!(j->vals = calloc(count ? count : 1, sizeof *j->vals))) {
        dm_set_error("out of memory for output '%s'", name);
        return NULL;
    }
    q->n++;
    return j->vals;
}

static void write_job(const char *dir, const dm_problem *p, map_job *j, int type)
{
    if (j->full_grid) {
        char *path = dm_volume_output_path(dir, "status.nii.gz");
        j->rc = path ? dm_volume_write(path, &p->data, 1, j->vals, DM_OUT_UINT8) : -1;
        free(path);
    } else {
        j->rc = write_map(dir, j->name, p, j->nt, j->vals, type);
    }
    if (j->rc != 0) snprintf(j->error, sizeof j->error, "%s", dm_last_error());
}

/* Writes every queued map (none when write is 0: an error came first): the vector maps one
 * after another, each compressed on all cores (a 200,000-voxel vector map is several blocks,
 * which one thread would compress in turn while the others wait at the end), then the scalar
 * maps concurrently, one per thread; the first error in queue order.  Frees the queue. */
static int write_queue(const char *dir, const dm_problem *p, map_queue *q, int type, int write)
{
    int *order = malloc((size_t)(q->n ? q->n : 1) * sizeof *order), m = 0;
    for (int i = 0; write && order && i < q->n; i++)
        if (q->job[i].nt > 1)
            write_job(dir, p, &q->job[i], type);
        else
            order[m++] = i;
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < m; k++) write_job(dir, p, &q->job[order[k]], type);
    int rc = order || !write ? 0 : dm_set_error("%s: out of memory for the outputs", dir);
    free(order);
    for (int i = 0; i < q->n; i++) {
        if (rc == 0 && q->job[i].rc != 0) rc = dm_set_error("%s", q->job[i].error);
        free(q->job[i].vals);
    }
    free(q->job);
    memset(q, 0, sizeof *q);
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
    /* One map per parameter and its posterior sd; the samples after MCMC, large, each written
     * at once on all cores. */
    map_queue q = {0};
    for (int k = 0; k < P && rc == 0; k++) {
        char name[160];
        double *col = queue_map(&q, mi->params[k].name, 1, n);
        if (!col) {
            rc = -1;
            break;
        }
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) col[i] = est[i * P + k];
        if (ns) {
            snprintf(name, sizeof name, "%s_std", mi->params[k].name);
            if (!(col = queue_map(&q, name, 1, n))) {
                rc = -1;
                break;
            }
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < n; i++) col[i] = sd[i * P + k];
        }
    }
    if (rc == 0 && ns && r->save_samples) {
        double *col = malloc(n * ns * sizeof *col);
        if (!col) rc = dm_set_error("%s: out of memory for the samples", dir);
        for (int k = 0; k < P && rc == 0; k++) {
            char name[160];
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < n; i++)
                for (int s = 0; s < ns; s++) col[i * ns + s] = res->samples[(i * ns + s) * P + k];
            snprintf(name, sizeof name, "%s_samples", mi->params[k].name);
            rc = write_map(dir, name, p, ns, col, map_type);
        }
        free(col);
    }

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
        for (int o = 0; o < mi->noutputs && rc == 0; o++) {
            const dm_output_info *x = &mi->outputs[o];
            double *buf = queue_map(&q, x->name, x->width, n * x->width);
            if (!buf) {
                rc = -1;
                break;
            }
            for (size_t i = 0; i < n; i++)
                for (int c = 0; c < x->width; c++)
                    buf[i * x->width + c] = out[i * W + x->column + c];
            if (ns && x->kind == DM_OUTK_AXIS) {
                char name[160];
                snprintf(name, sizeof name, "%s_dispersion", x->name);
                if (!(buf = queue_map(&q, name, 1, n))) {
                    rc = -1;
                    break;
                }
                for (size_t i = 0; i < n; i++) buf[i] = disp[i * mi->noutputs + o];
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
        double *bic = queue_map(&q, "BIC", 1, n), *aic = bic ? queue_map(&q, "AIC", 1, n) : NULL;
        if (!aic) rc = -1;
        for (size_t i = 0; i < n && rc == 0; i++) {
            double logl = res->stats[i * DM_NSTATS + DM_STAT_LOGL];
            bic[i] = free_params * log((double)p->M) - 2 * logl;
            aic[i] = 2 * free_params - 2 * logl;
        }
    }
    if (rc == 0 && r->predicted) {
        double *pred = malloc(n * p->M * sizeof *pred);
        if (!pred) rc = dm_set_error("%s: out of memory for the predicted signal", dir);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < (pred ? n : 0); i++)
            f->predict(est + i * P, p->meas, p->M, p->voxin + i * mi->voxel_width, pred + i * p->M);
        if (rc == 0) rc = write_map(dir, "predicted", p, p->M, pred, map_type);
        free(pred);
    }
    /* The status map covers every voxel of the grid (0 outside the mask). */
    if (rc == 0) {
        double *st = queue_map(&q, "status", 1, p->nvox);
        if (!st) rc = -1;
        for (size_t v = 0; st && v < p->nvox; v++) st[v] = p->status[v];
        if (st) q.job[q.n - 1].full_grid = 1;
    }
    int wrc = write_queue(dir, p, &q, map_type, rc == 0); /* frees the queue in any case */
    if (rc == 0) rc = wrc;
    free(sd);
    return rc;
}
