/* The outputs of `dimoc commit` (see commit_outputs.h). */
#include "commit_run/commit_outputs.h"
#include "commit_run/side_job.h"
#include "io/bigalloc.h"
#include "io/formats.h"
#include "tractogram/tractogram.h"
#include "io/volume.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"
#include "util/progress.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dm_commit_clustering_provenance(dm_provenance *prov, const dm_commit_options *o, long ninput,
                                     long nclusters, double seconds)
{
    dm_provenance_num(prov, DM_PROV_RESULT, "blur_clust_thr", o->blur_clust_thr);
    dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_input", (double)ninput);
    dm_provenance_num(prov, DM_PROV_RESULT, "clusters", (double)nclusters);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_clustering", seconds);
}

static int release_gpu(void *g)
{
    dm_commit_gpu_close(g);
    return 0;
}

/* Several IC columns per streamline (one per cylinder radius, column c nf + f): each
 * streamline's weight is their sum, as COMMIT's streamline_weights.txt and compartment_IC; xo
 * becomes [weights (nf) | EC | ISO]. */
static void fold_ic(double *xo, long nf, int nic, long ncols)
{
    if (nic <= 1) return;
    for (long f = 0; f < nf; f++)
        for (int c = 1; c < nic; c++) xo[f] += xo[(long)c * nf + f];
    memmove(xo + nf, xo + (long)nic * nf, (size_t)(ncols - (long)nic * nf) * sizeof *xo);
}

/* compartment_IC: each voxel's sum of weight x segment length, its segments taken in the
 * dictionary's (streamline) order as one thread would.  Threads own ranges of voxels and each
 * walks the segments for its own: the sums, and so the map, do not depend on the thread count.
 * A streamline whose voxels (their lowest and highest index) miss a range is skipped there; one
 * whose segments come in voxel order (the dictionary's own, cut or read) is entered at its
 * first segment in the range, found by bisection, and left at the range's end, so that a
 * streamline crossing many ranges is not read whole by every thread. */
static void ic_map(const dm_commit_dict *d, const double *xo, int threads, double *ic)
{
    const long nv = d->nvox, nf = d->nkept;
    const int shares = threads > 0 ? threads : 1;
    unsigned *span = shares > 1 ? malloc((size_t)(nf ? nf : 1) * 2 * sizeof *span) : NULL;
    unsigned char *in_order = span ? malloc((size_t)(nf ? nf : 1)) : NULL;
    if (!in_order) {
        free(span);
        span = NULL;
    }
#pragma omp parallel for schedule(static) num_threads(shares) if (span)
    for (long f = 0; f < (span ? nf : 0); f++) {
        unsigned a = UINT_MAX, b = 0;
        int sorted = 1;
        for (long q = d->str_start[f]; q < d->str_start[f + 1]; q++) {
            a = d->seg_vox[q] < a ? d->seg_vox[q] : a;
            b = d->seg_vox[q] > b ? d->seg_vox[q] : b;
            sorted &= q == d->str_start[f] || d->seg_vox[q] >= d->seg_vox[q - 1];
        }
        span[2 * f] = a;
        span[2 * f + 1] = b;
        in_order[f] = (unsigned char)sorted;
    }
#pragma omp parallel for schedule(static, 1) num_threads(shares)
    for (int t = 0; t < shares; t++) {
        const unsigned lo = (unsigned)(nv * t / shares), hi = (unsigned)(nv * (t + 1) / shares);
        for (long f = 0; f < nf; f++) {
            if (span && (span[2 * f + 1] < lo || span[2 * f] >= hi)) continue;
            long q = d->str_start[f];
            const long end = d->str_start[f + 1];
            if (span && in_order[f]) { /* the first segment at or after lo, then up to hi */
                long a = q, b = end;
                while (a < b) {
                    const long m = a + (b - a) / 2;
                    if (d->seg_vox[m] < lo)
                        a = m + 1;
                    else
                        b = m;
                }
                for (q = a; q < end && d->seg_vox[q] < hi; q++)
                    ic[d->seg_vox[q]] += xo[f] * d->seg_len[q];
                continue;
            }
            for (; q < end; q++) {
                const unsigned v = d->seg_vox[q];
                if (v >= lo && v < hi) ic[v] += xo[f] * d->seg_len[q];
            }
        }
    }
    free(span);
    free(in_order);
}

/* Writes one map of the voxels of the fit (value per voxel; NULL: all 0) on the data's grid. */
static int write_map(const char *dir, const char *name, const dm_dwi *w, const dm_commit_dict *d,
                     const double *value)
{
    const size_t nvox = DM_NVOX(&w->data);
    double *img = calloc(nvox, sizeof *img);
    if (!img) return dm_set_error("commit: out of memory for the maps");
    for (long v = 0; value && v < d->nvox; v++) img[d->vox[v]] = value[v];
    char *path = dm_volume_output_path(dir, name);
    int rc = path ? dm_volume_write(path, &w->data, 1, img, DM_OUT_FLOAT32) : -1;
    free(path);
    free(img);
    return rc;
}

/* With blur, as COMMIT, a weight is written times the streamline's blurred length (its
 * copies' weight x length, the sum of its segments) over its own length in the mask.  The lines
 * are formatted by all threads, a block of streamlines each, and written in order. */
/* The weight of fitted streamline s (its column's coefficient; with blur, times the blurred
 * length over its own), 0 when it was left out of the fit. */
static double streamline_weight(const dm_commit_dict *d, const double *xo, int blur, long s)
{
    const long c = s >= 0 ? d->column[s] : -1;
    double x = c >= 0 ? xo[c] : 0.0;
    if (c >= 0 && blur) {
        double tot = 0;
        for (long q = d->str_start[c]; q < d->str_start[c + 1]; q++) tot += d->seg_len[q];
        x *= tot / d->length[s];
    }
    return x;
}

static int write_weights(const char *dir, const dm_commit_dict *d, const double *xo, int blur,
                         const long *input_of, long ninput, int threads)
{
    /* with clusters: a line per input streamline, the representative's weight at its index */
    const long nlines = input_of ? ninput : d->nstr;
    long *fit_of = input_of ? malloc((size_t)(ninput ? ninput : 1) * sizeof *fit_of) : NULL;
    if (input_of && !fit_of) return dm_set_error("commit: out of memory for the weights");
    for (long i = 0; fit_of && i < ninput; i++) fit_of[i] = -1;
    for (long m = 0; fit_of && m < d->nstr; m++) fit_of[input_of[m]] = m;
    enum { LINES = 1 << 14, LINE_BYTES = 32 }; /* "%.5e\n" of a double: at most 14 bytes */
    char *path = dm_path_join(dir, "streamline_weights.txt");
    FILE *f = path ? fopen(path, "w") : NULL;
    const long nblocks = (nlines + LINES - 1) / LINES;
    char *text = malloc((size_t)(nblocks ? nblocks : 1) * LINES * LINE_BYTES);
    size_t *len = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *len);
    int rc = 0;
    if (!f) {
        rc = dm_set_error("cannot write %s", path ? path : "streamline_weights.txt");
    } else if (!text || !len) {
        fclose(f);
        rc = dm_set_error("commit: out of memory for %s", path);
    } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long b = 0; b < nblocks; b++) {
            char *out = text + (size_t)b * LINES * LINE_BYTES;
            size_t n = 0;
            for (long i = b * LINES; i < nlines && i < (b + 1) * LINES; i++) {
                const long s = fit_of ? fit_of[i] : i;
                n += (size_t)snprintf(out + n, LINE_BYTES, "%.5e\n",
                                      streamline_weight(d, xo, blur, s));
            }
            len[b] = n;
        }
        for (long b = 0; b < nblocks; b++)
            fwrite(text + (size_t)b * LINES * LINE_BYTES, 1, len[b], f);
        if (ferror(f) | (fclose(f) != 0)) rc = dm_set_error("cannot write %s", path);
    }
    free(text);
    free(len);
    free(path);
    free(fit_of);
    return rc;
}

/* --blur-clust-thr: streamline_clusters.txt, per input streamline its cluster (numbered as
 * dicelib's, in the order they were founded; -1: an empty streamline) and 1 when it is its
 * cluster's representative (the streamline fitted), else 0. */
static int write_clusters(const char *dir, const long *cluster_of, const long *input_of, long nfit,
                          long ninput)
{
    char *path = dm_path_join(dir, "streamline_clusters.txt");
    FILE *f = path ? fopen(path, "w") : NULL;
    unsigned char *rep = calloc((size_t)(ninput ? ninput : 1), 1);
    int rc = 0;
    if (!f || !rep) {
        rc = dm_set_error("cannot write %s", path ? path : "streamline_clusters.txt");
    } else {
        for (long m = 0; m < nfit; m++) rep[input_of[m]] = 1;
        for (long i = 0; i < ninput; i++) fprintf(f, "%ld %d\n", cluster_of[i], rep[i]);
    }
    if (f && (ferror(f) | (fclose(f) != 0)) && rc == 0) rc = dm_set_error("cannot write %s", path);
    free(rep);
    free(path);
    return rc;
}

/* COMMIT's lesion model (volume-fractions with --iso-mask; models.pyx: ScalarMap._postprocess),
 * after the fit: in each voxel of lesion coefficient L > 0 the factor R = (IC - L) / IC (of the
 * maps in single precision; *rfac, 0 elsewhere), and each streamline's weight times the smallest
 * R > 0 of its voxels (1 when none).  Returns the weights so scaled (nkept; NULL with the error
 * set: out of memory); *nlesion the voxels of L > 0 (0: nothing scaled). */
static double *lesion_weights(const dm_commit_dict *d, const double *ic, const double *lesion,
                              const double *xo, double **rfac, long *nlesion)
{
    double *xw = malloc((size_t)(d->nkept ? d->nkept : 1) * sizeof *xw);
    *rfac = calloc((size_t)(d->nvox ? d->nvox : 1), sizeof **rfac);
    if (!xw || !*rfac) {
        free(xw);
        dm_set_error("commit: out of memory for the lesion model");
        return NULL;
    }
    *nlesion = 0;
    for (long v = 0; v < d->nvox; v++) {
        const float L = (float)lesion[v], I = (float)ic[v];
        if (L > 0) {
            (*rfac)[v] = (double)((I - L) / I);
            ++*nlesion;
        }
    }
    for (long f = 0; f < d->nkept; f++) {
        double r = 1;
        for (long q = d->str_start[f]; q < d->str_start[f + 1]; q++) {
            const double rv = (*rfac)[d->seg_vox[q]];
            if (rv > 0 && rv < r) r = rv;
        }
        xw[f] = xo[f] * r;
    }
    return xw;
}

/* filtered.tck (.trx, .trk: --format): the streamlines of weight > 0, in their order (written
 * by all threads); a TRX or .trk on the data's grid, with their weights (as
 * streamline_weights.txt has them) as dps "commit_weights". */
static int write_filtered(const char *dir, const dm_tck *t, const dm_commit_dict *d,
                          const dm_dwi *dwi, const double *xo, int blur, int threads, long *nonzero)
{
    char name[32];
    snprintf(name, sizeof name, "filtered%s", dm_tracts_format_ext(dm_tracts_format_chosen()));
    char *path = dm_path_join(dir, name);
    dm_tract_grid grid;
    dm_tract_grid_of(&dwi->data, &grid);
    dm_tractogram_writer *w =
        path ? dm_tractogram_open(path, "source: dimoc commit\n", &grid) : NULL;
    free(path);
    if (!w) return -1;
    size_t *start = malloc((size_t)(d->nstr ? d->nstr : 1) * sizeof *start);
    int *npts = malloc((size_t)(d->nstr ? d->nstr : 1) * sizeof *npts);
    float *weight = malloc((size_t)(d->nstr ? d->nstr : 1) * sizeof *weight);
    if (!start || !npts || !weight) {
        free(start);
        free(npts);
        free(weight);
        dm_tractogram_abort(w);
        return dm_set_error("commit: out of memory for %s", name);
    }
    long n = 0;
    for (long s = 0; s < d->nstr; s++)
        if (d->column[s] >= 0 && xo[d->column[s]] > 0) {
            start[n] = (size_t)t->start[s];
            weight[n] = (float)streamline_weight(d, xo, blur, s);
            npts[n++] = (int)t->npoints[s];
        }
    int rc = dm_tractogram_set_dps(w, "commit_weights", weight, n);
    if (rc == 0) rc = dm_tractogram_add_many(w, t->xyz, start, npts, n, threads > 0 ? threads : 1);
    free(start);
    free(npts);
    free(weight);
    *nonzero = n;
    if (rc != 0) {
        dm_tractogram_abort(w);
        return -1;
    }
    return dm_tractogram_close(w, (unsigned long long)n);
}

/* The outputs written on threads of their own (dm_side_job) while this one computes the error
 * maps: filtered.tck as soon as the weights are known, the weights' file and the compartment
 * maps once those are summed.  On the CPU the one A x product of the error maps is most of the
 * stage; on the GPU filtered.tck (about 0.9 GB for a million streamlines) is. */
typedef struct {
    const char *dir;
    const dm_tck *t;
    const dm_commit_dict *d;
    const dm_dwi *w;
    const double *xo;
    int blur, threads;
    long nonzero;
} filtered_job;

static int filtered_work(void *arg)
{
    filtered_job *j = arg;
    return write_filtered(j->dir, j->t, j->d, j->w, j->xo, j->blur, j->threads, &j->nonzero);
}

enum { MAX_COMPARTMENT_MAPS = 5 };

typedef struct {
    const char *dir;
    const dm_dwi *w;
    const dm_commit_dict *d;
    const double *weights;  /* xo, or the lesion model's */
    const long *input_of;   /* --blur-clust-thr: per fitted streamline its input index */
    const long *cluster_of; /* and per input streamline its cluster */
    long ninput;
    int blur, threads, nmaps;
    const char *name[MAX_COMPARTMENT_MAPS];
    const double *value[MAX_COMPARTMENT_MAPS];
} compartments_job;

static void add_map(compartments_job *j, const char *name, const double *value)
{
    j->name[j->nmaps] = name;
    j->value[j->nmaps++] = value;
}

static int compartments_work(void *arg)
{
    compartments_job *j = arg;
    int rc = write_weights(j->dir, j->d, j->weights, j->blur, j->input_of, j->ninput, j->threads);
    if (rc == 0 && j->cluster_of)
        rc = write_clusters(j->dir, j->cluster_of, j->input_of, j->d->nstr, j->ninput);
    for (int m = 0; rc == 0 && m < j->nmaps; m++)
        rc = write_map(j->dir, j->name[m], j->w, j->d, j->value[m]);
    return rc;
}

int dm_commit_write_outputs(const dm_commit_options *o, dm_commit_fitted *f, dm_provenance *prov,
                            dm_commit_summary *sum)
{
    const dm_tck *t = f->t;
    const dm_dwi *w = f->w;
    const dm_commit_dict *d = f->d;
    const dm_commit_dict_options *dopt = f->dopt;
    const dm_commit_dirs *dirs = f->dirs;
    const dm_commit_kernels *k = f->k;
    const dm_commit_operator *A = f->A;
    const double *x = f->x, *y = f->y, *y0 = f->y0;
    const float *conf = f->conf;
    const int conf_used = f->conf_used, threads = f->threads, dict_gpu = f->dict_gpu;
    dm_commit_cpu *cpu = f->cpu;
    dm_commit_gpu *gpu = f->gpu;
    const unsigned char *blur_apply = f->blur_apply;
    const long *input_of = f->input_of, *cluster_of = f->cluster_of, ninput = f->ninput;
    const dm_commit_fista_result fr = f->fr, fr_reg = f->fr_reg;
    const int nnls_iterations = f->nnls_iterations;
    const long debias_columns = f->debias_columns;
    const double t0 = f->t0, t_load = f->t_load, t_clust = f->t_clust, t_dict = f->t_dict,
                 t_kern = f->t_kern, t_op = f->t_op, t_setup = f->t_setup, t_solve = f->t_solve;
    double t1, t_write;
    double *xo = NULL, *ic = NULL, *ec = NULL, *iso = NULL, *rmse = NULL, *nrmse = NULL,
           *yhat = NULL, *wruns = NULL, *rmse_adj = NULL, *nrmse_adj = NULL,
           *sq_v = NULL,                 /* each voxel's squared residual */
               *xw = NULL, *rfac = NULL; /* the lesion model's weights and factors */
    char device[256] = "cpu";
    dm_side_job gc = {0}; /* the GPU released while the maps are written */
    int rc = -1;

    /* the coefficients of the original problem, maps, errors */
    t1 = dm_now_seconds();
    const long nv = d->nvox, nf = d->nkept, ne = A->op.ne;
    const int ns = w->nvol;
    xo = malloc((size_t)A->ncols * sizeof *xo);
    ic = calloc((size_t)nv, sizeof *ic);
    ec = calloc((size_t)nv, sizeof *ec);
    iso = calloc((size_t)nv, sizeof *iso);
    rmse = malloc((size_t)nv * sizeof *rmse);
    nrmse = malloc((size_t)nv * sizeof *nrmse);
    rmse_adj = calloc((size_t)nv, sizeof *rmse_adj);
    nrmse_adj = calloc((size_t)nv, sizeof *nrmse_adj);
    /* the fitted signal A x: the solver's last product on the CPU (the same sums), else made */
    const double *fitted = !conf_used ? dm_commit_cpu_fitted(cpu) : NULL;
    yhat = fitted ? NULL : dm_big_alloc((size_t)A->nrows * sizeof *yhat);
    sq_v = malloc((size_t)(nv ? nv : 1) * sizeof *sq_v);
    wruns = malloc((size_t)(A->nruns ? A->nruns : 1) * A->op.nic * sizeof *wruns);
    if (!xo || !ic || !ec || !iso || !rmse || !nrmse || (!yhat && !fitted) || !wruns || !rmse_adj ||
        !nrmse_adj || !sq_v) {
        dm_set_error("commit: out of memory for the outputs");
        goto end;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long j = 0; j < A->ncols; j++) xo[j] = x[j] / A->scale[j];
    fold_ic(xo, nf, A->op.nic, A->ncols);
    dm_outdir od;
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto end;
    dm_side_job fj, cj = {0};
    filtered_job fjob = {od.path, t, d, w, xo, dm_commit_blur_on(dopt), threads, 0};
    dm_side_start(&fj, filtered_work, &fjob);
    ic_map(d, xo, threads, ic);
    for (long e = 0; e < ne; e++) /* every zeppelin of the entry, as COMMIT's map */
        for (int z = 0; z < A->op.nec; z++) ec[A->ec_vox[e]] += xo[nf + z * ne + e];
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long v = 0; v < nv; v++) { /* xo is folded: its ISO block starts nic - 1 blocks sooner */
        const long c0 = dm_commit_iso_col(&A->op, v);
        for (int i = 0; i < k->niso && c0 >= 0; i++)
            iso[v] += xo[c0 - (long)(A->op.nic - 1) * nf + i * A->op.niv];
    }
    long nlesion = 0;
    const int lesion_model = o->model.scalar && o->iso_mask;
    /* an error before the first file was once written (no weights for the lesion model, A x
     * on the GPU) comes before the writers' */
    int early = lesion_model && !(xw = lesion_weights(d, ic, iso, xo, &rfac, &nlesion)) ? -1 : 0;
    if (early == 0 && lesion_model && nlesion == 0)
        dm_warn("%s: no lesion found (no voxel of the fit with a lesion coefficient > 0)",
                o->iso_mask);
    compartments_job cjob = {.dir = od.path,
                             .w = w,
                             .d = d,
                             .weights = nlesion ? xw : xo,
                             .blur = dm_commit_blur_on(dopt),
                             .input_of = input_of,
                             .cluster_of = cluster_of,
                             .ninput = ninput,
                             .threads = threads};
    add_map(&cjob, "compartment_IC.nii.gz", ic);
    add_map(&cjob, "compartment_EC.nii.gz", ec);
    if (nlesion) { /* the lesion map and factors; compartment_ISO all 0, as COMMIT */
        add_map(&cjob, "compartment_LESION.nii.gz", iso);
        add_map(&cjob, "R_scaling_factor.nii.gz", rfac);
    }
    add_map(&cjob, "compartment_ISO.nii.gz", nlesion ? NULL : iso);
    if (early == 0) dm_side_start(&cj, compartments_work, &cjob);
    if (early == 0 && conf_used) { /* the errors of the data unweighted (COMMIT's fit_RMSE...) */
        dm_commit_operator plain = *A;
        plain.op.row_w = NULL;
        dm_commit_cpu_ax(&plain, x, yhat, wruns, threads);
    } else if (early == 0 && !fitted &&
               (gpu ? dm_commit_gpu_ax(gpu, yhat) != 0
                    : (dm_commit_cpu_ax(A, x, yhat, wruns, threads), 0))) {
        early = -1;
    }
    if (gpu) { /* its last use is behind: released (device memory, context) off the path */
        snprintf(device, sizeof device, "%s", dm_commit_gpu_device(gpu));
        dm_side_start(&gc, release_gpu, gpu);
        f->gpu = gpu = NULL;
    }
    const double *ym = conf_used ? y0 : y, *yf = fitted ? fitted : yhat;
    double sq_all = 0;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long v = 0; v < (early == 0 ? nv : 0); v++) {
        double se = 0, sy = 0, cse = 0, cs = 0, csy = 0;
        for (int s = 0; s < ns; s++) {
            double r = (double)(float)ym[v * ns + s] - (double)(float)yf[v * ns + s];
            se += r * r;
            sy += ym[v * ns + s] * ym[v * ns + s];
            if (conf_used) { /* COMMIT's fit_RMSE_adjusted, fit_NRMSE_adjusted */
                const double c = conf[v * ns + s];
                cse += c * r * r;
                cs += c;
                csy += c * ym[v * ns + s] * ym[v * ns + s];
            }
        }
        sq_v[v] = se;
        rmse[v] = sqrt(se / ns);
        nrmse[v] = sy < 1e-12 ? 0 : sqrt(se / sy);
        if (conf_used) {
            rmse_adj[v] = cs < 1e-12 ? 0 : sqrt(cse / cs);
            nrmse_adj[v] = csy < 1e-12 ? 0 : sqrt(cse / csy);
        }
    }
    for (long v = 0; early == 0 && v < nv; v++) sq_all += sq_v[v]; /* in voxel order */
    int wr = early;
    if (wr == 0) wr = write_map(od.path, "fit_RMSE.nii.gz", w, d, rmse);
    if (wr == 0) wr = write_map(od.path, "fit_NRMSE.nii.gz", w, d, nrmse);
    if (wr == 0 && conf_used) wr = write_map(od.path, "fit_RMSE_adjusted.nii.gz", w, d, rmse_adj);
    if (wr == 0 && conf_used) wr = write_map(od.path, "fit_NRMSE_adjusted.nii.gz", w, d, nrmse_adj);
    /* the first error in the order the files were once written in, one after another: the
     * weights and the compartment maps, the error maps, filtered.tck */
    if (dm_side_end(&cj, early == 0) != 0) wr = -1;
    if (dm_side_end(&fj, wr == 0) != 0) wr = -1;
    const long nonzero = fjob.nonzero;
    t_write = dm_now_seconds() - t1;
    if (wr == 0) {
        dm_provenance_str(prov, DM_PROV_RESULT, "model", o->model_name);
        char from[4200];
        snprintf(from, sizeof from, "read from %.4096s (dimoc commit --stage dictionary)",
                 o->dictionary ? o->dictionary : "");
        dm_provenance_str(prov, DM_PROV_RESULT, "dictionary", o->dictionary ? from : "built");
        dm_provenance_str(prov, DM_PROV_RESULT, "peaks",
                          !o->model.ec_on ? "none (no extra-cellular compartment)"
                          : o->peaks      ? o->peaks
                                          : "the principal direction of a tensor fit");
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)d->nstr);
        if (input_of) dm_commit_clustering_provenance(prov, o, ninput, d->nstr, t_clust);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_kept", (double)nf);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_nonzero", (double)nonzero);
        dm_provenance_num(prov, DM_PROV_RESULT, "voxels", (double)nv);
        dm_provenance_num(prov, DM_PROV_RESULT, "segments", (double)d->nseg);
        dm_provenance_num(prov, DM_PROV_RESULT, "ic_responses", (double)k->nic);
        dm_provenance_num(prov, DM_PROV_RESULT, "ec_responses", (double)k->nec);
        dm_provenance_num(prov, DM_PROV_RESULT, "ec_compartments", (double)ne * A->op.nec);
        if (o->model.ec_on) { /* the zeppelins' d_perps, one EC column per peak each */
            char list[32 * DM_COMMIT_MAX_PERP] = "";
            for (int z = 0; z < o->model.nperp; z++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.9g", z ? "," : "",
                         o->model.d_perp[z]);
            dm_provenance_str(prov, DM_PROV_RESULT, "d_perps", list);
        }
        dm_provenance_num(prov, DM_PROV_RESULT, "iso_compartments", (double)k->niso * A->op.niv);
        if (lesion_model) dm_provenance_num(prov, DM_PROV_RESULT, "lesion_voxels", (double)nlesion);
        if (o->confidence_map)
            dm_provenance_str(prov, DM_PROV_RESULT, "confidence_map",
                              conf_used
                                  ? (o->confidence_rescale ? "used, rescaled to [0, 1]" : "used")
                                  : "not used: one value over the voxels of the fit");
        dm_provenance_num(prov, DM_PROV_RESULT, "lut_directions", (double)dirs->n);
        if (dm_commit_blur_on(dopt))
            dm_provenance_num(prov, DM_PROV_RESULT, "blur_copies",
                              (double)dm_commit_blur_copies(dopt, NULL, NULL, NULL));
        if (blur_apply) { /* --blur-apply-to: how many streamlines were blurred */
            long nb = 0;
            for (long s = 0; s < t->count; s++) nb += blur_apply[s];
            dm_provenance_num(prov, DM_PROV_RESULT, "blur_streamlines", (double)nb);
        }
        dm_provenance_num(prov, DM_PROV_RESULT, "iterations", fr.iterations);
        dm_provenance_str(prov, DM_PROV_RESULT, "stopped", fr.stopped);
        dm_provenance_num(prov, DM_PROV_RESULT, "objective", fr.objective);
        dm_provenance_num(prov, DM_PROV_RESULT, "lasso_lambda", fr.lambda);
        dm_provenance_num(prov, DM_PROV_RESULT, "group_lasso_lambda", fr.lambda_group);
        dm_provenance_num(prov, DM_PROV_RESULT, "lasso_lambda_ec", fr.lambda_ec);
        dm_provenance_num(prov, DM_PROV_RESULT, "lasso_lambda_iso", fr.lambda_iso);
        dm_provenance_num(prov, DM_PROV_RESULT, "iterations_without_regularisation",
                          nnls_iterations);
        if (o->free_blocks) {
            char blocks[16] = "";
            for (int b = 0; b < 3; b++)
                if (o->free_blocks >> b & 1u)
                    snprintf(blocks + strlen(blocks), sizeof blocks - strlen(blocks), "%s%s",
                             *blocks ? "," : "", (const char *[]){"ic", "ec", "iso"}[b]);
            dm_provenance_str(prov, DM_PROV_RESULT, "blocks_allowed_negative", blocks);
        }
        if (o->debias) { /* the regularised fit before the refit on its support */
            dm_provenance_num(prov, DM_PROV_RESULT, "debias_ic_columns_kept",
                              (double)debias_columns);
            dm_provenance_num(prov, DM_PROV_RESULT, "iterations_regularised", fr_reg.iterations);
            dm_provenance_num(prov, DM_PROV_RESULT, "objective_regularised", fr_reg.objective);
        }
        dm_provenance_num(prov, DM_PROV_RESULT, "objective_rel_change", fr.rel_objective);
        dm_provenance_num(prov, DM_PROV_RESULT, "residual_sum_of_squares_float", sq_all);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_load", t_load);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_dictionary", t_dict);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_kernels", t_kern);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_operator", t_op);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_solver_setup", t_setup);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_solve", t_solve);
        dm_provenance_num(prov, DM_PROV_RESULT, "operator_products", fr.products);
        dm_provenance_str(prov, DM_PROV_RESULT, "device", device);
        dm_provenance_str(prov, DM_PROV_RESULT, "dictionary_device", dict_gpu ? "gpu" : "cpu");
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_write", t_write);
        char *path = dm_path_join(od.path, "provenance.json");
        wr = path ? dm_provenance_write(prov, path) : -1;
        free(path);
    }
    if (wr != 0) {
        dm_outdir_abort(&od);
        goto end;
    }
    if (dm_outdir_commit(&od) != 0) goto end;
    sum->streamlines = d->nstr;
    sum->kept = nf;
    sum->nonzero = nonzero;
    sum->voxels = nv;
    sum->segments = d->nseg;
    sum->ec_columns = ne * A->op.nec;
    sum->iterations = fr.iterations;
    sum->objective = fr.objective;
    sum->stopped = fr.stopped;
    sum->seconds = dm_now_seconds() - t0;
    rc = 0;
end:
    dm_side_end(&gc, 0);
    free(xo);
    free(ic);
    free(ec);
    free(iso);
    free(rmse);
    free(nrmse);
    free(xw);
    free(rfac);
    free(rmse_adj);
    free(nrmse_adj);
    free(yhat);
    free(sq_v);
    free(wruns);
    return rc;
}
