/* templates/track/track_kernel.h on hand-made orientation fields: the fibre choice (closest to the
 * previous direction among f > fibthresh, sign kept, fibre 1 when none qualifies), --randfib's
 * first-fibre rules, probabilistic interpolation, and a whole streamline on a 1-voxel-wide line. */
#include "check.h"
#include "track/track_kernel_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NX = 20, NY = 3, NZ = 3, NS = 2, NF = 2 };
static float dirs[NX * NY * NZ * NS * NF * 3], fracs[NX * NY * NZ * NS * NF];
static unsigned char brain[NX * NY * NZ];

static void set_voxel(int v, const float d1[3], float f1, const float d2[3], float f2)
{
    for (int s = 0; s < NS; s++) {
        int b = (v * NS + s) * NF;
        memcpy(dirs + 3 * b, d1, 3 * sizeof(float));
        memcpy(dirs + 3 * (b + 1), d2, 3 * sizeof(float));
        fracs[b] = f1;
        fracs[b + 1] = f2;
    }
}

static dm_track_ctx make_ctx(void)
{
    dm_track_ctx c;
    memset(&c, 0, sizeof c);
    c.nx = NX, c.ny = NY, c.nz = NZ, c.nsamples = NS, c.nfibres = NF;
    c.vox[0] = c.vox[1] = c.vox[2] = 1;
    c.dirs = dirs, c.fracs = fracs, c.brain = brain;
    c.sx = NX, c.sy = NY, c.sz = NZ;
    for (int a = 0; a < 3; a++) c.diff2seed[a][a] = 1;
    c.half_steps = 1000, c.step = 0.5f, c.cthr = 0.2f, c.fibthresh = 0.01f, c.nearest = 1;
    return c;
}

int main(void)
{
    const float x[3] = {1, 0, 0}, y[3] = {0, 1, 0}, mx[3] = {-1, 0, 0};
    /* the line j = k = 1: fibre 1 along y (f 0.3), fibre 2 along -x (f 0.5) */
    for (int i = 0; i < NX; i++) {
        int v = (1 * NY + 1) * NX + i;
        brain[v] = 1;
        set_voxel(v, y, 0.3f, mx, 0.5f);
    }
    dm_track_ctx c = make_ctx();
    dm_rng rng;
    dm_rng_init(&rng, 1, 0);
    float p[3] = {5, 1, 1}, d[3];
    int rc = dm_track_sample_dir(&c, p, x, &rng, d);
    char why[200];
    snprintf(why, sizeof why, "got (%g %g %g)", d[0], d[1], d[2]);
    check(rc == 0 && d[0] == 1 && d[1] == 0, "track_kernel_closest_fibre_sign_kept", "%s", why);
    /* fibre 2 below fibthresh: only fibre 1 (y) qualifies, even though x is closer */
    c.fibthresh = 0.6f;
    dm_track_sample_dir(&c, p, x, &rng, d);
    int only_y = d[1] == 1;
    c.fibthresh = 0.4f;
    dm_track_sample_dir(&c, p, x, &rng, d);
    int fib2 = d[0] == 1;
    c.fibthresh = 0.9f; /* none qualifies: fibre 1 */
    dm_track_sample_dir(&c, p, x, &rng, d);
    check(only_y && fib2 && d[1] == 1, "track_kernel_fibthresh", "wrong fibre chosen");
    c.fibthresh = 0.01f;

    /* randfib: 0 -> fibst; 2 -> in proportion to f (0.3 : 0.5) */
    int count[2] = {0, 0};
    c.randfib = 0;
    c.fibst = 1;
    dm_track_sample_dir(&c, p, NULL, &rng, d);
    int fibst_ok = d[0] == -1;
    c.randfib = 2;
    for (int i = 0; i < 20000; i++) {
        dm_track_sample_dir(&c, p, NULL, &rng, d);
        count[d[1] == 1 ? 0 : 1]++;
    }
    double share = count[0] / 20000.0;
    snprintf(why, sizeof why, "fibre 1 chosen %.3f of the time, want 0.375; fibst ok %d", share,
             fibst_ok);
    check(fibst_ok && share > 0.36 && share < 0.39, "track_kernel_randfib", "%s", why);
    c.randfib = 0;
    c.fibst = 0;

    /* probabilistic interpolation: at x = 5.25 the upper neighbour 25% of the time */
    c.nearest = 0;
    int upper = 0;
    float q[3] = {5.25f, 1, 1};
    for (int i = 0; i < 20000; i++) upper += dm_track_voxel_sample(&c, q, &rng) % NX == 6;
    snprintf(why, sizeof why, "upper neighbour %.3f of the time", upper / 20000.0);
    check(upper > 0.23 * 20000 && upper < 0.27 * 20000, "track_kernel_probabilistic_interpolation",
          "%s", why);
    c.nearest = 1;

    /* a whole streamline on the line, fibre 2 only (-x), from x = 10: both halves to the ends */
    for (int i = 0; i < NX; i++) set_voxel((1 * NY + 1) * NX + i, mx, 0.5f, y, 0.0f);
    float pts[2][3 * 1001];
    int svox[2][1001];
    dm_track_half h[2] = {{pts[0], svox[0], 0, 0, 0}, {pts[1], svox[1], 0, 0, 0}};
    float seed[3] = {10, 1, 1};
    int kept = dm_track_streamline(&c, seed, 0, h, NULL, 0);
    float end0 = h[0].pts[3 * (h[0].npts - 1)], end1 = h[1].pts[3 * (h[1].npts - 1)];
    snprintf(why, sizeof why, "kept %d, ends at x = %g (%d) and %g (%d)", kept, end0, h[0].end,
             end1, h[1].end);
    check(kept && end0 == -0.5f && end1 == 19.0f && h[0].end == DM_TRACK_END_MASK &&
              h[1].end == DM_TRACK_END_MASK && h[0].npts == 22 && h[1].npts == 19,
          "track_kernel_streamline_both_ways", "%s", why);
    return failures != 0;
}
