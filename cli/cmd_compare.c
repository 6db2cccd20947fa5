/* dimoc compare: fitted maps against known truth, region by region, as a table. */
#include "args.h"
#include "cli.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/volume.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt compare_opts[] = {
    {"truth", "DIR", NULL, "folder of true maps NAME.nii.gz"},
    {"fit", "DIR", NULL, "folder of fitted maps NAME.nii.gz"},
    {"params", "NAMES", NULL, "scalar maps to compare (comma list)"},
    {"axes", "NAMES", NULL, "direction maps (3 volumes) to compare by angle; two names are "
                            "matched to the truth in the better order per voxel"},
    {"regions", "MAP", NULL, "integer label map; one table row per label (default: one region)"},
    {"region-names", "NAMES", NULL, "names of labels 1, 2, ... (comma list)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_compare(FILE *out)
{
    dm_args_help(out, "dimoc compare --truth DIR --fit DIR [--params ..] [--axes ..] [--regions MAP]",
                 "Prints, per region, the mean true and fitted value and the mean absolute error of\n"
                 "each scalar map, and the median angle (degrees) between true and fitted axes.\n"
                 "Voxels whose fit status is not 1 (fitted) or 2 are left out.", compare_opts);
    return 0;
}

static int load(const char *dir, const char *name, dm_volume *v)
{
    char file[80];
    snprintf(file, sizeof file, "%.63s.nii.gz", name);
    char *path = dm_path_join(dir, file);
    int rc = dm_volume_read(path, v);
    free(path);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

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

static void split(const char *s, char out[][64], int *n, int max)
{
    *n = 0;
    if (!s) return;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && *n < max; t = strtok_r(NULL, ",", &save))
        snprintf(out[(*n)++], 64, "%s", t);
    free(copy);
}

int dm_cmd_compare(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("compare", compare_opts, argc, argv, &a) != 0) return dm_report_error();
    const char *tdir = dm_arg(&a, compare_opts, "truth"), *fdir = dm_arg(&a, compare_opts, "fit");
    char params[32][64], axes[2][64], rnames[32][64];
    int np, na, nr;
    split(dm_arg(&a, compare_opts, "params"), params, &np, 32);
    split(dm_arg(&a, compare_opts, "axes"), axes, &na, 2);
    split(dm_arg(&a, compare_opts, "region-names"), rnames, &nr, 32);
    int rc = 0;
    dm_volume status = {0}, regions = {0};
    if (!tdir || !fdir) {
        rc = dm_set_error("compare: --truth and --fit are required");
        goto done;
    }
    if ((rc = load(fdir, "status", &status)) != 0) goto done;
    size_t nvox = DM_NVOX(&status);
    const char *rpath = dm_arg(&a, compare_opts, "regions");
    if (rpath && ((rc = dm_volume_read(rpath, &regions)) != 0 ||
                  (rc = dm_volume_check_same_grid(&regions, rpath, &status, "status")) != 0))
        goto done;
    int nlabels = 1;
    for (size_t v = 0; regions.data && v < nvox; v++)
        if (regions.data[v] > nlabels) nlabels = (int)regions.data[v];
    if (nlabels > 64) nlabels = 64;

    printf("%-14s %7s  %-8s %10s %10s %10s\n", "region", "voxels", "map", "truth", "fitted", "mean|err|");
    for (int i = 0; i < np && rc == 0; i++) {
        dm_volume t = {0}, f = {0};
        if ((rc = load(tdir, params[i], &t)) != 0 || (rc = load(fdir, params[i], &f)) != 0) {
            dm_volume_free(&t);
            goto done;
        }
        for (int l = 1; l <= nlabels; l++) {
            double st = 0, sf = 0, se = 0;
            long n = 0;
            for (size_t v = 0; v < nvox; v++) {
                int s = (int)status.data[v];
                if ((s != 1 && s != 2) || (regions.data && (int)regions.data[v] != l)) continue;
                st += t.data[v];
                sf += f.data[v];
                se += fabs(f.data[v] - t.data[v]);
                n++;
            }
            if (!n) continue;
            printf("%-14s %7ld  %-8s %10.4g %10.4g %10.3g\n", l <= nr ? rnames[l - 1] : "all", n,
                   params[i], st / n, sf / n, se / n);
        }
        dm_volume_free(&t);
        dm_volume_free(&f);
    }
    if (na > 0 && rc == 0) {
        dm_volume t[2] = {{0}}, f[2] = {{0}};
        for (int i = 0; i < na && rc == 0; i++)
            if ((rc = load(tdir, axes[i], &t[i])) != 0 || (rc = load(fdir, axes[i], &f[i])) != 0) break;
        if (rc == 0) {
            printf("\n%-14s %7s  %-8s %22s\n", "region", "voxels", "axis", "median angle (deg)");
            double *ang[2] = {malloc(nvox * sizeof(double)), malloc(nvox * sizeof(double))};
            for (int l = 1; l <= nlabels; l++) {
                long n = 0;
                for (size_t v = 0; v < nvox; v++) {
                    int s = (int)status.data[v];
                    if ((s != 1 && s != 2) || (regions.data && (int)regions.data[v] != l)) continue;
                    if (na == 2) { /* fibre labels may swap: keep the better pairing */
                        double s0 = angle_deg(t[0].data, f[0].data, v, nvox) + angle_deg(t[1].data, f[1].data, v, nvox);
                        double s1 = angle_deg(t[0].data, f[1].data, v, nvox) + angle_deg(t[1].data, f[0].data, v, nvox);
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
                    printf("%-14s %7ld  %-8s %22.2f\n", l <= nr ? rnames[l - 1] : "all", n, axes[i],
                           n % 2 ? ang[i][n / 2] : 0.5 * (ang[i][n / 2 - 1] + ang[i][n / 2]));
                }
            }
            free(ang[0]);
            free(ang[1]);
        }
        for (int i = 0; i < 2; i++) {
            dm_volume_free(&t[i]);
            dm_volume_free(&f[i]);
        }
    }
done:
    dm_volume_free(&status);
    dm_volume_free(&regions);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
