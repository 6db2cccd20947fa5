/* How `dimoc merge` joins each kind of file that cluster/part.h names (merge.c calls them):
 * every function reads `name` from each part's folder, parts[0] to parts[n-1] in the order of
 * K, and writes the joined file to `out`; 0, or -1 with dm_last_error() naming the part's file
 * at fault. */
#ifndef DIMOC_MERGE_KINDS_H
#define DIMOC_MERGE_KINDS_H

#include "cluster/part_manifest.h"

#include <stddef.h>

/* NIfTI (merge_image.c): each voxel from the part whose voxel range holds it; the parts' values
 * summed voxel by voxel. */
int dm_merge_voxels(dm_part_manifest *const parts[], int n, const char *name, const char *out);
int dm_merge_sum(dm_part_manifest *const parts[], int n, const char *name, const char *out);

/* .tck (merge_tck.c): the streamlines part after part, the header's counts summed and its
 * command history given out_dir, the merge's --out. */
int dm_merge_tck(dm_part_manifest *const parts[], int n, const char *name, const char *out,
                 const char *out_dir);

/* Text and bytes (merge_text.c): identical in every part; lines, bytes part after part; whole
 * numbers summed one by one; sparse "row col count" matrices summed per entry; means rebuilt
 * from the parts' sums. */
int dm_merge_same(dm_part_manifest *const parts[], int n, const char *name, const char *out);
int dm_merge_lines(dm_part_manifest *const parts[], int n, const char *name, const char *out);
int dm_merge_concat(dm_part_manifest *const parts[], int n, const char *name, const char *out);
int dm_merge_counts(dm_part_manifest *const parts[], int n, const char *name, const char *out);
int dm_merge_dot(dm_part_manifest *const parts[], int n, const char *name, const char *out);
int dm_merge_mean(dm_part_manifest *const parts[], int n, const char *name, const char *out);

/* A part's file whole (NUL-terminated, malloc'd; NULL with the error set), and a file written
 * whole. */
char *dm_merge_read_part_file(const dm_part_manifest *m, const char *name, size_t *len);
int dm_merge_write_bytes(const char *path, const void *data, size_t len);

#endif
