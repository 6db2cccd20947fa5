/* Turning per-voxel fit results into output maps and the provenance file. */
#ifndef DIMOC_FIT_OUTPUTS_H
#define DIMOC_FIT_OUTPUTS_H

#include "fit/cpu_backend.h"
#include "fit/fit.h"
#include "fit/fit_inputs.h"

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
    /* of the fit, the time a GPU waited for the starts made from the signal (fit_starts.h) */
    double starts_wait;
    /* the time the starts from the signal took to make (on their thread for a GPU fit) */
    double starts;
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

/* Where a fit's maps go: put takes map `name` (kind DM_MAP_*) of nt values per voxel to fit
 * (vals[i * nt + t]), or for the status one per voxel of the grid; vals (malloc'd) is the
 * sink's from then on.  samples takes the MCMC samples, each parameter's its map
 * "<parameter>_samples" of ns volumes: sample s of parameter k in fitted voxel i is
 * samples[(i * ns + s) * P + k], the fit's own array, read only and left in place until the
 * outputs are made (a sink may still be writing them when dm_fit_make_outputs returns).  0, or
 * -1 with dm_last_error(). */
typedef struct dm_fit_sink {
    int (*put)(struct dm_fit_sink *s, const char *name, int kind, int nt, double *vals);
    int (*samples)(struct dm_fit_sink *s, const double *samples, int P, int ns);
} dm_fit_sink;
/* Makes every map of a fit and hands each to the sink in turn: the parameters and their sd,
 * the samples, the outputs and their dispersion, BIC and AIC, predicted, the status last. */
int dm_fit_make_outputs(const dm_fit_request *r, dm_problem *p, const dm_cpu_fitter *f,
                        dm_fit_results *res, dm_fit_sink *sink);
/* Scatters nt values per fitted voxel (value t of voxel i: vals[i * stride + t * volume_stride])
 * onto the grid: out holds nvox * nt zeroed values of `type` (DM_OUT_FLOAT64 or
 * DM_OUT_FLOAT32); voxels without an estimate stay 0. */
void dm_fit_scatter(const dm_problem *p, int nt, const double *vals, size_t stride,
                    size_t volume_stride, int type, void *out);

/* The command's outputs: both write into dir (the run's temporary folder, util/outdir.h);
 * dm_fit_write_outputs is fit_files.c's. */
int dm_fit_write_outputs(const dm_fit_request *r, const char *dir, dm_problem *p,
                         const dm_cpu_fitter *f, dm_fit_results *res);
int dm_fit_write_provenance(const dm_fit_request *r, const char *dir, const dm_problem *p,
                            const char *device, int real_size, const dm_fit_timing *t,
                            const dm_fit_stage_info *stage);
/* The same maps in memory, on the grid (maps empty on entry; freed on failure), and the
 * provenance as text (malloc'd).  0, or -1 with dm_last_error(). */
int dm_fit_make_maps(const dm_fit_request *r, dm_problem *p, const dm_cpu_fitter *f,
                     dm_fit_results *res, dm_fit_maps *maps);
int dm_fit_provenance_text(const dm_fit_request *r, const dm_problem *p, const char *device,
                           int real_size, const dm_fit_timing *t, const dm_fit_stage_info *stage,
                           char **text);

/* What the engine (fit_run.c) does with files, handed in by the command's side (fit_files.c)
 * so that a run in memory links nothing that reads or writes images: the reader and builder,
 * a stage's planning with its --init maps, the writer of the maps. */
typedef struct dm_fit_io {
    int (*load)(const dm_fit_request *r, dm_problem *p);
    int (*stage)(const dm_fit_request *r, const double *prev, dm_problem *p);
    int (*write)(const dm_fit_request *r, const char *dir, dm_problem *p, const dm_cpu_fitter *f,
                 dm_fit_results *res);
} dm_fit_io;
/* A cascade of files through io (dm_fit_run_cascade), or one stage in memory (io NULL, mem
 * given: dm_fit_run_memory).  0, or -1 with dm_last_error(). */
int dm_fit_run_engine(const dm_fit_request *stages, int n, const dm_fit_io *io,
                      dm_fit_memory *mem);

#endif
