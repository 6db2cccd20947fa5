/* Exclusion surfaces of tractography (--avoid FILE.gii): the mesh's triangles mapped into
 * tracking mm and binned on a grid for templates/track_surface_hit.h. */
#ifndef DIMOC_TRACK_SURFACE_H
#define DIMOC_TRACK_SURFACE_H

#include "gifti_mesh.h"
#include "track_kernel_host.h"
#include "track_space.h"

typedef struct dm_track_surface_grid {
    long ntri;               /* triangles kept (degenerate ones are dropped) */
    float *tri;              /* 9 per triangle, tracking mm */
    int *cell_off, *cell_tri;
    int n[3];
    float origin[3], cell;
} dm_track_surface_grid;

/* Maps the mesh's vertices by world2track and bins its triangles.  The cell edge is twice the
 * triangles' mean bounding-box edge (at least 1 mm), so that a triangle spans few cells and a
 * 0.5 mm step tests few triangles; it grows when the grid would pass 2^24 cells. */
int dm_track_surface_build(const dm_mesh *mesh, const dm_affine *world2track, const char *path,
                           dm_track_surface_grid *g);
/* The kernel's view (all NULL for an empty grid). */
dm_track_surface dm_track_surface_view(const dm_track_surface_grid *g);
void dm_track_surface_free(dm_track_surface_grid *g);

#endif
