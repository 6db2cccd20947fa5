/* Hand-written stand-in for generated/exp_decay/model.h (models/exp_decay.model), in the
 * format of templates/fit/model_api.h, so the templates can be tested without the compiler.
 *   S = S0 exp(-R TE);  S0 in (0, inf), R in (0, 1000);  measure row: TE. */
#define DM_NPARAMS 2
#define DM_MEASURE_WIDTH 1
#define DM_VOXEL_WIDTH 0
#define DM_OUTPUT_WIDTH 0

DM_FN real dm_signal(const real *p, const real *m, const real *v)
{
    (void)v;
    return p[0] * exp(-p[1] * m[0]);
}

DM_FN real dm_signal_grad(const real *p, const real *m, const real *v, real *ds)
{
    (void)v;
    real e = exp(-p[1] * m[0]);
    ds[0] = e;
    ds[1] = -p[0] * m[0] * e;
    return p[0] * e;
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
    return p[0] > 0 && p[1] > 0 && p[1] < 1000;
}

DM_FN int dm_constraints_ok(const real *p, const real *v)
{
    (void)p;
    (void)v;
    return 1;
}

DM_FN real dm_prior_energy(const real *p, const real *v)
{
    (void)p;
    (void)v;
    return 0;
}

DM_FN void dm_wrap_periodic(real *p)
{
    (void)p;
}

/* S0: lower bound 0 (exp map); R: (0, 1000) (atan map). */
DM_FN void dm_to_free(const real *p, real *x)
{
    x[0] = log(p[0] - 0);
    if (!(x[0] >= DM_FREE_EXP_MIN)) x[0] = DM_FREE_EXP_MIN;
    x[1] = tan((p[1] - 500) / 500 * (DM_PI / 2));
    if (!(fabs(x[1]) <= DM_FREE_ATAN_MAX)) x[1] = x[1] > 0 ? DM_FREE_ATAN_MAX : -DM_FREE_ATAN_MAX;
}

DM_FN void dm_from_free(const real *x, real *p, real *dpdx)
{
    p[0] = 0 + exp(x[0]);
    dpdx[0] = exp(x[0]);
    p[1] = 500 * (2 / DM_PI) * atan(x[1]) + 500;
    dpdx[1] = 500 * (2 / DM_PI) / (1 + x[1] * x[1]);
}

/* dm_near_bound's hair: exp(-25) above 0; 1000/pi atan(1/1000) inside (0, 1000). */
DM_FN unsigned dm_near_bound(const real *p)
{
    unsigned near = 0;
    if (p[0] <= (real)1.3887943864964021e-11) near |= 1u;
    if (p[1] <= (real)0.31830978008 || 1000 - p[1] <= (real)0.31830978008) near |= 2u;
    return near;
}

DM_FN real dm_proposal_sd(int k, const real *p)
{
    if (k == 1 && p[1] == 0) return 100; /* a tenth of the bound width */
    return fabs(p[k]) / 10;
}

DM_FN void dm_outputs(const real *p, const real *v, real *out)
{
    (void)p;
    (void)v;
    (void)out;
}
