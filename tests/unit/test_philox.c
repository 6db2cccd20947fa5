/* templates/maths/philox.h: the Philox4x32-10 known-answer vectors of Random123 (Salmon et al.
 * 2011), and the uniform and normal deviates the MCMC draws from it. */
#include "check.h"
#include <math.h>
#include <stdio.h>

#define DM_FN static inline
#include "maths/philox.h"

static void known_answer(const char *name, unsigned c0, unsigned c1, unsigned c2, unsigned c3,
                         unsigned k0, unsigned k1, unsigned e0, unsigned e1, unsigned e2,
                         unsigned e3)
{
    unsigned ctr[4] = {c0, c1, c2, c3}, key[2] = {k0, k1}, out[4];
    dm_philox4x32_10(ctr, key, out);
    char why[200];
    snprintf(why, sizeof why, "got %08x %08x %08x %08x, want %08x %08x %08x %08x", out[0], out[1],
             out[2], out[3], e0, e1, e2, e3);
    check(out[0] == e0 && out[1] == e1 && out[2] == e2 && out[3] == e3, name, "%s", why);
}

int main(void)
{
    known_answer("philox_kat_zero", 0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c,
                 0x9b00dbd8);
    known_answer("philox_kat_ones", 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
                 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd);
    known_answer("philox_kat_pi", 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822,
                 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1);

    /* The stream's words are the blocks of counters (n, 0, voxel lo, voxel hi). */
    {
        dm_rng r;
        dm_rng_init(&r, 0x0123456789abcdefULL, 0x1122334455667788ULL);
        unsigned ctr[4] = {1, 0, 0x55667788, 0x11223344}, key[2] = {0x89abcdef, 0x01234567};
        unsigned want[4];
        dm_philox4x32_10(ctr, key, want);
        for (int i = 0; i < 4; i++) dm_rng_u32(&r);
        int ok = 1;
        for (int i = 0; i < 4; i++) ok &= dm_rng_u32(&r) == want[i];
        check(ok, "stream_counter_layout", "the second block is not Philox(ctr=(1,0,voxel))");
    }

    const int n = 1000000;
    dm_rng r;
    dm_rng_init(&r, 42, 7);
    double umin = 1, umax = 0, usum = 0, usum2 = 0;
    for (int i = 0; i < n; i++) {
        double u = dm_rng_uniform(&r);
        umin = u < umin ? u : umin;
        umax = u > umax ? u : umax;
        usum += u;
        usum2 += u * u;
    }
    double umean = usum / n, uvar = usum2 / n - umean * umean;
    char why[200];
    snprintf(why, sizeof why, "min %g max %g", umin, umax);
    check(umin > 0 && umax < 1, "uniform_open_interval", "%s", why);
    /* standard errors: mean 0.29/sqrt(n) = 2.9e-4; variance ~ 0.089/sqrt(n) = 8.9e-5 */
    snprintf(why, sizeof why, "mean %.6f (want 0.5), variance %.6f (want 1/12)", umean, uvar);
    check(fabs(umean - 0.5) < 1.5e-3 && fabs(uvar - 1.0 / 12) < 5e-4, "uniform_moments", "%s", why);

    double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
    for (int i = 0; i < n; i++) {
        double z = dm_rng_normal(&r);
        s1 += z;
        s2 += z * z;
        s3 += z * z * z;
        s4 += z * z * z * z;
    }
    double mean = s1 / n, var = s2 / n - mean * mean, skew = s3 / n, kurt = s4 / n;
    /* standard errors: mean 1e-3, variance 1.4e-3, third moment 2.4e-3, fourth 9.8e-3 */
    snprintf(why, sizeof why, "mean %.5f var %.5f skew %.5f kurtosis %.5f", mean, var, skew, kurt);
    check(fabs(mean) < 5e-3 && fabs(var - 1) < 7e-3 && fabs(skew) < 1.2e-2 && fabs(kurt - 3) < 5e-2,
          "normal_moments", "%s", why);

    /* Streams of different voxels (and seeds) differ; the same key repeats exactly. */
    {
        dm_rng a, b, c, a2;
        dm_rng_init(&a, 42, 100);
        dm_rng_init(&a2, 42, 100);
        dm_rng_init(&b, 42, 101);
        dm_rng_init(&c, 43, 100);
        int same = 1, diff_vox = 0, diff_seed = 0;
        for (int i = 0; i < 64; i++) {
            unsigned x = dm_rng_u32(&a);
            same &= x == dm_rng_u32(&a2);
            diff_vox += x != dm_rng_u32(&b);
            diff_seed += x != dm_rng_u32(&c);
        }
        check(same && diff_vox > 60 && diff_seed > 60, "streams_keyed_by_seed_and_voxel",
              "streams repeat across keys or differ for the same key");
    }
    return failures ? 1 : 0;
}
