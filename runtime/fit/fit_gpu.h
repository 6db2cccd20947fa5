/* The GPU fitter: templates/gpu_fitter.cu with the model's source, compiled by NVRTC, run on
 * one or more GPUs in batches sized by free device memory, each GPU taking the next batch from
 * a shared queue. */
#ifndef DIMOC_FIT_GPU_H
#define DIMOC_FIT_GPU_H

#include "fit/fit.h"
#include "fit/fit_outputs.h"
#include "gpu/gpu_compile.h"
#include "gpu/gpu_device.h"

typedef struct dm_fit_gpu_options {
    const char *gpus; /* "all" or a comma list of device ordinals */
    long memory_mb;   /* cap on the device memory a GPU's batches use (0: 70% of free) */
    int lanes;        /* lanes per voxel (0: chosen from the measurement count) */
    struct dm_progress *progress; /* advanced as batches finish; may be NULL */
} dm_fit_gpu_options;

typedef struct dm_fit_gpu_report {
    char device[256]; /* "NVIDIA H100 80GB HBM3 x1 (sm_90)" */
    int ngpus, lanes, batches;
    long batch_voxels;
    double compile_seconds; /* NVRTC, 0 when cached */
    int compile_cached;
} dm_fit_gpu_report;

/* Compiles templates/gpu_fitter.cu with the model's CUDA source for compute capability
 * arch (e.g. 90), real_size 4 or 8, `lanes` lanes per voxel, holding only the fitting methods
 * `methods` (DM_METHOD_* bits: a smaller program compiles several times faster) and MCMC's
 * noise model `noise` (DM_NOISE_GAUSSIAN or DM_NOISE_RICIAN; -1: both, chosen per run).  The
 * cubin is cached under the cache folder keyed by the sources, the options and the NVRTC
 * version; use_cache 0 skips the cache (tests).  0, or -1 with the first lines of the NVRTC log
 * in dm_last_error(). */
int dm_fit_gpu_compile(const dm_cuda *cu, const dm_model_info *mi, int arch, int real_size,
                       int lanes, int methods, int noise, int use_cache, dm_gpu_program *out);
/* Lanes per voxel chosen for M measurements and the precision (real_size 4 or 8). */
int dm_fit_gpu_auto_lanes(int M, int real_size);
/* The GPUs of a run, opened once and kept for every stage of a cascade.  Each GPU's primary
 * context is held for the session: made once (0.1-0.2 s each), not again by every user that
 * retains and releases it. */
typedef struct dm_fit_gpu_session {
    dm_cuda *cu;
    dm_gpu_set gs;
    int held; /* the contexts of gs.ord[0 .. held) are retained */
} dm_fit_gpu_session;

/* Opens the driver and NVRTC, selects the GPUs of --gpus `gpus` and makes their contexts.
 * 0, or -1 (nothing to close).  Safe to run on a thread of its own (fit_run.c opens the
 * session while the inputs are read). */
int dm_fit_gpu_open(const char *gpus, dm_fit_gpu_session *s);
void dm_fit_gpu_close(dm_fit_gpu_session *s);
/* Fits every voxel of p whose status is FITTED (updating p->status), results into res, on the
 * session's GPUs (o->gpus is the session's already). */
int dm_fit_gpu_run(const dm_fit_gpu_session *s, dm_problem *p, int real_size,
                   const dm_fit_gpu_options *o, dm_fit_results *res, dm_fit_gpu_report *rep);

#endif
