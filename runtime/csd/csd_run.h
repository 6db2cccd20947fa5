/* The deconvolution of a DWI in memory, the engine of `dimoc csd` and of the C API's dimoc_csd:
 * responses estimated or given, every voxel of the mask deconvolved on the CPU or a GPU, the
 * tissues normalised.  It reads and writes no file: runtime/csd_files/ is the commands' file
 * side (and `dimoc response`'s, whose engine is response_estimate.h). */
#ifndef DIMOC_CSD_RUN_H
#define DIMOC_CSD_RUN_H

#include "cluster/part.h"
#include "csd/csd_gpu.h"
#include "csd/csd_plan.h"
#include "csd/response_estimate.h"
#include "util/json.h"
#include "util/progress.h"

typedef struct dm_csd_options {
    const char *data, *bvals, *bvecs, *mask, *out;
    const char *grad;       /* MRtrix b-table instead of bvals/bvecs (io/gradients.h), or NULL */
    int lmax;               /* of the WM FOD (even); -1: 8, or the WM response's if lower */
    const char *response;   /* comma-separated response files (WM[,GM[,CSF]]); NULL: estimate */
    const char *algorithm;  /* response estimation when none is given: NULL = by the shells */
    const char *directions; /* constraint directions, az el pairs; NULL: MRtrix's default 300 */
    int msmt;               /* force multi-tissue estimation on single-shell data */
    int normalise;          /* mtnormalise-like intensity normalisation of the tissues */
    int use_gpu;            /* resolved --device */
    const char *gpus;
    int use_double;
    int threads;         /* 0: all cores */
    int max_iter;        /* 0: the default */
    const char *history; /* the command line, for the response files' comments */
    dm_part part;        /* --part K/N: deconvolve only the K-th share of the mask's voxels */
} dm_csd_options;

typedef struct dm_response_options {
    const char *data, *bvals, *bvecs, *mask, *out;
    const char *grad;      /* MRtrix b-table instead of bvals/bvecs (io/gradients.h), or NULL */
    const char *algorithm; /* tournier, dhollander or fa */
    int lmax;              /* of the WM response */
    int threads;
    int use_gpu; /* resolved --device: the passes' deconvolutions on the GPU */
    const char *gpus;
    const char *history;
} dm_response_options;

/* Response estimation's deconvolutions on the GPU that `warm` made ready (csd_gpu.h), in
 * double, as the solver of dm_response_estimate; times adds up their compile, transfers and
 * solve. */
typedef struct dm_csd_gpu_solver {
    dm_csd_gpu_warm *warm;
    dm_csd_gpu_times times;
} dm_csd_gpu_solver;
dm_csd_solver dm_csd_gpu_solver_of(dm_csd_gpu_solver *g);

/* What a deconvolution made.  X, status and iters are the solved voxels' (d->vox after the
 * engine took --part's share out of it: d->nvox of them, ascending image indices). */
typedef struct dm_csd_result {
    int ntissue;
    const char *tissue[DM_CSD_MAX_TISSUES]; /* "wm", then "gm" and "csf", or "csf" */
    dm_response resp[DM_CSD_MAX_TISSUES];   /* the responses used */
    /* estimated: the voxels (image-sized) each response came from; NULL where given */
    const unsigned char *voxels[DM_CSD_MAX_TISSUES];
    dm_response_set est;
    dm_csd_plan plan; /* the unknowns of each tissue: tissue_lmax, tissue_off, n */
    double *X;        /* nvox x plan.n */
    unsigned char *status;
    int *iters;
    size_t counts[5];          /* voxels of each DM_CSD_* status */
    size_t own_first, own_end; /* --part: the image indices whose outputs the part owns */
} dm_csd_result;

/* Deconvolves the DWI d (built: dwi.h) with the responses given (nresp of them, matched to its
 * shells; rname names each in messages) or, with none, estimated as o->algorithm (or the
 * shells) say; dirs: the constraint directions.  o's engine settings count (lmax, msmt,
 * normalise, use_gpu, use_double, threads, max_iter, part), not its paths.  gpu: made ready by
 * the caller (dm_csd_gpu_warm_start) when o->use_gpu.  load_seconds: the caller's reading, to
 * which the gather of the signals is added in prov.  prov gets the counts and each stage's
 * seconds.  watch (NULL: none) sees the stages "response", "csd" (the fraction of the voxels,
 * reported between blocks of voxels on the CPU) and "normalise", and may cancel between them.
 * 0, or -1 with dm_last_error(); dm_csd_result_free in either case. */
int dm_csd_run(const dm_csd_options *o, dm_dwi *d, int nresp, const dm_response *resp,
               const char *const *rname, const dm_csd_dirs *dirs, dm_csd_gpu_warm *gpu,
               double load_seconds, dm_watch *watch, dm_provenance *prov, dm_csd_result *out);
void dm_csd_result_free(dm_csd_result *r);
/* The line `dimoc csd` prints when voxels were not solved ("N of M voxels not solved ..."),
 * written into buf; 0 when every voxel was solved. */
int dm_csd_unsolved_note(const dm_csd_result *r, size_t nvox, char *buf, size_t size);
/* What `dimoc response`'s provenance records of an estimate (the voxels of each tissue, the
 * iterations) and its seconds. */
void dm_response_provenance(dm_provenance *prov, const dm_response_set *est, double seconds);
/* Values of the solved voxels onto the image grid: img (d's nvox x nt, volume-major, zero
 * elsewhere) from vals[i * stride + first + c], c < nt, of solved voxel i. */
void dm_csd_scatter(const dm_dwi *d, const double *vals, int stride, int first, int nt,
                    double *img);

#endif
