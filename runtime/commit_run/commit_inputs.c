/* The inputs of `dimoc commit` beside the tractogram's dictionary, read and checked against the
 * data's grid and put in the fit's order: the signal's rows, the peaks of the extra-cellular
 * compartment, the clusters' representatives, the per-streamline values (--groups,
 * --blur-apply-to, --lambda-weights) and images (--lambda-iso-weights, --iso-mask,
 * --confidence-map), the dictionary's grid and options.  Every error names its input.  The
 * inputs come read (commit_files.c reads the command's files): nothing here reads a file. */
#include "commit_run/commit_inputs.h"
#include "dti/dti_fit.h"
#include "io/bigalloc.h"
#include "io/space.h"
#include "streamline/cluster.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The measured signal of the voxels of the fit, each divided by its mean b = 0 signal (COMMIT's
 * doNormalizeSignal; a voxel whose b = 0 mean is not positive gets 0; without any b = 0
 * measurement, as COMMIT, the signal as it is). */
double *dm_commit_signal_rows(const dm_dwi *w, const dm_commit_dict *d, int threads)
{
    const int ns = w->nvol;
    const size_t nvox = DM_NVOX(&w->data);
    double *y = dm_big_alloc((size_t)(d->nvox ? d->nvox : 1) * ns * sizeof *y);
    if (!y) return NULL;
    /* blocks of voxels, volume after volume: the image is read along its rows, not a volume
     * apart for each value, and the block's rows of y stay in cache */
    enum { BLOCK = 256 };
    const long nblocks = (d->nvox + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
    for (long blk = 0; blk < nblocks; blk++) {
        const long v0 = blk * BLOCK, v1 = v0 + BLOCK < d->nvox ? v0 + BLOCK : d->nvox;
        double b0[BLOCK] = {0};
        int n0 = 0;
        for (int s = 0; s < ns; s++) {
            if (w->bval[s] > DM_BZERO_MAX) continue;
            const double *img = w->data.data + (size_t)s * nvox;
            for (long v = v0; v < v1; v++) b0[v - v0] += img[d->vox[v]];
            n0++;
        }
        for (long v = v0; v < v1; v++) b0[v - v0] = n0 ? b0[v - v0] / n0 : 0;
        for (int s = 0; s < ns; s++) { /* without b = 0 measurements (a scalar map) as it is */
            const double *img = w->data.data + (size_t)s * nvox;
            for (long v = v0; v < v1; v++) {
                const double S = img[d->vox[v]], m = b0[v - v0];
                y[(size_t)v * ns + s] = !isfinite(S) ? 0 : n0 == 0 ? S : m > 0 ? S / m : 0;
            }
        }
    }
    return y;
}

/* The peaks of the voxels of the fit (world directions, norms their amplitudes): from the
 * --peaks image (p, read by dm_commit_read_peaks), or the principal direction of a tensor fit of
 * the data.  *npeaks set. */
float *dm_commit_fit_peaks(const dm_image_view *p, const dm_dwi *w, const dm_commit_dict *d,
                           int threads, int *npeaks)
{
    float *out = NULL;
    if (p) {
        const int nt = (int)dm_view_nt(p);
        if (nt % 3 != 0) {
            dm_set_error("%s: %d volumes is not a peaks image (3 volumes per peak: x, y, z)",
                         p->name, nt);
            return NULL;
        }
        *npeaks = nt / 3;
        const size_t nx = p->shape[0], ny = p->shape[1];
        out = malloc((size_t)(d->nvox ? d->nvox : 1) * nt * sizeof *out);
#pragma omp parallel for schedule(static) num_threads(threads)
        for (long v = 0; v < (out ? d->nvox : 0); v++) {
            const size_t i = d->vox[v];
            for (int k = 0; k < nt; k++) {
                double x = dm_view_at(p, i % nx, i / nx % ny, i / nx / ny, (size_t)k);
                out[(size_t)v * nt + k] = isfinite(x) ? (float)x : 0.0f;
            }
        }
        if (!out) dm_set_error("commit: out of memory for the peaks");
        return out;
    }
    dm_dti_protocol proto;
    if (dm_dti_protocol_init(&proto, w->nvol, w->bval, w->dir) != 0) return NULL;
    *npeaks = 1;
    out = calloc((size_t)(d->nvox ? d->nvox : 1) * 3, sizeof *out);
    const size_t nvox = DM_NVOX(&w->data);
    int failed = !out;
#pragma omp parallel if (!failed) num_threads(threads)
    {
        double *sig = malloc((size_t)w->nvol * sizeof *sig),
               *work = malloc(2 * (size_t)w->nvol * sizeof *work);
#pragma omp for schedule(dynamic, 256)
        for (long v = 0; v < d->nvox; v++) {
            if (!sig || !work) continue;
            for (int s = 0; s < w->nvol; s++)
                sig[s] = w->data.data[(size_t)d->vox[v] + (size_t)s * nvox];
            dm_dti_result r;
            int st = dm_dti_fit_voxel(&proto, sig, work, &r);
            if (st == DM_DTI_FITTED || st == DM_DTI_OLS_ONLY)
                for (int k = 0; k < 3; k++) out[3 * v + k] = (float)r.vec[0][k];
        }
        free(sig);
        free(work);
    }
    dm_dti_protocol_free(&proto);
    if (!out) dm_set_error("commit: out of memory for the peaks");
    return out;
}

int dm_commit_scalar_table(dm_dwi *w)
{
    w->nvol = 1;
    w->bval = malloc(sizeof *w->bval);
    w->dir = calloc(3, sizeof *w->dir);
    w->shell_of = calloc(1, sizeof *w->shell_of);
    if (!w->bval || !w->dir || !w->shell_of) return dm_set_error("commit: out of memory");
    w->bval[0] = 1000;
    w->nshell = 1;
    w->shell_b[0] = 1000;
    w->shell_count[0] = 1;
    return 0;
}

/* --blur-clust-thr (COMMIT's blur_clust_thr): t becomes its clusters' representatives, in the
 * input's order; *input_of (malloc'd, per representative its input index) and *ninput the
 * input's count, for the weights' file.  Without it *input_of stays NULL. */
int dm_commit_cluster_tractogram(const dm_commit_options *o, dm_tck *t, int threads,
                                 long **input_of, long *ninput, long **cluster_of)
{
    *input_of = NULL;
    *cluster_of = NULL;
    *ninput = t->count;
    if (!(o->blur_clust_thr > 0)) return 0;
    dm_streamline_clusters c;
    if (dm_streamline_cluster(t->xyz, t->start, t->count, o->blur_clust_thr, threads, &c) != 0)
        return -1;
    const long n = c.nclusters;
    unsigned char *is_rep = calloc((size_t)(t->count ? t->count : 1), 1);
    long *in = malloc((size_t)(n ? n : 1) * sizeof *in);
    dm_tck r = {.count = n, .header_count = n, .properties = t->properties};
    r.npoints = malloc((size_t)(n ? n : 1) * sizeof *r.npoints);
    r.start = malloc((size_t)(n + 1) * sizeof *r.start);
    if (is_rep && in && r.npoints && r.start) {
        for (long k = 0; k < n; k++) is_rep[c.rep[k]] = 1;
        long m = 0;
        r.start[0] = 0;
        for (long i = 0; i < t->count; i++)
            if (is_rep[i]) {
                in[m] = i;
                r.npoints[m] = t->npoints[i];
                r.start[m + 1] = r.start[m] + t->npoints[i];
                m++;
            }
        r.xyz = malloc((size_t)(r.start[n] ? r.start[n] : 1) * 3 * sizeof *r.xyz);
    }
    *cluster_of = c.cluster; /* kept for streamline_clusters.txt */
    c.cluster = NULL;
    dm_streamline_clusters_free(&c);
    free(is_rep);
    if (!r.xyz) {
        free(*cluster_of);
        *cluster_of = NULL;
        free(in);
        free(r.npoints);
        free(r.start);
        return dm_set_error("commit: out of memory for the clusters' representatives");
    }
    for (long k = 0; k < n; k++)
        memcpy(r.xyz + 3 * r.start[k], t->xyz + 3 * t->start[in[k]],
               (size_t)r.npoints[k] * 3 * sizeof *r.xyz);
    t->properties = NULL; /* now r's, with the input's per-streamline values and grid (the
                           * values stay one per input streamline: per_streamline maps them) */
    r.grid = t->grid;
    r.ndps = t->ndps;
    r.dps = t->dps;
    r.ngroups = t->ngroups;
    r.groups = t->groups;
    t->ndps = t->ngroups = 0;
    t->dps = NULL;
    t->groups = NULL;
    dm_tck_free(t);
    *t = r;
    *input_of = in;
    return 0;
}

/* One value per streamline of the fit from a per-streamline input (--groups, --lambda-weights,
 * --blur-apply-to's values): one per streamline of the tractogram, or with --blur-clust-thr
 * either that (each representative takes the value of the input streamline it is; *by_input
 * 1) or one per representative, in the input's order (COMMIT's form: one per cluster).  The
 * file's line of value k: input_of[k] + 1 when *by_input, else k + 1.  NULL with the error
 * set. */
static float *per_streamline(const dm_commit_options *o, const dm_commit_values *vals,
                             const dm_tck *t, const long *input_of, long ninput, int *by_input)
{
    *by_input = 0;
    const long n = vals->n;
    const char *path = vals->name;
    if (!input_of || ninput == t->count) {
        if (n != t->count) {
            dm_set_error("%s: %ld weight%s, but %s holds %ld streamline%s (one weight per "
                         "streamline, in its order)",
                         path, n, n == 1 ? "" : "s", o->tractogram, t->count,
                         t->count == 1 ? "" : "s");
            return NULL;
        }
    }
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) {
        dm_set_error("commit: out of memory");
        return NULL;
    }
    memcpy(v, vals->v, (size_t)n * sizeof *v);
    if (n == t->count) return v;
    *by_input = 1;
    float *rep = n == ninput ? malloc((size_t)(t->count ? t->count : 1) * sizeof *rep) : NULL;
    for (long k = 0; rep && k < t->count; k++) rep[k] = v[input_of[k]];
    free(v);
    if (n == ninput && !rep) dm_set_error("commit: out of memory");
    if (n != ninput)
        dm_set_error("%s: %ld value%s, but %s holds %ld streamlines, %ld of them the clusters' "
                     "representatives of --blur-clust-thr (one value per streamline, or per "
                     "representative, in the tractogram's order)",
                     path, n, n == 1 ? "" : "s", o->tractogram, ninput, t->count);
    return rep;
}

void dm_commit_groups_free(dm_commit_groups *g)
{
    free(g->start);
    free(g->cols);
    free(g->w);
    memset(g, 0, sizeof *g);
}

int dm_commit_read_groups(const dm_commit_options *o, const dm_commit_values *labels,
                          const dm_tck *t, const long *input_of, long ninput,
                          const dm_commit_dict *d, dm_commit_groups *g)
{
    int by_input;
    float *label = per_streamline(o, labels, t, input_of, ninput, &by_input);
    if (!label) return -1;
    long top = -1;
    for (long s = 0; s < t->count; s++) {
        if (label[s] != floorf(label[s]) || label[s] > 1e9f) {
            dm_set_error("%s: line %ld: '%g' is not a group label (an integer >= 0)", o->groups,
                         (by_input ? input_of[s] : s) + 1, (double)label[s]);
            free(label); /* after the message, which prints it */
            return -1;
        }
        if (d->column[s] >= 0 && (long)label[s] > top) top = (long)label[s];
    }
    long *count = calloc((size_t)(top + 2), sizeof *count);
    g->start = calloc((size_t)(top + 2), sizeof *g->start);
    g->cols = malloc((size_t)(d->nkept ? d->nkept : 1) * sizeof *g->cols);
    g->w = malloc((size_t)(top + 2) * sizeof *g->w);
    if (!count || !g->start || !g->cols || !g->w) {
        free(count);
        free(label);
        dm_commit_groups_free(g);
        return dm_set_error("commit: out of memory for the groups");
    }
    for (long s = 0; s < t->count; s++)
        if (d->column[s] >= 0) count[(long)label[s]]++;
    long n = 0, at = 0;
    for (long l = 0; l <= top; l++) /* the labels in order, empty ones dropped */
        if (count[l]) {
            g->start[n++] = at;
            at += count[l];
            count[l] = g->start[n - 1]; /* now the fill position of label l */
        }
    g->start[n] = at;
    g->n = n;
    for (long s = 0; s < t->count; s++)
        if (d->column[s] >= 0) g->cols[count[(long)label[s]]++] = d->column[s];
    free(count);
    free(label);
    return 0;
}

/* --blur-apply-to: one 0 or 1 per streamline of the tractogram (COMMIT's blur_apply_to). */
unsigned char *dm_commit_read_blur_apply(const dm_commit_options *o, const dm_commit_values *vals,
                                         const dm_tck *t, const long *input_of, long ninput)
{
    int by_input;
    float *v = per_streamline(o, vals, t, input_of, ninput, &by_input);
    if (!v) return NULL;
    unsigned char *on = malloc((size_t)(t->count ? t->count : 1));
    if (!on) {
        free(v);
        dm_set_error("commit: out of memory");
        return NULL;
    }
    for (long s = 0; s < t->count; s++) {
        if (v[s] != 0 && v[s] != 1) {
            dm_set_error("%s: line %ld: '%g' is not 0 or 1 (blur this streamline or not)",
                         o->blur_apply_to, (by_input ? input_of[s] : s) + 1, (double)v[s]);
            free(on);
            free(v);
            return NULL;
        }
        on[s] = v[s] == 1;
    }
    free(v);
    return on;
}

/* The lasso's weights per column (commit_solve.h: dm_commit_reg.col_w), 1 where none is given.
 * --lambda-weights: one per streamline of the tractogram (COMMIT's dictIC_params['coeff_weights'],
 * of which set_regularisation keeps the kept streamlines'), each IC response's column of a
 * streamline the same; --lambda-iso-weights: an image on the data's grid read at the voxels with
 * balls (COMMIT's set_wLasso_ISO), each ball of a voxel the same.  Weights are finite and >= 0.
 * NULL with the error set. */
double *dm_commit_lasso_weights(const dm_commit_options *o, const dm_commit_values *lw,
                                const dm_image_view *iso_w, const dm_tck *t,
                                const long *input_of, long ninput, const dm_commit_dict *d,
                                const dm_commit_operator *A, int niso)
{
    double *cw = malloc((size_t)(A->ncols ? A->ncols : 1) * sizeof *cw);
    if (!cw) {
        dm_set_error("commit: out of memory for the lasso's weights");
        return NULL;
    }
    for (long j = 0; j < A->ncols; j++) cw[j] = 1;
    float *v = NULL;
    if (lw) {
        int by_input;
        if (!(v = per_streamline(o, lw, t, input_of, ninput, &by_input))) goto fail;
        for (long s = 0; s < t->count; s++)
            for (int k = 0; k < A->op.nic && d->column[s] >= 0; k++)
                cw[(long)k * d->nkept + d->column[s]] = v[s];
        free(v);
    }
    if (iso_w) {
        const dm_image_view *m = iso_w;
        const char *path = m->name;
        const size_t nx = m->shape[0], ny = m->shape[1];
        int rc = dm_view_nt(m) > 1 ? dm_set_error("%s: a 4D image; --lambda-iso-weights is 3D", path)
                                   : 0;
        for (long vx = 0; rc == 0 && vx < d->nvox; vx++) {
            const long c0 = dm_commit_iso_col(&A->op, vx);
            const size_t at = d->vox[vx];
            const double x = dm_view_at(m, at % nx, at / nx % ny, at / (nx * ny), 0);
            if (c0 < 0) continue;
            if (!isfinite(x) || x < 0)
                rc = dm_set_error("%s: voxel (%zu, %zu, %zu): %g is not a weight (finite and >= 0)",
                                  path, at % nx, at / nx % ny, at / (nx * ny), x);
            for (int i = 0; i < niso; i++) cw[c0 + (long)i * A->op.niv] = x;
        }
        if (rc != 0) goto fail;
    }
    return cw;
fail:
    free(cw);
    return NULL;
}

/* --iso-mask: the balls only in the voxels of the fit where the image is nonzero (COMMIT's
 * filename_iso_mask: ISOcompartments tests ptrISO[v] == 0). */
int dm_commit_apply_iso_mask(const dm_commit_options *o, const dm_image_view *m,
                             const dm_commit_dict *d, dm_commit_operator *A)
{
    int rc = dm_view_nt(m) > 1 ? dm_set_error("%s: a 4D image; --iso-mask is 3D", o->iso_mask) : 0;
    const size_t nx = m->shape[0], ny = m->shape[1];
    unsigned char *on = rc == 0 ? malloc((size_t)(d->nvox ? d->nvox : 1)) : NULL;
    if (rc == 0 && !on) rc = dm_set_error("commit: out of memory");
    for (long v = 0; rc == 0 && v < d->nvox; v++) {
        const size_t at = d->vox[v];
        on[v] = dm_view_at(m, at % nx, at / nx % ny, at / (nx * ny), 0) != 0;
    }
    if (rc == 0) rc = dm_commit_operator_iso_mask(A, on);
    free(on);
    return rc;
}

/* --confidence-map: per row of the fit (voxel, measurement) its weight, as COMMIT's fit(): a 3D
 * map repeated over the measurements or a 4D one of the data's volumes, NaN read as 0, rescaled
 * to [0, 1] over the voxels of the fit with --confidence-map-rescale; one of a single value over
 * them is not used (COMMIT's warning), *used 0.  NULL with the error set on a bad map. */
float *dm_commit_read_confidence(const dm_commit_options *o, const dm_image_view *c, int ns,
                                 const dm_commit_dict *d, int *used)
{
    *used = 0;
    const int nt = (int)dm_view_nt(c);
    if (nt != 1 && nt != ns) {
        dm_set_error("%s: %d volumes; a confidence map has 1 or the data's %d", o->confidence_map,
                     nt, ns);
        return NULL;
    }
    const size_t nx = c->shape[0], ny = c->shape[1];
    float *r = malloc((size_t)(d->nvox ? d->nvox : 1) * ns * sizeof *r);
    if (!r) {
        dm_set_error("commit: out of memory for the confidence map");
        return NULL;
    }
    float lo = INFINITY, hi = -INFINITY;
    for (long v = 0; v < d->nvox; v++) {
        const size_t at = d->vox[v];
        for (int s = 0; s < ns; s++) {
            float x = (float)dm_view_at(c, at % nx, at / nx % ny, at / (nx * ny),
                                        nt == 1 ? 0 : (size_t)s);
            x = isnan(x) ? 0.0f : x;
            r[(size_t)v * ns + s] = x;
            lo = fminf(lo, x);
            hi = fmaxf(hi, x);
        }
    }
    if (!(lo < hi)) return r; /* one value: not used */
    if (!isfinite(lo) || !isfinite(hi) || (lo < 0 && !o->confidence_rescale)) {
        dm_set_error("%s: a value %s in the voxels of the fit (confidences are finite and >= 0; "
                     "--confidence-map-rescale maps them to [0, 1])",
                     o->confidence_map, !isfinite(lo) || !isfinite(hi) ? "not finite" : "< 0");
        free(r);
        return NULL;
    }
    if (o->confidence_rescale)
        for (size_t i = 0; i < (size_t)d->nvox * ns; i++) r[i] = (r[i] - lo) / (hi - lo);
    *used = 1;
    return r;
}

/* The dictionary's grid: the data's world -> voxel matrix and the mask binarised (> 0). */
int dm_commit_make_grid(int nx, int ny, int nz, const dm_affine *v2w, const char *data_name,
                        const double *maskvals, dm_commit_grid *g, unsigned char **mask)
{
    *g = (dm_commit_grid){nx, ny, nz, {{0}}, NULL};
    *mask = NULL;
    dm_affine w2v;
    if (dm_affine_invert(v2w, &w2v) != 0)
        return dm_set_error("%s: the voxel -> world matrix is singular", data_name);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) g->w2v[i][j] = w2v.m[i][j];
    if (maskvals) {
        const size_t nvox = (size_t)nx * ny * nz;
        if (!(*mask = malloc(nvox ? nvox : 1))) return dm_set_error("commit: out of memory");
        for (size_t i = 0; i < nvox; i++) (*mask)[i] = maskvals[i] > 0;
        g->mask = *mask;
    }
    return 0;
}

dm_commit_dict_options dm_commit_dict_options_of(const dm_commit_options *o, int threads)
{
    return (dm_commit_dict_options){.shift = {o->shift[0], o->shift[1], o->shift[2]},
                                    .min_seg_len = o->min_seg_len,
                                    .min_len = o->min_len,
                                    .max_len = o->max_len,
                                    .threads = threads,
                                    .blur_core = o->blur_core,
                                    .blur_gauss = o->blur_gauss,
                                    .blur_spacing = o->blur_spacing,
                                    .blur_gauss_min = o->blur_gauss_min};
}

int dm_commit_nothing_kept(const dm_commit_options *o)
{
    return dm_set_error("%s: no streamline passes through %s%s (is the tractogram in this image's "
                        "space?)",
                        o->tractogram, o->mask ? "the mask " : "the image ",
                        o->mask ? o->mask : o->data);
}

int dm_commit_options_check(const dm_commit_options *o)
{
    if (!(o->blur_clust_thr >= 0 && isfinite(o->blur_clust_thr)))
        return dm_set_error("commit: --blur-clust-thr must be >= 0 (mm; 0: no clustering)");
    if (!(o->blur_core >= 0 && o->blur_gauss >= 0 && isfinite(o->blur_core) &&
          isfinite(o->blur_gauss)))
        return dm_set_error("commit: --blur-core-extent and --blur-gauss-extent must be >= 0");
    const int blur = o->blur_core > 0 || o->blur_gauss > 0;
    if (blur && !(o->blur_spacing > 0 && isfinite(o->blur_spacing) && o->blur_gauss_min > 0 &&
                  o->blur_gauss_min < 1))
        return dm_set_error("commit: blur: --blur-spacing must be > 0 and --blur-gauss-min in "
                            "(0, 1)");
    if (o->blur_apply_to && !blur)
        return dm_set_error("commit: --blur-apply-to needs a blur (--blur-core-extent or "
                            "--blur-gauss-extent > 0)");
    if (o->confidence_rescale && !o->confidence_map)
        return dm_set_error("commit: --confidence-map-rescale needs --confidence-map");
    if (!(o->lambda_frac >= 0 && o->lambda_frac <= 1 && o->group_frac >= 0 &&
          o->group_frac <= 1 && o->lambda_ec_frac >= 0 && o->lambda_ec_frac <= 1 &&
          o->lambda_iso_frac >= 0 && o->lambda_iso_frac <= 1))
        return dm_set_error("commit: --lambda, --lambda-group, --lambda-ec and --lambda-iso must "
                            "be in [0, 1] (fractions of lambda_max)");
    if (o->lambda_weights && !(o->lambda_frac > 0))
        return dm_set_error("commit: --lambda-weights weighs the lasso of --lambda: give --lambda "
                            "F > 0 too");
    if (o->lambda_iso_weights && !(o->lambda_iso_frac > 0))
        return dm_set_error("commit: --lambda-iso-weights weighs the lasso of --lambda-iso: give "
                            "--lambda-iso F > 0 too");
    if (o->debias && !(o->lambda_frac > 0 || o->group_frac > 0 || o->lambda_ec_frac > 0 ||
                       o->lambda_iso_frac > 0))
        return dm_set_error("commit: --debias refits a regularised fit: give --lambda, "
                            "--lambda-group, --lambda-ec or --lambda-iso too");
    if ((o->group_frac > 0) != (o->groups != NULL))
        return dm_set_error("commit: --lambda-group and --groups go together (see 'dimoc help "
                            "commit')");
    if (!(o->model.d_par > 0 && isfinite(o->model.d_par)))
        return dm_set_error("commit: --d-par must be > 0");
    if (!(o->min_seg_len >= 0 && o->min_len >= 0 && o->max_len > o->min_len))
        return dm_set_error("commit: lengths: --min-seg-len >= 0, 0 <= --min-length < "
                            "--max-length");
    if (!(o->tol_fun >= 0 && o->tol_x >= 0 && o->vf_thr >= 0 && o->vf_thr <= 1))
        return dm_set_error("commit: --tol and --tol-x must be >= 0, --vf-thr in [0, 1]");
    return 0;
}

/* --allow-negative: a comma list of ic, ec, iso into bits 0, 1, 2 (NULL: none). */
int dm_commit_parse_blocks(const char *text, unsigned *blocks)
{
    static const char *const names[] = {"ic", "ec", "iso"};
    *blocks = 0;
    for (const char *p = text; p && *p;) {
        size_t n = strcspn(p, ",");
        int b = 0;
        while (b < 3 && !(strlen(names[b]) == n && strncmp(p, names[b], n) == 0)) b++;
        if (b == 3)
            return dm_set_error("commit: --allow-negative '%s' is not a list of ic, ec, iso", text);
        *blocks |= 1u << b;
        p += n + (p[n] == ',');
    }
    return 0;
}

void dm_commit_default_radii(dm_commit_model *m)
{
    m->nradii = 0;
    m->radius[m->nradii++] = 0.01e-6;
    for (int i = 0; i < 20; i++) m->radius[m->nradii++] = (0.5 + 7.5 * i / 19.0) * 1e-6;
}
