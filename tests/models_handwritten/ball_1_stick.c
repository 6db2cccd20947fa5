/* Hand-written stand-in for generated/ball_1_stick/model.h (models/ball_1_stick.model), in the
 * format of templates/fit/model_api.h, so the templates can be tested without the compiler.
 *   S = S0 ((1 - f1) exp(-b d) + f1 exp(-b d (g.v)^2)),  v = dir(th1, ph1)
 *   params S0 (0, inf), d (0, 0.01), f1 [0, 1], th1 [0, pi] periodic + sphere prior,
 *   ph1 [0, 2 pi] periodic;  measure row: g[3], b;  output dyads1 (axis) = v. */
#define DM_NPARAMS 5
#define DM_MEASURE_WIDTH 4
#define DM_VOXEL_WIDTH 0
#define DM_OUTPUT_WIDTH 3

DM_FN real dm_signal(const real *p, const real *m, const real *v)
{
    (void)v;
    real st = sin(p[3]), ct = cos(p[3]), sp = sin(p[4]), cp = cos(p[4]);
    real gv = m[0] * st * cp + m[1] * st * sp + m[2] * ct;
    real bd = m[3] * p[1];
    return p[0] * ((1 - p[2]) * exp(-bd) + p[2] * exp(-bd * gv * gv));
}

DM_FN real dm_signal_grad(const real *p, const real *m, const real *v, real *ds)
{
    (void)v;
    real st = sin(p[3]), ct = cos(p[3]), sp = sin(p[4]), cp = cos(p[4]);
    real gv = m[0] * st * cp + m[1] * st * sp + m[2] * ct;
    real dgv_dth = m[0] * ct * cp + m[1] * ct * sp - m[2] * st;
    real dgv_dph = -m[0] * st * sp + m[1] * st * cp;
    real b = m[3], bd = b * p[1];
    real eball = exp(-bd), estick = exp(-bd * gv * gv);
    real inner = (1 - p[2]) * eball + p[2] * estick;
    ds[0] = inner;
    ds[1] = p[0] * ((1 - p[2]) * -b * eball + p[2] * -b * gv * gv * estick);
    ds[2] = p[0] * (estick - eball);
    ds[3] = p[0] * p[2] * estick * (-bd * 2 * gv * dgv_dth);
    ds[4] = p[0] * p[2] * estick * (-bd * 2 * gv * dgv_dph);
    return p[0] * inner;
}

/* The split of model_api.h, trivially: pre holds the parameters. */
#define DM_PRE_WIDTH DM_NPARAMS
#define DM_PREG_WIDTH DM_NPARAMS

DM_FN void dm_signal_prepare(const real *p, const real *v, real *pre)
{
    (void)v;
    for (int k = 0; k < DM_NPARAMS; k++) pre[k] = p[k];
}

DM_FN real dm_signal_at(const real *pre, const real *m, const real *v)
{
    return dm_signal(pre, m, v);
}

DM_FN void dm_signal_grad_prepare(const real *p, const real *v, real *pre)
{
    dm_signal_prepare(p, v, pre);
}

DM_FN real dm_signal_grad_at(const real *pre, const real *m, const real *v, real *ds)
{
    return dm_signal_grad(pre, m, v, ds);
}

DM_FN int dm_in_bounds(const real *p)
{
    return p[0] > 0 && p[1] > 0 && p[1] < (real)0.01 && p[2] >= 0 && p[2] <= 1;
}

DM_FN int dm_constraints_ok(const real *p, const real *v)
{
    (void)p;
    (void)v;
    return 1;
}

/* sphere prior on th1: -log|sin(th1) / 2|. */
DM_FN real dm_prior_energy(const real *p, const real *v)
{
    (void)v;
    return -log(fabs(sin(p[3]) / 2));
}

DM_FN real dm_wrap_one_(real x, real lo, real hi)
{
    real w = hi - lo;
    x -= w * floor((x - lo) / w);
    return x >= hi ? lo : x;
}

DM_FN void dm_wrap_periodic(real *p)
{
    p[3] = dm_wrap_one_(p[3], 0, DM_PI);
    p[4] = dm_wrap_one_(p[4], 0, 2 * DM_PI);
}

DM_FN void dm_to_free(const real *p, real *x)
{
    x[0] = log(p[0]);
    if (!(x[0] >= DM_FREE_EXP_MIN)) x[0] = DM_FREE_EXP_MIN;
    x[1] = tan((p[1] - (real)0.005) / (real)0.005 * (DM_PI / 2));
    if (!(fabs(x[1]) <= DM_FREE_ATAN_MAX)) x[1] = x[1] > 0 ? DM_FREE_ATAN_MAX : -DM_FREE_ATAN_MAX;
    x[2] = tan((p[2] - (real)0.5) / (real)0.5 * (DM_PI / 2));
    if (!(fabs(x[2]) <= DM_FREE_ATAN_MAX)) x[2] = x[2] > 0 ? DM_FREE_ATAN_MAX : -DM_FREE_ATAN_MAX;
    x[3] = p[3];
    x[4] = p[4];
}

DM_FN void dm_from_free(const real *x, real *p, real *dpdx)
{
    p[0] = exp(x[0]);
    dpdx[0] = p[0];
    p[1] = (real)0.005 * (2 / DM_PI) * atan(x[1]) + (real)0.005;
    dpdx[1] = (real)0.005 * (2 / DM_PI) / (1 + x[1] * x[1]);
    p[2] = (real)0.5 * (2 / DM_PI) * atan(x[2]) + (real)0.5;
    dpdx[2] = (real)0.5 * (2 / DM_PI) / (1 + x[2] * x[2]);
    p[3] = x[3];
    dpdx[3] = 1;
    p[4] = x[4];
    dpdx[4] = 1;
}

/* dm_near_bound's hair: exp(-25) above 0; range/pi atan(1/1000) inside d's and f1's ranges. */
DM_FN unsigned dm_near_bound(const real *p)
{
    unsigned near = 0;
    if (p[0] <= (real)1.3887943864964021e-11) near |= 1u;
    if (p[1] <= (real)3.1830978008e-6 || (real)0.01 - p[1] <= (real)3.1830978008e-6) near |= 2u;
    if (p[2] <= (real)3.1830978008e-4 || 1 - p[2] <= (real)3.1830978008e-4) near |= 4u;
    return near;
}

DM_FN real dm_proposal_sd(int k, const real *p)
{
    if (k >= 2) return (real)0.2;
    if (p[k] == 0) return k == 1 ? (real)0.001 : (real)1;
    return fabs(p[k]) / 10;
}

DM_FN void dm_outputs(const real *p, const real *v, real *out)
{
    (void)v;
    out[0] = sin(p[3]) * cos(p[4]);
    out[1] = sin(p[3]) * sin(p[4]);
    out[2] = cos(p[3]);
}
