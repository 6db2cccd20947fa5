/* Estimating response functions from the data, as MRtrix's dwi2response does:
 *   fa         the single-fibre voxels are the most anisotropic (tensor FA), the fibre the
 *              tensor's principal direction;
 *   tournier   (Tournier 2013) starting from fa, repeatedly: CSD with the current response,
 *              peaks, the voxels whose first peak most dominates the second, a new response
 *              from them, until the selection stops changing;
 *   dhollander (Dhollander 2016, 2019) WM, GM and CSF without a tissue segmentation: an
 *              eroded brain mask, WM candidates by FA, GM and CSF among the rest by how fast
 *              their signal decays with b, single-fibre WM voxels by tournier's rule; b = 0
 *              and one shell are enough (a deconvolution then uses WM and CSF only). */
#ifndef DIMOC_CSD_RESPONSE_ESTIMATE_H
#define DIMOC_CSD_RESPONSE_ESTIMATE_H

#include "csd/csd_plan.h"
#include "csd/dwi.h"
#include "csd/response.h"

enum { DM_TISSUE_WM, DM_TISSUE_GM, DM_TISSUE_CSF, DM_NTISSUES };
extern const char *const dm_tissue_names[DM_NTISSUES]; /* "wm", "gm", "csf" */

typedef struct dm_response_set {
    int ntissue; /* 1 (fa, tournier) or 3 (dhollander) */
    dm_response r[DM_NTISSUES];
    unsigned char *voxels[DM_NTISSUES]; /* image-sized masks of the voxels used */
    size_t nvoxels[DM_NTISSUES];
    int iterations;                           /* tournier's */
    double seconds_tensors, seconds_passes;   /* the tensor fits; tournier's passes (CSD, peaks) */
    double seconds_deconvolve, seconds_peaks; /* of the passes: the CSD (the solver's call), the
                                               * peaks and scores */
    double seconds_gather, seconds_select;    /* of the passes: the candidates' signals and each
                                               * pass's plan; the ranking and the new response */
    double seconds_first_deconvolve, seconds_first_peaks; /* the first pass's (every candidate) */
} dm_response_set;

/* Who deconvolves the candidates of tournier's passes (single-shell CSD in double, 50
 * iterations at most): solve(ctx, ...) as dm_csd_cpu_run's arguments say, 0 or -1 with an
 * error.  dimoc csd on a GPU hands its GPU's. */
typedef struct dm_csd_solver {
    int (*solve)(void *ctx, const dm_csd_plan *p, const double *Y, size_t nvox, double *X,
                 unsigned char *status);
    void *ctx;
} dm_csd_solver;

/* algorithm: "fa", "tournier" or "dhollander"; lmax of the WM response; solver NULL: the CPU's
 * (threads of them).  0, or -1 with an error (too few voxels to choose from: the mask holds no
 * single-fibre WM). */
int dm_response_estimate(const dm_dwi *d, const char *algorithm, int lmax, int threads,
                         const dm_csd_solver *solver, dm_response_set *out);
void dm_response_set_free(dm_response_set *s);

#endif
