/* Track-density mapping of one streamline, the same source for the host compiler and NVRTC.
 *
 * A streamline (a polyline of points in world mm) adds 1 to every voxel of the grid that it
 * visits, once per streamline however often it re-enters.  Voxel coordinates are continuous
 * with voxel centres at integers: voxel i spans [i - 0.5, i + 0.5) on each axis.  Two ways to
 * decide which voxels a streamline visits (dm_tdi_grid.ratio chooses):
 *
 * - sampled (ratio >= 1), MRtrix's tckmap default TDI voxel for voxel: the streamline is
 *   upsampled `ratio` times by tckmap's Hermite curve (tension 0.1, the ends extended by
 *   reflected points) and each sample counts the voxel it rounds to (half away from zero).
 *   The arithmetic is tckmap's: single precision, Eigen's order of the sums, the
 *   scanner -> voxel matrix cast to float, so that samples on a voxel face round the same way.
 *   Voxels that a segment only grazes between two samples are not counted.
 * - exact (ratio 0): each segment is walked exactly, boundary crossing by boundary crossing
 *   (Amanatides & Woo 1987), after clipping it to the grid, so that the walk is bounded by the
 *   grid's size whatever the points; parts outside the grid add nothing.
 *
 * The voxels a streamline enters are collected in caller-provided scratch (no allocation, no
 * grid-sized stamp array), then sorted and counted once each.  When the scratch fills, it is
 * sorted and deduplicated in place; if it is then still mostly full, the pass keeps only the
 * smaller half of the voxel indices and ignores larger ones, and after the pass the streamline
 * is walked again for the indices above that cut.  So the count is exact for any capacity >= 2;
 * a small scratch costs repeated walks, never a wrong count.
 *
 * The includer defines, before including:
 *   DM_FN                     the storage of these functions ("static inline" on the host,
 *                             "static __device__ __forceinline__" under NVRTC);
 *   DM_ATOMIC_ADD_U32(p, v)   adds v to the unsigned int *p atomically;
 * and makes floor() available (math.h on the host; built in under NVRTC).  Nothing is
 * included here. */
#ifndef DIMOC_FODTRACK_TDI_MAP_H
#define DIMOC_FODTRACK_TDI_MAP_H

/* The grid: nx*ny*nz counts, x fastest (NIfTI order), and world mm -> voxel coordinates as
 * the first three rows of a 4x4 affine.  nx*ny*nz must be below 2^32 (the scratch holds
 * voxel indices as unsigned int). */
typedef struct dm_tdi_grid {
    int nx, ny, nz;
    double world2vox[3][4];
    unsigned int *count;
    int ratio; /* 0: the exact walk; >= 1: tckmap's sampling with this upsampling ratio */
    /* The sampled mapping's frame, MRtrix's: its scanner -> voxel matrix in single precision
     * on its axes realigned to near RAS, its axis k being the grid's axis[k], reversed when
     * flip[k] (dm_tdi_grid_identity_frame: the grid's own axes). */
    float s2v[3][4];
    int axis[3], flip[3];
} dm_tdi_grid;

/* The sampled mapping's frame from world2vox as it stands (no realignment). */
DM_FN void dm_tdi_grid_identity_frame(dm_tdi_grid *g)
{
    for (int r = 0; r < 3; r++) {
        for (int k = 0; k < 4; k++) g->s2v[r][k] = (float)g->world2vox[r][k];
        g->axis[r] = r;
        g->flip[r] = 0;
    }
}

/* The continuous voxel coordinates of a world point. */
DM_FN void dm_tdi_world_to_voxel(const double m[3][4], const float p[3], double v[3])
{
    for (int r = 0; r < 3; r++)
        v[r] = m[r][0] * (double)p[0] + m[r][1] * (double)p[1] + m[r][2] * (double)p[2] + m[r][3];
}

/* The index (x fastest) of the voxel that holds a world point, -1 outside the grid (or for a
 * point that is not finite). */
DM_FN long dm_tdi_voxel_index(const double m[3][4], int nx, int ny, int nz, const float p[3])
{
    double v[3];
    dm_tdi_world_to_voxel(m, p, v);
    int size[3] = {nx, ny, nz};
    long c[3];
    for (int k = 0; k < 3; k++) {
        if (!(v[k] >= -0.5 && v[k] < size[k] - 0.5)) return -1; /* NaN fails too */
        c[k] = (long)floor(v[k] + 0.5);
        if (c[k] > size[k] - 1) c[k] = size[k] - 1; /* rounding at the last edge */
    }
    return c[0] + (long)nx * (c[1] + (long)ny * c[2]);
}

/* ---- the set of voxels of one streamline ---- */

typedef struct dm_tdi_collector {
    unsigned int *item;
    int capacity, n;
    long lo, hi; /* this pass keeps indices in [lo, hi) */
    int cut;     /* hi was lowered in this pass: another pass follows */
} dm_tdi_collector;

/* In-place heapsort (no recursion, no allocation). */
DM_FN void dm_tdi_sift_down(unsigned int *a, int root, int n)
{
    for (;;) {
        int child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && a[child + 1] > a[child]) child++;
        if (a[root] >= a[child]) return;
        unsigned int t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

/* Sorts a[0..n) ascending and drops repeats; returns the number of distinct values. */
DM_FN int dm_tdi_sort_unique(unsigned int *a, int n)
{
    for (int i = n / 2 - 1; i >= 0; i--) dm_tdi_sift_down(a, i, n);
    for (int end = n - 1; end > 0; end--) {
        unsigned int t = a[0];
        a[0] = a[end];
        a[end] = t;
        dm_tdi_sift_down(a, 0, end);
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || a[i] != a[m - 1]) a[m++] = a[i];
    return m;
}

DM_FN void dm_tdi_collect(dm_tdi_collector *c, long index)
{
    if (index < c->lo || index >= c->hi) return;
    if (c->n > 0 && c->item[c->n - 1] == (unsigned int)index) return; /* the common repeat */
    if (c->n == c->capacity) {
        c->n = dm_tdi_sort_unique(c->item, c->n);
        /* Still mostly full: keep the smaller half for this pass, so that every flush frees
         * at least a quarter of the scratch (flushes stay rare) and every pass counts at
         * least half of it (passes stay few). */
        if (c->n >= c->capacity - c->capacity / 4) {
            int keep = c->capacity / 2;
            c->hi = (long)c->item[keep];
            c->n = keep;
            c->cut = 1;
            if (index >= c->hi) return;
        }
    }
    c->item[c->n++] = (unsigned int)index;
}

/* Walks the segment a -> b (voxel coordinates), collecting every voxel of the grid that it
 * passes through. */
DM_FN void dm_tdi_walk_segment(const dm_tdi_grid *g, const double a[3], const double b[3],
                               dm_tdi_collector *c)
{
    int size[3] = {g->nx, g->ny, g->nz};
    double d[3], t0 = 0, t1 = 1;
    for (int k = 0; k < 3; k++) {
        if (!(a[k] - a[k] == 0) || !(b[k] - b[k] == 0)) return; /* NaN or Inf */
        d[k] = b[k] - a[k];
        double lo = -0.5, hi = size[k] - 0.5;
        if (d[k] == 0) {
            if (a[k] < lo || a[k] >= hi) return;
            continue;
        }
        double ta = (lo - a[k]) / d[k], tb = (hi - a[k]) / d[k];
        if (ta > tb) {
            double t = ta;
            ta = tb;
            tb = t;
        }
        if (ta > t0) t0 = ta;
        if (tb < t1) t1 = tb;
    }
    if (t0 > t1) return; /* misses the grid */

    long cell[3];
    int step[3];
    double t_next[3], t_delta[3];
    for (int k = 0; k < 3; k++) {
        double s = a[k] + t0 * d[k];
        cell[k] = (long)floor(s + 0.5);
        if (cell[k] < 0) cell[k] = 0;
        if (cell[k] > size[k] - 1) cell[k] = size[k] - 1;
        step[k] = d[k] > 0 ? 1 : d[k] < 0 ? -1 : 0;
        /* The parameter t at which the segment crosses the cell's next face on this axis. */
        t_next[k] = step[k] ? ((double)cell[k] + 0.5 * step[k] - a[k]) / d[k] : 1e300;
        t_delta[k] = step[k] ? step[k] / d[k] : 0;
    }
    long guard = (long)size[0] + size[1] + size[2] + 3;
    for (long it = 0; it < guard; it++) {
        dm_tdi_collect(c, cell[0] + (long)g->nx * (cell[1] + (long)g->ny * cell[2]));
        double t = t_next[0];
        if (t_next[1] < t) t = t_next[1];
        if (t_next[2] < t) t = t_next[2];
        if (t > t1) return;
        /* Faces crossed at the same t (an edge or a corner) are crossed together: the
         * segment only touches the voxels beside that edge. */
        for (int k = 0; k < 3; k++)
            if (t_next[k] == t) {
                cell[k] += step[k];
                t_next[k] += t_delta[k];
                if (cell[k] < 0 || cell[k] >= size[k]) return;
            }
    }
}

/* Adds one streamline of n points (xyz: 3 floats each, world mm) to g: +1 in every voxel it
 * passes through, once.  scratch holds `capacity` (>= 2) voxel indices for this streamline
 * alone.  Returns the number of voxels counted, or -1 when capacity < 2 (nothing added). */
DM_FN long dm_tdi_add_streamline(const dm_tdi_grid *g, const float *xyz, long n,
                                 unsigned int *scratch, int capacity)
{
    if (capacity < 2) return -1;
    dm_tdi_collector c;
    c.item = scratch;
    c.capacity = capacity;
    c.lo = 0;
    long counted = 0;
    do {
        c.n = 0;
        c.hi = (long)g->nx * g->ny * g->nz;
        c.cut = 0;
        double a[3], b[3];
        dm_tdi_world_to_voxel(g->world2vox, xyz, a);
        if (n == 1) dm_tdi_walk_segment(g, a, a, &c);
        for (long i = 1; i < n; i++) {
            dm_tdi_world_to_voxel(g->world2vox, xyz + 3 * i, b);
            dm_tdi_walk_segment(g, a, b, &c);
            a[0] = b[0];
            a[1] = b[1];
            a[2] = b[2];
        }
        c.n = dm_tdi_sort_unique(c.item, c.n);
        for (int i = 0; i < c.n; i++) DM_ATOMIC_ADD_U32(&g->count[c.item[i]], 1u);
        counted += c.n;
        c.lo = c.hi;
    } while (c.cut);
    return counted;
}

/* ---- tckmap's sampled mapping ---- */

/* std::round of a float (half away from zero), exactly: x + 0.5 in float can round up
 * (0.49999997f + 0.5f == 1.0f), in double it cannot. */
DM_FN double dm_tdi_round(float x)
{
    double d = (double)x;
    return d >= 0 ? floor(d + 0.5) : -floor(0.5 - d);
}

/* The voxel index tckmap gives a sample, -1 outside the grid (or not finite).  m is the
 * scanner -> voxel matrix in float; Eigen evaluates each row of m * (p, 1) as
 * (m0 p0 + m1 p1) + (m2 p2 + m3), in float (measured against tckmap on samples within 1e-6
 * of a face). */
DM_FN long dm_tdi_sample_index(const dm_tdi_grid *g, const float m[3][4], const float p[3])
{
    int size[3] = {g->nx, g->ny, g->nz};
    long c[3];
    for (int k = 0; k < 3; k++) {
        float v = (m[k][0] * p[0] + m[k][1] * p[1]) + (m[k][2] * p[2] + m[k][3]);
        double r = dm_tdi_round(v);
        int a = g->axis[k];
        if (!(r >= 0 && r < size[a])) return -1; /* NaN fails too */
        c[a] = g->flip[k] ? size[a] - 1 - (long)r : (long)r;
    }
    return c[0] + (long)g->nx * (c[1] + (long)g->ny * c[2]);
}

/* Point j of the streamline padded by one reflected point at each end (j in [0, n + 2)), as
 * MRtrix's upsampler pads it: p0 + (p0 - p1) before, pn + (pn - pn-1) after, in float. */
DM_FN void dm_tdi_padded(const float *xyz, long n, long j, float out[3])
{
    for (int k = 0; k < 3; k++) {
        if (j == 0)
            out[k] = xyz[k] + (xyz[k] - xyz[3 + k]);
        else if (j == n + 1)
            out[k] = xyz[3 * (n - 1) + k] + (xyz[3 * (n - 1) + k] - xyz[3 * (n - 2) + k]);
        else
            out[k] = xyz[3 * (j - 1) + k];
    }
}

/* Collects the voxels of tckmap's samples of one streamline: for each segment its first
 * point then ratio - 1 Hermite points (MRtrix's Math::Hermite<float>, tension 0.1) at
 * mu = k / ratio from the four padded points around it, and the last point at the end. */
DM_FN void dm_tdi_sample_streamline(const dm_tdi_grid *g, const float m[3][4], const float *xyz,
                                    long n, int ratio, dm_tdi_collector *c)
{
    if (n <= 0) return;
    if (ratio <= 1 || n == 1) {
        for (long i = 0; i < n; i++) dm_tdi_collect(c, dm_tdi_sample_index(g, m, xyz + 3 * i));
        return;
    }
    const float t = 0.5f * 0.1f; /* Hermite(tension): t = tension / 2 */
    for (long i = 3; i < n + 2; i++) {
        float q[4][3];
        for (int j = 0; j < 4; j++) dm_tdi_padded(xyz, n, i - 3 + j, q[j]);
        dm_tdi_collect(c, dm_tdi_sample_index(g, m, q[1]));
        for (int k = 1; k < ratio; k++) {
            /* (i + 1.0) / float(ratio) in double, then set() takes it as a float */
            float mu = (float)((double)k / (double)(float)ratio);
            float p2 = mu * mu, p3 = mu * p2;
            float w[4] = {
                (0.5f - t) * (2.0f * p2 - p3 - mu), 1.0f + (1.5f + t) * p3 - (2.5f + t) * p2,
                (2.0f + 2.0f * t) * p2 + (0.5f - t) * mu - (1.5f + t) * p3, (0.5f - t) * (p3 - p2)};
            float p[3];
            /* the small matrix product M * data: the four terms summed in order */
            for (int d = 0; d < 3; d++)
                p[d] = w[0] * q[0][d] + w[1] * q[1][d] + w[2] * q[2][d] + w[3] * q[3][d];
            dm_tdi_collect(c, dm_tdi_sample_index(g, m, p));
        }
    }
    dm_tdi_collect(c, dm_tdi_sample_index(g, m, xyz + 3 * (n - 1)));
}

/* The sampled counterpart of dm_tdi_add_streamline (same scratch rules and result): tckmap's
 * samples at upsampling ratio `ratio` (values below 1 count as 1; g->ratio is not read),
 * looked up through g's s2v, axis and flip. */
DM_FN long dm_tdi_add_streamline_sampled(const dm_tdi_grid *g, const float *xyz, long n, int ratio,
                                         unsigned int *scratch, int capacity)
{
    if (capacity < 2) return -1;
    dm_tdi_collector c;
    c.item = scratch;
    c.capacity = capacity;
    c.lo = 0;
    long counted = 0;
    do {
        c.n = 0;
        c.hi = (long)g->nx * g->ny * g->nz;
        c.cut = 0;
        dm_tdi_sample_streamline(g, g->s2v, xyz, n, ratio, &c);
        c.n = dm_tdi_sort_unique(c.item, c.n);
        for (int i = 0; i < c.n; i++) DM_ATOMIC_ADD_U32(&g->count[c.item[i]], 1u);
        counted += c.n;
        c.lo = c.hi;
    } while (c.cut);
    return counted;
}

/* One streamline by the grid's mode: sampled when g->ratio >= 1, else the exact walk. */
DM_FN long dm_tdi_add(const dm_tdi_grid *g, const float *xyz, long n, unsigned int *scratch,
                      int capacity)
{
    return g->ratio >= 1 ? dm_tdi_add_streamline_sampled(g, xyz, n, g->ratio, scratch, capacity)
                         : dm_tdi_add_streamline(g, xyz, n, scratch, capacity);
}

#endif
