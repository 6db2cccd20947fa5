/* dimoc track's engine: every streamline of every seed on the CPU (OpenMP over streamlines),
 * accumulated into the outputs.  Results do not depend on the thread count: each streamline
 * has its own random stream (rseed, seed * P + sample), counts are integer sums, the sparse
 * matrices are merged sorted lists, and saved streamlines are the first in streamline order. */
#ifndef DIMOC_TRACK_RUN_H
#define DIMOC_TRACK_RUN_H

#include "track/track_field.h"
#include "track/track_kernel_host.h"
#include "track/track_masks.h"
#include "track/track_seeds.h"
#include "track/track_sparse.h"
#include "cluster/part.h"

typedef struct dm_track_options {
    long per_seed; /* -P */
    long nsteps;   /* -S: both halves together */
    double steplength, cthr, fibthresh;
    int randfib, fibst; /* fibst 1-based, as on the command line */
    int modeuler, loopcheck, nearest, fsl_frame;
    int oneway;        /* --onewaycondition */
    int network;       /* --network (the masks' waypoint bits: dm_track_masks_network) */
    double distthresh; /* mm */
    double sampvox;    /* mm */
    unsigned long long rseed;
    int threads; /* 0: OpenMP's default */
    int opd, os2t, matrix1, matrix2, matrix3;
    long tck_max;       /* streamlines kept for the .tck file (0: none) */
    int use_gpu;        /* dm_track_run_gpu (track_gpu.h) instead of dm_track_run */
    const char *gpus;   /* "all" or a comma list of device ordinals */
    long gpu_memory_mb; /* cap on the device memory of each GPU (0: 70% of free) */
    dm_part part;       /* --part K/N: only its share of the ids (n 0: the whole run) */
} dm_track_options;

typedef struct dm_track_result {
    unsigned int *paths;            /* per seed-space voxel (opd), else NULL */
    unsigned int *seeds_to_targets; /* ntargets x seed-space voxels (os2t), else NULL */
    unsigned long long waytotal;    /* streamlines kept */
    unsigned int *network;          /* --network: ngroups x ngroups streamlines from mask i
                                         reaching mask j, then the kept of each mask */
    unsigned long long generated;   /* streamlines tracked */
    unsigned long long steps;       /* points recorded (both halves) */
    unsigned long long ends[6];     /* half-streamlines by DM_TRACK_END_* */
    dm_sparse m1, m2, m3;
    long ntck;                      /* saved streamlines */
    unsigned long long tck_tracked; /* streamlines tracked to find them (.tck total_count) */
    long *tck_len;                  /* points of each */
    float *tck_xyz;                 /* world mm, all of them one after the other */
    double seconds;
    double merge_seconds, wait_seconds; /* GPU runs: host time merging matrix keys, waiting for
                                           kernels (summed over GPUs) */
    int threads;
    char device[256]; /* GPU runs: "NVIDIA H100 ... x1 (sm_90)", else "" */
} dm_track_result;

/* The streamline ids a run tracks, [*first, *end): every id of the seeds (id = seed x P +
 * sample, each its own random stream), or o->part's share of them. */
void dm_track_id_range(const dm_track_seeds *s, const dm_track_options *o,
                       unsigned long long *first, unsigned long long *end);

int dm_track_run(const dm_track_field *f, const dm_track_seeds *s, const dm_track_masks *m,
                 const dm_track_options *o, dm_track_result *r);
void dm_track_result_free(dm_track_result *r);

/* The kernel's context for these inputs (host pointers). */
void dm_track_ctx_init(const dm_track_field *f, const dm_track_seeds *s, const dm_track_masks *m,
                       const dm_track_options *o, dm_track_ctx *c);
/* Traces streamlines in id order on the host until o->tck_max are kept, into r's tck_* (for
 * the GPU path, which keeps no points: the saved streamlines are these host traces). */
int dm_track_trace_saved(const dm_track_field *f, const dm_track_seeds *s, const dm_track_masks *m,
                         const dm_track_options *o, dm_track_result *r);

#endif
