/* A diffusion-weighted image as CSD sees it: the 4D data, the mask's voxels, and the
 * measurements' b-values, shells and directions in world (scanner) space -- the frame of
 * MRtrix's spherical harmonics, so that dimoc's FODs and responses are MRtrix's. */
#ifndef DIMOC_CSD_DWI_H
#define DIMOC_CSD_DWI_H

#include "io/volume.h"

#include <stddef.h>

#define DM_MAX_SHELLS 16
/* b-values at or below this are b = 0 (MRtrix's BZeroThreshold). */
#define DM_BZERO_MAX 10.0

typedef struct dm_dwi {
    dm_volume data;        /* 4D, nt measurements */
    dm_volume mask;        /* data NULL: every voxel */
    const char *data_path; /* for messages */
    const char *mask_path; /* NULL without a mask */
    int nvol;
    double *bval; /* nvol */
    double *dir;  /* nvol x 3: unit gradient directions in world space (0 for b = 0) */
    int nshell;   /* shells, ascending b; shell 0 is b = 0 when the data has one */
    double shell_b[DM_MAX_SHELLS]; /* mean b of each shell */
    int shell_count[DM_MAX_SHELLS];
    int *shell_of; /* nvol: the shell of each measurement */
    int has_b0;
    size_t nvox; /* voxels of the mask (all voxels without one) */
    size_t *vox; /* their indices in the image, ascending */
} dm_dwi;

/* Reads data, FSL bvals and bvecs, and a mask (NULL: every voxel), turns the bvecs into world
 * directions (io/space.h), groups the b-values into shells and lists the mask's voxels.  0, or
 * -1 with dm_last_error() naming the file at fault; dm_dwi_free() in either case. */
int dm_dwi_read(dm_dwi *d, const char *data, const char *bvals, const char *bvecs,
                const char *mask);
/* The same with the table from the first source given (io/gradients.h): FSL bvals and bvecs,
 * else an MRtrix b-table `grad`, else a .mif's dw_scheme (NULL for those not given). */
int dm_dwi_read_grad(dm_dwi *d, const char *data, const char *bvals, const char *bvecs,
                     const char *grad, const char *mask);
void dm_dwi_free(dm_dwi *d);

/* (csd_run.c, no files) The rest of d from its image and table: d->data (the 4D volume: its
 * sizes and values), d->mask (data NULL: none; on the data's grid), d->data_path and
 * d->mask_path (for messages) and d->bval (data.nt b-values, which d owns) are set; g holds the
 * directions in FSL's bvecs frame and R turns them into world space (io/space.h's
 * dm_volume_bvec_rotation).  Checks the table, makes the world directions, groups the shells
 * and lists the mask's voxels.  0, or -1 with dm_last_error() naming bvals or bvecs. */
int dm_dwi_build(dm_dwi *d, const double *g, const double R[3][3], const char *bvals,
                 const char *bvecs);
/* (csd_run.c) Frees what d owns but its volumes (the table, directions, shells and voxels):
 * dm_dwi_free is this and the volumes' release, for a DWI read from files. */
void dm_dwi_release(dm_dwi *d);

/* (csd_run.c) Groups b-values into shells as MRtrix does: b <= DM_BZERO_MAX is b = 0; the
 * others, in ascending order, join the current shell while within `eps` (80 s/mm^2) of its
 * previous member.  Writes shell means and counts (DM_MAX_SHELLS at most) and each value's shell;
 * returns the number of shells, or -1 with an error when there are more than DM_MAX_SHELLS. */
int dm_shells_group(int n, const double *b, double eps, double *shell_b, int *count, int *shell_of);

/* Measurement t of mask voxel i. */
static inline double dm_dwi_signal(const dm_dwi *d, size_t i, int t)
{
    return d->data.data[d->vox[i] + (size_t)t * DM_NVOX(&d->data)];
}

#endif
