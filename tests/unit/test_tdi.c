/* templates/fodtrack/tdi_map.h: the exact voxel walk of streamlines against two references
 * built here, on random polylines in an oblique grid (segments short and long, many leaving
 * the grid): the voxels found by cutting each segment at every face it crosses (exact; must
 * agree), and the voxels of dense samples along each segment (brute force; a subset, which
 * misses only voxels that a segment grazes).  Each scratch capacity, from roomy down to 2
 * (flushes and repeated passes), must give the same counts.  Also the point lookup and the
 * edge cases (one point, no point, capacity below 2).
 *
 * The sampled mapping (tckmap's): against tckmap's upsampler and lookup written out here a
 * second way (the padded track built as an array, the Hermite weights as tabulated before the
 * loop), every ratio and scratch capacity giving the same counts; its samples are the
 * streamline's points at ratio 1 and lie on straight tracks at any ratio. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DM_FN static inline
#define DM_ATOMIC_ADD_U32(p, v) (*(p) += (v))
#include "fodtrack/tdi_map.h"

enum { NX = 13, NY = 11, NZ = 9, NVOX = NX * NY * NZ, MAX_POINTS = 40 };

static unsigned long long rng = 0x9E3779B97F4A7C15ULL;
static double uniform(void) /* xorshift64 -> [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* world = A voxel + t, with A a rotation times voxel sizes; world2vox is its inverse. */
static double vox2world[3][4];

static void make_grid(dm_tdi_grid *g, unsigned int *count)
{
    double a = 0.4, b = -0.25, size[3] = {1.7, 2.0, 2.3};
    double rz[3][3] = {{cos(a), -sin(a), 0}, {sin(a), cos(a), 0}, {0, 0, 1}};
    double rx[3][3] = {{1, 0, 0}, {0, cos(b), -sin(b)}, {0, sin(b), cos(b)}};
    double r[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            r[i][j] = 0;
            for (int k = 0; k < 3; k++) r[i][j] += rz[i][k] * rx[k][j];
        }
    double offset[3] = {-7.5, 3.25, -1.0};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) vox2world[i][j] = r[i][j] * size[j];
        vox2world[i][3] = offset[i];
    }
    /* Inverse: diag(1/size) R' (world - t). */
    for (int i = 0; i < 3; i++) {
        g->world2vox[i][3] = 0;
        for (int j = 0; j < 3; j++) {
            g->world2vox[i][j] = r[j][i] / size[i];
            g->world2vox[i][3] -= r[j][i] / size[i] * offset[j];
        }
    }
    g->nx = NX;
    g->ny = NY;
    g->nz = NZ;
    g->count = count;
    dm_tdi_grid_identity_frame(g);
}

static void to_world(const double v[3], float p[3])
{
    for (int i = 0; i < 3; i++)
        p[i] = (float)(vox2world[i][0] * v[0] + vox2world[i][1] * v[1] + vox2world[i][2] * v[2] +
                       vox2world[i][3]);
}

/* A random polyline in voxel coordinates around the grid (some points outside it), stored
 * as world floats. */
static int random_streamline(float *xyz)
{
    int n = 1 + (int)(uniform() * MAX_POINTS);
    double v[3] = {-2 + uniform() * (NX + 3), -2 + uniform() * (NY + 3), -2 + uniform() * (NZ + 3)};
    double reach = uniform() < 0.3 ? 6.0 : 1.2; /* long segments, or tckgen-like steps */
    for (int i = 0; i < n; i++) {
        to_world(v, xyz + 3 * i);
        for (int k = 0; k < 3; k++) v[k] += (uniform() * 2 - 1) * reach;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Voxel (index) of voxel coordinates c, -1 outside. */
static long voxel_of(const double c[3])
{
    long i[3];
    int size[3] = {NX, NY, NZ};
    for (int k = 0; k < 3; k++) {
        i[k] = (long)floor(c[k] + 0.5);
        if (i[k] < 0 || i[k] >= size[k]) return -1;
    }
    return i[0] + NX * (i[1] + NY * i[2]);
}

/* The exact reference: each segment cut at all the faces it crosses, each piece of non-zero
 * length looked up at its midpoint; marks the voxels in `mark`, returns how many. */
static int exact_voxels(const dm_tdi_grid *g, const float *xyz, int n, unsigned char *mark)
{
    memset(mark, 0, NVOX);
    int found = 0;
    for (int s = 0; s < (n > 1 ? n - 1 : 1); s++) {
        double a[3], b[3], t[64];
        dm_tdi_world_to_voxel(g->world2vox, xyz + 3 * s, a);
        dm_tdi_world_to_voxel(g->world2vox, xyz + 3 * (n > 1 ? s + 1 : s), b);
        int nt = 0;
        t[nt++] = 0;
        t[nt++] = 1;
        for (int k = 0; k < 3; k++) {
            double lo = fmin(a[k], b[k]), hi = fmax(a[k], b[k]);
            for (double f = floor(lo + 0.5) + 0.5; f < hi; f += 1)
                if (f > lo) t[nt++] = (f - a[k]) / (b[k] - a[k]);
        }
        qsort(t, (size_t)nt, sizeof *t, cmp_double);
        for (int i = 0; i + 1 < nt || (n == 1 && i == 0); i++) {
            double m = n == 1 ? 0 : 0.5 * (t[i] + t[i + 1]), c[3];
            if (n > 1 && !(t[i + 1] > t[i])) continue;
            for (int k = 0; k < 3; k++) c[k] = a[k] + m * (b[k] - a[k]);
            long v = voxel_of(c);
            if (v >= 0 && !mark[v]) {
                mark[v] = 1;
                found++;
            }
        }
    }
    return found;
}

/* The brute force: 4000 samples per segment. */
static void sampled_voxels(const dm_tdi_grid *g, const float *xyz, int n, unsigned char *mark)
{
    memset(mark, 0, NVOX);
    for (int s = 0; s < (n > 1 ? n - 1 : 1); s++) {
        double a[3], b[3];
        dm_tdi_world_to_voxel(g->world2vox, xyz + 3 * s, a);
        dm_tdi_world_to_voxel(g->world2vox, xyz + 3 * (n > 1 ? s + 1 : s), b);
        for (int j = 0; j <= 4000; j++) {
            double c[3];
            for (int k = 0; k < 3; k++) c[k] = a[k] + j / 4000.0 * (b[k] - a[k]);
            long v = voxel_of(c);
            if (v >= 0) mark[v] = 1;
        }
    }
}

/* ---- the sampled mapping's reference ---- */

/* tckmap's voxel of a float point: the float matrix, Eigen's pairwise row sums, std::round
 * taken as floor(|x| + 1/2) with the sign in double. */
static long sample_voxel(const dm_tdi_grid *g, const float p[3])
{
    int size[3] = {NX, NY, NZ};
    long i[3];
    for (int k = 0; k < 3; k++) {
        float m0 = (float)g->world2vox[k][0], m1 = (float)g->world2vox[k][1],
              m2 = (float)g->world2vox[k][2], m3 = (float)g->world2vox[k][3];
        float a = m0 * p[0] + m1 * p[1], b = m2 * p[2] + m3, v = a + b;
        double r = floor(fabs((double)v) + 0.5);
        if (v < 0) r = -r;
        if (r < 0 || r >= size[k]) return -1;
        i[k] = (long)r;
    }
    return i[0] + NX * (i[1] + NY * i[2]);
}

/* Marks the voxels of the upsampled track (MRtrix's Upsampler), returns how many. */
static int sampled_reference(const dm_tdi_grid *g, const float *xyz, int n, int ratio,
                             unsigned char *mark)
{
    static float pad[3 * (MAX_POINTS + 2)];
    static float w[64][4];
    memset(mark, 0, NVOX);
    int found = 0;
#define MARK(p)                                                                                    \
    do {                                                                                           \
        long v_ = sample_voxel(g, p);                                                              \
        if (v_ >= 0 && !mark[v_]) {                                                                \
            mark[v_] = 1;                                                                          \
            found++;                                                                               \
        }                                                                                          \
    } while (0)
    if (ratio == 1 || n == 1) {
        for (int i = 0; i < n; i++) MARK(xyz + 3 * i);
        return found;
    }
    memcpy(pad + 3, xyz, 3 * n * sizeof *xyz);
    for (int k = 0; k < 3; k++) {
        pad[k] = xyz[k] + (xyz[k] - xyz[3 + k]);
        pad[3 * (n + 1) + k] = xyz[3 * (n - 1) + k] + (xyz[3 * (n - 1) + k] - xyz[3 * (n - 2) + k]);
    }
    const float t = 0.05f;
    for (int i = 0; i + 1 < ratio; i++) {
        float mu = (float)((i + 1.0) / (float)ratio), p2 = mu * mu, p3 = mu * p2;
        w[i][0] = (0.5f - t) * (2.0f * p2 - p3 - mu);
        w[i][1] = 1.0f + (1.5f + t) * p3 - (2.5f + t) * p2;
        w[i][2] = (2.0f + 2.0f * t) * p2 + (0.5f - t) * mu - (1.5f + t) * p3;
        w[i][3] = (0.5f - t) * (p3 - p2);
    }
    for (int s = 3; s < n + 2; s++) {
        MARK(pad + 3 * (s - 2));
        for (int i = 0; i + 1 < ratio; i++) {
            float q[3];
            for (int k = 0; k < 3; k++) {
                float acc = w[i][0] * pad[3 * (s - 3) + k];
                for (int j = 1; j < 4; j++) acc += w[i][j] * pad[3 * (s - 3 + j) + k];
                q[k] = acc;
            }
            MARK(q);
        }
    }
    MARK(pad + 3 * n);
#undef MARK
    return found;
}

int main(void)
{
    static unsigned int count[NVOX], reference[NVOX];
    static unsigned char exact[NVOX], sampled[NVOX];
    static float xyz[3 * MAX_POINTS];
    dm_tdi_grid g;
    make_grid(&g, count);

    /* The point lookup: voxel centres and points just inside each face. */
    int lookup_ok = 1;
    for (int v = 0; v < NVOX; v++) {
        int i = v % NX, j = v / NX % NY, k = v / (NX * NY);
        double c[3] = {i + 0.49, j - 0.49, k + 0.3};
        float p[3];
        to_world(c, p);
        lookup_ok &= dm_tdi_voxel_index(g.world2vox, NX, NY, NZ, p) == v;
    }
    double outside[3] = {NX - 0.4, 2, 2};
    float po[3];
    to_world(outside, po);
    lookup_ok &= dm_tdi_voxel_index(g.world2vox, NX, NY, NZ, po) == -1;
    check(lookup_ok, "tdi_voxel_index", "a point maps to the wrong voxel");

    static const int capacities[] = {8192, 64, 16, 5, 3, 2};
    enum { NCAP = sizeof capacities / sizeof *capacities, NSTREAM = 3000 };
    int mismatched[NCAP] = {0}, bad_return[NCAP] = {0}, not_subset = 0, missed = 0;
    long total_exact = 0, total_sampled = 0;
    unsigned int scratch[8192];
    memset(reference, 0, sizeof reference);
    for (int c = 0; c < NCAP; c++) {
        memset(count, 0, sizeof count);
        rng = 0x9E3779B97F4A7C15ULL; /* the same streamlines for every capacity */
        for (int s = 0; s < NSTREAM; s++) {
            int n = random_streamline(xyz);
            int want = exact_voxels(&g, xyz, n, exact);
            if (c == 0) {
                sampled_voxels(&g, xyz, n, sampled);
                int n_sampled = 0, sub = 1;
                for (int v = 0; v < NVOX; v++) {
                    reference[v] += exact[v];
                    n_sampled += sampled[v];
                    sub &= !sampled[v] || exact[v];
                }
                not_subset += !sub;
                missed += n_sampled != want;
                total_exact += want;
                total_sampled += n_sampled;
            }
            long got = dm_tdi_add_streamline(&g, xyz, n, scratch, capacities[c]);
            bad_return[c] += got != want;
        }
        mismatched[c] = memcmp(count, reference, sizeof count) != 0;
    }
    check(!not_subset, "tdi_sampled_subset_of_exact_reference",
          "%d streamlines sampled a voxel that the exact reference does not hold", not_subset);
    check(missed < NSTREAM / 20, "tdi_sampled_misses_only_grazed",
          "dense samples missed voxels in %d of %d streamlines (%ld of %ld voxels)", missed,
          NSTREAM, total_exact - total_sampled, total_exact);
    printf("  %ld voxel visits; dense samples miss %ld (grazed corners) in %d streamlines\n",
           total_exact, total_exact - total_sampled, missed);
    for (int c = 0; c < NCAP; c++) {
        char name[64];
        snprintf(name, sizeof name, "tdi_walk_equals_exact_scratch_%d", capacities[c]);
        check(!mismatched[c] && !bad_return[c], name,
              "counts differ from the reference (%d), or %d streamlines returned another count",
              mismatched[c], bad_return[c]);
    }

    /* One point: its voxel; none: nothing; capacity 1: refused. */
    memset(count, 0, sizeof count);
    double centre[3] = {4, 5, 6};
    float p[3];
    to_world(centre, p);
    long one = dm_tdi_add_streamline(&g, p, 1, scratch, 16);
    long none = dm_tdi_add_streamline(&g, p, 0, scratch, 16);
    long refused = dm_tdi_add_streamline(&g, p, 1, scratch, 1);
    check(one == 1 && none == 0 && refused == -1 && count[4 + NX * (5 + NY * 6)] == 1, "tdi_edges",
          "one point %ld, none %ld, capacity 1 %ld, voxel count %u", one, none, refused,
          count[4 + NX * (5 + NY * 6)]);

    /* A streamline that re-enters a voxel many times counts there once. */
    memset(count, 0, sizeof count);
    float zigzag[3 * 30];
    for (int i = 0; i < 30; i++) {
        double v[3] = {4 + (i % 2 ? 0.45 : -0.45), 5 + (i % 2 ? 1.2 : 0), 6};
        to_world(v, zigzag + 3 * i);
    }
    dm_tdi_add_streamline(&g, zigzag, 30, scratch, 4);
    unsigned int most = 0;
    for (int v = 0; v < NVOX; v++) most = count[v] > most ? count[v] : most;
    check(most == 1, "tdi_once_per_streamline", "a voxel counted %u times", most);
    /* The sampled mapping: ratios x capacities against the reference. */
    static const int ratios[] = {1, 2, 3, 7, 40};
    int sampled_bad = 0, sampled_total = 0, sampled_ret = 0;
    for (int r = 0; r < 5; r++) {
        memset(reference, 0, sizeof reference);
        rng = 0x1234567ULL;
        for (int s = 0; s < 1000; s++) {
            int n = random_streamline(xyz);
            sampled_total += sampled_reference(&g, xyz, n, ratios[r], exact);
            for (int v = 0; v < NVOX; v++) reference[v] += exact[v];
        }
        for (int c = 0; c < NCAP; c++) {
            memset(count, 0, sizeof count);
            rng = 0x1234567ULL;
            for (int s = 0; s < 1000; s++) {
                int n = random_streamline(xyz);
                int want = sampled_reference(&g, xyz, n, ratios[r], exact);
                g.ratio = ratios[r];
                sampled_ret += dm_tdi_add(&g, xyz, n, scratch, capacities[c]) != want;
                g.ratio = 0;
            }
            sampled_bad += memcmp(count, reference, sizeof count) != 0;
        }
    }
    check(!sampled_bad && !sampled_ret && sampled_total > 10000, "tdi_sampled_equals_reference",
          "%d of %d ratio x capacity runs differ, %d returns wrong (%d voxel visits)", sampled_bad,
          5 * NCAP, sampled_ret, sampled_total);

    /* A straight track: every sample on it, so at a high ratio the samples find what the
     * exact walk finds but for grazed corners, never more. */
    memset(count, 0, sizeof count);
    double v0[3] = {0.3, 0.2, 0.1}, v1[3] = {11.7, 9.6, 7.8};
    float line[6];
    to_world(v0, line);
    to_world(v1, line + 3);
    long walked = dm_tdi_add_streamline(&g, line, 2, scratch, 64);
    memcpy(reference, count, sizeof count);
    memset(count, 0, sizeof count);
    long sampled_n = dm_tdi_add_streamline_sampled(&g, line, 2, 200, scratch, 64);
    int extra = 0;
    for (int v = 0; v < NVOX; v++) extra += count[v] && !reference[v];
    check(extra == 0 && sampled_n <= walked && sampled_n >= walked - 4, "tdi_sampled_straight",
          "%ld samples' voxels vs %ld walked, %d not on the walk", sampled_n, walked, extra);
    return failures != 0;
}
