#include "commit/commit_dict.h"

#include "util/error.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* A segment before the voxels of the fit are known: its grid voxel. */
typedef struct {
    long vox;
    unsigned short dir;
    float len;
} piece;

typedef struct {
    piece *p;
    long n, cap;
} pieces;

static int pieces_add(pieces *a, long vox, unsigned short dir, double len)
{
    if (a->n == a->cap) {
        long cap = a->cap ? 2 * a->cap : 256;
        piece *p = realloc(a->p, (size_t)cap * sizeof *p);
        if (!p) return -1;
        a->p = p;
        a->cap = cap;
    }
    a->p[a->n++] = (piece){vox, dir, (float)len};
    return 0;
}

static void to_voxel(const dm_commit_grid *g, const double shift[3], const float *p, double v[3])
{
    for (int i = 0; i < 3; i++)
        v[i] = g->w2v[i][0] * p[0] + g->w2v[i][1] * p[1] + g->w2v[i][2] * p[2] + g->w2v[i][3] +
               shift[i];
}

/* The grid voxel of voxel coordinates v, -1 outside the image or the mask. */
static long voxel_of(const dm_commit_grid *g, const double v[3])
{
    long i = (long)floor(v[0] + 0.5), j = (long)floor(v[1] + 0.5), k = (long)floor(v[2] + 0.5);
    if (i < 0 || j < 0 || k < 0 || i >= g->nx || j >= g->ny || k >= g->nz) return -1;
    long idx = (k * g->ny + j) * g->nx + i;
    return g->mask && !g->mask[idx] ? -1 : idx;
}

/* The pieces of the segment a -> b (voxel coordinates; world length wlen mm, world direction
 * u): cut where it crosses a voxel boundary (half-integer coordinates), each piece in the voxel
 * of its midpoint.  Adds the kept length to *len. */
static int walk(const dm_commit_grid *g, const dm_commit_dirs *dirs, const double a[3],
                const double b[3], double wlen, const double u[3], double min_seg, pieces *out,
                double *len)
{
    double cut[64];
    int nc = 0;
    cut[nc++] = 0;
    for (int ax = 0; ax < 3; ax++) {
        double lo = fmin(a[ax], b[ax]), hi = fmax(a[ax], b[ax]), d = b[ax] - a[ax];
        if (d == 0) continue;
        for (double c = floor(lo + 0.5) + 0.5; c < hi && nc < 63; c += 1) {
            double t = (c - a[ax]) / d;
            if (t > 0 && t < 1) cut[nc++] = t;
        }
    }
    cut[nc++] = 1;
    /* a few cuts: insertion sort */
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0 && cut[j - 1] > cut[j]; j--) {
            double s = cut[j];
            cut[j] = cut[j - 1];
            cut[j - 1] = s;
        }
    const unsigned short dir = dm_commit_dirs_index(dirs, u);
    for (int i = 0; i + 1 < nc; i++) {
        double piece_len = (cut[i + 1] - cut[i]) * wlen;
        if (piece_len <= min_seg) continue;
        double t = 0.5 * (cut[i] + cut[i + 1]), m[3];
        for (int ax = 0; ax < 3; ax++) m[ax] = a[ax] + t * (b[ax] - a[ax]);
        long vox = voxel_of(g, m);
        if (vox < 0) continue;
        if (pieces_add(out, vox, dir, piece_len) != 0) return -1;
        *len += piece_len;
    }
    return 0;
}

/* Streamline s's merged pieces (sorted by voxel, then direction) into out; its length and norm. */
static int streamline_pieces(const dm_tck *t, long s, const dm_commit_grid *g,
                             const dm_commit_dirs *dirs, const dm_commit_dict_options *o,
                             pieces *out, double *length, double *norm)
{
    out->n = 0;
    *length = 0;
    *norm = 0;
    const float *p = t->xyz + 3 * t->start[s];
    const long np = t->npoints[s];
    for (long i = 0; i + 1 < np; i++) {
        const float *pa = p + 3 * i, *pb = p + 3 * (i + 1);
        double u[3] = {(double)pb[0] - pa[0], (double)pb[1] - pa[1], (double)pb[2] - pa[2]};
        double wlen = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
        if (!(wlen > 0)) continue;
        double a[3], b[3];
        to_voxel(g, o->shift, pa, a);
        to_voxel(g, o->shift, pb, b);
        /* a long segment is walked in parts of at most 16 voxels on any axis (room for cuts) */
        double span = fmax(fabs(b[0] - a[0]), fmax(fabs(b[1] - a[1]), fabs(b[2] - a[2])));
        int parts = (int)ceil(span / 16.0);
        if (parts < 1) parts = 1;
        for (int q = 0; q < parts; q++) {
            double a2[3], b2[3];
            for (int ax = 0; ax < 3; ax++) {
                a2[ax] = a[ax] + (b[ax] - a[ax]) * q / parts;
                b2[ax] = a[ax] + (b[ax] - a[ax]) * (q + 1) / parts;
            }
            if (walk(g, dirs, a2, b2, wlen / parts, u, o->min_seg_len, out, length) != 0) return -1;
        }
    }
    if (out->n == 0) return 0;
    /* most repeats of a (voxel, direction) are consecutive pieces: merge those first, then sort
     * the few left by voxel and direction (insertion: a streamline holds tens of them) */
    long c = 0;
    for (long i = 0; i < out->n; i++) {
        if (c > 0 && out->p[c - 1].vox == out->p[i].vox && out->p[c - 1].dir == out->p[i].dir)
            out->p[c - 1].len += out->p[i].len;
        else
            out->p[c++] = out->p[i];
    }
    out->n = c;
    for (long i = 1; i < out->n; i++) {
        piece x = out->p[i];
        long j = i;
        for (; j > 0 && (out->p[j - 1].vox > x.vox ||
                         (out->p[j - 1].vox == x.vox && out->p[j - 1].dir > x.dir));
             j--)
            out->p[j] = out->p[j - 1];
        out->p[j] = x;
    }
    long m = 0;
    double in_vox = 0, sq = 0;
    for (long i = 0; i < out->n; i++) {
        if (m > 0 && out->p[m - 1].vox == out->p[i].vox && out->p[m - 1].dir == out->p[i].dir)
            out->p[m - 1].len += out->p[i].len;
        else
            out->p[m++] = out->p[i];
        in_vox += out->p[i].len;
        if (i + 1 == out->n || out->p[i + 1].vox != out->p[i].vox) {
            sq += in_vox * in_vox;
            in_vox = 0;
        }
    }
    out->n = m;
    *norm = sqrt(sq);
    return 0;
}

int dm_commit_dict_cut(const dm_tck *t, long first, long end, const dm_commit_grid *g,
                       const dm_commit_dirs *dirs, const dm_commit_dict_options *o,
                       dm_commit_dict *d)
{
    memset(d, 0, sizeof *d);
    const long n = t->count;
    if ((size_t)g->nx * g->ny * g->nz > UINT_MAX)
        return dm_set_error("commit: an image of more than %u voxels is not supported", UINT_MAX);
    d->nstr = n;
    d->kept = calloc((size_t)(n ? n : 1), 1);
    d->length = calloc((size_t)(n ? n : 1), sizeof *d->length);
    d->norm = calloc((size_t)(n ? n : 1), sizeof *d->norm);
    d->column = malloc((size_t)(n ? n : 1) * sizeof *d->column);
    long *count = calloc((size_t)n + 1, sizeof *count);
    int failed = !d->kept || !d->length || !d->norm || !d->column || !count;
    /* each streamline's merged pieces, appended to its thread's arena (which thread and where
     * recorded per streamline), then copied into place in streamline order */
    const int nt = o->threads > 0 ? o->threads : 1;
    pieces *arena = calloc((size_t)nt, sizeof *arena);
    long *at_arena = malloc((size_t)(n ? n : 1) * sizeof *at_arena);
    int *in_arena = malloc((size_t)(n ? n : 1) * sizeof *in_arena);
    if (failed || !arena || !at_arena || !in_arena) goto oom;
#pragma omp parallel num_threads(nt) reduction(| : failed)
    {
        const int me = omp_get_thread_num();
        pieces buf = {0};
#pragma omp for schedule(dynamic, 64)
        for (long s = first; s < end; s++) {
            if (failed) continue;
            double len, norm;
            if (streamline_pieces(t, s, g, dirs, o, &buf, &len, &norm) != 0) {
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
            for (long i = 0; i < buf.n && !failed; i++)
                failed = pieces_add(&arena[me], buf.p[i].vox, buf.p[i].dir, buf.p[i].len) != 0;
        }
        free(buf.p);
    }
    if (failed) goto oom;
    d->str_start = malloc((size_t)(n + 1) * sizeof *d->str_start);
    if (!d->str_start) goto oom;
    long nseg = 0, nk = 0;
    for (long s = 0; s < n; s++) {
        d->column[s] = d->kept[s] ? nk : -1;
        if (d->kept[s]) {
            d->str_start[nk++] = nseg;
            nseg += count[s];
        }
    }
    d->str_start[nk] = nseg;
    d->nkept = nk;
    d->nseg = nseg;
    d->seg_vox = malloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_vox);
    d->seg_dir = malloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_dir);
    d->seg_len = malloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_len);
    if (!d->seg_vox || !d->seg_dir || !d->seg_len) goto oom;
#pragma omp parallel for schedule(dynamic, 256) num_threads(nt)
    for (long s = first; s < end; s++) {
        if (!d->kept[s]) continue;
        const piece *src = arena[in_arena[s]].p + at_arena[s];
        const long at = d->str_start[d->column[s]];
        for (long i = 0; i < count[s]; i++) {
            d->seg_vox[at + i] = (unsigned)src[i].vox;
            d->seg_dir[at + i] = src[i].dir;
            d->seg_len[at + i] = src[i].len;
        }
    }
    for (int k = 0; k < nt; k++) free(arena[k].p);
    free(arena);
    free(at_arena);
    free(in_arena);
    free(count);
    return 0;
oom:
    for (int k = 0; arena && k < nt; k++) free(arena[k].p);
    free(arena);
    free(at_arena);
    free(in_arena);
    free(count);
    dm_commit_dict_free(d);
    return dm_set_error("commit: out of memory for the dictionary");
}

int dm_commit_dict_index(dm_commit_dict *d, size_t nvox_grid, int threads)
{
    const long nseg = d->nseg;
    const int nt = threads > 0 ? threads : 1;
    long *fit_index = malloc((nvox_grid ? nvox_grid : 1) * sizeof *fit_index);
    if (!fit_index) return dm_set_error("commit: out of memory for the dictionary");
    for (size_t v = 0; v < nvox_grid; v++) fit_index[v] = -1;
    for (long k = 0; k < nseg; k++) fit_index[d->seg_vox[k]] = 0;
    long nv = 0;
    for (size_t v = 0; v < nvox_grid; v++)
        if (fit_index[v] == 0) nv++;
    free(d->vox);
    d->vox = malloc((size_t)(nv ? nv : 1) * sizeof *d->vox);
    if (!d->vox) {
        free(fit_index);
        return dm_set_error("commit: out of memory for the dictionary");
    }
    nv = 0;
    for (size_t v = 0; v < nvox_grid; v++)
        if (fit_index[v] == 0) {
            fit_index[v] = nv;
            d->vox[nv++] = (long)v;
        }
    d->nvox = nv;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long k = 0; k < nseg; k++) d->seg_vox[k] = (unsigned)fit_index[d->seg_vox[k]];
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
