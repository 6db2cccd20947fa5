/* TrackVis .trk tractograms, version 2: a 1000-byte header ("TRACK", dim, voxel_size,
 * n_scalars, n_properties, vox_to_ras, voxel_order, n_count, version, hdr_size 1000) and per
 * streamline an int32 point count, the points (x y z and n_scalars values each, float32) and
 * n_properties float32 values.  The points are in "voxel mm": voxel coordinates times the voxel
 * sizes with the origin at the first voxel's corner, in the axis order and directions that
 * voxel_order names.  World (RAS+) mm are had as nibabel has them:
 *     world = vox_to_ras * M * (p / voxel_size - 0.5)
 * where M reorders and flips the voxel axes from voxel_order to the orientation of vox_to_ras
 * (nibabel's get_affine_trackvis_to_rasmm); the writer names vox_to_ras's own orientation, so
 * that M is the identity.  The header's byte order is found from hdr_size, as nibabel does. */
#ifndef DIMOC_IO_TRK_H
#define DIMOC_IO_TRK_H

#include "tractogram/tck.h"

/* Reads a .trk into t (points in world mm, the grid, the properties as dps: one per property
 * name, or "properties" when the names do not account for them).  Checked: the magic, hdr_size,
 * version 1 to 3, positive voxel sizes, a vox_to_ras whose axes can be told (a v1 file's, or one
 * not recorded, is the identity, as nibabel takes it), voxel_order, whole streamlines, n_count
 * (when not 0) the number of streamlines the file holds, every point finite.  0, or -1 with one
 * dm_last_error() line naming the file and what is wrong; t is then empty. */
int dm_trk_read(const char *path, dm_tck *t, int threads);

typedef struct dm_trk_writer dm_trk_writer;

/* Begins a .trk at a temporary sibling of path, on `grid` (required).  info: "key: value" lines
 * (step_size, ...) kept in the header's reserved bytes as far as they fit, for dimoc to read
 * back (other readers ignore them).  NULL with dm_last_error(). */
dm_trk_writer *dm_trk_open(const char *path, const char *info, const dm_tract_grid *grid);
/* Per-streamline values written as properties: before the first streamline is added, `count`
 * values, the i-th for the i-th streamline added.  0 or -1. */
int dm_trk_set_dps(dm_trk_writer *w, const char *name, const float *values, long count);
/* As dm_tck_add / dm_tck_add_many (world mm in; converted to voxel mm). */
void dm_trk_add(dm_trk_writer *w, const float *xyz, int n);
int dm_trk_add_many(dm_trk_writer *w, const float *xyz, const size_t *start, const int *npts,
                    long count, int threads);
/* Writes n_count, renames into place; 0 or -1. */
int dm_trk_close(dm_trk_writer *w, unsigned long long total_count);
void dm_trk_abort(dm_trk_writer *w);
long dm_trk_written(const dm_trk_writer *w);

/* Writes out as parts[0]'s streamlines, then parts[1]'s, ..., their bytes as they are (a .trk
 * read and written again would round its points twice): every part's header must be part 1's
 * (n_count and the reserved lines aside); out's n_count their sum, its reserved lines `info`
 * with count and total_count.  The parts are checked by the caller (dm_trk_read).  0 or -1. */
int dm_trk_concat(char *const parts[], int n, const char *out, const char *info,
                  unsigned long long total_count);

/* The 4x4 (row-major) mapping a .trk's voxel mm to world mm for a header's fields, as above;
 * 0, or -1 when vox_to_ras's axes cannot be told or voxel_order is not three of LRAPIS. */
int dm_trk_voxmm_to_world(const double vox_to_ras[4][4], const float voxel_size[3],
                          const char *voxel_order, const int dims[3], double out[4][4]);

#endif
