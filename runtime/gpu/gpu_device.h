/* Choosing GPUs for a run: whether one is usable, --device cpu|gpu|auto, the --gpus list, the
 * description and common architecture of the chosen GPUs, and the memory each may use. */
#ifndef DIMOC_GPU_DEVICE_H
#define DIMOC_GPU_DEVICE_H

#include "gpu/cuda_api.h"

#include <pthread.h>
#include <stddef.h>

#define DM_GPU_MAX 64 /* GPUs one run may use */

/* The GPUs of one run, from dm_gpu_select. */
typedef struct dm_gpu_set {
    int ord[DM_GPU_MAX]; /* device ordinals */
    int n;
    int arch;         /* their compute capability, e.g. 90 (sm_90): NVRTC compiles for it */
    char device[256]; /* "NVIDIA H100 80GB HBM3 x1 (sm_90)" */
} dm_gpu_set;

/* 1 when a GPU is usable here (driver, device and NVRTC); else 0 with the reason in
 * dm_last_error(). */
int dm_gpu_available(void);

/* --device cpu|gpu|auto (NULL: auto) into *use_gpu; auto takes a usable GPU, else the CPU.
 * The errors are worded as the command's other messages: command NULL (dimoc fit) gives
 * "--device gpu: no usable GPU: WHY" and "--device: 'X' is not one of cpu, gpu, auto"; a
 * command name (dimoc track) gives "NAME: --device gpu: no usable GPU: WHY" and
 * "NAME: --device must be cpu, gpu or auto, not 'X'".  0, or -1. */
int dm_gpu_resolve_device(const char *device, const char *command, int *use_gpu);

/* The same, on a thread: begin validates --device at once (the same errors) and, unless it is
 * cpu, starts the driver on a thread (cuInit and NVRTC's loading take about 0.1 s), so that it
 * overlaps the reading of the inputs; end joins it and gives *use_gpu or the "no usable GPU"
 * error (use_gpu NULL: only joins it, leaving an earlier error in place).  Every begun probe
 * is ended.  0, or -1. */
typedef struct dm_gpu_probe {
    const char *device, *command;
    int running, available;
    int finished;  /* the thread's work done (read atomically: dm_gpu_probe_ready) */
    char why[512]; /* why no GPU is usable */
    pthread_t thread;
} dm_gpu_probe;
int dm_gpu_probe_begin(dm_gpu_probe *p, const char *device, const char *command);
/* Only the check of the --device value (its error as above): 0, or -1. */
int dm_gpu_device_check(const char *device, const char *command);
int dm_gpu_probe_end(dm_gpu_probe *p, int *use_gpu);
/* 1 when dm_gpu_probe_end would not wait (the driver's start is over), 0 while it runs: a
 * caller with other work may end the probe after it instead.  Ending again gives the same. */
int dm_gpu_probe_ready(const dm_gpu_probe *p);

/* --gpus: "all" (or NULL) or a comma list of ordinals below ndev, into ord (DM_GPU_MAX at
 * most). */
int dm_gpu_parse_list(const char *spec, int ndev, int *ord, int *n);

/* The GPUs of --gpus `spec`: their ordinals, description and architecture.  An error when
 * they are not all of one architecture (one cubin serves them all). */
int dm_gpu_select(const dm_cuda *cu, const char *spec, dm_gpu_set *set);

/* The device memory one GPU's work may use: 70% of the free memory of the current context's
 * GPU, or cap_mb MB when that is less (cap_mb <= 0: no cap).  0, or -1 with the CUDA error
 * and *allow 0. */
int dm_gpu_memory_budget(const dm_cuda *cu, long cap_mb, size_t *allow);

/* The smallest dm_gpu_memory_budget of the set's GPUs, each read in its primary context (one
 * whose free memory cannot be read counts 0). */
size_t dm_gpu_memory_budget_min(const dm_cuda *cu, const dm_gpu_set *set, long cap_mb);

/* Retains the primary context of the GPUs of `spec` (--gpus: "all", NULL or a list) until the
 * process ends.  A process that runs many commands one after another (`dimoc bids`) calls it
 * once: each command's own retain and release then find the context alive instead of making
 * and destroying it (about 0.35 s of driver work each time).  0, or -1 with dm_last_error(). */
int dm_gpu_hold_contexts(const char *spec);
/* 1 when dm_gpu_hold_contexts holds the primary context of GPU `ordinal`. */
int dm_gpu_context_held(int ordinal);

#endif
