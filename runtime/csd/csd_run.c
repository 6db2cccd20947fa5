/* `dimoc csd` and `dimoc response` (csd_run.h). */
#include "csd/csd_run.h"
#include "util/progress.h"

#include "csd/csd_cpu.h"
#include "csd/csd_gpu.h"
#include "csd/csd_plan.h"
#include "csd/dwi.h"
#include "csd/normalise.h"
#include "csd/response_estimate.h"
#include "csd/csd_solve.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Writes DIR/NAME as float32 (uint8 when `bytes`) from per-mask-voxel values: vals[i * stride
 * + c] is volume c of mask voxel i; 0 outside the mask. */
static int write_map(const dm_outdir *od, const char *name, const dm_dwi *d, const double *vals,
                     int stride, int nt, int first)
{
    size_t nall = DM_NVOX(&d->data);
    double *img = calloc(nall * (size_t)nt, sizeof *img);
    char *path = dm_volume_output_path(od->path, name);
    int rc = -1;
    if (img && path) {
        for (size_t i = 0; i < d->nvox; i++)
            for (int c = 0; c < nt; c++)
                img[d->vox[i] + (size_t)c * nall] = vals[i * (size_t)stride + first + c];
        rc = dm_volume_write(path, &d->data, nt, img, DM_OUT_FLOAT32);
    } else {
        dm_set_error("out of memory writing %s", name);
    }
    free(img);
    free(path);
    return rc;
}

/* Writes DIR/NAME as uint8 from an image-sized array of bytes. */
static int write_bytes(const dm_outdir *od, const char *name, const dm_dwi *d,
                       const unsigned char *bytes)
{
    size_t nall = DM_NVOX(&d->data);
    double *img = malloc(nall * sizeof *img);
    char *path = dm_volume_output_path(od->path, name);
    int rc = -1;
    if (img && path) {
        for (size_t v = 0; v < nall; v++) img[v] = bytes[v];
        rc = dm_volume_write(path, &d->data, 1, img, DM_OUT_UINT8);
    } else {
        dm_set_error("out of memory writing %s", name);
    }
    free(img);
    free(path);
    return rc;
}

static int write_response(const dm_outdir *od, const char *tissue, const dm_response *r,
                          const char *history)
{
    char name[64];
    snprintf(name, sizeof name, "%s_response.txt", tissue);
    char *path = dm_path_join(od->path, name);
    int rc = path ? dm_response_write(path, r, history) : dm_set_error("out of memory");
    free(path);
    return rc;
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

/* Response estimation's deconvolutions on the GPU that dimoc csd made ready (csd_gpu.h), in
 * double; the compile and transfers add to times. */
typedef struct gpu_solver {
    dm_csd_gpu_warm *warm;
    dm_csd_gpu_times times;
} gpu_solver;

static int gpu_solve(void *ctx, const dm_csd_plan *p, const double *Y, size_t nvox, double *X,
                     unsigned char *status)
{
    gpu_solver *g = ctx;
    dm_csd_gpu_times t;
    int rc = dm_csd_gpu_run(g->warm, p, Y, nvox, 0, 1, 50, X, status, NULL, &t);
    g->times.compile += t.compile;
    g->times.upload += t.upload;
    g->times.solve += t.solve;
    g->times.download += t.download;
    return rc;
}

/* Splits "a,b,c" into at most max paths (pointers into a copy kept in *buf). */
static int split_paths(const char *list, char **buf, const char **path, int max)
{
    *buf = strdup(list);
    if (!*buf) return dm_set_error("out of memory");
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(*buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == max) return dm_set_error("--response: more than %d files (WM, GM, CSF)", max);
        path[n++] = tok;
    }
    if (n == 0) return dm_set_error("--response: no file named");
    return n;
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

int dm_csd_command(const dm_csd_options *o, dm_provenance *prov)
{
    int rc = -1, nresp = 0;
    double t0 = dm_now_seconds(), t_load = 0, t_resp = 0, t_solve = 0, t_write = 0;
    dm_dwi d = {0};
    dm_csd_plan plan = {0};
    dm_csd_dirs dirs = {0};
    dm_response resp[DM_CSD_MAX_TISSUES];
    dm_response_set est = {0};
    const char *rpath[DM_CSD_MAX_TISSUES] = {0};
    char *rbuf = NULL;
    double *Y = NULL, *X = NULL;
    unsigned char *status = NULL;
    int *iters = NULL;
    dm_outdir od = {0};
    int map_store[DM_CSD_MAX_TISSUES][DM_MAX_SHELLS], *map[DM_CSD_MAX_TISSUES];
    for (int t = 0; t < DM_CSD_MAX_TISSUES; t++) map[t] = map_store[t];
    dm_csd_gpu_times gt = {0};
    dm_csd_gpu_warm warm = {0};
    int est_of[DM_CSD_MAX_TISSUES] = {0, 1, 2}; /* the estimate behind each tissue */

    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    if (o->use_gpu) dm_csd_gpu_warm_start(&warm, o->gpus); /* CUDA starts while we read */
    if (o->response) {
        nresp = split_paths(o->response, &rbuf, rpath, DM_CSD_MAX_TISSUES);
        if (nresp < 0) goto done;
        for (int t = 0; t < nresp; t++)
            if (dm_response_read(rpath[t], &resp[t]) != 0) goto done;
    }
    if (dm_csd_dirs_read(o->directions, &dirs) != 0) goto done;
    if (dm_dwi_read_grad(&d, o->data, o->bvals, o->bvecs, o->grad, o->mask) != 0) goto done;
    t_load = dm_now_seconds() - t0;

    t0 = dm_now_seconds();
    int ndw_shells = d.nshell - d.has_b0;
    if (!o->response) {
        const char *alg = o->algorithm;
        if (!alg) alg = ndw_shells > 1 || o->msmt ? "dhollander" : "tournier";
        /* Its passes' deconvolutions can run on the GPU (gpu_solve); they stay on the CPU until
         * that path has run under the GPU tests. */
        gpu_solver g = {.warm = &warm};
        const dm_csd_solver solver = {gpu_solve, &g};
        const int passes_on_gpu = 0;
        if (dm_response_estimate(&d, alg, o->lmax > 10 ? o->lmax : 10, o->threads,
                                 o->use_gpu && passes_on_gpu ? &solver : NULL, &est) != 0)
            goto done;
        if (o->use_gpu)
            dm_provenance_num(prov, DM_PROV_RESULT, "seconds_response_gpu", g.times.solve);
        /* b = 0 and one shell determine two tissues at most: WM and CSF, as MRtrix's
         * single-shell two-tissue CSD. */
        int keep[DM_NTISSUES] = {DM_TISSUE_WM, DM_TISSUE_GM, DM_TISSUE_CSF};
        nresp = est.ntissue;
        if (nresp == 3 && d.nshell == 2) {
            keep[1] = DM_TISSUE_CSF;
            nresp = 2;
        }
        for (int t = 0; t < nresp; t++) {
            resp[t] = est.r[keep[t]];
            est_of[t] = keep[t];
        }
    }
    for (int t = 0; t < nresp; t++)
        if (dm_response_match(&resp[t], rpath[t] ? rpath[t] : "the estimated response", &d,
                              map[t]) != 0)
            goto done;
    for (int t = 0; nresp > 1 && t < nresp; t++)
        if (resp[t].nshell != d.nshell) {
            dm_set_error("%s: %d row%s, but a multi-tissue deconvolution needs one per shell of "
                         "the data (%d, b = 0 included)",
                         rpath[t] ? rpath[t] : "the estimated response", resp[t].nshell,
                         resp[t].nshell == 1 ? "" : "s", d.nshell);
            goto done;
        }
    if (nresp > 1)
        for (int t = 1; t < nresp; t++)
            if (resp[t].nshell != resp[0].nshell) {
                dm_set_error("%s: %d shells where %s has %d; the responses of one "
                             "deconvolution cover the same shells",
                             rpath[t], resp[t].nshell, rpath[0], resp[0].nshell);
                goto done;
            }
    /* As dwi2fod: lmax 8, or the WM response's degree if lower; a given lmax above the
     * response's degree takes its higher orders as zero (super-resolution). */
    int lmax = o->lmax >= 0 ? o->lmax : resp[0].lmax < 8 ? resp[0].lmax : 8;
    t_resp = dm_now_seconds() - t0;
    /* --part: the responses above came from the whole mask, the same in every part; the
     * solvers count their runs of warm starts from the mask's first voxel, as a whole run */
    size_t own_first = 0, own_end = DM_NVOX(&d.data), part_first = 0, part_end = 0;
    dm_part_range(&o->part, d.nvox, &part_first, &part_end);
    /* A part whose first voxel is inside a run solves the run's voxels before it as well (lead
     * of them, dropped after the solve), so that each of its voxels starts from the active set
     * it starts from in the whole run. */
    const size_t lead = part_first % DM_CSD_RUN;
    size_t lead_vox[DM_CSD_RUN];
    for (size_t t = 0; t < lead; t++) lead_vox[t] = d.vox[part_first - lead + t];
    dm_part_select_voxels(&o->part, d.vox, &d.nvox, DM_NVOX(&d.data), &own_first, &own_end);
    if (lead) {
        size_t *vox = realloc(d.vox, (d.nvox + lead) * sizeof *vox);
        if (!vox) {
            dm_set_error("out of memory for %zu voxels", d.nvox);
            goto done;
        }
        memmove(vox + lead, vox, d.nvox * sizeof *vox);
        memcpy(vox, lead_vox, lead * sizeof *vox);
        d.vox = vox;
        d.nvox += lead;
        part_first -= lead;
    }

    if (dm_csd_plan_build(&d, nresp, resp, map, lmax, &dirs, &plan) != 0) goto done;
    if (check_lmax(lmax, &d, &plan) != 0) goto done;
    Y = malloc((d.nvox + 1) * (size_t)plan.m * sizeof *Y); /* + 1: a part may have none */
    X = malloc((d.nvox + 1) * (size_t)plan.n * sizeof *X);
    status = malloc(d.nvox + 1);
    iters = malloc((d.nvox + 1) * sizeof *iters);
    if (!Y || !X || !status || !iters) {
        dm_set_error("out of memory for %zu voxels", d.nvox);
        goto done;
    }
    t0 = dm_now_seconds();
#pragma omp parallel for schedule(static)                                                          \
    num_threads(o->threads > 0 ? o->threads : omp_get_max_threads())
    for (int j = 0; j < plan.m; j++) /* measurement-major, as NIfTI stores it: sequential */
        for (size_t i = 0; i < d.nvox; i++) Y[j * d.nvox + i] = dm_dwi_signal(&d, i, plan.vol[j]);
    t_load += dm_now_seconds() - t0; /* gathering the mask's signals is part of loading */
    /* Soft: MRtrix's 50 iterations; hard: each step adds a constraint and some are dropped
     * again, about 3n steps in all on real data; 10n as MRtrix's msmt_csd allows. */
    int max_iter = o->max_iter > 0 ? o->max_iter : plan.soft ? 50 : 10 * plan.n;
    /* Multi-tissue CSD solves in double whatever --precision says: its unconstrained start
     * is large and cancels against the constraints' corrections, and float matrices moved
     * FODs by 0.7% of their largest coefficient (measured), against 6e-6 for single-shell. */
    int use_double = o->use_double || !plan.soft;
    dm_provenance_str(prov, DM_PROV_RESULT, "precision", use_double ? "double" : "float");
    t0 = dm_now_seconds();
    if (d.nvox == 0) {
        /* a part without voxels: nothing to solve */
    } else if (o->use_gpu) {
        if (dm_csd_gpu_run(&warm, &plan, Y, d.nvox, part_first, use_double, max_iter, X, status,
                           iters, &gt) != 0)
            goto done;
    } else if (dm_csd_cpu_run(&plan, Y, d.nvox, part_first, use_double, o->threads, max_iter, "csd",
                              X, status, iters) != 0) {
        goto done;
    }
    t_solve = dm_now_seconds() - t0 - gt.compile; /* the GPU's compile is a stage of its own */
    if (lead) {                                   /* the voxels before the part's first */
        d.nvox -= lead;
        memmove(d.vox, d.vox + lead, d.nvox * sizeof *d.vox);
        memmove(X, X + lead * plan.n, d.nvox * plan.n * sizeof *X);
        memmove(status, status + lead, d.nvox);
        memmove(iters, iters + lead, d.nvox * sizeof *iters);
    }
    if (o->normalise && normalise_tissues(&d, &plan, X, prov) != 0) goto done;

    t0 = dm_now_seconds();
    size_t counts[5] = {0};
    long total_iters = 0;
    for (size_t i = 0; i < d.nvox; i++) {
        counts[status[i] < 5 ? status[i] : 0]++;
        total_iters += iters[i];
    }
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    static const char *const iso_names[2][2] = {{"csf", ""}, {"gm", "csf"}};
    for (int t = 0; t < nresp; t++) {
        const char *name = t == 0 ? "wm_fod.nii.gz" : NULL;
        char buf[64];
        const char *tissue = t == 0 ? "wm" : iso_names[nresp - 2][t - 1];
        if (t > 0) {
            snprintf(buf, sizeof buf, "%s.nii.gz", tissue);
            name = buf;
        }
        if (write_map(&od, name, &d, X, plan.n, dm_sh_ncoef(plan.tissue_lmax[t]),
                      plan.tissue_off[t]) != 0 ||
            write_response(&od, tissue, &resp[t], o->history) != 0)
            goto done;
        if (!o->response && est.voxels[est_of[t]]) {
            snprintf(buf, sizeof buf, "%s_voxels.nii.gz", tissue);
            if (write_bytes(&od, buf, &d, est.voxels[est_of[t]]) != 0) goto done;
        }
    }
    {
        unsigned char *img = calloc(DM_NVOX(&d.data), 1);
        if (!img) {
            dm_set_error("out of memory");
            goto done;
        }
        for (size_t i = 0; i < d.nvox; i++) img[d.vox[i]] = status[i];
        int bad = write_bytes(&od, "status.nii.gz", &d, img) != 0;
        free(img);
        if (bad) goto done;
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "voxels", (double)d.nvox);
    dm_provenance_num(prov, DM_PROV_RESULT, "solved", (double)counts[DM_CSD_OK]);
    dm_provenance_num(prov, DM_PROV_RESULT, "iteration_limit", (double)counts[DM_CSD_MAX_ITER]);
    dm_provenance_num(prov, DM_PROV_RESULT, "degenerate", (double)counts[DM_CSD_DEGENERATE]);
    dm_provenance_num(prov, DM_PROV_RESULT, "nonfinite", (double)counts[DM_CSD_NONFINITE]);
    dm_provenance_num(prov, DM_PROV_RESULT, "mean_active_set_steps",
                      (double)total_iters / (double)d.nvox);
    dm_provenance_num(prov, DM_PROV_RESULT, "tissues", nresp);
    dm_provenance_num(prov, DM_PROV_RESULT, "unknowns", plan.n);
    dm_provenance_num(prov, DM_PROV_RESULT, "measurements", plan.m);
    dm_provenance_num(prov, DM_PROV_RESULT, "constraints", plan.k);
    dm_provenance_num(prov, DM_PROV_RESULT, "constraint_directions", dirs.n);
    dm_provenance_num(prov, DM_PROV_RESULT, "lmax", plan.lmax);
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
    t_write = dm_now_seconds() - t0;
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_write", t_write);
    {
        char *path = dm_path_join(od.path, "provenance.json");
        int bad = !path || dm_provenance_write(prov, path) != 0;
        free(path);
        if (bad) goto done;
    }
    if (o->part.n > 0) {
        /* the responses and the voxels they came from are the whole mask's, in every part */
        static const dm_part_rule rules[] = {{"*_voxels.nii.gz", DM_MERGE_SAME},
                                             {"*_response.txt", DM_MERGE_SAME},
                                             {"*.nii.gz", DM_MERGE_VOXELS}};
        char *command = dm_part_command();
        dm_part_info info = {.command = command,
                             .voxel_first = own_first,
                             .voxel_end = own_end,
                             .nvox = DM_NVOX(&d.data)};
        int bad = dm_part_write(od.path, &o->part, &info, rules, 3) != 0;
        free(command);
        if (bad) goto done;
    }
    if (dm_outdir_commit(&od) != 0) goto done;
    if (counts[DM_CSD_MAX_ITER] + counts[DM_CSD_DEGENERATE] + counts[DM_CSD_NONFINITE])
        fprintf(stderr,
                "csd: %zu of %zu voxels not solved (status.nii.gz: 2 iteration limit %zu, 3 "
                "degenerate %zu, 4 NaN/Inf signal %zu)\n",
                d.nvox - counts[DM_CSD_OK], d.nvox, counts[DM_CSD_MAX_ITER],
                counts[DM_CSD_DEGENERATE], counts[DM_CSD_NONFINITE]);
    rc = 0;
done:
    if (rc != 0) dm_outdir_abort(&od);
    if (o->use_gpu) dm_csd_gpu_warm_end(&warm);
    free(rbuf);
    free(Y);
    free(X);
    free(status);
    free(iters);
    dm_csd_plan_free(&plan);
    dm_csd_dirs_free(&dirs);
    dm_response_set_free(&est);
    dm_dwi_free(&d);
    return rc;
}

int dm_response_command(const dm_response_options *o, dm_provenance *prov)
{
    int rc = -1;
    dm_dwi d = {0};
    dm_response_set est = {0};
    dm_outdir od = {0};
    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    if (dm_dwi_read_grad(&d, o->data, o->bvals, o->bvecs, o->grad, o->mask) != 0) goto done;
    double t0 = dm_now_seconds();
    if (dm_response_estimate(&d, o->algorithm, o->lmax, o->threads, NULL, &est) != 0) goto done;
    double secs = dm_now_seconds() - t0;
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    for (int t = 0; t < est.ntissue; t++) {
        if (write_response(&od, dm_tissue_names[t], &est.r[t], o->history) != 0) goto done;
        char name[64];
        snprintf(name, sizeof name, "%s_voxels.nii.gz", dm_tissue_names[t]);
        if (write_bytes(&od, name, &d, est.voxels[t]) != 0) goto done;
        char key[64];
        snprintf(key, sizeof key, "%s_voxels", dm_tissue_names[t]);
        dm_provenance_num(prov, DM_PROV_RESULT, key, (double)est.nvoxels[t]);
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "iterations", est.iterations);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_response", secs);
    {
        char *path = dm_path_join(od.path, "provenance.json");
        int bad = !path || dm_provenance_write(prov, path) != 0;
        free(path);
        if (bad) goto done;
    }
    if (dm_outdir_commit(&od) != 0) goto done;
    rc = 0;
done:
    if (rc != 0) dm_outdir_abort(&od);
    dm_response_set_free(&est);
    dm_dwi_free(&d);
    return rc;
}
