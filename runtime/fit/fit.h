/* dimoc's fitting library: a fit request (what the command line says) is planned into a
 * problem (inputs read and checked, voxels selected, starting points set), executed on a
 * backend, and written out.  Other programs can embed it through these calls. */
#ifndef DIMOC_FIT_H
#define DIMOC_FIT_H

#include "fit/fit_api.h"
#include "model/model_info.h"
#include "io/volume.h"
#include "cluster/part.h"

typedef struct dm_fit_request {
    const char *model, *data, *mask, *bvals, *bvecs, *out;
    const char *grad;               /* MRtrix b-table (io/gradients.h), or NULL */
    const char *methods;            /* "lm", "grid,lm,mcmc", ... */
    const char *grid;               /* "f1=0,0.5,1;kappa=0:4:32" (';' or repeated) */
    const char *fixed;              /* "S0,d" */
    const char *dictionary_penalty; /* "L1,L2" of --method dictionary (NULL: AMICO's) */
    const char *init;               /* "d=1.7e-3,S0=s0.nii.gz" */
    const char *init_from;          /* folder of an earlier fit */
    const char *voxel;              /* "T1=t1.nii.gz" */
    const char *measure;            /* "TE=te.txt" */
    const char *scheme;             /* --scheme: a file of named columns per volume, or NULL */
    const char *noise;              /* gaussian | rician */
    const char *precision;          /* float | double | auto (float for MCMC on a GPU) */
    const char *device;             /* cpu | gpu | auto */
    const char *gpus;               /* all | 0,1,.. */
    long gpu_memory_mb;             /* cap per GPU (0: 70% of free memory) */
    long lanes;                     /* GPU lanes per voxel (0: auto) */
    long burnin, jumps, sample_every, update_every, lm_iterations, threads;
    unsigned long long seed;
    int save_samples, predicted, ic, quiet;
    const char *samples_of;   /* "th1,ph1": the parameters whose samples save_samples writes
                                 (NULL: every one) */
    int out_float64;          /* maps as float64 (default float32) */
    const char *command_line; /* for provenance */
    dm_part part;             /* --part K/N: fit only the K-th share of the mask's voxels */
} dm_fit_request;

/* Default values of every field (the command line's defaults). */
void dm_fit_request_defaults(dm_fit_request *r);
/* Runs the whole fit; 0, or -1 with dm_last_error().  Voxels that cannot be fitted are
 * flagged in the status map, never fatal. */
int dm_fit_run(const dm_fit_request *r);
/* A cascade of n fits in one run (`dimoc fit ... --then ...`): the inputs are read, the fitter
 * loaded and the GPUs opened once; stage s > 0 starts from stage s-1's estimates as written
 * (rounded to its --out-type: what --init-from would read), then its own --init.  The inputs,
 * machine options and --part are stages[0]'s; each stage writes its own --out whole.  Stops at
 * the first stage that fails (the stages before it stay written).  dm_fit_run is a cascade of
 * one. */
int dm_fit_run_cascade(const dm_fit_request *stages, int n);

/* For a program that runs many fits in turn (dimoc bids): while on, each cascade's last stage
 * is written on a thread of its own after dm_fit_run_cascade returns (which then returns 0 for
 * the fit; the write's own result comes from the join).  dm_fit_deferred_take hands over the
 * writes started since the last take (NULL: none); dm_fit_deferred_join waits for them and
 * frees them: 0, or -1 with the first failure's error.  Every write taken must be joined. */
typedef struct dm_fit_deferred dm_fit_deferred;
void dm_fit_defer_final_writes(int on);
dm_fit_deferred *dm_fit_deferred_take(void);
int dm_fit_deferred_join(dm_fit_deferred *d);

/* The inputs of a fit, read and checked. */
typedef struct dm_problem {
    dm_model_info mi;
    dm_volume data; /* nt = M */
    int M;
    double *meas;               /* M x mi.measure_width */
    double *bvals;              /* M, or NULL when the model has no bvals measure */
    size_t nvox;                /* voxels in the grid */
    size_t nfit;                /* voxels in the mask */
    size_t *index;              /* nfit linear indices into the grid */
    size_t own_first;           /* --part: the linear voxel indices whose outputs this part owns */
    size_t own_end;             /* (every voxel without --part) */
    double *y;                  /* nfit x M */
    double *voxin;              /* nfit x mi.voxel_width */
    double *start;              /* nfit x P starting values */
    size_t start_bytes;         /* its allocation, kept from stage to stage */
    /* the starts still to come from each voxel's signal (fit_starts.h), or NULL */
    struct dm_fit_starts_plan *starts;
    unsigned char *status;      /* nvox, dm_status */
    unsigned char *status_data; /* nvox: the status the data alone give (each stage's start) */
    dm_fit_config cfg;
    unsigned long long samples_mask; /* bit k: parameter k's samples written (--samples-of) */
    double dict_lambda[2]; /* --method dictionary's penalties (--dictionary-penalty) */
    double *grid_values;
    int ngrid_values;
    /* frees `data` (the image the reader made, fit_files.c), or NULL: data holds the grid's
     * sizes only (arrays of the C API) */
    void (*free_data)(dm_volume *data);
} dm_problem;

/* Reads and checks the inputs shared by every stage of a cascade: the model, data, mask,
 * measurements and per-voxel inputs (fit_inputs.h: the reader, then the builder). */
int dm_problem_load(const dm_fit_request *r, dm_problem *p);
/* Plans one stage on loaded inputs: its status, fixed parameters, starts and settings.  prev
 * (nfit x P): the starts a previous stage left (instead of r->init_from), or NULL.  Starts
 * that come from each voxel's signal are left to dm_fit_starts_fill (fit_starts.h). */
int dm_problem_stage(const dm_fit_request *r, const double *prev, dm_problem *p);
/* Both of the above. */
int dm_problem_plan(const dm_fit_request *r, dm_problem *p);
void dm_problem_free(dm_problem *p);
/* The bytes of p->y (dm_big_reuse'd: given back with dm_big_release). */
size_t dm_problem_signal_bytes(const dm_problem *p);

/* Builds the per-measurement rows of a model from bvals/bvecs and NAME=file inputs.
 * bvals_out (optional) receives a copy of the b-values when the model reads bvals. */
int dm_build_measurements(const dm_model_info *mi, const char *bvals, const char *bvecs,
                          const char *measure_spec, const char *scheme, int nvol, double **meas,
                          double **bvals_out);

/* `dimoc warm`: the fitters of some models compiled ahead of their first fit, into the same
 * caches a fit reads (the host compiler's shared objects; NVRTC's GPU code for the GPUs
 * here), so that a fit finds them and starts at once. */
/* "grid,lm,mcmc"-style method list -> DM_METHOD_* bits; -1 with a message for a bad one. */
int dm_fit_parse_methods(const char *s, int *methods);

typedef struct dm_warm_request {
    char **models; /* names or .model files; NULL: every shipped model */
    int nmodels;
    int cpu, gpu;     /* which fitters */
    int real_size[2]; /* the precisions: 4 (float) and/or 8 (double); 0 for none */
    int lanes;        /* GPU lanes per voxel (0: dm_fit's choice for `measurements`) */
    int measurements; /* the protocol's size that choice is made for */
    int methods;      /* the GPU fitter's methods (DM_METHOD_* bits); 0: grid, lm and lm+mcmc */
    int quiet;
} dm_warm_request;

/* Compiles what r asks for, one line each on stdout unless quiet ("ball_2_sticks cpu double
 * 2.1 s" or "... cached").  0, or -1 with dm_last_error() at the first model that fails. */
int dm_fit_warm(const dm_warm_request *r);

#endif
