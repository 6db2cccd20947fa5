/* The inputs of `dimoc commit` beside the tractogram's dictionary, read and checked against the
 * data's grid and put in the fit's order: the signal's rows, the peaks of the extra-cellular
 * compartment, a scalar map as data, the clusters' representatives, the per-streamline files
 * (--groups, --blur-apply-to, --lambda-weights) and images (--lambda-iso-weights, --iso-mask,
 * --confidence-map), the dictionary's grid and options.  Every error names its file. */
#include "commit_run/commit_inputs.h"
#include "dti/dti_fit.h"
#include "io/bigalloc.h"
#include "io/space.h"
#include "tractogram/tractogram.h"
#include "io/volume.h"
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

int dm_commit_read_peaks(void *arg)
{
    dm_commit_peaks_read *r = arg;
    const dm_commit_options *o = r->o;
    if (dm_volume_read(o->peaks, &r->p) != 0) return -1;
    if (dm_volume_check_same_grid(&r->p, o->peaks, r->data, o->data) != 0) return -1;
    if (r->p.nt % 3 != 0)
        return dm_set_error("%s: %d volumes is not a peaks image (3 volumes per peak: x, y, z)",
                            o->peaks, r->p.nt);
    return 0;
}

/* The peaks of the voxels of the fit (world directions, norms their amplitudes): from the
 * --peaks image (p, read by dm_commit_read_peaks), or the principal direction of a tensor fit of
 * the data.  *npeaks set. */
float *dm_commit_fit_peaks(const dm_volume *p, const dm_dwi *w, const dm_commit_dict *d,
                           int threads, int *npeaks)
{
    float *out = NULL;
    if (p) {
        *npeaks = p->nt / 3;
        const size_t nvox = DM_NVOX(p);
        out = malloc((size_t)(d->nvox ? d->nvox : 1) * p->nt * sizeof *out);
#pragma omp parallel for schedule(static) num_threads(threads)
        for (long v = 0; v < (out ? d->nvox : 0); v++)
            for (int k = 0; k < p->nt; k++) {
                double x = p->data[(size_t)d->vox[v] + (size_t)k * nvox];
                out[(size_t)v * p->nt + k] = isfinite(x) ? (float)x : 0.0f;
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

/* volume-fractions: a 3D map and the mask, as a one-sample "DWI" of no b = 0 (b 1000, as
 * COMMIT's scheme for scalar data; no gradient: the response is 1 whatever the direction). */
int dm_commit_scalar_map_read(const dm_commit_options *o, dm_dwi *w)
{
    memset(w, 0, sizeof *w);
    w->data_path = o->data;
    w->mask_path = o->mask;
    if (dm_volume_read(o->data, &w->data) != 0) return -1;
    if (w->data.nt != 1)
        return dm_set_error("%s: %d volumes; --model volume-fractions takes a 3D map", o->data,
                            w->data.nt);
    if (o->mask) {
        if (dm_volume_read(o->mask, &w->mask) != 0) return -1;
        if (w->mask.nt > 1) return dm_set_error("%s: a 4D image; a mask is 3D", o->mask);
        if (dm_volume_check_same_grid(&w->mask, o->mask, &w->data, o->data) != 0) return -1;
    }
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

/* One value per streamline of the fit from a per-streamline file (--groups, --lambda-weights,
 * --blur-apply-to): one a line of the tractogram, or with --blur-clust-thr either that (each
 * representative takes the line of the input streamline it is; *by_input 1) or one per
 * representative, in the input's order (COMMIT's form: one per cluster).  The file's line of
 * value k: input_of[k] + 1 when *by_input, else k + 1.  NULL with the error set. */
static float *per_streamline(const dm_commit_options *o, const char *path, const dm_tck *t,
                             const long *input_of, long ninput, int *by_input)
{
    *by_input = 0;
    if (!input_of || ninput == t->count) {
        float *v = NULL;
        return dm_tractogram_weights(path, t, o->tractogram, &v) == 0 ? v : NULL;
    }
    /* "dps:NAME": the input's values, one per input streamline (kept by the clustering) */
    const dm_tck input = {.count = ninput, .ndps = t->ndps, .dps = t->dps};
    float *v = NULL;
    long n = 0;
    if (dm_tractogram_values(path, &input, o->tractogram, &v, &n) != 0) return NULL;
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

int dm_commit_read_groups(const dm_commit_options *o, const dm_tck *t, const long *input_of,
                          long ninput, const dm_commit_dict *d, dm_commit_groups *g)
{
    int by_input;
    float *label = per_streamline(o, o->groups, t, input_of, ninput, &by_input);
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
unsigned char *dm_commit_read_blur_apply(const dm_commit_options *o, const dm_tck *t,
                                         const long *input_of, long ninput)
{
    int by_input;
    float *v = per_streamline(o, o->blur_apply_to, t, input_of, ninput, &by_input);
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
double *dm_commit_lasso_weights(const dm_commit_options *o, const dm_tck *t, const long *input_of,
                                long ninput, const dm_commit_dict *d, const dm_dwi *w,
                                const dm_commit_operator *A, int niso)
{
    double *cw = malloc((size_t)(A->ncols ? A->ncols : 1) * sizeof *cw);
    if (!cw) {
        dm_set_error("commit: out of memory for the lasso's weights");
        return NULL;
    }
    for (long j = 0; j < A->ncols; j++) cw[j] = 1;
    float *v = NULL;
    if (o->lambda_weights) {
        int by_input;
        if (!(v = per_streamline(o, o->lambda_weights, t, input_of, ninput, &by_input))) goto fail;
        for (long s = 0; s < t->count; s++)
            for (int k = 0; k < A->op.nic && d->column[s] >= 0; k++)
                cw[(long)k * d->nkept + d->column[s]] = v[s];
        free(v);
    }
    if (o->lambda_iso_weights) {
        dm_volume m;
        const char *path = o->lambda_iso_weights;
        if (dm_volume_read(path, &m) != 0) goto fail;
        int rc = m.nt > 1 ? dm_set_error("%s: a 4D image; --lambda-iso-weights is 3D", path)
                          : dm_volume_check_same_grid(&m, path, &w->data, o->data);
        for (long vx = 0; rc == 0 && vx < d->nvox; vx++) {
            const long c0 = dm_commit_iso_col(&A->op, vx);
            const size_t at = d->vox[vx];
            const double x = m.data[at];
            if (c0 < 0) continue;
            if (!isfinite(x) || x < 0)
                rc = dm_set_error("%s: voxel (%zu, %zu, %zu): %g is not a weight (finite and >= 0)",
                                  path, at % (size_t)m.nx, at / (size_t)m.nx % (size_t)m.ny,
                                  at / ((size_t)m.nx * m.ny), x);
            for (int i = 0; i < niso; i++) cw[c0 + (long)i * A->op.niv] = x;
        }
        dm_volume_free(&m);
        if (rc != 0) goto fail;
    }
    return cw;
fail:
    free(cw);
    return NULL;
}

/* --iso-mask: the balls only in the voxels of the fit where the image is nonzero (COMMIT's
 * filename_iso_mask: ISOcompartments tests ptrISO[v] == 0). */
int dm_commit_apply_iso_mask(const dm_commit_options *o, const dm_dwi *w, const dm_commit_dict *d,
                             dm_commit_operator *A)
{
    dm_volume m;
    if (dm_volume_read(o->iso_mask, &m) != 0) return -1;
    int rc = m.nt > 1 ? dm_set_error("%s: a 4D image; --iso-mask is 3D", o->iso_mask)
                      : dm_volume_check_same_grid(&m, o->iso_mask, &w->data, o->data);
    unsigned char *on = rc == 0 ? malloc((size_t)(d->nvox ? d->nvox : 1)) : NULL;
    if (rc == 0 && !on) rc = dm_set_error("commit: out of memory");
    for (long v = 0; rc == 0 && v < d->nvox; v++) on[v] = m.data[d->vox[v]] != 0;
    if (rc == 0) rc = dm_commit_operator_iso_mask(A, on);
    free(on);
    dm_volume_free(&m);
    return rc;
}

/* --confidence-map: per row of the fit (voxel, measurement) its weight, as COMMIT's fit(): a 3D
 * map repeated over the measurements or a 4D one of the data's volumes, NaN read as 0, rescaled
 * to [0, 1] over the voxels of the fit with --confidence-map-rescale; one of a single value over
 * them is not used (COMMIT's warning), *used 0.  NULL with the error set on a bad map. */
float *dm_commit_read_confidence(const dm_commit_options *o, const dm_dwi *w,
                                 const dm_commit_dict *d, int *used)
{
    dm_volume c;
    *used = 0;
    if (dm_volume_read(o->confidence_map, &c) != 0) return NULL;
    const int ns = w->nvol;
    if (dm_volume_check_same_grid(&c, o->confidence_map, &w->data, o->data) != 0 ||
        (c.nt != 1 && c.nt != ns)) {
        if (c.nt != 1 && c.nt != ns)
            dm_set_error("%s: %d volumes; a confidence map has 1 or the data's %d",
                         o->confidence_map, c.nt, ns);
        dm_volume_free(&c);
        return NULL;
    }
    const size_t nvox = DM_NVOX(&c);
    float *r = malloc((size_t)(d->nvox ? d->nvox : 1) * ns * sizeof *r);
    if (!r) {
        dm_volume_free(&c);
        dm_set_error("commit: out of memory for the confidence map");
        return NULL;
    }
    float lo = INFINITY, hi = -INFINITY;
    for (long v = 0; v < d->nvox; v++)
        for (int s = 0; s < ns; s++) {
            float x = (float)c.data[(size_t)d->vox[v] + (c.nt == 1 ? 0 : (size_t)s * nvox)];
            x = isnan(x) ? 0.0f : x;
            r[(size_t)v * ns + s] = x;
            lo = fminf(lo, x);
            hi = fmaxf(hi, x);
        }
    dm_volume_free(&c);
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

/* The dictionary's grid: the data's world -> voxel matrix and the mask binarised (> 0) into
 * *mask (malloc'd; NULL without a mask).  `data` may be a header alone. */
int dm_commit_make_grid(const dm_volume *data, const char *data_path, const dm_volume *maskvol,
                        dm_commit_grid *g, unsigned char **mask)
{
    *g = (dm_commit_grid){data->nx, data->ny, data->nz, {{0}}, NULL};
    *mask = NULL;
    dm_affine v2w, w2v;
    dm_volume_vox2world(data, &v2w);
    if (dm_affine_invert(&v2w, &w2v) != 0)
        return dm_set_error("%s: the voxel -> world matrix is singular", data_path);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) g->w2v[i][j] = w2v.m[i][j];
    if (maskvol && maskvol->data) {
        const size_t nvox = DM_NVOX(data);
        if (!(*mask = malloc(nvox))) return dm_set_error("commit: out of memory");
        for (size_t i = 0; i < nvox; i++) (*mask)[i] = maskvol->data[i] > 0;
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
