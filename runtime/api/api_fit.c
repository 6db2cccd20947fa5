/* The public API's fits (include/dimoc.h): the caller's arrays handed as they are to the fit's
 * builder (fit/fit_inputs.h), the engine run on them with the caller's progress and cancel,
 * the maps kept in memory.  `dimoc fit` runs the same builder and engine on what its reader
 * made of the files, so that the same inputs give the same maps. */
#include "api/api_common.h"
#include "fit/fit_inputs.h"
#include "io/gradients.h"
#include "model/model_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dimoc_fit_result {
    dm_fit_maps maps;
    dimoc_fit_map *records;
    const dimoc_fit_map **list;
    char *provenance;
    dm_api_lines warnings;
};

/* The names of DM_MAP_* */
static const char *const map_kinds[] = {"parameter",  "std", "samples",   "output",
                                        "dispersion", "ic",  "predicted", "status"};

static dimoc_status check_options(const dimoc_fit_options *o, dm_fit_request *r)
{
    struct {
        const char *name;
        long value, lo, hi;
    } ranges[] = {
        {"burnin", o->burnin, 0, 100000000},
        {"jumps", o->jumps, 1, 100000000},
        {"sample_every", o->sample_every, 1, 100000000},
        {"update_every", o->update_every, 1, 100000000},
        {"lm_iterations", o->lm_iterations, 1, 100000000},
        {"threads", o->threads, 0, 4096},
        {"gpu_memory", o->gpu_memory, 0, 1L << 30},
        {"lanes", o->lanes, 0, 32},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (ranges[i].value < ranges[i].lo || ranges[i].value > ranges[i].hi)
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %ld is outside %ld..%ld", ranges[i].name,
                               ranges[i].value, ranges[i].lo, ranges[i].hi);
    if (o->lanes & (o->lanes - 1))
        return dm_api_fail(DIMOC_E_ARGUMENT, "lanes: %d is not a power of two", o->lanes);
    if (o->seed > 0x7fffffffffffffffULL)
        return dm_api_fail(DIMOC_E_ARGUMENT, "seed: %llu is above 2^63 - 1", o->seed);
    struct {
        const char *name, *value, *a, *b, *c;
    } choices[] = {
        {"noise", r->noise, "gaussian", "rician", NULL},
        {"precision", r->precision, "float", "double", "auto"},
        {"device", r->device, "auto", "cpu", "gpu"},
        {"out_type", o->out_type ? o->out_type : "float32", "float32", "float64", NULL},
    };
    for (size_t i = 0; i < sizeof choices / sizeof choices[0]; i++) {
        const char *v = choices[i].value;
        if (strcmp(v, choices[i].a) && strcmp(v, choices[i].b) &&
            (!choices[i].c || strcmp(v, choices[i].c)))
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s: '%s' is not %s, %s%s%s", choices[i].name, v,
                               choices[i].a, choices[i].b, choices[i].c ? " or " : "",
                               choices[i].c ? choices[i].c : "");
    }
    int methods;
    if (dm_fit_parse_methods(r->methods, &methods) != 0 || dm_part_parse(o->part, &r->part) != 0)
        return dm_api_fail_words(DIMOC_E_ARGUMENT);
    return DIMOC_OK;
}

/* The request `dimoc fit` would make of these options (r->data and the other paths name the
 * API's arguments in messages). */
static dimoc_status make_request(const dm_model_info *mi, const dimoc_fit_options *o,
                                 const dimoc_fit_input *in, dm_fit_request *r)
{
    dm_fit_request_defaults(r);
    r->model = mi->file;
    r->data = "data";
    r->mask = in->mask.data ? "mask" : NULL;
    r->bvals = in->grad ? NULL : in->bvals ? "bvals" : NULL;
    r->bvecs = in->grad ? NULL : in->bvecs ? "bvecs" : NULL;
    r->grad = in->grad ? "grad" : NULL;
    if (o->method) r->methods = o->method;
    r->grid = o->grid;
    r->fixed = o->fixed;
    r->dictionary_penalty = o->dictionary_penalty;
    if (o->noise) r->noise = o->noise;
    if (o->precision) r->precision = o->precision;
    if (o->device) r->device = o->device;
    r->gpus = o->gpus ? o->gpus : "all";
    r->gpu_memory_mb = o->gpu_memory;
    r->lanes = o->lanes;
    r->burnin = o->burnin;
    r->jumps = o->jumps;
    r->sample_every = o->sample_every;
    r->update_every = o->update_every;
    r->lm_iterations = o->lm_iterations;
    r->threads = o->threads;
    r->seed = o->seed;
    r->save_samples = o->save_samples != 0;
    r->predicted = o->predicted != 0;
    r->ic = o->ic != 0;
    r->out_float64 = o->out_type && !strcmp(o->out_type, "float64");
    r->quiet = 1;
    r->command_line = "dimoc_fit";
    return check_options(o, r);
}

/* The gradient table into in: bvals and bvecs as they are (checked: unit directions where
 * b > 0), or grad turned into FSL's frame (*b, *g malloc'd). */
static dimoc_status gradients(const dimoc_fit_input *input, int M, dm_fit_inputs *in, double **b,
                              double **g)
{
    if (input->grad) {
        if (input->bvals || input->bvecs)
            return dm_api_fail(DIMOC_E_ARGUMENT, "grad: given with bvals or bvecs; give one "
                                                 "table");
        if (!input->affine)
            return dm_api_fail(DIMOC_E_ARGUMENT,
                               "grad: an affine (voxel -> world) is needed to turn the table "
                               "into the image's frame");
        if (dm_gradients_from_world(input->grad, M, input->affine, "grad", b, g) != 0)
            return dm_api_fail_words(DIMOC_E_ARGUMENT);
        in->b = *b, in->g = *g;
        in->b_name = in->g_name = "grad";
        return DIMOC_OK;
    }
    if (!input->bvals != !input->bvecs)
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: given without %s", input->bvals ? "bvals" : "bvecs",
                           input->bvals ? "bvecs" : "bvals");
    if (!input->bvals) return DIMOC_OK;
    dimoc_status rc = dm_api_check_table(input->bvals, input->bvecs, M);
    if (rc != DIMOC_OK) return rc;
    in->b = input->bvals, in->g = input->bvecs;
    in->b_name = "bvals", in->g_name = "bvecs";
    return DIMOC_OK;
}

static dimoc_status make_inputs(const dimoc_fit_input *input, dm_fit_inputs *in, double **b,
                                double **g)
{
    const dimoc_array *d = &input->data;
    if (!d->data) return dm_api_fail(DIMOC_E_ARGUMENT, "data: not given");
    if (dm_api_array(d, &in->data) != 0 || d->ndim != 4 ||
        (d->dtype != DIMOC_FLOAT32 && d->dtype != DIMOC_FLOAT64))
        return dm_api_fail(DIMOC_E_ARGUMENT,
                           "data: expected 4 dimensions (X x Y x Z x volumes) of float32 or "
                           "float64 values");
    for (int k = 0; k < 4; k++)
        if (d->shape[k] == 0 || d->shape[k] > (1u << 30))
            return dm_api_fail(DIMOC_E_ARGUMENT, "data: %zu along axis %d", d->shape[k], k);
    if (d->shape[3] < 2)
        return dm_api_fail(DIMOC_E_ARGUMENT, "data: %zu volume; a fit needs one volume per "
                                             "measurement",
                           d->shape[3]);
    in->data_name = "data";
    const dimoc_array *m = &input->mask;
    if (m->data) {
        if (dm_api_array(m, &in->mask) != 0 || m->ndim != 3)
            return dm_api_fail(DIMOC_E_ARGUMENT, "mask: expected 3 dimensions (X x Y x Z) of "
                                                 "uint8, float32 or float64 values");
        if (m->shape[0] != d->shape[0] || m->shape[1] != d->shape[1] ||
            m->shape[2] != d->shape[2])
            return dm_api_fail(DIMOC_E_ARGUMENT, "mask: %zux%zux%zu is not the data's grid "
                                                 "(%zux%zux%zu)",
                               m->shape[0], m->shape[1], m->shape[2], d->shape[0], d->shape[1],
                               d->shape[2]);
        in->mask_name = "mask";
    }
    dimoc_status rc = gradients(input, (int)d->shape[3], in, b, g);
    if (rc == DIMOC_OK)
        rc = dm_api_items(input->measures, input->nmeasures, "measures", &in->measures);
    if (rc == DIMOC_OK)
        rc = dm_api_items(input->voxel_inputs, input->nvoxel_inputs, "voxel_inputs", &in->voxel);
    in->measure_option = "measures";
    in->voxel_option = "voxel_inputs";
    return rc;
}

/* The status of a failed run, from where it failed. */
static dimoc_status failure(const dm_fit_watch *w)
{
    if (dm_watch_cancelled(&w->base)) return dm_api_fail(DIMOC_E_CANCELLED, "dimoc_fit: cancelled");
    const char *stage = w->base.stage ? w->base.stage : "";
    if (strstr(dm_last_error(), "out of memory")) return dm_api_fail_words(DIMOC_E_MEMORY);
    if (!*stage || !strcmp(stage, "load") || !strcmp(stage, "plan") ||
        !strcmp(stage, "dictionary"))
        return dm_api_fail_words(DIMOC_E_ARGUMENT);
    return dm_api_fail_words(!strcmp(stage, "compile") ? DIMOC_E_IO : DIMOC_E_INTERNAL);
}

/* The maps as the API's records. */
static dimoc_status make_records(dimoc_fit_result *res, const dimoc_array *data)
{
    int n = res->maps.n;
    res->records = calloc((size_t)n + 1, sizeof *res->records);
    res->list = calloc((size_t)n + 1, sizeof *res->list);
    if (!res->records || !res->list)
        return dm_api_fail(DIMOC_E_MEMORY, "dimoc_fit: out of memory for the results");
    for (int i = 0; i < n; i++) {
        const dm_fit_map *m = &res->maps.map[i];
        dimoc_fit_map *x = &res->records[i];
        x->name = m->name;
        x->kind = map_kinds[m->kind];
        x->volumes = m->nt;
        x->dtype = m->type == DM_OUT_UINT8     ? DIMOC_UINT8
                   : m->type == DM_OUT_FLOAT32 ? DIMOC_FLOAT32
                                               : DIMOC_FLOAT64;
        x->data = m->data;
        for (int k = 0; k < 3; k++) x->shape[k] = data->shape[k];
        x->shape[3] = (size_t)m->nt;
        res->list[i] = x;
    }
    return DIMOC_OK;
}

dimoc_status dimoc_fit(const dimoc_model *model, const dimoc_fit_input *input,
                       const dimoc_fit_options *options, const dimoc_context *context,
                       dimoc_fit_result **result)
{
    if (result) *result = NULL;
    if (!result) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_fit: result is NULL");
    if (!input) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_fit: input is NULL");
    const dm_model_info *mi = dm_api_model_info(model, "dimoc_fit");
    if (!mi) return dimoc_last_error()->code;
    dimoc_fit_input in_rec = DIMOC_FIT_INPUT_INIT;
    dimoc_fit_options opt = DIMOC_FIT_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    if (dm_api_take_record(&in_rec, sizeof in_rec, input) != 0 ||
        (options && dm_api_take_record(&opt, sizeof opt, options) != 0) ||
        (context && dm_api_take_record(&ctx, sizeof ctx, context) != 0))
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_fit: a record's size is not set (use "
                                             "DIMOC_FIT_INPUT_INIT, DIMOC_FIT_OPTIONS_INIT, "
                                             "DIMOC_CONTEXT_INIT)");
    dm_fit_request r;
    dm_fit_inputs in;
    dm_fit_items starts;
    memset(&in, 0, sizeof in);
    memset(&starts, 0, sizeof starts);
    double *b = NULL, *g = NULL;
    dimoc_status rc = make_request(mi, &opt, &in_rec, &r);
    if (rc == DIMOC_OK) rc = make_inputs(&in_rec, &in, &b, &g);
    if (rc == DIMOC_OK) rc = dm_api_items(opt.init, opt.ninit, "init", &starts);
    dimoc_fit_result *res = rc == DIMOC_OK ? calloc(1, sizeof *res) : NULL;
    if (rc == DIMOC_OK && !res) rc = dm_api_fail(DIMOC_E_MEMORY, "dimoc_fit: out of memory");
    if (rc == DIMOC_OK) {
        dm_fit_watch watch;
        dm_fit_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
        dm_fit_memory mem = {mi, &in, &starts, "init", &watch, {0}, NULL};
        dm_warn_capture(dm_api_keep_line, &res->warnings);
        int run = dm_fit_run_memory(&r, &mem);
        dm_warn_capture(NULL, NULL);
        res->maps = mem.maps;
        res->provenance = mem.provenance;
        if (run != 0) {
            rc = failure(&watch);
        } else {
            rc = make_records(res, &in_rec.data);
        }
    }
    free(in.measures.item); /* the items point into the caller's arrays */
    free(in.voxel.item);
    free(starts.item);
    free(b);
    free(g);
    if (rc != DIMOC_OK) {
        dimoc_fit_result_free(res);
        return rc;
    }
    *result = res;
    return DIMOC_OK;
}

int dimoc_fit_result_maps(const dimoc_fit_result *res, const dimoc_fit_map *const **maps)
{
    if (maps) *maps = res ? res->list : NULL;
    return res ? res->maps.n : 0;
}

const dimoc_fit_map *dimoc_fit_result_map(const dimoc_fit_result *res, const char *name)
{
    for (int i = 0; res && name && i < res->maps.n; i++)
        if (!strcmp(res->records[i].name, name)) return &res->records[i];
    return NULL;
}

const char *dimoc_fit_result_provenance(const dimoc_fit_result *res)
{
    return res ? res->provenance : NULL;
}

int dimoc_fit_result_warnings(const dimoc_fit_result *res, const char *const **lines)
{
    if (lines) *lines = res ? (const char *const *)res->warnings.line : NULL;
    return res ? res->warnings.n : 0;
}

void dimoc_fit_result_free(dimoc_fit_result *res)
{
    if (!res) return;
    dm_fit_maps_free(&res->maps);
    free(res->records);
    free(res->list);
    free(res->provenance);
    dm_api_lines_free(&res->warnings);
    free(res);
}
