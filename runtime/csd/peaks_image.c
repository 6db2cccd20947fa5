/* FOD peaks over an image in memory (peaks_image.h): voxels searched in parallel with one
 * shared finder, the peaks laid out in MRtrix's and FSL's ways.  No files here. */
#include "csd/peaks_image.h"
#include "sphere/peaks.h"
#include "sphere/sh.h"
#include "util/error.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NCOEF ((DM_SH_LMAX_MAX + 1) * (DM_SH_LMAX_MAX + 2) / 2)

/* Voxel v (x fastest) of a 3D view, or 1 without one: in the mask where non-zero, not NaN. */
static int in_mask(const dm_image_view *mask, size_t v)
{
    if (!mask || !mask->data) return 1;
    size_t nx = mask->shape[0], ny = mask->shape[1];
    double m = dm_view_at(mask, v % nx, v / nx % ny, v / (nx * ny), 0);
    return m != 0 && !isnan(m);
}

int dm_peaks_find(const dm_image_view *fod, const dm_image_view *mask, const dm_peaks_settings *s,
                  dm_watch *watch, dm_peaks_maps *out)
{
    memset(out, 0, sizeof *out);
    if (s->num < 1 || s->num > DM_PEAKS_MAX_NUM)
        return dm_set_error("peaks: %d peaks per voxel asked; 1 to %d may be", s->num,
                            DM_PEAKS_MAX_NUM);
    const int nc = (int)dm_view_nt(fod), lmax = dm_sh_lmax_for(nc);
    if (lmax < 0 || dm_sh_ncoef(lmax) != nc)
        return dm_set_error("%s: %d volume%s is not a count of SH coefficients of even degree "
                            "up to lmax (1, 6, 15, 28, 45, 66, 91, ... up to %d for lmax %d)",
                            fod->name, nc, nc == 1 ? "" : "s", dm_sh_ncoef(DM_SH_LMAX_MAX),
                            DM_SH_LMAX_MAX);
    const size_t nx = fod->shape[0], ny = fod->shape[1];
    const size_t nvox = nx * ny * fod->shape[2];
    const int num = s->num;
    out->nvox = nvox;
    out->num = num;
    for (size_t v = 0; v < nvox; v++) out->nmask += in_mask(mask, v);
    if (out->nmask == 0) /* (a mask: without one every voxel is searched) */
        return dm_set_error("%s: the mask selects no voxel", mask->name);
    out->dirs = malloc(nvox * 3 * num * sizeof *out->dirs);
    out->amps = calloc(nvox * num, sizeof *out->amps);
    unsigned char *found = calloc(nvox, 1);
    dm_peak_finder pf;
    if (!out->dirs || !out->amps || !found || dm_peak_finder_init(&pf, lmax) != 0) {
        free(found);
        return dm_set_error("out of memory for the peaks of %zu voxels", nvox);
    }
    for (size_t i = 0; i < nvox * 3 * num; i++) out->dirs[i] = NAN;

    double t0 = omp_get_wtime();
    if (s->threads > 0) omp_set_num_threads(s->threads);
    double *dirs = out->dirs, *amps = out->amps;
    const double threshold = s->threshold, relative = s->relative;
    _Atomic int stopped = 0;
    atomic_size_t done = 0;
    dm_watch_report(watch, "peaks", 0);
#pragma omp parallel
    {
        size_t mine = 0;
#pragma omp for schedule(dynamic, 64)
        for (size_t v = 0; v < nvox; v++) {
            if (stopped || !in_mask(mask, v)) continue;
            if (dm_watch_tick(watch, "peaks", &mine, &done, out->nmask)) stopped = 1;
            double coef[MAX_NCOEF], pd[3 * DM_PEAKS_MAX_NUM], pa[DM_PEAKS_MAX_NUM];
            size_t x = v % nx, y = v / nx % ny, z = v / (nx * ny);
            for (int j = 0; j < nc; j++) coef[j] = dm_view_at(fod, x, y, z, (size_t)j);
            int n = dm_peak_finder_find(&pf, coef, num, threshold, relative, pd, pa);
            for (int k = 0; k < n; k++) {
                for (int c = 0; c < 3; c++) dirs[v + (size_t)(3 * k + c) * nvox] = pd[3 * k + c];
                amps[v + (size_t)k * nvox] = pa[k];
            }
            found[v] = (unsigned char)n;
        }
    }
    out->seconds = omp_get_wtime() - t0;
    dm_peak_finder_free(&pf);
    for (size_t v = 0; v < nvox; v++)
        if (in_mask(mask, v)) out->count[found[v]]++;
    free(found);
    if (stopped || dm_watch_stopping(watch)) return dm_watch_stop_error(watch);
    dm_watch_report(watch, "peaks", 1);
    return 0;
}

void dm_peaks_scaled(const dm_peaks_maps *m, double *out)
{
    const size_t nvox = m->nvox;
    for (int k = 0; k < m->num; k++)
        for (int c = 0; c < 3; c++)
            for (size_t v = 0; v < nvox; v++)
                out[v + (3 * k + c) * nvox] =
                    m->dirs[v + (3 * k + c) * nvox] * m->amps[v + (size_t)k * nvox];
}

void dm_peaks_dyads(const dm_peaks_maps *m, const double R[3][3], int k, double *out)
{
    const size_t nvox = m->nvox;
    /* world -> FSL's bvecs frame, by the transpose of bvecs -> world */
    for (size_t v = 0; v < nvox; v++) {
        double w[3], f[3] = {0, 0, 0};
        for (int c = 0; c < 3; c++) w[c] = m->dirs[v + (3 * k + c) * nvox];
        if (!isnan(w[0])) dm_rotate3(R, w, f, 1);
        for (int c = 0; c < 3; c++) out[v + c * nvox] = f[c];
    }
}

void dm_peaks_provenance(dm_provenance *prov, const dm_peaks_maps *m)
{
    dm_provenance_num(prov, DM_PROV_RESULT, "voxels_in_mask", (double)m->nmask);
    for (int k = 0; k <= m->num; k++) {
        char key[64];
        snprintf(key, sizeof key, "voxels_with_%d_peak%s", k, k == 1 ? "" : "s");
        dm_provenance_num(prov, DM_PROV_RESULT, key, (double)m->count[k]);
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "search_seconds", m->seconds);
}

void dm_peaks_maps_free(dm_peaks_maps *m)
{
    free(m->dirs);
    free(m->amps);
    memset(m, 0, sizeof *m);
}
