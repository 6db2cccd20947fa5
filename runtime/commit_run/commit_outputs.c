/* The outputs of a COMMIT fit in memory, handed to a sink (see commit_outputs.h). */
#include "commit_run/commit_outputs.h"
#include "commit_run/side_job.h"
#include "io/bigalloc.h"
#include "util/error.h"
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

/* With blur, as COMMIT, a weight is times the streamline's blurred length (its copies' weight x
 * length, the sum of its segments) over its own length in the mask. */
double dm_commit_streamline_weight(const dm_commit_dict *d, const double *xo, int blur, long s)
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

/* Each streamline's weight as streamline_weights.txt has it: with clusters a line per input
 * streamline, the representative's weight at its index (0 for the others).  NULL with the error
 * set. */
static double *line_weights(const dm_commit_dict *d, const double *xo, int blur,
                            const long *input_of, long ninput, int threads, long *nlines)
{
    *nlines = input_of ? ninput : d->nstr;
    long *fit_of = input_of ? malloc((size_t)(ninput ? ninput : 1) * sizeof *fit_of) : NULL;
    double *w = malloc((size_t)(*nlines ? *nlines : 1) * sizeof *w);
    if ((input_of && !fit_of) || !w) {
        free(fit_of);
        free(w);
        dm_set_error("commit: out of memory for the weights");
        return NULL;
    }
    for (long i = 0; fit_of && i < ninput; i++) fit_of[i] = -1;
    for (long m = 0; fit_of && m < d->nstr; m++) fit_of[input_of[m]] = m;
    const long n = *nlines;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long i = 0; i < n; i++)
        w[i] = dm_commit_streamline_weight(d, xo, blur, fit_of ? fit_of[i] : i);
    free(fit_of);
    return w;
}

static void add_map(dm_commit_made *m, const char *name, const double *value)
{
    m->name[m->nmaps] = name;
    m->value[m->nmaps++] = value;
}

int dm_commit_outputs(const dm_commit_options *o, dm_commit_fitted *f, const dm_commit_sink *sink,
                      dm_provenance *prov, dm_commit_summary *sum)
{
    const dm_tck *t = f->t;
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
    const long *input_of = f->input_of, ninput = f->ninput;
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
    dm_commit_made made = {0};
    int rc = -1;

    /* the coefficients of the original problem, maps, errors */
    t1 = dm_now_seconds();
    const long nv = d->nvox, nf = d->nkept, ne = A->op.ne;
    const int ns = f->w->nvol;
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
    made.xo = xo;
    for (long s = 0; s < d->nstr; s++) made.nonzero += d->column[s] >= 0 && xo[d->column[s]] > 0;
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
    if (lesion_model && !(xw = lesion_weights(d, ic, iso, xo, &rfac, &nlesion))) goto end;
    if (lesion_model && nlesion == 0)
        dm_warn("%s: no lesion found (no voxel of the fit with a lesion coefficient > 0)",
                o->iso_mask);
    made.weights = line_weights(d, nlesion ? xw : xo, dm_commit_blur_on(dopt), input_of, ninput,
                                threads, &made.nweights);
    if (!made.weights) goto end;
    add_map(&made, "compartment_IC.nii.gz", ic);
    add_map(&made, "compartment_EC.nii.gz", ec);
    if (nlesion) { /* the lesion map and factors; compartment_ISO all 0, as COMMIT */
        add_map(&made, "compartment_LESION.nii.gz", iso);
        add_map(&made, "R_scaling_factor.nii.gz", rfac);
    }
    add_map(&made, "compartment_ISO.nii.gz", nlesion ? NULL : iso);
    made.ncompartments = made.nmaps;
    if (sink->compartments(sink->user, f, &made) != 0) goto end;
    if (conf_used) { /* the errors of the data unweighted (COMMIT's fit_RMSE...) */
        dm_commit_operator plain = *A;
        plain.op.row_w = NULL;
        dm_commit_cpu_ax(&plain, x, yhat, wruns, threads);
    } else if (!fitted && (gpu ? dm_commit_gpu_ax(gpu, yhat) != 0
                               : (dm_commit_cpu_ax(A, x, yhat, wruns, threads), 0))) {
        goto end;
    }
    if (gpu) { /* its last use is behind: released (device memory, context) off the path */
        snprintf(device, sizeof device, "%s", dm_commit_gpu_device(gpu));
        dm_side_start(&gc, release_gpu, gpu);
        f->gpu = gpu = NULL;
    }
    const double *ym = conf_used ? y0 : y, *yf = fitted ? fitted : yhat;
    double sq_all = 0;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long v = 0; v < nv; v++) {
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
    for (long v = 0; v < nv; v++) sq_all += sq_v[v]; /* in voxel order */
    add_map(&made, "fit_RMSE.nii.gz", rmse);
    add_map(&made, "fit_NRMSE.nii.gz", nrmse);
    if (conf_used) {
        add_map(&made, "fit_RMSE_adjusted.nii.gz", rmse_adj);
        add_map(&made, "fit_NRMSE_adjusted.nii.gz", nrmse_adj);
    }
    if (sink->errors(sink->user, f, &made) != 0) goto end;
    const long nonzero = made.nonzero;
    t_write = dm_now_seconds() - t1;
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
    free(made.weights);
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
