/* dimoc phantom: a small ball & two sticks phantom with known truth, for the demo and tests.
 * Four regions, side by side along x: one fibre along x, two fibres crossing at 90 degrees,
 * two crossing at 60 degrees, and free water. */
#include "args.h"
#include "cli.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/volume.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt phantom_opts[] = {
    {"out", "DIR", NULL, "folder for the truth maps, regions.nii.gz and mask.nii.gz"},
    {"size", "N", "6", "each region is N x N x 2 voxels"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_phantom(FILE *out)
{
    dm_args_help(out, "dimoc phantom --out DIR [--size N]",
                 "Writes ball_2_sticks parameter maps (S0 d f1 th1 ph1 f2 th2 ph2), the fibre\n"
                 "directions dyads1/dyads2, regions.nii.gz (1 one fibre, 2 crossing at 90 degrees,\n"
                 "3 crossing at 60 degrees, 4 free water) and mask.nii.gz.  Simulate with\n"
                 "'dimoc simulate ball_2_sticks --params S0=DIR/S0.nii.gz,...'.", phantom_opts);
    return 0;
}

enum { P_S0, P_D, P_F1, P_TH1, P_PH1, P_F2, P_TH2, P_PH2, NP };
static const char *names[NP] = {"S0", "d", "f1", "th1", "ph1", "f2", "th2", "ph2"};

int dm_cmd_phantom(int argc, char **argv)
{
    dm_args a;
    long n = 6;
    if (dm_args_parse("phantom", phantom_opts, argc, argv, &a) != 0 ||
        dm_arg_long(&a, phantom_opts, "size", 1, 256, &n) != 0)
        return dm_report_error();
    const char *dir = dm_arg(&a, phantom_opts, "out");
    if (!dir) {
        dm_args_free(&a);
        dm_set_error("phantom: --out is required");
        return dm_report_error();
    }
    int nx = 4 * (int)n, ny = (int)n, nz = 2;
    size_t nvox = (size_t)nx * ny * nz;
    double *maps[NP], *regions = calloc(nvox, sizeof(double)), *mask = calloc(nvox, sizeof(double));
    double *dy1 = calloc(3 * nvox, sizeof(double)), *dy2 = calloc(3 * nvox, sizeof(double));
    for (int k = 0; k < NP; k++) maps[k] = calloc(nvox, sizeof(double));
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                size_t v = x + (size_t)nx * (y + (size_t)ny * z);
                int region = 1 + x / (int)n;
                double f1 = 0.6, f2 = 0, d = 1.5e-3, th2 = M_PI / 2, ph2 = M_PI / 2;
                if (region == 2) f1 = f2 = 0.35;
                if (region == 3) {
                    f1 = f2 = 0.35;
                    ph2 = M_PI / 3;
                }
                if (region == 4) {
                    f1 = 0.02;
                    f2 = 0;
                    d = 3e-3;
                }
                double p[NP] = {1000, d, f1, M_PI / 2, 0, f2, th2, ph2};
                for (int k = 0; k < NP; k++) maps[k][v] = p[k];
                double u1[3] = {sin(p[P_TH1]) * cos(p[P_PH1]), sin(p[P_TH1]) * sin(p[P_PH1]), cos(p[P_TH1])};
                double u2[3] = {sin(th2) * cos(ph2), sin(th2) * sin(ph2), cos(th2)};
                for (int c = 0; c < 3; c++) {
                    dy1[v + c * nvox] = u1[c];
                    dy2[v + c * nvox] = u2[c];
                }
                regions[v] = region;
                mask[v] = 1;
            }
    int rc = dm_mkdir_p(dir);
    char file[256];
    for (int k = 0; k < NP && rc == 0; k++) {
        snprintf(file, sizeof file, "%s/%s.nii.gz", dir, names[k]);
        rc = dm_volume_write_new(file, nx, ny, nz, 1, 2.0, maps[k]);
    }
    struct { const char *name; double *data; int nt; } extra[] = {
        {"dyads1", dy1, 3}, {"dyads2", dy2, 3}, {"regions", regions, 1}, {"mask", mask, 1}};
    for (int i = 0; i < 4 && rc == 0; i++) {
        snprintf(file, sizeof file, "%s/%s.nii.gz", dir, extra[i].name);
        rc = dm_volume_write_new(file, nx, ny, nz, extra[i].nt, 2.0, extra[i].data);
    }
    for (int k = 0; k < NP; k++) free(maps[k]);
    free(regions);
    free(mask);
    free(dy1);
    free(dy2);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
