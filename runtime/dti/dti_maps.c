/* The tensor fit of a whole image in memory: inputs checked, voxels fitted in parallel into
 * maps.  It reads and writes no file (dti_files.c is the command's side). */
#include "dti/dti_maps.h"
#include "io/textio.h"
#include "util/error.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const dm_dti_map_names[DM_DTI_NMAPS] = {"V1", "V2", "V3", "L1", "L2",     "L3",
                                                    "FA", "MD", "MO", "S0", "tensor", "sse"};
const int dm_dti_map_volumes[DM_DTI_NMAPS] = {3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 1};

/* Voxel v (x fastest) of a 3D view, or 1 without one: in the mask where non-zero, not NaN. */
static int in_mask(const dm_image_view *mask, size_t v)
{
    if (!mask->data) return 1;
    size_t nx = mask->shape[0], ny = mask->shape[1];
    double m = dm_view_at(mask, v % nx, v / nx % ny, v / (nx * ny), 0);
    return m != 0 && !isnan(m);
}

int dm_dti_image_build(dm_dti_image *im, const dm_image_view *data, const dm_image_view *mask,
                       const double *b, const double *g, const char *bvecs)
{
    memset(im, 0, sizeof *im);
    im->data = *data;
    if (mask) im->mask = *mask;
    int M = (int)dm_view_nt(data);
    if (data->ndim != 4 || M < 7)
        return dm_set_error("%s: %d volume%s; a tensor fit needs a 4D image of at least 7",
                            data->name, M, M == 1 ? "" : "s");
    if (im->mask.data) {
        if (im->mask.ndim != 3 && !(im->mask.ndim == 4 && im->mask.shape[3] == 1))
            return dm_set_error("%s: a 4D image (%zux%zux%zux%zu); a mask is 3D", im->mask.name,
                                im->mask.shape[0], im->mask.shape[1], im->mask.shape[2],
                                im->mask.shape[3]);
        if (im->mask.shape[0] != data->shape[0] || im->mask.shape[1] != data->shape[1] ||
            im->mask.shape[2] != data->shape[2])
            return dm_set_error("%s: grid %zux%zux%zu differs from %s (%zux%zux%zu)", im->mask.name,
                                im->mask.shape[0], im->mask.shape[1], im->mask.shape[2], data->name,
                                data->shape[0], data->shape[1], data->shape[2]);
    }
    if (dm_check_directed(bvecs, M, b, g) != 0) return -1;
    if (dm_dti_protocol_init(&im->proto, M, b, g) != 0)
        return dm_set_error("%s: %s", bvecs, dm_last_error());
    return 0;
}

void dm_dti_image_free(dm_dti_image *im)
{
    dm_dti_protocol_free(&im->proto);
    memset(im, 0, sizeof *im);
}

/* Stores one voxel's result in the maps. */
static void store(dm_dti_maps *m, size_t v, const dm_dti_result *r)
{
    const size_t nvox = m->nvox;
    for (int k = 0; k < 3; k++) {
        for (int c = 0; c < 3; c++) m->map[DM_DTI_MAP_V1 + k][v + c * nvox] = r->vec[k][c];
        m->map[DM_DTI_MAP_L1 + k][v] = r->lambda[k];
    }
    m->map[DM_DTI_MAP_FA][v] = r->FA;
    m->map[DM_DTI_MAP_MD][v] = r->MD;
    m->map[DM_DTI_MAP_MO][v] = r->MO;
    m->map[DM_DTI_MAP_S0][v] = r->S0;
    for (int c = 0; c < 6; c++) m->map[DM_DTI_MAP_TENSOR][v + c * nvox] = r->tensor[c];
}

int dm_dti_maps_fit(const dm_dti_image *im, const dm_dti_settings *s, dm_watch *watch,
                    dm_dti_maps *out)
{
    memset(out, 0, sizeof *out);
    /* The settings apply to a copy: the image's protocol stays as it was read. */
    dm_dti_protocol proto = im->proto;
    proto.weighted = s->weighted;
    proto.min_signal = s->min_signal;
    proto.iterations = s->iterations;
    proto.min_signal_relative = s->min_signal_relative;
    if (!isnan(s->min_diffusivity)) proto.min_diffusivity = s->min_diffusivity;

    const dm_image_view *data = &im->data, *mask = &im->mask;
    const size_t nx = data->shape[0], ny = data->shape[1];
    const size_t nvox = nx * ny * data->shape[2];
    const int M = (int)dm_view_nt(data);
    out->nvox = nvox;
    for (size_t v = 0; v < nvox; v++) out->nmask += in_mask(mask, v);
    if (out->nmask == 0) return dm_set_error("%s: the mask selects no voxel", mask->name);
    for (int m = 0; m < DM_DTI_NMAPS; m++) {
        out->map[m] = calloc(nvox * dm_dti_map_volumes[m], sizeof *out->map[m]);
        if (!out->map[m]) return dm_set_error("out of memory for the %s map", dm_dti_map_names[m]);
    }
    out->status = calloc(nvox, 1);
    if (!out->status) return dm_set_error("out of memory");

    double t0 = omp_get_wtime();
    if (s->threads > 0) omp_set_num_threads(s->threads);
    /* per thread: the voxel's signal, then the fit's 2 M doubles of work space */
    double *buffers = malloc((size_t)omp_get_max_threads() * 3 * M * sizeof *buffers);
    if (!buffers) return dm_set_error("out of memory");
    unsigned char *status = out->status;
    atomic_size_t done = 0;
    _Atomic int stopped = 0;
    dm_watch_report(watch, "dti", 0);
#pragma omp parallel
    {
        double *signal = buffers + (size_t)omp_get_thread_num() * 3 * M, *work = signal + M;
        size_t mine = 0;
#pragma omp for schedule(dynamic, 256)
        for (size_t v = 0; v < nvox; v++) {
            if (stopped || !in_mask(mask, v)) continue;
            if (dm_watch_tick(watch, "dti", &mine, &done, out->nmask)) stopped = 1;
            size_t x = v % nx, y = v / nx % ny, z = v / (nx * ny);
            for (int j = 0; j < M; j++) signal[j] = dm_view_at(data, x, y, z, (size_t)j);
            dm_dti_result r;
            status[v] = (unsigned char)dm_dti_fit_voxel(&proto, signal, work, &r);
            if (status[v] != DM_DTI_FITTED && status[v] != DM_DTI_OLS_ONLY) continue;
            store(out, v, &r);
            if (s->sse) {
                double sse = 0;
                for (int j = 0; j < M; j++) {
                    double e = signal[j] - dm_dti_predict(&proto, &r, j);
                    sse += e * e;
                }
                out->map[DM_DTI_MAP_SSE][v] = sse;
            }
        }
    }
    out->seconds = omp_get_wtime() - t0;
    free(buffers);
    if (stopped || dm_watch_stopping(watch)) return dm_watch_stop_error(watch);
    dm_watch_report(watch, "dti", 1);

    for (size_t v = 0; v < nvox; v++) {
        switch (status[v]) {
        case DM_DTI_FITTED: out->fitted++; break;
        case DM_DTI_OLS_ONLY: out->fitted++, out->ols_only++; break;
        case DM_DTI_SKIPPED_NONFINITE: out->skipped_nonfinite++; break;
        case DM_DTI_SKIPPED_ZERO: out->skipped_zero++; break;
        }
    }
    return 0;
}

void dm_dti_provenance(dm_provenance *prov, const dm_dti_maps *m)
{
    dm_provenance_num(prov, DM_PROV_RESULT, "voxels_in_mask", (double)m->nmask);
    dm_provenance_num(prov, DM_PROV_RESULT, "fitted", (double)m->fitted);
    dm_provenance_num(prov, DM_PROV_RESULT, "ols_only", (double)m->ols_only);
    dm_provenance_num(prov, DM_PROV_RESULT, "skipped_nonfinite", (double)m->skipped_nonfinite);
    dm_provenance_num(prov, DM_PROV_RESULT, "skipped_zero", (double)m->skipped_zero);
    dm_provenance_num(prov, DM_PROV_RESULT, "fit_seconds", m->seconds);
}

void dm_dti_maps_free(dm_dti_maps *m)
{
    for (int k = 0; k < DM_DTI_NMAPS; k++) free(m->map[k]);
    free(m->status);
    memset(m, 0, sizeof *m);
}
