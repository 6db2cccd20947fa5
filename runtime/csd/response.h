/* Response functions: the signal of one tissue, per shell, as zonal spherical-harmonic
 * coefficients r_l (l = 0, 2, ..., lmax) of the signal around the fibre axis (z), in MRtrix's
 * text format -- one row per shell, the b-values in a "# Shells:" comment -- so that dimoc and
 * MRtrix read each other's responses.  Isotropic tissues (GM, CSF) have r_l = 0 for l > 0. */
#ifndef DIMOC_CSD_RESPONSE_H
#define DIMOC_CSD_RESPONSE_H

#include "csd/dwi.h"
#include "sphere/sh.h"

#define DM_RESPONSE_NL (DM_SH_LMAX_MAX / 2 + 1)

typedef struct dm_response {
    int nshell;
    double b[DM_MAX_SHELLS];                 /* NAN where the file names no b-values */
    int lmax;                                /* largest degree stored (even) */
    double r[DM_MAX_SHELLS][DM_RESPONSE_NL]; /* r[s][l/2] */
} dm_response;

/* Reads an MRtrix response file.  0, or -1 with an error naming the file (no rows, ragged
 * rows, more than DM_RESPONSE_NL coefficients or DM_MAX_SHELLS rows, a "Shells" comment whose
 * count differs from the rows). */
int dm_response_read(const char *path, dm_response *r);
/* Writes it, through a temporary file; `history` (NULL: none) goes in a
 * "# command_history:" comment as MRtrix writes one.  0, or -1. */
int dm_response_write(const char *path, const dm_response *r, const char *history);

/* Matches each shell of the response to one of the data's: by b-value within 80 s/mm^2 when
 * the file names them, else by order (rows for all the data's shells, or for its
 * diffusion-weighted shells when the data has b = 0 and the response one row fewer).
 * map[s] = the data shell of response row s.  0, or -1 with an error naming `path` when
 * they cannot be matched (a different shell count, b-values the data lacks). */
int dm_response_match(const dm_response *r, const char *path, const dm_dwi *d, int *map);

/* The largest degree of a response that a shell of `count` directions determines: two
 * directions per zonal coefficient (l = 0, 2, .., lmax: lmax / 2 + 1 of them), at most
 * DM_SH_LMAX_MAX. */
int dm_response_lmax_for(int count);

/* The response of an anisotropic tissue from single-fibre voxels: for each voxel i of `vox`
 * (indices into d->vox) with fibre direction dir[3i..] (world, unit), each shell's signal is
 * fitted by zonal harmonics in the angle to the fibre (least squares, degree up to lmax but
 * at most dm_response_lmax_for the shell), and the coefficients are averaged over the
 * voxels (the voxels' fits on `threads` threads, 0: all cores; the mean in voxel order, so
 * the same bits on any number).  b = 0 shells get r_0 only.  0, or -1 (no voxels). */
int dm_response_from_voxels(const dm_dwi *d, const size_t *vox, const double *dir, size_t n,
                            int lmax, int threads, dm_response *r);
/* The response of an isotropic tissue: the mean signal of each shell over the voxels, as r_0
 * (r_0 Y_00 = mean, so r_0 = sqrt(4 pi) mean). */
int dm_response_isotropic(const dm_dwi *d, const size_t *vox, size_t n, dm_response *r);

#endif
