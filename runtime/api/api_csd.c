/* The public API's response estimation, CSD and peaks (include/dimoc.h: dimoc_response,
 * dimoc_csd, dimoc_peaks): the caller's arrays made into the DWI the engines of `dimoc
 * response`, `dimoc csd` and `dimoc peaks` take (csd/csd_run.h, csd/peaks_image.h), their
 * maps and responses kept in memory by the names of the command's files. */
#include "api/api_common.h"
#include "csd/csd_run.h"
#include "csd/peaks_image.h"
#include "gpu/gpu_device.h"
#include "sphere/sh.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* The DWI of the caller's arrays: the values as doubles in the engines' order (x fastest,
 * volume last; the command's reader makes the same of a file), the table's directions turned
 * into world space with the affine, the shells and the mask's voxels.  DIMOC_OK, or the
 * failure recorded; free_dwi in either case. */
static dimoc_status make_dwi(const dm_api_dwi *a, dm_dwi *d)
{
    memset(d, 0, sizeof *d);
    const dm_image_view *v = &a->data;
    const size_t nx = v->shape[0], ny = v->shape[1], nz = v->shape[2], nt = v->shape[3];
    const size_t nvox = nx * ny * nz;
    d->data_path = "data";
    d->mask_path = "mask";
    d->data = (dm_volume){(int)nx, (int)ny, (int)nz, (int)nt, NULL, NULL, NULL, 0, NULL};
    d->data.data = malloc(nvox * nt * sizeof *d->data.data);
    d->bval = malloc(nt * sizeof *d->bval);
    if (a->mask.data) {
        d->mask = (dm_volume){(int)nx, (int)ny, (int)nz, 1, NULL, NULL, NULL, 0, NULL};
        d->mask.data = malloc(nvox * sizeof *d->mask.data);
    }
    if (!d->data.data || !d->bval || (a->mask.data && !d->mask.data))
        return dm_api_fail(DIMOC_E_MEMORY, "data: out of memory for %zu voxels", nvox);
    for (size_t t = 0; t < nt; t++)
        for (size_t z = 0; z < nz; z++)
            for (size_t y = 0; y < ny; y++)
                for (size_t x = 0; x < nx; x++)
                    d->data.data[x + nx * (y + ny * (z + nz * t))] = dm_view_at(v, x, y, z, t);
    for (size_t z = 0; a->mask.data && z < nz; z++)
        for (size_t y = 0; y < ny; y++)
            for (size_t x = 0; x < nx; x++)
                d->mask.data[x + nx * (y + ny * z)] = dm_view_at(&a->mask, x, y, z, 0);
    memcpy(d->bval, a->b, nt * sizeof *d->bval);
    double R[3][3];
    dm_affine_bvec_rotation(&a->v2w, R);
    const char *bname = strcmp(a->table, "grad") ? "bvals" : "grad";
    if (dm_dwi_build(d, a->g, R, bname, a->table) != 0) return dm_api_fail_words(DIMOC_E_ARGUMENT);
    return DIMOC_OK;
}

static void free_dwi(dm_dwi *d)
{
    free(d->data.data);
    free(d->mask.data);
    dm_dwi_release(d);
}

/* "T_response" and "T_response_shells" of a response. */
static dimoc_status add_response(dimoc_result *res, const char *tissue, const dm_response *r)
{
    char name[64];
    const size_t rows = (size_t)r->nshell, cols = (size_t)(r->lmax / 2 + 1);
    double *values = malloc(rows * cols * sizeof *values), *b = malloc(rows * sizeof *b);
    if (!values || !b) {
        free(values);
        free(b);
        return dm_api_fail(DIMOC_E_MEMORY, "out of memory for the responses");
    }
    for (size_t s = 0; s < rows; s++) {
        b[s] = r->b[s];
        for (size_t k = 0; k < cols; k++) values[s * cols + k] = r->r[s][k];
    }
    size_t shape[2] = {rows, cols};
    snprintf(name, sizeof name, "%s_response", tissue);
    dimoc_status rc = dm_api_result_add(res, name, "response", DIMOC_FLOAT64, 2, shape, 0, values);
    snprintf(name, sizeof name, "%s_response_shells", tissue);
    if (rc == DIMOC_OK)
        rc = dm_api_result_add(res, name, "shells", DIMOC_FLOAT64, 1, shape, 0, b);
    else
        free(b);
    return rc;
}

/* "T_voxels": an image-sized mask of bytes. */
static dimoc_status add_voxels(dimoc_result *res, const char *tissue, const dm_dwi *d,
                               const unsigned char *voxels)
{
    char name[64];
    snprintf(name, sizeof name, "%s_voxels", tissue);
    size_t n = DM_NVOX(&d->data),
           shape[3] = {(size_t)d->data.nx, (size_t)d->data.ny, (size_t)d->data.nz};
    unsigned char *copy = malloc(n ? n : 1);
    if (!copy) return dm_api_fail(DIMOC_E_MEMORY, "out of memory for %s", name);
    memcpy(copy, voxels, n);
    return dm_api_result_add(res, name, "voxels", DIMOC_UINT8, 3, shape, 1, copy);
}

/* The failure of an engine's run: cancelled, out of memory, or the inputs. */
static dimoc_status failure(const dm_watch *w)
{
    if (dm_watch_cancelled(w)) return dm_api_fail(DIMOC_E_CANCELLED, "cancelled");
    if (strstr(dm_last_error(), "out of memory")) return dm_api_fail_words(DIMOC_E_MEMORY);
    return dm_api_fail_words(DIMOC_E_ARGUMENT);
}

static int valid_algorithm(const char *a)
{
    return !strcmp(a, "tournier") || !strcmp(a, "dhollander") || !strcmp(a, "fa");
}

/* The common start of the calls on a DWI: the records taken over their defaults. */
#define TAKE_RECORDS(fn, in, input, opt, options, ctx, context, result, INIT_NAME)                 \
    do {                                                                                           \
        if (result) *result = NULL;                                                                \
        if (!result) return dm_api_fail(DIMOC_E_ARGUMENT, fn ": result is NULL");                  \
        if (!input) return dm_api_fail(DIMOC_E_ARGUMENT, fn ": input is NULL");                    \
        if (dm_api_take_record(&in, sizeof in, input) != 0 ||                                      \
            (options && dm_api_take_record(&opt, sizeof opt, options) != 0) ||                     \
            (context && dm_api_take_record(&ctx, sizeof ctx, context) != 0))                       \
            return dm_api_fail(DIMOC_E_ARGUMENT, fn ": a record's size is not set (use the "       \
                                                    "*_INIT macros: " INIT_NAME ")");              \
    } while (0)

dimoc_status dimoc_response(const dimoc_dwi_input *input, const dimoc_response_options *options,
                            const dimoc_context *context, dimoc_result **result)
{
    dimoc_dwi_input in = DIMOC_DWI_INPUT_INIT;
    dimoc_response_options opt = DIMOC_RESPONSE_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    TAKE_RECORDS("dimoc_response", in, input, opt, options, ctx, context, result,
                 "DIMOC_DWI_INPUT_INIT, DIMOC_RESPONSE_OPTIONS_INIT");
    const char *alg = opt.algorithm ? opt.algorithm : "tournier";
    if (!valid_algorithm(alg))
        return dm_api_fail(DIMOC_E_ARGUMENT, "algorithm: '%s' is not tournier, dhollander or fa",
                           alg);
    if (opt.lmax < 0 || opt.lmax > DM_SH_LMAX_MAX || opt.lmax % 2)
        return dm_api_fail(DIMOC_E_ARGUMENT, "lmax: %d is not an even degree 0 to %d", opt.lmax,
                           DM_SH_LMAX_MAX);
    if (opt.threads < 0 || opt.threads > 4096)
        return dm_api_fail(DIMOC_E_ARGUMENT, "threads: %d is outside 0..4096", opt.threads);
    dm_api_dwi a;
    dm_dwi d;
    memset(&d, 0, sizeof d);
    dm_response_set est = {0};
    dimoc_result *res = NULL;
    dimoc_status rc = dm_api_dwi_take(&in, &a);
    if (rc == DIMOC_OK) rc = make_dwi(&a, &d);
    if (rc == DIMOC_OK && !(res = dm_api_result_new())) rc = DIMOC_E_MEMORY;
    dm_watch watch;
    dm_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
    if (rc == DIMOC_OK) {
        dm_watch_report(&watch, "response", 0);
        double t0 = dm_now_seconds();
        dm_warn_capture(dm_api_keep_line, dm_api_result_warnings(res));
        int run = dm_response_estimate(&d, alg, opt.lmax, opt.threads, NULL, &est);
        dm_warn_capture(NULL, NULL);
        double seconds = dm_now_seconds() - t0;
        if (run != 0) {
            rc = failure(&watch);
        } else {
            dm_watch_report(&watch, "response", 1);
            if (dm_watch_stopping(&watch))
                rc = dm_api_fail(DIMOC_E_CANCELLED, "dimoc_response: cancelled");
        }
        for (int t = 0; rc == DIMOC_OK && t < est.ntissue; t++) {
            rc = add_response(res, dm_tissue_names[t], &est.r[t]);
            if (rc == DIMOC_OK) rc = add_voxels(res, dm_tissue_names[t], &d, est.voxels[t]);
        }
        if (rc == DIMOC_OK) {
            dm_provenance prov;
            dm_provenance_begin(&prov, "response");
            prov.command_line = "dimoc_response";
            dm_provenance_str(&prov, DM_PROV_INPUT, "data", "data");
            dm_provenance_str(&prov, DM_PROV_INPUT, "mask", a.mask.data ? "mask" : NULL);
            dm_provenance_str(&prov, DM_PROV_INPUT, "table", a.table);
            dm_provenance_str(&prov, DM_PROV_OPTION, "algorithm", alg);
            dm_provenance_num(&prov, DM_PROV_OPTION, "lmax", opt.lmax);
            dm_response_provenance(&prov, &est, seconds);
            dm_api_result_set_provenance(res, dm_provenance_text(&prov));
            dm_provenance_free(&prov);
        }
    }
    dm_response_set_free(&est);
    free_dwi(&d);
    dm_api_dwi_free(&a);
    return dm_api_result_return(res, rc, result);
}

/* The caller's responses as the engine's, checked. */
static dimoc_status take_responses(const dimoc_csd_options *o, dm_response *r)
{
    if (o->nresponses < 0 || o->nresponses > DM_CSD_MAX_TISSUES || (o->nresponses && !o->responses))
        return dm_api_fail(DIMOC_E_ARGUMENT, "responses: %d given; 1 to %d (WM[, GM], CSF)",
                           o->nresponses, DM_CSD_MAX_TISSUES);
    for (int t = 0; t < o->nresponses; t++) {
        const dimoc_tissue_response *x = &o->responses[t];
        memset(&r[t], 0, sizeof r[t]);
        if (!x->values || x->shells < 1 || x->shells > DM_MAX_SHELLS || x->coefficients < 1 ||
            x->coefficients > DM_RESPONSE_NL)
            return dm_api_fail(DIMOC_E_ARGUMENT,
                               "responses[%d]: %d rows of %d coefficients; 1 to %d rows (shells) "
                               "of 1 to %d zonal coefficients",
                               t, x->shells, x->coefficients, DM_MAX_SHELLS, DM_RESPONSE_NL);
        r[t].nshell = x->shells;
        r[t].lmax = 2 * (x->coefficients - 1);
        for (int s = 0; s < x->shells; s++) {
            r[t].b[s] = x->bvals ? x->bvals[s] : NAN;
            if (x->bvals && !(x->bvals[s] >= 0 && isfinite(x->bvals[s])))
                return dm_api_fail(DIMOC_E_ARGUMENT,
                                   "responses[%d]: b-value %d is not a number "
                                   ">= 0",
                                   t, s + 1);
            for (int k = 0; k < x->coefficients; k++) {
                double v = x->values[(size_t)s * x->coefficients + k];
                if (!isfinite(v))
                    return dm_api_fail(DIMOC_E_ARGUMENT,
                                       "responses[%d]: row %d, coefficient %d "
                                       "is not finite",
                                       t, s + 1, k + 1);
                r[t].r[s][k] = v;
            }
        }
    }
    return DIMOC_OK;
}

/* The engine's options of the caller's (as cli/cmd_csd.c makes them of the command's). */
static dimoc_status csd_options(const dimoc_csd_options *o, dm_csd_options *c)
{
    memset(c, 0, sizeof *c);
    if (o->lmax < -1 || o->lmax > DM_SH_LMAX_MAX || (o->lmax > 0 && o->lmax % 2))
        return dm_api_fail(DIMOC_E_ARGUMENT,
                           "lmax: %d is not an even degree 0 to %d (-1: the "
                           "default)",
                           o->lmax, DM_SH_LMAX_MAX);
    c->lmax = o->lmax;
    if (o->threads < 0 || o->threads > 4096)
        return dm_api_fail(DIMOC_E_ARGUMENT, "threads: %d is outside 0..4096", o->threads);
    if (o->max_iter < 0 || o->max_iter > 100000)
        return dm_api_fail(DIMOC_E_ARGUMENT, "max_iter: %d is outside 0..100000", o->max_iter);
    const char *precision = o->precision ? o->precision : "double";
    if (strcmp(precision, "float") && strcmp(precision, "double"))
        return dm_api_fail(DIMOC_E_ARGUMENT, "precision: '%s' is not float or double", precision);
    if (o->algorithm && !valid_algorithm(o->algorithm))
        return dm_api_fail(DIMOC_E_ARGUMENT, "algorithm: '%s' is not tournier, dhollander or fa",
                           o->algorithm);
    if (o->algorithm && o->nresponses)
        return dm_api_fail(DIMOC_E_ARGUMENT, "algorithm: estimates responses; it cannot go with "
                                             "responses");
    if (o->out_type && strcmp(o->out_type, "float32") && strcmp(o->out_type, "float64"))
        return dm_api_fail(DIMOC_E_ARGUMENT, "out_type: '%s' is not float32 or float64",
                           o->out_type);
    if (dm_part_parse(o->part, &c->part) != 0) return dm_api_fail_words(DIMOC_E_ARGUMENT);
    if (c->part.n > 0 && o->normalise)
        return dm_api_fail(DIMOC_E_ARGUMENT, "normalise: cannot go with part: it scales every "
                                             "voxel by a field fitted to the whole mask's FODs");
    c->algorithm = o->algorithm;
    c->msmt = o->msmt != 0;
    c->normalise = o->normalise != 0;
    c->gpus = o->gpus ? o->gpus : "0";
    c->use_double = !strcmp(precision, "double");
    c->threads = o->threads;
    c->max_iter = o->max_iter;
    if (dm_gpu_resolve_device(o->device ? o->device : "auto", NULL, &c->use_gpu) != 0)
        return dm_api_fail_words(strstr(dm_last_error(), "no usable GPU") ? DIMOC_E_IO
                                                                          : DIMOC_E_ARGUMENT);
    return DIMOC_OK;
}

/* The deconvolution's maps, responses, voxels and status into the result. */
static dimoc_status csd_arrays(dimoc_result *res, const dm_dwi *d, const dm_csd_result *r,
                               dimoc_dtype type)
{
    const size_t nall = DM_NVOX(&d->data);
    const size_t grid[3] = {(size_t)d->data.nx, (size_t)d->data.ny, (size_t)d->data.nz};
    dimoc_status rc = DIMOC_OK;
    for (int t = 0; rc == DIMOC_OK && t < r->ntissue; t++) {
        int nt = dm_sh_ncoef(r->plan.tissue_lmax[t]);
        double *img = calloc(nall * (size_t)nt, sizeof *img);
        if (!img) return dm_api_fail(DIMOC_E_MEMORY, "out of memory for the FODs");
        dm_csd_scatter(d, r->X, r->plan.n, r->plan.tissue_off[t], nt, img);
        rc = dm_api_result_add_map(res, t == 0 ? "wm_fod" : r->tissue[t], t == 0 ? "fod" : "map",
                                   img, grid, (size_t)nt, type);
        free(img);
        if (rc == DIMOC_OK) rc = add_response(res, r->tissue[t], &r->resp[t]);
        if (rc == DIMOC_OK && r->voxels[t]) rc = add_voxels(res, r->tissue[t], d, r->voxels[t]);
    }
    unsigned char *status = calloc(nall ? nall : 1, 1);
    if (!status) return dm_api_fail(DIMOC_E_MEMORY, "out of memory for the status");
    for (size_t i = 0; i < d->nvox; i++) status[d->vox[i]] = r->status[i];
    if (rc == DIMOC_OK)
        return dm_api_result_add(res, "status", "status", DIMOC_UINT8, 3, grid, 1, status);
    free(status);
    return rc;
}

dimoc_status dimoc_csd(const dimoc_dwi_input *input, const dimoc_csd_options *options,
                       const dimoc_context *context, dimoc_result **result)
{
    dimoc_dwi_input in = DIMOC_DWI_INPUT_INIT;
    dimoc_csd_options opt = DIMOC_CSD_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    TAKE_RECORDS("dimoc_csd", in, input, opt, options, ctx, context, result,
                 "DIMOC_DWI_INPUT_INIT, DIMOC_CSD_OPTIONS_INIT");
    dm_csd_options o;
    dm_response resp[DM_CSD_MAX_TISSUES];
    const char *rname[DM_CSD_MAX_TISSUES] = {"responses[0]", "responses[1]", "responses[2]"};
    dm_csd_dirs dirs = {0};
    dm_api_dwi a;
    memset(&a, 0, sizeof a);
    dm_dwi d;
    memset(&d, 0, sizeof d);
    dm_csd_result r = {0};
    dm_csd_gpu_warm warm = {0};
    dimoc_result *res = NULL;
    dimoc_status rc = csd_options(&opt, &o);
    if (rc == DIMOC_OK) rc = take_responses(&opt, resp);
    if (rc == DIMOC_OK) {
        int bad =
            opt.ndirections
                ? (!opt.directions
                       ? dm_set_error("directions: %d given, no values", opt.ndirections)
                       : dm_csd_dirs_make(opt.ndirections, 2, opt.directions, "directions", &dirs))
                : dm_csd_dirs_read(NULL, &dirs);
        for (int i = 0; !bad && i < 2 * opt.ndirections; i++)
            if (!isfinite(opt.directions[i]))
                bad = dm_set_error("directions: value %d is not finite", i + 1);
        if (bad) rc = dm_api_fail_words(DIMOC_E_ARGUMENT);
    }
    if (rc == DIMOC_OK) rc = dm_api_dwi_take(&in, &a);
    if (rc == DIMOC_OK) rc = make_dwi(&a, &d);
    if (rc == DIMOC_OK && !(res = dm_api_result_new())) rc = DIMOC_E_MEMORY;
    if (rc == DIMOC_OK) {
        dm_watch watch;
        dm_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
        dm_provenance prov;
        dm_provenance_begin(&prov, "csd");
        prov.command_line = "dimoc_csd";
        dm_provenance_str(&prov, DM_PROV_INPUT, "data", "data");
        dm_provenance_str(&prov, DM_PROV_INPUT, "mask", a.mask.data ? "mask" : NULL);
        dm_provenance_str(&prov, DM_PROV_INPUT, "table", a.table);
        if (opt.nresponses) dm_provenance_num(&prov, DM_PROV_INPUT, "responses", opt.nresponses);
        if (o.use_gpu) dm_csd_gpu_warm_start(&warm, o.gpus);
        dm_warn_capture(dm_api_keep_line, dm_api_result_warnings(res));
        int run =
            dm_csd_run(&o, &d, opt.nresponses, resp, rname, &dirs, &warm, 0, &watch, &prov, &r);
        dm_warn_capture(NULL, NULL);
        if (o.use_gpu) dm_csd_gpu_warm_end(&warm);
        rc = run != 0 ? failure(&watch) : DIMOC_OK;
        if (rc == DIMOC_OK) {
            const int f64 = opt.out_type && !strcmp(opt.out_type, "float64");
            rc = csd_arrays(res, &d, &r, f64 ? DIMOC_FLOAT64 : DIMOC_FLOAT32);
            char note[256];
            if (rc == DIMOC_OK && dm_csd_unsolved_note(&r, d.nvox, note, sizeof note))
                dm_api_keep_line(dm_api_result_warnings(res), note);
            if (rc == DIMOC_OK) dm_api_result_set_provenance(res, dm_provenance_text(&prov));
        }
        dm_provenance_free(&prov);
    }
    dm_csd_result_free(&r);
    dm_csd_dirs_free(&dirs);
    free_dwi(&d);
    dm_api_dwi_free(&a);
    return dm_api_result_return(res, rc, result);
}

dimoc_status dimoc_peaks(const dimoc_peaks_input *input, const dimoc_peaks_options *options,
                         const dimoc_context *context, dimoc_result **result)
{
    dimoc_peaks_input in = DIMOC_PEAKS_INPUT_INIT;
    dimoc_peaks_options opt = DIMOC_PEAKS_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    TAKE_RECORDS("dimoc_peaks", in, input, opt, options, ctx, context, result,
                 "DIMOC_PEAKS_INPUT_INIT, DIMOC_PEAKS_OPTIONS_INIT");
    if (opt.num < 1 || opt.num > DM_PEAKS_MAX_NUM)
        return dm_api_fail(DIMOC_E_ARGUMENT, "num: %d is outside 1..%d", opt.num, DM_PEAKS_MAX_NUM);
    if (!isfinite(opt.threshold) || !(opt.relative >= 0 && opt.relative <= 1))
        return dm_api_fail(DIMOC_E_ARGUMENT,
                           "threshold: a finite number and relative: 0 to 1 "
                           "(got %g and %g)",
                           opt.threshold, opt.relative);
    if (opt.threads < 0 || opt.threads > 4096)
        return dm_api_fail(DIMOC_E_ARGUMENT, "threads: %d is outside 0..4096", opt.threads);
    if (opt.out_type && strcmp(opt.out_type, "float32") && strcmp(opt.out_type, "float64"))
        return dm_api_fail(DIMOC_E_ARGUMENT, "out_type: '%s' is not float32 or float64",
                           opt.out_type);
    /* the FOD as a DWI's data (its checks and views), without a table */
    dimoc_dwi_input as_dwi = DIMOC_DWI_INPUT_INIT;
    as_dwi.data = in.fod;
    as_dwi.mask = in.mask;
    as_dwi.affine = in.affine;
    dm_api_dwi a;
    dimoc_status rc = dm_api_dwi_view(&as_dwi, "fod", &a);
    dm_peaks_maps maps = {0};
    dimoc_result *res = NULL;
    if (rc == DIMOC_OK && !(res = dm_api_result_new())) rc = DIMOC_E_MEMORY;
    if (rc == DIMOC_OK) {
        dm_watch watch;
        dm_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
        dm_peaks_settings s = {opt.num, opt.threshold, opt.relative, opt.threads};
        int threads = omp_get_max_threads();
        int run = dm_peaks_find(&a.data, &a.mask, &s, &watch, &maps);
        omp_set_num_threads(threads);
        if (run != 0) rc = failure(&watch);
    }
    const size_t grid[3] = {a.data.shape[0], a.data.shape[1], a.data.shape[2]};
    const dimoc_dtype type =
        opt.out_type && !strcmp(opt.out_type, "float64") ? DIMOC_FLOAT64 : DIMOC_FLOAT32;
    double *buf = rc == DIMOC_OK ? malloc(maps.nvox * 3 * maps.num * sizeof *buf) : NULL;
    if (rc == DIMOC_OK && !buf) rc = dm_api_fail(DIMOC_E_MEMORY, "out of memory for the peaks");
    if (rc == DIMOC_OK) {
        dm_peaks_scaled(&maps, buf);
        rc = dm_api_result_add_map(res, "peaks", "map", buf, grid, 3 * (size_t)maps.num, type);
    }
    double R[3][3];
    dm_affine_bvec_rotation(&a.v2w, R);
    for (int k = 0; rc == DIMOC_OK && k < maps.num; k++) {
        char name[64];
        dm_peaks_dyads(&maps, R, k, buf);
        snprintf(name, sizeof name, "dyads%d", k + 1);
        rc = dm_api_result_add_map(res, name, "map", buf, grid, 3, type);
        snprintf(name, sizeof name, "peak_amp%d", k + 1);
        if (rc == DIMOC_OK)
            rc = dm_api_result_add_map(res, name, "map", maps.amps + (size_t)k * maps.nvox, grid, 1,
                                       type);
    }
    if (rc == DIMOC_OK) {
        dm_provenance prov;
        dm_provenance_begin(&prov, "peaks");
        prov.command_line = "dimoc_peaks";
        dm_provenance_str(&prov, DM_PROV_INPUT, "fod", "fod");
        dm_provenance_str(&prov, DM_PROV_INPUT, "mask", a.mask.data ? "mask" : NULL);
        dm_provenance_num(&prov, DM_PROV_OPTION, "num", opt.num);
        dm_provenance_num(&prov, DM_PROV_OPTION, "threshold", opt.threshold);
        dm_provenance_num(&prov, DM_PROV_OPTION, "relative", opt.relative);
        dm_peaks_provenance(&prov, &maps);
        dm_api_result_set_provenance(res, dm_provenance_text(&prov));
        dm_provenance_free(&prov);
    }
    free(buf);
    dm_peaks_maps_free(&maps);
    dm_api_dwi_free(&a);
    return dm_api_result_return(res, rc, result);
}
