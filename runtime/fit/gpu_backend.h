/* The GPU backend: NVRTC-compiled fitters run on one or more GPUs, in batches sized by free
 * device memory, each GPU taking the next batch from a shared queue. */
#ifndef DIMOC_GPU_BACKEND_H
#define DIMOC_GPU_BACKEND_H

#include "fit/fit.h"
#include "fit/fit_outputs.h"

typedef struct dm_gpu_options {
    const char *gpus;  /* "all" or a comma list of device ordinals */
    long memory_mb;    /* cap on the device memory a GPU's batches use (0: 70% of free) */
    int lanes;         /* lanes per voxel (0: chosen from the measurement count) */
    struct dm_progress *progress; /* advanced as batches finish; may be NULL */
} dm_gpu_options;

typedef struct dm_gpu_report {
    char device[256];       /* "NVIDIA H100 80GB HBM3 x1" */
    int ngpus, lanes, batches;
    long batch_voxels;
    double compile_seconds; /* NVRTC, 0 when cached */
    int compile_cached;
} dm_gpu_report;

/* 1 when a GPU is usable here (driver, device and NVRTC); else 0 with the reason in
 * dm_last_error(). */
int dm_gpu_available(void);
/* --gpus: "all" (or NULL) or a comma list of ordinals below ndev, into ord (64 at most). */
int dm_gpu_parse_list(const char *spec, int ndev, int *ord, int *n);
/* Lanes per voxel chosen for M measurements and the precision (real_size 4 or 8). */
int dm_gpu_auto_lanes(int M, int real_size);
/* Fits every voxel of p whose status is FITTED (updating p->status), results into res. */
int dm_gpu_fit(dm_problem *p, int real_size, const dm_gpu_options *o, dm_fit_results *res,
               dm_gpu_report *rep);

#endif
