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

/* Points costed together: their signals share each measurement's row, one load for them all.
 * Each point's sum runs over the measurements in dm_sse's order, so its cost has dm_sse's bits.
 * On the host four at a time (NODDI-Watson's grid 13% faster); on the GPU one, the measurement
 * loop not unrolled: the registers of more points, or of an unrolled loop, cost more
 * occupancy than their independent arithmetic gains (NODDI-Watson's grid on an H200, 241,416
 * voxels: 0.225 s so, 0.247 s two at a time, 0.306 s four, 0.245 s one with dm_sse's unrolled
 * loop). */
#ifdef __CUDACC_RTC__
#ifndef DM_GRID_BATCH
#define DM_GRID_BATCH 1
#endif
#ifndef DM_GRID_UNROLL
#define DM_GRID_UNROLL 1
#endif
#define DM_GRID_LOOP DM_UNROLL_(DM_GRID_UNROLL)
#else
#ifndef DM_GRID_BATCH
#define DM_GRID_BATCH 4
#endif
#define DM_GRID_LOOP
#endif

/* cost[j] = dm_sse(d, pts + j DM_NPARAMS) for j < n (n <= DM_GRID_BATCH). */
DM_FN_ONCE void dm_sse_batch(const dm_voxel_data *d, const real *pts, int n, real *cost)
{
    real pre[DM_GRID_BATCH][DM_PRE_WIDTH], partial[DM_GRID_BATCH];
    for (int j = 0; j < DM_GRID_BATCH; j++) {
        /* a short batch repeats its first point: every lane runs the same loop */
        dm_signal_prepare(pts + (j < n ? j : 0) * DM_NPARAMS, d->vox, pre[j]);
        partial[j] = 0;
    }
    const real *y = d->y, *vox = d->vox;
    const int M = d->nmeas;
    DM_GRID_LOOP
    for (int m = DM_LANE; m < M; m += DM_NLANES) {
        DM_ROW_ALIGN real row[DM_ROW_SLOTS];
        dm_load_row(d, m, row);
        for (int j = 0; j < DM_GRID_BATCH; j++) {
            real r = y[m] - dm_signal_at(pre[j], row, vox);
            partial[j] += r * r;
        }
    }
    for (int j = 0; j < DM_GRID_BATCH; j++) {
        real c = dm_lane_sum(partial[j]);
        if (j < n) cost[j] = c;
    }
}

/* Returns 1 and sets p to the best point, or returns 0 and leaves p alone when no point is
 * valid.  *best_sse receives the best cost.  The valid points are costed DM_GRID_BATCH at a
 * time, in enumeration order. */
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

    real batch[DM_GRID_BATCH * DM_NPARAMS], cost[DM_GRID_BATCH], best[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) best[k] = p[k];
    int found = 0, n = 0, more = 1;
    real best_cost = 0;
    while (more) {
        real *trial = batch + n * DM_NPARAMS;
        for (int k = 0; k < DM_NPARAMS; k++) trial[k] = p[k];
        for (int g = 0; g < ngrid; g++) {
            int k = gridded[g];
            trial[k] = grid_values[cfg->grid_offset[k] + index[g]];
        }
        dm_wrap_periodic(trial);
        n += dm_params_valid(trial, d->vox);
        /* Next point: a mixed-radix counter, the last gridded parameter fastest. */
        int g = ngrid - 1;
        while (g >= 0 && ++index[g] == cfg->grid_count[gridded[g]]) {
            index[g] = 0;
            g--;
        }
        more = g >= 0;
        if (n == DM_GRID_BATCH || (!more && n > 0)) {
            dm_sse_batch(d, batch, n, cost);
            for (int j = 0; j < n; j++)
                if (dm_finite(cost[j]) && (!found || cost[j] < best_cost)) {
                    found = 1;
                    best_cost = cost[j];
                    for (int k = 0; k < DM_NPARAMS; k++) best[k] = batch[j * DM_NPARAMS + k];
                }
            n = 0;
        }
    }
    if (found) {
        for (int k = 0; k < DM_NPARAMS; k++) p[k] = best[k];
        *best_sse = best_cost;
    }
    return found;
}

#endif
