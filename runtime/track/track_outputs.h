/* The files of dimoc track, with FSL probtrackx2's names (in --out):
 *   waytotal                       streamlines kept (not rejected by --avoid / --waypoints)
 *   fdt_paths.nii.gz               (--opd) kept streamlines through each seed-space voxel,
 *                                  each streamline counted once per voxel
 *   seeds_to_<target>.nii.gz       (--os2t) per seed voxel: its kept streamlines reaching
 *                                  the target (once per streamline)
 *   fdt_matrix1.dot                (--omatrix1) seed x seed: row seed's streamlines visiting
 *                                  the column seed's voxel (its own voxel not counted)
 *   fdt_matrix2.dot                (--omatrix2) seed x --target2 voxel
 *   fdt_matrix3.dot                (--omatrix3) --target3 x --target3: streamlines visiting
 *                                  both (every pair of the nodes one streamline visits);
 *                                  symmetric, both (i, j) and (j, i) written
 *   coords_for_fdt_matrix{1,2}     one row per matrix row: "i j k 0 r" (seed-space voxel,
 *                                  seed file 0, 0-based row r); coords_for_fdt_matrix3 the
 *                                  same for --target3 voxels in the target3 image
 *   tract_space_coords_for_fdt_matrix2   "i j k" of each column's --target2 voxel
 *   lookup_tractspace_fdt_matrix2.nii.gz  --target2 grid: 1-based column index, 0 elsewhere
 * .dot files: "row col count", 1-based, sorted (see dm_sparse_write_dot). */
#ifndef DIMOC_TRACK_OUTPUTS_H
#define DIMOC_TRACK_OUTPUTS_H

#include "tractogram/tck.h"
#include "track/track_run.h"
#include "util/json.h"

int dm_track_write_outputs(const char *outdir, const dm_track_seeds *s, const dm_track_masks *m,
                           const dm_track_options *o, const dm_track_result *r);
/* Everything a run writes, all or nothing (util/outdir.h): outdir's files and its
 * provenance.json (prov, with the streamline counts added) in a temporary folder that replaces
 * outdir at the end, and the streamlines' file (tck NULL: none; its ending --format's when one
 * was chosen, tractogram/tractogram.h) renamed into place with it. */
int dm_track_save(const char *outdir, const char *tck, const dm_track_seeds *s,
                  const dm_track_masks *m, const dm_track_options *o, const dm_track_result *r,
                  dm_provenance *prov);
/* The saved streamlines as a tractogram in the format of path's ending (.tck, .trx or .trk;
 * grid: the seed space's, what TRX and .trk carry). */
int dm_track_write_tck(const char *path, const dm_track_options *o, const dm_track_result *r,
                       const dm_tract_grid *grid);

#endif
