/* Evenly spread directions (directions.h). */
#include "sphere/directions.h"

#include <math.h>

void dm_dirs_hemisphere(int n, double *dirs)
{
    const double golden = M_PI * (3.0 - sqrt(5.0));
    for (int i = 0; i < n; i++) {
        double z = 1.0 - (i + 0.5) / n;
        double r = sqrt(1.0 - z * z), phi = golden * i;
        dirs[3 * i] = r * cos(phi);
        dirs[3 * i + 1] = r * sin(phi);
        dirs[3 * i + 2] = z;
    }
}

void dm_dirs_from_az_el(int n, const double *az_el, double *dirs)
{
    for (int i = 0; i < n; i++) {
        double az = az_el[2 * i], el = az_el[2 * i + 1];
        dirs[3 * i] = cos(az) * sin(el);
        dirs[3 * i + 1] = sin(az) * sin(el);
        dirs[3 * i + 2] = cos(el);
    }
}
