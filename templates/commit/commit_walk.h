/* COMMIT's dictionary walk, one source for host threads (runtime/commit/commit_dict.c,
 * commit_dirs.c) and the GPU (gpu_commit.cu): a streamline cut into pieces at the voxel
 * boundaries, each piece in the voxel of its midpoint (inside the mask) with the lookup-table
 * direction of its step, the pieces of one (voxel, direction) merged.  What the pieces are
 * (COMMIT's trk2dictionary) is said in runtime/commit/commit_dict.h.
 *
 * Every value is computed by the same operations in the same order on both (the GPU's program
 * is compiled with --fmad=false; division and square root round correctly on both), so a
 * streamline's pieces, length and norm have the same bits wherever it is cut.  The one
 * exception would be dm_walk_dir's fallback, atan2, only for a step within a billionth of a
 * radian of a bin's edge and then only if the two libraries' atan2 round that angle to
 * different sides of the bin's centre.
 *
 * No include guard.  Before including: DM_FN (storage of the functions), and DM_WALK_GROW(s, k)
 * (room in sink s for k more pieces: 0, or -1; the host grows the array, the GPU, whose sinks
 * are sized by a counting walk first, cannot). */

/* The lookup table of directions (runtime/commit/commit_dirs.h). */
typedef struct dm_walk_dirs {
    int nt, np;                  /* bins of the polar angle from +y, of the azimuth */
    const unsigned short *table; /* nt x np: the nearest direction to each bin's centre */
    const double *t_edge;        /* nt x 2: each polar bin's upper edge, (cos, sin) */
    const double *p_edge;        /* np x 2: the same for the azimuth */
} dm_walk_dirs;

/* The grid and what a walk is cut by. */
typedef struct dm_walk_geom {
    int nx, ny, nz;
    double w2v[3][4];                    /* world mm -> voxel coordinates (centres at integers) */
    double shift[3];                     /* voxel units, added to every point */
    const unsigned long long *mask_bits; /* bit v % 64 of word v / 64; NULL: every voxel */
    double min_seg;                      /* mm: pieces not longer are dropped */
    dm_walk_dirs dirs;
} dm_walk_geom;

typedef struct dm_walk_piece {
    unsigned vox; /* grid voxel, x fastest */
    unsigned short dir;
    float len;
} dm_walk_piece;

/* Where pieces go (p[0, n), room for cap; with count_only, nowhere: n counts them).  With
 * fold, a piece of the last one's voxel and direction is added to it (lengths summed in the
 * order they come) rather than appended. */
typedef struct dm_walk_sink {
    dm_walk_piece *p;
    long n, cap;
    int fold, count_only;
    unsigned last_vox;
    unsigned short last_dir;
} dm_walk_sink;

/* Bins of 0.5 degree: an orientation is taken to the direction nearest to its bin's centre,
 * at most 0.36 degree from the exact nearest one (COMMIT's table has 1-degree bins). */
#define DM_WALK_BINS_PER_RADIAN (360.0 / 3.14159265358979323846)

/* floor(x) for finite x, inline (without SSE4.1 the host library's floor is a call); the sign
 * of a zero result may differ, which no caller sees (each adds 0.5 or converts to an integer). */
DM_FN double dm_walk_floor(double x)
{
    if (!(fabs(x) < 4503599627370496.0)) return x; /* |x| >= 2^52: already an integer */
    double f = (double)(long)x;
    return f > x ? f - 1 : f;
}

DM_FN void dm_walk_to_voxel(const dm_walk_geom *g, const float *p, double v[3])
{
    for (int i = 0; i < 3; i++)
        v[i] = g->w2v[i][0] * p[0] + g->w2v[i][1] * p[1] + g->w2v[i][2] * p[2] + g->w2v[i][3] +
               g->shift[i];
}

/* The grid voxel of voxel coordinates v, -1 outside the image or the mask. */
DM_FN long dm_walk_voxel_of(const dm_walk_geom *g, const double v[3])
{
    long i = (long)dm_walk_floor(v[0] + 0.5), j = (long)dm_walk_floor(v[1] + 0.5),
         k = (long)dm_walk_floor(v[2] + 0.5);
    if (i < 0 || j < 0 || k < 0 || i >= g->nx || j >= g->ny || k >= g->nz) return -1;
    long idx = (k * g->ny + j) * g->nx + i;
    if (g->mask_bits && !(g->mask_bits[idx >> 6] >> (idx & 63) & 1)) return -1;
    return idx;
}

DM_FN int dm_walk_add(dm_walk_sink *s, unsigned vox, unsigned short dir, double len)
{
    if (s->fold && s->n > 0 && s->last_vox == vox && s->last_dir == dir) {
        if (!s->count_only) s->p[s->n - 1].len += (float)len;
        return 0;
    }
    if (!s->count_only) {
        if (s->n == s->cap && DM_WALK_GROW(s, 1) != 0) return -1;
        dm_walk_piece q;
        q.vox = vox, q.dir = dir, q.len = (float)len;
        s->p[s->n] = q;
    }
    s->n++;
    s->last_vox = vox, s->last_dir = dir;
    return 0;
}

/* ---- the direction of a step (runtime/commit/commit_dirs.h) ---- */

/* atan2(s, c) to about 1e-5 radian (a polynomial in the smaller ratio; Abramowitz and Stegun
 * 4.4.49), on the side of the branch cut that atan2 takes: a first guess of the bin. */
DM_FN double dm_walk_atan2_guess(double s, double c)
{
    const double as = fabs(s), ac = fabs(c), mx = as > ac ? as : ac, mn = as > ac ? ac : as;
    if (!(mx > 0)) return 0;
    const double t = mn / mx, t2 = t * t;
    double r =
        t * (0.9998660 + t2 * (-0.3302995 + t2 * (0.1801410 + t2 * (-0.0851330 + t2 * 0.0208351))));
    if (as > ac) r = 1.5707963267948966 - r;
    if (c < 0) r = 3.141592653589793 - r;
    return signbit(s) ? -r : r;
}

/* The bin of the angle of the vector (c, s) (of length at most `size`) among bins whose upper
 * edges are at the angles of edge[k] (cos, sin), bin k between edges k - 1 and k, searched from
 * bin g within [lo, hi] (lo's lower edge not tested when lo is 0): the side of an edge is the
 * sign of a cross product, trusted when it is above 1e-9 size (a billionth of a radian, far above
 * rounding, so atan2's bin is the same).  -1 near an edge or outside [lo, hi]. */
DM_FN int dm_walk_bin_by_edges(const double *edge, double c, double s, double size, int g, int lo,
                               int hi)
{
    const double tol = 1e-9 * size;
    for (int step = 0; step < 4; step++) {
        if (g < lo || g > hi) return -1;
        if (g > 0) {
            const double *e = edge + 2 * (g - 1), v = e[0] * s - e[1] * c; /* sin(angle - e) */
            if (v < -tol) {
                g--;
                continue;
            }
            if (!(v > tol)) return -1;
        }
        const double *e = edge + 2 * g, v = e[0] * s - e[1] * c;
        if (v > tol) {
            g++;
            continue;
        }
        return v < -tol ? g : -1;
    }
    return -1;
}

DM_FN unsigned short dm_walk_from_bins(const dm_walk_dirs *d, long a, long b)
{
    if (a >= d->nt) a = d->nt - 1;
    if (b >= d->np) b = d->np - 1;
    return d->table[(size_t)a * d->np + b];
}

/* The direction of u by the definition alone: the bins of its two angles by atan2. */
DM_FN unsigned short dm_walk_dir_exact(const dm_walk_dirs *d, const double u[3])
{
    const double pi = 3.14159265358979323846;
    double x = u[0], y = u[1], z = u[2];
    if (y < 0) x = -x, y = -y, z = -z;
    double theta = atan2(sqrt(x * x + z * z), y), phi = atan2(z, x);
    return dm_walk_from_bins(d, lround(theta * DM_WALK_BINS_PER_RADIAN),
                             lround((phi + pi) * DM_WALK_BINS_PER_RADIAN));
}

/* The bins that dm_walk_dir_exact finds (lround of the angle x DM_WALK_BINS_PER_RADIAN), without
 * its atan2s where the angles are not within a billionth of a radian of a bin's edge: the bin
 * from a guess, checked against the edges either side.  The azimuth's first and last bins (at
 * the branch cut of atan2) are left to atan2. */
DM_FN unsigned short dm_walk_dir(const dm_walk_dirs *d, const double u[3])
{
    const double pi = 3.14159265358979323846;
    double x = u[0], y = u[1], z = u[2];
    if (y < 0) x = -x, y = -y, z = -z;
    const double rho = sqrt(x * x + z * z);
    const int a = dm_walk_bin_by_edges(
        d->t_edge, y, rho, y + rho,
        (int)(dm_walk_atan2_guess(rho, y) * DM_WALK_BINS_PER_RADIAN + 0.5), 0, d->nt - 1);
    const int last = (int)(2 * pi * DM_WALK_BINS_PER_RADIAN + 0.5) - 1; /* below the cut's bin */
    const int b = a < 0
                      ? -1
                      : dm_walk_bin_by_edges(
                            d->p_edge, x, z, fabs(x) + fabs(z),
                            (int)((dm_walk_atan2_guess(z, x) + pi) * DM_WALK_BINS_PER_RADIAN + 0.5),
                            1, last < d->np - 2 ? last : d->np - 2);
    if (a < 0 || b < 0) return dm_walk_dir_exact(d, u);
    return dm_walk_from_bins(d, a, b);
}

/* ---- cutting ---- */

/* The pieces of the segment a -> b (voxel coordinates; world length wlen mm, direction dir):
 * cut where it crosses a voxel boundary (half-integer coordinates), each piece in the voxel of
 * its midpoint, counted weight x its length and dropped when that is not above the geometry's
 * min_seg.  Adds the kept pieces' length to *len. */
DM_FN int dm_walk_cut(const dm_walk_geom *g, const double a[3], const double b[3], double wlen,
                      unsigned short dir, double weight, dm_walk_sink *out, double *len)
{
    double cut[64];
    int nc = 0;
    cut[nc++] = 0;
    for (int ax = 0; ax < 3; ax++) {
        const double d = b[ax] - a[ax];
        if (d == 0) continue;
        const double lo = d > 0 ? a[ax] : b[ax], hi = d > 0 ? b[ax] : a[ax];
        for (double c = dm_walk_floor(lo + 0.5) + 0.5; c < hi && nc < 63; c += 1) {
            double t = (c - a[ax]) / d;
            if (t > 0 && t < 1) cut[nc++] = t;
        }
    }
    cut[nc++] = 1;
    /* a few cuts: insertion sort (each one held while the larger ones before it move up: no
     * pairwise swaps, whose overlapping loads and stores stall the store forwarding) */
    for (int i = 1; i < nc; i++) {
        const double x = cut[i];
        int j = i;
        for (; j > 0 && cut[j - 1] > x; j--) cut[j] = cut[j - 1];
        cut[j] = x;
    }
    for (int i = 0; i + 1 < nc; i++) {
        double piece_len = weight * ((cut[i + 1] - cut[i]) * wlen);
        if (piece_len <= g->min_seg) continue;
        double t = 0.5 * (cut[i] + cut[i + 1]), m[3];
        for (int ax = 0; ax < 3; ax++) m[ax] = a[ax] + t * (b[ax] - a[ax]);
        long vox = dm_walk_voxel_of(g, m);
        if (vox < 0) continue;
        if (dm_walk_add(out, (unsigned)vox, dir, piece_len) != 0) return -1;
        *len += piece_len;
    }
    return 0;
}

/* The segment a -> b (voxel coordinates) cut in parts of at most 16 voxels on any axis (room
 * for the cuts of dm_walk_cut). */
DM_FN int dm_walk_step(const dm_walk_geom *g, const double a[3], const double b[3], double wlen,
                       unsigned short dir, double weight, dm_walk_sink *out, double *len)
{
    double span = fabs(b[0] - a[0]);
    for (int ax = 1; ax < 3; ax++)
        if (fabs(b[ax] - a[ax]) > span) span = fabs(b[ax] - a[ax]);
    int parts = (int)-dm_walk_floor(-(span / 16.0)); /* ceil */
    if (parts <= 1) { /* most steps: the one part's ends as the loop below computes them */
        const double b1[3] = {a[0] + (b[0] - a[0]), a[1] + (b[1] - a[1]), a[2] + (b[2] - a[2])};
        return dm_walk_cut(g, a, b1, wlen, dir, weight, out, len);
    }
    for (int q = 0; q < parts; q++) {
        double a2[3], b2[3];
        for (int ax = 0; ax < 3; ax++) {
            a2[ax] = a[ax] + (b[ax] - a[ax]) * q / parts;
            b2[ax] = a[ax] + (b[ax] - a[ax]) * (q + 1) / parts;
        }
        if (dm_walk_cut(g, a2, b2, wlen / parts, dir, weight, out, len) != 0) return -1;
    }
    return 0;
}

/* The pieces of the np points p (world mm, x y z each), step by step, into out (its fold on:
 * most repeats of a (voxel, direction), consecutive pieces, merged as they come); their length
 * added to *len. */
DM_FN int dm_walk_line(const dm_walk_geom *g, const float *p, long np, dm_walk_sink *out,
                       double *len)
{
    double a[3], b[3]; /* the step's ends in voxel coordinates, b carried on as the next a */
    long at = -1;      /* the point a holds */
    for (long i = 0; i + 1 < np; i++) {
        const float *pa = p + 3 * i, *pb = p + 3 * (i + 1);
        double u[3] = {(double)pb[0] - pa[0], (double)pb[1] - pa[1], (double)pb[2] - pa[2]};
        double wlen = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
        if (!(wlen > 0)) continue;
        if (at != i) dm_walk_to_voxel(g, pa, a);
        dm_walk_to_voxel(g, pb, b);
        const unsigned short dir = dm_walk_dir(&g->dirs, u);
        if (dm_walk_step(g, a, b, wlen, dir, 1.0, out, len) != 0) return -1;
        for (int k = 0; k < 3; k++) a[k] = b[k];
        at = i + 1;
    }
    return 0;
}

/* By voxel, then direction: one comparison of a key of both (no branch between them). */
DM_FN int dm_walk_less(const dm_walk_piece *a, const dm_walk_piece *b)
{
    return ((unsigned long long)a->vox << 16 | a->dir) <
           ((unsigned long long)b->vox << 16 | b->dir);
}

/* p[0, n) sorted by voxel and direction, stably (pieces of one voxel and direction keep their
 * order, so that their lengths are summed in it): with scratch tmp (room for n), insertion
 * within runs of 8 and then merges of runs; without (the GPU's threads), insertion throughout.
 * A stable sort's result is unique: both give the same order. */
DM_FN void dm_walk_sort(dm_walk_piece *p, dm_walk_piece *tmp, long n)
{
    const long run = tmp ? 8 : n;
    for (long s = 0; s < n; s += run) {
        const long e = s + run < n ? s + run : n;
        for (long i = s + 1; i < e; i++) {
            dm_walk_piece x = p[i];
            long j = i;
            for (; j > s && dm_walk_less(&x, &p[j - 1]); j--) p[j] = p[j - 1];
            p[j] = x;
        }
    }
    if (!tmp) return;
    dm_walk_piece *from = p, *to = tmp;
    for (long w = run; w < n; w *= 2) {
        for (long s = 0; s < n; s += 2 * w) {
            const long m = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n;
            long i = s, j = m, k = s;
            if (m < e && dm_walk_less(&from[m], &from[m - 1]))
                while (i < m && j < e)
                    to[k++] = dm_walk_less(&from[j], &from[i]) ? from[j++] : from[i++];
            while (i < m) to[k++] = from[i++];
            while (j < e) to[k++] = from[j++];
        }
        dm_walk_piece *x = from;
        from = to, to = x;
    }
    if (from != p)
        for (long i = 0; i < n; i++) p[i] = from[i];
}

/* The sorted pieces p[0, n) with those of one (voxel, direction) merged, their lengths summed
 * in order: the new count.  *norm: the square root of the sum over voxels of (length in the
 * voxel)^2. */
DM_FN long dm_walk_merge(dm_walk_piece *p, long n, double *norm)
{
    long m = 0;
    double in_vox = 0, sq = 0;
    for (long i = 0; i < n; i++) {
        if (m > 0 && p[m - 1].vox == p[i].vox && p[m - 1].dir == p[i].dir)
            p[m - 1].len += p[i].len;
        else
            p[m++] = p[i];
        in_vox += p[i].len;
        if (i + 1 == n || p[i + 1].vox != p[i].vox) {
            sq += in_vox * in_vox;
            in_vox = 0;
        }
    }
    *norm = sqrt(sq);
    return m;
}
