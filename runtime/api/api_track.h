/* Inside the public API: what its calls over images with their grids and over streamlines
 * share (api_track.c; the calls of tractography and COMMIT). */
#ifndef DIMOC_API_TRACK_H
#define DIMOC_API_TRACK_H

#include "dimoc.h"
#include "io/space.h"
#include "tractogram/tck.h"

/* A caller's image as the engines' view (io/space.h), checked: an array of uint8, float32 or
 * float64 of 3 dimensions (or 4: `volumes` a voxel; 1: a 3D image, which may come as X x Y x
 * Z x 1; 0: any number), a finite affine (NULL: ref's, when the image is on ref's grid; ref
 * NULL: required), positive voxel sizes (NULL: ref's with ref's affine, else the lengths of
 * the affine's columns).  `name` names it in messages and is kept by v. */
dimoc_status dm_api_image(const dimoc_image *im, const char *name, int volumes,
                          const dm_image_view *ref, dm_image_view *v);

/* A caller's streamlines (and weights, NULL: none) as a tractogram in memory: t's points are
 * the caller's (not copied; t->npoints and t->start malloc'd, freed by dm_api_tracks_free),
 * checked: offsets from 0, not decreasing, every point finite, weights finite and >= 0.
 * `what` names them in messages. */
dimoc_status dm_api_tracks(const dimoc_streamlines *s, const float *weights, const char *what,
                           dm_tck *t);
void dm_api_tracks_free(dm_tck *t);

#endif
