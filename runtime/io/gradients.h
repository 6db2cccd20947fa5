/* The gradient table of a diffusion-weighted image, from whichever source the user gave: FSL's
 * bvals and bvecs, an MRtrix b-table (--grad), or the image's own dw_scheme (a .mif's). */
#ifndef DIMOC_IO_GRADIENTS_H
#define DIMOC_IO_GRADIENTS_H

#include "io/volume.h"

/* The help text of --grad, the same for every command. */
#define DM_GRAD_HELP                                                                               \
    "MRtrix gradient table (rows x y z b in scanner coordinates), instead of --bvals/--bvecs; "    \
    "without either, a .mif's own dw_scheme"

/* Where the table comes from: FSL's two files (both or neither), else an MRtrix b-table. */
typedef struct dm_grad_files {
    const char *bvals, *bvecs; /* FSL bvals and bvecs, in the image's frame */
    const char *grad;          /* MRtrix b-table: rows "x y z b", world (scanner) coordinates */
} dm_grad_files;

/* Reads the table of `data` (the image read from data_path; nvol = data->nt) from the first
 * source there is: --bvals/--bvecs, else --grad, else the image's dw_scheme.  *b: nvol b-values;
 * *g: nvol x 3 directions in FSL's bvecs frame of `data`, world directions turned as MRtrix
 * exports them (`mrconvert -export_grad_fsl`: the transpose of the voxel axes' rotation, then x
 * negated when the voxel -> world determinant is positive); unit length where b > 0.  *source
 * (optional): the file the table came from, for messages (the bvals, the b-table or the image).
 * Returns 0, or -1 with dm_last_error() in one line naming the file: no table at all, one of
 * --bvals/--bvecs alone, a table whose rows do not match the volumes, a bad value. */
int dm_read_gradients(const dm_grad_files *f, const dm_volume *data, const char *data_path,
                      double **b, double **g, const char **source);
/* n rows x y z b in world coordinates (an MRtrix table in memory, `what` in messages) into
 * *b and *g in FSL's bvecs frame of an image whose voxel -> world matrix is vox2world (row
 * major 4 x 4), as dm_read_gradients turns --grad.  0, or -1 with dm_last_error(). */
int dm_gradients_from_world(const double *rows, int n, const double vox2world[16],
                            const char *what, double **b, double **g);

#endif
