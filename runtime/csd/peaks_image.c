/* FOD peaks over an image (peaks_image.h): inputs checked, voxels searched in parallel with
 * one shared finder, maps written in MRtrix's and FSL's layouts. */
#include "csd/peaks_image.h"
#include "io/space.h"
#include "sphere/peaks.h"
#include "sphere/sh.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NCOEF ((DM_SH_LMAX_MAX + 1) * (DM_SH_LMAX_MAX + 2) / 2)

static int in_mask(const dm_volume *mask, size_t v)
{
    return !mask->data || (mask->data[v] != 0 && !isnan(mask->data[v]));
}

int dm_fod_image_read(dm_fod_image *im, const char *fod, const char *mask)
{
    memset(im, 0, sizeof *im);
    im->fod_path = fod;
    im->mask_path = mask;
    if (dm_volume_read(fod, &im->fod) != 0) return -1;
    int nt = im->fod.nt, lmax = dm_sh_lmax_for(nt);
    if (lmax < 0 || dm_sh_ncoef(lmax) != nt)
        return dm_set_error("%s: %d volume%s is not a count of SH coefficients of even degree "
                            "up to lmax (1, 6, 15, 28, 45, 66, 91, ... up to %d for lmax %d)",
                            fod, nt, nt == 1 ? "" : "s", dm_sh_ncoef(DM_SH_LMAX_MAX),
                            DM_SH_LMAX_MAX);
    im->lmax = lmax;
    if (mask && dm_volume_read(mask, &im->mask) != 0) return -1;
    if (mask && im->mask.nt > 1)
        return dm_set_error("%s: a 4D image (%dx%dx%dx%d); a mask is 3D", mask, im->mask.nx,
                            im->mask.ny, im->mask.nz, im->mask.nt);
    if (mask && dm_volume_check_same_space(&im->mask, mask, &im->fod, fod) != 0) return -1;
    return 0;
}

void dm_fod_image_free(dm_fod_image *im)
{
    dm_volume_free(&im->fod);
    dm_volume_free(&im->mask);
    memset(im, 0, sizeof *im);
}

int dm_peaks_find(const dm_fod_image *im, const dm_peaks_settings *s, dm_peaks_maps *out)
{
    memset(out, 0, sizeof *out);
    if (s->num < 1 || s->num > DM_PEAKS_MAX_NUM)
        return dm_set_error("peaks: %d peaks per voxel asked; 1 to %d may be", s->num,
                            DM_PEAKS_MAX_NUM);
    const dm_volume *fod = &im->fod, *mask = &im->mask;
    const size_t nvox = DM_NVOX(fod);
    const int num = s->num, nc = fod->nt;
    out->nvox = nvox;
    out->num = num;
    for (size_t v = 0; v < nvox; v++) out->nmask += in_mask(mask, v);
    if (out->nmask == 0) return dm_set_error("%s: the mask selects no voxel", im->mask_path);
    out->dirs = malloc(nvox * 3 * num * sizeof *out->dirs);
    out->amps = calloc(nvox * num, sizeof *out->amps);
    unsigned char *found = calloc(nvox, 1);
    dm_peak_finder pf;
    if (!out->dirs || !out->amps || !found || dm_peak_finder_init(&pf, im->lmax) != 0) {
        free(found);
        return dm_set_error("out of memory for the peaks of %zu voxels", nvox);
    }
    for (size_t i = 0; i < nvox * 3 * num; i++) out->dirs[i] = NAN;

    double t0 = omp_get_wtime();
    if (s->threads > 0) omp_set_num_threads(s->threads);
    double *dirs = out->dirs, *amps = out->amps;
    const double threshold = s->threshold, relative = s->relative;
#pragma omp parallel for schedule(dynamic, 64)
    for (size_t v = 0; v < nvox; v++) {
        if (!in_mask(mask, v) || dm_stop_requested()) continue;
        double coef[MAX_NCOEF], pd[3 * DM_PEAKS_MAX_NUM], pa[DM_PEAKS_MAX_NUM];
        for (int j = 0; j < nc; j++) coef[j] = fod->data[v + (size_t)j * nvox];
        int n = dm_peak_finder_find(&pf, coef, num, threshold, relative, pd, pa);
        for (int k = 0; k < n; k++) {
            for (int c = 0; c < 3; c++) dirs[v + (size_t)(3 * k + c) * nvox] = pd[3 * k + c];
            amps[v + (size_t)k * nvox] = pa[k];
        }
        found[v] = (unsigned char)n;
    }
    out->seconds = omp_get_wtime() - t0;
    dm_peak_finder_free(&pf);
    for (size_t v = 0; v < nvox; v++)
        if (in_mask(mask, v)) out->count[found[v]]++;
    free(found);
    if (dm_stop_requested()) return dm_stop_error();
    return 0;
}

/* Writes DIR/name from nt volumes of data. */
static int write_map(const char *dir, const char *name, const dm_volume *like, int nt,
                     const double *data)
{
    char *path = dm_volume_output_path(dir, name);
    int rc = path ? dm_volume_write(path, like, nt, data, DM_OUT_FLOAT32)
                  : dm_set_error("out of memory");
    free(path);
    return rc;
}

int dm_peaks_write(const dm_peaks_maps *m, const dm_volume *like, const char *dir,
                   dm_provenance *prov)
{
    const size_t nvox = m->nvox;
    const int num = m->num;
    double *buf = malloc(nvox * 3 * num * sizeof *buf);
    if (!buf) return dm_set_error("out of memory for the peak maps");
    dm_outdir od;
    if (dm_outdir_begin(&od, dir, DM_OUTDIR_REPLACE) != 0) {
        free(buf);
        return -1;
    }
    /* peaks: sh2peaks's layout, each direction scaled by its amplitude (NaN stays NaN) */
    for (int k = 0; k < num; k++)
        for (int c = 0; c < 3; c++)
            for (size_t v = 0; v < nvox; v++)
                buf[v + (3 * k + c) * nvox] =
                    m->dirs[v + (3 * k + c) * nvox] * m->amps[v + (size_t)k * nvox];
    int rc = write_map(od.path, "peaks.nii.gz", like, 3 * num, buf);

    /* dyads: world -> FSL's bvecs frame, by the transpose of bvecs -> world */
    double R[3][3];
    dm_volume_bvec_rotation(like, R);
    for (int k = 0; k < num && rc == 0; k++) {
        for (size_t v = 0; v < nvox; v++) {
            double w[3], f[3] = {0, 0, 0};
            for (int c = 0; c < 3; c++) w[c] = m->dirs[v + (3 * k + c) * nvox];
            if (!isnan(w[0])) dm_rotate3(R, w, f, 1);
            for (int c = 0; c < 3; c++) buf[v + c * nvox] = f[c];
        }
        char name[64];
        snprintf(name, sizeof name, "dyads%d.nii.gz", k + 1);
        rc = write_map(od.path, name, like, 3, buf);
        snprintf(name, sizeof name, "peak_amp%d.nii.gz", k + 1);
        if (rc == 0) rc = write_map(od.path, name, like, 1, m->amps + (size_t)k * nvox);
    }
    free(buf);
    if (rc == 0) {
        dm_provenance_num(prov, DM_PROV_RESULT, "voxels_in_mask", (double)m->nmask);
        for (int k = 0; k <= num; k++) {
            char key[64];
            snprintf(key, sizeof key, "voxels_with_%d_peak%s", k, k == 1 ? "" : "s");
            dm_provenance_num(prov, DM_PROV_RESULT, key, (double)m->count[k]);
        }
        dm_provenance_num(prov, DM_PROV_RESULT, "search_seconds", m->seconds);
        char *path = dm_path_join(od.path, "provenance.json");
        rc = path ? dm_provenance_write(prov, path) : dm_set_error("out of memory");
        free(path);
    }
    if (rc == 0) return dm_outdir_commit(&od);
    dm_outdir_abort(&od);
    return -1;
}

void dm_peaks_maps_free(dm_peaks_maps *m)
{
    free(m->dirs);
    free(m->amps);
    memset(m, 0, sizeof *m);
}
