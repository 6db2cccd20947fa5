/* templates/fodtrack/tdi_map.h: the exact voxel walk of streamlines against two references
 * built here, on random polylines in an oblique grid (segments short and long, many leaving
 * the grid): the voxels found by cutting each segment at every face it crosses (exact; must
 * agree), and the voxels of dense samples along each segment (brute force; a subset, which
 * misses only voxels that a segment grazes).  Each scratch capacity, from roomy down to 2
 * (flushes and repeated passes), must give the same counts.  Also the point lookup and the
 * edge cases (one point, no point, capacity below 2). */
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
    return failures != 0;
}
