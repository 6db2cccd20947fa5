/* Tractograms whatever their format: MRtrix .tck (tractogram/tck.h), TRX (tractogram/trx.h, a zip or a folder)
 * and TrackVis .trk (tractogram/trk.h), read into one dm_tck and written through one writer, the format
 * chosen by the file's ending.  Per-streamline values given as "dps:NAME" come from the
 * tractogram itself (a TRX's dps/NAME, a .trk's property NAME); any other value names a text
 * file of one number per streamline (tractogram/tck.h's weights files). */
#ifndef DIMOC_IO_TRACTOGRAM_H
#define DIMOC_IO_TRACTOGRAM_H

#include "tractogram/tck.h"
#include "io/volume.h"

/* Reads path by its ending (.tck, .trx, .trk; another ending: by its first bytes, a folder as
 * TRX) on `threads` threads (0: OpenMP's default).  0, or -1 with one dm_last_error() line
 * naming the file and what is wrong; t is then empty. */
int dm_tractogram_read(const char *path, dm_tck *t, int threads);

/* The grid of an image (its size and voxel -> world matrix), what TRX and .trk files carry. */
void dm_tract_grid_of(const dm_volume *v, dm_tract_grid *g);

typedef struct dm_tractogram_writer dm_tractogram_writer;

/* Begins path in the format of its ending (.tck, .trx or .trk), written whole at close
 * (temporary names, renamed into place).  info: the .tck header's "key: value" lines (step_size,
 * ...; in a TRX header.json's TCK_HEADER, in a .trk's reserved bytes as far as they fit); grid:
 * the reference image, required for TRX and .trk (NULL for a .tck).  NULL with
 * dm_last_error(). */
dm_tractogram_writer *dm_tractogram_open(const char *path, const char *info,
                                         const dm_tract_grid *grid);
/* Values per streamline, `count` of them, the i-th for the i-th streamline of the file: TRX's
 * dps/NAME.float32, a .trk's property NAME (.trk: before the first streamline is added); a .tck
 * has no place for them (nothing is written: the caller writes a weights file).  0 or -1. */
int dm_tractogram_set_dps(dm_tractogram_writer *w, const char *name, const float *values,
                          long count);
/* As dm_tck_add and dm_tck_add_many: world mm points; add_many on `threads` threads.  0, or -1
 * when the write failed (close then fails too). */
void dm_tractogram_add(dm_tractogram_writer *w, const float *xyz, int n);
int dm_tractogram_add_many(dm_tractogram_writer *w, const float *xyz, const size_t *start,
                           const int *npts, long count, int threads);
/* Ends the file with its counts (count: the streamlines written; total_count: those generated
 * to get them, as tckgen's header has them; a TRX keeps both in header.json's TCK_HEADER, a .trk
 * n_count and both in its reserved bytes) and renames it into place.  0 or -1. */
int dm_tractogram_close(dm_tractogram_writer *w, unsigned long long total_count);
void dm_tractogram_abort(dm_tractogram_writer *w);
long dm_tractogram_written(const dm_tractogram_writer *w);

/* The output name of a tractogram the user named: path itself when --format chose no
 * tractogram format (its own ending then decides), else path with that format's ending
 * (io/formats.h).  malloc'd; NULL when out of memory. */
char *dm_tractogram_output_name(const char *path);

/* Per-streamline weights (>= 0, finite, single precision) from `spec`: "dps:NAME" (one column
 * of t's values) or a weights file (dm_tck_weights_read), t->count of them.  tck_path names the
 * tractogram in messages.  0 with *weights malloc'd, or -1 with one line naming the file. */
int dm_tractogram_weights(const char *spec, const dm_tck *t, const char *tck_path, float **weights);
/* The values of `spec` however many (dm_tck_values_read for a file; for "dps:NAME" its t->count
 * values), checked as weights are.  0 or -1. */
int dm_tractogram_values(const char *spec, const dm_tck *t, const char *tck_path, float **values,
                         long *n);

#endif
