/* The linear tensor fit (dti_fit.h) over a whole image: every voxel of a 4D image fitted in
 * parallel (dti_maps.c: on images in memory, no files), the results kept as maps and written
 * with the names of FSL's dtifit (dti_files.c: `dimoc dti`'s reader and writer). */
#ifndef DIMOC_DTI_MAPS_H
#define DIMOC_DTI_MAPS_H

#include "dti/dti_fit.h"
#include "io/space.h"
#include "util/json.h"
#include "util/progress.h"

#include <stddef.h>

/* The maps, in the order they are written; dm_dti_map_names[] gives their file names
 * (without ".nii.gz"), dm_dti_map_volumes[] their number of volumes. */
enum {
    DM_DTI_MAP_V1,
    DM_DTI_MAP_V2,
    DM_DTI_MAP_V3, /* eigenvectors, x y z as 3 volumes */
    DM_DTI_MAP_L1,
    DM_DTI_MAP_L2,
    DM_DTI_MAP_L3, /* eigenvalues, descending */
    DM_DTI_MAP_FA,
    DM_DTI_MAP_MD,
    DM_DTI_MAP_MO,
    DM_DTI_MAP_S0,
    DM_DTI_MAP_TENSOR, /* Dxx Dxy Dxz Dyy Dyz Dzz (FSL's order) */
    DM_DTI_MAP_SSE,    /* sum of squared errors of the predicted signal */
    DM_DTI_NMAPS
};
extern const char *const dm_dti_map_names[DM_DTI_NMAPS];
extern const int dm_dti_map_volumes[DM_DTI_NMAPS];

/* The inputs of an image fit, checked: views of the data and the mask (the command's volumes,
 * dti_files.c, or the C API's caller's arrays) and the protocol. */
typedef struct dm_dti_image {
    dm_image_view data;    /* X x Y x Z x M, at least 7 volumes */
    dm_image_view mask;    /* X x Y x Z; data NULL: every voxel */
    dm_dti_protocol proto; /* from the b-values and directions */
} dm_dti_image;

/* The builder: the data and mask views taken as they are (mask's data NULL: none; its grid
 * checked against the data's), b (M b-values) and g (M x 3 directions in FSL's bvecs frame,
 * unit where b > 10: `bvecs` names them in messages) into the protocol.  0, or -1 with
 * dm_last_error(); dm_dti_image_free() in either case. */
int dm_dti_image_build(dm_dti_image *im, const dm_image_view *data, const dm_image_view *mask,
                       const double *b, const double *g, const char *bvecs);
void dm_dti_image_free(dm_dti_image *im);

/* The command's inputs: the volumes read and the image built over them (dti_files.c). */
typedef struct dm_dti_files {
    dm_volume data, mask;
    double *bvals, *bvecs;
    dm_dti_image im;
} dm_dti_files;

/* Reads the 4D data, its gradient table (FSL bvals and bvecs, else an MRtrix b-table `grad`,
 * else a .mif's dw_scheme: io/gradients.h; NULL for those not given) and the mask (path NULL:
 * none) and builds the image; every input is checked before anything is fitted.  0, or -1
 * with dm_last_error() naming the file at fault.  dm_dti_files_free() in either case. */
int dm_dti_files_read(dm_dti_files *f, const char *data, const char *bvals, const char *bvecs,
                      const char *grad, const char *mask);
void dm_dti_files_free(dm_dti_files *f);

typedef struct dm_dti_settings {
    int weighted;   /* 1: WLS after OLS (FSL's --wls, DIPY's WLS); 0: OLS only */
    int iterations; /* -1, or dwi2tensor's -iter N (dm_dti_protocol.iterations) */
    /* > 0: dwi2tensor's floor, relative to the voxel's largest signal (dm_dti_protocol) */
    double min_signal_relative;
    double min_signal;      /* see DM_DTI_MIN_SIGNAL */
    double min_diffusivity; /* NAN: the protocol's own (DIPY's rule); -INFINITY: no floor */
    int threads;            /* 0: all cores */
    int sse;                /* also fill DM_DTI_MAP_SSE */
} dm_dti_settings;

/* The fitted maps of an image, and how its voxels went. */
typedef struct dm_dti_maps {
    size_t nvox;
    double *map[DM_DTI_NMAPS]; /* nvox x dm_dti_map_volumes[m], NIfTI order; 0 where not fitted */
    unsigned char *status;     /* nvox DM_DTI_* outcomes; 0 outside the mask */
    size_t nmask;              /* voxels in the mask */
    size_t fitted;             /* DM_DTI_FITTED or DM_DTI_OLS_ONLY */
    size_t ols_only, skipped_nonfinite, skipped_zero;
    double seconds; /* wall time of the fit */
} dm_dti_maps;

/* Fits every voxel of the mask (on s->threads threads: OpenMP's setting of the calling thread,
 * left so).  watch (NULL: none) sees the stage "dti" and may cancel.  0, or -1 with
 * dm_last_error() (an empty mask, no memory, a stop); dm_dti_maps_free() in either case. */
int dm_dti_maps_fit(const dm_dti_image *im, const dm_dti_settings *s, dm_watch *watch,
                    dm_dti_maps *out);
/* What the command's provenance records of the fit (the voxels' counts, its seconds). */
void dm_dti_provenance(dm_provenance *prov, const dm_dti_maps *m);
/* (dti_files.c) Writes DIR/PREFIX<name>.nii.gz of every map but the tensor and the SSE, those
 * two when asked, as float32 with the data's geometry, and DIR/PREFIXprovenance.json (prov,
 * with the voxel counts added), all or nothing (util/outdir.h): DIR is replaced whole, or with a
 * PREFIX the files are added to DIR, replacing only those of the same names. */
int dm_dti_maps_write(const dm_dti_maps *m, const dm_volume *like, const char *dir,
                      const char *prefix, int save_tensor, int save_sse, dm_provenance *prov);
void dm_dti_maps_free(dm_dti_maps *m);

#endif
