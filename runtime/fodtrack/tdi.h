/* Track-density images on the host: the grid of a template image (optionally super-resolved
 * as MRtrix's tckmap -template IMG -vox V makes it), streamlines added on CPU threads through
 * templates/fodtrack/tdi_map.h (the same source the GPU tracker builds), the map in memory
 * (the file side, `dimoc tdi` and the map written as NIfTI, is fodtrack_files.h's). */
#ifndef DIMOC_FODTRACK_TDI_H
#define DIMOC_FODTRACK_TDI_H

#include "io/space.h"
#include "tractogram/tck.h"
#include "util/json.h"
#include "util/progress.h"

struct dm_tdi_grid; /* templates/fodtrack/tdi_map.h */

typedef struct dm_tdi {
    int nx, ny, nz;
    dm_affine vox2world; /* voxel -> world mm */
    double spacing[3];   /* voxel sizes in mm (MRtrix's: the template's pixdim, or --voxel) */
    unsigned int *count; /* nx*ny*nz, x fastest: streamlines through each voxel */
    double *weighted;    /* NULL, or nx*ny*nz: the sum of the weights of the streamlines through
                            each voxel (dm_tdi_add_weighted); written instead of count */
    int ratio;           /* 0: the exact walk; >= 1: tckmap's sampling at this upsampling ratio
                            (templates/fodtrack/tdi_map.h); dm_tdi_init leaves 0 */
    /* tckmap's own header of the grid: its axes realigned to near RAS (axis k is ours
     * axis[k], reversed when flip[k]) and its voxel -> world matrix on them */
    dm_affine mrtrix_vox2world;
    int axis[3], flip[3];
} dm_tdi;

/* The grid of a template of size n[3], voxel -> world matrix v2w and voxel sizes pixdim (its
 * header's; read as MRtrix reads them: each axis a unit direction times the voxel size), or
 * with voxel_mm (three sizes > 0 on the template's axes; NULL: none) the super-resolved grid of
 * tckmap -template -vox: the same axes, size ceil(n * old / new) on each, and a corner shared
 * with the template's, at voxel 0 of MRtrix's realigned axes (near RAS; the far end of an axis
 * it reverses).  The counts stay on the template's axis order.  Counts start at 0.  0, or -1
 * with an error naming templ_name. */
int dm_tdi_init(dm_tdi *m, const int n[3], const dm_affine *v2w, const double pixdim[3],
                const char *templ_name, const double *voxel_mm);
/* tckmap's automatic upsampling ratio for streamlines `step_mm` apart (the .tck's step_size)
 * on this grid: ceil(step / (smallest voxel size * 0.333)), in tckmap's precision; 1 when the
 * step is not a positive finite number (tckmap's rule for a .tck without step_size). */
int dm_tdi_upsample_ratio(const dm_tdi *m, double step_mm);
/* The world mm -> voxel matrix (the first three rows of the inverse of vox2world). */
void dm_tdi_world2vox(const dm_tdi *m, double world2vox[3][4]);
/* The mapping kernel's view of m (templates/fodtrack/tdi_map.h): size, counts, mode and both
 * world -> voxel matrices. */
void dm_tdi_grid_of(const dm_tdi *m, struct dm_tdi_grid *g);
/* Adds every streamline of t (threads: 0 = all cores), by m->ratio's mapping.  Returns 0, or
 * -1 after a stop request (a signal, or watch's caller; watch NULL: signals only). */
int dm_tdi_add_tracks(dm_tdi *m, const dm_tck *t, int threads, dm_watch *watch);
/* Adds every streamline s of t with weight[s] (>= 0) instead of 1, as tckmap -tck_weights_in:
 * each voxel it visits (the same voxels as dm_tdi_add_tracks's, which it counts too) gains its
 * weight once.  The sums are double, made in streamline order whatever the threads.  Returns
 * 0, or -1 after a stop request or out of memory. */
int dm_tdi_add_weighted(dm_tdi *m, const dm_tck *t, const float *weight, int threads,
                        dm_watch *watch);
void dm_tdi_free(dm_tdi *m);

/* A track-density image as `dimoc tdi` makes it, from streamlines in memory (the command reads
 * them from a file, the C API takes the caller's). */
typedef struct dm_tdi_request {
    const dm_tck *tracks;
    const float *weights; /* tracks->count, or NULL: 1 each */
    int n[3];             /* the template's grid: size, voxel -> world, header voxel sizes */
    dm_affine v2w;
    double pixdim[3];
    const char *templ_name; /* for messages */
    const double *voxel_mm; /* super-resolution (three sizes), or NULL */
    int exact;              /* the exact walk instead of tckmap's sampling */
    double step;            /* the tractogram's step_size (mm, NaN: none): tckmap's ratio */
    int threads;            /* 0: all cores */
    dm_watch *watch;        /* a caller's progress and cancel (stage "tdi"), or NULL */
} dm_tdi_request;

typedef struct dm_tdi_summary {
    long streamlines;
    int ratio;       /* the upsampling ratio used; 0 with the exact walk */
    long voxels_hit; /* voxels with a count above 0 */
    int nx, ny, nz;
    double seconds;
} dm_tdi_summary;

/* The map into m (dm_tdi_free it in any case) and what the command reports of it.  0, or -1
 * with an error (a degenerate grid, a stop request, out of memory). */
int dm_tdi_make(const dm_tdi_request *rq, dm_tdi *m, dm_tdi_summary *s);
/* The summary in provenance.json's results, as `dimoc tdi` records it. */
void dm_tdi_provenance(const dm_tdi_summary *s, int exact, dm_provenance *prov);

#endif
