/* The contract between generated model code and the fitting templates.
 *
 * This header declares nothing; it documents what generated/<model>/model.h defines, one
 * source that the host compiler (templates/fit/cpu_fitter.c) and NVRTC
 * (templates/fit/gpu_fitter.cu) both compile.  Before including it, the includer defines:
 *
 *   real      the floating type of the build (float or double), as a typedef
 *   DM_FN     function qualifiers: `static inline` (host) or `static __device__` and inline
 *             (NVRTC, whose builds also define DM_NVRTC)
 *   and includes templates/maths/mathlib.h (the built-in functions: dm_dawson, dm_log_i0, ...).
 *
 * The generated source then defines these constants:
 *
 *   DM_NPARAMS        number of parameters P (<= DM_MAX_PARAMS)
 *   DM_MEASURE_WIDTH  columns of one packed per-measurement row (0 if none)
 *   DM_VOXEL_WIDTH    columns of one packed per-voxel row (0 if none)
 *   DM_OUTPUT_WIDTH   slots of one packed derived-output row (0 if none)
 *   DM_PRE_WIDTH      slots (>= 1) of dm_signal_prepare's array
 *   DM_PREG_WIDTH     slots (>= 1) of dm_signal_grad_prepare's array
 *   DM_FIX_WIDTH      fixed values per measurement (0 if none; see below)
 *   DM_ROW_WIDTH      DM_MEASURE_WIDTH + DM_FIX_WIDTH: the extended row the _at functions read
 *
 * and these functions (p: P parameters; m: one measurement row; v: the voxel row):
 *
 *   real dm_signal(const real *p, const real *m, const real *v);
 *       predicted signal of one measurement.
 *   real dm_signal_grad(const real *p, const real *m, const real *v, real *ds);
 *       the same value, and ds[k] = d signal / d p[k] for every k, in one pass.
 *
 * The work of the signal that depends on no measurement input (sin/cos of angles, sqrt of a
 * parameter, ...) is the same for all M measurements of a voxel, so each function is split in
 * a once-per-voxel part and a per-measurement part; the two above are those parts composed.
 * A loop over the measurements at one p calls
 *
 *   void dm_signal_prepare(const real *p, const real *v, real *pre);
 *       fills pre[0 .. DM_PRE_WIDTH): the invariant values the per-measurement part reads.
 *   real dm_signal_at(const real *pre, const real *m, const real *v);
 *       the signal of measurement m from pre (== dm_signal(p, m, v), bit for bit).
 *   void dm_signal_grad_prepare(const real *p, const real *v, real *preg);
 *       fills preg[0 .. DM_PREG_WIDTH): the invariant values and the nonzero partials of
 *       invariant values that the per-measurement part of the gradient reads.
 *   real dm_signal_grad_at(const real *preg, const real *m, const real *v, real *ds);
 *       value and full gradient of measurement m from preg (== dm_signal_grad(p, m, v, ds)).
 *
 * once with prepare and then once per measurement with _at.  pre and preg depend on p and v
 * only; model.meta's flops_signal and flops_gradient count the _at parts, flops_prepare and
 * flops_gradient_prepare the prepare parts.
 *
 * The _at functions read m as an extended row of DM_ROW_WIDTH: the measurement's columns, then
 * its DM_FIX_WIDTH fixed values, the costly per-measurement work that reads no parameter
 * (NODDI's stick integrals J_l(b d_par), a ball's exp(-b d_iso)).  They are the same at every
 * point a fit tries, so a fitter computes them once per voxel and measurement before it starts.
 * Where DM_FIX_WIDTH > 0 the source also defines
 *   void dm_signal_fix(const real *m, const real *v, real *fix);
 *       fix[0 .. DM_FIX_WIDTH) of the measurement whose columns are m, in voxel v;
 *   void dm_row_extend(const real *m, const real *v, real *row);
 *       row[0 .. DM_ROW_WIDTH): m's columns, then dm_signal_fix's values;
 * and dm_signal / dm_signal_grad extend the row themselves (they take m's columns only).
 * With DM_FIX_WIDTH 0 the extended row is the measurement row.  model.meta's flops_fix counts
 * dm_signal_fix.
 *
 * Stage programs.  A fit, or one stage of a cascade, that holds some parameters at their
 * starts throughout (dm_fit_config.held_mask) may be given the program the compiler makes for
 * it (dm_generate_stage), which defines besides the above
 *   DM_STAGE_HELD      the parameters it holds (bit k: parameter k)
 *   DM_STAGE_WIDTH     values of the held parameters appended to the voxel row
 *   DM_ROWS_PER_VOXEL  1 when some fixed values read them: each voxel's rows are its own
 *   DM_FIX_BASE_WIDTH  the fixed values that read none (dm_signal_fix's, the first ones)
 *   DM_PREPARE_READS_STAGE  1 when dm_signal_prepare reads them (else its values at a point
 *                      are the same for every voxel of the same inputs: grid.h's sweep)
 *   void dm_voxel_extend(const real *p, const real *v, real *vx);
 *       vx[0 .. DM_VOXEL_WIDTH) = v, then the DM_STAGE_WIDTH values, from the held p;
 *   void dm_row_stage(real *row, const real *vx);     (DM_ROWS_PER_VOXEL only)
 *       the other fixed values of a row that dm_row_extend made, in place, for voxel row vx;
 * and its prepare, _at and fixed functions take that extended row for v (dm_signal and
 * dm_signal_grad take the voxel's inputs and extend them themselves).  The work that depends
 * on held parameters alone is then done once per voxel, the per-measurement work on them and
 * the measurement alone once per voxel and measurement (fixed values), and the gradient has
 * no partials of them (ds[k] = 0).  Without DM_STAGE_WIDTH the program serves any fit.
 *   int  dm_in_bounds(const real *p);
 *       1 when every non-periodic parameter lies within its bounds (open ends exclusive).
 *   int  dm_constraints_ok(const real *p, const real *v);
 *       1 when every `constraint` holds.
 *   real dm_prior_energy(const real *p, const real *v);
 *       sum over parameters of the prior energies (negative log densities, constants dropped).
 *   void dm_wrap_periodic(real *p);
 *       maps every periodic parameter into [lo, hi).
 *   void dm_to_free(const real *p, real *x);
 *   void dm_from_free(const real *x, real *p, real *dpdx);
 *       the Levenberg-Marquardt reparametrisation (thesis eq. 5.8-5.10): lower bound only
 *       p = lo + exp(x); upper only p = hi - exp(x); both p = (hi-lo)/2 * (2/pi) atan(x)
 *       + (hi+lo)/2; periodic or unbounded p = x.  dpdx[k] = dp[k]/dx[k].
 *   real dm_proposal_sd(int k, const real *p);
 *       initial MCMC proposal sd of parameter k at p: its `step` if given, else 0.2 for
 *       periodic, sphere-prior, ard-prior and [0,1]-bounded parameters, else |p[k]|/10
 *       (or a tenth of the bound width when p[k] is 0).
 *   void dm_outputs(const real *p, const real *v, real *out);
 *       the derived outputs, DM_OUTPUT_WIDTH slots (an axis or vector takes 3).
 *
 * Constants are emitted as literals, so the generated code needs no tables in device memory.
 */
#ifndef DIMOC_MODEL_API_H
#define DIMOC_MODEL_API_H
#define DM_MAX_PARAMS 32

/* The range of the free coordinate that dm_to_free returns (see compiler/back/emit.c's
 * transforms): a start closer to a bound is moved to the edge, where LM can move it. */
#define DM_FREE_ATAN_MAX 20.0
#define DM_FREE_EXP_MIN (-25.0)
/* dm_near_bound's hair (the at-a-bound status): for the atan map p beyond x = +-1000, within
 * (hi-lo)/pi atan(1/1000) of a bound; for the exp maps beyond x = DM_FREE_EXP_MIN. */
#define DM_NEAR_BOUND_ATAN 1000.0
#endif
