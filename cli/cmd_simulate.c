/* dimoc simulate: predicted signals of any model, with or without noise. */
#include "args.h"
#include "cli.h"
#include "fit/cpu_backend.h"
#include "util/error.h"
#include "fit/fit.h"
#include "simulate/noise.h"
#include "io/textio.h"
#include "io/volume.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt sim_opts[] = {
    {"bvals", "FILE", NULL, "FSL b-values of the protocol"},
    {"bvecs", "FILE", NULL, "FSL gradient directions of the protocol"},
    {"params", "NAME=VALUE|MAP,..", NULL, "every parameter of the model, a constant or a 3D map"},
    {"voxel", "NAME=VALUE|MAP,..", NULL, "per-voxel inputs (their defaults otherwise)"},
    {"measure", "NAME=FILE", NULL, "per-measurement inputs of the model"},
    {"noise", "none|gaussian|rician", "none", "noise added to the signal"},
    {"snr", "N", "30", "signal-to-noise ratio: sigma = (noise-free mean b=0 signal) / N"},
    {"seed", "N", "1", "random seed of the noise (Philox, keyed by seed and voxel)"},
    {"voxels", "N", "1", "voxels to simulate when no parameter is a map (an N x 1 x 1 image)"},
    {"out", "FILE", NULL, "the simulated 4D image (.nii or .nii.gz)"},
    {"mask-out", "FILE", NULL, "also write a mask of the simulated voxels"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_simulate(FILE *out)
{
    dm_args_help(out, "dimoc simulate MODEL --params NAME=VALUE|MAP,.. --out FILE [options]",
                 "Evaluates MODEL in every voxel.  With parameter maps the output has their grid and\n"
                 "geometry; with constants only, it is an N x 1 x 1 image (--voxels N), each voxel\n"
                 "with its own noise.  sigma = S(b=0) / SNR, S(b=0) the voxel's noise-free mean\n"
                 "signal at b <= 50 (its largest signal when the model reads no b-values).",
                 sim_opts);
    return 0;
}

/* A parameter or per-voxel input source: a constant or a map. */
typedef struct source {
    double value;
    dm_volume map; /* map.data NULL: constant */
} source;

static int find_value(const char *spec, const char *name, char *value, size_t n)
{
    if (!spec) return 0;
    char *copy = strdup(spec), *save = NULL;
    int found = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (eq && (size_t)(eq - t) == strlen(name) && !strncmp(t, name, eq - t)) {
            snprintf(value, n, "%s", eq + 1);
            found = 1;
        }
    }
    free(copy);
    return found;
}

static int check_names(const char *spec, const char *what, const dm_model_info *mi, int params)
{
    if (!spec) return 0;
    char *copy = strdup(spec), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) {
            rc = dm_set_error("%s: '%s' is not of the form NAME=VALUE", what, t);
            break;
        }
        *eq = 0;
        int ok = 0;
        if (params) ok = dm_model_param_index(mi, t) >= 0;
        else
            for (int i = 0; i < mi->nvoxels; i++) ok |= !strcmp(mi->voxels[i].name, t);
        if (!ok) rc = dm_set_error("%s: model '%s' has no %s '%s'", what, mi->name,
                                   params ? "parameter" : "per-voxel input", t);
    }
    free(copy);
    return rc;
}

static int open_source(const char *text, source *s, const dm_volume **grid)
{
    char *end;
    memset(s, 0, sizeof *s);
    s->value = strtod(text, &end);
    if (*text && !*end) return 0;
    if (dm_volume_read(text, &s->map) != 0) return -1;
    if (*grid && dm_volume_check_same_grid(&s->map, text, *grid, "the first map") != 0) return -1;
    if (!*grid) *grid = &s->map;
    return 0;
}

static double source_at(const source *s, size_t v, size_t nvox, int c)
{
    return s->map.data ? s->map.data[v + (size_t)c * nvox] : s->value;
}

int dm_cmd_simulate(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("simulate", sim_opts, argc, argv, &a) != 0) return dm_report_error();
    int rc = 0;
    dm_model_info mi;
    memset(&mi, 0, sizeof mi);
    source ps[DM_MAX_PARAMS], vs[16];
    memset(ps, 0, sizeof ps);
    memset(vs, 0, sizeof vs);
    double *meas = NULL, *bvals = NULL, *signal = NULL;
    dm_cpu_fitter fitter = {0};
    const dm_volume *grid = NULL;
    const char *out = dm_arg(&a, sim_opts, "out");
    const char *noise = dm_arg(&a, sim_opts, "noise");
    double snr = 30;
    long seed = 1, nvox_flat = 1;
    if (a.npositional != 1) {
        rc = dm_set_error("simulate: give exactly one MODEL (see 'dimoc help simulate')");
        goto done;
    }
    if (!out) {
        rc = dm_set_error("simulate: --out is required");
        goto done;
    }
    if (dm_arg_double(&a, sim_opts, "snr", &snr) || dm_arg_long(&a, sim_opts, "seed", 0, 0x7fffffffffffffffL, &seed) ||
        dm_arg_long(&a, sim_opts, "voxels", 1, 100000000, &nvox_flat)) {
        rc = -1;
        goto done;
    }
    int kind = !strcmp(noise, "none") ? 0 : !strcmp(noise, "gaussian") ? 1 : !strcmp(noise, "rician") ? 2 : -1;
    if (kind < 0 || (kind && !(snr > 0))) {
        rc = dm_set_error("simulate: --noise must be none, gaussian or rician, with --snr > 0");
        goto done;
    }
    if ((rc = dm_model_load(a.positional[0], &mi)) != 0) goto done;
    const char *pspec = dm_arg(&a, sim_opts, "params"), *vspec = dm_arg(&a, sim_opts, "voxel");
    if ((rc = check_names(pspec, "--params", &mi, 1)) != 0) goto done;
    if ((rc = check_names(vspec, "--voxel", &mi, 0)) != 0) goto done;
    char text[4096];
    for (int k = 0; k < mi.nparams; k++) {
        if (!find_value(pspec, mi.params[k].name, text, sizeof text)) {
            rc = dm_set_error("simulate: --params gives no value for parameter '%s'", mi.params[k].name);
            goto done;
        }
        if ((rc = open_source(text, &ps[k], &grid)) != 0) goto done;
    }
    for (int i = 0; i < mi.nvoxels; i++) {
        if (find_value(vspec, mi.voxels[i].name, text, sizeof text)) {
            if ((rc = open_source(text, &vs[i], &grid)) != 0) goto done;
        } else if (isnan(mi.voxels[i].default_value)) {
            rc = dm_set_error("simulate: model '%s' needs --voxel %s=VALUE|MAP", mi.name, mi.voxels[i].name);
            goto done;
        } else {
            vs[i].value = mi.voxels[i].default_value;
        }
    }
    int nx = grid ? grid->nx : (int)nvox_flat, ny = grid ? grid->ny : 1, nz = grid ? grid->nz : 1;
    size_t nvox = (size_t)nx * ny * nz;
    /* The protocol's length: from bvals when the model reads them, else a measure file. */
    int M = 0;
    const char *bv = dm_arg(&a, sim_opts, "bvals");
    if (bv) {
        int r, c;
        double *tmp;
        if ((rc = dm_read_matrix(bv, &r, &c, &tmp)) != 0) goto done;
        M = r * c;
        free(tmp);
    } else {
        const char *ms = dm_arg(&a, sim_opts, "measure");
        char *eq = ms ? strchr(ms, '=') : NULL;
        int r, c;
        double *tmp;
        if (!eq) {
            rc = dm_set_error("simulate: give --bvals (or --measure NAME=FILE) to define the protocol");
            goto done;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s", eq + 1);
        char *comma = strchr(path, ',');
        if (comma) *comma = 0;
        if ((rc = dm_read_matrix(path, &r, &c, &tmp)) != 0) goto done;
        M = r > c ? r : c;
        free(tmp);
    }
    if ((rc = dm_build_measurements(&mi, bv, dm_arg(&a, sim_opts, "bvecs"), dm_arg(&a, sim_opts, "measure"),
                                    M, &meas, &bvals)) != 0)
        goto done;
    if ((rc = dm_cpu_fitter_load(&mi, 8, &fitter)) != 0) goto done;

    signal = malloc(nvox * M * sizeof *signal);
    double *row = malloc(M * sizeof *row);
    double *mask = calloc(nvox, sizeof *mask);
    double p[DM_MAX_PARAMS], vin[64];
    for (size_t v = 0; v < nvox; v++) {
        for (int k = 0; k < mi.nparams; k++) p[k] = source_at(&ps[k], v, nvox, 0);
        for (int i = 0; i < mi.nvoxels; i++)
            for (int c = 0; c < mi.voxels[i].width; c++)
                vin[mi.voxels[i].column + c] = source_at(&vs[i], v, nvox, c);
        fitter.predict(p, meas, M, vin, row);
        double b0 = 0, mx = 0;
        int nb0 = 0, finite = 1;
        for (int j = 0; j < M; j++) {
            if (!isfinite(row[j])) finite = 0;
            if (row[j] > mx) mx = row[j];
            if (bvals && bvals[j] <= 50) {
                b0 += row[j];
                nb0++;
            }
        }
        double sigma = (nb0 ? b0 / nb0 : mx) / (snr > 0 ? snr : 1);
        mask[v] = finite && mx > 0;
        for (int j = 0; j < M; j += 2) {
            double z[2] = {0, 0};
            if (kind) dm_noise_normal_pair((unsigned long long)seed, v, (unsigned)j, z);
            for (int t = 0; t < 2 && j + t < M; t++) {
                double s = row[j + t], y = s;
                if (kind == 1) y = s + sigma * z[t];
                if (kind == 2) {
                    double z2[2];
                    dm_noise_normal_pair((unsigned long long)seed, v, (unsigned)(M + j + t), z2);
                    y = sqrt((s + sigma * z[t]) * (s + sigma * z[t]) + sigma * z2[0] * sigma * z2[0]);
                }
                signal[v + (size_t)(j + t) * nvox] = y;
            }
        }
    }
    free(row);
    if (grid) rc = dm_volume_write(out, grid, M, signal, 0);
    else rc = dm_volume_write_new(out, nx, ny, nz, M, 2.0, signal);
    const char *mask_out = dm_arg(&a, sim_opts, "mask-out");
    if (rc == 0 && mask_out) {
        dm_volume like = {0};
        if (grid) rc = dm_volume_write(mask_out, grid, 1, mask, 1);
        else rc = dm_volume_write_new(mask_out, nx, ny, nz, 1, 2.0, mask);
        (void)like;
    }
    free(mask);
done:
    for (int k = 0; k < DM_MAX_PARAMS; k++) dm_volume_free(&ps[k].map);
    for (int i = 0; i < 16; i++) dm_volume_free(&vs[i].map);
    free(meas);
    free(bvals);
    free(signal);
    dm_cpu_fitter_close(&fitter);
    dm_model_info_free(&mi);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
