/* Response function estimation (response_estimate.h). */
#include "csd/response_estimate.h"

#include "csd/csd_cpu.h"
#include "csd/csd_plan.h"
#include "dti/dti_fit.h"
#include "sphere/directions.h"
#include "sphere/peaks.h"
#include "util/error.h"
#include "util/key_sort.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

const char *const dm_tissue_names[DM_NTISSUES] = {"wm", "gm", "csf"};

#define SF_VOXELS 300        /* single-fibre voxels of fa and tournier (MRtrix's -number) */
#define ITER_VOXELS 3000     /* tournier: voxels re-fitted each iteration (-iter_voxels) */
#define MAX_ITER 10          /* tournier: iterations at most */
#define ERODE_PASSES 3       /* fa, dhollander: erosions of the brain mask */
#define DH_FA 0.2            /* dhollander: WM candidates above this FA */
#define DH_SFWM 0.005        /* dhollander: single-fibre WM, fraction of the brain's voxels */
#define DH_GM 0.02           /* dhollander: GM voxels, fraction of the brain */
#define DH_CSF 0.10          /* dhollander: CSF voxels, fraction of the CSF candidates */
#define TOURNIER_LMAX 8      /* degree of the FODs tournier's selection looks at */
#define HOST_PASS_VOXELS 250 /* a pass of at most this many voxels a core stays on the host */

#define MIN_VOXELS 10 /* voxels with a tensor a response is estimated from, at least */

/* The file a selection failure is blamed on: the mask when there is one. */
static const char *source(const dm_dwi *d)
{
    return d->mask_path ? d->mask_path : d->data_path;
}

typedef struct scored {
    double score;
    size_t i; /* index into d->vox */
} scored;

static int by_score_desc(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i); /* ties by voxel: deterministic */
}

static int by_index(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The tensor of each mask voxel from b = 0 and the lowest diffusion-weighted shell: FA and the
 * principal direction (world frame, as the directions are).  fa[i] is -1 where the fit failed. */
static int tensors(const dm_dwi *d, int threads, double *fa, double *v1)
{
    int lowest = d->has_b0 ? 1 : 0, M = 0;
    int *vols = malloc((size_t)d->nvol * sizeof *vols);
    double *b = malloc((size_t)d->nvol * sizeof *b), *g = malloc((size_t)d->nvol * 3 * sizeof *g);
    if (!vols || !b || !g) {
        free(vols);
        free(b);
        free(g);
        return dm_set_error("out of memory fitting tensors");
    }
    for (int t = 0; t < d->nvol; t++)
        if (d->shell_of[t] <= lowest) {
            vols[M] = t;
            b[M] = d->bval[t];
            memcpy(g + 3 * M, d->dir + 3 * t, 3 * sizeof *g);
            M++;
        }
    dm_dti_protocol proto;
    int rc = dm_dti_protocol_init(&proto, M, b, g);
    if (rc != 0) {
        dm_set_error("%s: the tensor fit that picks the voxels cannot be done: %s", d->data_path,
                     dm_last_error());
    } else {
        /* Blocks of voxels, their signals gathered volume by volume (the data are stored so:
         * each volume's read runs along the block's voxels, not across 2 GB per voxel). */
        enum { BLOCK = 64 };
#pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
        {
            double *sig = malloc((size_t)M * (BLOCK + 2) * sizeof *sig);
#pragma omp for schedule(dynamic, 4)
            for (size_t b0 = 0; b0 < d->nvox; b0 += BLOCK) {
                const size_t nb = d->nvox - b0 < BLOCK ? d->nvox - b0 : BLOCK;
                for (int j = 0; j < M && sig; j++)
                    for (size_t v = 0; v < nb; v++)
                        sig[v * M + j] = dm_dwi_signal(d, b0 + v, vols[j]);
                for (size_t v = 0; v < nb; v++) {
                    const size_t i = b0 + v;
                    dm_dti_result r;
                    int st = sig ? dm_dti_fit_voxel(&proto, sig + v * M, sig + BLOCK * M, &r) : 0;
                    int ok = st == DM_DTI_FITTED || st == DM_DTI_OLS_ONLY;
                    fa[i] = ok && isfinite(r.FA) ? r.FA : -1.0;
                    for (int c = 0; c < 3; c++) v1[3 * i + c] = ok ? r.vec[0][c] : 0.0;
                }
            }
            free(sig);
        }
        dm_dti_protocol_free(&proto);
    }
    free(vols);
    free(b);
    free(g);
    return rc;
}

/* keep[i] for each mask voxel: 1 inside the mask eroded `passes` times (6-neighbourhood;
 * the image's border counts as outside). */
static void erode(const dm_dwi *d, int passes, int threads, unsigned char *keep)
{
    const dm_volume *v = &d->data;
    size_t nall = DM_NVOX(v);
    unsigned char *in = calloc(nall, 1), *next = calloc(nall, 1);
    if (!in || !next) { /* no memory: no erosion */
        memset(keep, 1, d->nvox);
        free(in);
        free(next);
        return;
    }
    for (size_t i = 0; i < d->nvox; i++) in[d->vox[i]] = 1;
    for (int p = 0; p < passes; p++) {
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
        for (size_t idx = 0; idx < nall; idx++) {
            next[idx] = 0;
            if (!in[idx]) continue;
            int x = (int)(idx % v->nx), y = (int)(idx / v->nx % v->ny),
                z = (int)(idx / v->nx / v->ny);
            size_t sx = 1, sy = (size_t)v->nx, sz = (size_t)v->nx * v->ny;
            int ok = x > 0 && x < v->nx - 1 && y > 0 && y < v->ny - 1 && z > 0 && z < v->nz - 1;
            ok = ok && in[idx - sx] && in[idx + sx] && in[idx - sy] && in[idx + sy] &&
                 in[idx - sz] && in[idx + sz];
            next[idx] = (unsigned char)ok;
        }
        memcpy(in, next, nall);
    }
    for (size_t i = 0; i < d->nvox; i++) keep[i] = in[d->vox[i]];
    free(in);
    free(next);
}

/* The index of the largest-b shell. */
static int top_shell(const dm_dwi *d)
{
    return d->nshell - 1;
}

/* The one-row response of shell s out of a response over all shells. */
static dm_response one_shell(const dm_response *r, int s)
{
    dm_response o = *r;
    o.nshell = 1;
    o.b[0] = r->b[s];
    memcpy(o.r[0], r->r[s], sizeof o.r[0]);
    return o;
}

/* tournier's selection among the mask voxels cand[0..nc) (indices into d->vox): `count`
 * single-fibre voxels and their fibre directions, starting from the voxels start[0..ns) with
 * directions sdir.  sel (count) and dir (3 count) receive them; *nsel how many; *iters the
 * iterations.  resp receives the response over all shells (degree lmax). */
static int tournier_select(const dm_dwi *d, const size_t *cand, size_t nc, const size_t *start,
                           const double *sdir, size_t ns, size_t count, int lmax, int threads,
                           const dm_csd_solver *solver, size_t *sel, double *dir, size_t *nsel,
                           int *iters, dm_response *resp, dm_response_set *times)
{
    int rc = -1, s = top_shell(d);
    size_t nfit = nc;
    /* Its CSD constrains on 300 directions of a Fibonacci lattice (sphere/directions.h), not
     * on MRtrix's set that `dimoc csd` uses: the responses stay what they were. */
    double spiral_dirs[3 * DM_CSD_CONSTRAINT_DIRS];
    dm_dirs_hemisphere(DM_CSD_CONSTRAINT_DIRS, spiral_dirs);
    const dm_csd_dirs spiral = {DM_CSD_CONSTRAINT_DIRS, spiral_dirs};
    size_t *fit = malloc(nc * sizeof *fit);
    scored *sc = malloc(nc * sizeof *sc);
    double *peak = malloc(nc * 3 * sizeof *peak);
    size_t *sel_next = malloc(nc * sizeof *sel_next);
    dm_peak_finder pf = {0};
    int flmax = lmax < TOURNIER_LMAX ? lmax : TOURNIER_LMAX;
    if (!fit || !sc || !peak || !sel_next) {
        dm_set_error("out of memory choosing single-fibre voxels");
        goto done;
    }
    if (dm_peak_finder_init(&pf, flmax) != 0) {
        dm_set_error("out of memory making the peak finder");
        goto done;
    }
    memcpy(fit, cand, nc * sizeof *fit);
    memcpy(sel, start, ns * sizeof *sel);
    memcpy(dir, sdir, ns * 3 * sizeof *dir);
    *nsel = ns;
    if (dm_response_from_voxels(d, sel, dir, *nsel, lmax, threads, resp) != 0) goto done;
    for (int it = 1; it <= MAX_ITER; it++) {
        *iters = it;
        double t0 = dm_now_seconds();
        dm_response r1 = one_shell(resp, s);
        int map = s, *maps[1] = {&map};
        dm_csd_plan plan;
        if (dm_csd_plan_build(d, 1, &r1, maps, flmax, &spiral, &plan) != 0) goto done;
        double *Y = malloc(nfit * (size_t)plan.m * sizeof *Y);
        double *X = malloc(nfit * (size_t)plan.n * sizeof *X);
        unsigned char *st = malloc(nfit);
        int ok = Y && X && st;
        if (ok) {
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
            for (int j = 0; j < plan.m; j++)
                for (size_t i = 0; i < nfit; i++)
                    Y[j * nfit + i] = dm_dwi_signal(d, fit[i], plan.vol[j]);
        }
        times->seconds_gather += dm_now_seconds() - t0;
        t0 = dm_now_seconds();
        /* A GPU thread solves a voxel on its own: a pass of a few thousand voxels takes about
         * the time of the slowest (tens of ms on an H200), where the host's cores share them out
         * (0.1-0.2 ms a voxel a core): the GPU takes the first pass, the host the rest. */
        const size_t cores = threads > 0 ? (size_t)threads : (size_t)omp_get_max_threads();
        const int on_solver = solver && nfit > HOST_PASS_VOXELS * cores;
        ok = ok && (on_solver ? solver->solve(solver->ctx, &plan, Y, nfit, X, st)
                              : dm_csd_cpu_run(&plan, Y, nfit, 0, 1, threads, 50, NULL, X, st,
                                               NULL)) == 0;
        times->seconds_deconvolve += dm_now_seconds() - t0;
        if (it == 1) times->seconds_first_deconvolve = dm_now_seconds() - t0;
        t0 = dm_now_seconds();
        if (ok) {
#pragma omp parallel for schedule(dynamic, 64)                                                     \
    num_threads(threads > 0 ? threads : omp_get_max_threads())
            for (size_t i = 0; i < nfit; i++) {
                double pd[6], pa[2];
                int np =
                    st[i] == 1 ? dm_peak_finder_find(&pf, X + i * plan.n, 2, 0.0, 0.0, pd, pa) : 0;
                sc[i].i = i; /* the position in fit[], which also finds the peak */
                sc[i].score = -1.0;
                if (np >= 1) {
                    double ratio = np == 2 ? pa[1] / pa[0] : 0.0;
                    sc[i].score = sqrt(pa[0]) * (1.0 - ratio) * (1.0 - ratio);
                    memcpy(peak + 3 * i, pd, 3 * sizeof *pd);
                }
            }
        }
        times->seconds_peaks += dm_now_seconds() - t0;
        if (it == 1) times->seconds_first_peaks = dm_now_seconds() - t0;
        free(Y);
        free(X);
        free(st);
        dm_csd_plan_free(&plan);
        if (!ok) {
            if (!dm_last_error()[0]) dm_set_error("out of memory in the CSD of tournier");
            goto done;
        }
        t0 = dm_now_seconds();
        /* the selection and the next pass's voxels: the best count, and ITER_VOXELS */
        dm_sort_first(sc, nfit, sizeof *sc, count > ITER_VOXELS ? count : ITER_VOXELS,
                      by_score_desc);
        size_t take = 0;
        while (take < nfit && take < count && sc[take].score > 0) take++;
        if (take == 0) {
            dm_set_error("%s: no voxel of the mask has a fibre to estimate a response from",
                         source(d));
            goto done;
        }
        /* An unchanged selection (as a set) has converged. */
        size_t *a = malloc(take * sizeof *a), *b = malloc(take * sizeof *b);
        if (!a || !b) {
            free(a);
            free(b);
            dm_set_error("out of memory choosing single-fibre voxels");
            goto done;
        }
        for (size_t j = 0; j < take; j++) a[j] = fit[sc[j].i];
        int same = take == *nsel;
        if (same) {
            memcpy(b, sel, take * sizeof *b);
            qsort(a, take, sizeof *a, by_index);
            qsort(b, take, sizeof *b, by_index);
            same = memcmp(a, b, take * sizeof *a) == 0;
        }
        free(a);
        free(b);
        for (size_t j = 0; j < take; j++) {
            sel[j] = fit[sc[j].i];
            memcpy(dir + 3 * j, peak + 3 * sc[j].i, 3 * sizeof *dir);
        }
        *nsel = take;
        /* The next iteration re-fits only the most promising voxels; fit[] is rewritten in
         * score order, through sel_next. */
        size_t keep = nfit < ITER_VOXELS ? nfit : ITER_VOXELS;
        for (size_t j = 0; j < keep; j++) sel_next[j] = fit[sc[j].i];
        memcpy(fit, sel_next, keep * sizeof *fit);
        nfit = keep;
        if (dm_response_from_voxels(d, sel, dir, *nsel, lmax, threads, resp) != 0) goto done;
        times->seconds_select += dm_now_seconds() - t0;
        if (same) break;
    }
    rc = 0;
done:
    dm_peak_finder_free(&pf);
    free(fit);
    free(sc);
    free(peak);
    free(sel_next);
    return rc;
}

/* The mask voxels (indices into d->vox) with the largest FA, count at most, among those
 * with keep[i] (NULL: all); their V1 into dir.  Returns how many. */
static size_t top_fa(const dm_dwi *d, const double *fa, const double *v1, const unsigned char *keep,
                     size_t count, size_t *sel, double *dir)
{
    scored *sc = malloc(d->nvox * sizeof *sc);
    if (!sc) return 0;
    size_t n = 0;
    for (size_t i = 0; i < d->nvox; i++)
        if ((!keep || keep[i]) && fa[i] > 0 && fa[i] <= 1.0) sc[n++] = (scored){fa[i], i};
    const size_t n0 = n;
    if (n > count) n = count;
    dm_sort_first(sc, n0, sizeof *sc, n, by_score_desc);
    for (size_t j = 0; j < n; j++) {
        sel[j] = sc[j].i;
        memcpy(dir + 3 * j, v1 + 3 * sc[j].i, 3 * sizeof *dir);
    }
    free(sc);
    return n;
}

/* Drops the b = 0 row of a response over all shells when the data has one DW shell (as
 * MRtrix's single-shell responses have only the DW row). */
static void single_shell_rows(const dm_dwi *d, dm_response *r)
{
    if (d->nshell == 2 && d->has_b0) *r = one_shell(r, 1);
}

/* The scores of sc[0..n) in descending order (NULL: no memory). */
static double *descending(const scored *sc, size_t n)
{
    double *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) return NULL;
    for (size_t j = 0; j < n; j++) out[j] = sc[j].score;
    if (dm_sort_doubles_descending(out, n) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static int mark_voxels(const dm_dwi *d, const size_t *sel, size_t n, unsigned char **mask)
{
    *mask = calloc(DM_NVOX(&d->data), 1);
    if (!*mask) return dm_set_error("out of memory");
    for (size_t j = 0; j < n; j++) (*mask)[d->vox[sel[j]]] = 1;
    return 0;
}

/* dhollander's GM and CSF: mask voxels of low FA, split by their signal decay metric. */
static int dhollander_iso(const dm_dwi *d, const double *fa, const unsigned char *keep,
                          size_t nbrain, int threads, dm_response_set *out)
{
    int rc = -1;
    scored *iso = malloc(d->nvox * sizeof *iso);
    size_t *sel = malloc(d->nvox * sizeof *sel);
    size_t niso = 0;
    if (!iso || !sel) {
        dm_set_error("out of memory");
        goto done;
    }
    /* The candidates (low FA in the eroded mask), in voxel order; then their metrics,
     * blocks of voxels in parallel, each block reading the volumes one after another (the data
     * are stored volume by volume) while every voxel sums its shells in the volumes' order. */
    for (size_t i = 0; i < d->nvox; i++)
        if (keep[i] && !(fa[i] < 0 || fa[i] > DH_FA)) sel[niso++] = i;
    double *metric = malloc((niso + 1) * sizeof *metric);
    unsigned char *decays = malloc(niso + 1);
    if (!metric || !decays) {
        free(metric);
        free(decays);
        dm_set_error("out of memory");
        goto done;
    }
    enum { BLOCK = 64 };
#pragma omp parallel for schedule(dynamic, 4)                                                      \
    num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (size_t b0 = 0; b0 < niso; b0 += BLOCK) {
        const size_t nb = niso - b0 < BLOCK ? niso - b0 : BLOCK;
        double mean[BLOCK][DM_MAX_SHELLS] = {{0}};
        for (int t = 0; t < d->nvol; t++) {
            const int s = d->shell_of[t];
            for (size_t j = 0; j < nb; j++)
                mean[j][s] += dm_dwi_signal(d, sel[b0 + j], t) / d->shell_count[s];
        }
        /* Signal decay metric: the mean over DW shells of log(S0 / S_b) / b, an apparent
         * diffusivity (CSF highest, GM lowest); only voxels whose shell means decrease. */
        for (size_t j = 0; j < nb; j++) {
            int ok = d->has_b0 && mean[j][0] > 0;
            double sdm = 0.0;
            for (int s = 1; ok && s < d->nshell; s++) {
                ok = mean[j][s] > 0 && mean[j][s] < mean[j][s - 1];
                if (ok) sdm += log(mean[j][0] / mean[j][s]) / d->shell_b[s];
            }
            decays[b0 + j] = (unsigned char)ok;
            metric[b0 + j] = ok ? sdm / (d->nshell - 1) : 0.0;
        }
    }
    size_t ncand = niso;
    niso = 0;
    for (size_t j = 0; j < ncand; j++)
        if (decays[j]) iso[niso++] = (scored){metric[j], sel[j]};
    free(metric);
    free(decays);
    if (niso < 2) {
        dm_set_error("%s: no isotropic voxels (FA <= %g with a decaying signal) to estimate GM "
                     "and CSF responses from",
                     source(d), DH_FA);
        goto done;
    }
    /* Otsu's threshold on the metric separates CSF (above) from GM (below): over the metrics
     * in descending order, which a radix sort gives; the voxels are then split by selection. */
    double *sorted = descending(iso, niso);
    if (!sorted) {
        dm_set_error("out of memory");
        goto done;
    }
    size_t split = 1;
    double best = -1.0, total = 0.0, left = 0.0;
    for (size_t j = 0; j < niso; j++) total += sorted[j];
    for (size_t j = 1; j < niso; j++) {
        left += sorted[j - 1];
        double w0 = (double)j, w1 = (double)(niso - j);
        double m0 = left / w0, m1 = (total - left) / w1;
        double between = w0 * w1 * (m0 - m1) * (m0 - m1);
        if (between > best) {
            best = between;
            split = j;
        }
    }
    /* CSF: the top DH_CSF of the CSF candidates; GM: the DH_GM of the brain nearest the
     * median metric of the GM candidates. */
    size_t ncsf = (size_t)ceil(DH_CSF * split);
    dm_partition_first(iso, niso, sizeof *iso, split, by_score_desc); /* CSF candidates first */
    dm_sort_first(iso, split, sizeof *iso, ncsf, by_score_desc);
    size_t ngc = niso - split;
    double median = sorted[split + ngc / 2];
    free(sorted);
    for (size_t j = 0; j < ncsf; j++) sel[j] = iso[j].i;
    if (dm_response_isotropic(d, sel, ncsf, &out->r[DM_TISSUE_CSF]) != 0 ||
        mark_voxels(d, sel, ncsf, &out->voxels[DM_TISSUE_CSF]) != 0)
        goto done;
    out->nvoxels[DM_TISSUE_CSF] = ncsf;
    for (size_t j = split; j < niso; j++) iso[j].score = -fabs(iso[j].score - median);
    size_t ngm = (size_t)ceil(DH_GM * nbrain);
    if (ngm > ngc) ngm = ngc;
    dm_sort_first(iso + split, ngc, sizeof *iso, ngm, by_score_desc);
    for (size_t j = 0; j < ngm; j++) sel[j] = iso[split + j].i;
    if (dm_response_isotropic(d, sel, ngm, &out->r[DM_TISSUE_GM]) != 0 ||
        mark_voxels(d, sel, ngm, &out->voxels[DM_TISSUE_GM]) != 0)
        goto done;
    out->nvoxels[DM_TISSUE_GM] = ngm;
    rc = 0;
done:
    free(iso);
    free(sel);
    return rc;
}

int dm_response_estimate(const dm_dwi *d, const char *algorithm, int lmax, int threads,
                         const dm_csd_solver *solver, dm_response_set *out)
{
    memset(out, 0, sizeof *out);
    int is_fa = !strcmp(algorithm, "fa"), is_tournier = !strcmp(algorithm, "tournier");
    int is_dh = !strcmp(algorithm, "dhollander");
    if (!is_fa && !is_tournier && !is_dh)
        return dm_set_error("response: --algorithm must be tournier, dhollander or fa, not '%s'",
                            algorithm);
    if (is_dh && (!d->has_b0 || d->nshell < 2))
        return dm_set_error("%s: dhollander needs b = 0 and a diffusion-weighted shell",
                            d->data_path);
    int most = 0; /* directions of the largest diffusion-weighted shell */
    for (int sh = d->has_b0; sh < d->nshell; sh++)
        if (d->shell_count[sh] > most) most = d->shell_count[sh];
    if (lmax < 2 || lmax % 2 || dm_response_lmax_for(most) < lmax)
        return dm_set_error("--lmax %d: a response of degree %d needs %d directions in a shell; "
                            "the largest shell of %s has %d",
                            lmax, lmax, lmax + 2, d->data_path, most);
    int rc = -1;
    double *fa = malloc(d->nvox * sizeof *fa), *v1 = malloc(d->nvox * 3 * sizeof *v1);
    unsigned char *keep = malloc(d->nvox);
    size_t *sel = malloc(d->nvox * sizeof *sel), *cand = malloc(d->nvox * sizeof *cand);
    double *dir = malloc(d->nvox * 3 * sizeof *dir), *sdir = malloc(d->nvox * 3 * sizeof *sdir);
    size_t *start = malloc(d->nvox * sizeof *start);
    if (!fa || !v1 || !keep || !sel || !cand || !dir || !sdir || !start) {
        dm_set_error("out of memory estimating responses");
        goto done;
    }
    double t0 = dm_now_seconds();
    if (tensors(d, threads, fa, v1) != 0) goto done;
    out->seconds_tensors = dm_now_seconds() - t0;
    {
        size_t nt = 0;
        for (size_t i = 0; i < d->nvox; i++) nt += fa[i] >= 0;
        if (nt < MIN_VOXELS) {
            dm_set_error("%s: %zu voxel%s with a tensor fit; estimating a response needs at "
                         "least %d (a brain mask)",
                         source(d), nt, nt == 1 ? "" : "s", MIN_VOXELS);
            goto done;
        }
    }
    out->ntissue = is_dh ? 3 : 1;
    size_t nsel = 0;
    if (is_fa) {
        erode(d, ERODE_PASSES, threads, keep);
        size_t nkeep = 0;
        for (size_t i = 0; i < d->nvox; i++) nkeep += keep[i];
        nsel = top_fa(d, fa, v1, nkeep >= SF_VOXELS ? keep : NULL, SF_VOXELS, sel, dir);
        if (nsel == 0) {
            dm_set_error("%s: no voxel of the mask has a tensor to estimate a response from",
                         source(d));
            goto done;
        }
        if (dm_response_from_voxels(d, sel, dir, nsel, lmax, threads, &out->r[0]) != 0) goto done;
    } else {
        size_t nc = 0, count = SF_VOXELS, nbrain = d->nvox;
        if (is_dh) {
            erode(d, ERODE_PASSES, threads, keep);
            nbrain = 0;
            for (size_t i = 0; i < d->nvox; i++) nbrain += keep[i];
            if (nbrain < 10) { /* too small a mask to erode */
                memset(keep, 1, d->nvox);
                nbrain = d->nvox;
            }
            for (size_t i = 0; i < d->nvox; i++)
                if (keep[i] && fa[i] > DH_FA) cand[nc++] = i;
            count = (size_t)ceil(DH_SFWM * nbrain);
            if (count < 1) count = 1;
        } else {
            memset(keep, 1, d->nvox);
            for (size_t i = 0; i < d->nvox; i++) cand[nc++] = i;
        }
        if (nc == 0) {
            dm_set_error("%s: no white-matter voxels (FA > %g) to estimate a response from",
                         source(d), DH_FA);
            goto done;
        }
        unsigned char *wm = NULL;
        if (is_dh) {
            wm = calloc(d->nvox, 1);
            if (!wm) {
                dm_set_error("out of memory");
                goto done;
            }
            for (size_t j = 0; j < nc; j++) wm[cand[j]] = 1;
        }
        size_t ns = top_fa(d, fa, v1, wm, count, start, sdir);
        free(wm);
        if (ns == 0) {
            dm_set_error("%s: no voxel of the mask has a tensor to estimate a response from",
                         source(d));
            goto done;
        }
        t0 = dm_now_seconds();
        if (tournier_select(d, cand, nc, start, sdir, ns, count, lmax, threads, solver, sel, dir,
                            &nsel, &out->iterations, &out->r[0], out) != 0)
            goto done;
        out->seconds_passes = dm_now_seconds() - t0;
        if (is_dh && dhollander_iso(d, fa, keep, nbrain, threads, out) != 0) goto done;
    }
    if (!is_dh) single_shell_rows(d, &out->r[0]);
    if (mark_voxels(d, sel, nsel, &out->voxels[0]) != 0) goto done;
    out->nvoxels[0] = nsel;
    rc = 0;
done:
    free(fa);
    free(v1);
    free(keep);
    free(sel);
    free(cand);
    free(dir);
    free(sdir);
    free(start);
    return rc;
}

void dm_response_set_free(dm_response_set *s)
{
    for (int t = 0; t < DM_NTISSUES; t++) free(s->voxels[t]);
    memset(s, 0, sizeof *s);
}
