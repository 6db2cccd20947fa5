/* Peaks of a function on the sphere given by its real SH coefficients (sh.h), such as an FOD:
 * the local maxima of its amplitude, refined to where its gradient vanishes.
 *
 * A dm_peak_finder holds what depends on lmax alone (the start directions, the basis there,
 * their neighbours) so that an image is searched voxel by voxel without recomputing it; it is
 * read-only once made, so threads may share one. */
#ifndef DIMOC_SPHERE_PEAKS_H
#define DIMOC_SPHERE_PEAKS_H

/* Start directions over the half sphere (sh.h's functions are even): about 8 degrees apart,
 * so lobes that cross at 25 degrees or more start from separate local maxima. */
#define DM_PEAK_START_DIRS 300
/* Peaks closer than this (degrees, either sign) are one peak. */
#define DM_PEAK_MERGE_DEG 1.0

typedef struct dm_peak_finder {
    int lmax, ncoef, nstart;
    double *dirs;    /* 3 * nstart unit vectors, z >= 0 */
    double *basis;   /* ncoef x nstart: the SH basis at the start directions, by coefficient */
    int *neighbours; /* nstart x max_neighbours indices, -1 after the last of each */
    int max_neighbours;
    int wide; /* the start amplitudes' AVX2 build runs here */
} dm_peak_finder;

/* Makes the finder of degree lmax (even, 0..DM_SH_LMAX_MAX); 0, or -1 (a bad lmax, no
 * memory) with nothing to free.  The caller words the error (this folder reports none). */
int dm_peak_finder_init(dm_peak_finder *pf, int lmax);
void dm_peak_finder_free(dm_peak_finder *pf);

/* The peaks of the function with coefficients coef: at most max_peaks, largest amplitude
 * first, each with amplitude > 0, >= min_amp and >= relative x the largest, as unit vectors
 * dirs[3 * max_peaks] (sign chosen so that z > 0, or y > 0 when z is 0, or x > 0 when both
 * are; 0 meaning below 1e-12) and amplitudes amps[max_peaks].  Returns how many were found
 * (0: none, e.g. a constant or non-finite function).  Local maxima whose start amplitude is
 * below half of what a peak must reach (or of the max_peaks-th peak already found) are not
 * refined: see peaks.c. */
int dm_peak_finder_find(const dm_peak_finder *pf, const double *coef, int max_peaks, double min_amp,
                        double relative, double *dirs, double *amps);

/* The same with a finder made and freed for this call (one voxel; for many, keep a finder).
 * -1 when lmax is not valid or memory ran out. */
int dm_sh_peaks(int lmax, const double *coef, int max_peaks, double min_amp, double *dirs,
                double *amps);

#endif
