/* Binary masks on a 3D grid (uint8, 0 or 1, x fastest): the median, connected components, hole
 * filling, erosion, dilation and the peninsula cleaning of MRtrix's dwi2mask, all in integers,
 * so that the result does not depend on the number of threads. */
#ifndef DIMOC_MASK_MORPH_H
#define DIMOC_MASK_MORPH_H

#include <stddef.h>
#include <stdint.h>

typedef struct dm_grid3 {
    int nx, ny, nz;
} dm_grid3;

#define DM_GRID3_NVOX(g) ((size_t)(g).nx * (g).ny * (g).nz)

/* 3x3x3 median of a binary mask, its neighbourhood clipped at the image's edges: a voxel is set
 * when at least half of the voxels of its (clipped) neighbourhood are (2 * set >= n; for an odd
 * n that is a strict majority).  `in` and `out` are distinct.  0 or -1 (out of memory). */
int dm_mask_median3(dm_grid3 g, const uint8_t *in, uint8_t *out);

/* The largest 6-connected component of `in` into `out` (the same array is allowed); of equal
 * largest components, the one met first in voxel order.  An empty mask gives an empty one.
 * 0, or -1 with dm_last_error() when out of memory. */
int dm_mask_largest_component(dm_grid3 g, const uint8_t *in, uint8_t *out);

/* Fills the mask's holes in place: every voxel outside the largest 6-connected component of
 * the background is set.  0 or -1 (out of memory). */
int dm_mask_fill_holes(dm_grid3 g, uint8_t *mask);

/* `passes` erosions (a set voxel stays set when its 6 neighbours are set and it is not on the
 * image's border) or dilations (a voxel is set when it or one of its 6 neighbours inside the
 * image is).  `in` and `out` may be the same array.  0 or -1 (out of memory). */
int dm_mask_erode(dm_grid3 g, const uint8_t *in, uint8_t *out, int passes);
int dm_mask_dilate(dm_grid3 g, const uint8_t *in, uint8_t *out, int passes);

/* Removes peninsulas joined to the mask by bridges narrower than themselves, as MRtrix's mask
 * cleaning filter does, in place: for each scale s from `scale` down to 1, the parts that an
 * erosion of s passes cuts off the largest component are removed, grown by s + 1 dilations;
 * then the largest component is kept; repeated until the mask no longer changes.  `scale` >= 1.
 * 0 or -1 (out of memory). */
int dm_mask_clean(dm_grid3 g, uint8_t *mask, int scale);

#endif
