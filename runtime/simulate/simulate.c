/* The simulator's engine (simulate.h): a model's compiled predict function evaluated voxel by
 * voxel on arrays, plus noise.  It reads and writes no file. */
#include "simulate/simulate.h"
#include "fit/cpu_backend.h"
#include "simulate/noise.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Voxels between two reports of progress from a thread. */
#define REPORT_EVERY 256

/* Byte offset of voxel v (x fastest) in a map of grid nx x ny. */
static ptrdiff_t voxel_offset(const dm_array *a, size_t nx, size_t ny, size_t v)
{
    return (ptrdiff_t)(v % nx) * a->stride[0] + (ptrdiff_t)(v / nx % ny) * a->stride[1] +
           (ptrdiff_t)(v / (nx * ny)) * a->stride[2];
}

/* Component c of an item at voxel v: its value, or its map's (a 3D map has one component). */
static double item_at(const dm_fit_item *x, const dm_simulate_inputs *in, size_t v, int c)
{
    const dm_array *a = &x->map;
    if (a->ndim == 0) return dm_array_at(a, 0);
    ptrdiff_t o = voxel_offset(a, in->nx, in->ny, v);
    if (a->ndim == 4) o += (ptrdiff_t)c * a->stride[3];
    return dm_array_at(a, o);
}

/* Map x lies on the grid with `width` values per voxel (X x Y x Z, or X x Y x Z x width; a
 * parameter's 4D map is read at its first volume, as the command always has). */
static int check_map(const dm_simulate_inputs *in, const dm_fit_item *x, const char *option,
                     int width, int parameter)
{
    const dm_array *a = &x->map;
    if (a->ndim == 0) return 0; /* one value for every voxel (and every component) */
    int ok = (a->ndim == 3 || a->ndim == 4) && a->shape[0] == in->nx && a->shape[1] == in->ny &&
             a->shape[2] == in->nz;
    if (ok && a->ndim == 4 && !parameter) ok = a->shape[3] == (size_t)width;
    if (ok && a->ndim == 3 && !parameter) ok = width == 1;
    if (ok) return 0;
    char shape[96] = "";
    for (int k = 0, n = 0; k < a->ndim && n < (int)sizeof shape; k++)
        n += snprintf(shape + n, sizeof shape - n, "%s%zu", k ? "x" : "", a->shape[k]);
    return dm_set_error("%s %s: a map of %s, not the grid %zux%zux%zu%s", option, x->name, shape,
                        in->nx, in->ny, in->nz, width > 1 ? " with a volume per value" : "");
}

/* Which item gives each parameter and per-voxel input: pi[k], vi[i] (-1: a voxel input's
 * default), every name checked against the model. */
static int match_items(const dm_model_info *mi, const dm_simulate_inputs *in, int *pi, int *vi)
{
    const char *popt = in->params_option, *vopt = in->voxel_option;
    for (int i = 0; i < in->params.n; i++)
        if (dm_model_param_index(mi, in->params.item[i].name) < 0)
            return dm_set_error("%s: model '%s' has no parameter '%s'", popt, mi->name,
                                in->params.item[i].name);
    for (int i = 0; i < in->voxel.n; i++) {
        int ok = 0;
        for (int k = 0; k < mi->nvoxels; k++)
            ok |= !strcmp(mi->voxels[k].name, in->voxel.item[i].name);
        if (!ok)
            return dm_set_error("%s: model '%s' has no per-voxel input '%s'", vopt, mi->name,
                                in->voxel.item[i].name);
    }
    for (int k = 0; k < mi->nparams; k++) {
        pi[k] = -1;
        for (int i = 0; i < in->params.n; i++) /* the last one given counts */
            if (!strcmp(in->params.item[i].name, mi->params[k].name)) pi[k] = i;
        if (pi[k] < 0)
            return dm_set_error("simulate: %s gives no value for parameter '%s'", popt,
                                mi->params[k].name);
        if (check_map(in, &in->params.item[pi[k]], popt, 1, 1) != 0) return -1;
    }
    for (int k = 0; k < mi->nvoxels; k++) {
        vi[k] = -1;
        for (int i = 0; i < in->voxel.n; i++)
            if (!strcmp(in->voxel.item[i].name, mi->voxels[k].name)) vi[k] = i;
        if (vi[k] < 0 && isnan(mi->voxels[k].default_value))
            return dm_set_error("simulate: model '%s' needs %s %s=VALUE|MAP", mi->name, vopt,
                                mi->voxels[k].name);
        if (vi[k] >= 0 && check_map(in, &in->voxel.item[vi[k]], vopt, mi->voxels[k].width, 0) != 0)
            return -1;
    }
    const dm_array *m = &in->mask;
    if (m->data &&
        (m->ndim != 3 || m->shape[0] != in->nx || m->shape[1] != in->ny || m->shape[2] != in->nz))
        return dm_set_error("%s: not a 3D map of the grid %zux%zux%zu", in->mask_name, in->nx,
                            in->ny, in->nz);
    return 0;
}

/* Voxel v's noisy signal from its noise-free `row` into signal (volume-major, nvox apart).
 * Normal deviates come in pairs; a Rician draw takes its second, imaginary deviate from the
 * counters M.. so that the real parts are the same as with Gaussian noise. */
static void add_noise(const dm_simulate_inputs *in, size_t v, size_t nvox, int M, const double *row,
                      double sigma, double *signal)
{
    for (int j = 0; j < M; j += 2) {
        double z[2] = {0, 0};
        if (in->noise != DM_SIM_NOISE_NONE) dm_noise_normal_pair(in->seed, v, (unsigned)j, z);
        for (int t = 0; t < 2 && j + t < M; t++) {
            double x = row[j + t], y = x;
            if (in->noise == DM_SIM_NOISE_GAUSSIAN) y = x + sigma * z[t];
            if (in->noise == DM_SIM_NOISE_RICIAN) {
                double z2[2];
                dm_noise_normal_pair(in->seed, v, (unsigned)(M + j + t), z2);
                y = sqrt((x + sigma * z[t]) * (x + sigma * z[t]) + sigma * z2[0] * sigma * z2[0]);
            }
            signal[v + (size_t)(j + t) * nvox] = y;
        }
    }
}

int dm_simulate(const dm_model_info *mi, const dm_simulate_inputs *in, dm_fit_watch *watch,
                dm_simulation *out)
{
    memset(out, 0, sizeof *out);
    int pi[DM_MAX_PARAMS], vi[sizeof mi->voxels / sizeof mi->voxels[0]];
    const int M = in->M;
    if (M < 1) return dm_set_error("simulate: a protocol of no measurement");
    if (match_items(mi, in, pi, vi) != 0) return -1;
    double *meas = NULL, *bvals = NULL;
    if (dm_fit_measurements(mi, &in->protocol, M, &meas, &bvals) != 0) return -1;
    dm_fit_watch_stage(watch, "compile", 1);
    dm_cpu_fitter fitter = {0};
    int rc = dm_cpu_fitter_load(mi, 8, &fitter);
    const size_t nvox = in->nx * in->ny * in->nz;
    if (rc == 0) {
        out->nvox = nvox;
        out->M = M;
        out->signal = calloc(nvox * M, sizeof *out->signal);
        out->mask = calloc(nvox, 1);
        if (!out->signal || !out->mask)
            rc = dm_set_error("out of memory for %zu voxels of %d measurements", nvox, M);
    }
    if (rc != 0) {
        free(meas);
        free(bvals);
        dm_cpu_fitter_close(&fitter);
        dm_simulation_free(out);
        return -1;
    }
    dm_fit_watch_stage(watch, "simulate", (long)nvox);
    double *signal = out->signal;
    unsigned char *mask = out->mask;
    /* Voxels on all cores: each voxel's noise is keyed by its index, so the image does not
     * depend on the thread count. */
    _Atomic int stopped = 0;
#pragma omp parallel
    {
        double p[DM_MAX_PARAMS], vin[64];
        double *own = malloc(M * sizeof *own);
        long done = 0;
#pragma omp for schedule(dynamic, 256)
        for (long vx = 0; vx < (long)nvox; vx++) {
            size_t v = (size_t)vx;
            if (!own || stopped) continue;
            if (++done == REPORT_EVERY) {
                dm_fit_watch_add(watch, done);
                done = 0;
                if (dm_fit_stopping(watch)) {
                    stopped = 1;
                    continue;
                }
            }
            if (in->mask.data) {
                double m = dm_array_at(&in->mask, voxel_offset(&in->mask, in->nx, in->ny, v));
                if (m == 0 || isnan(m)) continue;
            }
            for (int k = 0; k < mi->nparams; k++) p[k] = item_at(&in->params.item[pi[k]], in, v, 0);
            for (int i = 0; i < mi->nvoxels; i++)
                for (int c = 0; c < mi->voxels[i].width; c++)
                    vin[mi->voxels[i].column + c] = vi[i] < 0
                                                        ? mi->voxels[i].default_value
                                                        : item_at(&in->voxel.item[vi[i]], in, v, c);
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
            double sigma = (nb0 ? b0 / nb0 : mx) / (in->snr > 0 ? in->snr : 1);
            mask[v] = finite && mx > 0;
            add_noise(in, v, nvox, M, own, sigma, signal);
        }
        if (!own) stopped = -1;
        dm_fit_watch_add(watch, done);
        free(own);
    }
    free(meas);
    free(bvals);
    dm_cpu_fitter_close(&fitter);
    if (stopped || dm_fit_stopping(watch)) {
        dm_simulation_free(out);
        return stopped < 0 ? dm_set_error("out of memory for a voxel's signal")
                           : dm_fit_stop_error(watch);
    }
    dm_fit_watch_done(watch);
    return 0;
}

void dm_simulate_provenance(dm_provenance *prov, const dm_model_info *mi, const dm_simulation *s)
{
    dm_provenance_str(prov, DM_PROV_RESULT, "model_name", mi->name);
    dm_provenance_str(prov, DM_PROV_RESULT, "model_source_hash", mi->source_hash);
    dm_provenance_num(prov, DM_PROV_RESULT, "voxels", (double)s->nvox);
    dm_provenance_num(prov, DM_PROV_RESULT, "measurements", s->M);
}

void dm_simulation_free(dm_simulation *s)
{
    free(s->signal);
    free(s->mask);
    memset(s, 0, sizeof *s);
}
