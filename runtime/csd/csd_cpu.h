/* The CPU run of the per-voxel CSD solver (templates/csd/csd_solve.h), in double or float. */
#ifndef DIMOC_CSD_CPU_H
#define DIMOC_CSD_CPU_H

#include "csd/csd_plan.h"

#include <stddef.h>

/* Solves nvox voxels: Y holds their m measurements (the plan's, measurement-major: measurement
 * j of voxel i at Y[j * nvox + i], as NIfTI stores volumes),
 * X receives n values each, status a DM_CSD_* outcome each, iters (NULL: none) the outer
 * steps.  first: the number of voxel 0 among all the voxels of the image's mask (a --part's
 * first; 0 for all), which the runs of warm starts (DM_CSD_RUN) count from, so that a part
 * solves each voxel from the start the whole run does.  threads 0: all cores.  progress:
 * report it (util/progress.h) under this label, or NULL for none.  Stops early (returning -1)
 * when a stop is requested. */
int dm_csd_cpu_run(const dm_csd_plan *p, const double *Y, size_t nvox, size_t first, int use_double,
                   int threads, int max_iter, const char *progress, double *X,
                   unsigned char *status, int *iters);

/* The hard solver's table Q = C P' (k x k doubles, malloc'd; templates/csd/csd_solve.h's
 * dm_csd_problem.Q) in double, on `threads` threads (0: all cores); NULL with an error when
 * memory ran out. */
double *dm_csd_q_table(const dm_csd_plan *p, int threads);

#endif
