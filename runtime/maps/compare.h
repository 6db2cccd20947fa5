/* Fitted maps against known truth, region by region: the mean of each scalar map and its mean
 * absolute error, and the median angle between true and fitted directions. */
#ifndef DIMOC_COMPARE_H
#define DIMOC_COMPARE_H

#include <stdio.h>

typedef struct dm_compare_settings {
    const char *truth_dir, *fit_dir; /* folders of NAME.nii.gz maps; fit_dir holds status.nii.gz */
    const char *params;       /* scalar maps to compare (comma list, at most 32; NULL: none) */
    const char *axes;         /* direction maps of 3 volumes (comma list, at most 2); two are
                               * matched to the truth in the better order per voxel */
    const char *regions;      /* integer label map: one row per label 1.. (NULL: one region) */
    const char *region_names; /* names of labels 1, 2, .. (comma list; others are "all") */
    const char *status;       /* the status map (NULL: fit_dir/status.nii.gz), e.g. a CSD's for
                               * the peaks of its FODs */
} dm_compare_settings;

/* Prints the table(s) to `out` as it goes: only voxels whose fit status is 1 (fitted), 2 (not
 * converged) or 6 (at a bound) count.  0, or -1 with dm_last_error() (a map that cannot be read; the rows
 * before it are printed). */
int dm_compare_maps(const dm_compare_settings *s, FILE *out);

#endif
