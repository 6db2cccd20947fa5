/* The matrices of a CSD problem, the same for every voxel of an image: which measurements
 * enter, the forward model of each tissue, the constraints, and what the per-voxel solver
 * (templates/csd/csd_solve.h) takes: G = H^-1 A', C and P = C H^-1. */
#ifndef DIMOC_CSD_PLAN_H
#define DIMOC_CSD_PLAN_H

#include "csd/dwi.h"
#include "csd/response.h"

#define DM_CSD_MAX_TISSUES 3
#define DM_CSD_CONSTRAINT_DIRS 300 /* as MRtrix's csd and msmt_csd */

typedef struct dm_csd_plan {
    int lmax; /* of the first tissue's FOD */
    int ntissue;
    int tissue_lmax[DM_CSD_MAX_TISSUES]; /* 0: isotropic (one value) */
    int tissue_off[DM_CSD_MAX_TISSUES];  /* first unknown of each tissue */
    int n, m, k;                         /* unknowns, measurements used, constraints */
    int *vol;                            /* m: the data volume of each measurement used */
    int soft;     /* 1: single-shell CSD by Tournier's penalty iterations (as MRtrix's csd);
                   * 0: hard constraints (as msmt_csd) */
    double ridge; /* added to the diagonal of A'A */
    double *A;    /* m x n forward matrix (kept for residuals, tests) */
    double *G, *C, *P, *Qd, *At, *Hp, *Ct;       /* templates/csd/csd_solve.h's: P, Qd hard; At, Hp,
                                            * Ct soft */
    float *Gf, *Cf, *Pf, *Qdf, *Atf, *Hpf, *Ctf; /* the same in float */
} dm_csd_plan;

/* Builds the plan for `ntissue` responses (each already matched to the data's shells by
 * dm_response_match into map[t]) and an FOD of degree lmax for the first; responses whose
 * coefficients above l = 0 are all zero are isotropic tissues.  One tissue of one shell is
 * single-shell CSD as MRtrix's csd computes it (Tournier 2007): its ridge (2e-4 of A'A's first
 * diagonal entry) keeps super-resolved FODs (more coefficients than directions) determined,
 * the penalty weight of a negative direction is 50 r_0 / 300, and the iterations start from
 * a linear deconvolution of degree 4 at most.  Anything else has hard constraints and a
 * negligible ridge.  0, or -1 with dm_last_error(). */
int dm_csd_plan_build(const dm_dwi *d, int ntissue, const dm_response *resp, int *const *map,
                      int lmax, dm_csd_plan *p);
void dm_csd_plan_free(dm_csd_plan *p);

#endif
