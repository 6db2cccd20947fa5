/* Directions as the angles of the shipped models: th, ph of an axis and, with a second
 * direction, the Bingham models' fanning angle psi; maps of them start a fit in a cascade. */
#ifndef DIMOC_ANGLES_H
#define DIMOC_ANGLES_H

#include "util/json.h"

/* th (polar, 0..pi), ph (azimuth, 0..2 pi) of the axis v, and when w is given psi (0..pi):
 * the angle that makes the fanning axis n2 = v x n1, n1 = cos(psi) e_th + sin(psi) e_ph, the
 * part of w perpendicular to v.  All 0 where v (or that part of w, for psi) is zero or not
 * finite. */
void dm_axis_angles(const double v[3], const double *w, double *th, double *ph, double *psi);

/* Reads the direction map VECTORS (3 volumes x, y, z) and, when given, FANNING on its grid,
 * and writes DIR/th<suffix>.nii.gz, ph<suffix>.nii.gz and with FANNING psi<suffix>.nii.gz
 * (float32) and provenance<suffix>.json (prov), all together or none: they are added to DIR
 * (created when missing), replacing only files of the same names (util/outdir.h, merge
 * mode), so that runs with different suffixes share a folder.  0, or -1 with
 * dm_last_error(). */
int dm_angles_write(const char *vectors, const char *fanning, const char *dir, const char *suffix,
                    dm_provenance *prov);

#endif
