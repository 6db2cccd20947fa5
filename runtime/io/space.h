/* Coordinate spaces of images (tractography, gradient frames): voxel <-> world mm (sform/qform), FSL's "scaled
 * voxel" coordinates (what FLIRT matrices map), and 4x4 affine helpers. */
#ifndef DIMOC_IO_SPACE_H
#define DIMOC_IO_SPACE_H

#include "io/volume.h"

#include <stddef.h>

typedef struct dm_affine {
    double m[4][4];
} dm_affine;

void dm_affine_identity(dm_affine *a);
dm_affine dm_affine_mul(const dm_affine *a, const dm_affine *b); /* a * b */
/* Inverse; -1 with dm_last_error() when singular. */
int dm_affine_invert(const dm_affine *a, dm_affine *inv);
void dm_affine_apply(const dm_affine *a, const double in[3], double out[3]);

/* The image's voxel -> world mm matrix (sform when set, else qform, else voxel sizes). */
void dm_volume_vox2world(const dm_volume *v, dm_affine *a);
/* 1 when the image carries an orientation (a qform or an sform code above 0). */
int dm_volume_has_orientation(const dm_volume *v);
/* Same grid as ref (dm_volume_check_same_grid) and, when both carry an orientation, the same
 * voxel -> world matrix (to 1e-4 of each entry's size, a float32 header's precision); else -1
 * with an error naming `path`, `ref_path` and printing both matrices. */
int dm_volume_check_same_space(const dm_volume *vol, const char *path, const dm_volume *ref,
                               const char *ref_path);
/* Voxel sizes (mm), positive. */
void dm_volume_voxel_size(const dm_volume *v, double vox[3]);
/* FSL's voxel -> "scaled voxel" mm matrix: diag(voxel sizes), with the x axis reversed
 * (x' = (nx - 1 - i) * dx) when the voxel -> world matrix has a positive determinant
 * ("neurological" storage).  FLIRT matrices map these coordinates between two images. */
void dm_volume_vox2fsl(const dm_volume *v, dm_affine *a);
/* 1 when the voxel -> world determinant is positive (FSL flips x of bvecs/dyads then). */
int dm_volume_is_neurological(const dm_volume *v);

/* The rotation that takes directions in FSL's bvecs frame to world (scanner) space, as MRtrix
 * reads and exports bvecs: x negated when the voxel -> world determinant is positive, then the
 * voxel axes' world directions (the orthogonal matrix nearest to the voxel -> world matrix's
 * unit columns, its polar factor: a shear or scaling is dropped).  Row-major; its transpose takes world directions back to the bvecs
 * frame (FSL's dyads). */
void dm_volume_bvec_rotation(const dm_volume *v, double R[3][3]);
/* The same for an image whose voxel -> world matrix is a. */
void dm_affine_bvec_rotation(const dm_affine *a, double R[3][3]);
/* out = R in, or R' in when `inverse` (in and out may be the same array). */
void dm_rotate3(const double R[3][3], const double in[3], double out[3], int inverse);

/* An image held in memory by whoever made it (a volume read from a file, or a caller of the C
 * API), read in place: element (x, y, z[, t]) lies at (const char *)data + x * stride[0] +
 * y * stride[1] + ... bytes (strides of any sign: numpy's layout), with its grid.  The engines
 * that take images this way read no file, so that the same code serves both. */
enum { DM_VIEW_F32 = 0, DM_VIEW_F64 = 1, DM_VIEW_U8 = 2 };
typedef struct dm_image_view {
    const void *data; /* NULL: no image */
    int type;         /* DM_VIEW_* */
    int ndim;         /* 3, or 4 with shape[3] values per voxel */
    size_t shape[4];
    ptrdiff_t stride[4];
    dm_affine v2w;    /* voxel -> world mm */
    double voxel[3];  /* voxel sizes in mm (a NIfTI header's pixdim, as MRtrix reads them) */
    const char *name; /* the file or the argument, for messages */
} dm_image_view;

/* Value t of voxel (x, y, z) as a double. */
static inline double dm_view_at(const dm_image_view *v, size_t x, size_t y, size_t z, size_t t)
{
    const char *p = (const char *)v->data + (ptrdiff_t)x * v->stride[0] +
                    (ptrdiff_t)y * v->stride[1] + (ptrdiff_t)z * v->stride[2] +
                    (v->ndim > 3 ? (ptrdiff_t)t * v->stride[3] : 0);
    return v->type == DM_VIEW_F32   ? (double)*(const float *)p
           : v->type == DM_VIEW_F64 ? *(const double *)p
                                    : (double)*(const unsigned char *)p;
}
/* Volumes per voxel (1 for a 3D image). */
static inline size_t dm_view_nt(const dm_image_view *v)
{
    return v->ndim > 3 ? v->shape[3] : 1;
}
/* The view of a volume read (its doubles, x fastest; its geometry), named `name`. */
dm_image_view dm_view_of_volume(const dm_volume *v, const char *name);

/* Reads a 4x4 matrix (text, FLIRT's format); -1 with an error naming the file. */
int dm_affine_read(const char *path, dm_affine *a);

#endif
