/* The orientation samples of a bedpostx-style folder, ready for tracking. */
#ifndef DIMOC_TRACK_FIELD_H
#define DIMOC_TRACK_FIELD_H

#include "io/volume.h"

typedef struct dm_track_field {
    int nx, ny, nz, nsamples, nfibres;
    double vox[3];        /* voxel sizes, mm */
    float *dirs;          /* unit vectors in voxel axes: 3 floats at ((v*nsamples+s)*nfibres+k) */
    float *fracs;         /* volume fractions at ((v*nsamples+s)*nfibres+k) */
    unsigned char *brain; /* nodif_brain_mask != 0 */
    dm_volume mask;       /* nodif_brain_mask itself: the geometry of diffusion space */
} dm_track_field;

/* Reads DIR/merged_th<k>samples, merged_ph<k>samples, merged_f<k>samples (k = 1, 2, ...,
 * .nii.gz or .nii, 4D with one volume per sample) and DIR/nodif_brain_mask.  Angles give
 * (sin th cos ph, sin th sin ph, cos th).  fsl_frame: the angles are in FSL's bvecs frame, whose
 * x axis is reversed against the voxel axis in images with a positive-determinant voxel ->
 * world matrix; those x components are negated to get voxel axes.  Returns 0 or -1. */
int dm_track_field_load(const char *dir, int fsl_frame, dm_track_field *f);
void dm_track_field_free(dm_track_field *f);

#endif
