/* The dictionary stage: the candidates for its roles from the model's description, the
 * dictionary built by the fitter, and the voxels fitted on it. */
#include "fit/fit_dictionary.h"
#include "util/error.h"
#include "util/progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Which parameters may be the fractions (free, not gridded, bounds within [0, 1]) and the
 * scale (free, not gridded, (0, inf)); the orientation (one theta, phi pair of the tensor's
 * first axis) and the gradient's column.  The fitter checks each role on the signal. */
static dm_dict_spec dictionary_spec(const dm_problem *p)
{
    const dm_model_info *mi = &p->mi;
    const dm_fit_config *cfg = &p->cfg;
    dm_dict_spec s = {0, 0, -1, -1, -1, 0, p->dict_lambda[0], p->dict_lambda[1]};
    for (int k = 0; k < mi->nparams; k++) {
        const dm_param_info *x = &mi->params[k];
        if (x->periodic) s.periodic_mask |= 1u << k;
        if ((cfg->fixed_mask >> k & 1u) || cfg->grid_count[k] > 0 || x->periodic) continue;
        if (x->lo >= 0 && x->hi <= 1) s.linear_mask |= 1u << k;
        if (x->lo == 0 && isinf(x->hi)) s.scale_mask |= 1u << k;
    }
    if (cfg->norient == 1) {
        s.theta = cfg->orient_theta[0];
        s.phi = cfg->orient_phi[0];
    }
    for (int i = 0; i < mi->nmeasures; i++)
        if (mi->measures[i].source == DM_SRC_BVECS) s.g_column = mi->measures[i].column;
    return s;
}

static int build_error(const dm_problem *p, const dm_dict_report *rep)
{
    const char *model = p->mi.name;
    switch (rep->error) {
    case DM_DICT_NOT_AFFINE:
        return dm_set_error("--method dictionary: the signal of model '%s' is not affine in '%s' "
                            "(in [0, 1], neither gridded nor held): give it a --grid or hold it "
                            "with --fixed",
                            model, p->mi.params[rep->param].name);
    case DM_DICT_NO_FRACTION:
        return dm_set_error("--method dictionary: model '%s' has no volume fraction to solve for "
                            "(a free parameter in [0, 1], without --grid, in which the signal is "
                            "affine)",
                            model);
    case DM_DICT_TOO_MANY:
        return dm_set_error("--method dictionary: the grid makes more than %d atoms",
                            DM_DICT_MAX_ATOMS);
    case DM_DICT_NO_ATOM:
        return dm_set_error("--method dictionary: no grid point lies within the bounds and "
                            "constraints of model '%s'",
                            model);
    case DM_DICT_STAGE:
        return dm_set_error("--method dictionary: model '%s': a stage's fitter was given "
                            "instead of the model's (an internal error)",
                            model);
    default: return dm_set_error("--method dictionary: out of memory");
    }
}

int dm_fit_dictionary_run(dm_problem *p, const dm_cpu_fitter *f, dm_fit_results *res, int quiet,
                          dm_fit_watch *watch, char *note, size_t size)
{
    const int P = p->mi.nparams, W = p->mi.voxel_width;
    const size_t M = p->M;
    size_t ref = 0;
    while (ref < p->nfit && p->status[p->index[ref]] != DM_STATUS_FITTED) ref++;
    if (ref == p->nfit) {
        snprintf(note, size, "dictionary: no voxel to fit");
        return 0;
    }
    dm_dict_spec spec = dictionary_spec(p);
    dm_dict_report rep;
    void *dict = f->dict_build(&spec, &p->cfg, p->grid_values, p->meas, p->M, res->params + ref * P,
                               p->voxin + ref * W, &rep);
    if (!dict) return build_error(p, &rep);
    if (rep.tabulated)
        snprintf(note, size, "dictionary of %d atoms, tabulated on %d shells (error %.1e)",
                 rep.atoms, rep.shells, rep.table_error);
    else
        snprintf(note, size, "dictionary of %d atoms, evaluated per voxel", rep.atoms);
    dm_progress *prog = quiet ? NULL : dm_progress_start("dictionary", (long)p->nfit, "voxels");
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t i = 0; i < p->nfit; i++) {
        if (dm_fit_stopping(watch)) continue;
        unsigned char *st = &p->status[p->index[i]];
        if (*st == DM_STATUS_FITTED)
            *st = (unsigned char)f->dict_fit(dict, p->y + i * M, p->voxin + i * W,
                                             res->params + i * P, res->stats + i * DM_NSTATS);
        if (prog) dm_progress_add(prog, 1);
        dm_fit_watch_add(watch, 1);
    }
    f->dict_free(dict);
    if (prog) {
        size_t fitted = 0;
        for (size_t i = 0; i < p->nfit; i++) fitted += p->status[p->index[i]] == DM_STATUS_FITTED;
        char line[96];
        snprintf(line, sizeof line, "%zu fitted, %zu skipped or failed", fitted, p->nfit - fitted);
        dm_progress_finish(prog, dm_fit_stopping(watch) ? NULL : line);
    }
    return dm_fit_stopping(watch) ? dm_fit_stop_error(watch) : 0;
}
