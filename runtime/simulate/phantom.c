/* The ball & two sticks phantom: four regions of known parameters, written as maps. */
#include "simulate/phantom.h"
#include "io/volume.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { P_S0, P_D, P_F1, P_TH1, P_PH1, P_F2, P_TH2, P_PH2, NP };
static const char *names[NP] = {"S0", "d", "f1", "th1", "ph1", "f2", "th2", "ph2"};

/* The parameters of a voxel of region 1..4; the first fibre always runs along x. */
static void region_params(int region, double p[NP])
{
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
    const double q[NP] = {1000, d, f1, M_PI / 2, 0, f2, th2, ph2};
    for (int k = 0; k < NP; k++) p[k] = q[k];
}

int dm_phantom_write(const char *dir, int size, dm_provenance *prov)
{
    if (size < 1) return dm_set_error("phantom: the size must be at least 1, not %d", size);
    int nx = 4 * size, ny = size, nz = 2;
    size_t nvox = (size_t)nx * ny * nz;
    double *maps[NP], *regions = calloc(nvox, sizeof(double)), *mask = calloc(nvox, sizeof(double));
    double *dy1 = calloc(3 * nvox, sizeof(double)), *dy2 = calloc(3 * nvox, sizeof(double));
    int rc = 0;
    for (int k = 0; k < NP; k++) {
        maps[k] = calloc(nvox, sizeof(double));
        if (!maps[k]) rc = -1;
    }
    if (rc != 0 || !regions || !mask || !dy1 || !dy2) {
        rc = dm_set_error("out of memory");
        goto done;
    }
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                size_t v = x + (size_t)nx * (y + (size_t)ny * z);
                int region = 1 + x / size;
                double p[NP];
                region_params(region, p);
                for (int k = 0; k < NP; k++) maps[k][v] = p[k];
                double u1[3] = {sin(p[P_TH1]) * cos(p[P_PH1]), sin(p[P_TH1]) * sin(p[P_PH1]),
                                cos(p[P_TH1])};
                double u2[3] = {sin(p[P_TH2]) * cos(p[P_PH2]), sin(p[P_TH2]) * sin(p[P_PH2]),
                                cos(p[P_TH2])};
                for (int c = 0; c < 3; c++) {
                    dy1[v + c * nvox] = u1[c];
                    dy2[v + c * nvox] = u2[c];
                }
                regions[v] = region;
                mask[v] = 1;
            }
    dm_outdir od;
    if ((rc = dm_outdir_begin(&od, dir, DM_OUTDIR_REPLACE)) != 0) goto done;
    char file[4400];
    for (int k = 0; k < NP && rc == 0; k++) {
        char *path = dm_volume_output_path(od.path, names[k]);
        rc = path ? dm_volume_write_new(path, nx, ny, nz, 1, 2.0, maps[k]) : -1;
        free(path);
    }
    struct {
        const char *name;
        double *data;
        int nt;
    } extra[] = {
        {"dyads1", dy1, 3}, {"dyads2", dy2, 3}, {"regions", regions, 1}, {"mask", mask, 1}};
    for (int i = 0; i < 4 && rc == 0; i++) {
        char *path = dm_volume_output_path(od.path, extra[i].name);
        rc = path ? dm_volume_write_new(path, nx, ny, nz, extra[i].nt, 2.0, extra[i].data) : -1;
        free(path);
    }
    if (rc == 0) {
        dm_provenance_num(prov, DM_PROV_OPTION, "size", size);
        snprintf(file, sizeof file, "%s/provenance.json", od.path);
        rc = dm_provenance_write(prov, file);
    }
    if (rc == 0)
        rc = dm_outdir_commit(&od);
    else
        dm_outdir_abort(&od);
done:
    for (int k = 0; k < NP; k++) free(maps[k]);
    free(regions);
    free(mask);
    free(dy1);
    free(dy2);
    return rc;
}
