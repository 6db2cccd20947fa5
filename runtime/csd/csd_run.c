/* The deconvolution of a DWI in memory (csd_run.h), and the DWI's build from its image and
 * table (dwi.h): what `dimoc csd` and the C API share.  No files are read or written here. */
#include "csd/csd_run.h"

#include "csd/csd_cpu.h"
#include "csd/csd_solve.h"
#include "csd/dwi.h"
#include "csd/normalise.h"
#include "io/space.h"
#include "util/error.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The seconds of CPU solving between two looks at a caller's watch. */
#define WATCH_BLOCK_SECONDS 0.2

int dm_shells_group(int n, const double *b, double eps, double *shell_b, int *count, int *shell_of)
{
    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!order) return dm_set_error("out of memory grouping %d b-values", n);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int k = 1; k < n; k++) /* insertion sort by b: stable, and n is a few hundred */
        for (int j = k; j > 0 && b[order[j - 1]] > b[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int nshell = 0;
    double prev = 0.0;
    for (int k = 0; k < n; k++) {
        int i = order[k];
        int zero = b[i] <= DM_BZERO_MAX;
        int new_shell = nshell == 0 || (!zero && (prev <= DM_BZERO_MAX || b[i] - prev > eps));
        if (new_shell) {
            if (nshell == DM_MAX_SHELLS) {
                free(order);
                return dm_set_error("more than %d shells of b-values", DM_MAX_SHELLS);
            }
            shell_b[nshell] = 0.0;
            count[nshell] = 0;
            nshell++;
        }
        shell_of[i] = nshell - 1;
        shell_b[nshell - 1] += b[i];
        count[nshell - 1]++;
        prev = b[i];
    }
    for (int s = 0; s < nshell; s++) shell_b[s] /= count[s];
    free(order);
    return nshell;
}

int dm_dwi_build(dm_dwi *d, const double *g, const double R[3][3], const char *bvals,
                 const char *bvecs)
{
    d->nvol = d->data.nt;
    d->dir = calloc((size_t)d->nvol * 3, sizeof *d->dir);
    d->shell_of = malloc((size_t)d->nvol * sizeof *d->shell_of);
    if (!d->dir || !d->shell_of) return dm_set_error("out of memory reading %s", d->data_path);
    for (int t = 0; t < d->nvol; t++) {
        if (!isfinite(d->bval[t]) || d->bval[t] < 0)
            return dm_set_error("%s: b-value %d is %g; b-values are finite and >= 0", bvals, t + 1,
                                d->bval[t]);
        if (d->bval[t] <= DM_BZERO_MAX) continue;
        double n =
            sqrt(g[3 * t] * g[3 * t] + g[3 * t + 1] * g[3 * t + 1] + g[3 * t + 2] * g[3 * t + 2]);
        if (!(n > 0.5 && n < 1.5))
            return dm_set_error("%s: direction %d has length %g at b = %g; a diffusion-weighted "
                                "measurement needs a unit direction",
                                bvecs, t + 1, n, d->bval[t]);
        double u[3] = {g[3 * t] / n, g[3 * t + 1] / n, g[3 * t + 2] / n};
        dm_rotate3(R, u, d->dir + 3 * t, 0);
    }
    d->nshell = dm_shells_group(d->nvol, d->bval, 80.0, d->shell_b, d->shell_count, d->shell_of);
    if (d->nshell < 0) return dm_set_error("%s: %s", bvals, dm_last_error());
    d->has_b0 = d->shell_b[0] <= DM_BZERO_MAX;
    if (d->nshell == d->has_b0)
        return dm_set_error("%s: no diffusion-weighted measurements (every b <= %g)", bvals,
                            DM_BZERO_MAX);
    size_t nall = DM_NVOX(&d->data);
    d->vox = malloc((nall ? nall : 1) * sizeof *d->vox);
    if (!d->vox) return dm_set_error("out of memory reading %s", d->data_path);
    for (size_t v = 0; v < nall; v++)
        if (!d->mask.data || (d->mask.data[v] != 0 && !isnan(d->mask.data[v])))
            d->vox[d->nvox++] = v;
    if (d->nvox == 0) return dm_set_error("%s: the mask is empty", d->mask_path);
    return 0;
}

void dm_dwi_release(dm_dwi *d)
{
    free(d->bval);
    free(d->dir);
    free(d->shell_of);
    free(d->vox);
    memset(d, 0, sizeof *d);
}

void dm_csd_scatter(const dm_dwi *d, const double *vals, int stride, int first, int nt, double *img)
{
    size_t nall = DM_NVOX(&d->data);
    for (size_t i = 0; i < d->nvox; i++)
        for (int c = 0; c < nt; c++)
            img[d->vox[i] + (size_t)c * nall] = vals[i * (size_t)stride + first + c];
}

/* --normalise: mtnormalise's balance factors and bias field (csd/normalise.h), fitted on the
 * tissues' l = 0 terms over the mask, applied to every coefficient of the solution X. */
static int normalise_tissues(const dm_dwi *d, const dm_csd_plan *p, double *X, dm_provenance *prov)
{
    size_t nall = DM_NVOX(&d->data);
    double *l0[DM_CSD_MAX_TISSUES] = {0}, *field = malloc(nall * sizeof *field);
    unsigned char *mask = calloc(nall, 1);
    int stride[DM_CSD_MAX_TISSUES], rc = -1, ok = field && mask;
    double balance[DM_CSD_MAX_TISSUES];
    for (int t = 0; t < p->ntissue; t++) {
        stride[t] = 1;
        l0[t] = calloc(nall, sizeof *l0[t]);
        ok = ok && l0[t];
    }
    if (!ok) {
        dm_set_error("out of memory for --normalise");
        goto done;
    }
    for (size_t i = 0; i < d->nvox; i++) {
        mask[d->vox[i]] = 1;
        for (int t = 0; t < p->ntissue; t++) l0[t][d->vox[i]] = X[i * p->n + p->tissue_off[t]];
    }
    if (dm_mtnormalise(&d->data, mask, p->ntissue, l0, stride, NULL, field, balance) != 0) {
        dm_set_error("--normalise: %s", dm_last_error());
        goto done;
    }
    for (size_t i = 0; i < d->nvox; i++)
        for (int t = 0; t < p->ntissue; t++) {
            double f = balance[t] * field[d->vox[i]];
            int nc = dm_sh_ncoef(p->tissue_lmax[t]);
            for (int c = 0; c < nc; c++) X[i * p->n + p->tissue_off[t] + c] *= f;
        }
    for (int t = 0; t < p->ntissue; t++) {
        char key[32];
        snprintf(key, sizeof key, "normalise_balance_%d", t + 1);
        dm_provenance_num(prov, DM_PROV_RESULT, key, balance[t]);
    }
    rc = 0;
done:
    for (int t = 0; t < p->ntissue; t++) free(l0[t]);
    free(field);
    free(mask);
    return rc;
}

/* The rows of the signals gpu_solve was handed, for a chunk of its voxels. */
typedef struct held_signals {
    const double *Y;
    size_t nvox;
    int m;
} held_signals;

static void copy_held(void *ctx, size_t from, size_t n, double *Y)
{
    const held_signals *h = ctx;
    for (int j = 0; j < h->m; j++) memcpy(Y + j * n, h->Y + j * h->nvox + from, n * sizeof *Y);
}

static int gpu_solve(void *ctx, const dm_csd_plan *p, const double *Y, size_t nvox, double *X,
                     unsigned char *status)
{
    dm_csd_gpu_solver *g = ctx;
    dm_csd_gpu_times t;
    held_signals h = {Y, nvox, p->m};
    int rc = dm_csd_gpu_run(g->warm, p, copy_held, &h, nvox, 0, 1, 50, X, status, NULL, &t);
    g->times.compile += t.compile;
    g->times.upload += t.upload;
    g->times.solve += t.solve;
    g->times.download += t.download;
    return rc;
}

dm_csd_solver dm_csd_gpu_solver_of(dm_csd_gpu_solver *g)
{
    return (dm_csd_solver){gpu_solve, g};
}

/* lmax: even, within what the code and the measurements support. */
static int check_lmax(int lmax, const dm_dwi *d, const dm_csd_plan *p)
{
    if (lmax < 0 || lmax % 2 || lmax > DM_SH_LMAX_MAX)
        return dm_set_error("--lmax %d: the FOD's degree must be even, 0 to %d", lmax,
                            DM_SH_LMAX_MAX);
    int ndw = 0;
    for (int j = 0; j < p->m; j++) ndw += d->bval[p->vol[j]] > DM_BZERO_MAX;
    /* Super-resolution (Tournier 2007) recovers up to about twice as many coefficients as
     * there are measurements; beyond that the constraints alone cannot pin the FOD. */
    if (dm_sh_ncoef(lmax) > 2 * ndw)
        return dm_set_error("--lmax %d: %d coefficients from %d diffusion-weighted measurements "
                            "(%s); at most lmax %d",
                            lmax, dm_sh_ncoef(lmax), ndw, d->data_path, dm_sh_lmax_for(2 * ndw));
    return 0;
}

/* The plan's measurements of solved voxels from .. from + n into Y, measurement-major (n
 * apart), as NIfTI stores volumes: a sequential gather. */
static void gather(const dm_dwi *d, const dm_csd_plan *p, size_t from, size_t n, int threads,
                   double *Y)
{
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (int j = 0; j < p->m; j++) /* measurement-major, as NIfTI stores it: sequential */
        for (size_t i = 0; i < n; i++) Y[j * n + i] = dm_dwi_signal(d, from + i, p->vol[j]);
}

/* gather as the GPU's solve asks for its chunks. */
typedef struct gather_job {
    const dm_dwi *d;
    const dm_csd_plan *p;
    int threads;
} gather_job;

static void gather_chunk(void *ctx, size_t from, size_t n, double *Y)
{
    const gather_job *g = ctx;
    gather(g->d, g->p, from, n, g->threads, Y);
}

/* The CPU solve for a caller's watch: blocks of voxels that end where a run of warm starts
 * ends (so that every voxel starts from the active set it starts from in one solve), each
 * about WATCH_BLOCK_SECONDS long, with the progress reported and the cancel looked at between
 * them.  first: solved voxel 0's number among the mask's. */
static int solve_watched(const dm_csd_plan *p, const dm_dwi *d, size_t first, int use_double,
                         int threads, int max_iter, dm_watch *watch, double *X,
                         unsigned char *status, int *iters)
{
    const size_t nvox = d->nvox, lead = first % DM_CSD_RUN;
    double *Y = NULL;
    size_t from = 0, block = DM_CSD_RUN, cap = 0;
    while (from < nvox) {
        size_t to = (from + lead) / DM_CSD_RUN * DM_CSD_RUN + block - lead;
        if (to > nvox) to = nvox;
        size_t n = to - from;
        if (n > cap) {
            double *more = realloc(Y, n * (size_t)p->m * sizeof *Y);
            if (!more) {
                free(Y);
                return dm_set_error("out of memory for %zu voxels", n);
            }
            Y = more, cap = n;
        }
        double t0 = dm_now_seconds();
        gather(d, p, from, n, threads, Y);
        if (dm_csd_cpu_run(p, Y, n, first + from, use_double, threads, max_iter, NULL,
                           X + from * (size_t)p->n, status + from, iters + from) != 0) {
            free(Y);
            return -1;
        }
        from = to;
        dm_watch_report(watch, "csd", (double)from / (double)nvox);
        if (dm_watch_stopping(watch)) {
            free(Y);
            return dm_watch_stop_error(watch);
        }
        double took = dm_now_seconds() - t0; /* the next block: about the watch's period */
        double want = took > 0 ? (double)block * WATCH_BLOCK_SECONDS / took : 2.0 * block;
        block = want > 4.0 * block ? 4 * block : want < DM_CSD_RUN ? DM_CSD_RUN : (size_t)want;
        block = (block + DM_CSD_RUN - 1) / DM_CSD_RUN * DM_CSD_RUN;
    }
    free(Y);
    return 0;
}

/* Response estimation's parts: the tensors, then tournier's passes and theirs. */
static void response_stage_times(dm_provenance *prov, const dm_response_set *est)
{
    static const char *const key[] = {"tensors",          "passes", "gather",      "deconvolve",
                                      "first_deconvolve", "peaks",  "first_peaks", "select"};
    const double secs[] = {est->seconds_tensors,          est->seconds_passes,
                           est->seconds_gather,           est->seconds_deconvolve,
                           est->seconds_first_deconvolve, est->seconds_peaks,
                           est->seconds_first_peaks,      est->seconds_select};
    for (int i = 0; i < (int)(sizeof secs / sizeof *secs); i++) {
        char name[64];
        snprintf(name, sizeof name, "seconds_response_%s", key[i]);
        dm_provenance_num(prov, DM_PROV_RESULT, name, secs[i]);
    }
}

void dm_response_provenance(dm_provenance *prov, const dm_response_set *est, double seconds)
{
    for (int t = 0; t < est->ntissue; t++) {
        char key[64];
        snprintf(key, sizeof key, "%s_voxels", dm_tissue_names[t]);
        dm_provenance_num(prov, DM_PROV_RESULT, key, (double)est->nvoxels[t]);
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "iterations", est->iterations);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_response", seconds);
    response_stage_times(prov, est);
}

int dm_csd_unsolved_note(const dm_csd_result *r, size_t nvox, char *buf, size_t size)
{
    const size_t *c = r->counts;
    if (!(c[DM_CSD_MAX_ITER] + c[DM_CSD_DEGENERATE] + c[DM_CSD_NONFINITE])) return 0;
    snprintf(buf, size,
             "%zu of %zu voxels not solved (status.nii.gz: 2 iteration limit %zu, 3 degenerate "
             "%zu, 4 NaN/Inf signal %zu)",
             nvox - c[DM_CSD_OK], nvox, c[DM_CSD_MAX_ITER], c[DM_CSD_DEGENERATE],
             c[DM_CSD_NONFINITE]);
    return 1;
}

int dm_csd_run(const dm_csd_options *o, dm_dwi *d, int nresp, const dm_response *given,
               const char *const *rname, const dm_csd_dirs *dirs, dm_csd_gpu_warm *warm,
               double load_seconds, dm_watch *watch, dm_provenance *prov, dm_csd_result *out)
{
    memset(out, 0, sizeof *out);
    int rc = -1;
    double t0 = dm_now_seconds(), t_load = load_seconds, t_resp = 0, t_solve = 0;
    double *Y = NULL;
    dm_csd_plan *plan = &out->plan;
    dm_response *resp = out->resp;
    int map_store[DM_CSD_MAX_TISSUES][DM_MAX_SHELLS], *map[DM_CSD_MAX_TISSUES];
    for (int t = 0; t < DM_CSD_MAX_TISSUES; t++) map[t] = map_store[t];
    dm_csd_gpu_times gt = {0};
    const char *name[DM_CSD_MAX_TISSUES];
    for (int t = 0; t < nresp; t++) {
        resp[t] = given[t];
        name[t] = rname[t];
    }

    int ndw_shells = d->nshell - d->has_b0;
    if (nresp == 0) {
        dm_watch_report(watch, "response", 0);
        const char *alg = o->algorithm;
        if (!alg) alg = ndw_shells > 1 || o->msmt ? "dhollander" : "tournier";
        /* Its passes' deconvolutions run on the GPU when the solve does (gpu_solve). */
        dm_csd_gpu_solver g = {.warm = warm};
        const dm_csd_solver solver = dm_csd_gpu_solver_of(&g);
        if (dm_response_estimate(d, alg, o->lmax > 10 ? o->lmax : 10, o->threads,
                                 o->use_gpu ? &solver : NULL, &out->est) != 0)
            goto done;
        if (o->use_gpu) {
            dm_provenance_num(prov, DM_PROV_RESULT, "seconds_response_gpu", g.times.solve);
            dm_provenance_num(prov, DM_PROV_RESULT, "seconds_response_gpu_setup",
                              g.times.compile + g.times.upload + g.times.download);
        }
        response_stage_times(prov, &out->est);
        /* b = 0 and one shell determine two tissues at most: WM and CSF, as MRtrix's
         * single-shell two-tissue CSD. */
        int keep[DM_NTISSUES] = {DM_TISSUE_WM, DM_TISSUE_GM, DM_TISSUE_CSF};
        nresp = out->est.ntissue;
        if (nresp == 3 && d->nshell == 2) {
            keep[1] = DM_TISSUE_CSF;
            nresp = 2;
        }
        for (int t = 0; t < nresp; t++) {
            resp[t] = out->est.r[keep[t]];
            out->voxels[t] = out->est.voxels[keep[t]];
            name[t] = "the estimated response";
        }
        dm_watch_report(watch, "response", 1);
        if (dm_watch_stopping(watch)) {
            dm_watch_stop_error(watch);
            goto done;
        }
    }
    static const char *const iso_names[2][2] = {{"csf", ""}, {"gm", "csf"}};
    out->ntissue = nresp;
    for (int t = 0; t < nresp; t++) out->tissue[t] = t == 0 ? "wm" : iso_names[nresp - 2][t - 1];
    for (int t = 0; t < nresp; t++)
        if (dm_response_match(&resp[t], name[t], d, map[t]) != 0) goto done;
    for (int t = 0; nresp > 1 && t < nresp; t++)
        if (resp[t].nshell != d->nshell) {
            dm_set_error("%s: %d row%s, but a multi-tissue deconvolution needs one per shell of "
                         "the data (%d, b = 0 included)",
                         name[t], resp[t].nshell, resp[t].nshell == 1 ? "" : "s", d->nshell);
            goto done;
        }
    if (nresp > 1)
        for (int t = 1; t < nresp; t++)
            if (resp[t].nshell != resp[0].nshell) {
                dm_set_error("%s: %d shells where %s has %d; the responses of one "
                             "deconvolution cover the same shells",
                             name[t], resp[t].nshell, name[0], resp[0].nshell);
                goto done;
            }
    /* As dwi2fod: lmax 8, or the WM response's degree if lower; a given lmax above the
     * response's degree takes its higher orders as zero (super-resolution). */
    int lmax = o->lmax >= 0 ? o->lmax : resp[0].lmax < 8 ? resp[0].lmax : 8;
    t_resp = dm_now_seconds() - t0;
    /* --part: the responses above came from the whole mask, the same in every part; the
     * solvers count their runs of warm starts from the mask's first voxel, as a whole run */
    size_t part_first = 0, part_end = 0;
    out->own_first = 0, out->own_end = DM_NVOX(&d->data);
    dm_part_range(&o->part, d->nvox, &part_first, &part_end);
    /* A part whose first voxel is inside a run solves the run's voxels before it as well (lead
     * of them, dropped after the solve), so that each of its voxels starts from the active set
     * it starts from in the whole run. */
    const size_t lead = part_first % DM_CSD_RUN;
    size_t lead_vox[DM_CSD_RUN];
    for (size_t t = 0; t < lead; t++) lead_vox[t] = d->vox[part_first - lead + t];
    dm_part_select_voxels(&o->part, d->vox, &d->nvox, DM_NVOX(&d->data), &out->own_first,
                          &out->own_end);
    if (lead) {
        size_t *vox = realloc(d->vox, (d->nvox + lead) * sizeof *vox);
        if (!vox) {
            dm_set_error("out of memory for %zu voxels", d->nvox);
            goto done;
        }
        memmove(vox + lead, vox, d->nvox * sizeof *vox);
        memcpy(vox, lead_vox, lead * sizeof *vox);
        d->vox = vox;
        d->nvox += lead;
        part_first -= lead;
    }

    if (dm_csd_plan_build(d, nresp, resp, map, lmax, dirs, plan) != 0) goto done;
    if (check_lmax(lmax, d, plan) != 0) goto done;
    /* a part may have no voxel: room for one */
    out->X = malloc((d->nvox + 1) * (size_t)plan->n * sizeof *out->X);
    out->status = malloc(d->nvox + 1);
    out->iters = malloc((d->nvox + 1) * sizeof *out->iters);
    /* The CPU's solve with a watch gathers blocks between looks, the GPU's chunks as it solves
     * the chunk before: only the CPU's unwatched solve takes every signal first. */
    const int watched = watch && !o->use_gpu;
    const int whole = !watched && !o->use_gpu;
    if (whole) Y = malloc((d->nvox + 1) * (size_t)plan->m * sizeof *Y);
    if ((whole && !Y) || !out->X || !out->status || !out->iters) {
        dm_set_error("out of memory for %zu voxels", d->nvox);
        goto done;
    }
    double *X = out->X;
    unsigned char *status = out->status;
    int *iters = out->iters;
    t0 = dm_now_seconds();
    if (whole) gather(d, plan, 0, d->nvox, o->threads, Y);
    t_load += dm_now_seconds() - t0; /* gathering the mask's signals is part of loading */
    /* Soft: MRtrix's 50 iterations; hard: each step adds a constraint and some are dropped
     * again, about 3n steps in all on real data; 10n as MRtrix's msmt_csd allows. */
    int max_iter = o->max_iter > 0 ? o->max_iter : plan->soft ? 50 : 10 * plan->n;
    /* Multi-tissue CSD solves in double whatever --precision says: its unconstrained start
     * is large and cancels against the constraints' corrections, and float matrices moved
     * FODs by 0.7% of their largest coefficient (measured), against 6e-6 for single-shell. */
    int use_double = o->use_double || !plan->soft;
    dm_provenance_str(prov, DM_PROV_RESULT, "precision", use_double ? "double" : "float");
    dm_watch_report(watch, "csd", 0);
    t0 = dm_now_seconds();
    if (d->nvox == 0) {
        /* a part without voxels: nothing to solve */
    } else if (o->use_gpu) {
        gather_job g = {d, plan, o->threads};
        if (dm_csd_gpu_run(warm, plan, gather_chunk, &g, d->nvox, part_first, use_double, max_iter,
                           X, status, iters, &gt) != 0)
            goto done;
    } else if (watched) {
        if (solve_watched(plan, d, part_first, use_double, o->threads, max_iter, watch, X, status,
                          iters) != 0)
            goto done;
    } else if (dm_csd_cpu_run(plan, Y, d->nvox, part_first, use_double, o->threads, max_iter, "csd",
                              X, status, iters) != 0) {
        goto done;
    }
    t_solve = dm_now_seconds() - t0 - gt.compile; /* the GPU's compile is a stage of its own */
    dm_watch_report(watch, "csd", 1);
    if (dm_watch_stopping(watch)) {
        dm_watch_stop_error(watch);
        goto done;
    }
    if (lead) { /* the voxels before the part's first */
        d->nvox -= lead;
        memmove(d->vox, d->vox + lead, d->nvox * sizeof *d->vox);
        memmove(X, X + lead * plan->n, d->nvox * plan->n * sizeof *X);
        memmove(status, status + lead, d->nvox);
        memmove(iters, iters + lead, d->nvox * sizeof *iters);
    }
    if (o->normalise) {
        dm_watch_report(watch, "normalise", 0);
        if (normalise_tissues(d, plan, X, prov) != 0) goto done;
        dm_watch_report(watch, "normalise", 1);
    }

    size_t *counts = out->counts;
    long total_iters = 0;
    for (size_t i = 0; i < d->nvox; i++) {
        counts[status[i] < 5 ? status[i] : 0]++;
        total_iters += iters[i];
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "voxels", (double)d->nvox);
    dm_provenance_num(prov, DM_PROV_RESULT, "solved", (double)counts[DM_CSD_OK]);
    dm_provenance_num(prov, DM_PROV_RESULT, "iteration_limit", (double)counts[DM_CSD_MAX_ITER]);
    dm_provenance_num(prov, DM_PROV_RESULT, "degenerate", (double)counts[DM_CSD_DEGENERATE]);
    dm_provenance_num(prov, DM_PROV_RESULT, "nonfinite", (double)counts[DM_CSD_NONFINITE]);
    dm_provenance_num(prov, DM_PROV_RESULT, "mean_active_set_steps",
                      (double)total_iters / (double)d->nvox);
    dm_provenance_num(prov, DM_PROV_RESULT, "tissues", nresp);
    dm_provenance_num(prov, DM_PROV_RESULT, "unknowns", plan->n);
    dm_provenance_num(prov, DM_PROV_RESULT, "measurements", plan->m);
    dm_provenance_num(prov, DM_PROV_RESULT, "constraints", plan->k);
    dm_provenance_num(prov, DM_PROV_RESULT, "constraint_directions", dirs->n);
    dm_provenance_num(prov, DM_PROV_RESULT, "lmax", plan->lmax);
    dm_provenance_str(prov, DM_PROV_RESULT, "device", o->use_gpu ? gt.device : "cpu");
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_compile", gt.compile);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_load", t_load);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_response", t_resp);
    if (o->use_gpu) {
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_upload", gt.upload);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_kernel", gt.solve);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_download", gt.download);
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_solve", t_solve);
    rc = 0;
done:
    free(Y);
    if (rc != 0) dm_csd_result_free(out);
    return rc;
}

void dm_csd_result_free(dm_csd_result *r)
{
    free(r->X);
    free(r->status);
    free(r->iters);
    dm_csd_plan_free(&r->plan);
    dm_response_set_free(&r->est);
    memset(r, 0, sizeof *r);
}
