/* Reading a part's manifest, part.json (written by util/part.c's dm_part_write). */
#ifndef DIMOC_PART_MANIFEST_H
#define DIMOC_PART_MANIFEST_H

#include <stddef.h>

typedef struct dm_part_file {
    char *name;
    int how; /* DM_MERGE_* */
} dm_part_file;

typedef struct dm_part_manifest {
    char *dir; /* the part's folder */
    int k, n;
    char *command;
    size_t nvox, voxel_first, voxel_end;
    dm_part_file *files;
    int nfiles;
} dm_part_manifest;

/* Reads DIR/part.json; 0, or -1 with dm_last_error() naming the file and what is wrong (a
 * folder without one is a part that did not finish). */
int dm_part_manifest_read(const char *dir, dm_part_manifest *m);
void dm_part_manifest_free(dm_part_manifest *m);

#endif
