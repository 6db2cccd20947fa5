/* What grid search, Levenberg-Marquardt and MCMC share: the data of one voxel, the cost (sum
 * of squared residuals) and the noise models' energies and log-likelihoods, each summed over
 * the measurements by the lanes of the voxel.
 *
 * Sums of squares are formed from residuals (never as sum y^2 - 2 sum y S + sum S^2, which
 * cancels catastrophically in float).  Energies are compared by their difference, never
 * exponentiated whole.
 *
 * Before including: real, DM_FN, DM_FN_ONCE (how a function that holds a copy of the signal
 * is declared), mathlib.h, the generated model, fit_api.h, lanes.h. */
#ifndef DIMOC_FIT_COMMON_H
#define DIMOC_FIT_COMMON_H

#if DM_NPARAMS > DM_MAX_PARAMS
#error "the model has more parameters than DM_MAX_PARAMS"
#endif

#ifndef DM_FIX_WIDTH /* a model written by hand, without fixed values (model_api.h) */
#define DM_FIX_WIDTH 0
#define DM_ROW_WIDTH DM_MEASURE_WIDTH
#endif
#ifndef DM_STAGE_WIDTH /* the model's program, for any fit: no stage values (model_api.h) */
#define DM_STAGE_WIDTH 0
#define DM_STAGE_HELD 0u
#define DM_ROWS_PER_VOXEL 0
#define DM_FIX_BASE_WIDTH DM_FIX_WIDTH
#endif
/* Parameter k is held by this program: constant in its loops, no partial. */
#define DM_HELD(k) ((DM_STAGE_HELD >> (k)) & 1u)
/* The voxel row a stage program reads: its inputs, then the stage values (never size 0);
 * DM_STAGE_VOXEL_ROW(name) declares it where there is one (dm_voxel_stage). */
#define DM_VOXEL_EXT_SLOTS                                                                         \
    (DM_VOXEL_WIDTH + DM_STAGE_WIDTH > 0 ? DM_VOXEL_WIDTH + DM_STAGE_WIDTH : 1)
#if DM_STAGE_WIDTH > 0
#define DM_STAGE_VOXEL_ROW(name) real name[DM_VOXEL_EXT_SLOTS]
#else
#define DM_STAGE_VOXEL_ROW(name) real *name = 0
#endif

/* Zero-width inputs still get one slot, so that arrays are never of size 0. */
#define DM_MEASURE_SLOTS (DM_MEASURE_WIDTH > 0 ? DM_MEASURE_WIDTH : 1)
#define DM_VOXEL_SLOTS (DM_VOXEL_WIDTH > 0 ? DM_VOXEL_WIDTH : 1)
#define DM_ROW_SLOTS (DM_ROW_WIDTH > 0 ? DM_ROW_WIDTH : 1)

/* The inputs of one voxel.  meas and vox must not be NULL even when their width is 0. */
typedef struct dm_voxel_data {
    int nmeas;        /* M */
    const real *meas; /* M rows of DM_ROW_WIDTH: the measurement's columns, its fixed values
                       * (of a stage program whose rows are the voxel's own, DM_ROWS_PER_VOXEL:
                       * the base values only, dm_row_extend's, for all voxels of its inputs) */
    const real *y;    /* M measurements */
    const real *vox;  /* DM_VOXEL_WIDTH values (the voxel's row of a stage program) */
    real *own_rows;   /* DM_ROWS_PER_VOXEL: room for the voxel's M rows of DM_ROW_WIDTH */
    int stride;       /* DM_ROWS_PER_VOXEL: own_rows' element stride (below); 0 reads as 1 */
#ifdef DM_GRID_SWEEP
    const real *points; /* grid.h's sweep: the grid points' prepared values (its table) */
#endif
} dm_voxel_data;

/* DM_ROWS_AS_READ (a stage program on the GPU, for voxels of the same inputs; the runtime
 * defines it): meas holds the rows of the base values only, DM_BASE_ROW each (the measurement's
 * columns and the fixed values that read no stage value), shared by a block; the stage's fixed
 * values are made as a row is read (dm_load_row), instead of each voxel's rows being made in
 * and read from device memory. */
#ifdef DM_ROWS_AS_READ
#define DM_BASE_ROW (DM_MEASURE_WIDTH + DM_FIX_BASE_WIDTH)
#endif
#if defined(DM_GRID_SWEEP) && !defined(DM_ROWS_AS_READ)
#error "fit_common.h: the grid sweep reads its rows as DM_ROWS_AS_READ"
#endif

/* Element (m, c) of the rows is meas[(m DM_ROW_WIDTH + c) stride].  A stage program's own
 * rows on the GPU are those of a warp's voxels interleaved (stride: the voxels of a warp), so
 * that the lanes' reads of one column coalesce; any other rows are packed (stride 1). */
#if DM_ROWS_PER_VOXEL
#define DM_ROW_STRIDE(d) ((d)->stride > 1 ? (d)->stride : 1)
#else
#define DM_ROW_STRIDE(d) 1
#endif
#define DM_MEAS_ROW(d, m) ((d)->meas + (size_t)(m)*DM_ROW_WIDTH * DM_ROW_STRIDE(d))

#if DM_ROWS_PER_VOXEL
/* A stage program's rows of one voxel (vx its voxel row) in own (element stride `stride`)
 * from the packed base rows: every lane makes those of its own measurements, the only ones it
 * reads; own may be base itself (stride 1). */
DM_FN void dm_voxel_stage_rows(const real *base, const real *vx, int M, real *own, int stride)
{
    for (int m = DM_LANE; m < M; m += DM_NLANES) {
        const real *from = base + (size_t)m * DM_ROW_WIDTH;
        real row[DM_ROW_SLOTS];
        for (int c = 0; c < DM_MEASURE_WIDTH + DM_FIX_BASE_WIDTH; c++) row[c] = from[c];
        dm_row_stage(row, vx);
        for (int c = 0; c < DM_ROW_WIDTH; c++)
            own[((size_t)m * DM_ROW_WIDTH + c) * stride] = row[c];
    }
}
#endif

/* A voxel's extended rows (model_api.h) from the M measurement rows: every lane fills the rows
 * of its own measurements, the only ones it reads.  Without fixed values the measurement rows
 * are the extended rows and nothing is done. */
DM_FN void dm_voxel_rows(const real *meas, const real *vox, int M, real *rows)
{
#if DM_FIX_WIDTH > 0
    for (int m = DM_LANE; m < M; m += DM_NLANES)
        dm_row_extend(meas + (size_t)m * DM_MEASURE_WIDTH, vox, rows + (size_t)m * DM_ROW_WIDTH);
#else
    (void)meas;
    (void)vox;
    (void)M;
    (void)rows;
#endif
}

DM_FN int dm_is_fixed(const dm_fit_config *cfg, int k)
{
    return (cfg->fixed_mask >> k) & 1u;
}

DM_FN int dm_finite(real x)
{
    return isfinite(x);
}

/* 1 when p lies within the bounds and satisfies the constraints. */
DM_FN int dm_params_valid(const real *p, const real *vox)
{
    return dm_in_bounds(p) && dm_constraints_ok(p, vox);
}

/* On the GPU the loop is unrolled DM_MEAS_UNROLL times, so that the loads of several
 * measurements' rows are in flight together (they, not the arithmetic, stalled the loop), and a
 * row of a multiple of 4 floats (2 doubles) is read by 16-byte loads (DM_VEC_ROWS). */
#ifndef DM_MEAS_UNROLL
#define DM_MEAS_UNROLL 4
#endif
#ifndef DM_VEC_ROWS
#define DM_VEC_ROWS 1
#endif
#define DM_PRAGMA_(x) _Pragma(#x)
#define DM_UNROLL_(n) DM_PRAGMA_(unroll n)
#ifdef __CUDACC_RTC__
#define DM_MEAS_LOOP DM_UNROLL_(DM_MEAS_UNROLL)
#define DM_ROW_ALIGN __align__(16) /* dm_load_row's 16-byte stores */
#else
#define DM_MEAS_LOOP
#define DM_ROW_ALIGN
#endif

/* Row m of the voxel's measurement rows into row[] (declared DM_ROW_ALIGN); rows of 16-byte
 * multiples by vector loads on the GPU (the device arrays are 256-byte aligned, the rows
 * packed, so every such row starts on a 16-byte boundary). */
DM_FN void dm_load_row(const dm_voxel_data *d, int m, real *row)
{
#ifdef DM_ROWS_AS_READ /* the base values shared by the block, the stage's made here */
    const real *base = d->meas + (size_t)m * DM_BASE_ROW;
    for (int c = 0; c < DM_BASE_ROW; c++) row[c] = base[c];
#if DM_ROWS_PER_VOXEL
    dm_row_stage(row, d->vox);
#endif
    return;
#endif
    const real *src = DM_MEAS_ROW(d, m);
#if DM_ROWS_PER_VOXEL
    if (DM_ROW_STRIDE(d) > 1) { /* interleaved rows: the lanes of a warp read side by side */
        for (int c = 0; c < DM_ROW_SLOTS; c++) row[c] = src[(size_t)c * DM_ROW_STRIDE(d)];
        return;
    }
#endif
#ifdef __CUDACC_RTC__
    const int vec = DM_VEC_ROWS && DM_ROW_WIDTH > 0 && (DM_ROW_SLOTS * sizeof(real)) % 16 == 0;
#else
    const int vec = 0;
#endif
    if (vec) {
#ifdef __CUDACC_RTC__
        const int4 *v = (const int4 *)src;
        int4 *out = (int4 *)row;
        for (int i = 0; i < (int)(DM_ROW_SLOTS * sizeof(real) / 16); i++) out[i] = v[i];
#endif
    } else {
        for (int c = 0; c < DM_ROW_SLOTS; c++) row[c] = DM_ROW_WIDTH > 0 ? src[c] : 0;
    }
}

/* Sum of squared residuals sum_m (y_m - S_m(p))^2.  Every lane prepares the invariant part
 * of the signal (the same values) once, then evaluates its measurements from it.  Inlined
 * only in MCMC's proposals, the hot loop; everything else calls dm_sse. */
DM_FN real dm_sse_inline(const dm_voxel_data *d, const real *p)
{
    real pre[DM_PRE_WIDTH];
    dm_signal_prepare(p, d->vox, pre);
    real partial = 0;
    const real *y = d->y, *vox = d->vox;
    const int M = d->nmeas;
    DM_MEAS_LOOP
    for (int m = DM_LANE; m < M; m += DM_NLANES) {
        DM_ROW_ALIGN real row[DM_ROW_SLOTS];
        dm_load_row(d, m, row);
        real r = y[m] - dm_signal_at(pre, row, vox);
        partial += r * r;
    }
    return dm_lane_sum(partial);
}

DM_FN_ONCE real dm_sse(const dm_voxel_data *d, const real *p)
{
    return dm_sse_inline(d, p);
}

/* Sum of squares of the measurements (the scale that LM's round-off floor is relative to). */
DM_FN real dm_sum_y2(const dm_voxel_data *d)
{
    real partial = 0;
    for (int m = DM_LANE; m < d->nmeas; m += DM_NLANES) partial += d->y[m] * d->y[m];
    return dm_lane_sum(partial);
}

/* Gaussian noise with its variance integrated out (bedpostx): (M/2) log(SSE/2). */
DM_FN real dm_gaussian_energy(int nmeas, real sse)
{
    return (real)0.5 * nmeas * log(sse / 2);
}

/* Gaussian log-likelihood with sigma^2 at its ML value SSE/M: -M/2 (log(2 pi SSE/M) + 1). */
DM_FN real dm_gaussian_loglik(int nmeas, real sse)
{
    return -(real)0.5 * nmeas * (log(2 * DM_PI * sse / nmeas) + 1);
}

/* The measurement-dependent part of the Rician energy with precision tau (1/sigma^2):
 *   sum_m tau (Y^2 + S^2)/2 - log I0(tau S Y)
 * = sum_m tau (Y - S)^2 / 2 + (z - log I0(z)),  z = tau S Y.
 * The second form keeps every term O(1) + O(log z): the first one subtracts two sums of size
 * tau Y^2 M, which loses all precision in float for high-SNR data. */
DM_FN_ONCE real dm_rician_data_energy(const dm_voxel_data *d, const real *p, real tau)
{
    real pre[DM_PRE_WIDTH];
    dm_signal_prepare(p, d->vox, pre);
    real partial = 0;
    for (int m = DM_LANE; m < d->nmeas; m += DM_NLANES) {
        real y = d->y[m];
        DM_ROW_ALIGN real row[DM_ROW_SLOTS];
        dm_load_row(d, m, row);
        real s = dm_signal_at(pre, row, d->vox);
        real z = tau * s * y;
        partial += tau * (y - s) * (y - s) / 2 + (z - dm_log_i0(z));
    }
    return dm_lane_sum(partial);
}

/* MCMC energy of the Rician model: the data part, -M log tau from the likelihood, and a
 * Jeffreys prior p(tau) ~ 1/tau (energy + log tau).  The constant -sum log Y is dropped. */
DM_FN real dm_rician_energy(const dm_voxel_data *d, const real *p, real tau)
{
    return dm_rician_data_energy(d, p, tau) - (d->nmeas - 1) * log(tau);
}

/* Rician log-likelihood: sum_m log Y + log tau - tau (Y^2 + S^2)/2 + log I0(tau S Y).
 * A measurement Y <= 0 has density 0, so the result is -inf then. */
DM_FN_ONCE real dm_rician_loglik(const dm_voxel_data *d, const real *p, real tau)
{
    real partial = 0;
    for (int m = DM_LANE; m < d->nmeas; m += DM_NLANES)
        partial += log(d->y[m] > 0 ? d->y[m] : (real)0); /* log 0 = -inf */
    real sum_log_y = dm_lane_sum(partial);
    return sum_log_y + d->nmeas * log(tau) - dm_rician_data_energy(d, p, tau);
}

#endif
