/* The surfaces of tractography (GIFTI --avoid, --stop, waypoints, targets): their triangles
 * mapped into tracking mm, each tagged with its surface's bit, and binned on one grid for
 * templates/track/track_surface_hit.h. */
#ifndef DIMOC_TRACK_SURFACE_H
#define DIMOC_TRACK_SURFACE_H

#include "io/gifti_mesh.h"
#include "track/track_kernel_host.h"
#include "io/space.h"

typedef struct dm_track_surface_grid {
    long ntri;             /* triangles kept (degenerate ones are dropped) */
    float *tri;            /* 9 per triangle, tracking mm */
    unsigned int *tri_bit; /* the bit of each triangle's surface */
    long cap;              /* triangles allocated */
    int *cell_off, *cell_tri;
    int n[3];
    float origin[3], cell;
} dm_track_surface_grid;

/* Adds the mesh's triangles (vertices mapped by world2track) with surface bit `bit`; g starts
 * zeroed.  Triangles without area are dropped; a mesh with none left is an error. */
int dm_track_surface_add(dm_track_surface_grid *g, const dm_mesh *mesh, unsigned int bit,
                         const dm_affine *world2track, const char *path);
/* Bins the triangles added.  The cell edge is twice the triangles' mean bounding-box edge (at
 * least 1 mm), so that a triangle spans few cells and a 0.5 mm step tests few triangles; it
 * grows when the grid would pass 2^24 cells. */
int dm_track_surface_finish(dm_track_surface_grid *g);
/* add (bit 1) and finish, for one surface */
int dm_track_surface_build(const dm_mesh *mesh, const dm_affine *world2track, const char *path,
                           dm_track_surface_grid *g);
/* The kernel's view (all NULL for an empty grid). */
dm_track_surface dm_track_surface_view(const dm_track_surface_grid *g);
void dm_track_surface_free(dm_track_surface_grid *g);

#endif
