/* The CPU run of the per-voxel CSD solver (templates/csd/csd_solve.h), in double or float. */
#ifndef DIMOC_CSD_CPU_H
#define DIMOC_CSD_CPU_H

#include "csd/csd_plan.h"

#include <stddef.h>

/* Solves nvox voxels: Y holds their m measurements (the plan's, measurement-major: measurement
 * j of voxel i at Y[j * nvox + i], as NIfTI stores volumes),
 * X receives n values each, status a DM_CSD_* outcome each, iters (NULL: none) the outer
 * steps.  threads 0: all cores.  progress: report it (util/progress.h) under this label, or
 * NULL for none.  Stops early (returning -1) when a stop is requested. */
int dm_csd_cpu_run(const dm_csd_plan *p, const double *Y, size_t nvox, int use_double, int threads,
                   int max_iter, const char *progress, double *X, unsigned char *status,
                   int *iters);

#endif
