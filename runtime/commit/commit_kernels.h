/* COMMIT's response functions on the acquisition, tabulated on the lookup-table directions
 * (commit_dirs.h): for each direction d and measurement s (b-value b, unit gradient g, in the
 * same frame as the streamlines: world)
 *   IC   stick                 exp(-b d_par (g.d)^2)
 *        or cylinders (COMMIT's CylinderZeppelinBall), one table per radius R:
 *                              exp(-b d_par (g.d)^2 - 2 gamma^2 G^2 (1 - (g.d)^2) S(d_par, R))
 *        with S the Van Gelderen sum (templates/maths/mathlib.h, dm_cylinder_gpd_sum) at the
 *        measurement's pulse duration delta and separation Delta, gradient strength G;
 *   EC   zeppelin, per d_perp   exp(-b (d_perp + (d_par - d_perp) (g.d)^2))
 *   ISO  ball, per d_iso       exp(-b d_iso)
 * (b = 0 measurements: 1), or for COMMIT's volume-fractions (ScalarMap) model an IC response of
 * 1 on every sample of a scalar map (and, with an ISO mask, its lesion model's ISO response of
 * -1); computed exactly at each direction (COMMIT resamples
 * AMICO's rotated responses through spherical harmonics of degree 12).  As COMMIT with
 * doNormalizeKernels, each compartment's table is divided by the norm of its first row, a
 * preconditioning undone when the coefficients are reported.
 * The tables are one array of rows (what both devices' products read, templates/commit/
 * commit_ops.h): IC response c at direction o is row c ndirs + o, EC response z row
 * (nic + z) ndirs + o, ball i row (nic + nec) ndirs + i; each row nsp = ns rounded up to a
 * multiple of 4 floats, the pad 0 (the GPU reads rows as float4). */
#ifndef DIMOC_COMMIT_KERNELS_H
#define DIMOC_COMMIT_KERNELS_H

#include "commit/commit_dirs.h"

#define DM_COMMIT_MAX_ISO 8
/* Zeppelins per peak at most: COMMIT 2.4.2's operator takes up to 20 EC responses. */
#define DM_COMMIT_MAX_PERP 20
#define DM_COMMIT_MAX_RADII 64
/* The gyromagnetic ratio (rad/(s T)) of AMICO's cylinder and 7-column schemes (the NODDI
 * toolbox's value; amico/synthesis.py _GAMMA), kept so that dimoc's cylinders are COMMIT's. */
#define DM_COMMIT_GAMMA 2.675987e8

typedef struct dm_commit_model {
    double d_par; /* mm^2/s */
    int nperp;    /* zeppelins per peak (COMMIT's d_perps), one EC column each */
    double d_perp[DM_COMMIT_MAX_PERP];
    int niso;
    double d_iso[DM_COMMIT_MAX_ISO];
    int ec_on;  /* zeppelins (the IC compartment is always on) */
    int scalar; /* volume-fractions (COMMIT's ScalarMap): the IC response is 1 on every sample */
    int nradii; /* cylinder-zeppelin-ball: the IC cylinders' radii (m); 0: the stick */
    double radius[DM_COMMIT_MAX_RADII];
} dm_commit_model;

/* Per measurement, the pulsed gradient of a cylinder model: strength (T/m), separation and
 * duration (s). */
typedef struct dm_commit_pulses {
    const double *G, *Delta, *delta;
} dm_commit_pulses;

typedef struct dm_commit_kernels {
    int ns, ndirs, niso;
    int nic;     /* IC tables: 1, or one per cylinder radius */
    int nec;     /* EC tables: one per d_perp (0 without zeppelins) */
    int nsp;     /* floats a row */
    long nrows;  /* (nic + nec) ndirs + niso */
    float *rows; /* nrows x nsp */
    double ic_norm[DM_COMMIT_MAX_RADII], ec_norm[DM_COMMIT_MAX_PERP], iso_norm[DM_COMMIT_MAX_ISO];
} dm_commit_kernels;

/* ns measurements: b-values (s/mm^2) and unit world gradient directions (3 each; ignored
 * where b = 0); pulses: read by a cylinder model only (NULL otherwise).  0, or -1 (out of
 * memory) with the error set. */
int dm_commit_kernels_make(const dm_commit_model *m, const dm_commit_dirs *dirs, int ns,
                           const double *bval, const double *grad, const dm_commit_pulses *pulses,
                           dm_commit_kernels *k);
void dm_commit_kernels_free(dm_commit_kernels *k);

#endif
