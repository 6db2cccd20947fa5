#include "commit/commit_dirs.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DM_FN static inline __attribute__((unused))
#define DM_WALK_GROW(s, k) (-1) /* no sink here */
#include "commit/commit_walk.h"

/* |u . direction i|, the one expression every comparison of nearest_dir uses. */
static inline double abs_dot(const dm_commit_dirs *d, const double u[3], int i)
{
    const double *v = d->dir + 3 * i;
    return fabs(u[0] * v[0] + u[1] * v[1] + u[2] * v[2]);
}

/* The first i of the largest |u . dir[i]| (u unit), as a scan of all n finds it, scanning only
 * the directions that can reach the |dot| of direction `hint`: a unit v with |u . v| >= c is
 * within sqrt(2 - 2c) of u or -u, so its y within that of +-u's y, and dir i's y is
 * (i + 0.5) / n: two runs of i (merged when they meet), in increasing order as the full scan.
 * The margins (1e-10 under the root, 1e-6 and one index either side) are far above rounding. */
static int nearest_dir(const dm_commit_dirs *d, const double u[3], int hint)
{
    const int n = d->n;
    const double reach = sqrt(fmax(0.0, 2 - 2 * abs_dot(d, u, hint)) + 1e-10) + 1e-6;
    long lo[2], hi[2];
    for (int side = 0; side < 2; side++) {
        const double yc = side ? u[1] : -u[1];
        lo[side] = (long)floor((yc - reach) * n - 0.5) - 1;
        hi[side] = (long)ceil((yc + reach) * n - 0.5) + 1;
        if (lo[side] < 0) lo[side] = 0;
        if (hi[side] > n - 1) hi[side] = n - 1;
    }
    if (lo[0] > lo[1]) { /* the run of -u's y first */
        long t = lo[0];
        lo[0] = lo[1], lo[1] = t;
        t = hi[0], hi[0] = hi[1], hi[1] = t;
    }
    if (hi[0] + 1 >= lo[1]) { /* they meet: one run */
        if (hi[1] > hi[0]) hi[0] = hi[1];
        lo[1] = 1, hi[1] = 0;
    }
    int best = 0;
    double best_dot = -2;
    for (int run = 0; run < 2; run++)
        for (long i = lo[run]; i <= hi[run]; i++) {
            const double dot = abs_dot(d, u, (int)i);
            if (dot > best_dot) {
                best_dot = dot;
                best = (int)i;
            }
        }
    return best;
}

int dm_commit_dirs_make(int n, dm_commit_dirs *d)
{
    memset(d, 0, sizeof *d);
    if (n < 1 || n > 65535) return dm_set_error("commit: %d directions (1 to 65535)", n);
    const double pi = 3.14159265358979323846, golden = pi * (3 - sqrt(5.0));
    d->n = n;
    d->dir = malloc(3 * (size_t)n * sizeof *d->dir);
    d->nt = (int)ceil(0.5 * pi * DM_WALK_BINS_PER_RADIAN) + 1;
    d->np = (int)ceil(2 * pi * DM_WALK_BINS_PER_RADIAN) + 1;
    d->table = malloc((size_t)d->nt * d->np * sizeof *d->table);
    d->t_edge = malloc(2 * (size_t)d->nt * sizeof *d->t_edge);
    d->p_edge = malloc(2 * (size_t)d->np * sizeof *d->p_edge);
    if (!d->dir || !d->table || !d->t_edge || !d->p_edge) {
        dm_commit_dirs_free(d);
        return dm_set_error("commit: out of memory for the direction table");
    }
    for (int i = 0; i < n; i++) {
        double y = (i + 0.5) / n, r = sqrt(1 - y * y), phi = i * golden;
        d->dir[3 * i] = r * cos(phi);
        d->dir[3 * i + 1] = y;
        d->dir[3 * i + 2] = r * sin(phi);
    }
    for (int a = 0; a < d->nt; a++) {
        const double e = (a + 0.5) / DM_WALK_BINS_PER_RADIAN;
        d->t_edge[2 * a] = cos(e), d->t_edge[2 * a + 1] = sin(e);
    }
    for (int b = 0; b < d->np; b++) {
        const double e = (b + 0.5) / DM_WALK_BINS_PER_RADIAN - pi;
        d->p_edge[2 * b] = cos(e), d->p_edge[2 * b + 1] = sin(e);
    }
    /* each bin's centre: the cos and sin of its row's polar angle and of its column's azimuth
     * (one table of each, so that a bin costs no trigonometry) */
    double *row = malloc(2 * (size_t)d->nt * sizeof *row),
           *col = malloc(2 * (size_t)d->np * sizeof *col);
    if (!row || !col) {
        free(row);
        free(col);
        dm_commit_dirs_free(d);
        return dm_set_error("commit: out of memory for the direction table");
    }
    for (int a = 0; a < d->nt; a++) {
        const double theta = a / DM_WALK_BINS_PER_RADIAN;
        row[2 * a] = cos(theta), row[2 * a + 1] = sin(theta);
    }
    for (int b = 0; b < d->np; b++) {
        const double phi = b / DM_WALK_BINS_PER_RADIAN - pi;
        col[2 * b] = cos(phi), col[2 * b + 1] = sin(phi);
    }
    /* bin by bin over all threads (by rows of np bins, 181 rows leave threads idle) */
#pragma omp parallel
    {
        int hint = 0; /* the previous bin's direction: near this one's */
#pragma omp for schedule(static)
        for (long ab = 0; ab < (long)d->nt * d->np; ab++) {
            const long a = ab / d->np, b = ab % d->np;
            const double y = row[2 * a], r = row[2 * a + 1];
            const double u[3] = {r * col[2 * b], y, r * col[2 * b + 1]};
            hint = nearest_dir(d, u, hint);
            d->table[ab] = (unsigned short)hint;
        }
    }
    free(row);
    free(col);
    return 0;
}

void dm_commit_dirs_free(dm_commit_dirs *d)
{
    free(d->dir);
    free(d->table);
    free(d->t_edge);
    free(d->p_edge);
    memset(d, 0, sizeof *d);
}

/* The table as the walk reads it (templates/commit/commit_walk.h). */
static dm_walk_dirs walk_dirs(const dm_commit_dirs *d)
{
    dm_walk_dirs w = {d->nt, d->np, d->table, d->t_edge, d->p_edge};
    return w;
}

unsigned short dm_commit_dirs_index_exact(const dm_commit_dirs *d, const double u[3])
{
    const dm_walk_dirs w = walk_dirs(d);
    return dm_walk_dir_exact(&w, u);
}

unsigned short dm_commit_dirs_index(const dm_commit_dirs *d, const double u[3])
{
    const dm_walk_dirs w = walk_dirs(d);
    return dm_walk_dir(&w, u);
}
