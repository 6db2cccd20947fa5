/* The public API's models (include/dimoc.h): a model checked from a name, a file or source
 * text; its diagnostics as records; its description, summary and generated code, all made
 * when it is opened so that a model is read-only afterwards (and safe to share between
 * threads). */
#define _GNU_SOURCE /* open_memstream */
#include "api/api_common.h"
#include "compiler.h"
#include "model/model_info.h"
#include "util/paths.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* As compiler/front/front.c: larger files are certainly no model. */
#define MAX_SOURCE_BYTES (16u << 20)
#define MAX_MEASURES (int)(sizeof(((dm_model_info *)0)->measures) / sizeof(dm_measure_info))
#define MAX_VOXELS (int)(sizeof(((dm_model_info *)0)->voxels) / sizeof(dm_voxel_info))
#define MAX_OUTPUTS (int)(sizeof(((dm_model_info *)0)->outputs) / sizeof(dm_output_info))

struct dimoc_model {
    dm_model *checked; /* NULL when the model has errors */
    int nerrors, nwarnings;
    int ndiags, diags_cap;
    dimoc_error *diags;             /* their strings malloc'd */
    const dimoc_error **diag_order; /* what dimoc_model_diagnostics hands out */

    /* Made at open for a clean model; where the back end or the runtime's limits refuse it,
     * describe_failure says why (and describe and generate report it). */
    dimoc_error describe_failure;
    char *failure_message;
    dm_model_info info; /* its .source: the generated model.h */
    char *meta;
    dimoc_model_description description;
    dimoc_parameter params[DM_MAX_PARAMS];
    const dimoc_parameter *param_list[DM_MAX_PARAMS];
    char start_text[DM_MAX_PARAMS][24];
    dimoc_input measures[16], voxels[16];
    const dimoc_input *measure_list[16], *voxel_list[16];
    dimoc_output outputs[32];
    const dimoc_output *output_list[32];
};

static dimoc_severity severity_of(const char *s)
{
    return !strcmp(s, "warning") ? DIMOC_SEVERITY_WARNING
           : !strcmp(s, "note")  ? DIMOC_SEVERITY_NOTE
                                 : DIMOC_SEVERITY_ERROR;
}

static char *copy_text(const char *s)
{
    char *c = strdup(s ? s : "");
    if (!c) abort();
    return c;
}

/* The front end's sink: one record per diagnostic, in the order they are printed. */
static void collect(void *user, const dm_diagnostic *d)
{
    dimoc_model *mo = user;
    if (mo->ndiags == mo->diags_cap) {
        int cap = mo->diags_cap ? 2 * mo->diags_cap : 8;
        dimoc_error *more = realloc(mo->diags, (size_t)cap * sizeof *more);
        if (!more) abort();
        mo->diags = more;
        mo->diags_cap = cap;
    }
    dimoc_error *e = &mo->diags[mo->ndiags++];
    e->code = DIMOC_E_MODEL;
    e->severity = severity_of(d->severity);
    e->message = copy_text(d->message);
    e->file = copy_text(d->file);
    e->line = d->line;
    e->column = d->col;
    e->text = copy_text(d->text);
}

static void finish_diagnostics(dimoc_model *mo)
{
    mo->diag_order = calloc((size_t)mo->ndiags + 1, sizeof *mo->diag_order);
    if (!mo->diag_order) abort();
    for (int i = 0; i < mo->ndiags; i++) mo->diag_order[i] = &mo->diags[i];
}

/* A file-level failure: "PATH: error: WHY" as dimoc check prints it. */
static dimoc_status file_failure(const char *path, const char *why)
{
    size_t len = strlen(path) + strlen(why) + 16;
    char *text = malloc(len);
    if (!text) abort();
    snprintf(text, len, "%s: error: %s\n", path, why);
    dimoc_error e = {DIMOC_E_IO, DIMOC_SEVERITY_ERROR, why, path, 0, 0, text};
    dm_api_fail_record(&e);
    free(text);
    return DIMOC_E_IO;
}

/* Whether PATH can be read whole, as the front end reads it: DIMOC_OK, or the failure recorded
 * in the front end's words. */
static dimoc_status readable(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return file_failure(path, strerror(errno));
    char buf[65536];
    size_t n = 0, got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        n += got;
        if (n > MAX_SOURCE_BYTES) {
            fclose(f);
            return file_failure(path, "file too large to be a model (over 16 MiB)");
        }
    }
    int failed = ferror(f);
    fclose(f);
    return failed ? file_failure(path, "read error") : DIMOC_OK;
}

static void set_describe_failure(dimoc_model *mo, dimoc_status code, const char *message)
{
    mo->failure_message = copy_text(message);
    mo->describe_failure.code = code;
    mo->describe_failure.severity = DIMOC_SEVERITY_ERROR;
    mo->describe_failure.message = mo->failure_message;
}

static const char *measure_source(dm_measure_source s)
{
    switch (s) {
    case DM_SRC_BVALS: return "bvals";
    case DM_SRC_BVECS: return "bvecs";
    case DM_SRC_SCHEME: return "scheme";
    default: return "file";
    }
}

/* The public records over the runtime's description (their strings point into mo->info). */
static void fill_description(dimoc_model *mo)
{
    const dm_model_info *mi = &mo->info;
    dimoc_model_description *d = &mo->description;
    d->name = mi->name;
    d->description = mi->description;
    d->file = mi->file;
    d->source_hash = mi->source_hash;
    d->code_hash = mi->code_hash;
    d->multistart = mi->multistart;
    for (int i = 0; i < mi->nparams; i++) {
        const dm_param_info *x = &mi->params[i];
        dimoc_parameter *p = &mo->params[i];
        p->name = x->name;
        p->lower = x->lo;
        p->upper = x->hi;
        p->lower_closed = x->lo_closed;
        p->upper_closed = x->hi_closed;
        p->init = x->init;
        p->start = dm_start_rule_text(x, mo->start_text[i], sizeof mo->start_text[i]);
        p->prior = x->prior;
        p->prior_a = x->prior_a;
        p->prior_b = x->prior_b;
        p->step = x->step;
        p->periodic = x->periodic;
        mo->param_list[i] = p;
    }
    d->nparameters = mi->nparams;
    d->parameters = mo->param_list;
    for (int i = 0; i < mi->nmeasures && i < MAX_MEASURES; i++) {
        const dm_measure_info *x = &mi->measures[i];
        mo->measures[i] = (dimoc_input){
            x->name, x->width, x->column, measure_source(x->source), x->scheme_column, 0, NAN};
        mo->measure_list[i] = &mo->measures[i];
    }
    d->nmeasures = mi->nmeasures;
    d->measures = mo->measure_list;
    for (int i = 0; i < mi->nvoxels && i < MAX_VOXELS; i++) {
        const dm_voxel_info *x = &mi->voxels[i];
        mo->voxels[i] = (dimoc_input){
            x->name, x->width, x->column, "map", "", !isnan(x->default_value), x->default_value};
        mo->voxel_list[i] = &mo->voxels[i];
    }
    d->nvoxel_inputs = mi->nvoxels;
    d->voxel_inputs = mo->voxel_list;
    static const char *const kinds[] = {"scalar", "vector", "axis"};
    for (int i = 0; i < mi->noutputs && i < MAX_OUTPUTS; i++) {
        const dm_output_info *x = &mi->outputs[i];
        dimoc_output_kind k = x->kind == DM_OUTK_AXIS     ? DIMOC_OUTPUT_AXIS
                              : x->kind == DM_OUTK_VECTOR ? DIMOC_OUTPUT_VECTOR
                                                          : DIMOC_OUTPUT_SCALAR;
        mo->outputs[i] = (dimoc_output){x->name, k, kinds[k], x->width, x->column};
        mo->output_list[i] = &mo->outputs[i];
    }
    d->noutputs = mi->noutputs;
    d->outputs = mo->output_list;
    d->measure_width = mi->measure_width;
    d->voxel_width = mi->voxel_width;
    d->output_width = mi->output_width;
    d->work = (dimoc_work){mi->flops_signal,   mi->flops_signal_transc,
                           mi->flops_gradient, mi->flops_gradient_transc,
                           mi->flops_prepare,  mi->flops_gradient_prepare};
}

/* The back end's code and the runtime's description of a clean model, or why not. */
static void describe(dimoc_model *mo, const char *what)
{
    char *errors = NULL;
    size_t size = 0;
    FILE *err = open_memstream(&errors, &size);
    if (!err) abort();
    dm_generated g;
    int rc = dm_generate(mo->checked, &g, err);
    fclose(err);
    if (rc != 0) {
        /* the back end's messages, one line */
        for (char *p = errors; p && *p; p++)
            if (*p == '\n') *p = p[1] ? ' ' : 0;
        char *message = malloc(strlen(what) + size + 64);
        if (!message) abort();
        sprintf(message, "%s: code generation failed%s%s", what, size ? ": " : "",
                errors ? errors : "");
        set_describe_failure(mo, DIMOC_E_MODEL, message);
        free(message);
        free(errors);
        return;
    }
    free(errors);
    if (dm_model_describe(mo->checked, &g.flops, g.source, what, &mo->info) != 0) {
        set_describe_failure(mo, DIMOC_E_LIMIT, dm_last_error());
        dm_generated_free(&g);
        return;
    }
    mo->info.source = g.source;
    mo->meta = g.meta;
    fill_description(mo);
}

/* The front end over a file (path) or a text (text, named file_name), with its diagnostics
 * collected; then the back end.  *model set on DIMOC_OK and DIMOC_E_MODEL. */
static dimoc_status open_model(const char *path, const char *text, const char *file_name,
                               dimoc_model **model)
{
    dimoc_model *mo = calloc(1, sizeof *mo);
    if (!mo) return dm_api_fail(DIMOC_E_MEMORY, "out of memory");
    const char *what = path ? path : file_name;
    dm_front_capture(collect, mo);
    mo->checked = path ? dm_front_file(path, NULL, &mo->nerrors, &mo->nwarnings)
                       : dm_front_string(file_name, text, NULL, &mo->nerrors, &mo->nwarnings);
    dm_front_capture(NULL, NULL);
    finish_diagnostics(mo);
    *model = mo;
    if (!mo->checked) {
        char message[4200];
        snprintf(message, sizeof message, "%s: %d error%s in the model", what, mo->nerrors,
                 mo->nerrors == 1 ? "" : "s");
        dimoc_error e = {DIMOC_E_MODEL, DIMOC_SEVERITY_ERROR, message, what, 0, 0, NULL};
        return dm_api_fail_record(&e);
    }
    describe(mo, what);
    return DIMOC_OK;
}

dimoc_status dimoc_model_open_file(const char *path, dimoc_model **model)
{
    if (model) *model = NULL;
    if (!model) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_model_open_file: model is NULL");
    if (!path || !*path)
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_model_open_file: no path given");
    dimoc_status rc = readable(path);
    return rc != DIMOC_OK ? rc : open_model(path, NULL, NULL, model);
}

dimoc_status dimoc_model_open_source(const char *text, const char *file_name, dimoc_model **model)
{
    if (model) *model = NULL;
    if (!model) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_model_open_source: model is NULL");
    if (!text) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_model_open_source: text is NULL");
    if (strlen(text) > MAX_SOURCE_BYTES)
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_model_open_source: text too large to be a "
                                             "model (over 16 MiB)");
    return open_model(NULL, text, file_name && *file_name ? file_name : "<string>", model);
}

dimoc_status dimoc_model_open(const char *spec, dimoc_model **model)
{
    if (model) *model = NULL;
    if (!model) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_model_open: model is NULL");
    if (!spec || !*spec)
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_model_open: no model given (a shipped "
                                             "model's name, a .model file or model source)");
    if (strchr(spec, '\n')) return dimoc_model_open_source(spec, NULL, model);
    size_t len = strlen(spec);
    if (strchr(spec, '/') || (len > 6 && !strcmp(spec + len - 6, ".model")))
        return dimoc_model_open_file(spec, model);
    char *path = dm_shipped_model_path(spec);
    if (!path)
        return dm_api_fail(DIMOC_E_NOT_FOUND,
                           "unknown model '%s': not a shipped model (see 'dimoc info') and not a "
                           "path to a .model file",
                           spec);
    dimoc_status rc = dimoc_model_open_file(path, model);
    free(path);
    return rc;
}

void dimoc_model_free(dimoc_model *mo)
{
    if (!mo) return;
    if (mo->checked) dm_model_free(mo->checked);
    for (int i = 0; i < mo->ndiags; i++) {
        free((char *)mo->diags[i].message);
        free((char *)mo->diags[i].file);
        free((char *)mo->diags[i].text);
    }
    free(mo->diags);
    free(mo->diag_order);
    free(mo->failure_message);
    dm_model_info_free(&mo->info);
    free(mo->meta);
    free(mo);
}

int dimoc_model_diagnostics(const dimoc_model *mo, const dimoc_error *const **records)
{
    if (records) *records = mo ? mo->diag_order : NULL;
    return mo ? mo->ndiags : 0;
}

void dimoc_model_problems(const dimoc_model *mo, int *errors, int *warnings)
{
    if (errors) *errors = mo ? mo->nerrors : 0;
    if (warnings) *warnings = mo ? mo->nwarnings : 0;
}

/* DIMOC_OK when the model can be described, else the reason recorded. */
static dimoc_status usable(const dimoc_model *mo, const char *fn)
{
    if (!mo) return dm_api_fail(DIMOC_E_ARGUMENT, "%s: model is NULL", fn);
    if (!mo->checked)
        return dm_api_fail(DIMOC_E_MODEL, "%s: the model has errors (see its diagnostics)", fn);
    if (mo->describe_failure.code != DIMOC_OK) return dm_api_fail_record(&mo->describe_failure);
    return DIMOC_OK;
}

const struct dm_model_info *dm_api_model_info(const dimoc_model *mo, const char *fn)
{
    return usable(mo, fn) == DIMOC_OK ? &mo->info : NULL;
}

const dimoc_model_description *dimoc_model_describe(const dimoc_model *mo)
{
    return usable(mo, "dimoc_model_describe") == DIMOC_OK ? &mo->description : NULL;
}

char *dimoc_model_summary(const dimoc_model *mo)
{
    if (!mo) {
        dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_model_summary: model is NULL");
        return NULL;
    }
    if (!mo->checked) {
        dm_api_fail(DIMOC_E_MODEL, "dimoc_model_summary: the model has errors (see its "
                                   "diagnostics)");
        return NULL;
    }
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out) {
        dm_api_fail(DIMOC_E_MEMORY, "dimoc_model_summary: out of memory");
        return NULL;
    }
    dm_print_summary(mo->checked, out);
    fclose(out);
    return text;
}

dimoc_status dimoc_model_generate(const dimoc_model *mo, char **model_h, char **meta)
{
    if (model_h) *model_h = NULL;
    if (meta) *meta = NULL;
    dimoc_status rc = usable(mo, "dimoc_model_generate");
    if (rc != DIMOC_OK) return rc;
    char *h = model_h ? strdup(mo->info.source) : NULL;
    char *t = meta ? strdup(mo->meta) : NULL;
    if ((model_h && !h) || (meta && !t)) {
        free(h);
        free(t);
        return dm_api_fail(DIMOC_E_MEMORY, "dimoc_model_generate: out of memory");
    }
    if (model_h) *model_h = h;
    if (meta) *meta = t;
    return DIMOC_OK;
}
