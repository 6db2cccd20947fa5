/* The inputs of `dimoc commit` beside the tractogram's dictionary: read, checked against the
 * data's grid (each error names its file) and put in the fit's order. */
#ifndef DIMOC_COMMIT_INPUTS_H
#define DIMOC_COMMIT_INPUTS_H

#include "commit/commit_dict.h"
#include "commit/commit_operator.h"
#include "commit_run/commit_options.h"
#include "csd/dwi.h"
#include "tractogram/tck.h"
#include "io/volume.h"

/* volume-fractions: a 3D map and the mask, as a one-sample "DWI" of no b = 0 (b 1000, as
 * COMMIT's scheme for scalar data; no gradient: the response is 1 whatever the direction). */
int dm_commit_scalar_map_read(const dm_commit_options *o, dm_dwi *w);

/* The measured signal of the voxels of the fit, each divided by its mean b = 0 signal (COMMIT's
 * doNormalizeSignal; a voxel whose b = 0 mean is not positive gets 0; without any b = 0
 * measurement, as COMMIT, the signal as it is): nvox x nvol, big-allocated; NULL when out of
 * memory. */
double *dm_commit_signal_rows(const dm_dwi *w, const dm_commit_dict *d, int threads);

/* The --peaks image read and checked (sh2peaks' layout: 3 volumes a peak), on a thread of its
 * own while the dictionary is built (it does not depend on it): dm_commit_read_peaks, a side
 * job's work (0, or -1 with the error set), fills p. */
typedef struct dm_commit_peaks_read {
    const dm_commit_options *o;
    const dm_volume *data; /* the grid it must share */
    dm_volume p;
} dm_commit_peaks_read;
int dm_commit_read_peaks(void *arg);

/* The peaks of the voxels of the fit (world directions, norms their amplitudes): from the
 * --peaks image p, or (p NULL) the principal direction of a tensor fit of the data.  *npeaks
 * set; NULL with the error set. */
float *dm_commit_fit_peaks(const dm_volume *p, const dm_dwi *w, const dm_commit_dict *d,
                           int threads, int *npeaks);

/* --blur-clust-thr (COMMIT's blur_clust_thr): t becomes its clusters' representatives, in the
 * input's order; *input_of (malloc'd, per representative its input index), *cluster_of (per
 * input streamline its cluster) and *ninput the input's count.  Without it both stay NULL. */
int dm_commit_cluster_tractogram(const dm_commit_options *o, dm_tck *t, int threads,
                                 long **input_of, long *ninput, long **cluster_of);

/* The groups of --groups: one label per streamline of the tractogram (a non-negative integer),
 * a group per label over the streamlines in the fit (groups left empty dropped). */
typedef struct {
    long n;
    long *start, *cols;
    double *w;
} dm_commit_groups;

void dm_commit_groups_free(dm_commit_groups *g);
int dm_commit_read_groups(const dm_commit_options *o, const dm_tck *t, const long *input_of,
                          long ninput, const dm_commit_dict *d, dm_commit_groups *g);

/* --blur-apply-to: one 0 or 1 per streamline of the tractogram (COMMIT's blur_apply_to); NULL
 * with the error set. */
unsigned char *dm_commit_read_blur_apply(const dm_commit_options *o, const dm_tck *t,
                                         const long *input_of, long ninput);

/* The lasso's weights per column (--lambda-weights, --lambda-iso-weights; 1 where none is
 * given); NULL with the error set. */
double *dm_commit_lasso_weights(const dm_commit_options *o, const dm_tck *t, const long *input_of,
                                long ninput, const dm_commit_dict *d, const dm_dwi *w,
                                const dm_commit_operator *A, int niso);

/* --iso-mask: the balls only in the voxels of the fit where the image is nonzero. */
int dm_commit_apply_iso_mask(const dm_commit_options *o, const dm_dwi *w, const dm_commit_dict *d,
                             dm_commit_operator *A);

/* --confidence-map: per row of the fit its weight (*used 0: one value, not used); NULL with the
 * error set on a bad map. */
float *dm_commit_read_confidence(const dm_commit_options *o, const dm_dwi *w,
                                 const dm_commit_dict *d, int *used);

/* The dictionary's grid: the data's world -> voxel matrix and the mask binarised (> 0) into
 * *mask (malloc'd; NULL without a mask).  `data` may be a header alone. */
int dm_commit_make_grid(const dm_volume *data, const char *data_path, const dm_volume *maskvol,
                        dm_commit_grid *g, unsigned char **mask);

/* The dictionary's options from the command's. */
dm_commit_dict_options dm_commit_dict_options_of(const dm_commit_options *o, int threads);

/* The error of a tractogram that misses the mask (or the image) altogether: -1. */
int dm_commit_nothing_kept(const dm_commit_options *o);

#endif
