/* COMMIT's response functions on the acquisition, tabulated on the lookup-table directions
 * (commit_dirs.h): for each direction d and measurement s (b-value b, unit gradient g, in the
 * same frame as the streamlines: world)
 *   IC   stick                 exp(-b d_par (g.d)^2)
 *   EC   zeppelin              exp(-b (d_perp + (d_par - d_perp) (g.d)^2))
 *   ISO  ball, per d_iso       exp(-b d_iso)
 * (b = 0 measurements: 1), or for COMMIT's volume-fractions (ScalarMap) model an IC response of
 * 1 on every sample of a scalar map (and, with an ISO mask, its lesion model's ISO response of
 * -1); computed exactly at each direction (COMMIT resamples
 * AMICO's rotated responses through spherical harmonics of degree 12).  As COMMIT with
 * doNormalizeKernels, each compartment's table is divided by the norm of its first row, a
 * preconditioning undone when the coefficients are reported. */
#ifndef DIMOC_COMMIT_KERNELS_H
#define DIMOC_COMMIT_KERNELS_H

#include "commit/commit_dirs.h"

#define DM_COMMIT_MAX_ISO 8

typedef struct dm_commit_model {
    double d_par, d_perp; /* mm^2/s */
    int niso;
    double d_iso[DM_COMMIT_MAX_ISO];
    int ic_on, ec_on;
    int scalar; /* volume-fractions (COMMIT's ScalarMap): the IC response is 1 on every sample */
} dm_commit_model;

typedef struct dm_commit_kernels {
    int ns, ndirs, niso;
    float *ic, *ec; /* ndirs x ns (NULL when the compartment is off) */
    float *iso;     /* niso x ns */
    double ic_norm, ec_norm, iso_norm[DM_COMMIT_MAX_ISO];
} dm_commit_kernels;

/* ns measurements: b-values (s/mm^2) and unit world gradient directions (3 each; ignored
 * where b = 0).  0, or -1 (out of memory) with the error set. */
int dm_commit_kernels_make(const dm_commit_model *m, const dm_commit_dirs *dirs, int ns,
                           const double *bval, const double *grad, dm_commit_kernels *k);
void dm_commit_kernels_free(dm_commit_kernels *k);

#endif
