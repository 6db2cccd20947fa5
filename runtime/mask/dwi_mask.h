/* A whole-brain mask from the diffusion-weighted image itself, as MRtrix 3.0.3's dwi2mask makes
 * it: per shell (b = 0 included) the mean image, thresholded at Ridgway's optimal threshold;
 * the shells' masks joined; a 3x3x3 median; the largest connected component with its holes
 * filled; then the peninsulas cut off (mask_morph.h: dm_mask_clean) and voxels whose every
 * measurement is zero or not finite left out. */
#ifndef DIMOC_DWI_MASK_H
#define DIMOC_DWI_MASK_H

#include "csd/dwi.h"
#include "util/json.h"

#include <stddef.h>
#include <stdint.h>

/* dwi2mask's -clean_scale default. */
#define DM_MASK_CLEAN_SCALE 2

typedef struct dm_dwi_mask_report {
    int nshell;
    double shell_b[DM_MAX_SHELLS];      /* mean b of each shell */
    int shell_count[DM_MAX_SHELLS];     /* its measurements */
    float threshold[DM_MAX_SHELLS];     /* its mean image's threshold */
    size_t shell_voxels[DM_MAX_SHELLS]; /* voxels above it */
    size_t voxels;                      /* in the final mask */
    int cleaned;                        /* 0 when the grid has an axis of one voxel */
} dm_dwi_mask_report;

/* The mean over a shell's measurements of each voxel's positive values (a zero, negative or
 * NaN value counts as 0), as single precision: the values are taken as floats and summed in
 * double in measurement order, then divided by the shell's count.  mean: one per voxel. */
void dm_shell_mean(const dm_dwi *d, int shell, float *mean);

/* Ridgway et al. (2009)'s parameter-free threshold of an image as MRtrix's OptimalThreshold
 * finds it: the threshold t maximising the correlation between the image and its mask
 * (value > t) over the finite voxels, by golden-section search between min + 0.001 (max - min)
 * and max - 0.001 (max - min) from the midrange, to a relative tolerance of 0.01.  The sums are
 * made in fixed blocks, so that the result does not depend on the number of threads.  0, or -1
 * when out of memory or the image has no finite value. */
int dm_optimal_threshold(const float *image, size_t n, float *threshold);

/* The mask (one byte per voxel of the data's grid, 0 or 1).  clean_scale 0 skips the cleaning
 * (and, as dwi2mask, the check of all-zero voxels); the cleaning is skipped with a warning when
 * an axis of the grid is one voxel long.  0, or -1 with dm_last_error(). */
int dm_dwi_mask(const dm_dwi *d, int clean_scale, uint8_t *mask, dm_dwi_mask_report *r);

/* `dimoc mask`: reads the DWI (a 4D image with at least one b = 0 measurement; its gradient
 * table from FSL bvals and bvecs, else an MRtrix b-table `grad`, else a .mif's dw_scheme: NULL
 * for those not given), computes the mask and writes it to `out` as uint8 on the data's grid,
 * whole or not at all, in the format its ending names; with `prov` (NULL: none) also its
 * provenance record, OUT.provenance.json, in place together with it.  threads <= 0: all
 * cores.  0, or -1 with dm_last_error() naming the file at fault; nothing is written then. */
int dm_mask_run(const char *data, const char *bvals, const char *bvecs, const char *grad,
                const char *out, int clean_scale, int threads, dm_provenance *prov,
                dm_dwi_mask_report *r);

#endif
