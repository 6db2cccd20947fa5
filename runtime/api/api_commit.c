/* The public API's COMMIT (include/dimoc.h, dimoc_commit): the caller's streamlines, data and
 * images handed to the run of `dimoc commit` (commit_run/commit_run.h) as its source, the
 * weights and maps kept in memory by its sink. */
#include "api/api_common.h"
#include "api/api_track.h"
#include "commit_run/commit_run.h"
#include "gpu/gpu_device.h"
#include "util/error.h"
#include "util/progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the run takes from the caller's record. */
typedef struct {
    const dimoc_commit_input *in;
    dm_image_view data, mask, peaks, image[3];
    dm_tck tracks;   /* the caller's, checked (its points read in place) */
    dimoc_result *res;
    char model_name[40];
} api_source;

/* ---- the options ---- */

static dimoc_status diffusivities(const char *name, const double *v, int n, int max, double *out,
                                  int *count)
{
    if (n < 0 || n > max || (n > 0 && !v))
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %d values; 1 to %d diffusivities", name, n, max);
    for (int i = 0; i < n; i++) {
        if (!(v[i] >= 0) || !isfinite(v[i]))
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %g is not a diffusivity >= 0 (mm^2/s)", name,
                               v[i]);
        out[i] = v[i];
    }
    *count = n;
    return DIMOC_OK;
}

/* The command's options from the record and which inputs are given, checked as the command
 * checks its arguments. */
static dimoc_status commit_options(const dimoc_commit_options *c, const dimoc_commit_input *in,
                                   api_source *s, dm_commit_options *o)
{
    memset(o, 0, sizeof *o);
    const char *model = c->model ? c->model : "stick-zeppelin-ball";
    const int scalar = !strcmp(model, "volume-fractions");
    const int cylinder = !strcmp(model, "cylinder-zeppelin-ball");
    if (!scalar && !cylinder && strcmp(model, "stick-zeppelin-ball"))
        return dm_api_fail(DIMOC_E_ARGUMENT, "model: '%s' is not stick-zeppelin-ball, "
                                             "cylinder-zeppelin-ball or volume-fractions",
                           model);
    snprintf(s->model_name, sizeof s->model_name, "%s", model);
    o->model_name = s->model_name;
    const struct {
        const char *name;
        int given;
    } not_scalar[] = {{"bvals", in->bvals != NULL},         {"bvecs", in->bvecs != NULL},
                      {"peaks", in->peaks.data != NULL},    {"d_par", !isnan(c->d_par)},
                      {"d_perp", c->nd_perp > 0},           {"d_iso", c->nd_iso > 0},
                      {"lambda_ec", c->lambda_ec != 0}};
    for (size_t i = 0; scalar && i < sizeof not_scalar / sizeof not_scalar[0]; i++)
        if (not_scalar[i].given)
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: not used by model volume-fractions (a "
                                                 "scalar map)",
                               not_scalar[i].name);
    if (!cylinder && (in->pulses || c->nradii > 0))
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: read by model cylinder-zeppelin-ball only",
                           in->pulses ? "pulses" : "radii");
    if (cylinder && !in->pulses)
        return dm_api_fail(DIMOC_E_ARGUMENT, "pulses: model cylinder-zeppelin-ball needs each "
                                             "volume's G, Delta and delta");
    if (!scalar && (!in->bvals || !in->bvecs))
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: not given (the data's b-values and directions)",
                           in->bvals ? "bvecs" : "bvals");
    if (c->ndirs < 1 || c->ndirs > 65535)
        return dm_api_fail(DIMOC_E_ARGUMENT, "ndirs: %d is outside 1..65535", c->ndirs);
    if (c->max_iter < 1 || c->max_iter > 100000000)
        return dm_api_fail(DIMOC_E_ARGUMENT, "max_iter: %d is outside 1..100000000", c->max_iter);
    if (c->threads < 0 || c->threads > 4096)
        return dm_api_fail(DIMOC_E_ARGUMENT, "threads: %d is outside 0..4096", c->threads);
    dm_commit_model *m = &o->model;
    m->d_par = !isnan(c->d_par) ? c->d_par : cylinder ? 0.6e-3 : 1.7e-3;
    static const double iso_cyl[] = {2.0e-3}, iso_std[] = {1.7e-3, 3.0e-3};
    static const double perp_cyl[] = {1.19e-3, 0.85e-3, 0.51e-3, 0.17e-3}, perp_std[] = {0.51e-3};
    dimoc_status rc =
        c->nd_iso > 0 ? diffusivities("d_iso", c->d_iso, c->nd_iso, DM_COMMIT_MAX_ISO, m->d_iso,
                                      &m->niso)
        : cylinder    ? diffusivities("d_iso", iso_cyl, 1, DM_COMMIT_MAX_ISO, m->d_iso, &m->niso)
                      : diffusivities("d_iso", iso_std, 2, DM_COMMIT_MAX_ISO, m->d_iso, &m->niso);
    if (rc == DIMOC_OK)
        rc = c->nd_perp > 0 ? diffusivities("d_perp", c->d_perp, c->nd_perp, DM_COMMIT_MAX_PERP,
                                            m->d_perp, &m->nperp)
             : cylinder     ? diffusivities("d_perp", perp_cyl, 4, DM_COMMIT_MAX_PERP, m->d_perp,
                                            &m->nperp)
                            : diffusivities("d_perp", perp_std, 1, DM_COMMIT_MAX_PERP, m->d_perp,
                                            &m->nperp);
    if (rc != DIMOC_OK) return rc;
    if (cylinder && c->nradii > 0) {
        if (c->nradii > DM_COMMIT_MAX_RADII || !c->radii)
            return dm_api_fail(DIMOC_E_ARGUMENT, "radii: %d values; 1 to %d radii", c->nradii,
                               DM_COMMIT_MAX_RADII);
        for (int i = 0; i < c->nradii; i++) {
            if (!(c->radii[i] > 0) || !isfinite(c->radii[i]))
                return dm_api_fail(DIMOC_E_ARGUMENT, "radii: %g is not a radius > 0 (micrometres)",
                                   c->radii[i]);
            m->radius[i] = c->radii[i] * 1e-6;
        }
        m->nradii = c->nradii;
    } else if (cylinder) {
        dm_commit_default_radii(m);
    }
    for (int k = 0; k < 3; k++) {
        if (!isfinite(c->fiber_shift[k]))
            return dm_api_fail(DIMOC_E_ARGUMENT, "fiber_shift: not finite");
        o->shift[k] = c->fiber_shift[k];
    }
    o->min_seg_len = c->min_seg_len, o->min_len = c->min_length, o->max_len = c->max_length;
    o->blur_core = c->blur_core_extent, o->blur_gauss = c->blur_gauss_extent;
    o->blur_spacing = c->blur_spacing, o->blur_gauss_min = c->blur_gauss_min;
    o->blur_clust_thr = c->blur_clust_thr;
    o->vf_thr = c->vf_thr;
    o->tol_fun = c->tol, o->tol_x = c->tol_x;
    o->lambda_frac = c->lambda, o->group_frac = c->lambda_group;
    o->lambda_ec_frac = c->lambda_ec, o->lambda_iso_frac = c->lambda_iso;
    o->debias = c->debias != 0;
    o->confidence_rescale = c->confidence_map_rescale != 0;
    o->max_iter = c->max_iter;
    o->threads = c->threads;
    o->device = c->device ? c->device : "auto";
    o->gpus = c->gpus ? c->gpus : "0";
    /* the inputs by the record's names: what the run reads, and names in its messages */
    o->tractogram = "streamlines";
    o->data = "data";
    o->mask = in->mask.data ? "mask" : NULL;
    o->bvals = scalar ? NULL : "bvals";
    o->bvecs = scalar ? NULL : "bvecs";
    o->scheme = cylinder ? "pulses" : NULL;
    o->peaks = in->peaks.data ? "peaks" : NULL;
    o->groups = in->groups.data ? "groups" : NULL;
    o->blur_apply_to = in->blur_apply_to.data ? "blur_apply_to" : NULL;
    o->lambda_weights = in->lambda_weights.data ? "lambda_weights" : NULL;
    o->iso_mask = in->iso_mask.data ? "iso_mask" : NULL;
    o->lambda_iso_weights = in->lambda_iso_weights.data ? "lambda_iso_weights" : NULL;
    o->confidence_map = in->confidence_map.data ? "confidence_map" : NULL;
    if (dm_commit_parse_blocks(c->allow_negative, &o->free_blocks) != 0 ||
        dm_commit_options_check(o) != 0 || dm_gpu_device_check(o->device, "commit") != 0)
        return dm_api_fail_words(DIMOC_E_ARGUMENT);
    m->ec_on = !scalar;
    m->scalar = scalar;
    /* COMMIT's ScalarMap: streamlines alone, one direction; with the iso mask its lesion
     * model */
    if (scalar) m->niso = o->iso_mask ? 1 : 0;
    o->ndirs = scalar ? 1 : c->ndirs;
    return DIMOC_OK;
}

/* ---- the source: the caller's arrays ---- */

/* An image on the data's grid (3D unless any_nt), named `name`. */
static dimoc_status grid_image(const dimoc_array *a, const char *name, int volumes,
                               const dm_image_view *data, dm_image_view *v)
{
    dimoc_image im = {*a, NULL, NULL};
    return dm_api_image(&im, name, volumes, data, v);
}

static int src_data(void *user, const dm_commit_options *o, dm_dwi *w, dm_affine *v2w)
{
    api_source *s = user;
    const dm_image_view *d = &s->data;
    memset(w, 0, sizeof *w);
    w->data_path = "data";
    w->mask_path = o->mask;
    *v2w = d->v2w;
    const size_t nx = d->shape[0], ny = d->shape[1], nz = d->shape[2], nt = dm_view_nt(d);
    const size_t nvox = nx * ny * nz;
    w->data = (dm_volume){(int)nx, (int)ny, (int)nz, (int)nt, NULL, NULL, NULL, 0, NULL};
    w->data.data = malloc((nvox * nt > 0 ? nvox * nt : 1) * sizeof *w->data.data);
    if (!w->data.data) return dm_set_error("data: out of memory");
    for (size_t t = 0; t < nt; t++) /* x fastest, volume last: as the command reads it */
        for (size_t i = 0; i < nvox; i++)
            w->data.data[t * nvox + i] = dm_view_at(d, i % nx, i / nx % ny, i / (nx * ny), t);
    if (s->mask.data) {
        w->mask = (dm_volume){(int)nx, (int)ny, (int)nz, 1, NULL, NULL, NULL, 0, NULL};
        if (!(w->mask.data = malloc(nvox * sizeof *w->mask.data)))
            return dm_set_error("mask: out of memory");
        size_t inside = 0;
        for (size_t i = 0; i < nvox; i++) {
            w->mask.data[i] = dm_view_at(&s->mask, i % nx, i / nx % ny, i / (nx * ny), 0);
            inside += w->mask.data[i] != 0 && !isnan(w->mask.data[i]);
        }
        if (!inside) return dm_set_error("mask: the mask is empty");
    }
    if (o->model.scalar) return dm_commit_scalar_table(w);
    /* the table in world directions, as the command reads bvals and bvecs (csd/dwi.h) */
    const int M = (int)nt;
    w->nvol = M;
    w->bval = malloc((size_t)M * sizeof *w->bval);
    w->dir = calloc((size_t)M * 3, sizeof *w->dir);
    if (!w->bval || !w->dir) return dm_set_error("data: out of memory");
    double R[3][3];
    dm_affine_bvec_rotation(v2w, R);
    int weighted = 0;
    for (int t = 0; t < M; t++) {
        const double *g = s->in->bvecs + 3 * (size_t)t;
        w->bval[t] = s->in->bvals[t];
        if (w->bval[t] <= DM_BZERO_MAX) continue;
        double n = sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
        if (!(n > 0.5 && n < 1.5))
            return dm_set_error("bvecs: direction %d has length %g at b = %g; a "
                                "diffusion-weighted measurement needs a unit direction",
                                t + 1, n, w->bval[t]);
        double u[3] = {g[0] / n, g[1] / n, g[2] / n};
        dm_rotate3(R, u, w->dir + 3 * t, 0);
        weighted = 1;
    }
    if (!weighted)
        return dm_set_error("bvals: no diffusion-weighted measurements (every b <= %g)",
                            DM_BZERO_MAX);
    return 0;
}

static void src_free_data(void *user, dm_dwi *w)
{
    (void)user;
    free(w->data.data);
    free(w->mask.data);
    free(w->bval);
    free(w->dir);
    free(w->shell_of);
    free(w->vox);
    memset(w, 0, sizeof *w);
}

/* The run owns its tractogram (it may replace it by the clusters' representatives): a copy of
 * the caller's points. */
static int src_tracks(void *user, const dm_commit_options *o, int threads, dm_tck *t)
{
    (void)o, (void)threads;
    api_source *s = user;
    const dm_tck *c = &s->tracks;
    memset(t, 0, sizeof *t);
    t->header_count = -1;
    size_t n = (size_t)c->count, np = (size_t)c->start[c->count];
    t->xyz = malloc((np ? np : 1) * 3 * sizeof *t->xyz);
    t->npoints = malloc((n ? n : 1) * sizeof *t->npoints);
    t->start = malloc((n + 1) * sizeof *t->start);
    if (!t->xyz || !t->npoints || !t->start) return dm_set_error("streamlines: out of memory");
    memcpy(t->xyz, c->xyz, np * 3 * sizeof *t->xyz);
    memcpy(t->npoints, c->npoints, n * sizeof *t->npoints);
    memcpy(t->start, c->start, (n + 1) * sizeof *t->start);
    t->count = c->count;
    return 0;
}

static int src_pulses(void *user, const dm_commit_options *o, int nvol, const double *bval,
                      dm_commit_pulse_table *p)
{
    (void)o;
    api_source *s = user;
    return dm_commit_pulses_take("pulses", nvol, s->in->pulses, bval, p);
}

static int src_peaks(void *user, const dm_commit_options *o, const dm_dwi *w, dm_image_view *v)
{
    (void)o, (void)w;
    *v = ((api_source *)user)->peaks;
    return 0;
}

static int src_image(void *user, const dm_commit_options *o, int which, const dm_dwi *w,
                     dm_image_view *v)
{
    (void)o, (void)w;
    *v = ((api_source *)user)->image[which];
    return 0;
}

static int src_values(void *user, const dm_commit_options *o, int which, const dm_tck *t,
                      dm_commit_values *v)
{
    (void)o, (void)t;
    api_source *s = user;
    const dimoc_array *a = which == DM_COMMIT_GROUPS       ? &s->in->groups
                           : which == DM_COMMIT_BLUR_APPLY ? &s->in->blur_apply_to
                                                           : &s->in->lambda_weights;
    v->name = which == DM_COMMIT_GROUPS       ? "groups"
              : which == DM_COMMIT_BLUR_APPLY ? "blur_apply_to"
                                              : "lambda_weights";
    v->n = (long)a->shape[0];
    v->v = malloc((size_t)(v->n ? v->n : 1) * sizeof *v->v);
    if (!v->v) return dm_set_error("%s: out of memory", v->name);
    for (long i = 0; i < v->n; i++) {
        const char *p = (const char *)a->data + i * a->strides[0];
        double x = a->dtype == DIMOC_FLOAT32   ? *(const float *)p
                   : a->dtype == DIMOC_FLOAT64 ? *(const double *)p
                                               : *(const unsigned char *)p;
        v->v[i] = (float)x; /* as the command reads its files */
        if (!isfinite(v->v[i]) || v->v[i] < 0)
            return dm_set_error("%s: value %ld is %g; the values are finite and >= 0", v->name,
                                i + 1, x);
    }
    return 0;
}

/* ---- the sink: the outputs kept ---- */

static int keep_compartments(void *user, const dm_commit_fitted *f, const dm_commit_made *m)
{
    (void)user, (void)f, (void)m;
    return 0;
}

static int keep_all(void *user, const dm_commit_fitted *f, const dm_commit_made *m)
{
    api_source *s = user;
    const dm_volume *grid = &f->w->data;
    const size_t nvox = DM_NVOX(grid), shape[3] = {(size_t)grid->nx, (size_t)grid->ny,
                                                   (size_t)grid->nz};
    double *w = malloc((size_t)(m->nweights ? m->nweights : 1) * sizeof *w);
    if (!w) return dm_set_error("commit: out of memory for the result");
    memcpy(w, m->weights, (size_t)m->nweights * sizeof *w);
    size_t nw[1] = {(size_t)m->nweights};
    if (dm_api_result_add(s->res, "weights", "weights", DIMOC_FLOAT64, 1, nw, 0, w) != DIMOC_OK)
        return -1;
    for (int k = 0; k < m->nmaps; k++) {
        float *map = calloc(nvox ? nvox : 1, sizeof *map); /* as the command writes them */
        if (!map) return dm_set_error("commit: out of memory for the result");
        for (long v = 0; m->value[k] && v < f->d->nvox; v++)
            map[f->d->vox[v]] = (float)m->value[k][v];
        char name[64];
        snprintf(name, sizeof name, "%s", m->name[k]);
        char *dot = strstr(name, ".nii");
        if (dot) *dot = 0;
        if (dm_api_result_add(s->res, name, "map", DIMOC_FLOAT32, 3, shape, 1, map) != DIMOC_OK)
            return -1;
    }
    return 0;
}

/* ---- the call ---- */

static dimoc_status take_inputs(const dimoc_commit_input *in, const dm_commit_options *o,
                                api_source *s)
{
    dimoc_status rc = dm_api_image(&in->data, "data", o->model.scalar ? 1 : 0, NULL, &s->data);
    if (rc != DIMOC_OK) return rc;
    if (!o->model.scalar && s->data.ndim != 4)
        return dm_api_fail(DIMOC_E_ARGUMENT, "data: 3 dimensions; the diffusion-weighted data are "
                                             "X x Y x Z x volumes");
    const int M = (int)dm_view_nt(&s->data);
    if (!o->model.scalar && (rc = dm_api_check_table(in->bvals, in->bvecs, M)) != DIMOC_OK)
        return rc;
    if (in->mask.data && (rc = grid_image(&in->mask, "mask", 1, &s->data, &s->mask)) != DIMOC_OK)
        return rc;
    if (in->peaks.data && (rc = grid_image(&in->peaks, "peaks", 0, &s->data, &s->peaks)) != DIMOC_OK)
        return rc;
    const dimoc_array *images[3] = {&in->iso_mask, &in->lambda_iso_weights, &in->confidence_map};
    const char *names[3] = {"iso_mask", "lambda_iso_weights", "confidence_map"};
    for (int k = 0; k < 3 && rc == DIMOC_OK; k++)
        if (images[k]->data) rc = grid_image(images[k], names[k], k == 2 ? 0 : 1, &s->data, &s->image[k]);
    const dimoc_array *values[3] = {&in->groups, &in->blur_apply_to, &in->lambda_weights};
    const char *vnames[3] = {"groups", "blur_apply_to", "lambda_weights"};
    for (int k = 0; k < 3 && rc == DIMOC_OK; k++)
        if (values[k]->data && (values[k]->ndim != 1 || values[k]->dtype > DIMOC_UINT8))
            rc = dm_api_fail(DIMOC_E_ARGUMENT, "%s: one value per streamline (1 dimension of "
                                               "float32, float64 or uint8) is needed",
                             vnames[k]);
    if (rc == DIMOC_OK) rc = dm_api_tracks(&in->streamlines, NULL, "streamlines", &s->tracks);
    if (rc == DIMOC_OK && s->tracks.count == 0)
        rc = dm_api_fail(DIMOC_E_ARGUMENT, "streamlines: none");
    return rc;
}

dimoc_status dimoc_commit(const dimoc_commit_input *input, const dimoc_commit_options *options,
                          const dimoc_context *context, dimoc_result **result)
{
    if (result) *result = NULL;
    if (!result) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_commit: result is NULL");
    if (!input) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_commit: input is NULL");
    dimoc_commit_input in = DIMOC_COMMIT_INPUT_INIT;
    dimoc_commit_options opt = DIMOC_COMMIT_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    if (dm_api_take_record(&in, sizeof in, input) != 0 ||
        (options && dm_api_take_record(&opt, sizeof opt, options) != 0) ||
        (context && dm_api_take_record(&ctx, sizeof ctx, context) != 0))
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_commit: a record's size is not set (use "
                                             "DIMOC_COMMIT_INPUT_INIT, DIMOC_COMMIT_OPTIONS_INIT, "
                                             "DIMOC_CONTEXT_INIT)");
    api_source s;
    memset(&s, 0, sizeof s);
    s.in = &in;
    dm_commit_options o;
    dimoc_status rc = commit_options(&opt, &in, &s, &o);
    if (rc == DIMOC_OK) rc = take_inputs(&in, &o, &s);
    if (rc == DIMOC_OK && !(s.res = dm_api_result_new())) rc = DIMOC_E_MEMORY;
    if (rc == DIMOC_OK) {
        dm_commit_source src = {.user = &s,
                                .volumes = (int)dm_view_nt(&s.data),
                                .data = src_data,
                                .free_data = src_free_data,
                                .tracks = src_tracks,
                                .pulses = src_pulses,
                                .peaks = src_peaks,
                                .values = src_values,
                                .image = src_image};
        dm_commit_sink sink = {keep_compartments, keep_all, &s};
        dm_watch watch;
        dm_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
        dm_provenance prov;
        dm_provenance_begin(&prov, "commit");
        prov.command_line = "dimoc_commit";
        const char *given[] = {"streamlines", "data", o.mask, o.bvals, o.bvecs, o.peaks,
                               o.groups, o.blur_apply_to, o.iso_mask, o.confidence_map,
                               o.scheme, o.lambda_weights, o.lambda_iso_weights};
        for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
            if (given[i]) dm_provenance_str(&prov, DM_PROV_INPUT, given[i], given[i]);
        dm_commit_summary sum;
        dm_warn_capture(dm_api_keep_line, dm_api_result_warnings(s.res));
        dm_progress_quiet(1);
        int ran = dm_commit_run(&o, &src, &sink, &watch, &prov, &sum);
        dm_progress_quiet(0);
        dm_warn_capture(NULL, NULL);
        if (ran != 0) {
            rc = dm_watch_cancelled(&watch) ? dm_api_fail(DIMOC_E_CANCELLED, "dimoc_commit: cancelled")
                 : strstr(dm_last_error(), "out of memory") ? dm_api_fail_words(DIMOC_E_MEMORY)
                                                            : dm_api_fail_words(DIMOC_E_ARGUMENT);
        } else {
            char *text = dm_provenance_text(&prov);
            if (!text) rc = dm_api_fail(DIMOC_E_MEMORY, "dimoc_commit: out of memory");
            dm_api_result_set_provenance(s.res, text);
        }
        dm_provenance_free(&prov);
    }
    dm_api_tracks_free(&s.tracks);
    if (rc != DIMOC_OK) {
        dimoc_result_free(s.res);
        return rc;
    }
    *result = s.res;
    return DIMOC_OK;
}
