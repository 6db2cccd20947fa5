/* The commands' file side of runtime/csd, whose engines work in memory: `dimoc csd` and
 * `dimoc response` (the DWI, the response and direction files read, the engine run, the FODs,
 * responses, voxels, status and provenance written, all or nothing) and `dimoc peaks` (the
 * FOD image read, the peak maps written).  The C API links none of this. */
#ifndef DIMOC_CSD_FILES_H
#define DIMOC_CSD_FILES_H

#include "csd/csd_run.h"
#include "csd/peaks_image.h"
#include "io/volume.h"

/* Runs the deconvolution; provenance records the inputs, options, counts and the seconds of
 * each stage (load, response, solve, write).  0, or -1 with dm_last_error(). */
int dm_csd_command(const dm_csd_options *o, dm_provenance *prov);

/* Estimates the responses and writes them with the voxel masks they came from. */
int dm_response_command(const dm_response_options *o, dm_provenance *prov);

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

/* Writes DIR, all or nothing (util/outdir.h), with the FOD's geometry, as float32:
 *   peaks.nii.gz          3 num volumes, as MRtrix's sh2peaks writes them: x, y, z of each
 *                         peak in world space, scaled by its amplitude; NaN where none;
 *   dyadsK.nii.gz         peak K (1..num) as a unit vector in FSL's bvecs frame (the frame of
 *                         bedpostx's dyads: io/space.h, dm_volume_bvec_rotation); 0 where none;
 *   peak_ampK.nii.gz      its amplitude; 0 where none;
 *   provenance.json       prov, with the counts added. */
int dm_peaks_write(const dm_peaks_maps *m, const dm_volume *like, const char *dir,
                   dm_provenance *prov);

#endif
