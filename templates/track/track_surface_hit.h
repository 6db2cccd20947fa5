/* Which surfaces does a streamline step cross?  The segment-triangle test of the thesis, appendix 6A
 * (O'Rourke's ray-plane method), over the triangles binned on a regular grid so that a step
 * tests only those near it (thesis 6.7).  Plain C shared by the host and the NVRTC build of the
 * tracker, like track_kernel.h, which includes it.
 *
 * Coordinates are tracking mm (track_kernel.h).  The grid's cell (i, j, k) spans
 * origin + [i, i + 1) * cell (and likewise j, k); it lists every triangle whose bounding box
 * overlaps it (runtime/track/track_surface.c builds it).  All the surfaces of a run share one grid;
 * each triangle carries the bit of its surface (its role: exclusion, stop, a waypoint, a
 * target; see track_kernel.h). */
#ifndef DIMOC_TRACK_SURFACE_HIT_H
#define DIMOC_TRACK_SURFACE_HIT_H

typedef struct dm_track_surface {
    const float *tri; /* 9 floats per triangle: its three vertices */
    const int
        *cell_off; /* cell c lists cell_tri[cell_off[c] .. cell_off[c + 1]); NULL: no surface */
    const int *cell_tri;
    const unsigned int *tri_bit; /* the surface bit of each triangle */
    int n[3];                    /* cells along each axis */
    float origin[3], cell;       /* corner of cell (0, 0, 0) and the cell's edge, mm */
} dm_track_surface;

DM_FN void dm_track_sub3(const float *a, const float *b, float out[3])
{
    out[0] = a[0] - b[0];
    out[1] = a[1] - b[1];
    out[2] = a[2] - b[2];
}

DM_FN void dm_track_cross3(const float a[3], const float b[3], float out[3])
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

DM_FN float dm_track_dot3(const float a[3], const float b[3])
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* 1 when x (on the triangle's plane, normal nrm) lies inside triangle t or on its edges. */
DM_FN int dm_track_inside_triangle(const float *t, const float nrm[3], const float x[3])
{
    for (int e = 0; e < 3; e++) {
        const float *a = t + 3 * e, *b = t + 3 * ((e + 1) % 3);
        float ab[3], ax[3], c[3];
        dm_track_sub3(b, a, ab);
        dm_track_sub3(x, a, ax);
        dm_track_cross3(ab, ax, c);
        if (dm_track_dot3(c, nrm) < 0) return 0;
    }
    return 1;
}

/* Segment p -> q against triangle t (9 floats), appendix 6A: s = q - p, n the triangle's
 * normal, w from a vertex to p.  s . n = 0: parallel; the thesis then assumes a hit when the
 * segment lies in the plane (w . n = 0), here only when an end of it is inside the triangle, so
 * that a coplanar segment elsewhere in the cell does not count.  Otherwise the plane is met at
 * p + t s with t = -(w . n) / (s . n); a hit when 0 <= t <= 1 and that point is inside. */
DM_FN int dm_track_segment_hits_triangle(const float p[3], const float q[3], const float *t)
{
    float e1[3], e2[3], nrm[3], s[3], w[3];
    dm_track_sub3(t + 3, t, e1);
    dm_track_sub3(t + 6, t, e2);
    dm_track_cross3(e1, e2, nrm);
    dm_track_sub3(q, p, s);
    dm_track_sub3(p, t, w);
    float sn = dm_track_dot3(s, nrm), wn = dm_track_dot3(w, nrm);
    if (sn == 0) {
        if (wn != 0) return 0;
        return dm_track_inside_triangle(t, nrm, p) || dm_track_inside_triangle(t, nrm, q);
    }
    /* 0 <= -wn / sn <= 1 without dividing: -wn between 0 and sn */
    if (sn > 0 ? (-wn < 0 || -wn > sn) : (-wn > 0 || -wn < sn)) return 0;
    float r = -wn / sn;
    float x[3] = {p[0] + r * s[0], p[1] + r * s[1], p[2] + r * s[2]};
    return dm_track_inside_triangle(t, nrm, x);
}

/* The bits of the surfaces that segment p -> q crosses (0: none): the triangles of every cell
 * that the segment's bounding box overlaps are tested, but not those of a surface already
 * found crossed. */
DM_FN unsigned int dm_track_segment_surfaces(const dm_track_surface *g, const float p[3],
                                             const float q[3])
{
    unsigned int crossed = 0;
    int lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
        float mn = p[a] < q[a] ? p[a] : q[a], mx = p[a] < q[a] ? q[a] : p[a];
        lo[a] = (int)floorf((mn - g->origin[a]) / g->cell);
        hi[a] = (int)floorf((mx - g->origin[a]) / g->cell);
        if (hi[a] < 0 || lo[a] >= g->n[a]) return 0u;
        if (lo[a] < 0) lo[a] = 0;
        if (hi[a] >= g->n[a]) hi[a] = g->n[a] - 1;
    }
    for (int k = lo[2]; k <= hi[2]; k++)
        for (int j = lo[1]; j <= hi[1]; j++)
            for (int i = lo[0]; i <= hi[0]; i++) {
                long c = ((long)k * g->n[1] + j) * g->n[0] + i;
                for (int e = g->cell_off[c]; e < g->cell_off[c + 1]; e++) {
                    int t = g->cell_tri[e];
                    if (!(crossed & g->tri_bit[t]) &&
                        dm_track_segment_hits_triangle(p, q, g->tri + 9 * (long)t))
                        crossed |= g->tri_bit[t];
                }
            }
    return crossed;
}

#endif
