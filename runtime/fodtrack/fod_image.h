/* The FOD image of FOD tractography, loaded into the kernel's layout (templates/fodtrack/
 * fod_field.h): the rows of the voxels whose FOD is not zero, a row index per voxel, and the
 * world <-> voxel matrices. */
#ifndef DIMOC_FODTRACK_FOD_IMAGE_H
#define DIMOC_FODTRACK_FOD_IMAGE_H

#include "fodtrack/ft_types.h"
#include "io/space.h"

typedef struct dm_ft_fod {
    int *row; /* per voxel: row of coef, -1 where every coefficient is 0 or NaN */
    float *coef;      /* nrows x ncoef, each row in dm_fod_row_order */
    long nrows;
    int nx, ny, nz, ncoef, lmax;
    dm_affine v2w, w2v;    /* voxel <-> world mm */
    double voxel[3];       /* voxel sizes (mm), as the image's header gives them */
    double min_voxel;      /* the smallest voxel size (mm): tckgen's unit of step and lengths */
    dm_fod_sh_table table; /* the amplitude's recurrence constants */
} dm_ft_fod;

/* Takes a 4D image of SH coefficients (6, 15, 28, 45, 66 or 91 volumes: even lmax 2 to 12; the
 * volume index l(l+1)/2 + m of MRtrix's basis), in any layout (io/space.h).  -1 with one line
 * naming v->name otherwise. */
int dm_ft_fod_from(const dm_image_view *v, dm_ft_fod *im);
void dm_ft_fod_free(dm_ft_fod *im);
/* The kernel's view of it (pointers into im). */
void dm_ft_fod_field(const dm_ft_fod *im, dm_fod_field *f);
/* The order of a row's coefficients (templates/fodtrack/fod_field.h: the amplitude's
 * recurrence meets them so): natural[j] is the index l(l+1)/2 + m of MRtrix's basis (the
 * image's volume) of the row's j-th coefficient.  Returns their count. */
int dm_fod_row_order(int lmax, int *natural);
/* The recurrence constants of the amplitude (fod_field.h). */
void dm_fod_sh_table_fill(dm_fod_sh_table *t);

#endif
