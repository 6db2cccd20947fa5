/* FOD glyphs: the three mid-slices of an FOD image (SH coefficients in world space,
 * sphere/sh.h), each voxel a small polar glyph, in the panels and orientation of slices.h.
 *
 * A glyph is the 3D glyph r(u) = max(0, f(u)) seen along the panel's normal: along each
 * in-plane angle alpha it reaches max over elevations beta of max(0, f(u)) cos(beta), u =
 * cos(beta) e_alpha + sin(beta) e_normal (the outline of the projected 3D glyph), so a fibre
 * through the plane still shows as a small disc.  It is filled with the direction-encoded
 * colour (|x|, |y|, |z| of u in world space as red, green, blue) of the direction that reaches
 * furthest at that angle.  Radii are scaled by the largest over the three slices, so glyphs
 * compare across voxels.  Each voxel is a square cell of `cell` pixels whatever its size in
 * mm; the background and voxels with NaN/Inf coefficients are black. */
#ifndef DIMOC_FOD_GLYPHS_H
#define DIMOC_FOD_GLYPHS_H

#include "io/volume.h"
#include "render/slices.h"

#define DM_GLYPH_CELL_DEFAULT 14

/* 1 when n volumes is an SH count of lmax >= 2 (6, 15, 28, 45, 66, 91, ...). */
int dm_is_sh_count(int n);

/* Draws the glyphs of the FOD (an SH count of volumes, lmax >= 2) with cells of `cell` pixels
 * (0: DM_GLYPH_CELL_DEFAULT; 2 to 64).  0, or -1 with dm_last_error(). */
int dm_render_fod_glyphs(const dm_volume *fod, int cell, dm_picture *pic);

#endif
