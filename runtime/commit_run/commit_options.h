/* What `dimoc commit` is asked (its options, as the command parsed them) and what it reports:
 * read by every stage of the run (commit_run.c, commit_inputs.c, commit_outputs.c). */
#ifndef DIMOC_COMMIT_OPTIONS_H
#define DIMOC_COMMIT_OPTIONS_H

#include "commit/commit_kernels.h"
#include "cluster/part.h"

typedef struct dm_commit_options {
    const char *tractogram, *data, *mask, *bvals, *bvecs, *peaks, *out;
    const char *scheme;     /* the pulses' timing (cylinder model: model.nradii > 0) */
    const char *model_name; /* as given, for messages */
    dm_commit_model model;
    double shift[3]; /* --fiber-shift, voxel units */
    double min_seg_len, min_len, max_len, vf_thr;
    double blur_core, blur_gauss, blur_spacing, blur_gauss_min; /* --blur-*: trk2dictionary's */
    double blur_clust_thr; /* --blur-clust-thr: cluster first, fit the representatives (0: off) */
    int ndirs;
    double tol_fun, tol_x;
    double lambda_frac; /* --lambda: the lasso on the streamlines' weights (0: plain NNLS) */
    double group_frac;  /* --lambda-group: COMMIT2's group lasso over --groups */
    double lambda_ec_frac, lambda_iso_frac; /* --lambda-ec, --lambda-iso: the EC and ISO lassos */
    const char *groups;                     /* one group label per streamline */
    /* COMMIT's set_regularisation(params=({'coeff_weights'}, .., {'coeff_weights'})): */
    const char *lambda_weights;     /* one weight per streamline for the --lambda lasso */
    const char *lambda_iso_weights; /* an image: a weight per voxel for the --lambda-iso lasso */
    unsigned free_blocks; /* --allow-negative: blocks without x >= 0 (1 IC, 2 EC, 4 ISO) */
    int debias;           /* --debias: COMMIT's fit(debias=True), a refit on the support */
    int max_iter;
    int threads;
    const char *device; /* --device: cpu, gpu or auto (NULL: auto) */
    const char *gpus;   /* --gpus: which one (NULL: the first) */
    /* the dictionary apart (docs/commit.md, "The dictionary in parts") */
    int stage_dictionary;   /* --stage dictionary: only the dictionary, saved into --out */
    dm_part part;           /* with it, --part K/N: the K-th share of the streamlines */
    const char *dictionary; /* --dictionary DIR: the dictionary saved so, instead of building it */
    /* COMMIT's blur_apply_to, filename_iso_mask, fit(confidence_map_filename, _rescale) */
    const char *blur_apply_to;  /* one 0/1 per streamline: blurred or not (NULL: all) */
    const char *iso_mask;       /* balls only where this image is nonzero */
    const char *confidence_map; /* 3D or 4D weights of the data term */
    int confidence_rescale;     /* rescale them to [0, 1] over the voxels of the fit */
} dm_commit_options;

typedef struct dm_commit_summary {
    long streamlines, kept, nonzero, voxels, segments, ec_columns, iterations;
    long first, end; /* --stage dictionary: the streamlines of the share */
    double objective, seconds;
    const char *stopped;
} dm_commit_summary;

#endif
