#include "commit/commit_dirs.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bins of 0.5 degree: an orientation is taken to the direction nearest to its bin's centre,
 * at most 0.36 degree from the exact nearest one (COMMIT's table has 1-degree bins). */
#define BINS_PER_RADIAN (360.0 / 3.14159265358979323846)

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
    if (!d->dir || !d->table) {
        dm_commit_dirs_free(d);
        return dm_set_error("commit: out of memory for the direction table");
    }
    for (int i = 0; i < n; i++) {
        double y = (i + 0.5) / n, r = sqrt(1 - y * y), phi = i * golden;
        d->dir[3 * i] = r * cos(phi);
        d->dir[3 * i + 1] = y;
        d->dir[3 * i + 2] = r * sin(phi);
    }
#pragma omp parallel for schedule(dynamic, 8)
    for (int a = 0; a < d->nt; a++) {
        double theta = a / BINS_PER_RADIAN, y = cos(theta), r = sin(theta);
        for (int b = 0; b < d->np; b++) {
            double phi = b / BINS_PER_RADIAN - pi, u[3] = {r * cos(phi), y, r * sin(phi)};
            int best = 0;
            double best_dot = -2;
            for (int i = 0; i < n; i++) {
                const double *v = d->dir + 3 * i;
                double dot = fabs(u[0] * v[0] + u[1] * v[1] + u[2] * v[2]);
                if (dot > best_dot) {
                    best_dot = dot;
                    best = i;
                }
            }
            d->table[(size_t)a * d->np + b] = (unsigned short)best;
        }
    }
    return 0;
}

void dm_commit_dirs_free(dm_commit_dirs *d)
{
    free(d->dir);
    free(d->table);
    memset(d, 0, sizeof *d);
}

unsigned short dm_commit_dirs_index(const dm_commit_dirs *d, const double u[3])
{
    const double pi = 3.14159265358979323846;
    double x = u[0], y = u[1], z = u[2];
    if (y < 0) x = -x, y = -y, z = -z;
    double theta = atan2(sqrt(x * x + z * z), y), phi = atan2(z, x);
    int a = (int)lround(theta * BINS_PER_RADIAN), b = (int)lround((phi + pi) * BINS_PER_RADIAN);
    if (a >= d->nt) a = d->nt - 1;
    if (b >= d->np) b = d->np - 1;
    return d->table[(size_t)a * d->np + b];
}
