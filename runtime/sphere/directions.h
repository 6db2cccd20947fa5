/* Sets of directions on the sphere: the dense sets that peak finding starts from, and the
 * conversion of [ azimuth elevation ] pairs (the constraint directions that CSD reads, MRtrix's
 * set by default: runtime/csd/csd_plan.h) into unit vectors. */
#ifndef DIMOC_SPHERE_DIRECTIONS_H
#define DIMOC_SPHERE_DIRECTIONS_H

/* n unit vectors spread evenly over the half sphere z >= 0 (a Fibonacci lattice: point i at
 * height z = 1 - (i + 1/2) / n, turned by the golden angle), into dirs[3n].  Antipodal
 * symmetry makes them cover the whole sphere for even functions; the largest angle from any
 * direction to the nearest of the set (or its antipode) is about 1.1 * sqrt(2 pi / n) radians
 * (about 10 degrees for n = 300). */
void dm_dirs_hemisphere(int n, double *dirs);

/* n directions given as [ azimuth elevation ] pairs in radians (az_el[2i], az_el[2i+1], as
 * MRtrix's direction files hold them) into unit vectors dirs[3n], as MRtrix converts them:
 * x = cos(az) sin(el), y = sin(az) sin(el), z = cos(el). */
void dm_dirs_from_az_el(int n, const double *az_el, double *dirs);

#endif
