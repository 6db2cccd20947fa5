/* The inputs of `dimoc commit` beside the tractogram's dictionary: read, checked against the
 * data's grid (each error names its file) and put in the fit's order. */
#ifndef DIMOC_COMMIT_INPUTS_H
#define DIMOC_COMMIT_INPUTS_H

#include "commit/commit_dict.h"
#include "commit/commit_operator.h"
#include "commit_run/commit_options.h"
#include "commit/commit_pulses.h"
#include "csd/dwi.h"
#include "io/space.h"
#include "tractogram/tck.h"

/* Per-streamline values given with the tractogram (--groups, --blur-apply-to,
 * --lambda-weights): n of them (malloc'd), one per streamline of the tractogram, or with
 * --blur-clust-thr one per cluster's representative; name names them in messages. */
typedef struct dm_commit_values {
    float *v;
    long n;
    const char *name;
} dm_commit_values;

/* What a run reads besides its options, handed over by whoever reads it: the command from its
 * files (commit_files.c), the C API from its caller's arrays.  The run calls these where it
 * needs each input, so that the command reads on threads of its own while the run goes on;
 * names in messages are the options' (o->peaks, o->groups, ...).  Each returns 0, or -1 with
 * the error set. */
enum { DM_COMMIT_GROUPS, DM_COMMIT_BLUR_APPLY, DM_COMMIT_LAMBDA_WEIGHTS };
enum { DM_COMMIT_ISO_MASK, DM_COMMIT_LAMBDA_ISO_WEIGHTS, DM_COMMIT_CONFIDENCE };
typedef struct dm_commit_source {
    void *user;
    /* the data's volumes as far as known before they are read (0: unknown): the GPU's program
     * is made for them meanwhile */
    int volumes;
    /* the data (dm_dwi: its values as doubles, x fastest, volume last; mask; the table in world
     * directions) and its grid's voxel -> world matrix */
    int (*data)(void *user, const dm_commit_options *o, dm_dwi *w, dm_affine *v2w);
    void (*free_data)(void *user, dm_dwi *w); /* what data made (w->data.data may be freed) */
    /* the tractogram, on a thread of its own while the data are read */
    int (*tracks)(void *user, const dm_commit_options *o, int threads, dm_tck *t);
    /* cylinder-zeppelin-ball: each volume's pulse, checked against the b-values */
    int (*pulses)(void *user, const dm_commit_options *o, int nvol, const double *bval,
                  dm_commit_pulse_table *p);
    /* --peaks, on the data's grid; on a thread of its own while the dictionary is built */
    int (*peaks)(void *user, const dm_commit_options *o, const dm_dwi *w, dm_image_view *v);
    /* DM_COMMIT_GROUPS, ..: one value per streamline of t (the tractogram as read) or per
     * representative (v->v malloc'd) */
    int (*values)(void *user, const dm_commit_options *o, int which, const dm_tck *t,
                  dm_commit_values *v);
    /* DM_COMMIT_ISO_MASK, ..: an image on the data's grid (3D; the confidence map 3D or 4D) */
    int (*image)(void *user, const dm_commit_options *o, int which, const dm_dwi *w,
                 dm_image_view *v);
    /* --dictionary: the dictionary saved by --stage dictionary, checked against what this run
     * would cut from t on g (dirs, dopt), and indexed for the grid's nvox voxels (NULL: not
     * offered) */
    int (*dictionary)(void *user, const dm_commit_options *o, const dm_tck *t,
                      const dm_commit_grid *g, const dm_commit_dirs *dirs,
                      const dm_commit_dict_options *dopt, size_t nvox, dm_commit_dict *d);
    void (*release)(void *user); /* the images and values it made */
} dm_commit_source;

/* volume-fractions: w's table for a 3D map as a one-sample "DWI" of no b = 0 (b 1000, as
 * COMMIT's scheme for scalar data; no gradient: the response is 1 whatever the direction). */
int dm_commit_scalar_table(dm_dwi *w);

/* The measured signal of the voxels of the fit, each divided by its mean b = 0 signal (COMMIT's
 * doNormalizeSignal; a voxel whose b = 0 mean is not positive gets 0; without any b = 0
 * measurement, as COMMIT, the signal as it is): nvox x nvol, big-allocated; NULL when out of
 * memory. */
double *dm_commit_signal_rows(const dm_dwi *w, const dm_commit_dict *d, int threads);

/* The peaks of the voxels of the fit (world directions, norms their amplitudes): from the
 * --peaks image p (3 volumes a peak, on the data's grid), or (p NULL) the principal direction
 * of a tensor fit of the data.  *npeaks set; NULL with the error set. */
float *dm_commit_fit_peaks(const dm_image_view *p, const dm_dwi *w, const dm_commit_dict *d,
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
int dm_commit_read_groups(const dm_commit_options *o, const dm_commit_values *labels,
                          const dm_tck *t, const long *input_of, long ninput,
                          const dm_commit_dict *d, dm_commit_groups *g);

/* --blur-apply-to: one 0 or 1 per streamline of the tractogram (COMMIT's blur_apply_to); NULL
 * with the error set. */
unsigned char *dm_commit_read_blur_apply(const dm_commit_options *o, const dm_commit_values *v,
                                         const dm_tck *t, const long *input_of, long ninput);

/* The lasso's weights per column (--lambda-weights' values, --lambda-iso-weights' image on the
 * data's grid; either may be NULL: 1 where none is given); NULL with the error set. */
double *dm_commit_lasso_weights(const dm_commit_options *o, const dm_commit_values *lw,
                                const dm_image_view *iso_w, const dm_tck *t,
                                const long *input_of, long ninput, const dm_commit_dict *d,
                                const dm_commit_operator *A, int niso);

/* --iso-mask: the balls only in the voxels of the fit where the image m is nonzero. */
int dm_commit_apply_iso_mask(const dm_commit_options *o, const dm_image_view *m,
                             const dm_commit_dict *d, dm_commit_operator *A);

/* --confidence-map: per row of the fit its weight from the image c (1 or ns volumes on the
 * data's grid; *used 0: one value, not used); NULL with the error set on a bad map. */
float *dm_commit_read_confidence(const dm_commit_options *o, const dm_image_view *c, int ns,
                                 const dm_commit_dict *d, int *used);

/* The dictionary's grid: the data's size and world -> voxel matrix (the inverse of v2w) and
 * the mask's values (nx*ny*nz doubles, x fastest; NULL: none) binarised (> 0) into *mask
 * (malloc'd; NULL without a mask). */
int dm_commit_make_grid(int nx, int ny, int nz, const dm_affine *v2w, const char *data_name,
                        const double *maskvals, dm_commit_grid *g, unsigned char **mask);

/* The dictionary's options from the command's. */
dm_commit_dict_options dm_commit_dict_options_of(const dm_commit_options *o, int threads);

/* The options' values and combinations the command takes (the blur, the lambdas and what
 * goes with them, the diffusivity, the lengths, the tolerances), each error naming the
 * command's option: 0, or -1 with the error set.  The command and the C API check with it. */
int dm_commit_options_check(const dm_commit_options *o);

/* --allow-negative: a comma list of ic, ec, iso into bits 0, 1, 2 (NULL: none); 0 or -1. */
int dm_commit_parse_blocks(const char *text, unsigned *blocks);
/* cylinder-zeppelin-ball's radii without --radii: COMMIT's CylinderZeppelinBall radii, 0.01 um
 * then 20 evenly spaced from 0.5 to 8 um (in metres). */
void dm_commit_default_radii(dm_commit_model *m);

/* The error of a tractogram that misses the mask (or the image) altogether: -1. */
int dm_commit_nothing_kept(const dm_commit_options *o);

#endif
