#include "simulate/noise.h"

#include <math.h>
#define DM_FN static inline
#include "maths/philox.h"

/* The simulation stream is tagged so that it never coincides with a fitter's stream that
 * uses the same seed (a fit's MCMC draws must not echo the noise of its data). */
#define DM_SIMULATION_TAG 0x9E3779B97F4A7C15ull

void dm_noise_normal_pair(unsigned long long seed, size_t voxel, unsigned draw, double z[2])
{
    dm_rng r;
    dm_rng_init(&r, seed ^ DM_SIMULATION_TAG, (unsigned long long)voxel);
    r.block = draw; /* one Philox block per pair: draws are independent of each other */
    double u1 = dm_rng_uniform(&r), u2 = dm_rng_uniform(&r);
    double radius = sqrt(-2.0 * log(u1)), angle = 6.283185307179586 * u2;
    z[0] = radius * cos(angle);
    z[1] = radius * sin(angle);
}
