/* The simulator: a model's compiled predict function evaluated voxel by voxel, plus noise. */
#include "simulate/simulate.h"
#include "fit/cpu_backend.h"
#include "fit/fit.h"
#include "io/scheme_file.h"
#include "io/textio.h"
#include "io/volume.h"
#include "simulate/noise.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A parameter or per-voxel input source: a constant or a map. */
typedef struct source {
    double value;
    dm_volume map; /* map.data NULL: constant */
} source;

/* The value of NAME in "NAME=VALUE,.." (the last one given); 0 when absent. */
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

/* Every NAME of "NAME=VALUE,.." is a parameter (params) or a per-voxel input of the model. */
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
        if (params)
            ok = dm_model_param_index(mi, t) >= 0;
        else
            for (int i = 0; i < mi->nvoxels; i++) ok |= !strcmp(mi->voxels[i].name, t);
        if (!ok)
            rc = dm_set_error("%s: model '%s' has no %s '%s'", what, mi->name,
                              params ? "parameter" : "per-voxel input", t);
    }
    free(copy);
    return rc;
}

/* A number, else a map, which must be on the grid of the first map opened (*grid). */
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

/* The protocol's length: the number of b-values, else the scheme file's rows, else the length
 * of the first measure file (its longer side). */
static int protocol_length(const dm_simulate_settings *s, int *M)
{
    int r, c;
    double *tmp;
    if (s->bvals) {
        if (dm_read_matrix(s->bvals, &r, &c, &tmp) != 0) return -1;
        *M = r * c;
        free(tmp);
        return 0;
    }
    if (s->scheme) {
        dm_scheme sch;
        if (dm_scheme_read(s->scheme, &sch) != 0) return -1;
        *M = sch.rows;
        dm_scheme_free(&sch);
        return 0;
    }
    const char *eq = s->measure ? strchr(s->measure, '=') : NULL;
    if (!eq)
        return dm_set_error(
            "simulate: give --bvals, --scheme or --measure NAME=FILE to define the protocol");
    char path[4096];
    snprintf(path, sizeof path, "%s", eq + 1);
    char *comma = strchr(path, ',');
    if (comma) *comma = 0;
    if (dm_read_matrix(path, &r, &c, &tmp) != 0) return -1;
    *M = r > c ? r : c;
    free(tmp);
    return 0;
}

/* Voxel v's noisy signal from its noise-free `row` into signal (volume-major, nvox apart).
 * Normal deviates come in pairs; a Rician draw takes its second, imaginary deviate from the
 * counters M.. so that the real parts are the same as with Gaussian noise. */
static void add_noise(const dm_simulate_settings *s, size_t v, size_t nvox, int M,
                      const double *row, double sigma, double *signal)
{
    for (int j = 0; j < M; j += 2) {
        double z[2] = {0, 0};
        if (s->noise != DM_SIM_NOISE_NONE) dm_noise_normal_pair(s->seed, v, (unsigned)j, z);
        for (int t = 0; t < 2 && j + t < M; t++) {
            double x = row[j + t], y = x;
            if (s->noise == DM_SIM_NOISE_GAUSSIAN) y = x + sigma * z[t];
            if (s->noise == DM_SIM_NOISE_RICIAN) {
                double z2[2];
                dm_noise_normal_pair(s->seed, v, (unsigned)(M + j + t), z2);
                y = sqrt((x + sigma * z[t]) * (x + sigma * z[t]) + sigma * z2[0] * sigma * z2[0]);
            }
            signal[v + (size_t)(j + t) * nvox] = y;
        }
    }
}

int dm_simulate_run(const dm_simulate_settings *s, dm_provenance *prov)
{
    int rc = 0;
    dm_model_info mi;
    memset(&mi, 0, sizeof mi);
    source ps[DM_MAX_PARAMS], vs[16];
    memset(ps, 0, sizeof ps);
    memset(vs, 0, sizeof vs);
    double *meas = NULL, *bvals = NULL, *signal = NULL, *mask = NULL;
    dm_cpu_fitter fitter = {0};
    const dm_volume *grid = NULL;
    char *tmp[3] = {NULL, NULL, NULL}, *final[3] = {NULL, NULL, NULL};
    char text[4096];
    int M = 0;

    if ((rc = dm_model_load(s->model, &mi)) != 0) goto done;
    if ((rc = check_names(s->params, "--params", &mi, 1)) != 0) goto done;
    if ((rc = check_names(s->voxel, "--voxel", &mi, 0)) != 0) goto done;
    for (int k = 0; k < mi.nparams; k++) {
        if (!find_value(s->params, mi.params[k].name, text, sizeof text)) {
            rc = dm_set_error("simulate: --params gives no value for parameter '%s'",
                              mi.params[k].name);
            goto done;
        }
        if ((rc = open_source(text, &ps[k], &grid)) != 0) goto done;
    }
    for (int i = 0; i < mi.nvoxels; i++) {
        if (find_value(s->voxel, mi.voxels[i].name, text, sizeof text)) {
            if ((rc = open_source(text, &vs[i], &grid)) != 0) goto done;
        } else if (isnan(mi.voxels[i].default_value)) {
            rc = dm_set_error("simulate: model '%s' needs --voxel %s=VALUE|MAP", mi.name,
                              mi.voxels[i].name);
            goto done;
        } else {
            vs[i].value = mi.voxels[i].default_value;
        }
    }
    int nx = grid ? grid->nx : (int)s->voxels, ny = grid ? grid->ny : 1, nz = grid ? grid->nz : 1;
    size_t nvox = (size_t)nx * ny * nz;
    if ((rc = protocol_length(s, &M)) != 0) goto done;
    if ((rc = dm_build_measurements(&mi, s->bvals, s->bvecs, s->measure, s->scheme, M, &meas,
                                    &bvals)) != 0)
        goto done;
    if ((rc = dm_cpu_fitter_load(&mi, 8, &fitter)) != 0) goto done;

    signal = malloc(nvox * M * sizeof *signal);
    mask = calloc(nvox, sizeof *mask);
    if (!signal || !mask) {
        rc = dm_set_error("out of memory for %zu voxels of %d measurements", nvox, M);
        goto done;
    }
    /* Voxels on all cores: each voxel's noise is keyed by its index, so the image does not
     * depend on the thread count. */
    _Atomic int stopped = 0;
#pragma omp parallel
    {
        double p[DM_MAX_PARAMS], vin[64];
        double *own = malloc(M * sizeof *own);
#pragma omp for schedule(dynamic, 256)
        for (long vi = 0; vi < (long)nvox; vi++) {
            size_t v = (size_t)vi;
            if (!own || stopped) continue;
            if ((v & 1023) == 0 && dm_stop_requested()) {
                stopped = 1;
                continue;
            }
            for (int k = 0; k < mi.nparams; k++) p[k] = source_at(&ps[k], v, nvox, 0);
            for (int i = 0; i < mi.nvoxels; i++)
                for (int c = 0; c < mi.voxels[i].width; c++)
                    vin[mi.voxels[i].column + c] = source_at(&vs[i], v, nvox, c);
            fitter.predict(p, meas, M, vin, own);
            double b0 = 0, mx = 0;
            int nb0 = 0, finite = 1;
            for (int j = 0; j < M; j++) {
                if (!isfinite(own[j])) finite = 0;
                if (own[j] > mx) mx = own[j];
                if (bvals && bvals[j] <= 50) {
                    b0 += own[j];
                    nb0++;
                }
            }
            double sigma = (nb0 ? b0 / nb0 : mx) / (s->snr > 0 ? s->snr : 1);
            mask[v] = finite && mx > 0;
            add_noise(s, v, nvox, M, own, sigma, signal);
        }
        if (!own) stopped = -1;
        free(own);
    }
    if (stopped) {
        rc = stopped > 0 ? dm_stop_error() : dm_set_error("out of memory for a voxel's signal");
        goto done;
    }
    /* The image, the mask and the provenance go in place together (util/outdir.h). */
    final[0] = (char *)s->out;
    final[1] = (char *)s->mask_out;
    final[2] = dm_provenance_sidecar(s->out);
    if (!(tmp[0] = dm_volume_temp_name(s->out)) ||
        (s->mask_out && !(tmp[1] = dm_volume_temp_name(s->mask_out)))) {
        rc = -1;
        goto done;
    }
    if (!final[2] || !(tmp[2] = dm_temp_sibling(final[2]))) {
        rc = dm_set_error("out of memory");
        goto done;
    }
    if (grid)
        rc = dm_volume_write(tmp[0], grid, M, signal, DM_OUT_FLOAT32);
    else
        rc = dm_volume_write_new(tmp[0], nx, ny, nz, M, 2.0, signal);
    if (rc == 0 && s->mask_out) {
        if (grid)
            rc = dm_volume_write(tmp[1], grid, 1, mask, DM_OUT_UINT8);
        else
            rc = dm_volume_write_new(tmp[1], nx, ny, nz, 1, 2.0, mask);
    }
    if (rc == 0) {
        dm_provenance_str(prov, DM_PROV_RESULT, "model_name", mi.name);
        dm_provenance_str(prov, DM_PROV_RESULT, "model_source_hash", mi.source_hash);
        dm_provenance_num(prov, DM_PROV_RESULT, "voxels", (double)nvox);
        dm_provenance_num(prov, DM_PROV_RESULT, "measurements", M);
        rc = dm_provenance_write(prov, tmp[2]);
    }
    if (rc == 0) {
        rc = dm_commit_files(tmp, final, 3); /* renames them, or removes them */
        for (int i = 0; i < 3; i++) {
            free(tmp[i]);
            tmp[i] = NULL;
        }
    }
done:
    for (int i = 0; i < 3; i++)
        if (tmp[i]) {
            unlink(tmp[i]);
            free(tmp[i]);
        }
    free(final[2]);
    for (int k = 0; k < DM_MAX_PARAMS; k++) dm_volume_free(&ps[k].map);
    for (int i = 0; i < 16; i++) dm_volume_free(&vs[i].map);
    free(meas);
    free(bvals);
    free(signal);
    free(mask);
    dm_cpu_fitter_close(&fitter);
    dm_model_info_free(&mi);
    return rc;
}
