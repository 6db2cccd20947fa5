/* COMMIT's dictionary, as trk2dictionary builds it: each streamline cut into segments at the
 * voxel boundaries, each segment in the voxel of its midpoint (inside the mask), its
 * orientation taken to the nearest lookup-table direction, and the segments of one streamline
 * with the same voxel and direction merged (their lengths summed).  A streamline is kept when
 * it has a segment and its length inside the mask lies in (min_len, max_len); the voxels of
 * the fit are those its kept segments reach (COMMIT's "dictionary_tdi").
 *
 * Geometry: .tck points are world mm; a voxel is the cube of one voxel size around its centre
 * (MRtrix's and NIfTI's convention), so COMMIT's fiber_shift = 0.5 for MRtrix tractograms is
 * shift 0 here; `shift` (voxel units) moves the streamlines by that much more.
 *
 * Blur (trk2dictionary's blur_core_extent, blur_gauss_extent, blur_spacing, blur_gauss_min):
 * each streamline is replicated as parallel copies, started on a square grid of spacing
 * `blur_spacing` in the plane perpendicular to its first step, out to radius core + gauss, and
 * carried along from each step's bisecting plane to the next; a copy's pieces count weight x
 * length (weight 1 within the core, a Gaussian beyond it that falls to blur_gauss_min at the
 * rim; copies of weight < 1e-3 dropped).  The streamline's length (`length`) is the central
 * copy's alone; its norm is that of all copies' weighted lengths per voxel.
 * docs/commit-facts.md, section 2, says what COMMIT 2.4.2 computes. */
#ifndef DIMOC_COMMIT_DICT_H
#define DIMOC_COMMIT_DICT_H

#include "commit/commit_dirs.h"
#include "tractogram/tck.h"

typedef struct dm_commit_grid {
    int nx, ny, nz;
    double w2v[3][4];          /* world mm -> voxel coordinates (centres at integers) */
    const unsigned char *mask; /* nx*ny*nz, x fastest; NULL: every voxel */
} dm_commit_grid;

/* The mask a bit a voxel (bit v % 64 of word v / 64; every bit set without a mask), 8 times
 * smaller and so kept in the cores' caches while the streamlines are cut.  NULL out of memory. */
unsigned long long *dm_commit_mask_bits(const dm_commit_grid *g, int threads);

typedef struct dm_commit_dict_options {
    double shift[3];         /* voxel units */
    double min_seg_len;      /* mm: shorter pieces are dropped (COMMIT: 1e-3) */
    double min_len, max_len; /* mm: the kept streamlines' lengths in the mask (0, 250) */
    int threads;
    /* blur: off when both extents are 0 (then the other two are not read) */
    double blur_core, blur_gauss;    /* mm: the core's radius, the Gaussian's extent beyond it */
    double blur_spacing;             /* mm: the grid of the copies (COMMIT: 0.25) */
    double blur_gauss_min;           /* the weight at the rim, in (0, 1) (COMMIT: 0.1) */
    const unsigned char *blur_apply; /* per streamline: 0 = no copies (blur_apply_to); NULL: all */
} dm_commit_dict_options;

/* Blur on: an extent > 0. */
int dm_commit_blur_on(const dm_commit_dict_options *o);
/* The copies of the blur (COMMIT's grid, order and weights), the central one first: n, and with
 * rho, angle, weight non-NULL (room for n) their radius (mm), angle (radians) and weight; copies
 * of weight < 1e-3 are left out.  -1 with the error set when there would be more than 100000
 * grid points (a spacing too fine for the extents). */
long dm_commit_blur_copies(const dm_commit_dict_options *o, double *rho, double *angle,
                           double *weight);

typedef struct dm_commit_dict {
    long nstr;           /* streamlines of the tractogram */
    unsigned char *kept; /* nstr */
    float *length;       /* nstr: length inside the mask (mm; 0 when not kept) */
    float *norm;         /* nstr: sqrt of the sum over voxels of (length in the voxel)^2 */
    long nkept;
    long *column; /* nstr: the IC column of a kept streamline, -1 otherwise */
    /* the kept streamlines' segments, column by column */
    long nseg;
    long *str_start;   /* nkept + 1 */
    unsigned *seg_vox; /* voxel of the fit (index into vox) */
    unsigned short *seg_dir;
    float *seg_len; /* mm */
    /* the voxels of the fit, ascending (x fastest) */
    long nvox;
    long *vox;
} dm_commit_dict;

/* The whole dictionary: dm_commit_dict_cut over every streamline, then dm_commit_dict_index.
 * 0, or -1 with the error set (out of memory). */
int dm_commit_dict_build(const dm_tck *t, const dm_commit_grid *g, const dm_commit_dirs *dirs,
                         const dm_commit_dict_options *o, dm_commit_dict *d);
/* The first half of the build, for streamlines [first, end) of t (ids stay t's; the others are
 * not kept): d then holds grid voxels (x fastest) in seg_vox and no voxels of the fit (nvox 0,
 * vox NULL).  Each streamline's segments depend on it alone, whatever the range or the threads.
 * 0, or -1 with the error set (out of memory; an image of more than UINT_MAX voxels). */
int dm_commit_dict_cut(const dm_tck *t, long first, long end, const dm_commit_grid *g,
                       const dm_commit_dirs *dirs, const dm_commit_dict_options *o,
                       dm_commit_dict *d);
/* The start of a dictionary of nstr streamlines, none kept yet: kept, length, norm zeroed,
 * column and str_start (room for nstr + 1) allocated.  0, or -1 with the error set. */
int dm_commit_dict_begin(dm_commit_dict *d, long nstr);
/* column, str_start, nkept and nseg from kept and count (each kept streamline's segments). */
void dm_commit_dict_columns(dm_commit_dict *d, const long *count);
/* The second half: the voxels of the fit, those the segments reach (of a grid of nvox_grid
 * voxels), ascending; seg_vox turned from grid voxels into indices of vox.  0, or -1 with the
 * error set (out of memory; d is left as it was). */
int dm_commit_dict_index(dm_commit_dict *d, size_t nvox_grid, int threads);
void dm_commit_dict_free(dm_commit_dict *d);

#endif
