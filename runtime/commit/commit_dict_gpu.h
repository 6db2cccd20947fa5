/* The dictionary's cut (commit_dict.h) on the GPU: the walk of templates/commit/commit_walk.h,
 * a thread per streamline (gpu_commit.cu's three passes: count, cut and merge, place).  The
 * result is dm_commit_dict_cut's, bit for bit. */
#ifndef DIMOC_COMMIT_DICT_GPU_H
#define DIMOC_COMMIT_DICT_GPU_H

#include "commit/commit_dict.h"
#include "commit/commit_gpu.h"

/* dm_commit_dict_cut of streamlines [first, end) on g's GPU, without blur (the blur's copies
 * are cut on the host).  Streamlines are taken in blocks that fit the GPU's memory.  0, or -1
 * with the error set. */
int dm_commit_dict_cut_gpu(dm_commit_gpu *g, const dm_tck *t, long first, long end,
                           const dm_commit_grid *grid, const dm_commit_dirs *dirs,
                           const dm_commit_dict_options *o, dm_commit_dict *d);

#endif
