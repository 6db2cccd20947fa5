/* Quick-look pictures of a volume: its three mid-slices (axial, coronal, sagittal) side by
 * side, grey for a scalar map, direction-encoded colour for fibre directions.
 *
 * The volume is first put in RAS order: each voxel axis is matched to the world axis (of the
 * sform, else the qform) it runs closest to, and flipped where it runs against it.  The
 * panels are then drawn in the neurological convention: the subject's left on the left of
 * the axial and coronal panels, anterior at the top of the axial panel, superior at the top
 * of the coronal and sagittal panels, anterior on the left of the sagittal panel.  The
 * mid-slice of an axis of n voxels is n/2 (integer division, in RAS order).  Pixels are
 * square in millimetres: with zoom Z each pixel is (smallest voxel size)/Z mm wide, and every
 * voxel is drawn by nearest neighbour, so anisotropic voxels do not squash the anatomy.
 * NaN and Inf voxels are black. */
#ifndef DIMOC_SLICES_H
#define DIMOC_SLICES_H

#include "io/volume.h"

/* What is drawn: one volume of a scalar map in grey, or (scalar NULL) colour from a
 * direction map. */
typedef struct dm_slices_settings {
    const dm_volume *scalar; /* grey */
    int volume;              /* its volume to show */
    int window;              /* 1: grey from lo (black) to hi (white); 0: from percentiles 1
                              * and 99 of the finite non-zero voxels of that volume */
    double lo, hi;
    const dm_volume *dyads;  /* colour: 3 volumes x, y, z; |x|,|y|,|z| as red, green, blue */
    const dm_volume *weight; /* with dyads, on its grid: colours scaled by |weight| over its
                              * 99th percentile of the non-zero voxels, clamped to 1 (NULL: 1) */
    int zoom;                /* pixels per smallest voxel size; 0: the largest extent near 256
                              * pixels, at least 1 pixel per voxel */
} dm_slices_settings;

typedef struct dm_picture {
    int width, height;
    int channels;          /* 1: grey, 3: RGB */
    unsigned char *pixels; /* rows top to bottom, `channels` bytes per pixel (malloc'd) */
} dm_picture;

/* A volume in RAS order: voxel c = (r, a, s) with r along world x (left to right), a along y
 * (posterior to anterior), s along z (inferior to superior); shared with fod_glyphs.c. */
typedef struct dm_ras_view {
    const dm_volume *vol;
    int axis[3];  /* voxel axis along each world axis */
    int flip[3];  /* 1 where that voxel axis runs against the world axis */
    int n[3];     /* voxels along each world axis */
    double mm[3]; /* voxel size along each world axis */
} dm_ras_view;
void dm_ras_setup(const dm_volume *vol, dm_ras_view *rv);
/* Index into vol->data of RAS voxel c[3] in volume t. */
size_t dm_ras_index(const dm_ras_view *rv, const int c[3], int t);

/* The world axes of a panel: the slice through `normal` at its middle; `hor` / `ver` the axes
 * across and down it; hor_rev / ver_rev: that axis decreases across / down the panel.  The
 * three panels, axial, coronal, sagittal, in the order drawn. */
typedef struct dm_panel_axes {
    int normal, hor, ver, hor_rev, ver_rev;
} dm_panel_axes;
extern const dm_panel_axes dm_mid_panels[3];

/* Draws the three mid-slices, 4 black pixels apart, each centred vertically.  0, or -1 with
 * dm_last_error() (a picture of more than 1e8 pixels, settings that do not fit the maps). */
int dm_render_slices(const dm_slices_settings *s, dm_picture *pic);
void dm_picture_free(dm_picture *pic);

#endif
