/* The per-voxel driver: grid search -> Levenberg-Marquardt -> MCMC, as cfg->methods asks, each
 * starting where the previous one ended; fixed parameters (cfg->fixed_mask) keep their
 * incoming values throughout.
 *
 * LM runs from one start, or from several where the model asks (multistart.h).
 *
 * Status: FAILED as soon as a stage has no valid start (and when grid search is the only
 * method and no grid point is valid; otherwise the next stage starts from the incoming
 * values); else the status of the last stage run (NOT_CONVERGED and AT_BOUND only when LM is
 * last).
 *
 * The estimate returned is the last stage's: the grid point, the LM minimum, or the MCMC
 * posterior mean (circular for periodic parameters, see mcmc.h).  stats are computed at that
 * estimate: SSE, and logL by the noise model -- Gaussian with sigma^2 = SSE/M by maximum
 * likelihood, or, after a Rician MCMC, Rician with tau at its posterior mean.
 *
 * On the GPU all lanes of the group call this with the same arguments; only the leader lane
 * writes params, samples and stats.
 *
 * Before including: fit_common.h, grid.h, lm.h, multistart.h, mcmc.h. */
#ifndef DIMOC_FIT_VOXEL_H
#define DIMOC_FIT_VOXEL_H

/* The methods this build of the fitter holds (DM_METHOD_* bits).  A GPU fitter is built for the
 * methods of its run only: NVRTC's and ptxas's time grows with the code they are given, and
 * every method inlines the model's signal and gradient again. */
#ifndef DM_COMPILED_METHODS
#define DM_COMPILED_METHODS (DM_METHOD_GRID | DM_METHOD_LM | DM_METHOD_MCMC)
#endif
#define DM_RUNS(cfg, m) ((DM_COMPILED_METHODS & (m)) && ((cfg)->methods & (m)))
/* A GPU run of a grid search or LM followed by MCMC is two programs, compiled at once in about
 * half the time of one holding every method (runtime/fit/fit_gpu.c): the MCMC build continues
 * from the first kernel's estimate, status and LM iterations, left in device memory. */
#define DM_CONTINUES(cfg)                                                                          \
    (((cfg)->methods & (DM_METHOD_GRID | DM_METHOD_LM)) &&                                         \
     !(DM_COMPILED_METHODS & (DM_METHOD_GRID | DM_METHOD_LM)))

/* d: the voxel's inputs (of a stage program, after dm_voxel_stage).
 * params: in: the start; out: the estimate.  samples: DM_NSAMPLES(cfg) rows, row s at
 * samples + s * sample_stride (MCMC only; may be NULL otherwise).  stats: DM_NSTATS (in: LM's
 * iterations when DM_CONTINUES).  status_in: DM_STATUS_FITTED, or the first kernel's status
 * when DM_CONTINUES. */
/* A stage program's view of the voxel (model_api.h), made by the backends before its fit:
 * d->vox becomes vx, the voxel's row of stage values from the start params (wrapped, as the
 * fit wraps it), and where the fixed values read them d->meas its own rows, made in
 * d->own_rows (element stride d->stride) from the packed base rows (each lane its
 * measurements', which it alone reads). */
DM_FN void dm_voxel_stage(dm_voxel_data *d, const real *params, real *vx)
{
#if DM_STAGE_WIDTH > 0
    real p[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = params[k];
    dm_wrap_periodic(p);
    dm_voxel_extend(p, d->vox, vx);
    d->vox = vx;
#if DM_ROWS_PER_VOXEL && !defined(DM_ROWS_AS_READ) /* else made as they are read */
    dm_voxel_stage_rows(d->meas, vx, d->nmeas, d->own_rows, DM_ROW_STRIDE(d));
    d->meas = d->own_rows;
#endif
#else
    (void)d;
    (void)params;
    (void)vx;
#endif
}

DM_FN int dm_fit_one_voxel(const dm_fit_config *cfg, const real *grid_values,
                           const dm_voxel_data *d, unsigned long long voxel_index, real *params,
                           real *samples, int sample_stride, real *stats, int status_in)
{
    real p[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = params[k];
    dm_wrap_periodic(p);

    int status = status_in;
    if ((DM_STAGE_HELD & ~cfg->held_mask) != 0) status = DM_STATUS_FAILED; /* not its run */
    int iterations = DM_CONTINUES(cfg) ? (int)stats[DM_STAT_ITERATIONS] : 0;
    real sse = 0, accept_rate = 0, tau_mean = 0;
    if (status != DM_STATUS_FAILED && DM_RUNS(cfg, DM_METHOD_GRID)) {
#ifdef DM_GRID_SWEEP
        if (!dm_grid_sweep(cfg, grid_values, d, p, &sse) && cfg->methods == DM_METHOD_GRID)
#else
        if (!dm_grid_search(cfg, grid_values, d, p, &sse) && cfg->methods == DM_METHOD_GRID)
#endif
            status = DM_STATUS_FAILED;
    }
    if (status != DM_STATUS_FAILED && DM_RUNS(cfg, DM_METHOD_LM)) {
        status = dm_lm_multistart(cfg, d, p, &iterations, &sse);
        if (!(cfg->methods & DM_METHOD_MCMC)) status = dm_bound_status(cfg, p, status);
    }
    if (status != DM_STATUS_FAILED && DM_RUNS(cfg, DM_METHOD_MCMC))
        status =
            dm_mcmc_run(cfg, d, voxel_index, p, samples, sample_stride, &accept_rate, &tau_mean);

    sse = dm_sse(d, p);
    real loglik =
        DM_RUNS(cfg, DM_METHOD_MCMC) && DM_MCMC_RICIAN(cfg) && status != DM_STATUS_FAILED
            ? dm_rician_loglik(d, p, tau_mean)
            : dm_gaussian_loglik(d->nmeas, sse);
    if (status != DM_STATUS_FAILED && !dm_finite(sse)) status = DM_STATUS_FAILED;

    if (DM_LANE_LEADER) {
        for (int k = 0; k < DM_NPARAMS; k++) params[k] = p[k];
        stats[DM_STAT_SSE] = sse;
        stats[DM_STAT_LOGL] = loglik;
        stats[DM_STAT_ITERATIONS] = (real)iterations;
        stats[DM_STAT_ACCEPT] = accept_rate;
        stats[DM_STAT_TAU] = tau_mean;
    }
    return status;
}

#endif
