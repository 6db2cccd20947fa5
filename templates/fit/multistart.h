/* Multi-start Levenberg-Marquardt and the at-a-bound status, one implementation for the host
 * build and the NVRTC build.
 *
 * A model that asks for `multistart N` and starts two or more directions from the tensor's
 * axes (`init from theta(K)` / `phi(K)`, pairs listed in cfg->orient_*) gets N LM runs per
 * voxel: run j starts from the incoming start with every such direction turned by
 * j * (pi/2) / N about the unit normal of the first two (for sticks started on the tensor's
 * first two axes: the plane where two crossing fibres lie, and turns of 0, 30, 60 degrees for
 * N = 3).  The run of lowest cost wins (an earlier run unless a later one is lower by more
 * than rounding, so that the host and GPU builds pick the same run); the iterations of all
 * runs are counted.  Every lane of a GPU group takes the same decisions (the costs are lane
 * sums).
 *
 * A voxel that LM leaves (converged) with a parameter it was free to move within a hair of a
 * bound (dm_near_bound: 3.2e-4 of a finite range, 1.4e-11 from a single bound) gets
 * DM_STATUS_AT_BOUND instead of DM_STATUS_FITTED: a fraction at 0 or 1, a diffusivity at its
 * limit -- a solution that is degenerate, or a start that collapsed.
 *
 * Before including: lm.h. */
#ifndef DIMOC_MULTISTART_H
#define DIMOC_MULTISTART_H

/* Start j (0 <= j < cfg->starts) from p0: see above.  Returns 0 when it would repeat start 0
 * (j > 0 and the first two directions are parallel, or fewer than two pairs). */
DM_FN int dm_turned_start(const dm_fit_config *cfg, const real *p0, int j, real *p)
{
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = p0[k];
    if (j == 0) return 1;
    if (cfg->norient < 2) return 0;
    real v[DM_MAX_PARAMS / 2][3];
    for (int i = 0; i < cfg->norient; i++) {
        real th = p0[cfg->orient_theta[i]], ph = p0[cfg->orient_phi[i]];
        v[i][0] = sin(th) * cos(ph);
        v[i][1] = sin(th) * sin(ph);
        v[i][2] = cos(th);
    }
    real n[3] = {v[0][1] * v[1][2] - v[0][2] * v[1][1], v[0][2] * v[1][0] - v[0][0] * v[1][2],
                 v[0][0] * v[1][1] - v[0][1] * v[1][0]};
    real len = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    if (!(len > (real)1e-3)) return 0;
    for (int c = 0; c < 3; c++) n[c] /= len;
    real angle = (real)(DM_PI / 2) * j / cfg->starts, ca = cos(angle), sa = sin(angle);
    for (int i = 0; i < cfg->norient; i++) {
        /* Rodrigues: v cos a + (n x v) sin a + n (n.v)(1 - cos a) */
        real *a = v[i], nv = n[0] * a[0] + n[1] * a[1] + n[2] * a[2];
        real x[3] = {n[1] * a[2] - n[2] * a[1], n[2] * a[0] - n[0] * a[2],
                     n[0] * a[1] - n[1] * a[0]};
        real w[3];
        for (int c = 0; c < 3; c++) w[c] = a[c] * ca + x[c] * sa + n[c] * nv * (1 - ca);
        real z = w[2] > 1 ? (real)1 : w[2] < -1 ? (real)-1 : w[2];
        p[cfg->orient_theta[i]] = acos(z);
        p[cfg->orient_phi[i]] = atan2(w[1], w[0]);
    }
    dm_wrap_periodic(p);
    return 1;
}

/* LM from cfg->starts starts (dm_lm_fit's contract): p in: the start, out: the estimate of
 * the best run; the status of that run (FAILED only when every run failed, p then unchanged);
 * *iterations summed over the runs; *sse_out the best cost. */
DM_FN int dm_lm_multistart(const dm_fit_config *cfg, const dm_voxel_data *d, real *p,
                           int *iterations, real *sse_out)
{
    if (cfg->starts <= 1) return dm_lm_fit(cfg, d, p, iterations, sse_out);
    real p0[DM_NPARAMS], q[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) p0[k] = p[k];
    int best_status = DM_STATUS_FAILED, total = 0;
    real best_sse = 0;
    for (int j = 0; j < cfg->starts; j++) {
        if (!dm_turned_start(cfg, p0, j, q)) continue;
        int it = 0;
        real sse = 0;
        int st = dm_lm_fit(cfg, d, q, &it, &sse);
        total += it;
        if (st == DM_STATUS_FAILED || !dm_finite(sse)) continue;
        if (best_status == DM_STATUS_FAILED || sse < best_sse * (1 - 64 * DM_REAL_EPS)) {
            best_status = st;
            best_sse = sse;
            for (int k = 0; k < DM_NPARAMS; k++) p[k] = q[k];
        }
    }
    *iterations = total;
    *sse_out = best_sse;
    return best_status;
}

/* DM_STATUS_AT_BOUND for a converged LM estimate with a free parameter within a hair of a
 * bound; any other status unchanged. */
DM_FN int dm_bound_status(const dm_fit_config *cfg, const real *p, int status)
{
    if (status == DM_STATUS_FITTED && (dm_near_bound(p) & ~cfg->fixed_mask) != 0)
        return DM_STATUS_AT_BOUND;
    return status;
}

#endif
