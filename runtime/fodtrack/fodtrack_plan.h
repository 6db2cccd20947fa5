/* What `dimoc track --fod` will do, fixed before any streamline: tckgen's defaults resolved
 * against the FOD image (step, angle, cutoff and lengths in units of its voxel size), the point
 * budgets, the envelope's calibration, the seed voxels and the regions of interest, gathered in
 * the kernel's context (templates/fodtrack/ft_types.h). */
#ifndef DIMOC_FODTRACK_PLAN_H
#define DIMOC_FODTRACK_PLAN_H

#include "fodtrack/calibrate.h"
#include "fodtrack/fod_image.h"
#include "cluster/part.h"

/* The user's choices; NaN / -1 / NULL where tckgen's default applies. */
typedef struct dm_fodtrack_options {
    const char *fod, *out, *seed;
    long seeds_per_voxel;  /* --seed-random-per-voxel (0: random positions in the mask) */
    const char *algorithm; /* ifod2 | ifod1 | sd_stream */
    long select, seeds;    /* -1: default */
    double step, angle, cutoff, seed_cutoff, min_length, max_length, power; /* NaN: default */
    long trials, samples, max_attempts;                                     /* -1: default */
    int unidirectional, stop;
    const char *include, *exclude, *mask; /* comma-joined image lists, or NULL */
    const char *act, *seed_gmwmi;         /* 5TT image, interface seed image; or NULL */
    int backtrack, crop_at_gmwmi;
    const char *tdi, *connectome; /* output name in --out, parcellation; or NULL */
    double tdi_voxel;             /* 0: the FOD's grid */
    int tdi_exact;                /* 1: the TDI by the exact walk; 0: tckmap's sampled mapping */
    unsigned long long rseed;
    int threads, use_gpu, use_double;
    const char *gpus;
    long gpu_memory_mb;
    const char *history; /* the command line, for the .tck header (with --part: as the whole
                            run writes it, dm_part_history) */
    dm_part part;        /* --part K/N: the K-th share of the seed ids (needs a fixed seed count) */
} dm_fodtrack_options;

/* What the tracker reads, as images in memory (io/space.h): the command's files as read, or the
 * C API's arrays.  Each image has its own grid; names are for messages and the .tck header. */
typedef struct dm_ft_inputs {
    dm_image_view fod;  /* X x Y x Z x K: SH coefficients in MRtrix's basis */
    dm_image_view seed; /* 3D: a mask (--seed), or with seed_gmwmi the interface's weights */
    int seed_gmwmi;     /* the seed is --seed-gmwmi's image (needs act) */
    dm_image_view act;  /* --act: X x Y x Z x 5; data NULL: none */
    const dm_image_view *include, *exclude, *mask; /* the regions, 3D */
    int ninclude, nexclude, nmask;
} dm_ft_inputs;

typedef struct dm_ft_plan {
    dm_ft_fod fod;
    dm_ft_calibration calib;
    dm_ft_ctx ctx; /* host pointers into the arrays below */
    int *seed_vox;
    float *seed_weight; /* --seed-gmwmi: the seed image's value at each seed voxel */
    float *tissue;      /* --act: 5 per voxel */
    unsigned char *roi_data;
    long roi_bytes;
    double vox;                   /* tckgen's voxel size: the cube root of the voxel volume */
    unsigned long long max_seeds; /* seeds to try at most (0: no limit) */
    unsigned long long select;    /* streamlines to keep (0: no limit) */
    unsigned long long id_first;  /* --part: the seed ids [id_first, id_end) this run tracks; */
    unsigned long long id_end;    /* the whole run: [0, max_seeds) (ULLONG_MAX: no limit) */
    int buf_points;               /* the per-streamline point buffer a tracer needs */
    const char *method;           /* "iFOD2", "iFOD1", "SD_STREAM" */
    char *roi_lines;              /* "roi: include PATH" lines for the .tck header */
    const char *fod_name, *seed_name, *act_name; /* the inputs' names (act: NULL without) */
} dm_ft_plan;

/* Takes the FOD, seed and region images (read, not kept: the plan holds what it needs) and
 * resolves every option of o; -1 with one line naming the option or the image otherwise. */
int dm_ft_plan_build(const dm_fodtrack_options *o, const dm_ft_inputs *in, dm_ft_plan *p);
void dm_ft_plan_free(dm_ft_plan *p);
/* The .tck header lines tckgen writes (step_size, max_angle, threshold, ...), for dm_tck_open. */
char *dm_ft_plan_header(const dm_ft_plan *p, const dm_fodtrack_options *o);

#endif
