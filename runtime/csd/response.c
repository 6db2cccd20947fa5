/* Response functions: MRtrix's text format and estimation from selected voxels
 * (response.h). */
#include "csd/response.h"

#include "util/error.h"
#include "util/fsutil.h"
#include "util/linalg.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The b-values of a "# Shells: 0,1000,2000" comment line; returns how many (-1: not one). */
static int parse_shells(const char *line, double *b)
{
    const char *p = line + 1;
    while (isspace((unsigned char)*p)) p++;
    if (strncasecmp(p, "shells:", 7)) return -1;
    p += 7;
    int n = 0;
    while (*p && n < DM_MAX_SHELLS) {
        char *end;
        double v = strtod(p, &end);
        if (end == p) break;
        b[n++] = v;
        p = end;
        while (isspace((unsigned char)*p) || *p == ',') p++;
    }
    return n;
}

int dm_response_read(const char *path, dm_response *r)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "r");
    if (!f) return dm_set_error("%s: cannot open: %s", path, strerror(errno));
    char line[8192];
    int nb = -1, ncols = -1, lineno = 0;
    double b[DM_MAX_SHELLS];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (*p == '#') {
            int k = parse_shells(p, b);
            if (k >= 0) nb = k;
            continue;
        }
        if (!*p) continue;
        int n = 0;
        double row[DM_RESPONSE_NL + 1];
        while (*p) {
            char *end;
            double v = strtod(p, &end);
            if (end == p) {
                fclose(f);
                int len = 0;
                while (len < 20 && p[len] && !isspace((unsigned char)p[len])) len++;
                return dm_set_error("%s:%d: '%.*s' is not a number", path, lineno, len, p);
            }
            if (n == DM_RESPONSE_NL) {
                fclose(f);
                return dm_set_error("%s:%d: more than %d coefficients (lmax above %d)", path,
                                    lineno, DM_RESPONSE_NL, DM_SH_LMAX_MAX);
            }
            row[n++] = v;
            p = end;
            while (isspace((unsigned char)*p) || *p == ',') p++;
        }
        if (ncols >= 0 && n != ncols) {
            fclose(f);
            return dm_set_error("%s:%d: %d coefficients where the rows above have %d", path, lineno,
                                n, ncols);
        }
        ncols = n;
        if (r->nshell == DM_MAX_SHELLS) {
            fclose(f);
            return dm_set_error("%s: more than %d rows (shells)", path, DM_MAX_SHELLS);
        }
        for (int k = 0; k < n; k++) {
            if (!isfinite(row[k])) {
                fclose(f);
                return dm_set_error("%s:%d: coefficient %d is not finite", path, lineno, k + 1);
            }
            r->r[r->nshell][k] = row[k];
        }
        r->nshell++;
    }
    fclose(f);
    if (r->nshell == 0) return dm_set_error("%s: no coefficients (an empty response)", path);
    if (nb >= 0 && nb != r->nshell)
        return dm_set_error("%s: the Shells comment names %d b-values but there are %d rows", path,
                            nb, r->nshell);
    r->lmax = 2 * (ncols - 1);
    for (int s = 0; s < r->nshell; s++) r->b[s] = nb >= 0 ? b[s] : NAN;
    return 0;
}

int dm_response_write(const char *path, const dm_response *r, const char *history)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return dm_set_error("%s: out of memory", path);
    fprintf(f, "# Shells: ");
    for (int s = 0; s < r->nshell; s++) fprintf(f, "%s%.6g", s ? "," : "", r->b[s]);
    fprintf(f, "\n");
    if (history) fprintf(f, "# command_history: %s\n", history);
    for (int s = 0; s < r->nshell; s++)
        for (int k = 0; k <= r->lmax / 2; k++)
            fprintf(f, "%.15g%s", r->r[s][k], k == r->lmax / 2 ? "\n" : " ");
    fclose(f);
    int rc = dm_write_file_atomic(path, text, len);
    free(text);
    return rc;
}

int dm_response_match(const dm_response *r, const char *path, const dm_dwi *d, int *map)
{
    if (!isnan(r->b[0])) {
        for (int s = 0; s < r->nshell; s++) {
            int best = -1;
            for (int k = 0; k < d->nshell; k++)
                if (fabs(d->shell_b[k] - r->b[s]) <= 80.0 &&
                    (best < 0 || fabs(d->shell_b[k] - r->b[s]) < fabs(d->shell_b[best] - r->b[s])))
                    best = k;
            if (best < 0)
                return dm_set_error("%s: row %d is for b = %g, a shell the data does not have",
                                    path, s + 1, r->b[s]);
            map[s] = best;
        }
        return 0;
    }
    int first = 0;
    if (r->nshell == d->nshell)
        first = 0;
    else if (d->has_b0 && r->nshell == d->nshell - 1)
        first = 1;
    else
        return dm_set_error("%s: %d row%s (shells) but the data has %d shell%s", path, r->nshell,
                            r->nshell == 1 ? "" : "s", d->nshell, d->nshell == 1 ? "" : "s");
    for (int s = 0; s < r->nshell; s++) map[s] = first + s;
    return 0;
}

int dm_response_lmax_for(int count)
{
    int l = 2 * (count / 2 - 1);
    if (l > DM_SH_LMAX_MAX) l = DM_SH_LMAX_MAX;
    return l < 0 ? 0 : l;
}

int dm_response_from_voxels(const dm_dwi *d, const size_t *vox, const double *dir, size_t n,
                            int lmax, int threads, dm_response *r)
{
    memset(r, 0, sizeof *r);
    if (n == 0) return dm_set_error("no voxels to estimate a response from");
    r->nshell = d->nshell;
    r->lmax = lmax;
    /* Each voxel's fit on its own (in parallel) into coef, then the mean in voxel order; the
     * voxels' signals gathered first, volume by volume (as the data are stored). */
    double *coef = malloc(n * DM_RESPONSE_NL * sizeof *coef);
    double *sig = malloc(n * (size_t)d->nvol * sizeof *sig);
    if (!coef || !sig) {
        free(coef);
        free(sig);
        return dm_set_error("out of memory estimating a response from %zu voxels", n);
    }
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (int t = 0; t < d->nvol; t++)
        for (size_t i = 0; i < n; i++) sig[i * d->nvol + t] = dm_dwi_signal(d, vox[i], t);
    for (int s = 0; s < d->nshell; s++) {
        r->b[s] = d->shell_b[s];
        int zero = d->shell_b[s] <= DM_BZERO_MAX;
        int ls = zero ? 0 : dm_response_lmax_for(d->shell_count[s]);
        if (ls > lmax) ls = lmax;
        int nl = ls / 2 + 1, singular = 0;
#pragma omp parallel for schedule(dynamic, 16)                                                     \
    num_threads(threads > 0 ? threads : omp_get_max_threads())
        for (size_t i = 0; i < n; i++) {
            double A[DM_RESPONSE_NL * DM_RESPONSE_NL] = {0}, *rhs = coef + i * DM_RESPONSE_NL;
            for (int a = 0; a < nl; a++) rhs[a] = 0.0;
            for (int t = 0; t < d->nvol; t++) {
                if (d->shell_of[t] != s) continue;
                const double *u = d->dir + 3 * t, *f = dir + 3 * i;
                double c = zero ? 1.0 : u[0] * f[0] + u[1] * f[1] + u[2] * f[2];
                double z[DM_RESPONSE_NL];
                dm_sh_zonal(ls, c, z);
                double y = sig[i * d->nvol + t];
                for (int a = 0; a < nl; a++) {
                    rhs[a] += z[a] * y;
                    for (int b = 0; b < nl; b++) A[a * nl + b] += z[a] * z[b];
                }
            }
            if (dm_cholesky(A, nl, 0.0) != 0) {
#pragma omp atomic write
                singular = 1;
                continue;
            }
            dm_cholesky_solve(A, nl, rhs);
        }
        if (singular) {
            free(coef);
            free(sig);
            return dm_set_error("the directions of shell b = %g do not determine a response "
                                "of degree %d",
                                d->shell_b[s], ls);
        }
        double sum[DM_RESPONSE_NL] = {0};
        for (size_t i = 0; i < n; i++)
            for (int a = 0; a < nl; a++) sum[a] += coef[i * DM_RESPONSE_NL + a];
        for (int a = 0; a < nl; a++) r->r[s][a] = sum[a] / (double)n;
    }
    free(coef);
    free(sig);
    return 0;
}

int dm_response_isotropic(const dm_dwi *d, const size_t *vox, size_t n, dm_response *r)
{
    memset(r, 0, sizeof *r);
    if (n == 0) return dm_set_error("no voxels to estimate a response from");
    r->nshell = d->nshell;
    r->lmax = 0;
    for (int s = 0; s < d->nshell; s++) {
        r->b[s] = d->shell_b[s];
        double sum = 0.0;
        for (size_t i = 0; i < n; i++)
            for (int t = 0; t < d->nvol; t++)
                if (d->shell_of[t] == s) sum += dm_dwi_signal(d, vox[i], t);
        r->r[s][0] = sqrt(4.0 * M_PI) * sum / ((double)n * d->shell_count[s]);
    }
    return 0;
}
