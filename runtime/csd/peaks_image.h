/* The peaks of an FOD image in memory (SH coefficients per voxel, sphere/sh.h's basis, world
 * frame): every voxel searched in parallel by sphere/peaks.h's finder, the peaks laid out as
 * MRtrix's sh2peaks and as FSL-style dyads and amplitudes.  `dimoc peaks` reads and writes the
 * files in runtime/csd_files/. */
#ifndef DIMOC_CSD_PEAKS_IMAGE_H
#define DIMOC_CSD_PEAKS_IMAGE_H

#include "io/space.h"
#include "util/json.h"
#include "util/progress.h"

#include <stddef.h>

#define DM_PEAKS_MAX_NUM 16 /* the most peaks per voxel that may be asked for */

typedef struct dm_peaks_settings {
    int num;          /* peaks kept per voxel, 1..DM_PEAKS_MAX_NUM */
    double threshold; /* absolute: peaks of amplitude below it are dropped (peaks are > 0) */
    double relative;  /* peaks below relative x the voxel's largest are dropped (0: none) */
    int threads;      /* 0: all cores */
} dm_peaks_settings;

typedef struct dm_peaks_maps {
    size_t nvox;
    int num;
    double *dirs; /* nvox x 3 num, NIfTI order (volume 3k + c: component c of peak k), unit
                     * vectors in world space; NaN where there is no peak k */
    double *amps; /* nvox x num; 0 where there is no peak k */
    size_t nmask; /* voxels searched */
    size_t count[DM_PEAKS_MAX_NUM + 1]; /* voxels of the mask with 0, 1, .. num peaks */
    double seconds;                     /* wall time of the search */
} dm_peaks_maps;

/* Finds the peaks of every voxel of the mask: fod X x Y x Z x K, K a count of SH coefficients of
 * even degree up to lmax (1, 6, 15, 28, 45, 66, 91, ...), in any layout (io/space.h's view);
 * mask (data NULL: none) on its grid.  watch (NULL: none) sees the stage "peaks" and may
 * cancel.  0, or -1 with dm_last_error() (a count of coefficients that is none, an empty mask,
 * no memory, settings out of range, a stop); dm_peaks_maps_free() in either case. */
int dm_peaks_find(const dm_image_view *fod, const dm_image_view *mask, const dm_peaks_settings *s,
                  dm_watch *watch, dm_peaks_maps *out);
/* The peaks as MRtrix's sh2peaks lays them out: nvox x 3 num, x, y, z of each peak in world
 * space scaled by its amplitude, NaN where there is none. */
void dm_peaks_scaled(const dm_peaks_maps *m, double *out);
/* Peak k (0-based) as unit vectors in FSL's bvecs frame, nvox x 3 (the frame of bedpostx's
 * dyads: R is the image's bvecs -> world rotation, io/space.h), 0 where there is none. */
void dm_peaks_dyads(const dm_peaks_maps *m, const double R[3][3], int k, double *out);
/* What the command's provenance records of a search (the voxels, their counts of peaks, its
 * seconds). */
void dm_peaks_provenance(dm_provenance *prov, const dm_peaks_maps *m);
void dm_peaks_maps_free(dm_peaks_maps *m);

#endif
