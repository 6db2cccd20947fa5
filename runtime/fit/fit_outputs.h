/* Turning per-voxel fit results into output maps and the provenance file. */
#ifndef DIMOC_FIT_OUTPUTS_H
#define DIMOC_FIT_OUTPUTS_H

#include "fit/cpu_backend.h"
#include "fit/fit.h"

typedef struct dm_fit_results {
    double *params;  /* nfit x P: final estimate (LM/grid) or last MCMC state */
    double *samples; /* nfit x nsamples x P, MCMC only */
    double *stats;   /* nfit x DM_NSTATS */
    int nsamples;
} dm_fit_results;

typedef struct dm_fit_timing {
    double load, compile, fit, write, total;
    /* the wait for the GPU's driver and contexts, started on a thread while the inputs load
     * (the first GPU stage's; not in fit) */
    double gpu_start;
    /* Work done, counted from the configuration and the LM iteration counts: one signal
     * evaluation per measurement per MCMC proposal and per LM trial step, one gradient
     * evaluation per measurement per LM Jacobian. */
    double signal_evals, gradient_evals, gflop;
} dm_fit_timing;

/* Where a fit stands in a cascade (`dimoc fit ... --then ...`): stage of nstages (0-based), and
 * the folder of the stage it started from (NULL for the first). */
typedef struct dm_fit_stage_info {
    int stage, nstages;
    const char *previous;
} dm_fit_stage_info;

/* Both write into dir (the run's temporary folder, util/outdir.h). */
int dm_fit_write_outputs(const dm_fit_request *r, const char *dir, dm_problem *p,
                         const dm_cpu_fitter *f, dm_fit_results *res);
int dm_fit_write_provenance(const dm_fit_request *r, const char *dir, const dm_problem *p,
                            const char *device, int real_size, const dm_fit_timing *t,
                            const dm_fit_stage_info *stage);

#endif
