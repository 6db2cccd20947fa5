/* Track-density images on the host (tdi.h): the grid, CPU threads over streamlines with the
 * kernel of templates/fodtrack/tdi_map.h. */
#include "fodtrack/tdi.h"
#include "util/error.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A thread's record of the voxels its streamlines visit, for a weighted map: the kernel
 * counts a voxel once per streamline, so the voxels of one streamline are the indices it adds
 * to between two looks at n.  The weights are added afterwards, in streamline order. */
typedef struct tdi_record {
    const unsigned int *base; /* the map's counts: an index is a pointer's distance from it */
    unsigned int *voxel;
    long n, cap;
    int failed; /* out of memory: the record is incomplete */
    unsigned int *scratch;
} tdi_record;

/* The record of the streamline this thread is mapping; NULL when none is kept. */
static _Thread_local tdi_record *tdi_recording;

static void tdi_record_voxel(tdi_record *r, const unsigned int *p)
{
    if (r->n == r->cap) {
        long cap = r->cap ? 2 * r->cap : 4096;
        unsigned int *grown = realloc(r->voxel, (size_t)cap * sizeof *grown);
        if (!grown) {
            r->failed = 1;
            return;
        }
        r->voxel = grown;
        r->cap = cap;
    }
    r->voxel[r->n++] = (unsigned int)(p - r->base);
}

/* The kernel's "add v to *p": a relaxed atomic add (a count needs no ordering, and the sum is
 * the same in any order), and the voxel recorded when this thread keeps a record. */
static inline void tdi_count(unsigned int *p, unsigned int v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    if (tdi_recording) tdi_record_voxel(tdi_recording, p);
}

/* The host build of the mapping kernel: plain functions, counts through tdi_count. */
#define DM_FN static inline
#define DM_ATOMIC_ADD_U32(p, v) tdi_count((p), (v))
#include "fodtrack/tdi_map.h"

/* Voxel indices per streamline before a sort: a long streamline through a fine grid enters
 * a few thousand voxels; more only costs another walk (tdi_map.h). */
#define TDI_SCRATCH 8192

/* MRtrix's realignment of an image to near RAS (Header::realign_transform, Axes::
 * get_permutation_to_make_axial): realigned axis k is the image's axis perm[k], the one
 * closest to world axis k, reversed (flip[that axis]) when it points against it. */
static void realign_axes(double unit[3][3], int perm[3], int flip[3])
{
    for (int r = 0; r < 3; r++) {
        perm[r] = 0; /* Eigen's maxCoeff: the first of equal maxima */
        for (int k = 1; k < 3; k++)
            if (fabs(unit[r][k]) > fabs(unit[r][perm[r]])) perm[r] = k;
    }
    /* the one axis not among a and b */
#define OTHER(a, b) (3 - (a) - (b) - ((a) == (b) ? (a) == 0 ? 1 : 0 : 0))
    if (perm[0] == perm[1]) perm[1] = OTHER(perm[0], perm[2]);
    if (perm[0] == perm[2]) perm[2] = OTHER(perm[0], perm[1]);
    if (perm[1] == perm[2]) perm[2] = OTHER(perm[0], perm[1]);
#undef OTHER
    for (int r = 0; r < 3; r++) flip[perm[r]] = unit[r][perm[r]] < 0;
}

int dm_tdi_init(dm_tdi *m, const int n[3], const dm_affine *v2w, const double pixdim[3],
                const char *templ_name, const double *voxel_mm)
{
    memset(m, 0, sizeof *m);
    const char *templ_path = templ_name;
    dm_affine a = *v2w;
    int in_size[3] = {n[0], n[1], n[2]};
    /* MRtrix's header of the template: unit axis directions, voxel sizes from pixdim (from the
     * axes' lengths when the two disagree by more than 1e-5), the axes realigned to near RAS;
     * tckmap's grid is that header's (oversampled with -vox), and the single-precision
     * scanner -> voxel matrix it maps with comes from it, so the numbers are built as its. */
    double len[3], unit[3][3], t[3];
    int rescale = 0;
    for (int k = 0; k < 3; k++) {
        double x = a.m[0][k], y = a.m[1][k], z = a.m[2][k];
        len[k] = sqrt(x * x + (y * y + z * z)); /* Eigen's norm(), its order */
        if (!(len[k] > 0)) return dm_set_error("%s: degenerate voxel-to-world matrix", templ_path);
        if (fabs(pixdim[k] / len[k] - 1.0) > 1e-5) rescale = 1;
        for (int r = 0; r < 3; r++) unit[r][k] = a.m[r][k] / len[k];
    }
    for (int r = 0; r < 3; r++) t[r] = a.m[r][3];
    int perm[3], flip[3];
    realign_axes(unit, perm, flip);
    for (int i = 0; i < 3; i++)
        if (flip[i]) { /* voxel 0 moves to the axis's other end */
            double length = (in_size[i] - 1) * (rescale ? len[i] : pixdim[i]);
            for (int r = 0; r < 3; r++) t[r] -= length * -unit[r][i];
        }
    /* The realigned header: axis k is the image's perm[k]. */
    double col[3][3], sp[3];
    int size[3];
    for (int k = 0; k < 3; k++) {
        int i = perm[k];
        for (int r = 0; r < 3; r++) col[r][k] = flip[i] ? -unit[r][i] : unit[r][i];
        sp[k] = rescale ? len[i] : pixdim[i];
        size[k] = in_size[i];
    }
    if (voxel_mm) {
        /* tckmap's oversampled header (on the realigned axes): the new size and spacing, and
         * the first centre moved by half the difference of spacings so that the grids share
         * their outer corner at voxel 0.  voxel_mm is given on the template's axes. */
        double half[3];
        for (int k = 0; k < 3; k++) {
            double v = voxel_mm[perm[k]];
            if (!(v > 0) || !isfinite(v))
                return dm_set_error("voxel size %g: must be a positive number of mm", v);
            half[k] = 0.5 * (v - sp[k]);
            double n = ceil(size[k] * sp[k] / v);
            if (n > 1e6) return dm_set_error("voxel size %g mm: the grid would be too large", v);
            size[k] = (int)n;
            sp[k] = v;
        }
        for (int r = 0; r < 3; r++)
            t[r] += col[r][0] * half[0] + col[r][1] * half[1] + col[r][2] * half[2];
    }
    /* MRtrix's voxel -> scanner matrix of the realigned grid (what tckmap maps with), and the
     * same grid on the template's axis order (what is counted and written). */
    dm_affine_identity(&m->mrtrix_vox2world);
    for (int r = 0; r < 3; r++) {
        for (int k = 0; k < 3; k++) m->mrtrix_vox2world.m[r][k] = col[r][k] * sp[k];
        m->mrtrix_vox2world.m[r][3] = t[r];
    }
    dm_affine_identity(&a);
    double spacing[3];
    for (int r = 0; r < 3; r++) a.m[r][3] = t[r];
    for (int k = 0; k < 3; k++) {
        int i = perm[k];
        m->axis[k] = i;
        m->flip[k] = flip[i];
        spacing[i] = sp[k];
        in_size[i] = size[k];
        for (int r = 0; r < 3; r++) {
            a.m[r][i] = (flip[i] ? -col[r][k] : col[r][k]) * sp[k];
            if (flip[i]) a.m[r][3] += m->mrtrix_vox2world.m[r][k] * (size[k] - 1);
        }
    }
    for (int k = 0; k < 3; k++) size[k] = in_size[k];
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

void dm_tdi_grid_of(const dm_tdi *m, struct dm_tdi_grid *g)
{
    memset(g, 0, sizeof *g);
    g->nx = m->nx;
    g->ny = m->ny;
    g->nz = m->nz;
    g->count = m->count;
    g->ratio = m->ratio;
    dm_tdi_world2vox(m, g->world2vox);
    /* MRtrix's Transform::scanner2voxel (the double inverse), then cast to float */
    dm_affine inv;
    if (dm_affine_invert(&m->mrtrix_vox2world, &inv) != 0) dm_affine_identity(&inv);
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 4; c++) g->s2v[r][c] = (float)inv.m[r][c];
        g->axis[r] = m->axis[r];
        g->flip[r] = m->flip[r];
    }
}

int dm_tdi_add_tracks(dm_tdi *m, const dm_tck *t, int threads, dm_watch *watch)
{
    dm_tdi_grid g;
    dm_tdi_grid_of(m, &g);
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
            /* the caller's cancel is polled by the calling thread (OpenMP's thread 0) */
            if (((s & 1023) == 0 || omp_get_thread_num() == 0) && dm_watch_stopping(watch)) {
#pragma omp atomic write
                stopped = 1;
                continue;
            }
            dm_tdi_add(&g, t->xyz + 3 * t->start[s], t->npoints[s], scratch, TDI_SCRATCH);
        }
        free(scratch);
    }
    if (stopped == 2) return dm_set_error("out of memory for the mapping threads");
    return stopped ? dm_watch_stop_error(watch) : 0;
}

/* Streamlines mapped per parallel pass of dm_tdi_add_weighted: their voxels are held until
 * the pass's weights are added (a few MB). */
#define TDI_WEIGHTED_BLOCK 16384L

int dm_tdi_add_weighted(dm_tdi *m, const dm_tck *t, const float *weight, int threads,
                        dm_watch *watch)
{
    size_t nvox = (size_t)m->nx * m->ny * m->nz;
    if (!m->weighted && !(m->weighted = calloc(nvox, sizeof *m->weighted)))
        return dm_set_error("out of memory for a %dx%dx%d weighted map", m->nx, m->ny, m->nz);
    dm_tdi_grid g;
    dm_tdi_grid_of(m, &g);
    int nthreads = threads > 0 ? threads : omp_get_max_threads();
    long block = t->count < TDI_WEIGHTED_BLOCK ? t->count : TDI_WEIGHTED_BLOCK;
    tdi_record *rec = calloc((size_t)nthreads, sizeof *rec);
    long *first = malloc((size_t)(block + 1) * sizeof *first);
    long *last = malloc((size_t)(block + 1) * sizeof *last);
    int *owner = malloc((size_t)(block + 1) * sizeof *owner);
    int rc = rec && first && last && owner ? 0 : dm_set_error("out of memory for the mapping");
    for (int k = 0; rc == 0 && k < nthreads; k++) {
        rec[k].base = m->count;
        if (!(rec[k].scratch = malloc(TDI_SCRATCH * sizeof *rec[k].scratch)))
            rc = dm_set_error("out of memory for the mapping threads");
    }
    for (long b0 = 0; rc == 0 && b0 < t->count; b0 += block) {
        long nb = t->count - b0 < block ? t->count - b0 : block;
        if (dm_watch_stopping(watch)) {
            rc = dm_watch_stop_error(watch);
            break;
        }
        /* The voxels of each streamline of the block, mapped in parallel... */
#pragma omp parallel num_threads(nthreads)
        {
            tdi_record *r = &rec[omp_get_thread_num()];
            r->n = 0;
            tdi_recording = r;
#pragma omp for schedule(dynamic, 256)
            for (long i = 0; i < nb; i++) {
                long s = b0 + i;
                first[i] = r->n;
                dm_tdi_add(&g, t->xyz + 3 * t->start[s], t->npoints[s], r->scratch, TDI_SCRATCH);
                last[i] = r->n;
                owner[i] = omp_get_thread_num();
            }
            tdi_recording = NULL;
        }
        for (int k = 0; k < nthreads; k++)
            if (rec[k].failed) rc = dm_set_error("out of memory for the mapping threads");
        /* ...then their weights, in streamline order: the sums do not depend on the threads. */
        for (long i = 0; rc == 0 && i < nb; i++) {
            const tdi_record *r = &rec[owner[i]];
            double w = weight[b0 + i];
            for (long j = first[i]; j < last[i]; j++) m->weighted[r->voxel[j]] += w;
        }
    }
    for (int k = 0; rec && k < nthreads; k++) {
        free(rec[k].voxel);
        free(rec[k].scratch);
    }
    free(rec);
    free(first);
    free(last);
    free(owner);
    return rc;
}

void dm_tdi_free(dm_tdi *m)
{
    if (!m) return;
    free(m->count);
    free(m->weighted);
    memset(m, 0, sizeof *m);
}

int dm_tdi_make(const dm_tdi_request *rq, dm_tdi *m, dm_tdi_summary *s)
{
    memset(s, 0, sizeof *s);
    double t0 = dm_now_seconds();
    dm_watch_report(rq->watch, "tdi", 0);
    int rc = dm_tdi_init(m, rq->n, &rq->v2w, rq->pixdim, rq->templ_name, rq->voxel_mm);
    /* tckmap reads the header's step_size as a float; none: no upsampling */
    if (rc == 0 && !rq->exact) m->ratio = dm_tdi_upsample_ratio(m, rq->step);
    if (rc == 0)
        rc = rq->weights ? dm_tdi_add_weighted(m, rq->tracks, rq->weights, rq->threads, rq->watch)
                         : dm_tdi_add_tracks(m, rq->tracks, rq->threads, rq->watch);
    if (rc != 0) return -1;
    size_t n = (size_t)m->nx * m->ny * m->nz;
    for (size_t i = 0; i < n; i++) s->voxels_hit += m->count[i] > 0;
    s->streamlines = rq->tracks->count;
    s->ratio = m->ratio;
    s->nx = m->nx;
    s->ny = m->ny;
    s->nz = m->nz;
    s->seconds = dm_now_seconds() - t0;
    dm_watch_report(rq->watch, "tdi", 1);
    return 0;
}

void dm_tdi_provenance(const dm_tdi_summary *s, int exact, dm_provenance *prov)
{
    dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)s->streamlines);
    dm_provenance_num(prov, DM_PROV_RESULT, "voxels_hit", (double)s->voxels_hit);
    dm_provenance_str(prov, DM_PROV_RESULT, "mapping", exact ? "exact" : "tckmap");
    dm_provenance_num(prov, DM_PROV_RESULT, "upsample_ratio", s->ratio);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds", s->seconds);
}
