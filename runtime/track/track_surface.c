#include "track/track_surface.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CELLS (1L << 24)

/* Cell range of triangle t's bounding box along every axis. */
static void cell_range(const dm_track_surface_grid *g, const float *t, int lo[3], int hi[3])
{
    for (int a = 0; a < 3; a++) {
        float mn = fminf(t[a], fminf(t[3 + a], t[6 + a])),
              mx = fmaxf(t[a], fmaxf(t[3 + a], t[6 + a]));
        lo[a] = (int)floorf((mn - g->origin[a]) / g->cell);
        hi[a] = (int)floorf((mx - g->origin[a]) / g->cell);
        if (lo[a] < 0) lo[a] = 0;
        if (hi[a] >= g->n[a]) hi[a] = g->n[a] - 1;
    }
}

int dm_track_surface_add(dm_track_surface_grid *g, const dm_mesh *mesh, unsigned int bit,
                         const dm_affine *world2track, const char *path)
{
    if (g->ntri + mesh->nt > g->cap) {
        long cap = g->ntri + mesh->nt;
        float *tri = realloc(g->tri, 9 * (size_t)(cap ? cap : 1) * sizeof *tri);
        if (tri) g->tri = tri;
        unsigned int *bits = realloc(g->tri_bit, (size_t)(cap ? cap : 1) * sizeof *bits);
        if (bits) g->tri_bit = bits;
        if (!tri || !bits) return dm_set_error("%s: out of memory for the surface", path);
        g->cap = cap;
    }
    long before = g->ntri;
    for (long t = 0; t < mesh->nt; t++) {
        float *out = g->tri + 9 * g->ntri;
        for (int v = 0; v < 3; v++) {
            double x[3];
            dm_affine_apply(world2track, mesh->xyz + 3 * (size_t)mesh->tri[3 * t + v], x);
            for (int a = 0; a < 3; a++) out[3 * v + a] = (float)x[a];
        }
        float e1[3], e2[3], n[3];
        dm_track_sub3(out + 3, out, e1);
        dm_track_sub3(out + 6, out, e2);
        dm_track_cross3(e1, e2, n);
        if (dm_track_dot3(n, n) == 0) continue; /* no area: no plane to cross */
        g->tri_bit[g->ntri++] = bit;
    }
    if (g->ntri == before)
        return dm_set_error("%s: the surface has no triangle with an area", path);
    return 0;
}

int dm_track_surface_finish(dm_track_surface_grid *g)
{
    const char *path = "the tracking surfaces";
    double extent = 0, lo[3] = {INFINITY, INFINITY, INFINITY},
           hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (long t = 0; t < g->ntri; t++) {
        const float *tr = g->tri + 9 * t;
        for (int a = 0; a < 3; a++) {
            float mn = fminf(tr[a], fminf(tr[3 + a], tr[6 + a]));
            float mx = fmaxf(tr[a], fmaxf(tr[3 + a], tr[6 + a]));
            if (mn < lo[a]) lo[a] = mn;
            if (mx > hi[a]) hi[a] = mx;
            extent += mx - mn;
        }
    }
    if (g->ntri == 0) return dm_set_error("%s: no triangle with an area", path);
    g->cell = (float)fmax(1.0, 2 * extent / (3.0 * g->ntri));
    for (;;) {
        long cells = 1;
        for (int a = 0; a < 3; a++) {
            g->origin[a] = (float)lo[a];
            g->n[a] = (int)floor((hi[a] - lo[a]) / g->cell) + 1;
            cells *= g->n[a];
        }
        if (cells <= MAX_CELLS) break;
        g->cell *= 2;
    }
    long ncell = (long)g->n[0] * g->n[1] * g->n[2];
    g->cell_off = calloc(ncell + 1, sizeof *g->cell_off);
    if (!g->cell_off) {
        dm_track_surface_free(g);
        return dm_set_error("%s: out of memory for the surface grid", path);
    }
    /* two passes: count the triangles of each cell, then list them */
    long total = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (long t = 0; t < g->ntri; t++) {
            int a[3], b[3];
            cell_range(g, g->tri + 9 * t, a, b);
            for (int k = a[2]; k <= b[2]; k++)
                for (int j = a[1]; j <= b[1]; j++)
                    for (int i = a[0]; i <= b[0]; i++) {
                        long c = ((long)k * g->n[1] + j) * g->n[0] + i;
                        if (pass == 0)
                            g->cell_off[c + 1]++;
                        else
                            g->cell_tri[g->cell_off[c]++] = (int)t;
                    }
        }
        if (pass == 0) {
            /* prefix sums: cell_off[c] is where cell c starts */
            for (long c = 0; c < ncell; c++) g->cell_off[c + 1] += g->cell_off[c];
            total = g->cell_off[ncell];
            if (total > 0x7fffffffL) {
                dm_track_surface_free(g);
                return dm_set_error("%s: the surface is too large for its grid", path);
            }
            g->cell_tri = malloc((total ? total : 1) * sizeof *g->cell_tri);
            if (!g->cell_tri) {
                dm_track_surface_free(g);
                return dm_set_error("%s: out of memory for the surface grid", path);
            }
        }
    }
    /* the fill pass moved cell_off[c] to the end of cell c (the start of c + 1): shift back */
    memmove(g->cell_off + 1, g->cell_off, ncell * sizeof *g->cell_off);
    g->cell_off[0] = 0;
    return 0;
}

int dm_track_surface_build(const dm_mesh *mesh, const dm_affine *world2track, const char *path,
                           dm_track_surface_grid *g)
{
    memset(g, 0, sizeof *g);
    int rc = dm_track_surface_add(g, mesh, 1u, world2track, path);
    if (rc == 0) rc = dm_track_surface_finish(g);
    if (rc != 0) dm_track_surface_free(g);
    return rc;
}

dm_track_surface dm_track_surface_view(const dm_track_surface_grid *g)
{
    dm_track_surface s;
    memset(&s, 0, sizeof s);
    if (!g->cell_off) return s;
    s.tri = g->tri;
    s.cell_off = g->cell_off;
    s.cell_tri = g->cell_tri;
    s.tri_bit = g->tri_bit;
    for (int a = 0; a < 3; a++) {
        s.n[a] = g->n[a];
        s.origin[a] = g->origin[a];
    }
    s.cell = g->cell;
    return s;
}

void dm_track_surface_free(dm_track_surface_grid *g)
{
    free(g->tri);
    free(g->tri_bit);
    free(g->cell_off);
    free(g->cell_tri);
    memset(g, 0, sizeof *g);
}
