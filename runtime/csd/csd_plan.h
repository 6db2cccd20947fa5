/* The matrices of a CSD problem, the same for every voxel of an image: which measurements
 * enter, the forward model of each tissue, the constraints, and what the per-voxel solver
 * (templates/csd/csd_solve.h) takes: G = H^-1 A', C and P = C H^-1. */
#ifndef DIMOC_CSD_PLAN_H
#define DIMOC_CSD_PLAN_H

#include "csd/dwi.h"
#include "csd/response.h"

#define DM_CSD_MAX_TISSUES 3
#define DM_CSD_CONSTRAINT_DIRS 300 /* the default set's size, as MRtrix's csd and msmt_csd */
/* The default constraint directions, under the data folder (util/paths.h): MRtrix's
 * electrostatic_repulsion_300, the set dwi2fod's csd and msmt_csd use without -directions. */
#define DM_CSD_DEFAULT_DIRECTIONS "data/directions/electrostatic_repulsion_300.txt"

/* The directions on which a CSD constrains its FODs: n unit vectors, dirs[3n] (malloc'd). */
typedef struct dm_csd_dirs {
    int n;
    double *dirs;
} dm_csd_dirs;

/* Reads a direction file as dwi2fod's -directions reads one: a text matrix of [ azimuth
 * elevation ] pairs in radians, one direction a row ('#' comments, blank lines; numbers
 * separated by spaces, tabs or commas), converted as MRtrix converts them (sphere/directions.h).
 * path NULL: the shipped default, DM_CSD_DEFAULT_DIRECTIONS.  0, or -1 with an error naming
 * the file (missing, not two columns, fewer than 6 directions: too few to pin even lmax 2). */
int dm_csd_dirs_read(const char *path, dm_csd_dirs *d);
/* The same from `rows` x `cols` values in memory (`what` names them in messages). */
int dm_csd_dirs_make(int rows, int cols, const double *az_el, const char *what, dm_csd_dirs *d);
void dm_csd_dirs_free(dm_csd_dirs *d);

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
 * dm_response_match into map[t]) and an FOD of degree lmax for the first, non-negative on the
 * directions `dirs` (NULL: the default set, read by dm_csd_dirs_read); responses whose
 * coefficients above l = 0 are all zero are isotropic tissues.  A response of lower degree than
 * lmax has its higher orders taken as zero (super-resolution, as dwi2fod pads them).  One
 * tissue of one shell is single-shell CSD as MRtrix's csd computes it (Tournier 2007): its ridge
 * (2e-4 of A'A's first diagonal entry) keeps super-resolved FODs (more coefficients than
 * directions) determined, the penalty weight of a negative direction is 50 r_0 / (the number of
 * constraint directions), and the iterations start from a linear deconvolution of degree 4 at
 * most.  Anything else has hard constraints and a negligible ridge.  0, or -1 with
 * dm_last_error(). */
int dm_csd_plan_build(const dm_dwi *d, int ntissue, const dm_response *resp, int *const *map,
                      int lmax, const dm_csd_dirs *dirs, dm_csd_plan *p);
void dm_csd_plan_free(dm_csd_plan *p);

#endif
