/* Simulated diffusion data: any model's predicted signal in every voxel, from constant or
 * mapped parameters, with Gaussian or Rician noise of a given SNR.  The engine (simulate.c)
 * works on arrays in memory; `dimoc simulate` reads its files into them and writes the 4D
 * image (simulate_files.c), the C API hands its caller's arrays to the same engine. */
#ifndef DIMOC_SIMULATE_H
#define DIMOC_SIMULATE_H

#include "fit/fit_inputs.h"
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
    const char *mask;        /* a 3D mask: simulate where non-zero (NULL: every voxel) */
    int noise;               /* DM_SIM_NOISE_* */
    double snr;              /* sigma = S(b=0) / snr, S(b=0) the voxel's noise-free mean signal at
                          * b <= 50 (its largest signal when the model reads no b-values) */
    unsigned long long seed; /* of the noise: Philox keyed by seed and voxel (noise.h) */
    long voxels;             /* with constants only: an image of voxels x 1 x 1 */
    const char *out;      /* the 4D image (.nii or .nii.gz); with maps, their grid and geometry */
    const char *mask_out; /* also a mask of the voxels with a finite, positive signal (NULL: no) */
} dm_simulate_settings;

/* A simulation's inputs as arrays.  The names are those messages give: the command's options,
 * the C API's arguments. */
typedef struct dm_simulate_inputs {
    size_t nx, ny, nz;      /* the grid: the maps' (checked against it), or voxels x 1 x 1 */
    dm_fit_items params;    /* one value (ndim 0) or an X x Y x Z map for every parameter */
    dm_fit_items voxel;     /* per-voxel inputs: a value or an X x Y x Z [x width] map; those
                           * left out take the model's defaults */
    dm_fit_inputs protocol; /* b, g and the other per-measurement inputs (data, mask unused) */
    int M;                  /* measurements (volumes) */
    dm_array mask;          /* X x Y x Z: simulate where non-zero and not NaN; data NULL: all */
    const char *params_option, *voxel_option, *mask_name;
    int noise; /* DM_SIM_NOISE_*, snr and seed as in dm_simulate_settings */
    double snr;
    unsigned long long seed;
} dm_simulate_inputs;

/* The simulated image in memory. */
typedef struct dm_simulation {
    size_t nvox;
    int M;
    double *signal;      /* nvox x M: x fastest, then y, z, volume; 0 outside the mask */
    unsigned char *mask; /* nvox: 1 where the voxel's noise-free signal is finite and > 0 */
} dm_simulation;

/* The engine: loads the model's compiled predict function (compiled at its first use), checks
 * the inputs against the model and the grid, evaluates every voxel (in parallel; each voxel's
 * noise is keyed by its index, so the image depends on no thread count) and adds the noise.
 * watch (NULL: none) sees the stages "compile" and "simulate" and may cancel.  0, or -1 with
 * dm_last_error(); dm_simulation_free in either case. */
int dm_simulate(const dm_model_info *mi, const dm_simulate_inputs *in, dm_fit_watch *watch,
                dm_simulation *out);
void dm_simulation_free(dm_simulation *s);
/* What the command's provenance records of a simulation's results (the model, its hash, the
 * voxels and measurements), for the command's file and the C API's text alike. */
void dm_simulate_provenance(dm_provenance *prov, const dm_model_info *mi, const dm_simulation *s);

/* `dimoc simulate`: loads the model, reads the maps, the mask and the protocol into arrays,
 * runs the engine and writes the image, the mask and OUT-without-.nii.gz.provenance.json
 * (prov), all of them or none (simulate_files.c).  0, or -1 with dm_last_error(). */
int dm_simulate_run(const dm_simulate_settings *s, dm_provenance *prov);

#endif
