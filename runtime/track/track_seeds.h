/* Seed space and seed points of tractography.
 *
 * The seed space is the grid of the seed image (or of --seedref, or of the diffusion data for
 * a coordinate list without --seedref).  Every mask (stop, avoid, waypoints, targets) and the
 * outputs live on it.  Without --xfm it must be the diffusion grid.  With --xfm, the matrix is
 * FLIRT's seed -> diffusion matrix: it maps FSL "scaled voxel" coordinates (voxel * voxel size,
 * x reversed in positive-determinant images; see dm_volume_vox2fsl) of the seed reference to
 * those of nodif_brain_mask. */
#ifndef DIMOC_TRACK_SEEDS_H
#define DIMOC_TRACK_SEEDS_H

#include "track/track_field.h"
#include "io/space.h"
#include "io/volume.h"

typedef struct dm_track_seeds {
    long n;
    float *pos;  /* tracking mm (diffusion scaled-voxel space), 3 per seed */
    int *ijk;    /* seed-space voxel coordinates (nearest), 3 per seed */
    int *svox;   /* seed-space voxel index per seed, -1 outside the seed grid */
    int ngroups; /* seed masks of a mask list (0: one seed source) */
    int *group;  /* the mask of each seed (0 for all with one seed source) */
    char **group_paths;
    dm_volume ref; /* the seed space: grid and geometry of the outputs */
    dm_affine seed2track, track2seed;
} dm_track_seeds;

/* seed: a NIfTI mask (every nonzero voxel seeds at its centre), a text file listing NIfTI masks
 * (one a line, all on one grid: their seeds in list order, each with its mask's group), a
 * GIFTI surface (.gii: every vertex seeds; its coordinates are world mm) or a text file of
 * x y z world mm coordinates, one seed a row.  World mm are those of --seedref, else of the
 * diffusion data.
 * seedref, xfm: NULL when not given. */
int dm_track_seeds_load(const char *seed, const char *seedref, const char *xfm,
                        const char *diffusion_mask_path, const dm_track_field *f,
                        dm_track_seeds *s);
void dm_track_seeds_free(dm_track_seeds *s);
/* 1 when path names a NIfTI image by its ending. */
int dm_track_is_image_path(const char *path);

#endif
