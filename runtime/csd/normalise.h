/* Multi-tissue intensity normalisation of CSD outputs, after MRtrix's mtnormalise (Raffelt et
 * al., ISMRM 2017; Dhollander et al., ISMRM 2021): per-tissue balance factors and a smooth
 * multiplicative bias field, fitted in the log domain over a mask with gradual outlier
 * rejection, so that the tissues' summed l = 0 terms come to a reference value everywhere. */
#ifndef DIMOC_CSD_NORMALISE_H
#define DIMOC_CSD_NORMALISE_H

#include "io/volume.h"

#include <stddef.h>

#define DM_MTNORM_REFERENCE 0.28209479177 /* 1 / sqrt(4 pi): the l = 0 term of a unit integral */
#define DM_MTNORM_MAX_TISSUES 16

typedef struct dm_mtnorm_settings {
    int order;            /* total order of the log-field polynomial, 0..3 (default 3; 0: one
                         global scale) */
    double reference;     /* target of the summed l = 0 terms, > 0 (default DM_MTNORM_REFERENCE) */
    int max_iter;         /* outer iterations (balance, outliers, field), >= 1 (default 15, as
                         mtnormalise -niter) */
    int balance_iter;     /* most balance/outlier rounds within one outer iteration, >= 1 (default
                         7, mtnormalise's second -niter entry) */
    double outlier_range; /* a voxel is an outlier when its log residual lies more than
                                  this many interquartile ranges outside the quartiles (1.5) */
    double first_outlier_range; /* the same for the first pass, before anything is fitted
                                   (3.0) */
    double tolerance; /* stop early once an outer iteration changed no inlier and moved the
                         log field by less than this anywhere in the mask (default 1e-6);
                         0: always max_iter iterations, as mtnormalise does */
    int balanced;     /* 1 (default): the maps are scaled by their balance factor as well as the
                         field, so that their sum comes to the reference (mtnormalise
                         -balanced); 0: by the field only (mtnormalise's default) */
} dm_mtnorm_settings;

void dm_mtnorm_defaults(dm_mtnorm_settings *s);

/* Normalises `ntissue` tissue maps in place.
 *   grid     the voxel grid: only nx, ny, nz are used (data and geometry may be unset).  The
 *            field is a polynomial of the voxel indices; for any voxel -> world matrix this is
 *            the same space of functions as mtnormalise's polynomial of scanner coordinates
 *            (an affine map keeps the total order), so the fit does not need the matrix.
 *   mask     nvox bytes (non-zero: in the fit), NULL: every voxel.  Voxels whose summed l = 0
 *            terms are not positive and finite never enter the fit.
 *   maps[t]  tissue t's coefficients, nvox voxels x stride[t] values, voxel-major (voxel v's
 *            values at maps[t][v * stride[t] ...], v in NIfTI order, x fastest).  Only the
 *            first value of a voxel (the l = 0 term; negative values count as 0) enters the
 *            fit; every value of every voxel, inside the mask or not, is scaled.
 *   stride   values per voxel of each tissue, >= 1 (e.g. 45 for an lmax 8 FOD, 1 for GM).
 *   s        NULL: dm_mtnorm_defaults.
 *   field_out   NULL, or nvox values: the multiplicative correction applied to every voxel
 *               (1 / bias, extrapolated outside the mask), without the balance factors.
 *   balance_out NULL, or ntissue values: the balance factors (geometric mean 1).
 * On success the maps hold balance[t] * field * map (balanced) or field * map and the
 * function returns 0; else -1 with dm_last_error() and the maps untouched.  A tissue whose
 * l = 0 map is zero over the whole fit keeps a factor of 1. */
int dm_mtnormalise(const dm_volume *grid, const unsigned char *mask, int ntissue,
                   double *const *maps, const int *stride, const dm_mtnorm_settings *s,
                   double *field_out, double *balance_out);

#endif
