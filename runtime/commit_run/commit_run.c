/* A COMMIT run: the stages in order, each timed in the provenance (see commit_run.h), with what
 * can run beside them on threads of its own (side_job.h): the tractogram read while the data
 * are, the GPU made ready while the dictionary is built, the arrays no later step reads freed
 * while the solver runs.  The inputs come from a source (the command's files, the C API's
 * arrays) and are checked by commit_inputs.c, the outputs made by commit_outputs.c for a sink;
 * the stages themselves are runtime/commit's. */
#include "commit_run/commit_run.h"
#include "commit_run/commit_inputs.h"
#include "commit_run/commit_outputs.h"
#include "commit_run/side_job.h"
#include "commit/commit_pulses.h"
#include "commit/commit_dict.h"
#include "commit/commit_cpu.h"
#include "commit/commit_dirs.h"
#include "commit/commit_gpu.h"
#include "commit/commit_operator.h"
#include "gpu/gpu_device.h"
#include "csd/dwi.h"
#include "io/space.h"
#include "tractogram/tck.h"
#include "io/bigalloc.h"
#include "util/error.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tractogram (often a gigabyte) read on a thread of its own while the data are. */
typedef struct {
    const dm_commit_source *src;
    const dm_commit_options *o;
    dm_tck *t;
    int threads;
} tck_read;

static int read_tck(void *arg)
{
    tck_read *r = arg;
    return r->src->tracks(r->src->user, r->o, r->threads, r->t);
}

/* Waits for the reader; other_rc is the result of what ran meanwhile (its error stands). */
static int tck_read_end(dm_side_job *j, const tck_read *r, int other_rc)
{
    if (dm_side_end(j, other_rc == 0) != 0 || other_rc != 0) return -1;
    if (r->t->count == 0) return dm_set_error("%s: no streamlines", r->o->tractogram);
    return 0;
}

/* --peaks read on a thread of its own while the dictionary is built (it does not depend on
 * it). */
typedef struct {
    const dm_commit_source *src;
    const dm_commit_options *o;
    const dm_dwi *w;
    dm_image_view view;
} peaks_read;

static int read_peaks(void *arg)
{
    peaks_read *r = arg;
    return r->src->peaks(r->src->user, r->o, r->w, &r->view);
}

/* The GPU's context, program and kernels made ready on a thread of its own while the dictionary
 * and the operator are built. */
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

static int prepare_gpu(void *arg)
{
    gpu_prepare *p = arg;
    return (p->g = dm_commit_gpu_prepare(p->ns, p->gpus, p->threads)) ? 0 : -1;
}

/* A caller's cancel between stages: 1 with the error set. */
static int cancelled(dm_watch *watch)
{
    return dm_watch_stopping(watch) && dm_watch_cancelled(watch) && dm_watch_stop_error(watch);
}

/* The solver's iterations on the command's progress line (bar), or to a caller (watch). */
typedef struct {
    dm_progress *bar;
    int last;
    dm_watch *watch;
    const char *stage;
    int max_iter;
} solve_progress;

static void on_iteration(void *arg, int iter, double objective)
{
    (void)objective;
    solve_progress *p = arg;
    dm_progress_add(p->bar, iter - p->last);
    dm_watch_report(p->watch, p->stage, (double)iter / p->max_iter);
    p->last = iter;
}

static solve_progress solve_start(const char *stage, int max_iter, dm_watch *watch)
{
    solve_progress p = {NULL, 0, watch, stage, max_iter > 0 ? max_iter : 1};
    if (!watch) p.bar = dm_progress_start(!strcmp(stage, "solve") ? "commit" : "commit debias",
                                          max_iter, "iterations");
    dm_watch_report(watch, stage, 0);
    return p;
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

int dm_commit_run(const dm_commit_options *o, const dm_commit_source *src,
                  const dm_commit_sink *sink, dm_watch *watch, dm_provenance *prov,
                  dm_commit_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    const int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    double t0 = dm_now_seconds(), t_load, t_dict, t_kern, t_op, t_setup, t_solve;
    dm_commit_cpu *cpu = NULL;
    dm_commit_gpu *gpu = NULL;
    dm_dwi w;
    memset(&w, 0, sizeof w);
    int have_data = 0;
    dm_affine v2w;
    dm_tck t;
    memset(&t, 0, sizeof t);
    dm_commit_dirs dirs = {0};
    dm_commit_dict d = {0};
    dm_commit_kernels k = {0};
    dm_commit_pulse_table pulses = {0};
    dm_commit_operator A = {0};
    float *peaks = NULL;
    double *y = NULL, *x = NULL, *aty_plain = NULL, /* with a confidence map and a regularisation */
                                     *col_w = NULL; /* the lasso's column weights */
    unsigned char *ic_fixed = NULL;                 /* --debias: the IC columns left out */
    unsigned char *mask = NULL, *blur_apply = NULL;
    long *input_of = NULL, ninput = 0; /* --blur-clust-thr: the representatives' input indices */
    long *cluster_of = NULL;           /* and each input streamline's cluster */
    float *conf = NULL, *row_w = NULL;
    double *y0 = NULL; /* with a confidence map: the signal unweighted */
    int rc = -1, npeaks = 0, conf_used = 0;
    int dict_gpu = 0; /* the dictionary cut on the GPU */
    dm_side_job gj = {0}, pj = {0};
    dm_side_job fw = {0}; /* fw: freeing what the solve left behind */
    done_with freed = {0};
    gpu_prepare gp = {0};
    peaks_read pr = {src, o, &w, {0}};
    dm_side_job tj;
    dm_gpu_probe probe; /* the driver starts while the inputs load */
    int use_gpu = 0;
    if (dm_gpu_probe_begin(&probe, o->device, "commit") != 0) return -1;
    /* The GPU made ready on a thread from the start, on the chance that the probe finds one
     * (its context and program take as long as the driver's start, which the probe waits for):
     * the program for the data's volumes, read from its header (a header that cannot be read
     * is reported by the data's read below). */
    const int maybe_gpu = strcmp(probe.device, "cpu") != 0;
    if (maybe_gpu) {
        int ns = !o->model.scalar && src->volumes > 0 ? src->volumes : 1;
        gp = (gpu_prepare){ns, o->gpus, threads, NULL};
        dm_side_start(&gj, prepare_gpu, &gp);
    }
    dm_watch_report(watch, "load", 0);
    tck_read tr = {src, o, &t, threads};
    dm_side_start(&tj, read_tck, &tr);
    int dwi_rc = src->data(src->user, o, &w, &v2w);
    have_data = 1;
    if (dwi_rc == 0 && o->model.nradii > 0)
        dwi_rc = src->pulses(src->user, o, w.nvol, w.bval, &pulses);
    if (tck_read_end(&tj, &tr, dwi_rc) != 0) goto done;
    t_load = dm_now_seconds() - t0;
    dm_watch_report(watch, "load", 1);
    double t_clust = dm_now_seconds();
    if (dm_commit_cluster_tractogram(o, &t, threads, &input_of, &ninput, &cluster_of) != 0)
        goto done;
    t_clust = dm_now_seconds() - t_clust;
    /* A probe still starting the driver is waited for when the dictionary needs it. */
    if (dm_gpu_probe_ready(&probe) && dm_gpu_probe_end(&probe, &use_gpu) != 0) goto done;
    /* the per-streamline values of the tractogram as read (one per input streamline) */
    const dm_tck input = {.count = ninput, .ndps = t.ndps, .dps = t.dps};
    if (o->model.ec_on && o->peaks) dm_side_start(&pj, read_peaks, &pr);

    /* the dictionary: built, or read from --dictionary after checking what it was made of */
    double t1 = dm_now_seconds();
    dm_commit_grid g;
    dm_watch_report(watch, "dictionary", 0);
    if (dm_commit_make_grid(w.data.nx, w.data.ny, w.data.nz, &v2w, o->data, w.mask.data, &g,
                            &mask) != 0)
        goto done;
    if (dm_commit_dirs_make(o->ndirs, &dirs) != 0) goto done;
    dm_commit_dict_options dopt = dm_commit_dict_options_of(o, threads);
    if (o->blur_apply_to) {
        dm_commit_values v = {0};
        int read = src->values(src->user, o, DM_COMMIT_BLUR_APPLY, &input, &v);
        blur_apply = read == 0 ? dm_commit_read_blur_apply(o, &v, &t, input_of, ninput) : NULL;
        free(v.v);
        if (!blur_apply) goto done;
    }
    dopt.blur_apply = blur_apply;
    if (o->dictionary) {
        if (!src->dictionary) {
            dm_set_error("commit: --dictionary is read from a folder by the command only");
            goto done;
        }
        if (src->dictionary(src->user, o, &t, &g, &dirs, &dopt, DM_NVOX(&w.data), &d) != 0)
            goto done;
    } else {
        /* on the GPU when there is one (the blur's copies on the host): the driver's start and
         * the program waited for, as the walk on the host threads would take longer */
        if (maybe_gpu && !dm_commit_blur_on(&dopt)) {
            if (dm_gpu_probe_end(&probe, &use_gpu) != 0) goto done;
            dict_gpu = use_gpu;
        }
        if (dict_gpu) {
            if (dm_side_end(&gj, 1) != 0 ||
                dm_commit_dict_cut_gpu(gp.g, &t, 0, t.count, &g, &dirs, &dopt, &d) != 0 ||
                dm_commit_dict_index(&d, DM_NVOX(&w.data), threads) != 0)
                goto done;
        } else if (dm_commit_dict_build(&t, &g, &dirs, &dopt, &d) != 0) {
            goto done;
        }
    }
    if (d.nkept == 0) {
        dm_commit_nothing_kept(o);
        goto done;
    }
    t_dict = dm_now_seconds() - t1;
    dm_watch_report(watch, "dictionary", 1);
    if (cancelled(watch)) goto done;
    if (dm_gpu_probe_end(&probe, &use_gpu) != 0) goto done;
    if (maybe_gpu && !use_gpu) { /* no GPU after all: what was made ready for one let go */
        dm_side_end(&gj, 0);
        dm_commit_gpu_close(gp.g);
        gp.g = NULL;
    }

    /* the responses */
    t1 = dm_now_seconds();
    if (dm_commit_kernels_make(&o->model, &dirs, w.nvol, w.bval, w.dir, &pulses.view, &k) != 0)
        goto done;
    t_kern = dm_now_seconds() - t1;
    if (cancelled(watch)) goto done;

    /* the operator */
    t1 = dm_now_seconds();
    if (o->model.ec_on && o->peaks && dm_side_end(&pj, 1) != 0) goto done;
    if (o->model.ec_on &&
        !(peaks = dm_commit_fit_peaks(o->peaks ? &pr.view : NULL, &w, &d, threads, &npeaks)))
        goto done;
    if (dm_commit_operator_build(&d, &k, &dirs, peaks, npeaks, o->vf_thr, threads, &A) != 0)
        goto done;
    if (!(y = dm_commit_signal_rows(&w, &d, threads))) {
        dm_set_error("commit: out of memory for the signal");
        goto done;
    }
    if (o->iso_mask) {
        dm_image_view m;
        if (src->image(src->user, o, DM_COMMIT_ISO_MASK, &w, &m) != 0 ||
            dm_commit_apply_iso_mask(o, &m, &d, &A) != 0)
            goto done;
    }
    if (o->confidence_map) { /* COMMIT's 0.5 ||sqrt(W) (A x - y)||^2: rows and y times sqrt(W) */
        dm_image_view c;
        if (src->image(src->user, o, DM_COMMIT_CONFIDENCE, &w, &c) != 0 ||
            !(conf = dm_commit_read_confidence(o, &c, w.nvol, &d, &conf_used)))
            goto done;
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
    if (cancelled(watch)) goto done;

    /* the fit */
    t1 = dm_now_seconds();
    x = calloc((size_t)A.ncols, sizeof *x);
    if (!x) {
        dm_set_error("commit: out of memory for the coefficients");
        goto done;
    }
    dm_commit_backend B;
    if (use_gpu) {
        int ready = dm_side_end(&gj, 1);
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
    dm_side_start(&fw, free_done_with, &freed);
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
    if (o->lambda_weights || o->lambda_iso_weights) {
        dm_commit_values lw = {0};
        dm_image_view iso_w;
        int read = (!o->lambda_weights ||
                    src->values(src->user, o, DM_COMMIT_LAMBDA_WEIGHTS, &input, &lw) == 0) &&
                   (!o->lambda_iso_weights ||
                    src->image(src->user, o, DM_COMMIT_LAMBDA_ISO_WEIGHTS, &w, &iso_w) == 0);
        col_w = read ? dm_commit_lasso_weights(o, o->lambda_weights ? &lw : NULL,
                                               o->lambda_iso_weights ? &iso_w : NULL, &t,
                                               input_of, ninput, &d, &A, k.niso)
                     : NULL;
        free(lw.v);
        if (!col_w) goto done;
    }
    reg.col_w = col_w;
    reg.free_blocks = o->free_blocks;
    int nnls_iterations = 0;
    if (o->group_frac > 0) {
        dm_commit_values labels = {0};
        int read = src->values(src->user, o, DM_COMMIT_GROUPS, &input, &labels) == 0 &&
                   dm_commit_read_groups(o, &labels, &t, input_of, ninput, &d, &groups) == 0;
        free(labels.v);
        if (!read) goto done;
        dm_commit_fista_options fo = {
            .tol_fun = o->tol_fun, .tol_x = o->tol_x, .max_iter = o->max_iter, .watch = watch};
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
    solve_progress sp = solve_start("solve", o->max_iter, watch);
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
                                  .progress_arg = &sp,
                                  .watch = watch};
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
        solve_progress dp = solve_start("debias", o->max_iter, watch);
        dm_commit_fista_options fd = {.tol_fun = o->tol_fun,
                                      .tol_x = o->tol_x,
                                      .max_iter = o->max_iter,
                                      .progress = on_iteration,
                                      .progress_arg = &dp,
                                      .watch = watch};
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

    dm_commit_fitted fit = {.t = &t,
                            .w = &w,
                            .d = &d,
                            .dopt = &dopt,
                            .dirs = &dirs,
                            .k = &k,
                            .A = &A,
                            .x = x,
                            .y = y,
                            .y0 = y0,
                            .conf = conf,
                            .conf_used = conf_used,
                            .cpu = cpu,
                            .gpu = gpu,
                            .blur_apply = blur_apply,
                            .input_of = input_of,
                            .cluster_of = cluster_of,
                            .ninput = ninput,
                            .fr = fr,
                            .fr_reg = fr_reg,
                            .nnls_iterations = nnls_iterations,
                            .debias_columns = debias_columns,
                            .dict_gpu = dict_gpu,
                            .threads = threads,
                            .t0 = t0,
                            .t_load = t_load,
                            .t_clust = t_clust,
                            .t_dict = t_dict,
                            .t_kern = t_kern,
                            .t_op = t_op,
                            .t_setup = t_setup,
                            .t_solve = t_solve};
    dm_watch_report(watch, "outputs", 0);
    int wrote = dm_commit_outputs(o, &fit, sink, prov, sum);
    dm_watch_report(watch, "outputs", 1);
    if (!fit.gpu) gp.g = gpu = NULL; /* released there */
    if (wrote != 0) goto done;
    rc = 0;
done:
    dm_gpu_probe_end(&probe, NULL);      /* an error came first: the driver's start waited for */
    if (gj.running) dm_side_end(&gj, 0); /* an error came first */
    if (pj.running) dm_side_end(&pj, 0);
    dm_side_end(&fw, 0);
    if (gp.g != gpu) dm_commit_gpu_close(gp.g);
    dm_commit_cpu_close(cpu);
    dm_commit_gpu_close(gpu);
    free(mask);
    free(peaks);
    free(y);
    free(x);
    free(aty_plain);
    free(col_w);
    free(ic_fixed);
    free(input_of);
    free(cluster_of);
    free(blur_apply);
    free(conf);
    free(row_w);
    free(y0);
    dm_commit_operator_free(&A);
    dm_commit_kernels_free(&k);
    dm_commit_pulses_free(&pulses);
    dm_commit_dict_free(&d);
    dm_commit_dirs_free(&dirs);
    dm_tck_free(&t);
    if (have_data) src->free_data(src->user, &w);
    if (src->release) src->release(src->user);
    return rc;
}
