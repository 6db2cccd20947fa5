/* `dimoc csd` and `dimoc response` as library calls: inputs read and checked, responses read
 * or estimated, every voxel of the mask deconvolved on the CPU or a GPU, the outputs written
 * all or nothing. */
#ifndef DIMOC_CSD_RUN_H
#define DIMOC_CSD_RUN_H

#include "util/json.h"
#include "cluster/part.h"

typedef struct dm_csd_options {
    const char *data, *bvals, *bvecs, *mask, *out;
    const char *grad;       /* MRtrix b-table instead of bvals/bvecs (io/gradients.h), or NULL */
    int lmax;               /* of the WM FOD (even); -1: 8, or the WM response's if lower */
    const char *response;   /* comma-separated response files (WM[,GM[,CSF]]); NULL: estimate */
    const char *algorithm;  /* response estimation when none is given: NULL = by the shells */
    const char *directions; /* constraint directions, az el pairs; NULL: MRtrix's default 300 */
    int msmt;               /* force multi-tissue estimation on single-shell data */
    int normalise;          /* mtnormalise-like intensity normalisation of the tissues */
    int use_gpu;            /* resolved --device */
    const char *gpus;
    int use_double;
    int threads;         /* 0: all cores */
    int max_iter;        /* 0: the default */
    const char *history; /* the command line, for the response files' comments */
    dm_part part;        /* --part K/N: deconvolve only the K-th share of the mask's voxels */
} dm_csd_options;

/* Runs the deconvolution; provenance records the inputs, options, counts and the seconds of
 * each stage (load, response, solve, write).  0, or -1 with dm_last_error(). */
int dm_csd_command(const dm_csd_options *o, dm_provenance *prov);

typedef struct dm_response_options {
    const char *data, *bvals, *bvecs, *mask, *out;
    const char *grad;      /* MRtrix b-table instead of bvals/bvecs (io/gradients.h), or NULL */
    const char *algorithm; /* tournier, dhollander or fa */
    int lmax;              /* of the WM response */
    int threads;
    const char *history;
} dm_response_options;

/* Estimates the responses and writes them with the voxel masks they came from. */
int dm_response_command(const dm_response_options *o, dm_provenance *prov);

#endif
