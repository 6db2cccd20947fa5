/* The fitter's entry points, shared by the runtime (which calls them) and the templates
 * (which implement them once, for the host build and the NVRTC build alike).  Plain C: the
 * config struct is passed by value to GPU kernels too, so it holds no pointers. */
#ifndef DIMOC_FIT_API_H
#define DIMOC_FIT_API_H

#include "fit/model_api.h"

#define DM_FITTER_ABI 5

/* DM_METHOD_DICT, the dictionary fit (templates/fit/dictionary.h), runs first, on the CPU only,
 * through its own entry points; the per-voxel driver (fit_voxel.h) ignores it. */
enum dm_method { DM_METHOD_GRID = 1, DM_METHOD_LM = 2, DM_METHOD_MCMC = 4, DM_METHOD_DICT = 8 };
enum dm_noise { DM_NOISE_GAUSSIAN = 0, DM_NOISE_RICIAN = 1 };

/* Per-voxel status, as written to the status map. */
enum dm_status {
    DM_STATUS_OUTSIDE = 0, /* not in the mask */
    DM_STATUS_FITTED = 1,
    DM_STATUS_NOT_CONVERGED = 2, /* LM hit its iteration limit */
    DM_STATUS_SKIPPED_NONFINITE = 3,
    DM_STATUS_SKIPPED_ZERO = 4, /* all-zero signal */
    DM_STATUS_FAILED = 5,       /* no valid starting point (bounds/constraints), or NaN */
    DM_STATUS_AT_BOUND = 6,     /* LM converged with a free parameter within a hair of a bound
                                 * (a fraction at 0 or 1, a diffusivity at 0, ...): the estimate
                                 * is degenerate or the model is not identifiable there */
};
#define DM_NSTATUS 7

/* Fitted: the maps hold an estimate (converged, at the iteration limit, or at a bound). */
#define DM_STATUS_HAS_ESTIMATE(s)                                                                  \
    ((s) == DM_STATUS_FITTED || (s) == DM_STATUS_NOT_CONVERGED || (s) == DM_STATUS_AT_BOUND)

typedef struct dm_fit_config {
    int nmeas;           /* M, measurements per voxel */
    int methods;         /* DM_METHOD_* bits, run grid -> lm -> mcmc */
    unsigned fixed_mask; /* bit k: parameter k is held at its initial value */
    int lm_max_iter;     /* 200 */
    int noise;           /* dm_noise, for MCMC */
    int burnin;          /* 1000 */
    int jumps;           /* 1250 */
    int sample_every;    /* 25 */
    int update_every;    /* 40: proposal adaptation period */
    unsigned long long seed;
    /* Multi-start LM (templates/fit/multistart.h): `starts` runs, the directions of the
     * `norient` (theta, phi) pairs turned about the normal of the first two before each. */
    int starts;                          /* 1: one LM run from the start */
    int norient;                         /* (theta, phi) pairs, by tensor axis K */
    int orient_theta[DM_MAX_PARAMS / 2]; /* parameter index of pair i's polar angle */
    int orient_phi[DM_MAX_PARAMS / 2];   /* and of its azimuth */
    int grid_count[DM_MAX_PARAMS];       /* values for parameter k in the grid; 0: not gridded */
    int grid_offset[DM_MAX_PARAMS];      /* first value of parameter k in grid_values */
    /* Bit k: parameter k keeps its start at every point the run tries (fixed; in a grid search
     * alone, not gridded; not turned by multiple starts).  A fitter built from a stage program
     * (model_api.h) fits only runs that hold at least the parameters it was made for. */
    unsigned held_mask;
    /* A flag the host sets to stop a run early (on a GPU: host memory mapped into the device's
     * space, read by the kernel while it runs, so that a cancel does not wait for a batch of
     * long MCMC chains to finish); NULL: none.  A voxel stopped this way is DM_STATUS_FAILED,
     * and the run's results are dropped. */
    const volatile int *stop;
} dm_fit_config;

/* Number of stored MCMC samples per voxel. */
#define DM_NSAMPLES(cfg) ((cfg)->sample_every > 0 ? (cfg)->jumps / (cfg)->sample_every : 0)

/* Statistics returned per voxel in stats[DM_NSTATS]. */
enum {
    DM_STAT_SSE = 0,    /* sum of squared residuals at the final estimate */
    DM_STAT_LOGL,       /* log-likelihood at the final estimate (noise model; sigma by ML) */
    DM_STAT_ITERATIONS, /* LM iterations */
    DM_STAT_ACCEPT,     /* MCMC acceptance rate over all parameters after burn-in */
    DM_STAT_TAU,        /* Rician precision, posterior mean (MCMC, rician) */
    DM_NSTATS
};

/* Symbols a host-compiled fitter (.so) exports.  Arrays are double whatever the build's
 * precision; the fitter converts at entry and exit.
 *
 *   int  dm_fitter_abi(void);            DM_FITTER_ABI
 *   int  dm_fitter_real_size(void);      sizeof(real): 4 or 8
 *   int  dm_fit_voxel(const dm_fit_config *cfg, const double *grid_values,
 *                     const double *meas,  M rows of DM_MEASURE_WIDTH
 *                     const double *y,     M measurements
 *                     const double *vox,   DM_VOXEL_WIDTH values
 *                     unsigned long long voxel_index,   keys the voxel's random stream
 *                     double *params,      in: start (fixed ones kept); out: the estimate
 *                                          (grid point, LM minimum, MCMC posterior mean)
 *                     double *samples,     MCMC: DM_NSAMPLES x P, row per sample; else unused
 *                     double *stats,       DM_NSTATS
 *                     void *work);         a workspace of dm_fit_work_new, or NULL
 *        returns a dm_status (FITTED, NOT_CONVERGED or FAILED).
 *   void *dm_fit_work_new(void);         a thread's workspace for its voxels, one after another
 *   void dm_fit_work_free(void *work);
 *        The workspace keeps the measurement rows in the build's precision and, for a model
 *        with fixed values (model_api.h), the extended rows of the last voxel's inputs, made
 *        again only where the next voxel's differ.  One workspace serves one array of
 *        measurement rows (the rows are told apart by their address).
 *   void dm_predict(const double *params, const double *meas, int M, const double *vox,
 *                   double *out);        M predicted signals
 *   void dm_derived(const double *params, const double *vox, double *out);
 *                                        DM_OUTPUT_WIDTH derived-output slots
 *   void dm_derived_rows(const double *params, int n, const double *vox, double *out);
 *                                        the same of n rows of parameters (samples)
 */
/* The dictionary fit (templates/fit/dictionary.h; host builds only):
 *
 *   void *dm_dict_build(const dm_dict_spec *spec, const dm_fit_config *cfg,
 *                       const double *grid_values, const double *meas, int M,
 *                       const double *params, const double *vox, dm_dict_report *rep);
 *        the atoms, from the grid of cfg and a reference voxel's start and inputs; NULL with
 *        rep->error set when the model or the request does not allow one.
 *   int  dm_dict_fit_voxel(const void *dict, const double *y, const double *vox,
 *                          double *params, double *stats);
 *        (the measurements are those given to dm_dict_build)
 *        params: in: the start (held parameters, orientation); out: the estimate.  Returns
 *        FITTED, or FAILED when no atom has a positive weight.
 *   void dm_dict_free(void *dict);
 */
typedef struct dm_dict_spec {
    unsigned linear_mask;   /* candidate volume fractions: free, not gridded, bounds within [0,1] */
    unsigned scale_mask;    /* candidate scales (S0): free, not gridded, bounds (0, inf) */
    int theta, phi;         /* the orientation (parameter indices) held per voxel, or -1 */
    int g_column;           /* first column of the gradient direction in a measurement row, or -1 */
    unsigned periodic_mask; /* periodic parameters (a gridded one is not averaged) */
    double lambda1, lambda2; /* the elastic net's penalties (templates/fit/dictionary.h) */
} dm_dict_spec;

enum dm_dict_error {
    DM_DICT_OK = 0,
    DM_DICT_NO_MEMORY,
    DM_DICT_NOT_AFFINE,  /* rep->param: a candidate fraction the signal is not affine in */
    DM_DICT_NO_FRACTION, /* no candidate fraction passed */
    DM_DICT_TOO_MANY,    /* over DM_DICT_MAX_ATOMS atoms */
    DM_DICT_NO_ATOM,     /* no grid point within the bounds and constraints */
    DM_DICT_STAGE,       /* a fitter built from a stage program: the model's own one is needed */
};
#define DM_DICT_MAX_ATOMS 20000

typedef struct dm_dict_report {
    int error, param;      /* dm_dict_error, and the parameter it names (or -1) */
    int atoms, fractions;  /* atoms after deduplication; volume fractions found */
    int scale;             /* the scale parameter found, or -1 */
    int tabulated, shells; /* 1: atoms interpolated from per-shell tables of dot(g, v) */
    double table_error;    /* the largest interpolation error seen in the check */
} dm_dict_report;

typedef void *(*dm_dict_build_fn)(const dm_dict_spec *, const dm_fit_config *, const double *,
                                  const double *, int, const double *, const double *,
                                  dm_dict_report *);
typedef int (*dm_dict_fit_fn)(const void *, const double *, const double *, double *, double *);
typedef void (*dm_dict_free_fn)(void *);

typedef int (*dm_fit_voxel_fn)(const dm_fit_config *, const double *, const double *,
                               const double *, const double *, unsigned long long, double *,
                               double *, double *, void *);
typedef void *(*dm_fit_work_new_fn)(void);
typedef void (*dm_fit_work_free_fn)(void *);
typedef void (*dm_predict_fn)(const double *, const double *, int, const double *, double *);
typedef void (*dm_derived_fn)(const double *, const double *, double *);
typedef void (*dm_derived_rows_fn)(const double *, int, const double *, double *);

#endif
