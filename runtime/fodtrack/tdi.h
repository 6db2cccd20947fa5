/* Track-density images on the host: the grid of a template image (optionally super-resolved
 * as MRtrix's tckmap -template IMG -vox V makes it), streamlines added on CPU threads through
 * templates/fodtrack/tdi_map.h (the same source the GPU tracker builds), and the map written
 * as NIfTI.  `dimoc tdi` is dm_tdi_command. */
#ifndef DIMOC_FODTRACK_TDI_H
#define DIMOC_FODTRACK_TDI_H

#include "io/space.h"
#include "io/tck.h"
#include "util/json.h"

typedef struct dm_tdi {
    int nx, ny, nz;
    dm_affine vox2world; /* voxel -> world mm */
    unsigned int *count; /* nx*ny*nz, x fastest: streamlines through each voxel */
} dm_tdi;

/* The grid of `templ` (its first three dimensions and voxel -> world matrix), or with voxel_mm
 * (three sizes > 0; NULL: none) the super-resolved grid of tckmap -template -vox: the same
 * axes, size ceil(n * old / new) on each, and the first voxel's corner where the template's
 * is (its centre moved by half the difference of the sizes along the axis).  Counts start at
 * 0.  0, or -1 with an error naming templ_path. */
int dm_tdi_init(dm_tdi *m, const dm_volume *templ, const char *templ_path, const double *voxel_mm);
/* The world mm -> voxel matrix (the first three rows of the inverse of vox2world). */
void dm_tdi_world2vox(const dm_tdi *m, double world2vox[3][4]);
/* Adds every streamline of t (threads: 0 = all cores).  Returns 0, or -1 after a stop
 * request. */
int dm_tdi_add_tracks(dm_tdi *m, const dm_tck *t, int threads);
/* Writes the counts as a uint32 NIfTI (tckmap's type for a TDI) on the map's own grid to path (a temporary name
 * renamed into place when whole). */
int dm_tdi_write(const dm_tdi *m, const char *path);
void dm_tdi_free(dm_tdi *m);

typedef struct dm_tdi_options {
    const char *tracks, *templ, *out;
    double voxel_mm[3]; /* all 0: the template's grid */
    int threads;        /* 0: all cores */
} dm_tdi_options;

typedef struct dm_tdi_summary {
    long streamlines;
    long voxels_hit; /* voxels with a count above 0 */
    int nx, ny, nz;
    double seconds;
} dm_tdi_summary;

/* `dimoc tdi`: reads the tracks and the template, maps, writes --out and its provenance
 * beside it (OUT.provenance.json), the two put in place together. */
int dm_tdi_command(const dm_tdi_options *o, dm_provenance *prov, dm_tdi_summary *s);

#endif
