/* The linear diffusion-tensor fit: log(S) = log(S0) - b gᵀDg, solved by ordinary least squares
 * and then by weighted least squares with the OLS-predicted signal squared as weights (as FSL's
 * dtifit --wls and DIPY's WLS fit), or by MRtrix dwi2tensor's iterated WLS (iterations >= 0).
 * One protocol (b-values, directions) serves every voxel. */
#ifndef DIMOC_DTI_FIT_H
#define DIMOC_DTI_FIT_H

/* Non-positive signals are raised to this before the logarithm (DIPY's default min_signal). */
#define DM_DTI_MIN_SIGNAL 1e-4

typedef struct dm_dti_protocol {
    int M;             /* measurements */
    double *design;    /* M x 7, rows [1, -b gx², -b gy², -b gz², -2b gxgy, -2b gxgz, -2b gygz],
                        * each column divided by scale[k] (equilibrated for the normal equations) */
    double *columns;   /* the same by columns (7 x M): the predicted log signal, a measurement
                        * a vector lane */
    double scale[7];   /* column norms of the unscaled design */
    double ols[7 * 7]; /* Cholesky factor (lower) of the scaled XᵀX */
    double *outer;     /* M x 28: each scaled row's products x_a x_c (c <= a), the terms of the
                        * weighted XᵀWX summed as one contiguous (vectorised) run per measurement */
    int weighted;      /* 1: WLS after OLS (default); 0: OLS only */
    /* -1 (default): the fit `weighted` says.  N >= 0: dwi2tensor -iter N: a first fit weighted
     * by the measured signal squared (OLS when !weighted, dwi2tensor -ols), then N fits each
     * weighted by the previous one's predicted signal squared. */
    int iterations;
    double min_signal; /* see DM_DTI_MIN_SIGNAL */
    /* > 0: the floor is this times the voxel's largest signal instead (dwi2tensor: 1e-6) */
    double min_signal_relative;
    double min_diffusivity; /* eigenvalues below it are raised to it (-inf: never) */
} dm_dti_protocol;

/* Builds the design matrix from b (s/mm²) and unit directions g (M x 3).  min_diffusivity is
 * set as DIPY sets it, 1e-6 / (largest |entry| of the diffusion columns), ~1e-6 / max b.
 * -1 with dm_last_error() when the protocol cannot determine a tensor (fewer than 7
 * measurements, or a rank-deficient design: too few non-collinear directions, no b = 0). */
int dm_dti_protocol_init(dm_dti_protocol *p, int M, const double *b, const double *g);
void dm_dti_protocol_free(dm_dti_protocol *p);

/* Outcome of one voxel. */
enum {
    DM_DTI_FITTED = 1,
    DM_DTI_SKIPPED_NONFINITE = 3, /* a NaN or Inf signal (the maps stay 0) */
    DM_DTI_SKIPPED_ZERO = 4,      /* an all-zero signal (the maps stay 0) */
    DM_DTI_OLS_ONLY = 6 /* a weighted system was singular: the OLS estimate (iterations >= 0:
                         * the previous step's) is kept */
};

typedef struct dm_dti_result {
    double S0;
    double tensor[6];  /* Dxx, Dxy, Dxz, Dyy, Dyz, Dzz as fitted (units of 1/b), FSL's order */
    double lambda[3];  /* eigenvalues, descending, raised to min_diffusivity */
    double vec[3][3];  /* vec[k]: unit eigenvector of lambda[k] (largest component positive) */
    double FA, MD, MO; /* MO: the mode of Ennis & Kindlmann 2006, in [-1, 1] */
} dm_dti_result;

/* Fits one voxel's M signals.  work: room for 2 M doubles.  Returns a DM_DTI_* outcome; r is
 * all zero for the skipped ones. */
int dm_dti_fit_voxel(const dm_dti_protocol *p, const double *signal, double *work,
                     dm_dti_result *r);

/* FA, MD and mode of three eigenvalues (0 where undefined: all zero / isotropic). */
void dm_dti_scalars(const double lambda[3], double *FA, double *MD, double *MO);

/* The tensor's predicted signal S0 exp(-b gᵀDg) of measurement j. */
double dm_dti_predict(const dm_dti_protocol *p, const dm_dti_result *r, int j);

#endif
