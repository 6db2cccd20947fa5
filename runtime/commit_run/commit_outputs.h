/* What `dimoc commit` makes once the fit is done, in memory, for a sink to write (the command,
 * commit_files.c) or keep (the C API): the weights of the original problem (folded over the
 * cylinders' radii; with blur, times the blurred length), the compartment maps (IC, EC, ISO;
 * the lesion model's with --iso-mask), the error maps of the fit and provenance.json's
 * results. */
#ifndef DIMOC_COMMIT_OUTPUTS_H
#define DIMOC_COMMIT_OUTPUTS_H

#include "commit/commit_cpu.h"
#include "commit/commit_dict.h"
#include "commit/commit_gpu.h"
#include "commit/commit_kernels.h"
#include "commit/commit_operator.h"
#include "commit/commit_solve.h"
#include "commit_run/commit_options.h"
#include "csd/dwi.h"
#include "tractogram/tck.h"
#include "util/json.h"

/* What the stages before leave to the outputs (nothing of it is freed here). */
typedef struct dm_commit_fitted {
    const dm_tck *t;                    /* the streamlines fitted (with clusters: their
                                          * representatives) */
    const dm_dwi *w;                    /* the data */
    const dm_commit_dict *d;            /* the dictionary */
    const dm_commit_dict_options *dopt; /* its options (the blur) */
    const dm_commit_dirs *dirs;         /* its directions */
    const dm_commit_kernels *k;         /* the responses */
    const dm_commit_operator *A;        /* the operator (its scale: the preconditioning) */
    const double *x;                    /* the coefficients fitted, of the preconditioned problem */
    const double *y, *y0;               /* the rows of the fit as fitted; unweighted (a confidence
                                          * map's) or NULL */
    const float *conf;                  /* --confidence-map's row weights, when conf_used */
    int conf_used;
    dm_commit_cpu *cpu;                /* the host's backend (its last product: A x), or NULL */
    dm_commit_gpu *gpu;                /* the GPU's, or NULL: released (on a thread) once its
                                          * last product is made, and then NULL here */
    const unsigned char *blur_apply;   /* --blur-apply-to's flags, or NULL */
    const long *input_of, *cluster_of; /* --blur-clust-thr: the representatives' input indices,
                                          * each input streamline's cluster (NULL: none) */
    long ninput;                       /* the input's streamlines */
    dm_commit_fista_result fr, fr_reg; /* the fit; with --debias, the regularised one before */
    int nnls_iterations;               /* the group lasso's first fit without it */
    long debias_columns;               /* --debias: the IC columns kept */
    int dict_gpu;                      /* the dictionary was cut on the GPU */
    int threads;
    double t0; /* the run's start, and its stages' seconds */
    double t_load, t_clust, t_dict, t_kern, t_op, t_setup, t_solve;
} dm_commit_fitted;

/* The outputs of a fit in memory: maps of the voxels of the fit (value v for voxel d->vox[v];
 * NULL: 0 in every voxel), named as the command's files, in the order it writes them (the
 * compartments first, then the errors), and each streamline's weight. */
enum { DM_COMMIT_MAX_MAPS = 9 };
typedef struct dm_commit_made {
    int nmaps, ncompartments; /* the first ncompartments: the compartment maps */
    const char *name[DM_COMMIT_MAX_MAPS]; /* "compartment_IC.nii.gz", ..., "fit_RMSE.nii.gz" */
    const double *value[DM_COMMIT_MAX_MAPS];
    /* streamline_weights.txt's values: one per streamline of the tractogram (with
     * --blur-clust-thr per input streamline, the representative's weight at its index, 0 for
     * the others); with blur times the blurred length over the own, with the lesion model
     * scaled by its factors */
    double *weights;
    long nweights;
    const double *xo; /* the coefficients of the original problem, the IC blocks folded */
    long nonzero;     /* streamlines fitted with a weight > 0 (filtered.tck's) */
} dm_commit_made;

/* Where the outputs go (the command's files, the C API's arrays): compartments(user, f, m)
 * once the weights and the compartment maps are known (m->nmaps is m->ncompartments; a sink
 * may write them on threads of its own meanwhile), errors(user, f, m) once the error maps are
 * too.  Each 0, or -1 with the error set, which ends the outputs. */
typedef struct dm_commit_sink {
    int (*compartments)(void *user, const dm_commit_fitted *f, const dm_commit_made *m);
    int (*errors)(void *user, const dm_commit_fitted *f, const dm_commit_made *m);
    void *user;
} dm_commit_sink;

/* Makes the outputs of the fit f, hands them to the sink, records the results in prov and
 * fills sum.  0, or -1 with the error. */
int dm_commit_outputs(const dm_commit_options *o, dm_commit_fitted *f, const dm_commit_sink *sink,
                      dm_provenance *prov, dm_commit_summary *sum);

/* The weight of fitted streamline s (its column's coefficient in xo; with blur, times the
 * blurred length over its own), 0 when it was left out of the fit (or s < 0). */
double dm_commit_streamline_weight(const dm_commit_dict *d, const double *xo, int blur, long s);

/* --blur-clust-thr's facts in the provenance record. */
void dm_commit_clustering_provenance(dm_provenance *prov, const dm_commit_options *o, long ninput,
                                     long nclusters, double seconds);

#endif
