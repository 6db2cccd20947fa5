/* The tensor fit of a whole image: inputs read and checked, voxels fitted in parallel, maps
 * written with FSL's names. */
#include "dti/dti_maps.h"
#include "io/gradients.h"
#include "io/space.h"
#include "io/textio.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const dm_dti_map_names[DM_DTI_NMAPS] = {"V1", "V2", "V3", "L1", "L2",     "L3",
                                                    "FA", "MD", "MO", "S0", "tensor", "sse"};
const int dm_dti_map_volumes[DM_DTI_NMAPS] = {3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 1};

static int in_mask(const dm_volume *mask, size_t v)
{
    return !mask->data || (mask->data[v] != 0 && !isnan(mask->data[v]));
}

int dm_dti_image_read(dm_dti_image *im, const char *data, const char *bvals, const char *bvecs,
                      const char *grad, const char *mask)
{
    memset(im, 0, sizeof *im);
    im->mask_path = mask;
    if (dm_volume_read(data, &im->data) != 0) return -1;
    if (im->data.nt < 7)
        return dm_set_error("%s: %d volume%s; a tensor fit needs a 4D image of at least 7", data,
                            im->data.nt, im->data.nt == 1 ? "" : "s");
    const dm_grad_files grads = {bvals, bvecs, grad};
    const char *table = NULL;
    if (dm_read_gradients(&grads, &im->data, data, &im->bvals, &im->bvecs, &table) != 0 ||
        dm_check_directed(bvecs ? bvecs : table, im->data.nt, im->bvals, im->bvecs) != 0)
        return -1;
    if (mask && dm_volume_read(mask, &im->mask) != 0) return -1;
    if (mask && im->mask.nt > 1)
        return dm_set_error("%s: a 4D image (%dx%dx%dx%d); a mask is 3D", mask, im->mask.nx,
                            im->mask.ny, im->mask.nz, im->mask.nt);
    if (mask && dm_volume_check_same_space(&im->mask, mask, &im->data, data) != 0) return -1;
    if (dm_dti_protocol_init(&im->proto, im->data.nt, im->bvals, im->bvecs) != 0)
        return dm_set_error("%s: %s", bvecs ? bvecs : table, dm_last_error());
    return 0;
}

void dm_dti_image_free(dm_dti_image *im)
{
    free(im->bvals);
    free(im->bvecs);
    dm_dti_protocol_free(&im->proto);
    dm_volume_free(&im->data);
    dm_volume_free(&im->mask);
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

int dm_dti_maps_fit(const dm_dti_image *im, const dm_dti_settings *s, dm_dti_maps *out)
{
    memset(out, 0, sizeof *out);
    /* The settings apply to a copy: the image's protocol stays as it was read. */
    dm_dti_protocol proto = im->proto;
    proto.weighted = s->weighted;
    proto.min_signal = s->min_signal;
    proto.iterations = s->iterations;
    proto.min_signal_relative = s->min_signal_relative;
    if (!isnan(s->min_diffusivity)) proto.min_diffusivity = s->min_diffusivity;

    const dm_volume *data = &im->data, *mask = &im->mask;
    const size_t nvox = DM_NVOX(data);
    const int M = data->nt;
    out->nvox = nvox;
    for (size_t v = 0; v < nvox; v++) out->nmask += in_mask(mask, v);
    if (out->nmask == 0) return dm_set_error("%s: the mask selects no voxel", im->mask_path);
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
#pragma omp parallel
    {
        double *signal = buffers + (size_t)omp_get_thread_num() * 3 * M, *work = signal + M;
#pragma omp for schedule(dynamic, 256)
        for (size_t v = 0; v < nvox; v++) {
            if (!in_mask(mask, v) || dm_stop_requested()) continue;
            for (int j = 0; j < M; j++) signal[j] = data->data[v + (size_t)j * nvox];
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
    if (dm_stop_requested()) return dm_stop_error();

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

int dm_dti_maps_write(const dm_dti_maps *m, const dm_volume *like, const char *dir,
                      const char *prefix, int save_tensor, int save_sse, dm_provenance *prov)
{
    const char *pre = prefix ? prefix : "";
    dm_outdir od;
    if (dm_outdir_begin(&od, dir, *pre ? DM_OUTDIR_MERGE : DM_OUTDIR_REPLACE) != 0) return -1;
    int rc = 0;
    for (int k = 0; k < DM_DTI_NMAPS && rc == 0; k++) {
        if ((k == DM_DTI_MAP_TENSOR && !save_tensor) || (k == DM_DTI_MAP_SSE && !save_sse))
            continue;
        char name[512];
        snprintf(name, sizeof name, "%s%s.nii.gz", pre, dm_dti_map_names[k]);
        char *path = dm_volume_output_path(od.path, name);
        rc = path ? dm_volume_write(path, like, dm_dti_map_volumes[k], m->map[k], DM_OUT_FLOAT32)
                  : dm_set_error("out of memory");
        free(path);
    }
    if (rc == 0) {
        dm_provenance_num(prov, DM_PROV_RESULT, "voxels_in_mask", (double)m->nmask);
        dm_provenance_num(prov, DM_PROV_RESULT, "fitted", (double)m->fitted);
        dm_provenance_num(prov, DM_PROV_RESULT, "ols_only", (double)m->ols_only);
        dm_provenance_num(prov, DM_PROV_RESULT, "skipped_nonfinite", (double)m->skipped_nonfinite);
        dm_provenance_num(prov, DM_PROV_RESULT, "skipped_zero", (double)m->skipped_zero);
        dm_provenance_num(prov, DM_PROV_RESULT, "fit_seconds", m->seconds);
        char name[512];
        snprintf(name, sizeof name, "%sprovenance.json", pre);
        char *path = dm_path_join(od.path, name);
        rc = dm_provenance_write(prov, path);
        free(path);
    }
    if (rc == 0) return dm_outdir_commit(&od);
    dm_outdir_abort(&od);
    return -1;
}

void dm_dti_maps_free(dm_dti_maps *m)
{
    for (int k = 0; k < DM_DTI_NMAPS; k++) free(m->map[k]);
    free(m->status);
    memset(m, 0, sizeof *m);
}
