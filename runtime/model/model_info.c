/* Reading model metadata and resolving model names to compiled, described models. */
#include "model/model_info.h"
#include "compiler.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/paths.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_kind(const char *s, dm_output_kind_info *k)
{
    if (!strcmp(s, "scalar")) *k = DM_OUTK_SCALAR;
    else if (!strcmp(s, "vector")) *k = DM_OUTK_VECTOR;
    else if (!strcmp(s, "axis")) *k = DM_OUTK_AXIS;
    else return -1;
    return 0;
}

static int parse_line(const char *line, dm_model_info *mi)
{
    char key[32], b[32];
    if (sscanf(line, "%31s", key) != 1) return 0;
    const char *rest = line + strlen(key);
    while (*rest == ' ') rest++;
    if (!strcmp(key, "dimoc-meta") || !strcmp(key, "end")) return 0;
    if (!strcmp(key, "model")) return sscanf(rest, "%63s", mi->name) == 1 ? 0 : -1;
    if (!strcmp(key, "description")) {
        snprintf(mi->description, sizeof mi->description, "%s", rest);
        return 0;
    }
    if (!strcmp(key, "source_hash")) return sscanf(rest, "%16s", mi->source_hash) == 1 ? 0 : -1;
    if (!strcmp(key, "code_hash")) return sscanf(rest, "%16s", mi->code_hash) == 1 ? 0 : -1;
    if (!strcmp(key, "flops_signal")) return sscanf(rest, "%ld", &mi->flops_signal) == 1 ? 0 : -1;
    if (!strcmp(key, "flops_signal_transcendental"))
        return sscanf(rest, "%ld", &mi->flops_signal_transc) == 1 ? 0 : -1;
    if (!strcmp(key, "flops_gradient")) return sscanf(rest, "%ld", &mi->flops_gradient) == 1 ? 0 : -1;
    if (!strcmp(key, "flops_gradient_transcendental"))
        return sscanf(rest, "%ld", &mi->flops_gradient_transc) == 1 ? 0 : -1;
    if (!strcmp(key, "flops_prepare")) return sscanf(rest, "%ld", &mi->flops_prepare) == 1 ? 0 : -1;
    if (!strcmp(key, "flops_gradient_prepare"))
        return sscanf(rest, "%ld", &mi->flops_gradient_prepare) == 1 ? 0 : -1;
    if (!strcmp(key, "measure")) {
        if (mi->nmeasures >= 16) return -1;
        dm_measure_info *x = &mi->measures[mi->nmeasures++];
        if (sscanf(rest, "%63s %d %31s %d", x->name, &x->width, b, &x->column) != 4) return -1;
        x->source = !strcmp(b, "bvals") ? DM_SRC_BVALS : !strcmp(b, "bvecs") ? DM_SRC_BVECS : DM_SRC_FILE;
        return 0;
    }
    if (!strcmp(key, "voxel")) {
        if (mi->nvoxels >= 16) return -1;
        dm_voxel_info *x = &mi->voxels[mi->nvoxels++];
        char def[64];
        if (sscanf(rest, "%63s %d %63s %d", x->name, &x->width, def, &x->column) != 4) return -1;
        x->default_value = strtod(def, NULL);
        return 0;
    }
    if (!strcmp(key, "param")) {
        if (mi->nparams >= DM_MAX_PARAMS) return -1;
        dm_param_info *x = &mi->params[mi->nparams++];
        char lo[64], hi[64], init[64], pa[64], pb[64], step[64];
        if (sscanf(rest, "%63s %63s %63s %d %d %63s %d %d %15s %63s %63s %63s", x->name, lo, hi,
                   &x->lo_closed, &x->hi_closed, init, &x->init_b0, &x->periodic, x->prior, pa,
                   pb, step) != 12)
            return -1;
        x->lo = strtod(lo, NULL);
        x->hi = strtod(hi, NULL);
        x->init = strtod(init, NULL);
        x->prior_a = strtod(pa, NULL);
        x->prior_b = strtod(pb, NULL);
        x->step = strtod(step, NULL);
        return 0;
    }
    if (!strcmp(key, "output")) {
        if (mi->noutputs >= 32) return -1;
        dm_output_info *x = &mi->outputs[mi->noutputs++];
        if (sscanf(rest, "%63s %31s %d %d", x->name, b, &x->width, &x->column) != 4) return -1;
        return parse_kind(b, &x->kind);
    }
    return 0; /* unknown keys are ignored: newer metadata stays readable */
}

int dm_model_info_parse(const char *text, const char *what, dm_model_info *mi)
{
    memset(mi, 0, sizeof *mi);
    if (strncmp(text, "dimoc-meta 1", 12) != 0)
        return dm_set_error("%s: not a dimoc metadata file (no 'dimoc-meta 1' header)", what);
    int lineno = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[1024];
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, p, len);
        line[len] = 0;
        lineno++;
        if (parse_line(line, mi) < 0)
            return dm_set_error("%s:%d: malformed metadata line '%s'", what, lineno, line);
        p = nl ? nl + 1 : p + len;
    }
    for (int i = 0; i < mi->nmeasures; i++)
        mi->measure_width += mi->measures[i].width;
    for (int i = 0; i < mi->nvoxels; i++)
        mi->voxel_width += mi->voxels[i].width;
    for (int i = 0; i < mi->noutputs; i++)
        mi->output_width += mi->outputs[i].width;
    if (!mi->name[0] || mi->nparams == 0)
        return dm_set_error("%s: metadata names no model or no parameters", what);
    return 0;
}

int dm_model_load(const char *model, dm_model_info *mi)
{
    char *path;
    size_t len = strlen(model);
    if (strchr(model, '/') || (len > 6 && !strcmp(model + len - 6, ".model"))) {
        path = strdup(model);
    } else {
        path = dm_shipped_model_path(model);
        if (!path)
            return dm_set_error("unknown model '%s': not a shipped model (see 'dimoc info') "
                                "and not a path to a .model file", model);
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
    dm_model_free(m);
    if (rc != 0) {
        dm_set_error("%s: code generation failed", path);
        free(path);
        return -1;
    }
    rc = dm_model_info_parse(g.meta, path, mi);
    free(path);
    if (rc == 0) {
        mi->source = g.source;
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
