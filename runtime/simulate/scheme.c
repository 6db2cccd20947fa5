/* Gradient schemes: shell specs and electrostatic-repulsion directions. */
#include "simulate/scheme.h"
#include "util/error.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { REPULSION_STEPS = 300, MAX_VOLUMES = 100000 };

void dm_scheme_directions(int n, double *dirs)
{
    if (n <= 0) return;
    /* Fibonacci spiral on the upper hemisphere: equal-area bands in z, golden-angle turns. */
    const double golden_angle = 2.399963229728653;
    for (int i = 0; i < n; i++) {
        double z = 1 - (i + 0.5) / n, r = sqrt(1 - z * z), phi = i * golden_angle;
        dirs[3 * i] = r * cos(phi);
        dirs[3 * i + 1] = r * sin(phi);
        dirs[3 * i + 2] = z;
    }
    double *force = malloc((size_t)n * 3 * sizeof *force);
    if (!force) return; /* the spiral alone is a usable scheme */
    /* Typical spacing of n points on a hemisphere (area 2*pi); steps shrink from a fifth of it
     * to nearly nothing so that the last steps polish rather than shake. */
    double spacing = sqrt(2 * 3.14159265358979 / n);
    for (int step = 0; step < REPULSION_STEPS; step++) {
        memset(force, 0, (size_t)n * 3 * sizeof *force);
        for (int i = 0; i < n; i++) {
            const double *x = dirs + 3 * i;
            for (int j = i + 1; j < n; j++) {
                const double *y = dirs + 3 * j;
                double dm[3], dp[3];
                for (int k = 0; k < 3; k++) {
                    dm[k] = x[k] - y[k];
                    dp[k] = x[k] + y[k];
                }
                double rm2 = dm[0] * dm[0] + dm[1] * dm[1] + dm[2] * dm[2];
                double rp2 = dp[0] * dp[0] + dp[1] * dp[1] + dp[2] * dp[2];
                double wm = 1 / (rm2 * sqrt(rm2) + 1e-12), wp = 1 / (rp2 * sqrt(rp2) + 1e-12);
                /* -dE/dx_i for E = 1/|x-y| + 1/|x+y|; the force on y mirrors it. */
                for (int k = 0; k < 3; k++) {
                    double fi = wm * dm[k] + wp * dp[k];
                    double fj = -wm * dm[k] + wp * dp[k];
                    force[3 * i + k] += fi;
                    force[3 * j + k] += fj;
                }
            }
        }
        double biggest = 0;
        for (int i = 0; i < n; i++) { /* keep the tangential part only */
            double *f = force + 3 * i;
            const double *x = dirs + 3 * i;
            double radial = f[0] * x[0] + f[1] * x[1] + f[2] * x[2];
            for (int k = 0; k < 3; k++) f[k] -= radial * x[k];
            double len = sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2]);
            if (len > biggest) biggest = len;
        }
        if (!(biggest > 0)) break;
        double move = 0.2 * spacing * (1 - (double)step / REPULSION_STEPS) / biggest;
        for (int i = 0; i < n; i++) {
            double *x = dirs + 3 * i;
            for (int k = 0; k < 3; k++) x[k] += move * force[3 * i + k];
            double len = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
            for (int k = 0; k < 3; k++) x[k] /= len;
        }
    }
    free(force);
    for (int i = 0; i < n; i++)
        if (dirs[3 * i + 2] < 0)
            for (int k = 0; k < 3; k++) dirs[3 * i + k] = -dirs[3 * i + k];
}

/* Parses one "COUNTxBVAL" item starting at *p; advances *p past it. */
static int parse_shell(const char *spec, const char **p, long *count, double *bval)
{
    char *end;
    while (isspace((unsigned char)**p)) (*p)++;
    errno = 0;
    *count = strtol(*p, &end, 10);
    if (end == *p || errno || (*end != 'x' && *end != 'X'))
        return dm_set_error("scheme '%s': expected COUNTxBVAL (e.g. 50x1000) at '%s'", spec, *p);
    if (*count < 1 || *count > MAX_VOLUMES)
        return dm_set_error("scheme '%s': shell count %ld out of range 1..%d", spec, *count,
                            MAX_VOLUMES);
    const char *b_start = end + 1;
    *bval = strtod(b_start, &end);
    if (end == b_start || !isfinite(*bval) || *bval < 0)
        return dm_set_error("scheme '%s': expected a b-value >= 0 after '%.*s'", spec,
                            (int)(b_start - *p), *p);
    while (isspace((unsigned char)*end)) end++;
    if (*end != ',' && *end != '\0') return dm_set_error("scheme '%s': unexpected '%s'", spec, end);
    *p = *end == ',' ? end + 1 : end;
    return 0;
}

int dm_scheme_make(const char *spec, int *n, double **b, double **g)
{
    *n = 0;
    *b = *g = NULL;
    if (!spec) return dm_set_error("scheme: empty specification");
    /* First pass: validate and count. */
    long total = 0;
    const char *p = spec;
    do {
        long count;
        double bval;
        if (parse_shell(spec, &p, &count, &bval) != 0) return -1;
        total += count;
        if (total > MAX_VOLUMES)
            return dm_set_error("scheme '%s': more than %d volumes", spec, MAX_VOLUMES);
    } while (*p);
    double *bv = malloc((size_t)total * sizeof *bv), *gv = calloc((size_t)total * 3, sizeof *gv);
    if (!bv || !gv) {
        free(bv);
        free(gv);
        return dm_set_error("scheme '%s': out of memory", spec);
    }
    long at = 0;
    p = spec;
    do {
        long count;
        double bval;
        parse_shell(spec, &p, &count, &bval);
        for (long i = 0; i < count; i++) bv[at + i] = bval;
        if (bval > 0) dm_scheme_directions((int)count, gv + 3 * at);
        at += count;
    } while (*p);
    *n = (int)total;
    *b = bv;
    *g = gv;
    return 0;
}
