/* The GPU fitter: templates/fit/gpu_fitter.cu with the model's source, compiled by NVRTC, run on
 * one or more GPUs in batches sized by free device memory, each GPU taking the next batch from
 * a shared queue. */
#ifndef DIMOC_FIT_GPU_H
#define DIMOC_FIT_GPU_H

#include "fit/fit.h"
#include "fit/fit_inputs.h"
#include "fit/fit_outputs.h"
#include "gpu/gpu_compile.h"
#include "gpu/gpu_device.h"

typedef struct dm_fit_gpu_options {
    const char *gpus; /* "all" or a comma list of device ordinals */
    long memory_mb;   /* cap on the device memory a GPU's batches use (0: 70% of free) */
    int lanes;        /* lanes per voxel (0: chosen from the measurement count) */
    struct dm_progress *progress; /* advanced as batches finish; may be NULL */
    dm_fit_watch *watch;          /* counts them and may stop the run (fit_inputs.h); or NULL */
} dm_fit_gpu_options;

typedef struct dm_fit_gpu_report {
    char device[256]; /* "NVIDIA H100 80GB HBM3 x1 (sm_90)" */
    int ngpus, lanes, batches;
    long batch_voxels;
    double compile_seconds; /* NVRTC, 0 when cached */
    int compile_cached;
    double starts_wait_seconds; /* the longest any GPU waited for its batches' starts */
} dm_fit_gpu_report;

/* Compiles templates/fit/gpu_fitter.cu with the model's CUDA source for compute capability
 * arch (e.g. 90), real_size 4 or 8, `lanes` lanes per voxel, holding only the fitting methods
 * `methods` (DM_METHOD_* bits: a smaller program compiles several times faster) and MCMC's
 * noise model `noise` (DM_NOISE_GAUSSIAN or DM_NOISE_RICIAN; -1: both, chosen per run).  The
 * cubin is cached under the cache folder keyed by the sources, the options and the NVRTC
 * version; use_cache 0 skips the cache (tests).  0, or -1 with the first lines of the NVRTC log
 * in dm_last_error(). */
int dm_fit_gpu_compile(const dm_cuda *cu, const dm_model_info *mi, int arch, int real_size,
                       int lanes, int methods, int noise, int use_cache, dm_gpu_program *out);
/* The programs of a GPU fit, run in turn on every batch.  MCMC after a grid search or LM is a
 * program of its own, continuing from the first's estimates in device memory
 * (templates/fit/fit_voxel.h: DM_CONTINUES): the two are compiled at once, on two threads, in
 * about half the wall time of one program holding every method (NVRTC's and ptxas's time grows
 * faster than the code: ball & 2 sticks in double, 3.6 s and 5.5 s apart against 10.8 s
 * together, docs/performance.md).  Each part is cached on its own (the first is the LM-only
 * program of the pipelines' earlier stages). */
typedef struct dm_fit_gpu_programs {
    int n; /* 1 or 2 */
    dm_gpu_program part[2];
    double compile_seconds; /* the compiles' wall time, 0 when every part was cached */
    int cached;             /* every part came from the cache */
} dm_fit_gpu_programs;
/* As dm_fit_gpu_compile, for every part of a run of `methods`.  0, or -1 (nothing to free). */
int dm_fit_gpu_compile_parts(const dm_cuda *cu, const dm_model_info *mi, int arch, int real_size,
                             int lanes, int methods, int noise, int use_cache,
                             dm_fit_gpu_programs *out);
void dm_fit_gpu_programs_free(dm_fit_gpu_programs *progs);
/* Lanes per voxel chosen for M measurements and the precision (real_size 4 or 8). */
int dm_fit_gpu_auto_lanes(int M, int real_size);
/* The GPUs of a run, opened once and kept for every stage of a cascade.  Each GPU's primary
 * context is held for the session: made once (0.1-0.2 s each), not again by every user that
 * retains and releases it. */
typedef struct dm_fit_gpu_session {
    dm_cuda *cu;
    dm_gpu_set gs;
    int held; /* the contexts of gs.ord[0 .. held) are retained */
    /* each GPU's buffers, kept from one stage of a cascade to the next (pinning host memory
     * took 0.02-0.04 s a stage); NULL where none */
    struct gpu_buffers *kept[DM_GPU_MAX];
    /* each GPU's stop flag (dm_fit_config.stop): host memory mapped into its space, made at
     * its first run; NULL where none */
    void *stop_flag[DM_GPU_MAX];
} dm_fit_gpu_session;

/* The dynamic shared memory a block needs to fit p's stage with the stage program `staged`
 * (the measurement rows of the base values, whose stage values it makes as it reads them; for
 * a grid search alone, templates/fit/grid.h's sweep, the points' prepared values after them),
 * or 0 where the GPU runs the model's program instead: MCMC or a dictionary among the
 * methods, a grid search the sweep cannot run, voxels of different inputs, no fixed values,
 * or more memory than a block of every GPU of the session may take. */
size_t dm_fit_gpu_stage_shared(const dm_fit_gpu_session *s, const dm_problem *p,
                               const dm_model_info *staged, int real_size);

/* Opens the driver and NVRTC, selects the GPUs of --gpus `gpus` and makes their contexts.
 * 0, or -1 (nothing to close).  Safe to run on a thread of its own (fit_run.c opens the
 * session while the inputs are read). */
int dm_fit_gpu_open(const char *gpus, dm_fit_gpu_session *s);
void dm_fit_gpu_close(dm_fit_gpu_session *s);
/* Fits every voxel of p whose status is FITTED (updating p->status), results into res, on the
 * session's GPUs (o->gpus is the session's already). */
int dm_fit_gpu_run(dm_fit_gpu_session *s, dm_problem *p, int real_size,
                   const dm_fit_gpu_options *o, dm_fit_results *res, dm_fit_gpu_report *rep);

#endif
