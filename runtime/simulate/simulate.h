/* Simulated diffusion data: any model's predicted signal in every voxel, from constant or
 * mapped parameters, with Gaussian or Rician noise of a given SNR, written as a 4D image. */
#ifndef DIMOC_SIMULATE_H
#define DIMOC_SIMULATE_H

#include "util/json.h"

enum { DM_SIM_NOISE_NONE, DM_SIM_NOISE_GAUSSIAN, DM_SIM_NOISE_RICIAN };

typedef struct dm_simulate_settings {
    const char *model;  /* a shipped model's name or a .model file */
    const char *params; /* "NAME=VALUE|MAP,..": every parameter, a constant or a 3D map */
    const char *voxel;  /* "NAME=VALUE|MAP,..": per-voxel inputs (NULL: their defaults) */
    const char
        *bvals; /* FSL b-values; NULL: the protocol's length from --scheme or a --measure file */
    const char *bvecs;       /* FSL directions */
    const char *measure;     /* "NAME=FILE,..": per-measurement inputs of the model */
    const char *scheme;      /* a scheme file of named columns (--scheme), or NULL */
    int noise;               /* DM_SIM_NOISE_* */
    double snr;              /* sigma = S(b=0) / snr, S(b=0) the voxel's noise-free mean signal at
                          * b <= 50 (its largest signal when the model reads no b-values) */
    unsigned long long seed; /* of the noise: Philox keyed by seed and voxel (noise.h) */
    long voxels;             /* with constants only: an image of voxels x 1 x 1 */
    const char *out;      /* the 4D image (.nii or .nii.gz); with maps, their grid and geometry */
    const char *mask_out; /* also a mask of the voxels with a finite, positive signal (NULL: no) */
} dm_simulate_settings;

/* Loads the model, reads the maps and the protocol, simulates and writes the image, the mask
 * and OUT-without-.nii.gz.provenance.json (prov), all of them or none.  0, or -1 with
 * dm_last_error(). */
int dm_simulate_run(const dm_simulate_settings *s, dm_provenance *prov);

#endif
