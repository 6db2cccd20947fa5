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

#ifdef DM_GRID_SWEEP
/* The sweep: a stage program's grid search with the loops turned round (the GPU's, where the
 * runtime defines DM_GRID_SWEEP; runtime/fit/fit_gpu.c).  Its points' prepared values are the
 * same for every voxel of the same inputs (DM_PREPARE_READS_STAGE 0), made once a block into a
 * table (dm_grid_sweep_table); a voxel then makes each measurement's row once for
 * DM_SWEEP_CHUNK points (the stage's values of the row: NODDI's Legendre series of the held
 * orientation) instead of once a point, and costs the chunk's points on it.  Each point's sum
 * runs over the measurements in dm_sse's order and lanes, as dm_grid_search's does; the
 * validity of a point is judged when its cost is, so that invalid points are costed and
 * ignored. */
#if DM_STAGE_WIDTH == 0 || DM_PREPARE_READS_STAGE || DM_FIX_WIDTH == 0
#error                                                                                             \
    "grid.h: the sweep needs a stage program with fixed values whose prepare reads no stage value"
#endif
#ifndef DM_SWEEP_CHUNK
#define DM_SWEEP_CHUNK 16
#endif
#ifdef __CUDACC_RTC__
#define DM_SWEEP_POINTS DM_PRAGMA_(unroll) /* the chunk's sums stay in registers */
#else
#define DM_SWEEP_POINTS
#endif

/* A block's shared memory (runtime/fit/fit_gpu.c sizes it alike): the M rows of the base values
 * (DM_BASE_ROW each, fit_common.h), then the table on a 16-byte boundary. */
#define DM_SWEEP_TABLE(rows, M) ((rows) + ((size_t)(M)*DM_BASE_ROW + 3) / 4 * 4)

/* The gridded parameters (dm_grid_search's) into gridded[]; their count. */
DM_FN int dm_grid_dims(const dm_fit_config *cfg, int *gridded)
{
    int ngrid = 0;
    for (int k = 0; k < DM_NPARAMS; k++)
        if (cfg->grid_count[k] > 0 && !dm_is_fixed(cfg, k)) gridded[ngrid++] = k;
    return ngrid;
}

DM_FN int dm_grid_npoints(const dm_fit_config *cfg, const int *gridded, int ngrid)
{
    int n = 1;
    for (int g = 0; g < ngrid; g++) n *= cfg->grid_count[gridded[g]];
    return n;
}

/* The gridded values of point i (enumeration order: the last gridded parameter fastest) into
 * p. */
DM_FN void dm_grid_point(const dm_fit_config *cfg, const real *grid_values, const int *gridded,
                         int ngrid, int i, real *p)
{
    for (int g = ngrid - 1; g >= 0; g--) {
        const int k = gridded[g], c = cfg->grid_count[k];
        p[k] = grid_values[cfg->grid_offset[k] + i % c];
        i /= c;
    }
}

/* table[i DM_PRE_WIDTH ..] = the prepared values of point i, for i = first, first + step, ..
 * up to the points rounded up to whole chunks (those past the last point repeat it: a short
 * chunk runs the same loop); v: the voxels' inputs.  The held parameters' values are not read
 * (the stage's values stand for them). */
DM_FN void dm_grid_sweep_table(const dm_fit_config *cfg, const real *grid_values, const real *v,
                               real *table, int first, int step)
{
    int gridded[DM_NPARAMS];
    const int ngrid = dm_grid_dims(cfg, gridded), n = dm_grid_npoints(cfg, gridded, ngrid);
    const int rounded = (n + DM_SWEEP_CHUNK - 1) / DM_SWEEP_CHUNK * DM_SWEEP_CHUNK;
    for (int i = first; i < rounded; i += step) {
        real p[DM_NPARAMS];
        for (int k = 0; k < DM_NPARAMS; k++) p[k] = 0;
        dm_grid_point(cfg, grid_values, gridded, ngrid, i < n ? i : n - 1, p);
        dm_wrap_periodic(p);
        dm_signal_prepare(p, v, table + (size_t)i * DM_PRE_WIDTH);
    }
}

/* As dm_grid_search, over the table d->points.  Inlined in the kernel, so that the compiler sees
 * that the rows and the table are in shared memory (its loads of them are shared loads). */
DM_FN int dm_grid_sweep(const dm_fit_config *cfg, const real *grid_values, const dm_voxel_data *d,
                        real *p, real *best_sse)
{
    int gridded[DM_NPARAMS];
    const int ngrid = dm_grid_dims(cfg, gridded), n = dm_grid_npoints(cfg, gridded, ngrid);
    const real *y = d->y, *vox = d->vox;
    const int M = d->nmeas;
    real best[DM_NPARAMS], best_cost = 0;
    for (int k = 0; k < DM_NPARAMS; k++) best[k] = p[k];
    int found = 0;
    for (int first = 0; first < n; first += DM_SWEEP_CHUNK) {
        const real *pre = d->points + (size_t)first * DM_PRE_WIDTH;
        real partial[DM_SWEEP_CHUNK];
        DM_SWEEP_POINTS
        for (int j = 0; j < DM_SWEEP_CHUNK; j++) partial[j] = 0;
        for (int m = DM_LANE; m < M; m += DM_NLANES) {
            DM_ROW_ALIGN real row[DM_ROW_SLOTS];
            dm_load_row(d, m, row);
            const real ym = y[m];
            DM_SWEEP_POINTS
            for (int j = 0; j < DM_SWEEP_CHUNK; j++) {
                /* The point's values read again at every measurement: the same for every
                 * measurement, they would be hoisted out of the loop by the compiler, the
                 * chunk's (192 doubles for NODDI-Watson) spilled to local memory. */
                real at[DM_PRE_WIDTH];
                for (int k = 0; k < DM_PRE_WIDTH; k++)
                    at[k] = ((const volatile real *)pre)[j * DM_PRE_WIDTH + k];
                real r = ym - dm_signal_at(at, row, vox);
                partial[j] += r * r;
            }
        }
        DM_SWEEP_POINTS
        for (int j = 0; j < DM_SWEEP_CHUNK; j++) {
            const real cost = dm_lane_sum(partial[j]);
            if (first + j >= n) continue;
            real trial[DM_NPARAMS];
            for (int k = 0; k < DM_NPARAMS; k++) trial[k] = p[k];
            dm_grid_point(cfg, grid_values, gridded, ngrid, first + j, trial);
            dm_wrap_periodic(trial);
            if (!dm_params_valid(trial, vox) || !dm_finite(cost)) continue;
            if (!found || cost < best_cost) {
                found = 1;
                best_cost = cost;
                for (int k = 0; k < DM_NPARAMS; k++) best[k] = trial[k];
            }
        }
    }
    if (found) {
        for (int k = 0; k < DM_NPARAMS; k++) p[k] = best[k];
        *best_sse = best_cost;
    }
    return found;
}
#endif

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
