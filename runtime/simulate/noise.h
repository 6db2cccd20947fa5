/* Noise for simulations: standard normal deviates from the same Philox generator the
 * fitters use, keyed by (seed, voxel) with the draw index as counter, so that a simulation is
 * reproducible and independent of how it is split into threads or batches. */
#ifndef DIMOC_NOISE_H
#define DIMOC_NOISE_H

#include <stddef.h>

/* Two independent N(0,1) deviates for draw `draw` of voxel `voxel`. */
void dm_noise_normal_pair(unsigned long long seed, size_t voxel, unsigned draw, double z[2]);

#endif
