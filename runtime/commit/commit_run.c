#include "commit/commit_run.h"
#include "commit/commit_pulses.h"

#include "commit/commit_dict.h"
#include "commit/commit_dictfile.h"
#include "commit/commit_cpu.h"
#include "commit/commit_dirs.h"
#include "commit/commit_gpu.h"
#include "gpu/gpu_device.h"
#include "commit/commit_operator.h"
#include "csd/dwi.h"
#include "dti/dti_fit.h"
#include "io/space.h"
#include "io/tck.h"
#include "io/volume.h"
#include "io/bigalloc.h"
#include "streamline/cluster.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/outdir.h"
#include "util/fsutil.h"
#include "util/progress.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The measured signal of the voxels of the fit, each divided by its mean b = 0 signal (COMMIT's
 * doNormalizeSignal; a voxel whose b = 0 mean is not positive gets 0; without any b = 0
 * measurement, as COMMIT, the signal as it is). */
static double *signal_rows(const dm_dwi *w, const dm_commit_dict *d, int threads)
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

/* The --peaks image read and checked (sh2peaks' layout: 3 volumes a peak) on a thread of its
 * own while the dictionary is built: it does not depend on it (side_job below). */
typedef struct {
    const dm_commit_options *o;
    const dm_volume *data; /* the grid it must share */
    dm_volume p;
} peaks_read;

static int read_peaks(void *arg)
{
    peaks_read *r = arg;
    const dm_commit_options *o = r->o;
    if (dm_volume_read(o->peaks, &r->p) != 0) return -1;
    if (dm_volume_check_same_grid(&r->p, o->peaks, r->data, o->data) != 0) return -1;
    if (r->p.nt % 3 != 0)
        return dm_set_error("%s: %d volumes is not a peaks image (3 volumes per peak: x, y, z)",
                            o->peaks, r->p.nt);
    return 0;
}

/* The peaks of the voxels of the fit (world directions, norms their amplitudes): from the
 * --peaks image (p, read by read_peaks), or the principal direction of a tensor fit of the
 * data.  *npeaks set. */
static float *fit_peaks(const dm_volume *p, const dm_dwi *w, const dm_commit_dict *d, int threads,
                        int *npeaks)
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
static int scalar_map_read(const dm_commit_options *o, dm_dwi *w)
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

/* Work on a thread of its own while this one goes on: the tractogram (often a gigabyte) read
 * while the data are; the GPU's driver, program and kernels made ready while the dictionary and
 * the operator are built.  Without a thread, the work is done at once. */
typedef struct {
    int (*work)(void *arg); /* 0, or -1 with the error set */
    void *arg;
    int rc;
    char error[2048]; /* the work's message (errors are per thread) */
    pthread_t thread;
    int running;
} side_job;

static void *side_main(void *p)
{
    side_job *j = p;
    j->rc = j->work(j->arg);
    if (j->rc != 0) snprintf(j->error, sizeof j->error, "%s", dm_last_error());
    return NULL;
}

static void side_start(side_job *j, int (*work)(void *), void *arg)
{
    *j = (side_job){.work = work, .arg = arg};
    j->running = pthread_create(&j->thread, NULL, side_main, j) == 0;
    if (!j->running) side_main(j);
}

/* Waits for the work: its result, its error set in this thread (set_error 0: left as it is,
 * after an error here came first). */
static int side_end(side_job *j, int set_error)
{
    if (j->running) pthread_join(j->thread, NULL);
    j->running = 0;
    return j->rc == 0 ? 0 : set_error ? dm_set_error("%s", j->error) : -1;
}

typedef struct {
    const char *path;
    dm_tck *t;
    int threads;
} tck_read;

static int read_tck(void *arg)
{
    tck_read *r = arg;
    return dm_tck_read_threads(r->path, r->t, r->threads);
}

/* Waits for the reader; other_rc is the result of what ran meanwhile (its error stands). */
static int tck_read_end(side_job *j, const tck_read *r, int other_rc)
{
    if (side_end(j, other_rc == 0) != 0 || other_rc != 0) return -1;
    if (r->t->count == 0) return dm_set_error("%s: no streamlines", r->path);
    return 0;
}

/* --blur-clust-thr (COMMIT's blur_clust_thr): t becomes its clusters' representatives, in the
 * input's order; *input_of (malloc'd, per representative its input index) and *ninput the
 * input's count, for the weights' file.  Without it *input_of stays NULL. */
static int cluster_tractogram(const dm_commit_options *o, dm_tck *t, int threads, long **input_of,
                              long *ninput, long **cluster_of)
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
    t->properties = NULL; /* now r's */
    dm_tck_free(t);
    *t = r;
    *input_of = in;
    return 0;
}

static void clustering_provenance(dm_provenance *prov, const dm_commit_options *o, long ninput,
                                  long nclusters, double seconds)
{
    dm_provenance_num(prov, DM_PROV_RESULT, "blur_clust_thr", o->blur_clust_thr);
    dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_input", (double)ninput);
    dm_provenance_num(prov, DM_PROV_RESULT, "clusters", (double)nclusters);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_clustering", seconds);
}

typedef struct {
    int ns;
    const char *gpus;
    int threads;
    dm_commit_gpu *g;
} gpu_prepare;

/* Arrays no later step reads, freed on a thread of their own while the solver runs: returning
 * gigabytes of pages takes a tenth of a second, at the exit otherwise. */
enum { MAX_DONE_WITH = 12 };

typedef struct {
    void *p[MAX_DONE_WITH];
    int n;
} done_with;

/* The array `ptr` handed to the job, and NULL in its owner. */
#define HAND_OVER(j, ptr) ((j)->p[(j)->n++] = (void *)(ptr), (ptr) = NULL)

static int free_done_with(void *arg)
{
    done_with *j = arg;
    for (int i = 0; i < j->n; i++) free(j->p[i]);
    return 0;
}

static int release_gpu(void *g)
{
    dm_commit_gpu_close(g);
    return 0;
}

static int prepare_gpu(void *arg)
{
    gpu_prepare *p = arg;
    return (p->g = dm_commit_gpu_prepare(p->ns, p->gpus, p->threads)) ? 0 : -1;
}

typedef struct {
    dm_progress *bar;
    int last;
} solve_progress;

static void on_iteration(void *arg, int iter, double objective)
{
    (void)objective;
    solve_progress *p = arg;
    dm_progress_add(p->bar, iter - p->last);
    p->last = iter;
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
    char *path = dm_path_join(dir, name);
    int rc = path ? dm_volume_write(path, &w->data, 1, img, DM_OUT_FLOAT32) : -1;
    free(path);
    free(img);
    return rc;
}

/* With blur, as COMMIT, a weight is written times the streamline's blurred length (its
 * copies' weight x length, the sum of its segments) over its own length in the mask.  The lines
 * are formatted by all threads, a block of streamlines each, and written in order. */
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
                const long c = s >= 0 ? d->column[s] : -1;
                double x = c >= 0 ? xo[c] : 0.0;
                if (c >= 0 && blur) {
                    double tot = 0;
                    for (long q = d->str_start[c]; q < d->str_start[c + 1]; q++)
                        tot += d->seg_len[q];
                    x *= tot / d->length[s];
                }
                n += (size_t)snprintf(out + n, LINE_BYTES, "%.5e\n", x);
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

/* filtered.tck: the streamlines of weight > 0, in their order (written by all threads). */
static int write_filtered(const char *dir, const dm_tck *t, const dm_commit_dict *d,
                          const double *xo, int threads, long *nonzero)
{
    char *path = dm_path_join(dir, "filtered.tck");
    dm_tck_writer *w = path ? dm_tck_open(path, "source: dimoc commit\n") : NULL;
    free(path);
    if (!w) return -1;
    size_t *start = malloc((size_t)(d->nstr ? d->nstr : 1) * sizeof *start);
    int *npts = malloc((size_t)(d->nstr ? d->nstr : 1) * sizeof *npts);
    if (!start || !npts) {
        free(start);
        free(npts);
        dm_tck_abort(w);
        return dm_set_error("commit: out of memory for filtered.tck");
    }
    long n = 0;
    for (long s = 0; s < d->nstr; s++)
        if (d->column[s] >= 0 && xo[d->column[s]] > 0) {
            start[n] = (size_t)t->start[s];
            npts[n++] = (int)t->npoints[s];
        }
    dm_tck_add_many(w, t->xyz, start, npts, n, threads > 0 ? threads : 1);
    free(start);
    free(npts);
    *nonzero = n;
    return dm_tck_close(w, (unsigned long long)n);
}

/* The outputs written on threads of their own (side_job) while this one computes the error
 * maps: filtered.tck as soon as the weights are known, the weights' file and the compartment
 * maps once those are summed.  On the CPU the one A x product of the error maps is most of the
 * stage; on the GPU filtered.tck (about 0.9 GB for a million streamlines) is. */
typedef struct {
    const char *dir;
    const dm_tck *t;
    const dm_commit_dict *d;
    const double *xo;
    int threads;
    long nonzero;
} filtered_job;

static int filtered_work(void *arg)
{
    filtered_job *j = arg;
    return write_filtered(j->dir, j->t, j->d, j->xo, j->threads, &j->nonzero);
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
        return dm_tck_weights_read(path, t->count, o->tractogram, &v) == 0 ? v : NULL;
    }
    float *v = NULL;
    long n = 0;
    if (dm_tck_values_read(path, &v, &n) != 0) return NULL;
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

/* The groups of --groups: one label per streamline of the tractogram (a non-negative integer),
 * a group per label over the streamlines in the fit (groups left empty dropped). */
typedef struct {
    long n;
    long *start, *cols;
    double *w;
} dm_commit_groups;

static void dm_commit_groups_free(dm_commit_groups *g)
{
    free(g->start);
    free(g->cols);
    free(g->w);
    memset(g, 0, sizeof *g);
}

static int read_groups(const dm_commit_options *o, const dm_tck *t, const long *input_of,
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
static unsigned char *read_blur_apply(const dm_commit_options *o, const dm_tck *t,
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
static double *lasso_weights(const dm_commit_options *o, const dm_tck *t, const long *input_of,
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

/* COMMIT's fit(debias=True) after a regularised fit x: the IC columns of x < 1e-15 left out of
 * the operator (fixed, nic nf flags), the rows where the streamlines left in predict no signal
 * (A x_s <= 0, x_s the IC part of x on that support, without row weights) set to 0 in y (and in
 * y0, the unweighted rows, when given).  Returns the columns kept, or -1 (out of memory). */
static long debias_support(const dm_commit_operator *A, long nic_cols, const double *x,
                           unsigned char *fixed, double *y, double *y0, int threads)
{
    double *xs = calloc((size_t)(A->ncols ? A->ncols : 1), sizeof *xs);
    double *ax = dm_big_alloc((size_t)(A->nrows ? A->nrows : 1) * sizeof *ax);
    double *runs = malloc((size_t)(A->nruns ? A->nruns : 1) * A->op.nic * sizeof *runs);
    long kept = -1;
    if (xs && ax && runs) {
        kept = 0;
        for (long j = 0; j < nic_cols; j++) {
            fixed[j] = !(x[j] >= 1e-15);
            xs[j] = fixed[j] ? 0 : x[j];
            kept += !fixed[j];
        }
        dm_commit_operator plain = *A;
        plain.op.row_w = NULL;
        dm_commit_cpu_ax(&plain, xs, ax, runs, threads);
        for (long i = 0; i < A->nrows; i++)
            if (!(ax[i] > 0)) {
                y[i] = 0;
                if (y0) y0[i] = 0;
            }
    }
    if (kept < 0) dm_set_error("commit: out of memory for --debias");
    free(xs);
    free(ax);
    free(runs);
    return kept;
}

/* --iso-mask: the balls only in the voxels of the fit where the image is nonzero (COMMIT's
 * filename_iso_mask: ISOcompartments tests ptrISO[v] == 0). */
static int apply_iso_mask(const dm_commit_options *o, const dm_dwi *w, const dm_commit_dict *d,
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
static float *read_confidence(const dm_commit_options *o, const dm_dwi *w, const dm_commit_dict *d,
                              int *used)
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
static int make_grid(const dm_volume *data, const char *data_path, const dm_volume *maskvol,
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

static dm_commit_dict_options dict_options(const dm_commit_options *o, int threads)
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

static int nothing_kept(const dm_commit_options *o)
{
    return dm_set_error("%s: no streamline passes through %s%s (is the tractogram in this image's "
                        "space?)",
                        o->tractogram, o->mask ? "the mask " : "the image ",
                        o->mask ? o->mask : o->data);
}

/* --stage dictionary [--part K/N]: the tractogram, the header of --data and --mask read; the
 * dictionary of the share cut and saved into --out (with part.json for a part). */
static int dictionary_stage(const dm_commit_options *o, int threads, dm_provenance *prov,
                            dm_commit_summary *sum)
{
    double t0 = dm_now_seconds();
    dm_tck t;
    memset(&t, 0, sizeof t);
    dm_volume data = {0}, maskvol = {0};
    unsigned char *mask = NULL, *blur_apply = NULL;
    long *input_of = NULL, ninput = 0, *cluster_of = NULL;
    dm_commit_dirs dirs = {0};
    dm_commit_dict d = {0};
    int rc = -1, use_gpu = 0;
    dm_commit_gpu *gpu = NULL;
    dm_gpu_probe probe; /* the driver starts while the inputs load */
    if (dm_gpu_probe_begin(&probe, o->device, "commit") != 0) return -1;
    side_job tj;
    tck_read tr = {o->tractogram, &t, threads};
    side_start(&tj, read_tck, &tr);
    /* the mask as dm_dwi_read (or the scalar map's reader) checks it */
    int vrc = dm_volume_read_header(o->data, &data);
    if (vrc == 0 && o->mask) vrc = dm_volume_read(o->mask, &maskvol);
    if (vrc == 0 && o->mask && maskvol.nt > 1)
        vrc = dm_set_error("%s: a 4D image; a mask is 3D", o->mask);
    if (vrc == 0 && o->mask)
        vrc = o->model.scalar ? dm_volume_check_same_grid(&maskvol, o->mask, &data, o->data)
                              : dm_volume_check_same_space(&maskvol, o->mask, &data, o->data);
    if (tck_read_end(&tj, &tr, vrc) != 0) goto done;
    double t_clust = dm_now_seconds();
    if (cluster_tractogram(o, &t, threads, &input_of, &ninput, &cluster_of) != 0) goto done;
    t_clust = dm_now_seconds() - t_clust;
    if (o->blur_apply_to && !(blur_apply = read_blur_apply(o, &t, input_of, ninput))) goto done;
    const double t_load = dm_now_seconds() - t0 - t_clust; /* the clustering timed apart */
    double t1 = dm_now_seconds();
    dm_commit_grid g;
    if (make_grid(&data, o->data, &maskvol, &g, &mask) != 0) goto done;
    if (dm_commit_dirs_make(o->ndirs, &dirs) != 0) goto done;
    size_t first, end;
    dm_part_range(&o->part, (size_t)t.count, &first, &end);
    dm_commit_dict_options dopt = dict_options(o, threads);
    dopt.blur_apply = blur_apply;
    /* on the GPU when there is one, as in a whole run (the blur's copies on the host) */
    if (dm_gpu_probe_end(&probe, &use_gpu) != 0) goto done;
    use_gpu = use_gpu && !dm_commit_blur_on(&dopt);
    if (use_gpu && !(gpu = dm_commit_gpu_prepare(data.nt > 0 ? data.nt : 1, o->gpus, threads)))
        goto done;
    if (use_gpu ? dm_commit_dict_cut_gpu(gpu, &t, (long)first, (long)end, &g, &dirs, &dopt, &d)
                : dm_commit_dict_cut(&t, (long)first, (long)end, &g, &dirs, &dopt, &d))
        goto done;
    if (d.nkept == 0 && o->part.n == 0) { /* a part's share may well miss the mask */
        nothing_kept(o);
        goto done;
    }
    dm_commit_dict_facts facts;
    dm_commit_dict_facts_make(&t, &g, (unsigned)dirs.n, &dopt, threads, &facts);
    const double t_dict = dm_now_seconds() - t1;
    t1 = dm_now_seconds();
    dm_outdir od;
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    int wr = dm_commit_dict_save(od.path, &facts, &d, (long)first, (long)end);
    if (wr == 0) {
        dm_provenance_str(prov, DM_PROV_RESULT, "stage", "dictionary");
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)t.count);
        if (input_of) clustering_provenance(prov, o, ninput, t.count, t_clust);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamline_first", (double)first);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamline_end", (double)end);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_kept", (double)d.nkept);
        dm_provenance_num(prov, DM_PROV_RESULT, "segments", (double)d.nseg);
        dm_provenance_num(prov, DM_PROV_RESULT, "lut_directions", (double)dirs.n);
        if (dm_commit_blur_on(&dopt))
            dm_provenance_num(prov, DM_PROV_RESULT, "blur_copies",
                              (double)dm_commit_blur_copies(&dopt, NULL, NULL, NULL));
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_load", t_load);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_dictionary", t_dict);
        dm_provenance_str(prov, DM_PROV_RESULT, "dictionary_device", gpu ? "gpu" : "cpu");
        dm_provenance_str(prov, DM_PROV_RESULT, "device", gpu ? dm_commit_gpu_device(gpu) : "cpu");
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_write", dm_now_seconds() - t1);
        char *path = dm_path_join(od.path, "provenance.json");
        wr = dm_provenance_write(prov, path);
        free(path);
    }
    if (wr == 0 && o->part.n > 0) { /* last: a part stopped before this leaves no manifest */
        static const dm_part_rule rules[] = {{DM_COMMIT_DICT_RECORDS, DM_MERGE_CONCAT},
                                             {DM_COMMIT_DICT_HEADER, DM_MERGE_SAME}};
        char *command = dm_part_command();
        dm_part_info info = {.command = command};
        wr = dm_part_write(od.path, &o->part, &info, rules, 2);
        free(command);
    }
    if (wr != 0) {
        dm_outdir_abort(&od);
        goto done;
    }
    if (dm_outdir_commit(&od) != 0) goto done;
    sum->streamlines = t.count;
    sum->first = (long)first;
    sum->end = (long)end;
    sum->kept = d.nkept;
    sum->segments = d.nseg;
    sum->seconds = dm_now_seconds() - t0;
    rc = 0;
done:
    dm_gpu_probe_end(&probe, NULL); /* ended already, or an error came first */
    dm_commit_gpu_close(gpu);
    free(input_of);
    free(cluster_of);
    free(blur_apply);
    free(mask);
    dm_commit_dict_free(&d);
    dm_commit_dirs_free(&dirs);
    dm_volume_free(&maskvol);
    dm_volume_free(&data);
    dm_tck_free(&t);
    return rc;
}

int dm_commit_command(const dm_commit_options *o, dm_provenance *prov, dm_commit_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    const int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    if (o->stage_dictionary) return dictionary_stage(o, threads, prov, sum);
    double t0 = dm_now_seconds(), t_load, t_dict, t_kern, t_op, t_setup, t_solve, t_write;
    dm_commit_cpu *cpu = NULL;
    dm_commit_gpu *gpu = NULL;
    dm_dwi w;
    dm_tck t;
    memset(&t, 0, sizeof t);
    dm_commit_dirs dirs = {0};
    dm_commit_dict d = {0};
    dm_commit_kernels k = {0};
    dm_commit_pulse_table pulses = {0};
    dm_commit_operator A = {0};
    float *peaks = NULL;
    double *y = NULL, *x = NULL, *xo = NULL, *ic = NULL, *ec = NULL, *iso = NULL, *rmse = NULL,
           *nrmse = NULL, *yhat = NULL, *wruns = NULL, *rmse_adj = NULL, *nrmse_adj = NULL,
           *sq_v = NULL,                          /* each voxel's squared residual */
               *xw = NULL, *rfac = NULL,          /* the lesion model's weights and factors */
                               *aty_plain = NULL, /* with a confidence map and a regularisation */
                                   *col_w = NULL; /* the lasso's column weights */
    unsigned char *ic_fixed = NULL;               /* --debias: the IC columns left out */
    unsigned char *mask = NULL, *blur_apply = NULL;
    long *input_of = NULL, ninput = 0; /* --blur-clust-thr: the representatives' input indices */
    long *cluster_of = NULL;           /* and each input streamline's cluster */
    float *conf = NULL, *row_w = NULL;
    double *y0 = NULL; /* with a confidence map: the signal unweighted */
    int rc = -1, npeaks = 0, conf_used = 0;
    int dict_gpu = 0;                      /* the dictionary cut on the GPU */
    side_job gj = {0}, pj = {0}, gc = {0}; /* gc: the GPU released while the maps are written */
    side_job fw = {0};                     /* fw: freeing what the solve left behind */
    done_with freed = {0};
    char device[256] = "cpu";
    gpu_prepare gp = {0};
    peaks_read pr = {0};
    side_job tj;
    dm_gpu_probe probe; /* the driver starts while the inputs load */
    int use_gpu = 0;
    if (dm_gpu_probe_begin(&probe, o->device, "commit") != 0) return -1;
    /* The GPU made ready on a thread from the start, on the chance that the probe finds one
     * (its context and program take as long as the driver's start, which the probe waits for):
     * the program for the data's volumes, read from its header (a header that cannot be read
     * is reported by the data's read below). */
    const int maybe_gpu = strcmp(probe.device, "cpu") != 0;
    if (maybe_gpu) {
        dm_volume head = {0};
        int ns = 1;
        if (!o->model.scalar && dm_volume_read_header(o->data, &head) == 0 && head.nt > 0)
            ns = head.nt;
        dm_volume_free(&head);
        gp = (gpu_prepare){ns, o->gpus, threads, NULL};
        side_start(&gj, prepare_gpu, &gp);
    }
    tck_read tr = {o->tractogram, &t, threads};
    side_start(&tj, read_tck, &tr);
    int dwi_rc = o->model.scalar ? scalar_map_read(o, &w)
                                 : dm_dwi_read(&w, o->data, o->bvals, o->bvecs, o->mask);
    if (dwi_rc == 0 && o->model.nradii > 0)
        dwi_rc = dm_commit_pulses_read(o->scheme, w.nvol, w.bval, &pulses);
    if (tck_read_end(&tj, &tr, dwi_rc) != 0) goto done;
    t_load = dm_now_seconds() - t0;
    double t_clust = dm_now_seconds();
    if (cluster_tractogram(o, &t, threads, &input_of, &ninput, &cluster_of) != 0) goto done;
    t_clust = dm_now_seconds() - t_clust;
    /* A probe still starting the driver is waited for when the dictionary needs it. */
    if (dm_gpu_probe_ready(&probe) && dm_gpu_probe_end(&probe, &use_gpu) != 0) goto done;
    if (o->model.ec_on && o->peaks) {
        pr = (peaks_read){o, &w.data, {0}};
        side_start(&pj, read_peaks, &pr);
    }

    /* the dictionary: built, or read from --dictionary after checking what it was made of */
    double t1 = dm_now_seconds();
    dm_commit_grid g;
    if (make_grid(&w.data, o->data, &w.mask, &g, &mask) != 0) goto done;
    if (dm_commit_dirs_make(o->ndirs, &dirs) != 0) goto done;
    dm_commit_dict_options dopt = dict_options(o, threads);
    if (o->blur_apply_to && !(blur_apply = read_blur_apply(o, &t, input_of, ninput))) goto done;
    dopt.blur_apply = blur_apply;
    if (o->dictionary) {
        dm_commit_dict_facts facts;
        dm_commit_dict_facts_make(&t, &g, (unsigned)dirs.n, &dopt, threads, &facts);
        if (dm_commit_dict_load(o->dictionary, &facts, &g, &d) != 0) goto done;
        if (dm_commit_dict_index(&d, DM_NVOX(&w.data), threads) != 0) goto done;
    } else {
        /* on the GPU when there is one (the blur's copies on the host): the driver's start and
         * the program waited for, as the walk on the host threads would take longer */
        if (maybe_gpu && !dm_commit_blur_on(&dopt)) {
            if (dm_gpu_probe_end(&probe, &use_gpu) != 0) goto done;
            dict_gpu = use_gpu;
        }
        if (dict_gpu) {
            if (side_end(&gj, 1) != 0 ||
                dm_commit_dict_cut_gpu(gp.g, &t, 0, t.count, &g, &dirs, &dopt, &d) != 0 ||
                dm_commit_dict_index(&d, DM_NVOX(&w.data), threads) != 0)
                goto done;
        } else if (dm_commit_dict_build(&t, &g, &dirs, &dopt, &d) != 0) {
            goto done;
        }
    }
    if (d.nkept == 0) {
        nothing_kept(o);
        goto done;
    }
    t_dict = dm_now_seconds() - t1;
    if (dm_gpu_probe_end(&probe, &use_gpu) != 0) goto done;
    if (maybe_gpu && !use_gpu) { /* no GPU after all: what was made ready for one let go */
        side_end(&gj, 0);
        dm_commit_gpu_close(gp.g);
        gp.g = NULL;
    }

    /* the responses */
    t1 = dm_now_seconds();
    if (dm_commit_kernels_make(&o->model, &dirs, w.nvol, w.bval, w.dir, &pulses.view, &k) != 0)
        goto done;
    t_kern = dm_now_seconds() - t1;

    /* the operator */
    t1 = dm_now_seconds();
    if (o->model.ec_on && o->peaks && side_end(&pj, 1) != 0) goto done;
    if (o->model.ec_on && !(peaks = fit_peaks(o->peaks ? &pr.p : NULL, &w, &d, threads, &npeaks)))
        goto done;
    dm_volume_free(&pr.p);
    if (dm_commit_operator_build(&d, &k, &dirs, peaks, npeaks, o->vf_thr, threads, &A) != 0)
        goto done;
    if (!(y = signal_rows(&w, &d, threads))) {
        dm_set_error("commit: out of memory for the signal");
        goto done;
    }
    if (o->iso_mask && apply_iso_mask(o, &w, &d, &A) != 0) goto done;
    if (o->confidence_map) { /* COMMIT's 0.5 ||sqrt(W) (A x - y)||^2: rows and y times sqrt(W) */
        if (!(conf = read_confidence(o, &w, &d, &conf_used))) goto done;
        if (!conf_used)
            dm_warn("%s holds one value over the voxels of the fit: not used (as COMMIT)",
                    o->confidence_map);
        const size_t nr = (size_t)A.nrows;
        row_w = conf_used ? malloc((nr ? nr : 1) * sizeof *row_w) : NULL;
        y0 = conf_used ? malloc((nr ? nr : 1) * sizeof *y0) : NULL;
        if (conf_used && (!row_w || !y0)) {
            dm_set_error("commit: out of memory for the confidence map");
            goto done;
        }
        for (size_t i = 0; conf_used && i < nr; i++) {
            row_w[i] = sqrtf(conf[i]); /* COMMIT: np.sqrt of the float32 map */
            y0[i] = y[i];
            y[i] *= (double)row_w[i];
        }
        A.op.row_w = row_w;
    }
    t_op = dm_now_seconds() - t1;

    /* the fit */
    t1 = dm_now_seconds();
    x = calloc((size_t)A.ncols, sizeof *x);
    if (!x) {
        dm_set_error("commit: out of memory for the coefficients");
        goto done;
    }
    dm_commit_backend B;
    if (use_gpu) {
        int ready = side_end(&gj, 1);
        if (ready == 0 && gp.ns != w.nvol) { /* made for another count of volumes */
            dm_commit_gpu_close(gp.g);
            gp.ns = w.nvol;
            ready = prepare_gpu(&gp);
        }
        gpu = gp.g;
        if (ready != 0 || dm_commit_gpu_load(gpu, &A, y, &B) != 0) goto done;
    } else if (!(cpu = dm_commit_cpu_open(&A, y, threads, &B))) {
        goto done;
    }
    t_setup = dm_now_seconds() - t1;
    /* the image as read (y holds the rows of the fit; the maps take only its header) and the
     * segments' directions; on the GPU without --debias or a confidence map, the operator's
     * host arrays that were uploaded (the error maps' A x is the GPU's) */
    HAND_OVER(&freed, w.data.data);
    HAND_OVER(&freed, d.seg_dir);
    if (gpu && !o->debias && !conf_used) {
        HAND_OVER(&freed, A.seg_str);
        HAND_OVER(&freed, A.seg_len);
        HAND_OVER(&freed, A.str_len);
        HAND_OVER(&freed, A.str_run);
        HAND_OVER(&freed, A.run_first);
        HAND_OVER(&freed, A.run_dir);
        A.op.seg_str = NULL, A.op.seg_len = NULL, A.op.str_len = NULL, A.op.str_run = NULL;
        A.op.run_first = NULL, A.op.run_dir = NULL;
    }
    side_start(&fw, free_done_with, &freed);
    t1 = dm_now_seconds();
    /* a regularisation: the lasso needs its lambda only; the group lasso, as COMMIT2, the
     * groups' weights sqrt(|g|) / ||x_nnls[g]|| from a fit without it first */
    dm_commit_groups groups = {0};
    dm_commit_reg reg = {.nf = (long)A.op.nic * d.nkept, /* every radius's IC columns */
                         .ec_end = (long)A.op.nic * d.nkept + (long)A.op.nec * A.op.ne,
                         .ncols = A.ncols};
    const int regularised =
        o->lambda_frac > 0 || o->group_frac > 0 || o->lambda_ec_frac > 0 || o->lambda_iso_frac > 0;
    if ((o->lambda_ec_frac > 0 && reg.ec_end == reg.nf) ||
        (o->lambda_iso_frac > 0 && reg.ncols == reg.ec_end)) { /* as COMMIT's set_regularisation */
        dm_set_error("commit: --lambda-%s: the fit has no %s compartment",
                     o->lambda_ec_frac > 0 && reg.ec_end == reg.nf ? "ec" : "iso",
                     o->lambda_ec_frac > 0 && reg.ec_end == reg.nf ? "extra-axonal" : "isotropic");
        goto done;
    }
    if ((o->lambda_weights || o->lambda_iso_weights) &&
        !(col_w = lasso_weights(o, &t, input_of, ninput, &d, &w, &A, k.niso)))
        goto done;
    reg.col_w = col_w;
    reg.free_blocks = o->free_blocks;
    int nnls_iterations = 0;
    if (o->group_frac > 0) {
        if (read_groups(o, &t, input_of, ninput, &d, &groups) != 0) goto done;
        dm_commit_fista_options fo = {
            .tol_fun = o->tol_fun, .tol_x = o->tol_x, .max_iter = o->max_iter};
        dm_commit_fista_result fr0;
        if (dm_commit_fista(&B, x, &fo, x, &fr0) != 0) {
            dm_commit_groups_free(&groups);
            goto done;
        }
        nnls_iterations = fr0.iterations;
        for (long k = 0; k < groups.n; k++) {
            double n2 = 0;
            for (long i = groups.start[k]; i < groups.start[k + 1]; i++)
                n2 += x[groups.cols[i]] * x[groups.cols[i]];
            groups.w[k] =
                sqrt((double)(groups.start[k + 1] - groups.start[k])) / (sqrt(n2) + 1e-12);
        }
        memset(x, 0,
               (size_t)A.ncols * sizeof *x); /* the regularised fit starts at 0, as COMMIT's */
        reg.ngroups = groups.n;
        reg.group_start = groups.start;
        reg.group_cols = groups.cols;
        reg.group_w = groups.w;
    }
    if (regularised && conf_used) { /* COMMIT's lambda_max: A^T y of the data unweighted */
        dm_commit_operator plain = A;
        plain.op.row_w = NULL;
        double *dots = malloc((size_t)(A.nruns ? A.nruns : 1) * A.op.nic * sizeof *dots);
        aty_plain = malloc((size_t)(A.ncols ? A.ncols : 1) * sizeof *aty_plain);
        if (!dots || !aty_plain) {
            free(dots);
            dm_set_error("commit: out of memory");
            goto done;
        }
        dm_commit_cpu_aty(&plain, y0, aty_plain, dots, threads);
        free(dots);
    }
    solve_progress sp = {dm_progress_start("commit", o->max_iter, "iterations"), 0};
    dm_commit_fista_options fo = {.tol_fun = o->tol_fun,
                                  .tol_x = o->tol_x,
                                  .reg = regularised || o->free_blocks ? &reg : NULL,
                                  .lambda_frac = o->lambda_frac,
                                  .lambda_ec_frac = o->lambda_ec_frac,
                                  .lambda_iso_frac = o->lambda_iso_frac,
                                  .aty = aty_plain,
                                  .group_frac = o->group_frac,
                                  .max_iter = o->max_iter,
                                  .progress = on_iteration,
                                  .progress_arg = &sp};
    dm_commit_fista_result fr, fr_reg = {0};
    int solved = dm_commit_fista(&B, x, &fo, x, &fr);
    dm_commit_groups_free(&groups);
    dm_progress_finish(sp.bar, solved == 0 ? fr.stopped : "stopped");
    if (solved != 0) goto done;
    long debias_columns = -1;
    if (o->debias) { /* COMMIT's fit(debias=True): NNLS again, on the support, from 0 */
        const size_t nic_cols = (size_t)reg.nf;
        if (!(ic_fixed = malloc(nic_cols ? nic_cols : 1))) {
            dm_set_error("commit: out of memory for --debias");
            goto done;
        }
        debias_columns = debias_support(&A, reg.nf, x, ic_fixed, y, y0, threads);
        if (debias_columns < 0) goto done;
        A.op.ic_fixed = ic_fixed; /* the host's backend reads A and y where they are */
        if (gpu && (dm_commit_gpu_fix_ic(gpu, ic_fixed) != 0 || dm_commit_gpu_set_y(gpu, y) != 0))
            goto done;
        memset(x, 0, (size_t)A.ncols * sizeof *x);
        fr_reg = fr;
        solve_progress dp = {dm_progress_start("commit debias", o->max_iter, "iterations"), 0};
        dm_commit_fista_options fd = {.tol_fun = o->tol_fun,
                                      .tol_x = o->tol_x,
                                      .max_iter = o->max_iter,
                                      .progress = on_iteration,
                                      .progress_arg = &dp};
        solved = dm_commit_fista(&B, x, &fd, x, &fr);
        dm_progress_finish(dp.bar, solved == 0 ? fr.stopped : "stopped");
        if (solved != 0) goto done;
        fr.lambda = fr_reg.lambda; /* the regularised fit's, reported */
        fr.lambda_ec = fr_reg.lambda_ec;
        fr.lambda_iso = fr_reg.lambda_iso;
        fr.lambda_group = fr_reg.lambda_group;
        fr.products += fr_reg.products + 1; /* and the support's A x */
    }
    t_solve = dm_now_seconds() - t1;

    /* the outputs: coefficients of the original problem, maps, errors */
    t1 = dm_now_seconds();
    const long nv = d.nvox, nf = d.nkept, ne = A.op.ne;
    const int ns = w.nvol;
    xo = malloc((size_t)A.ncols * sizeof *xo);
    ic = calloc((size_t)nv, sizeof *ic);
    ec = calloc((size_t)nv, sizeof *ec);
    iso = calloc((size_t)nv, sizeof *iso);
    rmse = malloc((size_t)nv * sizeof *rmse);
    nrmse = malloc((size_t)nv * sizeof *nrmse);
    rmse_adj = calloc((size_t)nv, sizeof *rmse_adj);
    nrmse_adj = calloc((size_t)nv, sizeof *nrmse_adj);
    /* the fitted signal A x: the solver's last product on the CPU (the same sums), else made */
    const double *fitted = !conf_used ? dm_commit_cpu_fitted(cpu) : NULL;
    yhat = fitted ? NULL : dm_big_alloc((size_t)A.nrows * sizeof *yhat);
    sq_v = malloc((size_t)(nv ? nv : 1) * sizeof *sq_v);
    wruns = malloc((size_t)(A.nruns ? A.nruns : 1) * A.op.nic * sizeof *wruns);
    if (!xo || !ic || !ec || !iso || !rmse || !nrmse || (!yhat && !fitted) || !wruns || !rmse_adj ||
        !nrmse_adj || !sq_v) {
        dm_set_error("commit: out of memory for the outputs");
        goto done;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long j = 0; j < A.ncols; j++) xo[j] = x[j] / A.scale[j];
    fold_ic(xo, nf, A.op.nic, A.ncols);
    dm_outdir od;
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    side_job fj, cj = {0};
    filtered_job fjob = {od.path, &t, &d, xo, threads, 0};
    side_start(&fj, filtered_work, &fjob);
    ic_map(&d, xo, threads, ic);
    for (long e = 0; e < ne; e++) /* every zeppelin of the entry, as COMMIT's map */
        for (int z = 0; z < A.op.nec; z++) ec[A.ec_vox[e]] += xo[nf + z * ne + e];
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long v = 0; v < nv; v++) { /* xo is folded: its ISO block starts nic - 1 blocks sooner */
        const long c0 = dm_commit_iso_col(&A.op, v);
        for (int i = 0; i < k.niso && c0 >= 0; i++)
            iso[v] += xo[c0 - (long)(A.op.nic - 1) * nf + i * A.op.niv];
    }
    long nlesion = 0;
    const int lesion_model = o->model.scalar && o->iso_mask;
    /* an error before the first file was once written (no weights for the lesion model, A x
     * on the GPU) comes before the writers' */
    int early = lesion_model && !(xw = lesion_weights(&d, ic, iso, xo, &rfac, &nlesion)) ? -1 : 0;
    if (early == 0 && lesion_model && nlesion == 0)
        dm_warn("%s: no lesion found (no voxel of the fit with a lesion coefficient > 0)",
                o->iso_mask);
    compartments_job cjob = {.dir = od.path,
                             .w = &w,
                             .d = &d,
                             .weights = nlesion ? xw : xo,
                             .blur = dm_commit_blur_on(&dopt),
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
    if (early == 0) side_start(&cj, compartments_work, &cjob);
    if (early == 0 && conf_used) { /* the errors of the data unweighted (COMMIT's fit_RMSE...) */
        dm_commit_operator plain = A;
        plain.op.row_w = NULL;
        dm_commit_cpu_ax(&plain, x, yhat, wruns, threads);
    } else if (early == 0 && !fitted &&
               (gpu ? dm_commit_gpu_ax(gpu, yhat) != 0
                    : (dm_commit_cpu_ax(&A, x, yhat, wruns, threads), 0))) {
        early = -1;
    }
    if (gpu) { /* its last use is behind: released (device memory, context) off the path */
        snprintf(device, sizeof device, "%s", dm_commit_gpu_device(gpu));
        side_start(&gc, release_gpu, gpu);
        gp.g = gpu = NULL;
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
    if (wr == 0) wr = write_map(od.path, "fit_RMSE.nii.gz", &w, &d, rmse);
    if (wr == 0) wr = write_map(od.path, "fit_NRMSE.nii.gz", &w, &d, nrmse);
    if (wr == 0 && conf_used) wr = write_map(od.path, "fit_RMSE_adjusted.nii.gz", &w, &d, rmse_adj);
    if (wr == 0 && conf_used)
        wr = write_map(od.path, "fit_NRMSE_adjusted.nii.gz", &w, &d, nrmse_adj);
    /* the first error in the order the files were once written in, one after another: the
     * weights and the compartment maps, the error maps, filtered.tck */
    if (side_end(&cj, early == 0) != 0) wr = -1;
    if (side_end(&fj, wr == 0) != 0) wr = -1;
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
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)d.nstr);
        if (input_of) clustering_provenance(prov, o, ninput, d.nstr, t_clust);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_kept", (double)nf);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_nonzero", (double)nonzero);
        dm_provenance_num(prov, DM_PROV_RESULT, "voxels", (double)nv);
        dm_provenance_num(prov, DM_PROV_RESULT, "segments", (double)d.nseg);
        dm_provenance_num(prov, DM_PROV_RESULT, "ic_responses", (double)k.nic);
        dm_provenance_num(prov, DM_PROV_RESULT, "ec_responses", (double)k.nec);
        dm_provenance_num(prov, DM_PROV_RESULT, "ec_compartments", (double)ne * A.op.nec);
        if (o->model.ec_on) { /* the zeppelins' d_perps, one EC column per peak each */
            char list[32 * DM_COMMIT_MAX_PERP] = "";
            for (int z = 0; z < o->model.nperp; z++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.9g", z ? "," : "",
                         o->model.d_perp[z]);
            dm_provenance_str(prov, DM_PROV_RESULT, "d_perps", list);
        }
        dm_provenance_num(prov, DM_PROV_RESULT, "iso_compartments", (double)k.niso * A.op.niv);
        if (lesion_model) dm_provenance_num(prov, DM_PROV_RESULT, "lesion_voxels", (double)nlesion);
        if (o->confidence_map)
            dm_provenance_str(prov, DM_PROV_RESULT, "confidence_map",
                              conf_used
                                  ? (o->confidence_rescale ? "used, rescaled to [0, 1]" : "used")
                                  : "not used: one value over the voxels of the fit");
        dm_provenance_num(prov, DM_PROV_RESULT, "lut_directions", (double)dirs.n);
        if (dm_commit_blur_on(&dopt))
            dm_provenance_num(prov, DM_PROV_RESULT, "blur_copies",
                              (double)dm_commit_blur_copies(&dopt, NULL, NULL, NULL));
        if (blur_apply) { /* --blur-apply-to: how many streamlines were blurred */
            long nb = 0;
            for (long s = 0; s < t.count; s++) nb += blur_apply[s];
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
        goto done;
    }
    if (dm_outdir_commit(&od) != 0) goto done;
    sum->streamlines = d.nstr;
    sum->kept = nf;
    sum->nonzero = nonzero;
    sum->voxels = nv;
    sum->segments = d.nseg;
    sum->ec_columns = ne * A.op.nec;
    sum->iterations = fr.iterations;
    sum->objective = fr.objective;
    sum->stopped = fr.stopped;
    sum->seconds = dm_now_seconds() - t0;
    rc = 0;
done:
    dm_gpu_probe_end(&probe, NULL);   /* an error came first: the driver's start waited for */
    if (gj.running) side_end(&gj, 0); /* an error came first */
    if (pj.running) side_end(&pj, 0);
    dm_volume_free(&pr.p);
    side_end(&gc, 0);
    side_end(&fw, 0);
    if (gp.g != gpu) dm_commit_gpu_close(gp.g);
    dm_commit_cpu_close(cpu);
    dm_commit_gpu_close(gpu);
    free(mask);
    free(peaks);
    free(y);
    free(x);
    free(xo);
    free(ic);
    free(ec);
    free(iso);
    free(rmse);
    free(nrmse);
    free(xw);
    free(rfac);
    free(aty_plain);
    free(col_w);
    free(ic_fixed);
    free(input_of);
    free(cluster_of);
    free(rmse_adj);
    free(nrmse_adj);
    free(blur_apply);
    free(conf);
    free(row_w);
    free(y0);
    free(yhat);
    free(sq_v);
    free(wruns);
    dm_commit_operator_free(&A);
    dm_commit_kernels_free(&k);
    dm_commit_pulses_free(&pulses);
    dm_commit_dict_free(&d);
    dm_commit_dirs_free(&dirs);
    dm_tck_free(&t);
    dm_dwi_free(&w);
    return rc;
}
