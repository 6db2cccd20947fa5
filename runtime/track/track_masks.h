/* Constraint and classification masks of tractography, all looked up by seed-space voxel:
 * stop and exclusion (avoid) flags, waypoint bits, target masks (--os2t), and the columns of
 * the connectivity matrices (seed voxels for matrix 1, --target2 and --target3 voxels).
 * Stop, exclusion, waypoints and targets may also be GIFTI surfaces (crossed by a step), all
 * binned on one grid with a bit per surface (templates/track/track_kernel.h, DM_TRACK_SURF_*). */
#ifndef DIMOC_TRACK_MASKS_H
#define DIMOC_TRACK_MASKS_H

#include "track/track_seeds.h"
#include "track/track_surface.h"

#define DM_TRACK_MAX_WAYPOINTS 32

typedef struct dm_track_masks {
    size_t nvox;                    /* seed-space voxels */
    unsigned char *flags;           /* DM_TRACK_FLAG_* per voxel, NULL without stop/avoid */
    dm_track_surface_grid surfaces; /* every GIFTI surface (ntri 0 without) */
    int nsurf_bits;                 /* surface bits used (DM_TRACK_SURF_FIRST and up) */
    unsigned int surf_way[DM_TRACK_MAX_SURFACES]; /* waypoint bit of a surface bit, or 0 */
    int surf_target[DM_TRACK_MAX_SURFACES];       /* target id of a surface bit, or -1 */
    unsigned int *waybits;                        /* NULL without waypoint masks (images) */
    int nway;
    unsigned int waymask; /* (1 << nway) - 1 */
    int waycond_and;
    /* --targetmasks: target ids of each voxel, compressed rows (off[v] .. off[v+1]) */
    int ntargets;
    char **target_names; /* file names without folder and NIfTI ending */
    int *target_off, *target_ids;
    /* matrix columns per seed-space voxel, -1 where none */
    int *seed_col; /* first seed in that voxel (matrix 1) */
    int *t2_col, *t3_node;
    long n2, n3;          /* columns of matrix 2, nodes of matrix 3 */
    int *t2_ijk, *t3_ijk; /* voxel coordinates of each column/node in its own image */
    dm_volume t2_ref;     /* --target2 image (lookup_tractspace output grid) */
} dm_track_masks;

typedef struct dm_track_mask_paths {
    const char *stop, *avoid, *waypoints, *waycond, *targetmasks, *target2, *target3;
    int matrix1;
} dm_track_mask_paths;

/* Loads what is given; masks other than target2/target3 must be on the seed grid.  stop,
 * avoid, each waypoint and each target may be a GIFTI surface (.gii) instead: vertices in
 * world mm of the seed space's reference, as coordinate seeds are.
 * waypoints: comma-separated images or surfaces, or text files listing them (one a line). */
int dm_track_masks_load(const dm_track_mask_paths *paths, const dm_track_seeds *seeds,
                        dm_track_masks *m);
/* --network: the seed masks (a list of 2 to 32) become the waypoints, bit g for mask g, with
 * the OR condition (each streamline must also reach a mask other than its own: the kernel's
 * `own`).  Not with --waypoints. */
int dm_track_masks_network(const dm_track_seeds *s, dm_track_masks *m);
void dm_track_masks_free(dm_track_masks *m);

#endif
