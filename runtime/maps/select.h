/* Model selection by information criterion: per voxel, which of several maps (the BIC or AIC
 * of fits of several models) is the lowest, as a label map and counts. */
#ifndef DIMOC_SELECT_H
#define DIMOC_SELECT_H

#include "util/json.h"

#define DM_SELECT_MAX_MAPS 15

typedef struct dm_select_settings {
    const char *const *maps; /* nmaps paths, 2 to DM_SELECT_MAX_MAPS, on one grid */
    int nmaps;
    const char *names; /* their names (comma list, one per map); NULL: each map's folder */
    const char *mask;  /* compare where non-zero; NULL: where every map is finite and non-zero */
    const char *out;   /* label map (uint8): i where map i is the lowest (1-based), 0 elsewhere;
                        * its provenance beside it: OUT-without-.nii.gz.provenance.json */
    dm_provenance *prov;
} dm_select_settings;

typedef struct dm_select_result {
    char names[DM_SELECT_MAX_MAPS][64];
    long count[DM_SELECT_MAX_MAPS]; /* voxels where map i is the lowest (ties: the earlier) */
    long total;                     /* voxels compared */
} dm_select_result;

/* Reads the maps, compares them and writes the label map.  0, or -1 with dm_last_error()
 * (a map that cannot be read, wrong names, no voxel with a value in every map). */
int dm_select_lowest(const dm_select_settings *s, dm_select_result *r);

#endif
