/* Sets of directions on the sphere: the dense sets that CSD constrains the FOD on and that peak
 * finding starts from. */
#ifndef DIMOC_SPHERE_DIRECTIONS_H
#define DIMOC_SPHERE_DIRECTIONS_H

/* n unit vectors spread evenly over the half sphere z >= 0 (a Fibonacci lattice: point i at
 * height z = 1 - (i + 1/2) / n, turned by the golden angle), into dirs[3n].  Antipodal
 * symmetry makes them cover the whole sphere for even functions; the largest angle from any
 * direction to the nearest of the set (or its antipode) is about 1.1 * sqrt(2 pi / n) radians
 * (about 10 degrees for n = 300). */
void dm_dirs_hemisphere(int n, double *dirs);

#endif
