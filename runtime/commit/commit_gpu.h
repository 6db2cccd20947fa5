/* COMMIT on one GPU, the host's side of templates/commit/gpu_commit.cu: the dictionary's cut,
 * and the solver's backend (the operator, the measured rows and FISTA's vectors on the device;
 * each step of commit_solve.h a kernel, its sums reduced per block and added on the host in
 * block order). */
#ifndef DIMOC_COMMIT_GPU_H
#define DIMOC_COMMIT_GPU_H

#include "commit/commit_operator.h"
#include "commit/commit_solve.h"
#include "gpu/cuda_api.h"

typedef struct dm_commit_gpu dm_commit_gpu;

/* The part that needs no operator, for a thread of its own while the host builds it: the
 * driver opened, the GPU chosen, the program for ns measurements compiled (or read from the
 * cache) and loaded, the pinned buffers of the upload made (`threads` host threads fill
 * them).  NULL with the error set (in the calling thread). */
dm_commit_gpu *dm_commit_gpu_prepare(int ns, const char *gpus, int threads);
/* `dimoc warm`: the solver's program for data of ns volumes compiled into the cache for compute
 * capability arch. */
int dm_commit_gpu_precompile(const dm_cuda *cu, int arch, int ns, int quiet);
/* The dictionary's cut (dm_commit_dict_cut) of streamlines [first, end) on g's GPU, without
 * blur (a blur's copies are cut on the host): the walk of templates/commit/commit_walk.h, a
 * thread per streamline in three passes (count; cut, sort and merge; place), in blocks of
 * streamlines that fit the GPU's memory.  The result is dm_commit_dict_cut's, bit for bit.  0,
 * or -1 with the error set. */
int dm_commit_dict_cut_gpu(dm_commit_gpu *g, const dm_tck *t, long first, long end,
                           const dm_commit_grid *grid, const dm_commit_dirs *dirs,
                           const dm_commit_dict_options *o, dm_commit_dict *d);
/* The operator and y uploaded, the vectors made, *B set (from any thread).  0, or -1 with the
 * error set; g is then still to be closed. */
int dm_commit_gpu_load(dm_commit_gpu *g, const dm_commit_operator *A, const double *y,
                       dm_commit_backend *B);
/* For a refit (COMMIT's fit(debias=True)): new measured rows (A->nrows, host to device), and
 * the IC columns left out of A^T (commit_ops.h: ic_fixed; nic x nf flags).  0, or -1 with the
 * error set. */
int dm_commit_gpu_set_y(dm_commit_gpu *g, const double *y);
int dm_commit_gpu_fix_ic(dm_commit_gpu *g, const unsigned char *fixed);
/* yhat = A x of the x the solver left (device to host). */
int dm_commit_gpu_ax(dm_commit_gpu *g, double *yhat);
/* "NVIDIA H100 80GB HBM3 x1 (sm_90)"; seconds spent compiling and uploading. */
const char *dm_commit_gpu_device(const dm_commit_gpu *g);
double dm_commit_gpu_setup_seconds(const dm_commit_gpu *g);
void dm_commit_gpu_close(dm_commit_gpu *g);

#endif
