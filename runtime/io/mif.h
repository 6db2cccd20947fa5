/* MRtrix images (.mif, .mif.gz, .mih with its data file): the text header read and checked, the
 * values of any stored order and data type read into dimoc's order, and the header of an image
 * that io/volume.c writes.
 *
 * The values come out as io/volume.h keeps them: x fastest, then y, z, volume.  The spatial
 * axes are taken in the order the file stores them (the axis of the smallest stride first, an
 * axis stored backwards read forwards), which is the order MRtrix's own NIfTI export writes;
 * the voxel -> world matrix is the header's transform adjusted to match, so the grid in world
 * millimetres is the one `mrinfo -transform` describes, and a map written from these values
 * lines up with the .mif in MRtrix and FSL. */
#ifndef DIMOC_IO_MIF_H
#define DIMOC_IO_MIF_H

#include <stddef.h>

/* An image as read: its grid, its gradient table and the header's other lines. */
typedef struct dm_mif_image {
    int nx, ny, nz, nt;     /* nt = 1 for a 3D image */
    double vox[4];          /* voxel sizes of the axes as ordered here (mm), then the 4th axis' */
    double vox2world[4][4]; /* voxel index (as ordered here) -> world mm, row-major */
    double *values;         /* nx*ny*nz*nt doubles (scaling applied), or NULL: header only */
    double *dw_scheme;      /* dw_rows x 4: x y z b, world frame; NULL when the header has none */
    int dw_rows;
    char *extra; /* the other "key: value" lines, each ending in '\n'; NULL if none */
} dm_mif_image;

/* 1 when the path names an MRtrix image by its ending (.mif, .mif.gz, .mih; any case). */
int dm_mif_is_path(const char *path);

/* Reads an MRtrix image; `values` 0 reads the header alone (img->values NULL).  Returns 0, or -1
 * with dm_last_error() naming the file and what is wrong: not an MRtrix image, a missing or
 * malformed key (dim, vox, layout, datatype, file), more than 4 dimensions, complex data, a
 * data file shorter than the header promises. */
int dm_mif_read(const char *path, dm_mif_image *img, int values);
void dm_mif_free(dm_mif_image *img);

/* The data types dimoc writes (the values of io/volume.h's DM_OUT_* codes). */
enum { DM_MIF_FLOAT32 = 0, DM_MIF_UINT8 = 1, DM_MIF_FLOAT64 = 2, DM_MIF_UINT32 = 3 };

/* The header of an image of nx*ny*nz*nt values stored x fastest (layout +0,+1,+2[,+3]) as
 * `type` (DM_MIF_*, in the host's byte order), on the grid of vox2world (row-major voxel ->
 * world mm; the voxel sizes are its column lengths), with dw_rows rows of a gradient table
 * (x y z b, world frame; dw_rows 0: none) when dw_rows == nt; vox_t is the 4th axis' spacing.
 * The data follow the header at the offset its "file: ." line names, which is *len, the length
 * of the returned block (malloc'd; zero bytes after END pad it to a multiple of 16).  NULL with
 * dm_last_error(). */
char *dm_mif_header(int nx, int ny, int nz, int nt, double vox_t, const double vox2world[4][4],
                    int type, const double *dw_scheme, int dw_rows, size_t *len);

#endif
