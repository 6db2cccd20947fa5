/* The host build of a fitter: one generated model plus the fitting templates, compiled by the
 * host C compiler into a shared object that the runtime loads with dlopen (fit_api.h lists the
 * symbols).  Compile with
 *   cc -O2 -fPIC -shared -DDM_REAL=double|float -DDM_MODEL_FILE='"path/model.h"' \
 *      -Itemplates templates/fit/cpu_fitter.c templates/fit/cpu_derived.c -lm
 * (and -fopenmp-simd -DDM_LIBMVEC ... -lmvec for cpu_derived.c's vector sin and cos).
 * The entry points take and return doubles; the fitting runs in `real` (DM_REAL), so inputs are
 * converted at entry and results at exit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit/host_build.h"
#include "maths/mathlib.h"
#include "fit/model_api.h"
#include DM_MODEL_FILE
#include "fit/fit_api.h"
#include "fit/lanes.h"
#include "maths/philox.h"
#include "fit/fit_common.h"
#include "fit/grid.h"
#include "fit/lm.h"
#include "fit/multistart.h"
#include "fit/mcmc.h"
#include "fit/fit_voxel.h"
#include "fit/dictionary.h"

DM_EXPORT int dm_fitter_abi(void)
{
    return DM_FITTER_ABI;
}
DM_EXPORT int dm_fitter_real_size(void)
{
    return (int)sizeof(real);
}

/* A real copy of n doubles (zeros where src is NULL; n may be 0: a one-slot buffer, so the
 * result is never NULL).  With real == double the input itself is used.  Returns NULL when
 * out of memory. */
static real *to_real(const double *src, size_t n, real **owned)
{
    *owned = NULL;
    if (sizeof(real) == sizeof(double) && src) return (real *)src;
    real *dst = calloc(n > 0 ? n : 1, sizeof(real));
    if (!dst) return NULL;
    for (size_t i = 0; src && i < n; i++) dst[i] = (real)src[i];
    *owned = dst;
    return dst;
}

/* Number of grid values the config refers to. */
static size_t grid_value_count(const dm_fit_config *cfg)
{
    size_t n = 0;
    if (!(cfg->methods & DM_METHOD_GRID)) return 0;
    for (int k = 0; k < DM_NPARAMS; k++)
        if (cfg->grid_count[k] > 0 && (size_t)(cfg->grid_offset[k] + cfg->grid_count[k]) > n)
            n = (size_t)(cfg->grid_offset[k] + cfg->grid_count[k]);
    return n;
}

/* A thread's workspace (fit_api.h): the measurement rows in real, y's copy, and with fixed
 * values the extended rows of the voxel inputs `vox`.  The fixed values (NODDI's stick
 * integrals J_l(b d_par) for every measurement) took about a quarter of a NODDI-Watson LM fit
 * on the CPU when made for every voxel; with the model's default inputs they are the same in
 * every voxel. */
typedef struct dm_fit_work {
    const double *meas_src; /* the rows meas_r was made from, and their count */
    int M;
    real *meas_r, *own_meas, *y_r, *rows;
    real *own_rows; /* a stage program's rows of the voxel (DM_ROWS_PER_VOXEL), or NULL */
    int rows_valid;
    real vox[DM_VOXEL_SLOTS];
} dm_fit_work;

DM_EXPORT void *dm_fit_work_new(void)
{
    return calloc(1, sizeof(dm_fit_work));
}

DM_EXPORT void dm_fit_work_free(void *work)
{
    dm_fit_work *w = work;
    if (!w) return;
    free(w->own_meas);
    free(w->y_r);
    free(w->rows);
    free(w->own_rows);
    free(w);
}

/* The workspace made ready for M rows at meas and the voxel inputs vox (meas's rows converted
 * again only for another array, the extended rows made again only for other inputs).  0, or
 * -1 when out of memory. */
static int work_ready(dm_fit_work *w, const double *meas, int M, const real *vox)
{
    if (w->meas_src != meas || w->M != M) {
        free(w->own_meas);
        free(w->y_r);
        free(w->rows);
        free(w->own_rows);
        memset(w, 0, sizeof *w);
        w->meas_r = to_real(meas, (size_t)M * DM_MEASURE_WIDTH, &w->own_meas);
        w->y_r = malloc((M > 0 ? (size_t)M : 1) * sizeof(real));
#if DM_FIX_WIDTH > 0
        w->rows = malloc((M > 0 ? (size_t)M : 1) * DM_ROW_WIDTH * sizeof(real));
        if (!w->rows) return -1;
#endif
#if DM_ROWS_PER_VOXEL
        w->own_rows = malloc((M > 0 ? (size_t)M : 1) * DM_ROW_WIDTH * sizeof(real));
        if (!w->own_rows) return -1;
#endif
        if (!w->meas_r || !w->y_r) return -1;
        w->meas_src = meas;
        w->M = M;
    }
#if DM_FIX_WIDTH > 0
    if (!w->rows_valid || memcmp(w->vox, vox, sizeof(real) * DM_VOXEL_SLOTS) != 0) {
        dm_voxel_rows(w->meas_r, vox, M, w->rows);
        memcpy(w->vox, vox, sizeof(real) * DM_VOXEL_SLOTS);
        w->rows_valid = 1;
    }
#else
    (void)vox;
#endif
    return 0;
}

DM_EXPORT int dm_fit_voxel(const dm_fit_config *cfg, const double *grid_values, const double *meas,
                           const double *y, const double *vox, unsigned long long voxel_index,
                           double *params, double *samples, double *stats, void *work)
{
    const int M = cfg->nmeas;
    const int mcmc = (cfg->methods & DM_METHOD_MCMC) != 0;
    const size_t nsamples = mcmc ? (size_t)DM_NSAMPLES(cfg) : 0;
    dm_fit_work *w = work ? work : dm_fit_work_new();
    real *own_grid, *own_samples = NULL;
    const real *grid_r = to_real(grid_values, grid_value_count(cfg), &own_grid);
    real vox_r[DM_VOXEL_SLOTS] = {0};
    for (int j = 0; j < DM_VOXEL_WIDTH; j++) vox_r[j] = (real)vox[j];
    real *samples_r = NULL;
    if (nsamples > 0) {
        if (sizeof(real) == sizeof(double) && samples)
            samples_r = (real *)samples;
        else
            samples_r = own_samples = malloc(nsamples * DM_NPARAMS * sizeof(real));
    }
    int status = DM_STATUS_FAILED;
    if (w && work_ready(w, meas, M, vox_r) == 0 && grid_r && (nsamples == 0 || samples_r)) {
        const real *y_r = (const real *)y;
        if (sizeof(real) != sizeof(double)) {
            for (int m = 0; m < M; m++) w->y_r[m] = (real)y[m];
            y_r = w->y_r;
        }
        real p[DM_NPARAMS], st[DM_NSTATS];
        for (int k = 0; k < DM_NPARAMS; k++) p[k] = (real)params[k];
        dm_voxel_data d = {M, DM_FIX_WIDTH > 0 ? w->rows : w->meas_r, y_r, vox_r, w->own_rows, 1};
        DM_STAGE_VOXEL_ROW(vx);
        dm_voxel_stage(&d, p, vx);
        status = dm_fit_one_voxel(cfg, grid_r, &d, voxel_index, p, samples_r, DM_NPARAMS, st,
                                  DM_STATUS_FITTED);
        for (int k = 0; k < DM_NPARAMS; k++) params[k] = (double)p[k];
        for (int i = 0; i < DM_NSTATS; i++) stats[i] = (double)st[i];
        if (own_samples && samples)
            for (size_t i = 0; i < nsamples * DM_NPARAMS; i++) samples[i] = (double)own_samples[i];
    }
    if (!work) dm_fit_work_free(w);
    free(own_grid);
    free(own_samples);
    return status;
}

DM_EXPORT void dm_predict(const double *params, const double *meas, int M, const double *vox,
                          double *out)
{
    real p[DM_NPARAMS], vin[DM_VOXEL_SLOTS], row[DM_ROW_SLOTS], pre[DM_PRE_WIDTH];
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = (real)params[k];
    for (int j = 0; j < DM_VOXEL_WIDTH; j++) vin[j] = (real)vox[j];
#if DM_STAGE_WIDTH > 0
    real v[DM_VOXEL_EXT_SLOTS];
    dm_voxel_extend(p, vin, v);
#else
    real *v = vin;
#endif
    dm_signal_prepare(p, v, pre);
    for (int m = 0; m < M; m++) {
        for (int j = 0; j < DM_MEASURE_WIDTH; j++)
            row[j] = (real)meas[(size_t)m * DM_MEASURE_WIDTH + j];
#if DM_FIX_WIDTH > 0
        dm_signal_fix(row, v, row + DM_MEASURE_WIDTH);
#endif
#if DM_ROWS_PER_VOXEL
        dm_row_stage(row, v);
#endif
        out[m] = (double)dm_signal_at(pre, row, v);
    }
}

DM_EXPORT void dm_derived(const double *params, const double *vox, double *out)
{
#if DM_OUTPUT_WIDTH > 0
    real p[DM_NPARAMS], v[DM_VOXEL_SLOTS], o[DM_OUTPUT_WIDTH];
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = (real)params[k];
    for (int j = 0; j < DM_VOXEL_WIDTH; j++) v[j] = (real)vox[j];
    dm_outputs(p, v, o);
    for (int j = 0; j < DM_OUTPUT_WIDTH; j++) out[j] = (double)o[j];
#else
    (void)params;
    (void)vox;
    (void)out;
#endif
}
