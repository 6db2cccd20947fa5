#include "commit/commit_dirs.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bins of 0.5 degree: an orientation is taken to the direction nearest to its bin's centre,
 * at most 0.36 degree from the exact nearest one (COMMIT's table has 1-degree bins). */
#define BINS_PER_RADIAN (360.0 / 3.14159265358979323846)

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
    d->nt = (int)ceil(0.5 * pi * BINS_PER_RADIAN) + 1;
    d->np = (int)ceil(2 * pi * BINS_PER_RADIAN) + 1;
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
        const double e = (a + 0.5) / BINS_PER_RADIAN;
        d->t_edge[2 * a] = cos(e), d->t_edge[2 * a + 1] = sin(e);
    }
    for (int b = 0; b < d->np; b++) {
        const double e = (b + 0.5) / BINS_PER_RADIAN - pi;
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
        const double theta = a / BINS_PER_RADIAN;
        row[2 * a] = cos(theta), row[2 * a + 1] = sin(theta);
    }
    for (int b = 0; b < d->np; b++) {
        const double phi = b / BINS_PER_RADIAN - pi;
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

/* atan2(s, c) to about 1e-5 radian (a polynomial in the smaller ratio; Abramowitz and Stegun
 * 4.4.49), on the side of the branch cut that atan2 takes: a first guess of the bin. */
static inline double atan2_guess(double s, double c)
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
static int bin_by_edges(const double *edge, double c, double s, double size, int g, int lo, int hi)
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

static unsigned short from_bins(const dm_commit_dirs *d, long a, long b)
{
    if (a >= d->nt) a = d->nt - 1;
    if (b >= d->np) b = d->np - 1;
    return d->table[(size_t)a * d->np + b];
}

unsigned short dm_commit_dirs_index_exact(const dm_commit_dirs *d, const double u[3])
{
    const double pi = 3.14159265358979323846;
    double x = u[0], y = u[1], z = u[2];
    if (y < 0) x = -x, y = -y, z = -z;
    double theta = atan2(sqrt(x * x + z * z), y), phi = atan2(z, x);
    return from_bins(d, lround(theta * BINS_PER_RADIAN), lround((phi + pi) * BINS_PER_RADIAN));
}

/* The bins that dm_commit_dirs_index_exact finds (lround of the angle x BINS_PER_RADIAN), without
 * its atan2s where the angles are not within a billionth of a radian of a bin's edge: the bin
 * from a guess, checked against the edges either side.  The azimuth's first and last bins (at
 * the branch cut of atan2) are left to atan2. */
unsigned short dm_commit_dirs_index(const dm_commit_dirs *d, const double u[3])
{
    const double pi = 3.14159265358979323846;
    double x = u[0], y = u[1], z = u[2];
    if (y < 0) x = -x, y = -y, z = -z;
    const double rho = sqrt(x * x + z * z);
    const int a = bin_by_edges(d->t_edge, y, rho, y + rho,
                               (int)(atan2_guess(rho, y) * BINS_PER_RADIAN + 0.5), 0, d->nt - 1);
    const int last = (int)(2 * pi * BINS_PER_RADIAN + 0.5) - 1; /* the bin below the cut's */
    const int b = a < 0 ? -1
                        : bin_by_edges(d->p_edge, x, z, fabs(x) + fabs(z),
                                       (int)((atan2_guess(z, x) + pi) * BINS_PER_RADIAN + 0.5), 1,
                                       last < d->np - 2 ? last : d->np - 2);
    if (a < 0 || b < 0) return dm_commit_dirs_index_exact(d, u);
    return from_bins(d, a, b);
}
