/* FOD tractography kernel: the types and constants shared by the host code and both builds of
 * the kernel (host: runtime/fodtrack/fodtrack_cpu.c; GPU: gpu_fodtrack.cu).  Nothing here
 * depends on the precision; the kernel's functions (det_math.h, fod_field.h, fod_track.h) do,
 * and are included once per precision with their names made distinct by
 *     #define DM_FT(name) dm_ft_##name##_d      (or _f, or plain on the GPU)
 * Includes nothing and needs nothing. */
#ifndef DIMOC_FODTRACK_FT_TYPES_H
#define DIMOC_FODTRACK_FT_TYPES_H

#define DM_FOD_LMAX_MAX 12
#define DM_FOD_NCOEF_MAX 91 /* lmax 12 */

/* Recurrence constants for l, m <= DM_FOD_LMAX_MAX, filled by the host (dm_fod_sh_table in
 * runtime/fodtrack/fod_image.c): start[m] = Q_mm (with (-1)^m, sqrt(2) for m > 0 folded
 * in), a[l][m] and b[l][m] such that Q_lm = a (z Q_{l-1,m} - b Q_{l-2,m}). */
typedef struct dm_fod_sh_table {
    double start[DM_FOD_LMAX_MAX + 1];
    double a[DM_FOD_LMAX_MAX + 1][DM_FOD_LMAX_MAX + 1];
    double b[DM_FOD_LMAX_MAX + 1][DM_FOD_LMAX_MAX + 1];
} dm_fod_sh_table;

typedef struct dm_fod_field {
    int nx, ny, nz, ncoef, lmax;
    const int *row;    /* nx * ny * nz, x fastest: row of coef, -1 for a zero FOD */
    const float *coef; /* rows of ncoef coefficients */
    double w2v[3][4];  /* world mm -> voxel coordinates (centres at integers) */
    const dm_fod_sh_table *sh;
} dm_fod_field;

/* Algorithms. */
enum { DM_FT_IFOD2 = 0, DM_FT_IFOD1 = 1, DM_FT_SDSTREAM = 2 };

/* Why a half-streamline ended (tckgen's termination reasons). */
enum {
    DM_FT_END_CONTINUE = 0,
    DM_FT_END_EXIT_IMAGE, /* the FOD is not valid there (outside, or zero at the nearest voxel) */
    DM_FT_END_EXIT_MASK,  /* left the --mask regions */
    DM_FT_END_CALIBRATOR, /* iFOD: no calibration direction above zero */
    DM_FT_END_MODEL,      /* no direction accepted / peak below the cutoff */
    DM_FT_END_HIGH_CURVATURE,
    DM_FT_END_LENGTH_EXCEED,
    DM_FT_END_ENTER_EXCLUDE,
    DM_FT_END_TRAVERSE_ALL_INCLUDE,
    DM_FT_END_ENTER_CGM,   /* ACT: reached cortical grey matter */
    DM_FT_END_ENTER_CSF,   /* ACT: entered CSF (rejected) */
    DM_FT_END_EXIT_SGM,    /* ACT: left sub-cortical grey matter */
    DM_FT_END_TERM_IN_SGM, /* ACT: stopped within sub-cortical grey matter */
    DM_FT_NEND,
    DM_FT_PENDING = 100 /* not an end: an iFOD2 or iFOD1 step under way */
};

/* A streamline's verdict. */
enum {
    DM_FT_ACCEPTED = 0,
    DM_FT_REJECT_SEED,           /* no valid seed or initial direction (not in total_count) */
    DM_FT_REJECT_NO_PROPAGATION, /* only the seed */
    DM_FT_REJECT_TOO_SHORT,
    DM_FT_REJECT_EXCLUDE,
    DM_FT_REJECT_MISSED_INCLUDE,
    DM_FT_REJECT_ACT,      /* ACT: a poor termination (CSF, too long, stopped in white matter) */
    DM_FT_REJECT_ACT_SGM,  /* ACT: seeded in sub-cortical grey matter, never reached white matter */
    DM_FT_REJECT_TOO_LONG, /* ACT: longer than the maximum length */
    DM_FT_NVERDICT
};

/* fod_power in its exact forms. */
enum { DM_FT_POWER_ONE, DM_FT_POWER_HALF, DM_FT_POWER_QUARTER, DM_FT_POWER_OTHER };

/* Regions of interest: images on their own grids, a voxel in when its value rounds to non-zero. */
enum { DM_FT_ROI_INCLUDE = 0, DM_FT_ROI_EXCLUDE = 1, DM_FT_ROI_MASK = 2 };
#define DM_FT_MAX_ROI 16
#define DM_FT_MAX_SUB 16 /* iFOD2 points per step at most (--samples - 1) */

typedef struct dm_ft_roi {
    int nx, ny, nz, kind, include_bit;
    long offset;      /* of its voxels in dm_ft_ctx.roi_data (x fastest) */
    double w2v[3][4]; /* world mm -> its voxel coordinates */
} dm_ft_roi;

/* ACT's five-tissue image: cortical GM, sub-cortical GM, WM, CSF, pathology per voxel. */
enum { DM_FT_CGM = 0, DM_FT_SGM, DM_FT_WM, DM_FT_CSF, DM_FT_PATH };
typedef struct dm_ft_act {
    int on, backtrack, crop_at_gmwmi;
    int nx, ny, nz;
    double w2v[3][4];
    double min_voxel;    /* its smallest voxel size (mm) */
    const float *tissue; /* 5 floats per voxel, voxels x fastest */
} dm_ft_act;

/* Everything the kernel reads: the FOD, the options in tckgen's terms, the seeds, the regions. */
typedef struct dm_ft_ctx {
    dm_fod_field fod;
    int algorithm;
    double step;          /* mm: iFOD2's arc length, else the straight step */
    double cos_max_angle; /* per step */
    double threshold, init_threshold, power;
    int power_kind;
    int nsub; /* iFOD2: points per arc (--samples - 1) */
    int max_trials, max_seed_attempts, unidirectional, stop_on_include;
    int min_pts_pre, max_pts_pre; /* points budget while tracking (both halves) */
    int downsample, min_pts_post, max_pts_post;
    double min_dist, max_dist;
    const double *calib; /* calibration directions around +z, 3 each */
    int ncalib;
    double calib_ratio;
    /* seeds: positions uniform in the seed voxels (seed image grid), or seeds_per_voxel each */
    const int *seed_vox; /* voxel indices (x fastest) of the seed image */
    long nseed_vox;
    long seeds_per_voxel; /* 0: random voxels */
    int seed_gmwmi;       /* seeds drawn in proportion to the seed image, moved onto the
                             grey-white interface of the ACT image (seed_weight: the values) */
    const float *seed_weight;
    float seed_weight_max;
    int seed_nx, seed_ny;
    double seed_v2w[3][4];
    /* regions */
    int nroi, has_mask, has_exclude;
    unsigned include_all; /* the bits of all include regions (0: none) */
    dm_ft_roi roi[DM_FT_MAX_ROI];
    const unsigned char *roi_data;
    dm_ft_act act;
    unsigned long long rseed;
} dm_ft_ctx;

#endif
