#include "commit/commit_dict.h"

#include "io/bigalloc.h"
#include "util/error.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct dm_walk_sink;
static int pieces_reserve(struct dm_walk_sink *a, long more);
#define DM_FN static inline __attribute__((unused))
#define DM_WALK_GROW(s, k) pieces_reserve((s), (k))
#include "commit/commit_walk.h"

/* A segment before the voxels of the fit are known (its grid voxel), and a growing list of
 * them. */
typedef dm_walk_piece piece;
typedef dm_walk_sink pieces;

/* Room in a for `more` pieces beyond its n. */
static int pieces_reserve(pieces *a, long more)
{
    if (a->n + more <= a->cap) return 0;
    long cap = a->cap ? 2 * a->cap : 256;
    while (cap < a->n + more) cap *= 2;
    piece *p = realloc(a->p, (size_t)cap * sizeof *p);
    if (!p) return -1;
    a->p = p;
    a->cap = cap;
    return 0;
}

/* ---- blur ---- */

int dm_commit_blur_on(const dm_commit_dict_options *o)
{
    return o->blur_core > 0 || o->blur_gauss > 0;
}

long dm_commit_blur_copies(const dm_commit_dict_options *o, double *rho, double *angle,
                           double *weight)
{
    if (!dm_commit_blur_on(o)) {
        if (rho) rho[0] = angle[0] = 0, weight[0] = 1;
        return 1;
    }
    /* COMMIT: tmp = arange(0, R + 1e-6, spacing), then its negatives (-tmp[1:] reversed) after
     * it; the grid meshgrid(tmp, tmp) row by row (y outer, x inner), the points of r <= R */
    const double R = o->blur_core + o->blur_gauss, h = o->blur_spacing;
    const double nt = ceil((R + 1e-6) / h);
    if (!(nt >= 1) || (2 * nt - 1) * (2 * nt - 1) > 100000)
        return dm_set_error("commit: a blur of extent %g mm on a grid of %g mm has too many copies "
                            "(over 100000 grid points): a coarser --blur-spacing",
                            R, h);
    const long n = (long)nt, m = 2 * n - 1;
    double sigma = 0;
    if (o->blur_gauss > 0) /* COMMIT keeps sigma in single precision (a cdef float) */
        sigma = (float)(o->blur_gauss / sqrt(-2.0 * log(o->blur_gauss_min)));
    long k = 0;
    for (long iy = 0; iy < m; iy++)
        for (long ix = 0; ix < m; ix++) {
            double y = iy < n ? iy * h : -((m - iy) * h), x = ix < n ? ix * h : -((m - ix) * h);
            double r = sqrt(x * x + y * y);
            if (!(r <= R)) continue;
            double w = 1;
            if (o->blur_gauss > 0 && r > o->blur_core)
                w = exp(-(r - o->blur_core) * (r - o->blur_core) / (2.0 * sigma * sigma));
            if (w < 1e-3) continue; /* COMMIT skips them as it carries the copies along */
            if (rho) rho[k] = r, angle[k] = atan2(y, x), weight[k] = w;
            k++;
        }
    return k;
}

/* The blur's copies and the frame they are placed in. */
typedef struct {
    long n;                  /* copies, the central one (rho 0) first */
    double *rho, *angle, *w; /* n each */
    double v2w[3][3];        /* voxel -> world, the linear part */
    double pix[3];           /* voxel sizes: the columns' norms of v2w */
} blur_table;

static void cross(const double a[3], const double b[3], double c[3])
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

static double normalise(double v[3])
{
    double n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (n > 0)
        for (int i = 0; i < 3; i++) v[i] /= n;
    return n;
}

static void world_to_voxel(const dm_walk_geom *g, const double p[3], double v[3])
{
    for (int i = 0; i < 3; i++)
        v[i] = g->w2v[i][0] * p[0] + g->w2v[i][1] * p[1] + g->w2v[i][2] * p[2] + g->w2v[i][3] +
               g->shift[i];
}

/* The copies of streamline s other than the central one, their pieces appended to out (weight
 * x length each).  As COMMIT: each copy starts at its grid point in the plane through the first
 * point perpendicular to the first step, the grid's axes from COMMIT's frame (the voxel axes
 * scaled to mm: n = (d_y - d_z, d_z - d_x, d_x - d_y) of the first step d there, turned by the
 * copy's angle about d); at each point P_i the copies move along the step P_i - P_{i-1} up to
 * the plane through P_i that bisects that step and the next (the last point: perpendicular to
 * its step), a copy that would move backwards staying where it is.  The world frame, so lengths
 * and planes are the world's (COMMIT's frame is the same for an affine without shear). */
static int blur_pieces(const dm_tck *t, long s, const dm_walk_geom *g, const blur_table *bl,
                       pieces *out)
{
    const float *p = t->xyz + 3 * t->start[s];
    const long np = t->npoints[s], nc = bl->n - 1;
    if (np < 2 || nc < 1) return 0;
    long i0 = 0; /* the first step of nonzero length */
    double d[3] = {0, 0, 0};
    for (; i0 + 1 < np; i0++) {
        for (int a = 0; a < 3; a++) d[a] = (double)p[3 * (i0 + 1) + a] - p[3 * i0 + a];
        if (normalise(d) > 0) break;
    }
    if (i0 + 1 >= np) return 0;
    /* the first step in COMMIT's frame: dc = diag(pix) W d; its normal n there */
    double dc[3], nc_[3], m[3];
    for (int i = 0; i < 3; i++)
        dc[i] = bl->pix[i] * (g->w2v[i][0] * d[0] + g->w2v[i][1] * d[1] + g->w2v[i][2] * d[2]);
    normalise(dc);
    nc_[0] = dc[1] - dc[2];
    nc_[1] = dc[2] - dc[0];
    nc_[2] = dc[0] - dc[1];
    if (!(normalise(nc_) > 1e-12)) { /* d along (1, 1, 1): COMMIT's n is 0 (all copies on the
                                        streamline); any normal here */
        const double ex[3] = {1, 0, 0};
        cross(dc, ex, nc_);
        normalise(nc_);
    }
    cross(dc, nc_, m);
    double *pos = malloc((size_t)nc * 3 * sizeof *pos);
    if (!pos) return -1;
    for (long k = 0; k < nc; k++) {
        const double ca = cos(bl->angle[k + 1]), sa = sin(bl->angle[k + 1]);
        double rc[3], rw[3];
        for (int i = 0; i < 3; i++) rc[i] = (ca * nc_[i] + sa * m[i]) / bl->pix[i];
        for (int i = 0; i < 3; i++)
            rw[i] = bl->v2w[i][0] * rc[0] + bl->v2w[i][1] * rc[1] + bl->v2w[i][2] * rc[2];
        normalise(rw);
        for (int i = 0; i < 3; i++) pos[3 * k + i] = (double)p[3 * i0 + i] + bl->rho[k + 1] * rw[i];
    }
    double dummy = 0;
    int rc = 0;
    for (long i = i0 + 1; i < np && rc == 0; i++) {
        double d1[3], d2[3], nn[3], S[3];
        for (int a = 0; a < 3; a++) {
            S[a] = p[3 * i + a];
            d1[a] = S[a] - p[3 * (i - 1) + a];
        }
        if (!(normalise(d1) > 0)) continue;
        for (int a = 0; a < 3; a++) d2[a] = i + 1 < np ? (double)p[3 * (i + 1) + a] - S[a] : 0;
        if (!(normalise(d2) > 0)) memcpy(d2, d1, sizeof d2);
        for (int a = 0; a < 3; a++) nn[a] = 0.5 * (d1[a] + d2[a]);
        double dot = d1[0] * nn[0] + d1[1] * nn[1] + d1[2] * nn[2];
        if (dot > 1e-9)
            for (int a = 0; a < 3; a++) nn[a] /= dot;
        else /* a full turn back: the plane perpendicular to the step */
            memcpy(nn, d1, sizeof nn);
        const unsigned short dir = dm_walk_dir(&g->dirs, d1); /* the same for every copy */
        for (long k = 0; k < nc && rc == 0; k++) {
            double *P = pos + 3 * k, Q[3], va[3], vb[3];
            double len = (S[0] - P[0]) * nn[0] + (S[1] - P[1]) * nn[1] + (S[2] - P[2]) * nn[2];
            if (!(len > 0)) continue;
            for (int a = 0; a < 3; a++) Q[a] = P[a] + d1[a] * len;
            world_to_voxel(g, P, va);
            world_to_voxel(g, Q, vb);
            rc = dm_walk_step(g, va, vb, len, dir, bl->w[k + 1], out, &dummy);
            memcpy(P, Q, sizeof Q);
        }
    }
    free(pos);
    return rc;
}

static void blur_table_free(blur_table *b)
{
    free(b->rho);
    free(b->angle);
    free(b->w);
    memset(b, 0, sizeof *b);
}

/* The copies of o's blur and the grid's voxel -> world matrix and voxel sizes.  0, or -1 with
 * the error set. */
static int blur_table_make(const dm_commit_grid *g, const dm_commit_dict_options *o, blur_table *b)
{
    memset(b, 0, sizeof *b);
    long n = dm_commit_blur_copies(o, NULL, NULL, NULL);
    if (n < 0) return -1;
    b->rho = malloc((size_t)n * sizeof *b->rho);
    b->angle = malloc((size_t)n * sizeof *b->angle);
    b->w = malloc((size_t)n * sizeof *b->w);
    if (!b->rho || !b->angle || !b->w) {
        blur_table_free(b);
        return dm_set_error("commit: out of memory for the blur");
    }
    b->n = dm_commit_blur_copies(o, b->rho, b->angle, b->w);
    /* the inverse of w2v's linear part, by cofactors */
    const double(*W)[4] = g->w2v;
    double det = W[0][0] * (W[1][1] * W[2][2] - W[1][2] * W[2][1]) -
                 W[0][1] * (W[1][0] * W[2][2] - W[1][2] * W[2][0]) +
                 W[0][2] * (W[1][0] * W[2][1] - W[1][1] * W[2][0]);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            const int j1 = (j + 1) % 3, j2 = (j + 2) % 3, i1 = (i + 1) % 3, i2 = (i + 2) % 3;
            b->v2w[i][j] = (W[j1][i1] * W[j2][i2] - W[j1][i2] * W[j2][i1]) / det;
        }
    for (int j = 0; j < 3; j++)
        b->pix[j] = sqrt(b->v2w[0][j] * b->v2w[0][j] + b->v2w[1][j] * b->v2w[1][j] +
                         b->v2w[2][j] * b->v2w[2][j]);
    return 0;
}

static int piece_order(const void *x, const void *y)
{
    const piece *a = x, *b = y;
    if (a->vox != b->vox) return a->vox < b->vox ? -1 : 1;
    if (a->dir != b->dir) return a->dir < b->dir ? -1 : 1;
    return 0;
}

/* The pieces sorted by voxel and direction, those of one (voxel, direction) summed. */
static void merge_sorted(pieces *out)
{
    qsort(out->p, (size_t)out->n, sizeof *out->p, piece_order);
    long m = 0;
    for (long i = 0; i < out->n;) {
        double sum = 0;
        long j = i;
        for (; j < out->n && piece_order(&out->p[i], &out->p[j]) == 0; j++) sum += out->p[j].len;
        out->p[m] = out->p[i];
        out->p[m++].len = (float)sum;
        i = j;
    }
    out->n = m;
}

/* Streamline s's merged pieces (sorted by voxel, then direction) into out (tmp: scratch); its
 * length and norm (with bl: its blur's copies too; the length stays the central copy's). */
static int streamline_pieces(const dm_tck *t, long s, const dm_walk_geom *g, const blur_table *bl,
                             pieces *out, pieces *tmp, double *length, double *norm)
{
    out->n = 0;
    out->fold = !bl; /* the blur's pieces are merged by merge_sorted, in its own order */
    *length = 0;
    *norm = 0;
    if (dm_walk_line(g, t->xyz + 3 * t->start[s], t->npoints[s], out, length) != 0) return -1;
    if (bl) {
        if (blur_pieces(t, s, g, bl, out) != 0) return -1;
        if (out->n > 0) merge_sorted(out);
    }
    if (out->n == 0) return 0;
    if (!bl) { /* a streamline without blur: few pieces, sorted stably */
        tmp->n = 0;
        if (pieces_reserve(tmp, out->n) != 0) return -1;
        dm_walk_sort(out->p, tmp->p, out->n);
    }
    out->n = dm_walk_merge(out->p, out->n, norm);
    return 0;
}

unsigned long long *dm_commit_mask_bits(const dm_commit_grid *g, int threads)
{
    const long nvox = (long)g->nx * g->ny * g->nz, nw = nvox / 64 + 1;
    unsigned long long *bits = malloc((size_t)nw * sizeof *bits);
    if (!bits) return NULL;
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
    for (long w = 0; w < nw; w++) {
        unsigned long long b = 0;
        for (long v = 64 * w; v < 64 * w + 64 && v < nvox; v++)
            b |= (unsigned long long)(!g->mask || g->mask[v] != 0) << (v & 63);
        bits[w] = b;
    }
    return bits;
}

int dm_commit_dict_begin(dm_commit_dict *d, long nstr)
{
    memset(d, 0, sizeof *d);
    const size_t n = (size_t)(nstr ? nstr : 1);
    d->nstr = nstr;
    d->kept = calloc(n, 1);
    d->length = calloc(n, sizeof *d->length);
    d->norm = calloc(n, sizeof *d->norm);
    d->column = malloc(n * sizeof *d->column);
    d->str_start = malloc((n + 1) * sizeof *d->str_start);
    if (d->kept && d->length && d->norm && d->column && d->str_start) return 0;
    dm_commit_dict_free(d);
    return dm_set_error("commit: out of memory for the dictionary");
}

void dm_commit_dict_columns(dm_commit_dict *d, const long *count)
{
    long nseg = 0, nk = 0;
    for (long s = 0; s < d->nstr; s++) {
        d->column[s] = d->kept[s] ? nk : -1;
        if (d->kept[s]) {
            d->str_start[nk++] = nseg;
            nseg += count[s];
        }
    }
    d->str_start[nk] = nseg;
    d->nkept = nk;
    d->nseg = nseg;
}

/* The walk's view of the grid, the options and the directions (mask: the grid's in bits). */
static dm_walk_geom walk_geom(const dm_commit_grid *g, const dm_commit_dirs *dirs,
                              const dm_commit_dict_options *o, const unsigned long long *mask)
{
    dm_walk_geom w;
    memset(&w, 0, sizeof w);
    w.nx = g->nx, w.ny = g->ny, w.nz = g->nz;
    memcpy(w.w2v, g->w2v, sizeof w.w2v);
    memcpy(w.shift, o->shift, sizeof w.shift);
    w.mask_bits = mask;
    w.min_seg = o->min_seg_len;
    w.dirs = (dm_walk_dirs){dirs->nt, dirs->np, dirs->table, dirs->t_edge, dirs->p_edge};
    return w;
}

int dm_commit_dict_cut(const dm_tck *t, long first, long end, const dm_commit_grid *g_in,
                       const dm_commit_dirs *dirs, const dm_commit_dict_options *o,
                       dm_commit_dict *d)
{
    const long n = t->count;
    if ((size_t)g_in->nx * g_in->ny * g_in->nz > UINT_MAX)
        return dm_set_error("commit: an image of more than %u voxels is not supported", UINT_MAX);
    if (dm_commit_dict_begin(d, n) != 0) return -1;
    const int nt = o->threads > 0 ? o->threads : 1;
    unsigned long long *bits = g_in->mask ? dm_commit_mask_bits(g_in, nt) : NULL;
    const dm_walk_geom geom = walk_geom(g_in, dirs, o, bits), *g = &geom;
    blur_table bt, *blur = NULL;
    memset(&bt, 0, sizeof bt);
    long *count = calloc((size_t)n + 1, sizeof *count);
    /* each streamline's merged pieces, appended to its thread's arena (which thread and where
     * recorded per streamline), then copied into place in streamline order */
    pieces *arena = calloc((size_t)nt, sizeof *arena);
    long *at_arena = malloc((size_t)(n ? n : 1) * sizeof *at_arena);
    int *in_arena = malloc((size_t)(n ? n : 1) * sizeof *in_arena);
    int failed = (g_in->mask && !bits) || !count || !arena || !at_arena || !in_arena;
    if (failed) goto oom;
    if (dm_commit_blur_on(o)) {
        if (blur_table_make(g_in, o, &bt) != 0) goto fail;
        blur = &bt;
    }
    /* each arena sized for its share of the steps (most streamlines have fewer merged pieces
     * than points), in huge pages: fewer page faults as it fills; it grows if that is short */
    const long share = (t->start[end] - t->start[first]) / nt + 4096;
    for (int k = 0; k < nt && !failed; k++) {
        arena[k].p = dm_big_alloc((size_t)share * sizeof *arena[k].p);
        arena[k].cap = share;
        failed = !arena[k].p;
    }
    if (failed) goto oom;
#pragma omp parallel num_threads(nt) reduction(| : failed)
    {
        const int me = omp_get_thread_num();
        pieces buf = {0}, tmp = {0};
#pragma omp for schedule(dynamic, 64)
        for (long s = first; s < end; s++) {
            if (failed) continue;
            double len, norm;
            /* COMMIT's blur_apply_to: a streamline left out of the blur is its line alone */
            const blur_table *bl = o->blur_apply && !o->blur_apply[s] ? NULL : blur;
            if (streamline_pieces(t, s, g, bl, &buf, &tmp, &len, &norm) != 0) {
                failed = 1;
                continue;
            }
            if (!(buf.n > 0 && len > o->min_len && len < o->max_len)) continue;
            d->kept[s] = 1;
            d->length[s] = (float)len;
            d->norm[s] = (float)norm;
            count[s] = buf.n;
            in_arena[s] = me;
            at_arena[s] = arena[me].n;
            if (pieces_reserve(&arena[me], buf.n) != 0) {
                failed = 1;
                continue;
            }
            memcpy(arena[me].p + arena[me].n, buf.p, (size_t)buf.n * sizeof *buf.p);
            arena[me].n += buf.n;
        }
        free(buf.p);
        free(tmp.p);
    }
    if (failed) goto oom;
    dm_commit_dict_columns(d, count);
    const long nseg = d->nseg;
    d->seg_vox = dm_big_alloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_vox);
    d->seg_dir = dm_big_alloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_dir);
    d->seg_len = dm_big_alloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_len);
    if (!d->seg_vox || !d->seg_dir || !d->seg_len) goto oom;
#pragma omp parallel for schedule(dynamic, 256) num_threads(nt)
    for (long s = first; s < end; s++) {
        if (!d->kept[s]) continue;
        const piece *src = arena[in_arena[s]].p + at_arena[s];
        const long at = d->str_start[d->column[s]];
        for (long i = 0; i < count[s]; i++) {
            d->seg_vox[at + i] = src[i].vox;
            d->seg_dir[at + i] = src[i].dir;
            d->seg_len[at + i] = src[i].len;
        }
    }
    for (int k = 0; k < nt; k++) free(arena[k].p);
    free(arena);
    free(at_arena);
    free(in_arena);
    free(count);
    blur_table_free(&bt);
    free(bits);
    return 0;
oom:
    dm_set_error("commit: out of memory for the dictionary");
fail:
    for (int k = 0; arena && k < nt; k++) free(arena[k].p);
    free(arena);
    free(at_arena);
    free(in_arena);
    free(count);
    blur_table_free(&bt);
    free(bits);
    dm_commit_dict_free(d);
    return -1;
}

int dm_commit_dict_index(dm_commit_dict *d, size_t nvox_grid, int threads)
{
    const long nseg = d->nseg;
    const int nt = threads > 0 ? threads : 1;
    const size_t ng = nvox_grid ? nvox_grid : 1;
    /* the grid voxels the segments reach marked (by every thread: the same byte, so no
     * merge; written only when not yet marked, so that threads share the lines they read
     * rather than pass them to each other at every write), then numbered in grid order;
     * seg_vox taken from grid voxels to those numbers */
    unsigned char *reached = calloc(ng, 1);
    unsigned *fit_index = malloc(ng * sizeof *fit_index);
    if (!reached || !fit_index) {
        free(reached);
        free(fit_index);
        return dm_set_error("commit: out of memory for the dictionary");
    }
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long k = 0; k < nseg; k++) {
        unsigned char seen;
#pragma omp atomic read
        seen = reached[d->seg_vox[k]];
        if (!seen) {
#pragma omp atomic write
            reached[d->seg_vox[k]] = 1;
        }
    }
    long nv = 0;
    for (size_t v = 0; v < nvox_grid; v++) nv += reached[v];
    free(d->vox);
    d->vox = malloc((size_t)(nv ? nv : 1) * sizeof *d->vox);
    if (!d->vox) {
        free(reached);
        free(fit_index);
        return dm_set_error("commit: out of memory for the dictionary");
    }
    nv = 0;
    for (size_t v = 0; v < nvox_grid; v++)
        if (reached[v]) {
            fit_index[v] = (unsigned)nv;
            d->vox[nv++] = (long)v;
        }
    d->nvox = nv;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long k = 0; k < nseg; k++) d->seg_vox[k] = fit_index[d->seg_vox[k]];
    free(reached);
    free(fit_index);
    return 0;
}

int dm_commit_dict_build(const dm_tck *t, const dm_commit_grid *g, const dm_commit_dirs *dirs,
                         const dm_commit_dict_options *o, dm_commit_dict *d)
{
    if (dm_commit_dict_cut(t, 0, t->count, g, dirs, o, d) != 0) return -1;
    if (dm_commit_dict_index(d, (size_t)g->nx * g->ny * g->nz, o->threads) == 0) return 0;
    dm_commit_dict_free(d);
    return -1;
}

void dm_commit_dict_free(dm_commit_dict *d)
{
    free(d->kept);
    free(d->length);
    free(d->norm);
    free(d->column);
    free(d->str_start);
    free(d->seg_vox);
    free(d->seg_dir);
    free(d->seg_len);
    free(d->vox);
    memset(d, 0, sizeof *d);
}
