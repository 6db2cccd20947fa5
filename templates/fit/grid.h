/* Grid search: the cost on the Cartesian product of per-parameter value lists.
 *
 * Parameter k is gridded when cfg->grid_count[k] > 0 and it is not fixed (a fixed parameter
 * keeps its value even when a grid was given for it); its values are
 * grid_values[grid_offset[k] + i], i < grid_count[k].  The other parameters keep their current
 * values.  Among the points that are within bounds and satisfy the constraints (periodic
 * parameters wrapped first), the lowest sum of squared residuals wins; ties keep the first
 * point in enumeration order (the last gridded parameter varies fastest).
 *
 * Before including: fit_common.h. */
#ifndef DIMOC_GRID_H
#define DIMOC_GRID_H

/* Returns 1 and sets p to the best point, or returns 0 and leaves p alone when no point is
 * valid.  *best_sse receives the best cost. */
DM_FN int dm_grid_search(const dm_fit_config *cfg, const real *grid_values, const dm_voxel_data *d,
                         real *p, real *best_sse)
{
    int gridded[DM_NPARAMS], index[DM_NPARAMS];
    int ngrid = 0;
    for (int k = 0; k < DM_NPARAMS; k++)
        if (cfg->grid_count[k] > 0 && !dm_is_fixed(cfg, k)) {
            gridded[ngrid] = k;
            index[ngrid] = 0;
            ngrid++;
        }

    real trial[DM_NPARAMS], best[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) best[k] = p[k];
    int found = 0;
    real best_cost = 0;
    for (;;) {
        for (int k = 0; k < DM_NPARAMS; k++) trial[k] = p[k];
        for (int g = 0; g < ngrid; g++) {
            int k = gridded[g];
            trial[k] = grid_values[cfg->grid_offset[k] + index[g]];
        }
        dm_wrap_periodic(trial);
        if (dm_params_valid(trial, d->vox)) {
            real cost = dm_sse(d, trial);
            if (dm_finite(cost) && (!found || cost < best_cost)) {
                found = 1;
                best_cost = cost;
                for (int k = 0; k < DM_NPARAMS; k++) best[k] = trial[k];
            }
        }
        /* Next point: a mixed-radix counter, the last gridded parameter fastest. */
        int g = ngrid - 1;
        while (g >= 0 && ++index[g] == cfg->grid_count[gridded[g]]) {
            index[g] = 0;
            g--;
        }
        if (g < 0) break;
    }
    if (found) {
        for (int k = 0; k < DM_NPARAMS; k++) p[k] = best[k];
        *best_sse = best_cost;
    }
    return found;
}

#endif
