/* Text inputs: FSL bvals/bvecs, per-measurement input files, coordinate lists. */
#ifndef DIMOC_TEXTIO_H
#define DIMOC_TEXTIO_H

/* Reads a whitespace-separated numeric matrix (blank lines and '#' comments ignored; every
 * row the same length).  Returns 0, or -1 naming the file and the line of a non-numeric token,
 * a ragged row, or an empty file. */
int dm_read_matrix(const char *path, int *rows, int *cols, double **data);
/* The same, ignoring the file's first `skip` lines (a header read by the caller). */
int dm_read_matrix_after(const char *path, int skip, int *rows, int *cols, double **data);

/* Reads FSL bvals (one row or one column) and bvecs (3 rows or 3 columns), checks that both
 * have nvol entries (nvol <= 0: take the count from bvals), normalises bvecs of non-zero b that
 * are far from unit length (|1-|g|| > 0.01) with one warning.  b: nvol values; g: nvol x 3.
 * Directions 0 0 0 are left as they are: dm_check_directed() refuses them where used. */
int dm_read_bvals_bvecs(const char *bvals_path, const char *bvecs_path, int nvol, double **b,
                        double **g, int *nread);

/* Every volume with b > 10 (MRtrix's b = 0 threshold) has a direction of about unit length
 * (0.5 .. 1.5), as a diffusion-weighted measurement needs: 0, or -1 naming `path` (the file
 * the directions came from) and the first volume (from 1) that has none, e.g. 0 0 0. */
int dm_check_directed(const char *path, int n, const double *b, const double *g);

/* Writes FSL-style bvals (one row) and bvecs (three rows), atomically. */
int dm_write_bvals_bvecs(const char *bvals_path, const char *bvecs_path, int n, const double *b,
                         const double *g);

#endif
