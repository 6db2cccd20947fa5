/* Comparison of fitted maps with the truth, as a table per region. */
#include "maps/compare.h"
#include "io/volume.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Reads DIR/NAME.nii.gz, which must have `volumes` volumes (0: any) and, when `grid` is
 * given, its grid (the fit's status map's): a truth and a fit of different shapes, or a
 * scalar map given as axes, are errors naming the file. */
static int load(const char *dir, const char *name, dm_volume *v, int volumes, const dm_volume *grid)
{
    char file[80];
    snprintf(file, sizeof file, "%.63s", name);
    char *path = dm_volume_find(dir, file);
    if (!path) return dm_set_error("out of memory");
    int rc = dm_volume_read(path, v);
    if (rc == 0 && grid) rc = dm_volume_check_same_grid(v, path, grid, "the fit's status.nii.gz");
    if (rc == 0 && volumes && v->nt != volumes)
        rc = volumes == 1 ? dm_set_error("%s: %d volumes; --params compares scalar maps (one "
                                         "volume)",
                                         path, v->nt)
                          : dm_set_error("%s: %d volume%s; --axes compares direction maps of 3 "
                                         "volumes (x, y, z)",
                                         path, v->nt, v->nt == 1 ? "" : "s");
    if (rc != 0) dm_volume_free(v);
    free(path);
    return rc;
}

/* A map's value as a small non-negative integer label (status, region), -1 when it is not
 * one (NaN, negative, huge): converting such values to int is undefined. */
static int label_of(double x)
{
    return x >= 0 && x <= 1e6 ? (int)x : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Angle in degrees between the axes (sign ignored) of voxel v of two direction maps. */
static double angle_deg(const double *a, const double *b, size_t v, size_t nvox)
{
    double dot = 0, na = 0, nb = 0;
    for (int c = 0; c < 3; c++) {
        dot += a[v + c * nvox] * b[v + c * nvox];
        na += a[v + c * nvox] * a[v + c * nvox];
        nb += b[v + c * nvox] * b[v + c * nvox];
    }
    double cs = fabs(dot) / sqrt(na * nb + 1e-300);
    return acos(cs > 1 ? 1 : cs) * 180 / M_PI;
}

/* The items of a comma list, at most max of them, each cut to 63 characters. */
static void split(const char *s, char out[][64], int *n, int max)
{
    *n = 0;
    if (!s) return;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && *n < max; t = strtok_r(NULL, ",", &save))
        snprintf(out[(*n)++], 64, "%s", t);
    free(copy);
}

/* The voxels a comparison counts: those with an estimate (status 1 fitted, 2 not converged, 6
 * at a bound), in region l when there are regions. */
static int counted(const dm_volume *status, const dm_volume *regions, size_t v, int l)
{
    int s = label_of(status->data[v]);
    return (s == 1 || s == 2 || s == 6) && (!regions->data || label_of(regions->data[v]) == l);
}

static int compare_scalar(const dm_compare_settings *s, const char *name, const dm_volume *status,
                          const dm_volume *regions, int nlabels, char rnames[][64], int nr,
                          FILE *out)
{
    dm_volume t = {0}, f = {0};
    size_t nvox = DM_NVOX(status);
    if (load(s->truth_dir, name, &t, 1, status) != 0 ||
        load(s->fit_dir, name, &f, 1, status) != 0) {
        dm_volume_free(&t);
        return -1;
    }
    for (int l = 1; l <= nlabels; l++) {
        double st = 0, sf = 0, se = 0;
        long n = 0;
        for (size_t v = 0; v < nvox; v++) {
            if (!counted(status, regions, v, l)) continue;
            st += t.data[v];
            sf += f.data[v];
            se += fabs(f.data[v] - t.data[v]);
            n++;
        }
        if (!n) continue;
        fprintf(out, "%-14s %7ld  %-8s %10.4g %10.4g %10.3g\n", l <= nr ? rnames[l - 1] : "all", n,
                name, st / n, sf / n, se / n);
    }
    dm_volume_free(&t);
    dm_volume_free(&f);
    return 0;
}

static int compare_axes(const dm_compare_settings *s, char axes[][64], int na,
                        const dm_volume *status, const dm_volume *regions, int nlabels,
                        char rnames[][64], int nr, FILE *out)
{
    dm_volume t[2] = {{0}}, f[2] = {{0}};
    size_t nvox = DM_NVOX(status);
    int rc = 0;
    for (int i = 0; i < na && rc == 0; i++)
        if ((rc = load(s->truth_dir, axes[i], &t[i], 3, status)) != 0 ||
            (rc = load(s->fit_dir, axes[i], &f[i], 3, status)) != 0)
            break;
    if (rc == 0) {
        fprintf(out, "\n%-14s %7s  %-8s %22s\n", "region", "voxels", "axis", "median angle (deg)");
        double *ang[2] = {malloc(nvox * sizeof(double)), malloc(nvox * sizeof(double))};
        if (!ang[0] || !ang[1]) {
            nlabels = 0;
            rc = dm_set_error("out of memory");
        }
        for (int l = 1; l <= nlabels; l++) {
            long n = 0;
            for (size_t v = 0; v < nvox; v++) {
                if (!counted(status, regions, v, l)) continue;
                if (na == 2) { /* fibre labels may swap: keep the better pairing */
                    double s0 = angle_deg(t[0].data, f[0].data, v, nvox) +
                                angle_deg(t[1].data, f[1].data, v, nvox);
                    double s1 = angle_deg(t[0].data, f[1].data, v, nvox) +
                                angle_deg(t[1].data, f[0].data, v, nvox);
                    int sw = s1 < s0;
                    ang[0][n] = angle_deg(t[0].data, f[sw].data, v, nvox);
                    ang[1][n] = angle_deg(t[1].data, f[!sw].data, v, nvox);
                } else {
                    ang[0][n] = angle_deg(t[0].data, f[0].data, v, nvox);
                }
                n++;
            }
            if (!n) continue;
            for (int i = 0; i < na; i++) {
                qsort(ang[i], n, sizeof(double), cmp_double);
                fprintf(out, "%-14s %7ld  %-8s %22.2f\n", l <= nr ? rnames[l - 1] : "all", n,
                        axes[i], n % 2 ? ang[i][n / 2] : 0.5 * (ang[i][n / 2 - 1] + ang[i][n / 2]));
            }
        }
        free(ang[0]);
        free(ang[1]);
    }
    for (int i = 0; i < 2; i++) {
        dm_volume_free(&t[i]);
        dm_volume_free(&f[i]);
    }
    return rc;
}

int dm_compare_maps(const dm_compare_settings *s, FILE *out)
{
    char params[32][64], axes[2][64], rnames[32][64];
    int np, na, nr;
    split(s->params, params, &np, 32);
    split(s->axes, axes, &na, 2);
    split(s->region_names, rnames, &nr, 32);
    int rc = 0;
    dm_volume status = {0}, regions = {0};
    if (s->status ? (rc = dm_volume_read(s->status, &status)) != 0
                  : (rc = load(s->fit_dir, "status", &status, 1, NULL)) != 0)
        goto done;
    size_t nvox = DM_NVOX(&status);
    if (s->regions &&
        ((rc = dm_volume_read(s->regions, &regions)) != 0 ||
         (rc = dm_volume_check_same_grid(&regions, s->regions, &status, "status")) != 0))
        goto done;
    int nlabels = 1;
    for (size_t v = 0; regions.data && v < nvox; v++)
        if (label_of(regions.data[v]) > nlabels) nlabels = label_of(regions.data[v]);
    if (nlabels > 64) nlabels = 64;

    if (np > 0)
        fprintf(out, "%-14s %7s  %-8s %10s %10s %10s\n", "region", "voxels", "map", "truth",
                "fitted", "mean|err|");
    for (int i = 0; i < np && rc == 0; i++)
        rc = compare_scalar(s, params[i], &status, &regions, nlabels, rnames, nr, out);
    if (na > 0 && rc == 0)
        rc = compare_axes(s, axes, na, &status, &regions, nlabels, rnames, nr, out);
done:
    dm_volume_free(&status);
    dm_volume_free(&regions);
    return rc;
}
