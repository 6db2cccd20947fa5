/* The GPU build of a fitter: one generated model plus the fitting templates, compiled at run
 * time by NVRTC (runtime/fit/fit_gpu.c).  The runtime prepends
 *   #define DM_NLANES <lanes per voxel>      typedef float|double real;
 *   #define DM_COMPILED_METHODS, DM_COMPILED_NOISE (the methods and MCMC's noise of the run)
 * and passes the generated model source (generated/<model>/model.h, the text the host build
 * includes too) as the in-memory header "dm_model.h".  A group of DM_NLANES
 * consecutive lanes of a warp fits one voxel: every lane runs the same algorithm, the loops
 * over measurements are split between them (templates/fit/lanes.h). */
#define DM_FN static __device__ __forceinline__
/* The loops over measurements that hold a copy of the model's signal or gradient stay
 * functions: inlined at each of their call sites they multiplied the code that NVVM and ptxas
 * compile (a cold compile of NODDI-Watson's fitter took 21 s, 14 of them in ptxas). */
#ifndef DM_FN_ONCE /* a tuning run may inline them again: DIMOC_NVRTC_OPTIONS=-DDM_FN_ONCE=... */
#define DM_FN_ONCE static __device__ __noinline__
#endif

#include "maths/mathlib.h"
#include "fit/model_api.h"
#include "dm_model.h"
#include "fit/fit_api.h"
#include "fit/lanes.h"
#include "maths/philox.h"
#include "fit/fit_common.h"
#include "fit/grid.h"
#include "fit/lm.h"
#include "fit/multistart.h"
#include "fit/mcmc.h"
#include "fit/fit_voxel.h"

/* One batch of voxels.  Arrays are packed per voxel: y (M), vox (DM_VOXEL_SLOTS), params (P),
 * samples (DM_NSAMPLES x P), stats (DM_NSTATS); status and voxel_index one per voxel.  rows:
 * with fixed values (DM_FIX_WIDTH > 0), room for each voxel's M extended rows, filled here
 * before the fit (the fixed values depend on the voxel's inputs), and where a stage program's
 * rows are each voxel's own (DM_ROWS_PER_VOXEL) room for them; unused otherwise.
 * shared_rows: every voxel's inputs are the same (a model's defaults, as NODDI's d_par), so
 * are its extended rows: each block makes them once in its dynamic shared memory (M rows, the
 * launch's size) and its voxels read them there.  A grid point or LM step sweeps all M rows,
 * and each voxel's own copy (5 KB for NODDI-Watson at 105 measurements) came from DRAM at
 * every sweep.  A stage program's rows (DM_ROWS_AS_READ, fit_common.h) are the base values
 * there, packed, each row's stage values made as it is read; a grid sweep's points' table
 * follows them (grid.h).
 *
 * Launched in blocks of 128 threads (runtime/fit/fit_gpu.c).  At least 4 resident blocks per
 * SM caps the registers at 128 a thread: NODDI-Watson's fitter took 251 (12.5% occupancy) and
 * fits 1.5x faster capped (docs/performance.md); ball & sticks needs 120 and is unaffected.
 * A grid sweep (grid.h) asks for 3 (DM_MIN_BLOCKS, from the runtime): its block's shared table
 * allows no more than 3-4 blocks an SM, and its chunk's sums spilled to local memory under the
 * cap of 128 (NODDI-Watson: 0.8 KB of spills a thread; 162 registers and none at 3). */
#ifndef DM_MIN_BLOCKS
#define DM_MIN_BLOCKS 4
#endif
extern "C" __global__ void __launch_bounds__(128, DM_MIN_BLOCKS)
    dm_fit_kernel(dm_fit_config cfg, const real *__restrict__ grid_values,
                  const real *__restrict__ meas, const real *__restrict__ y,
                  const real *__restrict__ vox, const unsigned long long *__restrict__ voxel_index,
                  real *params, real *samples, real *stats, int *status, real *rows,
                  int shared_rows, int nvox)
{
    const int voxel = (int)((blockIdx.x * blockDim.x + threadIdx.x) / DM_NLANES);
    const int M = cfg.nmeas;
#if DM_FIX_WIDTH > 0
    extern __shared__ __align__(16) unsigned char block_shared[];
    real *block_rows = (real *)block_shared;
    if (shared_rows) { /* before any thread leaves: the whole block waits for them */
#ifdef DM_ROWS_AS_READ /* the base values' rows packed, then a sweep's grid points' table */
        for (int m = threadIdx.x; m < M; m += blockDim.x)
            dm_row_extend(meas + (size_t)m * DM_MEASURE_WIDTH, vox,
                          block_rows + (size_t)m * DM_BASE_ROW);
#ifdef DM_GRID_SWEEP
        dm_grid_sweep_table(&cfg, grid_values, vox, DM_SWEEP_TABLE(block_rows, M), threadIdx.x,
                            blockDim.x);
#endif
#else
        for (int m = threadIdx.x; m < M; m += blockDim.x)
            dm_row_extend(meas + (size_t)m * DM_MEASURE_WIDTH, vox,
                          block_rows + (size_t)m * DM_ROW_WIDTH);
#endif
        __syncthreads();
    }
#endif
    if (voxel >= nvox) /* whole groups leave together: groups never straddle this test */
        return;
    /* a run being stopped: the voxels not yet begun are not fitted (one reading per group) */
    if (cfg.stop && dm_lane_broadcast((real)*cfg.stop, 0) != 0) {
        if (DM_LANE_LEADER) status[voxel] = DM_STATUS_FAILED;
        return;
    }
    const int ns = (cfg.methods & DM_METHOD_MCMC) ? DM_NSAMPLES(&cfg) : 0;
    dm_voxel_data d;
    d.nmeas = M;
    d.y = y + (size_t)voxel * M;
    d.vox = vox + (size_t)voxel * DM_VOXEL_SLOTS;
    d.stride = 1;
#if DM_FIX_WIDTH > 0
    real *own = rows + (size_t)voxel * M * DM_ROW_WIDTH;
    if (shared_rows) {
        d.meas = block_rows;
#ifdef DM_ROWS_AS_READ /* rows made as they are read (fit_common.h's dm_load_row) */
#ifdef DM_GRID_SWEEP
        d.points = DM_SWEEP_TABLE(block_rows, M);
#endif
#elif DM_ROWS_PER_VOXEL
        /* a stage program's rows of the voxel (fit_voxel.h): those of the warp's voxels
         * interleaved, so that its lanes' reads coalesce (the runtime rounds the rows up to
         * whole warps) */
        const int warp_voxels = 32 / DM_NLANES, g = voxel % warp_voxels;
        own = rows + (size_t)(voxel - g) * M * DM_ROW_WIDTH + g;
        d.stride = warp_voxels;
#endif
    } else {
        dm_voxel_rows(meas, d.vox, M, own);
        d.meas = own;
    }
    d.own_rows = own; /* a stage program's rows of the voxel (fit_voxel.h), else unused */
#else
    (void)rows;
    (void)shared_rows;
    d.meas = meas;
    d.own_rows = 0;
#endif
    DM_STAGE_VOXEL_ROW(vx);
    dm_voxel_stage(&d, params + (size_t)voxel * DM_NPARAMS, vx);
    int st = dm_fit_one_voxel(
        &cfg, grid_values, &d, voxel_index[voxel], params + (size_t)voxel * DM_NPARAMS,
        ns ? samples + (size_t)voxel * ns * DM_NPARAMS : 0, DM_NPARAMS,
        stats + (size_t)voxel * DM_NSTATS, DM_CONTINUES(&cfg) ? status[voxel] : DM_STATUS_FITTED);
    if (DM_LANE_LEADER) status[voxel] = st;
}

/* Predicted signals of a batch: one thread per (voxel, measurement). */
extern "C" __global__ void dm_predict_kernel(const real *__restrict__ params,
                                             const real *__restrict__ meas,
                                             const real *__restrict__ vox, int M, int nvox,
                                             real *out)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)M * nvox) return;
    const int voxel = (int)(i / M), m = (int)(i % M);
    out[i] = dm_signal(params + (size_t)voxel * DM_NPARAMS, meas + (size_t)m * DM_MEASURE_WIDTH,
                       vox + (size_t)voxel * DM_VOXEL_SLOTS);
}
