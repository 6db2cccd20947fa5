/* COMMIT's operator A (templates/commit/commit_ops.h) built from the dictionary, the peaks and
 * the response tables, with COMMIT's preconditioning (a streamline's segment lengths divided by
 * its norm, the tables by their first row's norm: columns of comparable size). */
#ifndef DIMOC_COMMIT_OPERATOR_H
#define DIMOC_COMMIT_OPERATOR_H

#include "commit/commit_dict.h"
#include "commit/commit_kernels.h"

#pragma push_macro("DM_FN") /* an includer's own (track_kernel_host.h's) comes back after */
#undef DM_FN
#define DM_FN static inline __attribute__((unused))
#include "commit/commit_ops.h"
#undef DM_FN
#pragma pop_macro("DM_FN")

typedef struct dm_commit_operator {
    dm_commit_op op; /* views into the arrays below and the dictionary's */
    long ncols, nrows;
    long nruns; /* runs of one direction within a voxel (templates/commit/commit_ops.h) */
    long *run_start, *run_first;
    unsigned short *run_dir;
    unsigned *seg_str;        /* IC segments in voxel-and-run order: streamline, length */
    float *seg_len, *str_len; /* preconditioned lengths, in that order and by streamline */
    unsigned *str_run;        /* each streamline-order segment's run */
    long *ec_start;   /* EC entries (voxel, peak) by voxel; nec columns each (one per d_perp) */
    unsigned *ec_vox; /* each EC entry's voxel (for the maps) */
    unsigned short *ec_dir;
    double *scale;   /* ncols: a coefficient of the original problem is x / scale */
    long *iso_index; /* with an ISO mask: op.iso_index (NULL: balls in every voxel) */
    /* ncols = nic nf + nec ne + niso niv (templates/commit/commit_ops.h) */
    int threads;
} dm_commit_operator;

/* peaks: per voxel of the fit, npeaks world directions (3 each, their norms the peaks'
 * amplitudes; NULL: no EC compartment); a peak below vf_thr times the voxel's largest, or of
 * norm 0, is left out (COMMIT's vf_THR).  0, or -1 (out of memory) with the error set. */
int dm_commit_operator_build(const dm_commit_dict *d, const dm_commit_kernels *k,
                             const dm_commit_dirs *dirs, const float *peaks, int npeaks,
                             double vf_thr, int threads, dm_commit_operator *A);
/* Balls only in the voxels of the fit where iso_on[v] (COMMIT's filename_iso_mask): the ISO
 * columns of the others dropped (commit_ops.h: iso_index).  0, or -1 (out of memory). */
int dm_commit_operator_iso_mask(dm_commit_operator *A, const unsigned char *iso_on);
void dm_commit_operator_free(dm_commit_operator *A);

#endif
