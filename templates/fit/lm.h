/* Levenberg-Marquardt (thesis Algorithm 4.1, with the parallel accumulation of Algorithm 4.8).
 *
 * Cost: SSE = sum_m (y_m - S_m)^2.  The search runs in the free parametrisation x (dm_to_free /
 * dm_from_free: bounds become unbounded coordinates), over the non-fixed parameters only; the
 * Jacobian is J_mk = dS_m/dp_k * dp_k/dx_k.  The lanes accumulate J^T J and J^T r over their
 * measurements and dm_lane_sum combines them; every lane then solves the small system
 *   (J^T J + lambda diag(J^T J)) delta = J^T r
 * by Gaussian elimination with partial pivoting (redundantly: P is small) and tries
 * x + delta.
 *
 * lambda starts at 1e-3 (the usual choice since Marquardt 1963, and FSL's), is divided by 10
 * after a step that lowers the cost and multiplied by 10 after one that does not.  It is kept
 * >= 1e-12 so that a run of successes cannot drive it to 0 (in float it would underflow and
 * x10 could never grow it again).  The Jacobian is recomputed only after a successful step
 * (a failed step changes lambda only).  A trial step is rejected when its cost is not finite,
 * or the point leaves the bounds (possible at float precision) or breaks a constraint.
 *
 * Iterations count trial steps (solve + cost).  Converged (DM_STATUS_FITTED) when
 *   - lambda exceeds 1e20 (the thesis' criterion: no step in any direction lowers the cost), or
 *   - a successful step moved every free coordinate by at most DM_LM_XTOL (1 + |x|) (1e-12 in
 *     double, 1e-6 in float): the parameters themselves have converged, so two builds that
 *     round differently (CPU and GPU) stop at the same point to that precision, or
 *   - a successful step lowered the cost by less than DM_LM_RTOL of it (1e-14 in double, 1e-7
 *     in float: only rounding noise is left to gain; a cost test alone, at 1e-10, stopped
 *     while the parameters were still ~1e-5 from the minimum), or
 *   - the cost is at its rounding floor, 100 eps^2 sum y^2 (residuals of a few ulps: a
 *     noise-free fit that is exact, where relative decreases become rounding noise);
 * otherwise DM_STATUS_NOT_CONVERGED after cfg->lm_max_iter iterations.
 *
 * Before including: fit_common.h. */
#ifndef DIMOC_LM_H
#define DIMOC_LM_H

#define DM_LM_LAMBDA_START ((real)1e-3)
#define DM_LM_LAMBDA_MIN ((real)1e-12)
#define DM_LM_LAMBDA_MAX ((real)1e20)
#define DM_LM_RTOL (sizeof(real) == sizeof(float) ? (real)1e-7 : (real)1e-14)
#define DM_LM_XTOL (sizeof(real) == sizeof(float) ? (real)1e-6 : (real)1e-12)

/* Solves A z = b in place (b becomes z) for an n x n row-major A with leading dimension
 * DM_NPARAMS, by Gaussian elimination with partial pivoting.  Returns 0 when A is singular
 * (a zero or non-finite pivot). */
DM_FN int dm_lu_solve(int n, real *a, real *b)
{
    for (int col = 0; col < n; col++) {
        int pivot = col;
        for (int row = col + 1; row < n; row++)
            if (fabs(a[row * DM_NPARAMS + col]) > fabs(a[pivot * DM_NPARAMS + col])) pivot = row;
        real pv = a[pivot * DM_NPARAMS + col];
        if (!(fabs(pv) > 0) || !dm_finite(pv)) return 0;
        if (pivot != col) {
            for (int j = 0; j < n; j++) {
                real t = a[col * DM_NPARAMS + j];
                a[col * DM_NPARAMS + j] = a[pivot * DM_NPARAMS + j];
                a[pivot * DM_NPARAMS + j] = t;
            }
            real t = b[col];
            b[col] = b[pivot];
            b[pivot] = t;
        }
        for (int row = col + 1; row < n; row++) {
            real factor = a[row * DM_NPARAMS + col] / pv;
            for (int j = col; j < n; j++)
                a[row * DM_NPARAMS + j] -= factor * a[col * DM_NPARAMS + j];
            b[row] -= factor * b[col];
        }
    }
    for (int row = n - 1; row >= 0; row--) {
        real s = b[row];
        for (int j = row + 1; j < n; j++) s -= a[row * DM_NPARAMS + j] * b[j];
        b[row] = s / a[row * DM_NPARAMS + row];
    }
    return 1;
}

/* p from x, with the fixed parameters restored to their values (held in fixed_p). */
DM_FN void dm_lm_params(const dm_fit_config *cfg, const real *x, const real *fixed_p, real *p,
                        real *dpdx)
{
    dm_from_free(x, p, dpdx);
    for (int k = 0; k < DM_NPARAMS; k++)
        if (dm_is_fixed(cfg, k)) p[k] = fixed_p[k];
}

/* J^T J (upper triangle, n x n over the free parameters) and J^T r at p, summed over the
 * lanes.  The sums run over every parameter, a loop of compile-time length whose accumulators
 * stay in registers; the free parameters' entries are picked out after the sweep.  (Summing
 * over the free_k list, a run-time length, put them in local memory: a load and a store per
 * entry and measurement, most of the ball & sticks kernel's time.)  Each free entry sums the
 * same products in the same order as over the free parameters alone. */
#define DM_NTRI (DM_NPARAMS * (DM_NPARAMS + 1) / 2)
DM_FN_ONCE void dm_lm_normal_equations(const dm_voxel_data *d, const real *p, const real *dpdx,
                                       int n, const int *free_k, real *jtj, real *jtr)
{
    real ds[DM_NPARAMS], jrow[DM_NPARAMS], preg[DM_PREG_WIDTH];
    real tri[DM_NTRI], rhs[DM_NPARAMS]; /* tri: row i holds (i, i) .. (i, P-1) */
    for (int i = 0; i < DM_NTRI; i++) tri[i] = 0;
    for (int i = 0; i < DM_NPARAMS; i++) rhs[i] = 0;
    dm_signal_grad_prepare(p, d->vox, preg);
    for (int m = DM_LANE; m < d->nmeas; m += DM_NLANES) {
#if DM_ROWS_PER_VOXEL || defined(DM_ROWS_AS_READ) /* rows interleaved or made (fit_common.h) */
        DM_ROW_ALIGN real row[DM_ROW_SLOTS];
        dm_load_row(d, m, row);
        real s = dm_signal_grad_at(preg, row, d->vox, ds);
#else
        real s = dm_signal_grad_at(preg, DM_MEAS_ROW(d, m), d->vox, ds);
#endif
        real r = d->y[m] - s;
        for (int i = 0; i < DM_NPARAMS; i++) jrow[i] = DM_HELD(i) ? 0 : ds[i] * dpdx[i];
        for (int i = 0, t = 0; i < DM_NPARAMS; i++) { /* a held parameter's entries stay 0 */
            if (!DM_HELD(i)) rhs[i] += jrow[i] * r;
            for (int j = i; j < DM_NPARAMS; j++, t++)
                if (!DM_HELD(i) && !DM_HELD(j)) tri[t] += jrow[i] * jrow[j];
        }
    }
    /* pos[k]: parameter k's place among the free ones, or -1; every index below is a
     * compile-time one after unrolling, so tri and rhs stay in registers. */
    int pos[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) {
        pos[k] = -1;
        for (int i = 0; i < n; i++)
            if (free_k[i] == k) pos[k] = i;
    }
    for (int i = 0, t = 0; i < DM_NPARAMS; i++) { /* a held parameter's sums are never read */
        const real sum_r = DM_HELD(i) ? 0 : dm_lane_sum(rhs[i]);
        if (pos[i] >= 0) jtr[pos[i]] = sum_r;
        for (int j = i; j < DM_NPARAMS; j++, t++) {
            const real sum = DM_HELD(i) || DM_HELD(j) ? 0 : dm_lane_sum(tri[t]);
            if (pos[i] >= 0 && pos[j] >= 0) jtj[pos[i] * DM_NPARAMS + pos[j]] = sum;
        }
    }
}
#undef DM_NTRI

/* Fits p (in: start, out: estimate, periodic parameters wrapped).  Returns DM_STATUS_FITTED,
 * DM_STATUS_NOT_CONVERGED, or DM_STATUS_FAILED when the start is invalid (outside the bounds,
 * a constraint broken, or a non-finite cost).  *iterations: trial steps taken; *sse_out: the
 * final cost. */
DM_FN_ONCE int dm_lm_fit(const dm_fit_config *cfg, const dm_voxel_data *d, real *p, int *iterations,
                         real *sse_out)
{
    *iterations = 0;
    dm_wrap_periodic(p);
    if (!dm_params_valid(p, d->vox)) return DM_STATUS_FAILED;
    real cost = dm_sse(d, p);
    *sse_out = cost;
    if (!dm_finite(cost)) return DM_STATUS_FAILED;

    int free_k[DM_NPARAMS], n = 0;
    for (int k = 0; k < DM_NPARAMS; k++)
        if (!dm_is_fixed(cfg, k)) free_k[n++] = k;
    if (n == 0) return DM_STATUS_FITTED;

    real fixed_p[DM_NPARAMS], x[DM_NPARAMS], dpdx[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) fixed_p[k] = p[k];
    /* dm_to_free moves a start closer to a bound than |x| = 20 (atan map; 1.6% of the range)
     * or x = -25 (exp maps) to there, where dp/dx lets LM move it (at the bound itself dp/dx
     * is 0 and LM could never leave it; compiler/back/emit.c says why a start merely very
     * close froze LM too). */
    dm_to_free(p, x);
    dm_lm_params(cfg, x, fixed_p, p, dpdx);
    cost = dm_sse(d, p);
    if (!dm_finite(cost) || !dm_params_valid(p, d->vox)) return DM_STATUS_FAILED;

    real floor_cost = 100 * DM_REAL_EPS * DM_REAL_EPS * dm_sum_y2(d);
    real jtj[DM_NPARAMS * DM_NPARAMS], jtr[DM_NPARAMS];
    real h[DM_NPARAMS * DM_NPARAMS], delta[DM_NPARAMS];
    real x_new[DM_NPARAMS], p_new[DM_NPARAMS], dpdx_new[DM_NPARAMS];
    real lambda = DM_LM_LAMBDA_START;
    int need_jacobian = 1, status = DM_STATUS_NOT_CONVERGED;
    while (*iterations < cfg->lm_max_iter) {
        if (cost <= floor_cost) {
            status = DM_STATUS_FITTED;
            break;
        }
        if (need_jacobian) {
            dm_lm_normal_equations(d, p, dpdx, n, free_k, jtj, jtr);
            need_jacobian = 0;
        }
        /* H = J^T J + lambda diag(J^T J); a zero diagonal (a parameter the signal does not
         * depend on here) is damped with a tiny multiple of the largest one instead. */
        real max_diag = 0;
        for (int i = 0; i < n; i++)
            if (jtj[i * DM_NPARAMS + i] > max_diag) max_diag = jtj[i * DM_NPARAMS + i];
        for (int i = 0; i < n; i++) {
            for (int j = i; j < n; j++) {
                h[i * DM_NPARAMS + j] = jtj[i * DM_NPARAMS + j];
                h[j * DM_NPARAMS + i] = jtj[i * DM_NPARAMS + j];
            }
            real diag = jtj[i * DM_NPARAMS + i];
            if (!(diag > 0)) diag = max_diag > 0 ? max_diag * DM_REAL_EPS : (real)1;
            h[i * DM_NPARAMS + i] += lambda * diag;
            delta[i] = jtr[i];
        }
        (*iterations)++;
        int improved = 0;
        real cost_new = cost;
        if (dm_lu_solve(n, h, delta)) {
            for (int k = 0; k < DM_NPARAMS; k++) x_new[k] = x[k];
            for (int i = 0; i < n; i++) x_new[free_k[i]] += delta[i];
            dm_lm_params(cfg, x_new, fixed_p, p_new, dpdx_new);
            if (dm_params_valid(p_new, d->vox)) {
                cost_new = dm_sse(d, p_new);
                improved = dm_finite(cost_new) && cost_new < cost;
            }
        }
        if (improved) {
            real decrease = cost - cost_new;
            int small_step = 1;
            for (int i = 0; i < n; i++)
                if (fabs(delta[i]) > DM_LM_XTOL * (1 + fabs(x[free_k[i]]))) small_step = 0;
            for (int k = 0; k < DM_NPARAMS; k++) {
                x[k] = x_new[k];
                p[k] = p_new[k];
                dpdx[k] = dpdx_new[k];
            }
            cost = cost_new;
            need_jacobian = 1;
            lambda /= 10;
            if (lambda < DM_LM_LAMBDA_MIN) lambda = DM_LM_LAMBDA_MIN;
            if (small_step || decrease <= DM_LM_RTOL * (cost + decrease)) {
                status = DM_STATUS_FITTED;
                break;
            }
        } else {
            lambda *= 10;
            if (lambda > DM_LM_LAMBDA_MAX) {
                status = DM_STATUS_FITTED;
                break;
            }
        }
    }
    if (status == DM_STATUS_NOT_CONVERGED && cost <= floor_cost) status = DM_STATUS_FITTED;
    dm_wrap_periodic(p);
    *sse_out = cost;
    return status;
}

#endif
