/* What `dimoc commit` writes once the fit is done, into a temporary folder that takes --out's
 * place at the end (util/outdir.h): the weights of the original problem (folded over the
 * cylinders' radii; with blur, times the blurred length), the compartment maps (IC, EC, ISO; the
 * lesion model's with --iso-mask), the clusters of --blur-clust-thr, filtered.tck, the error
 * maps of the fit and provenance.json's results. */
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
    const dm_dwi *w;                    /* the data: the maps' grid (its header) */
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

/* Writes every output into a temporary folder beside o->out that replaces it at the end, and
 * fills sum.  0, or -1 with the first error in the order the files were once written in, one
 * after another (the weights and the compartment maps, the error maps, filtered.tck); nothing is
 * then left. */
int dm_commit_write_outputs(const dm_commit_options *o, dm_commit_fitted *f, dm_provenance *prov,
                            dm_commit_summary *sum);

/* --blur-clust-thr's facts in the provenance record. */
void dm_commit_clustering_provenance(dm_provenance *prov, const dm_commit_options *o, long ninput,
                                     long nclusters, double seconds);

#endif
