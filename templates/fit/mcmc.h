/* Random-walk Metropolis (thesis Algorithm 4.2; FSL bedpostx's xfibres).
 *
 * One sweep ("jump") proposes each non-fixed parameter in turn, p_k' = p_k + sd_k N(0,1), and
 * then, for Rician noise, the precision tau.  A proposal outside the bounds, breaking a
 * constraint, or with tau <= 0 is rejected; otherwise it is accepted when
 *   log u < E_old - E_new,  u ~ U(0,1)
 * (Metropolis with probability min(1, exp(E_old - E_new)), never exponentiating an energy).
 * E = noise energy + dm_prior_energy:
 *   gaussian: (M/2) log(SSE/2), the variance integrated out;
 *   rician:   see dm_rician_energy (tau sampled, Jeffreys prior 1/tau).  tau starts at M/SSE of
 *             the incoming estimate (1/sigma^2 with sigma^2 = SSE/M) with proposal sd tau/10.
 * Initial proposal sds come from dm_proposal_sd at the starting point.  Every
 * cfg->update_every sweeps, during burn-in and sampling alike (as bedpostx does), each sd is
 * multiplied by sqrt((accepted + 1) / (rejected + 1)) counted since the last update, and the
 * counts restart.
 *
 * Periodic parameters: the chain carries them unwrapped (a random walk on the line) and
 * evaluates signal, bounds, constraints and priors at the wrapped copy, so the chain is the
 * wrapped chain exactly; the stored samples are wrapped.  The posterior mean of a periodic
 * parameter is the mean of its unwrapped path, wrapped: the circular mean whenever the
 * posterior is narrower than a period, with no need to know the period.
 *
 * burnin sweeps, then jumps sweeps with the state stored after every sample_every-th one
 * (DM_NSAMPLES rows).  The random stream is Philox keyed by (cfg->seed, voxel index), one
 * normal then one uniform per proposal whatever happens, so the chain is a pure function of
 * (seed, voxel index, data).
 *
 * Before including: fit_common.h, philox.h. */
#ifndef DIMOC_MCMC_H
#define DIMOC_MCMC_H

/* Energy of the state p (unwrapped) with precision tau (Rician only); q receives p wrapped.
 * Non-finite when the energy is undefined (the acceptance test then rejects). */
/* The noise models this build of the fitter holds: DM_COMPILED_NOISE 1 Gaussian only, 2 Rician
 * only, 3 (default) both, chosen per run.  The GPU fitter is built for its run's model: the
 * Rician energy is a called function (fit_common.h), and a call site in the loop, even one not
 * taken, costs the Gaussian sweep its registers. */
#ifndef DM_COMPILED_NOISE
#define DM_COMPILED_NOISE 3
#endif
#if DM_COMPILED_NOISE == 1
#define DM_MCMC_RICIAN(cfg) 0
#elif DM_COMPILED_NOISE == 2
#define DM_MCMC_RICIAN(cfg) 1
#else
#define DM_MCMC_RICIAN(cfg) ((cfg)->noise == DM_NOISE_RICIAN)
#endif

DM_FN real dm_mcmc_energy(const dm_fit_config *cfg, const dm_voxel_data *d, const real *p, real tau,
                          real *q)
{
    for (int k = 0; k < DM_NPARAMS; k++) q[k] = p[k];
    dm_wrap_periodic(q);
    real e = DM_MCMC_RICIAN(cfg) ? dm_rician_energy(d, q, tau)
                                           : dm_gaussian_energy(d->nmeas, dm_sse_inline(d, q));
    return e + dm_prior_energy(q, d->vox);
}

/* Metropolis decision; false for a NaN energy. */
/* Deviates in the build's precision, for the samplers.  A double build uses the double
 * deviates above.  A float build draws a 24-bit uniform from one word, (k + 1/2) / 2^24, and
 * transforms in float: double arithmetic costs a GPU float build several times the
 * instructions of the float path, for precision a float chain cannot use.  Either way the
 * stream is the same on host and device. */
DM_FN real dm_rng_uniform_real(dm_rng *r)
{
    if (sizeof(real) == sizeof(double)) return (real)dm_rng_uniform(r);
    return ((real)(dm_rng_u32(r) >> 8) + (real)0.5) * (real)5.9604644775390625e-08; /* 2^-24 */
}

DM_FN real dm_rng_normal_real(dm_rng *r)
{
    if (sizeof(real) == sizeof(double)) return (real)dm_rng_normal(r);
    if (r->has_spare) {
        r->has_spare = 0;
        return (real)r->spare;
    }
    real u1 = dm_rng_uniform_real(r), u2 = dm_rng_uniform_real(r);
    real radius = sqrt((real)-2 * log(u1));
    real angle = (real)6.283185307179586 * u2;
    r->spare = radius * sin(angle);
    r->has_spare = 1;
    return radius * cos(angle);
}

DM_FN int dm_mcmc_accept(real u, real e_old, real e_new)
{
    return log(u) < e_old - e_new;
}

/* Runs the chain from p (in: start; out: the posterior mean, wrapped).  samples: DM_NSAMPLES
 * rows of DM_NPARAMS, row s at samples + s * sample_stride (written by the leader lane only).
 * *accept_rate: accepted / proposed over the model parameters after burn-in; *tau_mean: the
 * posterior mean of tau (Rician) or 0.  Returns DM_STATUS_FITTED, or DM_STATUS_FAILED when
 * the start is invalid or its energy is not finite. */
DM_FN int dm_mcmc_run(const dm_fit_config *cfg, const dm_voxel_data *d,
                      unsigned long long voxel_index, real *p, real *samples, int sample_stride,
                      real *accept_rate, real *tau_mean)
{
    *accept_rate = 0;
    *tau_mean = 0;
    dm_wrap_periodic(p);
    if (!dm_params_valid(p, d->vox)) return DM_STATUS_FAILED;

    const int rician = DM_MCMC_RICIAN(cfg);
    real q[DM_NPARAMS], sd[DM_NPARAMS];
    int free_k[DM_NPARAMS], n = 0;
    for (int k = 0; k < DM_NPARAMS; k++)
        if (!dm_is_fixed(cfg, k)) {
            sd[n] = dm_proposal_sd(k, p);
            free_k[n++] = k;
        }
    int accepted[DM_NPARAMS + 1], rejected[DM_NPARAMS + 1]; /* slot n: tau */
    for (int i = 0; i <= n; i++) accepted[i] = rejected[i] = 0;

    real tau = 0, tau_sd = 0;
    if (rician) {
        real sse = dm_sse(d, p);
        tau = d->nmeas / (sse > 0 ? sse : DM_REAL_EPS);
        tau_sd = tau / 10;
    }
    real energy = dm_mcmc_energy(cfg, d, p, tau, q);
    if (!dm_finite(energy)) return DM_STATUS_FAILED;

    dm_rng rng;
    dm_rng_init(&rng, cfg->seed, voxel_index);
    const int nsamples = DM_NSAMPLES(cfg);
    const int sweeps = cfg->burnin + cfg->jumps;
    real mean[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) mean[k] = 0;
    real tau_sum = 0;
    long long proposed_after_burnin = 0, accepted_after_burnin = 0;
    int stored = 0;
    real old_value;

    for (int sweep = 0; sweep < sweeps; sweep++) {
        /* every 16 sweeps, the leader's reading of the stop flag for the whole lane group */
        if (cfg->stop && (sweep & 15) == 15 && dm_lane_broadcast((real)*cfg->stop, 0) != 0)
            return DM_STATUS_FAILED;
        const int sampling = sweep >= cfg->burnin;
        for (int i = 0; i < n; i++) {
            int k = free_k[i];
            real z = dm_rng_normal_real(&rng);
            real u = dm_rng_uniform_real(&rng);
            old_value = p[k];
            p[k] += sd[i] * z;
            int ok = 0;
            real e_new = energy;
            for (int j = 0; j < DM_NPARAMS; j++) q[j] = p[j];
            dm_wrap_periodic(q);
            if (dm_params_valid(q, d->vox)) {
                e_new = dm_mcmc_energy(cfg, d, p, tau, q);
                ok = dm_mcmc_accept(u, energy, e_new);
            }
            if (ok) {
                energy = e_new;
                accepted[i]++;
            } else {
                p[k] = old_value;
                rejected[i]++;
            }
            if (sampling) {
                proposed_after_burnin++;
                accepted_after_burnin += ok;
            }
        }
        if (rician) {
            real z = dm_rng_normal_real(&rng);
            real u = dm_rng_uniform_real(&rng);
            real tau_new = tau + tau_sd * z;
            int ok = 0;
            real e_new = energy;
            if (tau_new > 0) {
                e_new = dm_mcmc_energy(cfg, d, p, tau_new, q);
                ok = dm_mcmc_accept(u, energy, e_new);
            }
            if (ok) {
                tau = tau_new;
                energy = e_new;
                accepted[n]++;
            } else {
                rejected[n]++;
            }
        }
        if (cfg->update_every > 0 && (sweep + 1) % cfg->update_every == 0) {
            for (int i = 0; i <= n; i++) {
                real factor = sqrt((real)(accepted[i] + 1) / (real)(rejected[i] + 1));
                if (i < n)
                    sd[i] *= factor;
                else
                    tau_sd *= factor;
                accepted[i] = rejected[i] = 0;
            }
        }
        if (sampling && nsamples > 0 && (sweep + 1 - cfg->burnin) % cfg->sample_every == 0 &&
            stored < nsamples) {
            for (int k = 0; k < DM_NPARAMS; k++) {
                q[k] = p[k];
                mean[k] += p[k];
            }
            dm_wrap_periodic(q);
            if (DM_LANE_LEADER)
                for (int k = 0; k < DM_NPARAMS; k++)
                    samples[(long long)stored * sample_stride + k] = q[k];
            tau_sum += tau;
            stored++;
        }
    }

    if (stored > 0) {
        for (int k = 0; k < DM_NPARAMS; k++) p[k] = mean[k] / stored;
        *tau_mean = rician ? tau_sum / stored : 0;
    } else {
        *tau_mean = rician ? tau : 0;
    }
    dm_wrap_periodic(p);
    if (proposed_after_burnin > 0)
        *accept_rate = (real)((double)accepted_after_burnin / (double)proposed_after_burnin);
    return DM_STATUS_FITTED;
}

#endif
