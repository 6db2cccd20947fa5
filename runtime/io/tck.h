/* MRtrix .tck streamline files: a text header ("mrtrix tracks", "key: value" lines, "END")
 * whose "file: . OFFSET" gives where the data start; the data are Float32LE x y z triplets in
 * world mm, each streamline ended by a NaN triplet and the file by an Inf triplet. */
#ifndef DIMOC_TRACK_TCK_H
#define DIMOC_TRACK_TCK_H

typedef struct dm_tck_writer dm_tck_writer;

/* Opens a temporary sibling of path; NULL with dm_last_error(). `info` lines ("key: value";
 * other lines, and the keys file, count, total_count and datatype, are left out)
 * are added to the header (may be NULL). */
dm_tck_writer *dm_tck_open(const char *path, const char *info);
/* Appends one streamline of n points (3 floats each, world mm). */
void dm_tck_add(dm_tck_writer *w, const float *xyz, int n);
/* Ends the file, writes the final counts into the header (count: streamlines in the file;
 * total_count: streamlines generated to get them, as MRtrix's tckgen writes), renames into
 * place.  0 or -1. */
int dm_tck_close(dm_tck_writer *w, unsigned long long total_count);
/* Drops the temporary file (after an error elsewhere). */
void dm_tck_abort(dm_tck_writer *w);

#endif
