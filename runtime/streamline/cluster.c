/* Streamline clustering as dicelib's (cluster.h).  Sequential by nature: a streamline's cluster
 * depends on the centroids left by those before it.  What makes it fast is where it looks: the
 * mean point-wise distance is at least the distance between the two barycentres (the mean of
 * the point differences, whichever orientation), so only centroids whose barycentre lies within
 * the threshold can be joined; they are found in a hash grid of cells one threshold wide (the 27
 * cells around).  Ties go to the lower cluster index, as dicelib's first-found minimum. */
#include "streamline/cluster.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dicelib's set_number_of_points in single precision: cumulative lengths, a step of
 * length / (npts - 1), points interpolated where the running step falls; the last point the
 * streamline's own.  A streamline of exactly npts points is taken as it is, as dicelib does. */
static void resample(const float *p, long n, int npts, float *out, float *len)
{
    if (n == npts || n < 2) {
        for (int j = 0; j < npts; j++)
            memcpy(out + 3 * j, p + 3 * (n == npts ? j : 0), 3 * sizeof *out);
        return;
    }
    len[0] = 0;
    for (long i = 1; i < n; i++) {
        const float dx = p[3 * i] - p[3 * i - 3], dy = p[3 * i + 1] - p[3 * i - 2],
                    dz = p[3 * i + 2] - p[3 * i - 1];
        len[i] = len[i - 1] + sqrtf(dx * dx + dy * dy + dz * dz);
    }
    const float total = len[n - 1], step = total / (float)(npts - 1);
    float sum = 0;
    long i = 0;
    int j = 0;
    memcpy(out, p, 3 * sizeof *out);
    while (sum < total && j < npts && i < n) {
        if (sum == len[i]) {
            memcpy(out + 3 * j, p + 3 * i, 3 * sizeof *out);
            j++;
            sum += step;
        } else if (sum < len[i]) {
            const float ratio = 1 - ((len[i] - sum) / (len[i] - len[i - 1]));
            for (int k = 0; k < 3; k++)
                out[3 * j + k] = p[3 * (i - 1) + k] + ratio * (p[3 * i + k] - p[3 * (i - 1) + k]);
            j++;
            sum += step;
        } else {
            i++;
        }
    }
    memcpy(out + 3 * (npts - 1), p + 3 * (n - 1), 3 * sizeof *out);
}

/* dicelib's mean point-wise distance of s to c, the better orientation (*flip: s reversed; a tie
 * counts as reversed, as dicelib), summed over the points of c in order. */
static float mean_dist(const float *c, const float *s, int npts, int *flip)
{
    float dd = 0, di = 0;
    for (int j = 0; j < npts; j++) {
        const float *a = c + 3 * j, *b = s + 3 * j, *r = s + 3 * (npts - 1 - j);
        const float x = a[0] - b[0], y = a[1] - b[1], z = a[2] - b[2];
        dd += sqrtf(x * x + y * y + z * z);
        const float u = a[0] - r[0], v = a[1] - r[1], w = a[2] - r[2];
        di += sqrtf(u * u + v * v + w * w);
    }
    *flip = !(dd < di);
    return (dd < di ? dd : di) / (float)npts;
}

/* the hash grid of the centroids' barycentres; a cell holds its centroids' barycentres with
 * them (scanned in memory order) and pos[] where each centroid sits in its cell */
enum { NPTS = DM_STREAMLINE_CLUSTER_POINTS, NFOLD = NPTS / 2 };

typedef struct {
    float b[3];        /* barycentre */
    float f[NFOLD][3]; /* folded curve: point j plus point NPTS-1-j */
    int id;
} entry;

typedef struct {
    int64_t key; /* INT64_MIN: free */
    int n, cap;
    entry *e;
} cell;

typedef struct {
    cell *cells;
    long cap, used;
    double h;
    int *pos;
} grid;

static int64_t key_of(int64_t x, int64_t y, int64_t z)
{
    return ((x + 1048576) * 2097152 + y + 1048576) * 2097152 + z + 1048576;
}

static int64_t cell_key(const float b[3], double h)
{
    return key_of((int64_t)floor(b[0] / h), (int64_t)floor(b[1] / h), (int64_t)floor(b[2] / h));
}

static long find_slot(const grid *g, int64_t key)
{
    uint64_t x = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    long s = (long)(x >> 20) & (g->cap - 1);
    while (g->cells[s].key != INT64_MIN && g->cells[s].key != key) s = (s + 1) & (g->cap - 1);
    return s;
}

static int grid_grow(grid *g)
{
    grid n = *g;
    n.cap = g->cap * 2;
    if (!(n.cells = calloc((size_t)n.cap, sizeof(cell)))) return -1;
    for (long s = 0; s < n.cap; s++) n.cells[s].key = INT64_MIN;
    for (long s = 0; s < g->cap; s++)
        if (g->cells[s].key != INT64_MIN) n.cells[find_slot(&n, g->cells[s].key)] = g->cells[s];
    free(g->cells);
    *g = n;
    return 0;
}

static void fold(const float *c, float f[NFOLD][3])
{
    for (int j = 0; j < NFOLD; j++)
        for (int a = 0; a < 3; a++) f[j][a] = c[3 * j + a] + c[3 * (NPTS - 1 - j) + a];
}

static int grid_add(grid *g, const float b[3], const float *cent, int id)
{
    if (2 * (g->used + 1) > g->cap && grid_grow(g) != 0) return -1;
    const int64_t key = cell_key(b, g->h);
    cell *c = &g->cells[find_slot(g, key)];
    if (c->key == INT64_MIN) {
        c->key = key;
        g->used++;
    }
    if (c->n == c->cap) {
        entry *e = realloc(c->e, (size_t)(c->cap ? 2 * c->cap : 4) * sizeof *e);
        if (!e) return -1;
        c->e = e;
        c->cap = c->cap ? 2 * c->cap : 4;
    }
    c->e[c->n] = (entry){{b[0], b[1], b[2]}, {{0}}, id};
    fold(cent, c->e[c->n].f);
    g->pos[id] = c->n++;
    return 0;
}

/* centroid id moved from barycentre old to b */
static int grid_move(grid *g, const float old[3], const float b[3], const float *cent, int id)
{
    const int64_t was = cell_key(old, g->h);
    cell *c = &g->cells[find_slot(g, was)];
    if (cell_key(b, g->h) == was) {
        memcpy(c->e[g->pos[id]].b, b, 3 * sizeof *b);
        fold(cent, c->e[g->pos[id]].f);
        return 0;
    }
    c->e[g->pos[id]] = c->e[--c->n];
    g->pos[c->e[g->pos[id]].id] = g->pos[id];
    return grid_add(g, b, cent, id);
}

static void barycentre(const float *s, int npts, float b[3])
{
    double m[3] = {0, 0, 0};
    for (int j = 0; j < npts; j++)
        for (int a = 0; a < 3; a++) m[a] += s[3 * j + a];
    for (int a = 0; a < 3; a++) b[a] = (float)(m[a] / npts);
}

/* A lower bound of the mean distance in either orientation: the mean distance of the folded
 * curves (point j and point NPTS-1-j averaged), which a reversal leaves as they are. */
static float folded_bound(const float fc[NFOLD][3], const float fs[NFOLD][3])
{
    float sum = 0;
    for (int j = 0; j < NFOLD; j++) {
        const float x = fc[j][0] - fs[j][0], y = fc[j][1] - fs[j][1], z = fc[j][2] - fs[j][2];
        sum += sqrtf(x * x + y * y + z * z);
    }
    return sum / (float)NPTS;
}

/* The nearest centroid to s below thr (its index, *flip its orientation), or -1. */
static long nearest(const grid *g, const float *cent, const float *s, int npts, float thr,
                    int *flip)
{
    float b[3], fs[NFOLD][3];
    barycentre(s, npts, b);
    fold(s, fs);
    const float h = (float)g->h, h2 = h * h;
    long best = -1;
    float bestd = 0;
    const int64_t x = (int64_t)floor(b[0] / g->h), y = (int64_t)floor(b[1] / g->h),
                  z = (int64_t)floor(b[2] / g->h);
    for (int dx = -1; dx <= 1; dx++)
        for (int dy = -1; dy <= 1; dy++)
            for (int dz = -1; dz <= 1; dz++) {
                const cell *c = &g->cells[find_slot(g, key_of(x + dx, y + dy, z + dz))];
                for (int i = 0; i < c->n; i++) {
                    const entry *e = &c->e[i];
                    const float ex = e->b[0] - b[0], ey = e->b[1] - b[1], ez = e->b[2] - b[2];
                    if (ex * ex + ey * ey + ez * ez > h2) continue;
                    if (folded_bound(e->f, fs) > h) continue;
                    const float *ck = cent + (size_t)e->id * 3 * npts;
                    int f;
                    const float d = mean_dist(ck, s, npts, &f);
                    if (best < 0 || d < bestd || (d == bestd && e->id < best)) {
                        best = e->id;
                        bestd = d;
                        *flip = f;
                    }
                }
            }
    return best >= 0 && bestd < thr ? best : -1;
}

int dm_streamline_cluster(const float *xyz, const long *start, long count, double thr, int threads,
                          dm_streamline_clusters *out)
{
    const int npts = NPTS;
    memset(out, 0, sizeof *out);
    const size_t row = (size_t)3 * npts;
    float *rs = malloc((count ? count : 1) * row * sizeof *rs);
    float *cent = malloc((count ? count : 1) * row * sizeof *cent);
    float *bc = malloc((size_t)(count ? count : 1) * 3 * sizeof *bc);
    long *members = calloc((size_t)(count ? count : 1), sizeof *members);
    float *best = malloc((size_t)(count ? count : 1) * sizeof *best);
    out->cluster = malloc((size_t)(count ? count : 1) * sizeof *out->cluster);
    grid g = {calloc(1024, sizeof(cell)), 1024, 0, 0,
              malloc((size_t)(count ? count : 1) * sizeof(int))};
    long maxn = 2;
    for (long i = 0; i < count; i++)
        if (start[i + 1] - start[i] > maxn) maxn = start[i + 1] - start[i];
    int rc = -1, stopped = 0;
    dm_progress *bar = NULL;
    if (count > INT_MAX) {
        dm_set_error("clustering: more than %d streamlines", INT_MAX);
        goto done;
    }
    if (!rs || !cent || !bc || !members || !best || !out->cluster || !g.cells || !g.pos) goto done;
    for (long s = 0; s < g.cap; s++) g.cells[s].key = INT64_MIN;
    int fail = 0;
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
    {
        float *len = malloc((size_t)maxn * sizeof *len);
        if (!len) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic, 4096)
        for (long i = 0; i < count; i++)
            if (len) resample(xyz + 3 * start[i], start[i + 1] - start[i], npts, rs + i * row, len);
        free(len);
    }
    if (fail) goto done;

    /* the clusters, in the file's order (dicelib: thr as a float) */
    const float thr_f = (float)thr;
    g.h = thr * (1 + 1e-4) + 1e-3; /* the bounds with room for rounding */
    long nc = 0;
    /* one streamline after another (each may move a centroid the next one meets): seconds on
     * millions of them, so shown, and stopped by a signal */
    bar = dm_progress_start("clustering", count, "streamlines");
    enum { STEP = 16384 };
    for (long i = 0; i < count; i++) {
        if (i % STEP == 0 && i > 0) {
            dm_progress_add(bar, STEP);
            if (dm_stop_requested()) {
                stopped = 1;
                goto done;
            }
        }
        out->cluster[i] = -1;
        if (start[i + 1] == start[i]) continue;
        const float *s = rs + i * row;
        int flip = 0;
        const long k = nc ? nearest(&g, cent, s, npts, thr_f, &flip) : -1;
        if (k < 0) {
            memcpy(cent + nc * row, s, row * sizeof *cent);
            members[nc] = 1;
            barycentre(s, npts, bc + 3 * nc);
            if (grid_add(&g, bc + 3 * nc, cent + nc * row, (int)nc) != 0) goto done;
            out->cluster[i] = nc++;
            continue;
        }
        float *c = cent + k * row;
        const float w = (float)members[k], w1 = (float)(members[k] + 1);
        for (int j = 0; j < npts; j++) {
            const float *p = s + 3 * (flip ? npts - 1 - j : j);
            for (int a = 0; a < 3; a++) c[3 * j + a] = (w * c[3 * j + a] + p[a]) / w1;
        }
        members[k]++;
        float old[3] = {bc[3 * k], bc[3 * k + 1], bc[3 * k + 2]};
        barycentre(c, npts, bc + 3 * k);
        if (grid_move(&g, old, bc + 3 * k, c, (int)k) != 0) goto done;
        out->cluster[i] = k;
    }

    dm_progress_add(bar, count - (count > 0 ? (count - 1) / STEP * STEP : 0));
    char note[64];
    snprintf(note, sizeof note, "%ld clusters", nc);
    dm_progress_finish(bar, note);
    bar = NULL;

    /* the representatives: nearest the final centroid, the first on a tie (dicelib starts each
     * cluster's best at 1000 mm) */
    out->nclusters = nc;
    out->rep = malloc((size_t)(nc ? nc : 1) * sizeof *out->rep);
    if (!out->rep) goto done;
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
    for (long i = 0; i < count; i++) {
        int f;
        const long k = out->cluster[i];
        /* dicelib's closest_streamline reverses the centroid, not the streamline: the same
         * distances summed in another order, so the arguments swapped */
        best[i] = k < 0 ? INFINITY : mean_dist(rs + i * row, cent + k * row, npts, &f);
    }
    float *bestd = cent; /* reused: one float per cluster */
    for (long k = 0; k < nc; k++) {
        out->rep[k] = -1;
        bestd[k] = 1000;
    }
    for (long i = 0; i < count; i++) {
        const long k = out->cluster[i];
        if (k >= 0 && best[i] < bestd[k]) {
            bestd[k] = best[i];
            out->rep[k] = i;
        }
    }
    for (long i = 0; i < count; i++) /* none within 1000 mm (dicelib would fail): the founder */
        if (out->cluster[i] >= 0 && out->rep[out->cluster[i]] < 0) out->rep[out->cluster[i]] = i;
    rc = 0;
done:
    if (bar) dm_progress_finish(bar, stopped ? "stopped" : "failed");
    if (rc != 0) {
        dm_streamline_clusters_free(out);
        if (stopped)
            dm_stop_error();
        else if (count <= INT_MAX)
            dm_set_error("clustering: out of memory for %ld streamlines", count);
    }
    for (long s = 0; g.cells && s < g.cap; s++) free(g.cells[s].e);
    free(g.pos);
    free(g.cells);
    free(rs);
    free(cent);
    free(bc);
    free(members);
    free(best);
    return rc;
}

void dm_streamline_clusters_free(dm_streamline_clusters *c)
{
    free(c->cluster);
    free(c->rep);
    memset(c, 0, sizeof *c);
}
