/* TRX tractograms (the tee-ar-ex format): a zip archive, its members stored or deflated (zip64
 * too), or a folder of the same files: header.json (VOXEL_TO_RASMM, DIMENSIONS, NB_STREAMLINES,
 * NB_VERTICES), positions.3.float16|float32|float64 (world RAS+ mm, as a .tck's points),
 * offsets.uint32|uint64 (each streamline's first vertex; NB_STREAMLINES + 1 entries, the last
 * NB_VERTICES, or NB_STREAMLINES as older writers made them), dps/ (values per streamline),
 * dpv/ (per vertex), groups/ (uint32 streamline indices) and dpg/ (per group); every array
 * little-endian.  Read here: the streamlines, dps/ and groups/ (dpv/ and dpg/ are skipped).
 * Written: a zip of stored members, positions float32, offsets uint64, the dps given. */
#ifndef DIMOC_IO_TRX_H
#define DIMOC_IO_TRX_H

#include "tractogram/tck.h"

/* Reads a TRX file or folder into t (its points, grid, dps/ as floats and groups/), checked:
 * header.json whole and its counts those of the arrays, offsets rising from 0 and within the
 * positions, every point finite, every group index below NB_STREAMLINES.  header.json's
 * "TCK_HEADER" object (written by dm_trx_close: the .tck header's key: value lines, count and
 * total_count among them) becomes t->properties.  0, or -1 with one dm_last_error() line naming
 * the file and what is wrong; t is then empty. */
int dm_trx_read(const char *path, dm_tck *t, int threads);

typedef struct dm_trx_writer dm_trx_writer;

/* Begins a TRX file at path (written whole at dm_trx_close, through a temporary folder and
 * archive beside it).  info: "key: value" lines kept in header.json's TCK_HEADER (may be NULL);
 * grid: the reference image (required).  NULL with dm_last_error(). */
dm_trx_writer *dm_trx_open(const char *path, const char *info, const dm_tract_grid *grid);
/* As dm_tck_add and dm_tck_add_many (world mm; add_many on `threads` threads). */
void dm_trx_add(dm_trx_writer *w, const float *xyz, int n);
int dm_trx_add_many(dm_trx_writer *w, const float *xyz, const size_t *start, const int *npts,
                    long count, int threads);
/* Adds dps/NAME.float32: `count` values, one per streamline written (count must be that number
 * when the file is closed).  0 or -1. */
int dm_trx_set_dps(dm_trx_writer *w, const char *name, const float *values, long count);
/* Writes header.json (NB_STREAMLINES, NB_VERTICES, the grid, TCK_HEADER with count and
 * total_count), offsets and dps, makes the archive and renames it into place.  0 or -1 (nothing
 * is then left). */
int dm_trx_close(dm_trx_writer *w, unsigned long long total_count);
void dm_trx_abort(dm_trx_writer *w);
long dm_trx_written(const dm_trx_writer *w);

#endif
