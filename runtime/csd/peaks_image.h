/* The peaks of an FOD image (SH coefficients per voxel, sphere/sh.h's basis, world frame):
 * every voxel searched in parallel by sphere/peaks.h's finder, the peaks written in MRtrix's
 * sh2peaks layout and as FSL-style dyads and amplitudes. */
#ifndef DIMOC_CSD_PEAKS_IMAGE_H
#define DIMOC_CSD_PEAKS_IMAGE_H

#include "io/volume.h"
#include "util/json.h"

#include <stddef.h>

#define DM_PEAKS_MAX_NUM 16 /* the most peaks per voxel that may be asked for */

/* An FOD image and its mask, read and checked. */
typedef struct dm_fod_image {
    dm_volume fod;        /* nt = dm_sh_ncoef(lmax) volumes */
    dm_volume mask;       /* data NULL: every voxel */
    const char *fod_path; /* for messages */
    const char *mask_path;
    int lmax;
} dm_fod_image;

/* Reads the FOD (its number of volumes must be a count of even-degree SH coefficients: 1, 6,
 * 15, 28, 45, 66, 91, ...) and the mask (NULL: none; 3D, in the FOD's space).  0, or -1 with
 * dm_last_error() naming the file at fault; dm_fod_image_free() in either case. */
int dm_fod_image_read(dm_fod_image *im, const char *fod, const char *mask);
void dm_fod_image_free(dm_fod_image *im);

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

/* Finds the peaks of every voxel of the mask.  0, or -1 with dm_last_error() (an empty mask,
 * no memory, settings out of range, a stop request); dm_peaks_maps_free() in either case. */
int dm_peaks_find(const dm_fod_image *im, const dm_peaks_settings *s, dm_peaks_maps *out);

/* Writes DIR, all or nothing (util/outdir.h), with the FOD's geometry, as float32:
 *   peaks.nii.gz          3 num volumes, as MRtrix's sh2peaks writes them: x, y, z of each
 *                         peak in world space, scaled by its amplitude; NaN where none;
 *   dyadsK.nii.gz         peak K (1..num) as a unit vector in FSL's bvecs frame (the frame of
 *                         bedpostx's dyads: io/space.h, dm_volume_bvec_rotation); 0 where none;
 *   peak_ampK.nii.gz      its amplitude; 0 where none;
 *   provenance.json       prov, with the counts added. */
int dm_peaks_write(const dm_peaks_maps *m, const dm_volume *like, const char *dir,
                   dm_provenance *prov);
void dm_peaks_maps_free(dm_peaks_maps *m);

#endif
