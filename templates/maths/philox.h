/* Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel
 * random numbers: as easy as 1, 2, 3" (SC 2011), and the deviates the MCMC draws from it.
 *
 * A block of four 32-bit words is a pure function of (counter, key), so a voxel's stream needs
 * no stored state beyond a draw counter: the host build and the GPU build produce the same
 * words for the same (seed, voxel), whatever the threads and batches.  Here
 *   key     = the 64-bit seed (low word, high word)
 *   counter = (draw counter low, high, voxel index low, high).
 * Every lane of a voxel runs the same stream redundantly, so all lanes draw the same numbers
 * and agree on every accept/reject decision.
 *
 * Uniforms are doubles in the open interval (0, 1) built from 53 bits; normals come from the
 * Box-Muller transform (both deviates of a pair are used, the second one cached).  The integer
 * words and the uniforms are bit-identical on host and device; the normals go through log, sqrt,
 * cos and sin, whose last bit may differ between libm and the CUDA math library.
 *
 * Before including: DM_FN (see model_api.h); the host includer has included <math.h>. */
#ifndef DIMOC_PHILOX_H
#define DIMOC_PHILOX_H

#define DM_PHILOX_M0 0xD2511F53u /* round multipliers */
#define DM_PHILOX_M1 0xCD9E8D57u
#define DM_PHILOX_W0 0x9E3779B9u /* Weyl key increments: golden ratio, sqrt(3) - 1 */
#define DM_PHILOX_W1 0xBB67AE85u

/* One Philox-4x32-10 block: out = f(ctr, key).  The ten rounds each multiply two words (keeping
 * the high and low halves of the 64-bit products) and mix with the other two words and the
 * key, which is bumped by the Weyl constants between rounds. */
DM_FN void dm_philox4x32_10(const unsigned int ctr[4], const unsigned int key[2],
                            unsigned int out[4])
{
    unsigned int c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    unsigned int k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += DM_PHILOX_W0;
            k1 += DM_PHILOX_W1;
        }
        unsigned long long prod0 = (unsigned long long)DM_PHILOX_M0 * c0;
        unsigned long long prod1 = (unsigned long long)DM_PHILOX_M1 * c2;
        unsigned int hi0 = (unsigned int)(prod0 >> 32), lo0 = (unsigned int)prod0;
        unsigned int hi1 = (unsigned int)(prod1 >> 32), lo1 = (unsigned int)prod1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The random stream of one voxel. */
typedef struct dm_rng {
    unsigned int key[2];
    unsigned int voxel[2];
    unsigned long long block; /* next block's draw counter */
    unsigned int word[4];     /* the current block */
    int used;                 /* words of it already consumed (4: none left) */
    int has_spare;            /* a cached second Box-Muller deviate */
    double spare;
} dm_rng;

DM_FN void dm_rng_init(dm_rng *r, unsigned long long seed, unsigned long long voxel_index)
{
    r->key[0] = (unsigned int)seed;
    r->key[1] = (unsigned int)(seed >> 32);
    r->voxel[0] = (unsigned int)voxel_index;
    r->voxel[1] = (unsigned int)(voxel_index >> 32);
    r->block = 0;
    r->used = 4;
    r->has_spare = 0;
    r->spare = 0;
}

DM_FN unsigned int dm_rng_u32(dm_rng *r)
{
    if (r->used == 4) {
        unsigned int ctr[4] = {(unsigned int)r->block, (unsigned int)(r->block >> 32), r->voxel[0],
                               r->voxel[1]};
        dm_philox4x32_10(ctr, r->key, r->word);
        r->block++;
        r->used = 0;
    }
    return r->word[r->used++];
}

/* Uniform in (0, 1): the top 53 bits of two words, k, give (k + 1/2) / 2^53, exact in double
 * and never 0 or 1 (so log(u) is finite). */
DM_FN double dm_rng_uniform(dm_rng *r)
{
    unsigned long long hi = dm_rng_u32(r), lo = dm_rng_u32(r);
    unsigned long long k = ((hi << 32) | lo) >> 11;
    return ((double)k + 0.5) * 1.1102230246251565e-16; /* 2^-53 */
}

/* Standard normal deviate (Box-Muller on two uniforms; the sine deviate is kept for the next
 * call). */
DM_FN double dm_rng_normal(dm_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1 = dm_rng_uniform(r), u2 = dm_rng_uniform(r);
    double radius = sqrt(-2.0 * log(u1));
    double angle = 6.283185307179586 * u2;
    r->spare = radius * sin(angle);
    r->has_spare = 1;
    return radius * cos(angle);
}

#endif
