/* Exclusion surfaces: the segment-triangle test of templates/track/track_surface_hit.h on hand-made
 * cases, checked against an independent double-precision test (Moller-Trumbore) on random
 * segments, and the binned lookup of runtime/track/track_surface.c against testing every triangle. */
#include "check.h"
#include "util/error.h"
#include "track/track_surface.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reference: 1 hit, 0 miss, -1 too close to an edge or an end of the segment to call. */
static int reference_hit(const float p[3], const float q[3], const float *t)
{
    double e1[3], e2[3], s[3], h[3], w[3], c[3];
    for (int a = 0; a < 3; a++) {
        e1[a] = t[3 + a] - t[a];
        e2[a] = t[6 + a] - t[a];
        s[a] = q[a] - p[a];
        w[a] = p[a] - t[a];
    }
    h[0] = s[1] * e2[2] - s[2] * e2[1];
    h[1] = s[2] * e2[0] - s[0] * e2[2];
    h[2] = s[0] * e2[1] - s[1] * e2[0];
    double det = e1[0] * h[0] + e1[1] * h[1] + e1[2] * h[2];
    if (fabs(det) < 1e-9) return -1;
    double u = (w[0] * h[0] + w[1] * h[1] + w[2] * h[2]) / det;
    c[0] = w[1] * e1[2] - w[2] * e1[1];
    c[1] = w[2] * e1[0] - w[0] * e1[2];
    c[2] = w[0] * e1[1] - w[1] * e1[0];
    double v = (s[0] * c[0] + s[1] * c[1] + s[2] * c[2]) / det;
    double r = (e2[0] * c[0] + e2[1] * c[1] + e2[2] * c[2]) / det;
    const double m = 1e-4;
    if (fabs(u) < m || fabs(v) < m || fabs(u + v - 1) < m || fabs(r) < m || fabs(r - 1) < m)
        return -1;
    return u > 0 && v > 0 && u + v < 1 && r > 0 && r < 1;
}

static float uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
}

static void test_cases(void)
{
    const float t[9] = {0, 0, 0, 2, 0, 0, 0, 2, 0}; /* in the z = 0 plane */
    struct {
        float p[3], q[3];
        int want;
        const char *what;
    } cases[] = {
        {{0.5f, 0.5f, -1}, {0.5f, 0.5f, 1}, 1, "crossing inside"},
        {{0.5f, 0.5f, 1}, {0.5f, 0.5f, -1}, 1, "crossing the other way"},
        {{0.5f, 0.5f, -1}, {0.5f, 0.5f, -0.1f}, 0, "stopping short of the plane"},
        {{0.5f, 0.5f, 0.1f}, {0.5f, 0.5f, 1}, 0, "going away from the plane"},
        {{0.5f, 0.5f, -1}, {0.5f, 0.5f, 0}, 1, "ending on the triangle"},
        {{1.5f, 1.5f, -1}, {1.5f, 1.5f, 1}, 0, "crossing the plane outside"},
        {{0.5f, 0.5f, 1}, {1.0f, 0.5f, 1}, 0, "parallel, off the plane"},
        {{0.2f, 0.2f, 0}, {0.6f, 0.2f, 0}, 1, "in the plane, inside"},
        {{5, 5, 0}, {6, 5, 0}, 0, "in the plane, elsewhere"},
    };
    char why[256] = "";
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (dm_track_segment_hits_triangle(cases[i].p, cases[i].q, t) != cases[i].want) {
            ok = 0;
            snprintf(why, sizeof why, "%s: got %d", cases[i].what, !cases[i].want);
        }
    check(ok, "surface_segment_triangle_cases", "%s", why);
}

static void test_random_segments(void)
{
    srand(7);
    long agree = 0, called = 0, mismatches = 0, hits = 0;
    for (int n = 0; n < 200000; n++) {
        float t[9], p[3], q[3];
        for (int i = 0; i < 9; i++) t[i] = uniform(-1, 1);
        for (int a = 0; a < 3; a++) {
            p[a] = uniform(-1.5f, 1.5f);
            q[a] = uniform(-1.5f, 1.5f);
        }
        int want = reference_hit(p, q, t);
        if (want < 0) continue;
        called++;
        hits += want;
        if (dm_track_segment_hits_triangle(p, q, t) == want)
            agree++;
        else
            mismatches++;
    }
    char why[160];
    snprintf(why, sizeof why, "%ld of %ld disagree with Moller-Trumbore (%ld hits)", mismatches,
             called, hits);
    check(mismatches == 0 && hits > 1000 && called > 150000, "surface_segment_triangle_random",
          "%s", why);
}

/* A wavy mesh of 40 x 40 vertices over 40 x 40 mm, mapped by an affine with a shear: the
 * binned lookup must give what testing every triangle gives, for 0.5 mm steps anywhere near. */
static void test_grid_lookup(void)
{
    enum { G = 40 };
    dm_mesh mesh = {.nv = G * G, .nt = 2 * (G - 1) * (G - 1)};
    mesh.xyz = malloc(3 * mesh.nv * sizeof *mesh.xyz);
    mesh.tri = malloc(3 * mesh.nt * sizeof *mesh.tri);
    for (int i = 0; i < G; i++)
        for (int j = 0; j < G; j++) {
            double *v = mesh.xyz + 3 * (i * G + j);
            v[0] = i;
            v[1] = j;
            v[2] = 10 + 3 * sin(i * 0.3) * cos(j * 0.2);
        }
    long k = 0;
    for (int i = 0; i + 1 < G; i++)
        for (int j = 0; j + 1 < G; j++) {
            int a = i * G + j;
            int tri[6] = {a, a + G, a + 1, a + 1, a + G, a + G + 1};
            memcpy(mesh.tri + 6 * k++, tri, sizeof tri);
        }
    dm_affine w2t;
    dm_affine_identity(&w2t);
    w2t.m[0][1] = 0.2;
    w2t.m[2][3] = 5;
    dm_track_surface_grid g;
    if (dm_track_surface_build(&mesh, &w2t, "test mesh", &g) != 0) {
        check(0, "surface_grid_matches_all_triangles", "%s", dm_last_error());
        dm_mesh_free(&mesh);
        return;
    }
    dm_track_surface s = dm_track_surface_view(&g);
    srand(11);
    long differ = 0, hits = 0;
    for (int n = 0; n < 100000; n++) {
        float p[3] = {uniform(-2, 50), uniform(-2, 42), uniform(10, 22)}, d[3], len = 0;
        for (int a = 0; a < 3; a++) {
            d[a] = uniform(-1, 1);
            len += d[a] * d[a];
        }
        len = sqrtf(len);
        float q[3] = {p[0] + 0.5f * d[0] / len, p[1] + 0.5f * d[1] / len, p[2] + 0.5f * d[2] / len};
        int all = 0;
        for (long t = 0; t < g.ntri && !all; t++)
            all = dm_track_segment_hits_triangle(p, q, g.tri + 9 * t);
        int binned = dm_track_segment_surfaces(&s, p, q) != 0;
        hits += all;
        differ += all != binned;
    }
    char why[200];
    snprintf(why, sizeof why,
             "%ld of 100000 steps differ (%ld hits; grid %dx%dx%d cells of %.2f mm)", differ, hits,
             g.n[0], g.n[1], g.n[2], g.cell);
    check(differ == 0 && hits > 1000 && (long)g.n[0] * g.n[1] * g.n[2] > 100,
          "surface_grid_matches_all_triangles", "%s", why);
    printf("  %s\n", why);
    dm_track_surface_free(&g);
    dm_mesh_free(&mesh);
}

int main(void)
{
    test_cases();
    test_random_segments();
    test_grid_lookup();
    return failures ? 1 : 0;
}
