/* Resolving model names to compiled models, described for the runtime from the checked model. */
#include "model/model_info.h"
#include "compiler.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/paths.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Copies a name into a fixed field; -1 (after setting the error) when it does not fit. */
static int copy_name(char *dst, size_t size, const char *name, const char *what)
{
    if (strlen(name) >= size)
        return dm_set_error("%s: the name '%s' is too long for the runtime (at most %d characters)",
                            what, name, (int)size - 1);
    memcpy(dst, name, strlen(name) + 1);
    return 0;
}

static int too_many(const char *what, int n, const char *kind, int max)
{
    return dm_set_error("%s: %d %s, the runtime takes at most %d", what, n, kind, max);
}

int dm_model_describe(const dm_model *m, const dm_flops *flops, const char *source,
                      const char *what, dm_model_info *mi)
{
    memset(mi, 0, sizeof *mi);
    if (m->params.n == 0) return dm_set_error("%s: the model has no parameters", what);
#define CAPACITY(array) (int)(sizeof(array) / sizeof((array)[0]))
    if (m->params.n > CAPACITY(mi->params))
        return too_many(what, m->params.n, "parameters", CAPACITY(mi->params));
    if (m->measures.n > CAPACITY(mi->measures))
        return too_many(what, m->measures.n, "per-measurement inputs", CAPACITY(mi->measures));
    if (m->voxels.n > CAPACITY(mi->voxels))
        return too_many(what, m->voxels.n, "per-voxel inputs", CAPACITY(mi->voxels));
    if (m->outputs.n > CAPACITY(mi->outputs))
        return too_many(what, m->outputs.n, "outputs", CAPACITY(mi->outputs));
#undef CAPACITY

    /* The model name and the description are cut to fit, as they always were. */
    snprintf(mi->name, sizeof mi->name, "%s", m->name);
    snprintf(mi->description, sizeof mi->description, "%s", m->description ? m->description : "");
    snprintf(mi->file, sizeof mi->file, "%s", what);
    mi->multistart = m->multistart > 0 ? m->multistart : 1;
    snprintf(mi->source_hash, sizeof mi->source_hash, "%016llx", dm_model_source_hash(m));
    snprintf(mi->code_hash, sizeof mi->code_hash, "%016llx", dm_hash64(source, strlen(source), 0));
    mi->flops_signal = flops->signal;
    mi->flops_signal_transc = flops->signal_transc;
    mi->flops_gradient = flops->gradient;
    mi->flops_gradient_transc = flops->gradient_transc;
    mi->flops_prepare = flops->prepare;
    mi->flops_gradient_prepare = flops->gradient_prepare;
    mi->fix_width = flops->fix_width;
    mi->stage_width = flops->stage_width;
    mi->rows_per_voxel = flops->rows_per_voxel;
    mi->prepare_reads_stage = flops->prepare_reads_stage;
    mi->pre_width = flops->pre_width;
    mi->flops_stage_rows = flops->stage_rows;
    mi->signal_special = flops->signal_special;
    mi->fix_base_width = flops->fix_base_width;

    for (int i = 0; i < m->measures.n; i++) {
        const dm_input *in = m->measures.items[i];
        dm_measure_info *x = &mi->measures[mi->nmeasures++];
        if (copy_name(x->name, sizeof x->name, in->name, what) != 0) return -1;
        x->width = in->width;
        x->column = in->column;
        x->source = !in->source                     ? DM_SRC_FILE
                    : !strcmp(in->source, "bvals")  ? DM_SRC_BVALS
                    : !strcmp(in->source, "bvecs")  ? DM_SRC_BVECS
                    : !strcmp(in->source, "scheme") ? DM_SRC_SCHEME
                                                    : DM_SRC_FILE;
        if (in->scheme_column &&
            copy_name(x->scheme_column, sizeof x->scheme_column, in->scheme_column, what) != 0)
            return -1;
        x->line = in->source_loc.line;
        x->col = in->source_loc.col;
        mi->measure_width += in->width;
    }
    for (int i = 0; i < m->voxels.n; i++) {
        const dm_input *in = m->voxels.items[i];
        dm_voxel_info *x = &mi->voxels[mi->nvoxels++];
        if (copy_name(x->name, sizeof x->name, in->name, what) != 0) return -1;
        x->width = in->width;
        x->column = in->column;
        x->default_value = in->has_default ? in->default_value : NAN;
        mi->voxel_width += in->width;
    }
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *p = m->params.items[k];
        dm_param_info *x = &mi->params[mi->nparams++];
        if (copy_name(x->name, sizeof x->name, p->name, what) != 0) return -1;
        x->lo = p->has_bounds ? p->lo : -INFINITY;
        x->hi = p->has_bounds ? p->hi : INFINITY;
        x->lo_closed = p->lo_closed ? 1 : 0;
        x->hi_closed = p->hi_closed ? 1 : 0;
        x->init = p->init;
        x->start = p->init_source == DM_INIT_B0      ? DM_START_B0
                   : p->init_source == DM_INIT_MD    ? DM_START_MD
                   : p->init_source == DM_INIT_THETA ? DM_START_THETA
                   : p->init_source == DM_INIT_PHI   ? DM_START_PHI
                                                     : DM_START_CONST;
        x->start_axis = p->init_axis;
        x->periodic = p->periodic ? 1 : 0;
        snprintf(x->prior, sizeof x->prior, "%s", dm_prior_kind_name(p->prior.kind));
        int nargs = dm_prior_constant_args(p->prior.kind);
        x->prior_a = nargs > 0 ? p->prior.value[0] : 0;
        x->prior_b = nargs > 1 ? p->prior.value[1] : 0;
        x->step = p->step;
    }
    for (int i = 0; i < m->outputs.n; i++) {
        const dm_output *o = m->outputs.items[i];
        dm_output_info *x = &mi->outputs[mi->noutputs++];
        if (copy_name(x->name, sizeof x->name, o->name, what) != 0) return -1;
        x->kind = o->kind == DM_OUT_AXIS     ? DM_OUTK_AXIS
                  : o->kind == DM_OUT_VECTOR ? DM_OUTK_VECTOR
                                             : DM_OUTK_SCALAR;
        x->width = o->width;
        x->column = o->column;
        mi->output_width += o->width;
    }
    return 0;
}

int dm_model_load(const char *model, dm_model_info *mi)
{
    memset(mi, 0, sizeof *mi); /* dm_model_info_free is safe after a failure */
    char *path;
    size_t len = strlen(model);
    if (strchr(model, '/') || (len > 6 && !strcmp(model + len - 6, ".model"))) {
        path = strdup(model);
    } else {
        path = dm_shipped_model_path(model);
        if (!path)
            return dm_set_error("unknown model '%s': not a shipped model (see 'dimoc info') "
                                "and not a path to a .model file",
                                model);
    }
    if (access(path, R_OK) != 0) {
        dm_set_error("%s: cannot read model file", path);
        free(path);
        return -1;
    }
    int nerr = 0;
    dm_model *m = dm_front_file(path, stderr, &nerr, NULL);
    if (!m) {
        dm_set_error("%s: %d error%s in the model", path, nerr, nerr == 1 ? "" : "s");
        free(path);
        return -1;
    }
    dm_generated g;
    int rc = dm_generate(m, &g, stderr);
    if (rc != 0) {
        dm_model_free(m);
        dm_set_error("%s: code generation failed", path);
        free(path);
        return -1;
    }
    rc = dm_model_describe(m, &g.flops, g.source, path, mi);
    dm_model_free(m);
    free(path);
    if (rc == 0) {
        mi->source = g.source;
        g.source = NULL;
    }
    dm_generated_free(&g);
    return rc;
}

int dm_model_stage(const dm_model_info *mi, unsigned held, dm_model_info *stage)
{
    memset(stage, 0, sizeof *stage);
    int nerr = 0;
    dm_model *m = dm_front_file(mi->file, stderr, &nerr, NULL);
    if (!m)
        return dm_set_error("%s: %d error%s in the model", mi->file, nerr, nerr == 1 ? "" : "s");
    dm_generated g;
    int rc = dm_generate_stage(m, held, &g, stderr);
    if (rc != 0) {
        dm_model_free(m);
        return dm_set_error("%s: code generation failed", mi->file);
    }
    rc = dm_model_describe(m, &g.flops, g.source, mi->file, stage);
    dm_model_free(m);
    if (rc == 0) {
        stage->held = held;
        stage->source = g.source;
        g.source = NULL;
    }
    dm_generated_free(&g);
    return rc;
}

void dm_model_info_free(dm_model_info *mi)
{
    free(mi->source);
    mi->source = NULL;
}

int dm_model_param_index(const dm_model_info *mi, const char *name)
{
    for (int i = 0; i < mi->nparams; i++)
        if (!strcmp(mi->params[i].name, name)) return i;
    return -1;
}

const char *dm_start_rule_text(const dm_param_info *x, char *buf, int size)
{
    switch (x->start) {
    case DM_START_B0: snprintf(buf, size, "b0"); break;
    case DM_START_MD: snprintf(buf, size, "md"); break;
    case DM_START_THETA: snprintf(buf, size, "theta(%d)", x->start_axis); break;
    case DM_START_PHI: snprintf(buf, size, "phi(%d)", x->start_axis); break;
    default: snprintf(buf, size, "%s", ""); break;
    }
    return buf;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int dm_shipped_models(char ***names)
{
    *names = NULL;
    char *folder = dm_data_path("models"); /* the first data folder that has models */
    if (!folder) return 0;
    DIR *d = opendir(folder);
    free(folder);
    if (!d) return 0;
    int n = 0, cap = 32;
    char **list = malloc((size_t)cap * sizeof *list);
    struct dirent *e;
    while (list && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= 6 || strcmp(e->d_name + len - 6, ".model")) continue;
        if (n == cap) {
            char **more = realloc(list, (size_t)(cap *= 2) * sizeof *list);
            if (!more) break;
            list = more;
        }
        list[n++] = strndup(e->d_name, len - 6);
    }
    closedir(d);
    if (list) qsort(list, (size_t)n, sizeof *list, cmp_names);
    *names = list;
    return list ? n : 0;
}
