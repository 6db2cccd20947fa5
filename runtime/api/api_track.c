/* The public API's FOD tractography (include/dimoc.h, dimoc_track): the caller's images handed
 * to the engine of `dimoc track --fod` (fodtrack/fodtrack_run.h) as views of its arrays, the
 * streamlines kept in memory; and what the calls over images and streamlines share
 * (api_track.h). */
#include "api/api_track.h"
#include "api/api_common.h"
#include "fodtrack/fodtrack_run.h"
#include "gpu/gpu_device.h"
#include "util/error.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- images and streamlines ---- */

dimoc_status dm_api_image(const dimoc_image *im, const char *name, int volumes,
                          const dm_image_view *ref, dm_image_view *v)
{
    memset(v, 0, sizeof *v);
    v->name = name;
    const dimoc_array *a = &im->array;
    if (!a->data) return dm_api_fail(DIMOC_E_ARGUMENT, "%s: no values", name);
    v->data = a->data;
    v->type = a->dtype == DIMOC_FLOAT32   ? DM_VIEW_F32
              : a->dtype == DIMOC_FLOAT64 ? DM_VIEW_F64
              : a->dtype == DIMOC_UINT8   ? DM_VIEW_U8
                                          : -1;
    if (v->type < 0) return dm_api_fail(DIMOC_E_ARGUMENT, "%s: not uint8, float32 or float64", name);
    int four = a->ndim == 4 && !(volumes == 1 && a->shape[3] == 1);
    if (a->ndim != 3 && a->ndim != 4)
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %d dimensions; an image has 3 (X x Y x Z)%s",
                           name, a->ndim, volumes == 1 ? "" : " or 4 (X x Y x Z x volumes)");
    if (four && volumes == 1)
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %zu volumes; a 3D image (X x Y x Z) is needed",
                           name, a->shape[3]);
    if (volumes > 1 && (!four || a->shape[3] != (size_t)volumes))
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %zu volume%s; X x Y x Z x %d is needed", name,
                           four ? a->shape[3] : 1, four && a->shape[3] == 1 ? "" : "s", volumes);
    v->ndim = four ? 4 : 3;
    for (int k = 0; k < v->ndim; k++) {
        if (a->shape[k] == 0 || a->shape[k] > (1u << 30))
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %zu along axis %d", name, a->shape[k], k);
        v->shape[k] = a->shape[k];
        v->stride[k] = a->strides[k];
    }
    if ((double)v->shape[0] * v->shape[1] * v->shape[2] >= 2147483647.0)
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %zux%zux%zu voxels, beyond what the trackers "
                                             "index",
                           name, v->shape[0], v->shape[1], v->shape[2]);
    const int on_ref = !im->affine;
    if (on_ref) {
        if (!ref)
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: no affine (voxel -> world, 4 x 4)", name);
        for (int k = 0; k < 3; k++)
            if (v->shape[k] != ref->shape[k])
                return dm_api_fail(DIMOC_E_ARGUMENT,
                                   "%s: %zux%zux%zu is not the grid of %s (%zux%zux%zu): give its "
                                   "affine",
                                   name, v->shape[0], v->shape[1], v->shape[2], ref->name,
                                   ref->shape[0], ref->shape[1], ref->shape[2]);
        v->v2w = ref->v2w;
    } else {
        for (int i = 0; i < 16; i++) {
            if (!isfinite(im->affine[i]))
                return dm_api_fail(DIMOC_E_ARGUMENT, "%s: its affine is not finite", name);
            v->v2w.m[i / 4][i % 4] = im->affine[i];
        }
    }
    for (int k = 0; k < 3; k++) {
        const dm_affine *m = &v->v2w;
        double x = m->m[0][k], y = m->m[1][k], z = m->m[2][k];
        v->voxel[k] = im->voxel_size  ? im->voxel_size[k]
                      : on_ref        ? ref->voxel[k]
                                      : sqrt(x * x + (y * y + z * z)); /* Eigen's norm() */
        if (!(v->voxel[k] > 0) || !isfinite(v->voxel[k]))
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: voxel size %g along axis %d", name,
                               v->voxel[k], k);
    }
    return DIMOC_OK;
}

dimoc_status dm_api_tracks(const dimoc_streamlines *s, const float *weights, const char *what,
                           dm_tck *t)
{
    memset(t, 0, sizeof *t);
    t->header_count = -1;
    size_t n = s->count;
    if (n > 0 && !s->offsets)
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %zu streamlines and no offsets", what, n);
    if (n >= (1ull << 40)) return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %zu streamlines", what, n);
    uint64_t total = n ? s->offsets[n] : 0;
    if (n > 0 && s->offsets[0] != 0)
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: offsets[0] is %llu, not 0", what,
                           (unsigned long long)s->offsets[0]);
    if (total > 0 && !s->points)
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %llu points and no values", what,
                           (unsigned long long)total);
    t->npoints = malloc((n ? n : 1) * sizeof *t->npoints);
    t->start = malloc((n + 1) * sizeof *t->start);
    if (!t->npoints || !t->start) {
        dm_api_tracks_free(t);
        return dm_api_fail(DIMOC_E_MEMORY, "%s: out of memory", what);
    }
    t->start[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->offsets[i + 1] < s->offsets[i] || s->offsets[i + 1] > total) {
            dm_api_tracks_free(t);
            return dm_api_fail(DIMOC_E_ARGUMENT,
                               "%s: offsets[%zu] = %llu after %llu: offsets go up, from 0 to the "
                               "points' count",
                               what, i + 1, (unsigned long long)s->offsets[i + 1],
                               (unsigned long long)s->offsets[i]);
        }
        t->start[i + 1] = (long)s->offsets[i + 1];
        t->npoints[i] = (long)(s->offsets[i + 1] - s->offsets[i]);
    }
    for (uint64_t p = 0; p < 3 * total; p++)
        if (!isfinite(s->points[p])) {
            uint64_t point = p / 3;
            size_t line = 0;
            while (line + 1 < n && s->offsets[line + 1] <= point) line++;
            dm_api_tracks_free(t);
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: point %llu (of streamline %zu) is not finite",
                               what, (unsigned long long)point, line);
        }
    for (size_t i = 0; weights && i < n; i++)
        if (!(weights[i] >= 0) || !isfinite(weights[i])) {
            dm_api_tracks_free(t);
            return dm_api_fail(DIMOC_E_ARGUMENT, "weights: weight %zu is %g; weights are finite "
                                                 "and >= 0",
                               i, (double)weights[i]);
        }
    t->xyz = (float *)s->points; /* read only */
    t->count = (long)n;
    return DIMOC_OK;
}

void dm_api_tracks_free(dm_tck *t)
{
    free(t->npoints);
    free(t->start);
    memset(t, 0, sizeof *t);
}

/* ---- dimoc_track ---- */

/* The streamlines kept, as the result's arrays will hold them. */
typedef struct {
    float *points;
    uint64_t *offsets;
    size_t npoints, points_cap, count, offsets_cap;
} kept_tracks;

static int keep_batch(void *user, int slot, const dm_ft_batch *b, long taken)
{
    (void)slot;
    kept_tracks *k = user;
    size_t more = 0;
    for (long i = 0; i < taken; i++) more += (size_t)b->npts[i];
    if (k->npoints + more > k->points_cap) {
        size_t cap = 2 * k->points_cap > k->npoints + more ? 2 * k->points_cap : k->npoints + more;
        float *grown = realloc(k->points, 3 * cap * sizeof *grown);
        if (!grown) return dm_set_error("track: out of memory for the streamlines");
        k->points = grown, k->points_cap = cap;
    }
    if (k->count + (size_t)taken + 1 > k->offsets_cap) {
        size_t cap = 2 * k->offsets_cap > k->count + taken + 1 ? 2 * k->offsets_cap
                                                               : k->count + taken + 1;
        uint64_t *grown = realloc(k->offsets, cap * sizeof *grown);
        if (!grown) return dm_set_error("track: out of memory for the streamlines");
        k->offsets = grown, k->offsets_cap = cap;
        if (k->count == 0) k->offsets[0] = 0;
    }
    for (long i = 0; i < taken; i++) {
        memcpy(k->points + 3 * k->npoints, b->xyz + 3 * b->start[i],
               3 * (size_t)b->npts[i] * sizeof *k->points);
        k->npoints += (size_t)b->npts[i];
        k->offsets[++k->count] = k->npoints;
    }
    return 0;
}

static dimoc_status range(const char *name, long value, long lo, long hi)
{
    if (value >= lo && value <= hi) return DIMOC_OK;
    return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %ld is outside %ld..%ld", name, value, lo, hi);
}

static dimoc_status choice(const char *name, const char *value, const char *a, const char *b,
                           const char *c)
{
    if (!strcmp(value, a) || !strcmp(value, b) || (c && !strcmp(value, c))) return DIMOC_OK;
    return dm_api_fail(DIMOC_E_ARGUMENT, "%s: '%s' is not %s, %s%s%s", name, value, a, b,
                       c ? " or " : "", c ? c : "");
}

/* The command's options from the record, checked as the command checks its arguments. */
static dimoc_status track_options(const dimoc_track_options *t, dm_fodtrack_options *o)
{
    memset(o, 0, sizeof *o);
    o->algorithm = t->algorithm ? t->algorithm : "ifod2";
    dimoc_status rc = choice("algorithm", o->algorithm, "ifod2", "ifod1", "sd_stream");
    const char *precision = t->precision ? t->precision : "float";
    if (rc == DIMOC_OK) rc = choice("precision", precision, "float", "double", NULL);
    const char *device = t->device ? t->device : "auto";
    if (rc == DIMOC_OK) rc = choice("device", device, "auto", "cpu", "gpu");
    struct {
        const char *name;
        long value, lo;
        long *dst;
    } counts[] = {{"select", t->select, 0, &o->select},
                  {"seeds", t->seeds, 0, &o->seeds},
                  {"trials", t->trials, 1, &o->trials},
                  {"samples", t->samples, 1, &o->samples},
                  {"max_attempts_per_seed", t->max_attempts_per_seed, 1, &o->max_attempts}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0] && rc == DIMOC_OK; i++) {
        *counts[i].dst = -1;
        if (counts[i].value != -1) {
            rc = range(counts[i].name, counts[i].value, counts[i].lo, 1L << 40);
            *counts[i].dst = counts[i].value;
        }
    }
    if (rc == DIMOC_OK && t->seed_random_per_voxel != 0)
        rc = range("seed_random_per_voxel", t->seed_random_per_voxel, 1, 1L << 40);
    o->seeds_per_voxel = t->seed_random_per_voxel;
    struct {
        const char *name;
        double value, *dst;
    } numbers[] = {{"step", t->step, &o->step},
                   {"angle", t->angle, &o->angle},
                   {"cutoff", t->cutoff, &o->cutoff},
                   {"seed_cutoff", t->seed_cutoff, &o->seed_cutoff},
                   {"min_length", t->min_length, &o->min_length},
                   {"max_length", t->max_length, &o->max_length},
                   {"power", t->power, &o->power}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0] && rc == DIMOC_OK; i++) {
        if (isinf(numbers[i].value))
            rc = dm_api_fail(DIMOC_E_ARGUMENT, "%s: %g is not a number (NaN: the default)",
                             numbers[i].name, numbers[i].value);
        *numbers[i].dst = numbers[i].value;
    }
    if (rc == DIMOC_OK && t->rseed > 0x7fffffffffffffffULL)
        rc = dm_api_fail(DIMOC_E_ARGUMENT, "rseed: %llu is above 2^63 - 1", t->rseed);
    if (rc == DIMOC_OK) rc = range("threads", t->threads, 0, 4096);
    if (rc == DIMOC_OK) rc = range("gpu_memory", t->gpu_memory, 0, 1L << 30);
    if (rc != DIMOC_OK) return rc;
    if (o->seeds_per_voxel > 0 && (t->select != -1 || t->seeds != -1))
        return dm_api_fail(DIMOC_E_ARGUMENT, "seed_random_per_voxel: it fixes the seeds; it "
                                             "cannot go with select or seeds");
    if (dm_part_parse(t->part, &o->part) != 0) return dm_api_fail_words(DIMOC_E_ARGUMENT);
    if (o->part.n > 0 && o->seeds_per_voxel <= 0 && t->select > 0)
        return dm_api_fail(DIMOC_E_ARGUMENT, "part: select cannot go with part (which streamlines "
                                             "are kept depends on every earlier seed): give "
                                             "seeds N instead");
    if (o->part.n > 0 && o->seeds_per_voxel <= 0 && t->seeds <= 0)
        return dm_api_fail(DIMOC_E_ARGUMENT, "part: a fixed seed count is needed: seeds N (or "
                                             "seed_random_per_voxel)");
    o->unidirectional = t->unidirectional != 0;
    o->stop = t->stop != 0;
    o->backtrack = t->backtrack != 0;
    o->crop_at_gmwmi = t->crop_at_gmwmi != 0;
    o->rseed = t->rseed;
    o->threads = t->threads;
    o->use_double = !strcmp(precision, "double");
    o->gpus = t->gpus ? t->gpus : "0";
    o->gpu_memory_mb = t->gpu_memory;
    o->history = "dimoc_track";
    if (dm_gpu_resolve_device(device, "track", &o->use_gpu) != 0)
        return dm_api_fail_words(DIMOC_E_ARGUMENT);
    return DIMOC_OK;
}

/* The options given, as the command's provenance records its command line's. */
static void options_provenance(const dimoc_track_options *t, dm_provenance *p)
{
    dm_provenance_str(p, DM_PROV_OPTION, "algorithm", t->algorithm ? t->algorithm : "ifod2");
    const struct {
        const char *name;
        long value;
    } counts[] = {{"select", t->select},
                  {"seeds", t->seeds},
                  {"trials", t->trials},
                  {"samples", t->samples},
                  {"max_attempts_per_seed", t->max_attempts_per_seed},
                  {"seed_random_per_voxel", t->seed_random_per_voxel ? t->seed_random_per_voxel : -1},
                  {"threads", t->threads ? t->threads : -1},
                  {"gpu_memory", t->gpu_memory ? t->gpu_memory : -1}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        if (counts[i].value != -1)
            dm_provenance_num(p, DM_PROV_OPTION, counts[i].name, (double)counts[i].value);
    const struct {
        const char *name;
        double value;
    } numbers[] = {{"step", t->step},         {"angle", t->angle},
                   {"cutoff", t->cutoff},     {"seed_cutoff", t->seed_cutoff},
                   {"min_length", t->min_length}, {"max_length", t->max_length},
                   {"power", t->power}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        if (!isnan(numbers[i].value))
            dm_provenance_num(p, DM_PROV_OPTION, numbers[i].name, numbers[i].value);
    const struct {
        const char *name;
        int on;
    } flags[] = {{"unidirectional", t->unidirectional},
                 {"stop", t->stop},
                 {"backtrack", t->backtrack},
                 {"crop_at_gmwmi", t->crop_at_gmwmi}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].on) dm_provenance_num(p, DM_PROV_OPTION, flags[i].name, 1);
    dm_provenance_num(p, DM_PROV_OPTION, "rseed", (double)t->rseed);
    dm_provenance_str(p, DM_PROV_OPTION, "device", t->device ? t->device : "auto");
    dm_provenance_str(p, DM_PROV_OPTION, "precision", t->precision ? t->precision : "float");
    dm_provenance_str(p, DM_PROV_OPTION, "part", t->part);
}

/* The regions' views and their names ("include[0]"). */
typedef struct {
    dm_image_view view[3][16];
    char name[3][16][24];
} region_views;

static dimoc_status track_inputs(const dimoc_track_input *t, region_views *rv, dm_ft_inputs *in)
{
    memset(in, 0, sizeof *in);
    dimoc_status rc = dm_api_image(&t->fod, "fod", 0, NULL, &in->fod);
    if (rc != DIMOC_OK) return rc;
    if (in->fod.ndim != 4)
        return dm_api_fail(DIMOC_E_ARGUMENT, "fod: 3 dimensions; an FOD image is X x Y x Z x K "
                                             "(SH coefficients)");
    if (!t->seed.array.data == !t->seed_gmwmi.array.data)
        return dm_api_fail(DIMOC_E_ARGUMENT, "seed: give one of seed and seed_gmwmi");
    in->seed_gmwmi = t->seed_gmwmi.array.data != NULL;
    if (in->seed_gmwmi && !t->act.array.data)
        return dm_api_fail(DIMOC_E_ARGUMENT, "seed_gmwmi: needs act");
    rc = in->seed_gmwmi ? dm_api_image(&t->seed_gmwmi, "seed_gmwmi", 1, &in->fod, &in->seed)
                        : dm_api_image(&t->seed, "seed", 1, &in->fod, &in->seed);
    if (rc == DIMOC_OK && t->act.array.data) rc = dm_api_image(&t->act, "act", 5, &in->fod, &in->act);
    const char *names[3] = {"include", "exclude", "mask"};
    const int counts[3] = {t->ninclude, t->nexclude, t->nmask};
    const dimoc_image *lists[3] = {t->include, t->exclude, t->mask};
    if (rc == DIMOC_OK && counts[0] + counts[1] + counts[2] > DM_FT_MAX_ROI)
        return dm_api_fail(DIMOC_E_ARGUMENT, "include: at most %d include, exclude and mask "
                                             "images together",
                           DM_FT_MAX_ROI);
    for (int k = 0; k < 3 && rc == DIMOC_OK; k++) {
        if (counts[k] < 0 || (counts[k] > 0 && !lists[k]))
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %d given, no images", names[k], counts[k]);
        for (int i = 0; i < counts[k] && rc == DIMOC_OK; i++) {
            snprintf(rv->name[k][i], sizeof rv->name[k][i], "%s[%d]", names[k], i);
            rc = dm_api_image(&lists[k][i], rv->name[k][i], 1, &in->fod, &rv->view[k][i]);
        }
    }
    in->include = rv->view[0], in->ninclude = counts[0];
    in->exclude = rv->view[1], in->nexclude = counts[1];
    in->mask = rv->view[2], in->nmask = counts[2];
    return rc;
}

dimoc_status dimoc_track(const dimoc_track_input *input, const dimoc_track_options *options,
                         const dimoc_context *context, dimoc_result **result)
{
    if (result) *result = NULL;
    if (!result) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_track: result is NULL");
    if (!input) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_track: input is NULL");
    dimoc_track_input in_rec = DIMOC_TRACK_INPUT_INIT;
    dimoc_track_options opt = DIMOC_TRACK_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    if (dm_api_take_record(&in_rec, sizeof in_rec, input) != 0 ||
        (options && dm_api_take_record(&opt, sizeof opt, options) != 0) ||
        (context && dm_api_take_record(&ctx, sizeof ctx, context) != 0))
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_track: a record's size is not set (use "
                                             "DIMOC_TRACK_INPUT_INIT, DIMOC_TRACK_OPTIONS_INIT, "
                                             "DIMOC_CONTEXT_INIT)");
    dm_fodtrack_options o;
    dm_ft_inputs in;
    memset(&in, 0, sizeof in);
    region_views *rv = calloc(1, sizeof *rv);
    dimoc_result *res = dm_api_result_new();
    if (!rv || !res) {
        free(rv);
        dimoc_result_free(res);
        return dm_api_fail(DIMOC_E_MEMORY, "dimoc_track: out of memory");
    }
    dm_warn_capture(dm_api_keep_line, dm_api_result_warnings(res));
    dimoc_status rc = track_options(&opt, &o);
    if (rc == DIMOC_OK) rc = track_inputs(&in_rec, rv, &in);
    o.fod = in.fod.name;
    o.seed = in.seed.name;
    o.act = in.act.data ? in.act.name : NULL;
    kept_tracks kept = {0};
    if (rc == DIMOC_OK) {
        dm_watch watch;
        dm_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
        dm_provenance prov;
        dm_provenance_begin(&prov, "track");
        prov.command_line = "dimoc_track";
        dm_watch_report(&watch, "load", 0);
        dm_ft_run run;
        int opened = dm_ft_run_open(&run, &o, &in) == 0;
        if (!opened) {
            int plan_made = run.plan.buf_points > 0; /* set last: the GPU failed */
            rc = strstr(dm_last_error(), "out of memory") ? dm_api_fail_words(DIMOC_E_MEMORY)
                 : plan_made && o.use_gpu                 ? dm_api_fail_words(DIMOC_E_IO)
                                                          : dm_api_fail_words(DIMOC_E_ARGUMENT);
        } else {
            dm_watch_report(&watch, "load", 1);
            dm_ft_sink sink = {keep_batch, NULL, &kept};
            if (dm_ft_run_track(&run, &sink, NULL, &watch) != 0)
                rc = dm_watch_cancelled(&watch)
                         ? dm_api_fail(DIMOC_E_CANCELLED, "dimoc_track: cancelled")
                     : strstr(dm_last_error(), "out of memory") ? dm_api_fail_words(DIMOC_E_MEMORY)
                                                                : dm_api_fail_words(DIMOC_E_INTERNAL);
        }
        if (rc == DIMOC_OK) {
            dm_provenance_str(&prov, DM_PROV_INPUT, "fod", "fod");
            dm_provenance_str(&prov, DM_PROV_INPUT, in.seed_gmwmi ? "seed_gmwmi" : "seed",
                              in.seed.name);
            if (in.act.data) dm_provenance_str(&prov, DM_PROV_INPUT, "act", "act");
            for (int k = 0; k < 3; k++)
                for (int i = 0; i < (k == 0 ? in.ninclude : k == 1 ? in.nexclude : in.nmask); i++)
                    dm_provenance_str(&prov, DM_PROV_INPUT, rv->name[k][i], rv->name[k][i]);
            options_provenance(&opt, &prov);
            dm_ft_run_provenance(&run, &prov);
            char *text = dm_provenance_text(&prov);
            if (!text) rc = dm_api_fail(DIMOC_E_MEMORY, "dimoc_track: out of memory");
            dm_api_result_set_provenance(res, text);
        }
        dm_provenance_free(&prov);
        dm_ft_run_close(&run);
    }
    dm_warn_capture(NULL, NULL);
    if (rc == DIMOC_OK) {
        size_t shape[2] = {kept.npoints, 3};
        rc = (dimoc_status)dm_api_result_add(res, "points", "streamlines", DIMOC_FLOAT32, 2,
                                             shape, 0, kept.points);
        kept.points = NULL;
        if (!kept.offsets && (kept.offsets = malloc(sizeof *kept.offsets))) kept.offsets[0] = 0;
        size_t count[1] = {kept.count + 1};
        if (rc == DIMOC_OK && !kept.offsets)
            rc = dm_api_fail(DIMOC_E_MEMORY, "dimoc_track: out of memory");
        if (rc == DIMOC_OK)
            rc = (dimoc_status)dm_api_result_add(res, "offsets", "streamlines", DIMOC_UINT64, 1,
                                                 count, 0, kept.offsets);
        kept.offsets = NULL;
    }
    free(kept.points);
    free(kept.offsets);
    free(rv);
    if (rc != DIMOC_OK) {
        dimoc_result_free(res);
        return rc;
    }
    *result = res;
    return DIMOC_OK;
}
