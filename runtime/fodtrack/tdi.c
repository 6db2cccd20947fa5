/* Track-density images on the host (tdi.h): the grid, CPU threads over streamlines with the
 * kernel of templates/fodtrack/tdi_map.h, the NIfTI output. */
#include "fodtrack/tdi.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The host build of the mapping kernel: plain functions, relaxed atomic adds (a count needs
 * no ordering, and the sum is the same in any order). */
#define DM_FN static inline
#define DM_ATOMIC_ADD_U32(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#include "fodtrack/tdi_map.h"

/* Voxel indices per streamline before a sort: a long streamline through a fine grid enters
 * a few thousand voxels; more only costs another walk (tdi_map.h). */
#define TDI_SCRATCH 8192

int dm_tdi_init(dm_tdi *m, const dm_volume *templ, const char *templ_path, const double *voxel_mm)
{
    memset(m, 0, sizeof *m);
    dm_affine a;
    dm_volume_vox2world(templ, &a);
    int size[3] = {templ->nx, templ->ny, templ->nz};
    /* MRtrix's header of the template: unit axis directions, voxel sizes from pixdim (from the
     * axes' lengths when the two disagree by more than 1e-5), so that the voxel -> world
     * matrix and the single-precision one tckmap maps with are the same numbers as its. */
    double pixdim[3], len[3], spacing[3];
    dm_volume_voxel_size(templ, pixdim);
    int rescale = 0;
    for (int k = 0; k < 3; k++) {
        double x = a.m[0][k], y = a.m[1][k], z = a.m[2][k];
        len[k] = sqrt(x * x + (y * y + z * z)); /* Eigen's norm(), its order */
        if (!(len[k] > 0)) return dm_set_error("%s: degenerate voxel-to-world matrix", templ_path);
        if (fabs(pixdim[k] / len[k] - 1.0) > 1e-5) rescale = 1;
    }
    double shift[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        spacing[k] = rescale ? len[k] : pixdim[k];
        double to = spacing[k];
        if (voxel_mm) {
            /* tckmap's oversampled header: along each voxel axis the new size and spacing,
             * and the first centre moved by half the difference of spacings so that the grids
             * share their outer corner at voxel 0. */
            if (!(voxel_mm[k] > 0) || !isfinite(voxel_mm[k]))
                return dm_set_error("voxel size %g: must be a positive number of mm", voxel_mm[k]);
            to = voxel_mm[k];
            double n = ceil(size[k] * spacing[k] / to);
            if (n > 1e6) return dm_set_error("voxel size %g mm: the grid would be too large", to);
            size[k] = (int)n;
        }
        for (int r = 0; r < 3; r++) {
            double unit = a.m[r][k] / len[k];
            shift[r] += unit * 0.5 * (to - spacing[k]);
            a.m[r][k] = unit * to;
        }
        spacing[k] = to;
    }
    for (int r = 0; r < 3; r++) a.m[r][3] += shift[r];
    uint64_t nvox = (uint64_t)size[0] * size[1] * size[2];
    if (nvox >= UINT32_MAX)
        return dm_set_error("%s: a grid of %dx%dx%d voxels is too large for a track-density map",
                            templ_path, size[0], size[1], size[2]);
    dm_affine inv;
    if (dm_affine_invert(&a, &inv) != 0)
        return dm_set_error("%s: the voxel-to-world matrix cannot be inverted", templ_path);
    m->count = calloc(nvox, sizeof *m->count);
    if (!m->count)
        return dm_set_error("out of memory for a %dx%dx%d map", size[0], size[1], size[2]);
    m->nx = size[0];
    m->ny = size[1];
    m->nz = size[2];
    m->vox2world = a;
    for (int k = 0; k < 3; k++) m->spacing[k] = spacing[k];
    return 0;
}

int dm_tdi_upsample_ratio(const dm_tdi *m, double step_mm)
{
    /* mapping.cpp: a float step over (double) spacing * 0.333f, ceil'd */
    float step = (float)step_mm;
    if (!(step > 0) || !isfinite(step)) return 1;
    double vmin = fmin(m->spacing[0], fmin(m->spacing[1], m->spacing[2]));
    double r = ceil((double)step / (vmin * (double)0.333f));
    /* a step of many voxels: more samples than that would not change the map */
    return r < 1 ? 1 : r > 1e6 ? 1000000 : (int)r;
}

void dm_tdi_world2vox(const dm_tdi *m, double world2vox[3][4])
{
    dm_affine inv;
    if (dm_affine_invert(&m->vox2world, &inv) != 0) dm_affine_identity(&inv); /* init checked it */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) world2vox[r][c] = inv.m[r][c];
}

int dm_tdi_add_tracks(dm_tdi *m, const dm_tck *t, int threads)
{
    dm_tdi_grid g = {.nx = m->nx, .ny = m->ny, .nz = m->nz, .count = m->count, .ratio = m->ratio};
    dm_tdi_world2vox(m, g.world2vox);
    int stopped = 0;
#pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
    {
        unsigned int *scratch = malloc(TDI_SCRATCH * sizeof *scratch);
        if (!scratch) {
#pragma omp atomic write
            stopped = 2;
        }
#pragma omp for schedule(dynamic, 256)
        for (long s = 0; s < t->count; s++) {
            int halt;
#pragma omp atomic read
            halt = stopped;
            if (halt) continue;
            if ((s & 1023) == 0 && dm_stop_requested()) {
#pragma omp atomic write
                stopped = 1;
                continue;
            }
            dm_tdi_add(&g, t->xyz + 3 * t->start[s], t->npoints[s], scratch, TDI_SCRATCH);
        }
        free(scratch);
    }
    if (stopped == 2) return dm_set_error("out of memory for the mapping threads");
    return stopped ? dm_stop_error() : 0;
}

int dm_tdi_write(const dm_tdi *m, const char *path)
{
    size_t n = (size_t)m->nx * m->ny * m->nz;
    double *values = malloc(n * sizeof *values);
    if (!values) return dm_set_error("%s: out of memory", path);
    for (size_t i = 0; i < n; i++) values[i] = m->count[i];
    int rc =
        dm_volume_write_affine(path, m->nx, m->ny, m->nz, m->vox2world.m, values, DM_OUT_UINT32);
    free(values);
    return rc;
}

void dm_tdi_free(dm_tdi *m)
{
    if (!m) return;
    free(m->count);
    memset(m, 0, sizeof *m);
}

static double now_seconds(void)
{
    return omp_get_wtime();
}

int dm_tdi_command(const dm_tdi_options *o, dm_provenance *prov, dm_tdi_summary *s)
{
    memset(s, 0, sizeof *s);
    double t0 = now_seconds();
    dm_tck tracks;
    dm_volume templ;
    dm_tdi map = {0};
    if (dm_tck_read(o->tracks, &tracks) != 0) return -1;
    if (dm_volume_read(o->templ, &templ) != 0) {
        dm_tck_free(&tracks);
        return -1;
    }
    int super = o->voxel_mm[0] > 0 || o->voxel_mm[1] > 0 || o->voxel_mm[2] > 0;
    int rc = dm_tdi_init(&map, &templ, o->templ, super ? o->voxel_mm : NULL);
    dm_volume_free(&templ);
    if (rc == 0 && !o->exact) {
        /* tckmap reads the header's step_size as a float; none: no upsampling */
        char *step = dm_tck_property(&tracks, "step_size");
        map.ratio = dm_tdi_upsample_ratio(&map, step ? strtof(step, NULL) : NAN);
        free(step);
    }
    if (rc == 0) rc = dm_tdi_add_tracks(&map, &tracks, o->threads);
    if (rc == 0) {
        size_t n = (size_t)map.nx * map.ny * map.nz;
        for (size_t i = 0; i < n; i++) s->voxels_hit += map.count[i] > 0;
        s->streamlines = tracks.count;
        s->ratio = map.ratio;
        s->nx = map.nx;
        s->ny = map.ny;
        s->nz = map.nz;
        s->seconds = now_seconds() - t0;
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)s->streamlines);
        dm_provenance_num(prov, DM_PROV_RESULT, "voxels_hit", (double)s->voxels_hit);
        dm_provenance_str(prov, DM_PROV_RESULT, "mapping", o->exact ? "exact" : "tckmap");
        dm_provenance_num(prov, DM_PROV_RESULT, "upsample_ratio", s->ratio);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds", s->seconds);
        /* The map and its provenance beside it go in place together. */
        char *tmp[2] = {dm_volume_temp_name(o->out), NULL};
        char *final[2] = {(char *)o->out, dm_provenance_sidecar(o->out)};
        tmp[1] = final[1] ? dm_temp_sibling(final[1]) : NULL;
        if (!tmp[0])
            rc = -1;
        else if (!tmp[1])
            rc = dm_set_error("out of memory");
        else if ((rc = dm_tdi_write(&map, tmp[0])) == 0)
            rc = dm_provenance_write(prov, tmp[1]);
        if (rc == 0)
            rc = dm_commit_files(tmp, final, 2);
        else
            for (int i = 0; i < 2; i++)
                if (tmp[i]) unlink(tmp[i]);
        for (int i = 0; i < 2; i++) free(tmp[i]);
        free(final[1]);
    }
    dm_tdi_free(&map);
    dm_tck_free(&tracks);
    return rc;
}
