/* The fitting templates, built as the runtime builds them: templates/fit/cpu_fitter.c plus a model
 * compiled by the host compiler into a shared object, loaded with dlopen.  The models are
 * generated/<model>/model.h when the compiler has produced them, else the hand-written
 * stand-ins in tests/models_handwritten/. */
#include "fit/fit_api.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DM_FN static inline
#include "maths/philox.h" /* the test's own noise */

typedef int (*int_fn)(void);

typedef struct fitter {
    void *handle;
    dm_fit_voxel_fn fit;
    dm_fit_work_new_fn work_new;
    dm_fit_work_free_fn work_free;
    dm_predict_fn predict;
    dm_derived_fn derived;
    dm_derived_rows_fn derived_rows;
    int real_size;
} fitter;

#include "check.h"

static const char *tmp_dir(void)
{
    const char *t = getenv("TMPROOT");
    return t && *t ? t : "/tmp";
}

/* Builds and loads the fitter of `model` in precision `real` ("double" or "float"). */
static int load_fitter(const char *model, const char *real, fitter *f)
{
    char model_file[1024], so[1024], cmd[8192], cwd[512];
    if (!getcwd(cwd, sizeof cwd)) return -1;
    /* DIMOC_TEST_HANDWRITTEN=1 tests the stand-ins even when generated models exist. */
    const char *hand = getenv("DIMOC_TEST_HANDWRITTEN");
    snprintf(model_file, sizeof model_file, "%s/generated/%s/model.h", cwd, model);
    if ((hand && *hand == '1') || access(model_file, R_OK) != 0)
        snprintf(model_file, sizeof model_file, "%s/tests/models_handwritten/%s.c", cwd, model);
    printf("info: %s (%s) from %s\n", model, real, model_file);
    snprintf(so, sizeof so, "%s/test_fit_templates_%s_%s_%d.so", tmp_dir(), model, real,
             (int)getpid());
    const char *cc = getenv("CC");
    /* as the runtime builds it (fit/cpu_backend.c): -O3 for this processor, so that
     * dm_derived_rows runs in vector lanes, with libmvec's sin and cos on x86-64; but without
     * contracting into FMAs, which would cost exp_decay's exact grid point its zero residual */
#if defined(__x86_64__) && defined(__GLIBC__)
    const char *vector = "-fopenmp-simd -DDM_LIBMVEC", *libs = "-lmvec -lm";
#else
    const char *vector = "", *libs = "-lm";
#endif
    snprintf(cmd, sizeof cmd,
             "%s -O3 -march=native -ffp-contract=off -std=gnu11 -Wall -Wextra -Werror -fPIC -shared "
             "-fno-math-errno %s -DDM_REAL=%s -DDM_MODEL_FILE='\"%s\"' -I'%s/templates' "
             "'%s/templates/fit/cpu_fitter.c' '%s/templates/fit/cpu_derived.c' -o '%s' %s",
             cc && *cc ? cc : "cc", vector, real, model_file, cwd, cwd, cwd, so, libs);
    if (system(cmd) != 0) {
        printf("FAIL build_%s_%s: %s\n", model, real, cmd);
        failures++;
        return -1;
    }
    f->handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    unlink(so);
    if (!f->handle) {
        printf("FAIL load_%s_%s: %s\n", model, real, dlerror());
        failures++;
        return -1;
    }
    int_fn abi = (int_fn)dlsym(f->handle, "dm_fitter_abi");
    int_fn real_size = (int_fn)dlsym(f->handle, "dm_fitter_real_size");
    f->fit = (dm_fit_voxel_fn)dlsym(f->handle, "dm_fit_voxel");
    f->work_new = (dm_fit_work_new_fn)dlsym(f->handle, "dm_fit_work_new");
    f->work_free = (dm_fit_work_free_fn)dlsym(f->handle, "dm_fit_work_free");
    f->predict = (dm_predict_fn)dlsym(f->handle, "dm_predict");
    f->derived = (dm_derived_fn)dlsym(f->handle, "dm_derived");
    f->derived_rows = (dm_derived_rows_fn)dlsym(f->handle, "dm_derived_rows");
    if (!abi || !real_size || !f->fit || !f->work_new || !f->work_free || !f->predict ||
        !f->derived || !f->derived_rows) {
        printf("FAIL symbols_%s_%s: a fit_api.h symbol is missing\n", model, real);
        failures++;
        return -1;
    }
    f->real_size = real_size();
    char name[128];
    snprintf(name, sizeof name, "abi_%s_%s", model, real);
    int want = strcmp(real, "float") ? 8 : 4;
    check(abi() == DM_FITTER_ABI && f->real_size == want, name, "abi %d real size %d", abi(),
          f->real_size);
    return 0;
}

static dm_fit_config base_config(int nmeas, int methods)
{
    dm_fit_config c;
    memset(&c, 0, sizeof c);
    c.nmeas = nmeas;
    c.methods = methods;
    c.lm_max_iter = 200;
    c.noise = DM_NOISE_GAUSSIAN;
    c.burnin = 1000;
    c.jumps = 1250;
    c.sample_every = 25;
    c.update_every = 40;
    c.seed = 42;
    return c;
}

static double rel_err(double got, double want)
{
    return fabs(got - want) / fabs(want);
}

/* ---- exp_decay: S = S0 exp(-R TE) ---- */

#define NTE 32
static double te[NTE];

static void exp_decay_data(const fitter *f, double s0, double r, double sigma, int rician,
                           unsigned long long noise_seed, double *y)
{
    double truth[2] = {s0, r};
    f->predict(truth, te, NTE, NULL, y);
    dm_rng rng;
    dm_rng_init(&rng, noise_seed, 0);
    for (int m = 0; m < NTE; m++) {
        double a = y[m] + sigma * dm_rng_normal(&rng);
        if (rician) {
            double b = sigma * dm_rng_normal(&rng);
            a = sqrt(a * a + b * b);
        }
        y[m] = a;
    }
}

static void test_exp_decay(const fitter *f)
{
    double y[NTE], params[2], stats[DM_NSTATS];

    /* LM, noise-free. */
    exp_decay_data(f, 1000, 25, 0, 0, 1, y);
    dm_fit_config c = base_config(NTE, DM_METHOD_LM);
    params[0] = 600;
    params[1] = 60;
    int st = f->fit(&c, NULL, te, y, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_FITTED && rel_err(params[0], 1000) < 1e-6 &&
              rel_err(params[1], 25) < 1e-6,
          "exp_decay_lm_noise_free", "status %d S0 %.10g R %.10g", st, params[0], params[1]);
    check(stats[DM_STAT_SSE] < 1e-12 && stats[DM_STAT_ITERATIONS] >= 1 &&
              stats[DM_STAT_ITERATIONS] < 200,
          "exp_decay_lm_stats", "SSE %g iterations %g", stats[DM_STAT_SSE],
          stats[DM_STAT_ITERATIONS]);

    /* LM with an iteration limit of 1: not converged. */
    c.lm_max_iter = 1;
    params[0] = 600;
    params[1] = 60;
    st = f->fit(&c, NULL, te, y, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_NOT_CONVERGED, "exp_decay_lm_iteration_limit", "status %d", st);

    /* An invalid start fails. */
    c = base_config(NTE, DM_METHOD_LM);
    params[0] = 600;
    params[1] = -5;
    st = f->fit(&c, NULL, te, y, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_FAILED, "exp_decay_invalid_start_fails", "status %d", st);

    /* Grid search on data generated at a grid point returns that point exactly. */
    double grid[] = {500, 1000, 1500, 2000, 10, 20, 30, 40, 50};
    exp_decay_data(f, 1500, 30, 0, 0, 1, y);
    c = base_config(NTE, DM_METHOD_GRID);
    c.grid_count[0] = 4;
    c.grid_offset[0] = 0;
    c.grid_count[1] = 5;
    c.grid_offset[1] = 4;
    params[0] = 1;
    params[1] = 1;
    st = f->fit(&c, grid, te, y, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_FITTED && params[0] == 1500 && params[1] == 30 && stats[DM_STAT_SSE] == 0,
          "exp_decay_grid_exact_point", "status %d S0 %.17g R %.17g SSE %g", st, params[0],
          params[1], stats[DM_STAT_SSE]);

    /* Grid over R only keeps S0; grid then LM refines off the grid. */
    exp_decay_data(f, 1234, 27, 0, 0, 1, y);
    c.methods = DM_METHOD_GRID | DM_METHOD_LM;
    c.grid_count[0] = 0;
    params[0] = 1100;
    params[1] = 1;
    st = f->fit(&c, grid, te, y, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_FITTED && rel_err(params[0], 1234) < 1e-6 &&
              rel_err(params[1], 27) < 1e-6,
          "exp_decay_grid_then_lm", "status %d S0 %.10g R %.10g", st, params[0], params[1]);

    /* MCMC with Gaussian noise. */
    const double sigma = 20;
    exp_decay_data(f, 1000, 25, sigma, 0, 7, y);
    c = base_config(NTE, DM_METHOD_LM | DM_METHOD_MCMC);
    c.burnin = 2000;
    c.jumps = 20000;
    c.sample_every = 10;
    int ns = DM_NSAMPLES(&c);
    double *samples = malloc(sizeof(double) * ns * 2);
    double *samples2 = malloc(sizeof(double) * ns * 2);
    params[0] = 900;
    params[1] = 20;
    st = f->fit(&c, NULL, te, y, NULL, 123, params, samples, stats, NULL);
    double mean[2] = {0, 0}, sd[2] = {0, 0};
    for (int s = 0; s < ns; s++)
        for (int k = 0; k < 2; k++) mean[k] += samples[s * 2 + k] / ns;
    for (int s = 0; s < ns; s++)
        for (int k = 0; k < 2; k++)
            sd[k] += (samples[s * 2 + k] - mean[k]) * (samples[s * 2 + k] - mean[k]) / (ns - 1);
    sd[0] = sqrt(sd[0]);
    sd[1] = sqrt(sd[1]);
    check(st == DM_STATUS_FITTED && fabs(mean[0] - 1000) < 4 * sd[0] &&
              fabs(mean[1] - 25) < 4 * sd[1] && sd[0] > 1 && sd[0] < 50 && sd[1] > 0.05 &&
              sd[1] < 5,
          "exp_decay_mcmc_posterior", "status %d S0 %.2f +- %.2f R %.3f +- %.3f", st, mean[0],
          sd[0], mean[1], sd[1]);
    check(fabs(params[0] - mean[0]) < 1e-9 * mean[0] && fabs(params[1] - mean[1]) < 1e-9 * mean[1],
          "exp_decay_mcmc_returns_sample_mean", "params %g %g, sample mean %g %g", params[0],
          params[1], mean[0], mean[1]);
    check(stats[DM_STAT_ACCEPT] > 0.15 && stats[DM_STAT_ACCEPT] < 0.6, "exp_decay_mcmc_acceptance",
          "acceptance rate %g", stats[DM_STAT_ACCEPT]);
    {
        double sse = stats[DM_STAT_SSE];
        double want = -NTE / 2.0 * (log(2 * M_PI * sse / NTE) + 1);
        check(fabs(stats[DM_STAT_LOGL] - want) < 1e-9 * fabs(want) && sse > 0,
              "exp_decay_mcmc_loglik", "logL %g want %g", stats[DM_STAT_LOGL], want);
    }

    /* Determinism: same seed and voxel -> identical samples; another voxel -> different. */
    params[0] = 900;
    params[1] = 20;
    st = f->fit(&c, NULL, te, y, NULL, 123, params, samples2, stats, NULL);
    check(memcmp(samples, samples2, sizeof(double) * ns * 2) == 0, "mcmc_same_key_same_samples",
          "two runs with seed 42, voxel 123 differ");
    params[0] = 900;
    params[1] = 20;
    f->fit(&c, NULL, te, y, NULL, 124, params, samples2, stats, NULL);
    int differing = 0;
    for (int i = 0; i < ns * 2; i++) differing += samples[i] != samples2[i];
    check(differing > ns, "mcmc_other_voxel_other_samples", "only %d of %d values differ",
          differing, ns * 2);
    c.seed = 43;
    params[0] = 900;
    params[1] = 20;
    f->fit(&c, NULL, te, y, NULL, 123, params, samples2, stats, NULL);
    differing = 0;
    for (int i = 0; i < ns * 2; i++) differing += samples[i] != samples2[i];
    check(differing > ns, "mcmc_other_seed_other_samples", "only %d of %d values differ", differing,
          ns * 2);

    /* Fixed parameters stay fixed through grid, LM and MCMC. */
    c = base_config(NTE, DM_METHOD_GRID | DM_METHOD_LM | DM_METHOD_MCMC);
    c.fixed_mask = 1u;   /* S0 */
    c.grid_count[0] = 4; /* ignored: S0 is fixed */
    c.grid_offset[0] = 0;
    c.grid_count[1] = 5;
    c.grid_offset[1] = 4;
    ns = DM_NSAMPLES(&c);
    params[0] = 1000.5;
    params[1] = 40;
    st = f->fit(&c, grid, te, y, NULL, 5, params, samples, stats, NULL);
    int s0_fixed = params[0] == 1000.5;
    for (int s = 0; s < ns; s++) s0_fixed &= samples[s * 2] == 1000.5;
    check(st == DM_STATUS_FITTED && s0_fixed && fabs(params[1] - 25) < 1, "fixed_params_stay_fixed",
          "status %d S0 %.17g R %g", st, params[0], params[1]);

    /* Rician noise: tau sampled, its posterior mean near 1/sigma^2. */
    exp_decay_data(f, 1000, 25, sigma, 1, 11, y);
    c = base_config(NTE, DM_METHOD_LM | DM_METHOD_MCMC);
    c.noise = DM_NOISE_RICIAN;
    c.jumps = 5000;
    c.sample_every = 10;
    ns = DM_NSAMPLES(&c);
    params[0] = 900;
    params[1] = 20;
    st = f->fit(&c, NULL, te, y, NULL, 9, params, samples, stats, NULL);
    double tau = stats[DM_STAT_TAU], want_tau = 1 / (sigma * sigma);
    check(st == DM_STATUS_FITTED && tau > 0.5 * want_tau && tau < 2 * want_tau &&
              fabs(params[0] - 1000) < 30 && fabs(params[1] - 25) < 2 &&
              isfinite(stats[DM_STAT_LOGL]),
          "exp_decay_mcmc_rician", "status %d tau %g (1/sigma^2 %g) S0 %g R %g logL %g", st, tau,
          want_tau, params[0], params[1], stats[DM_STAT_LOGL]);
    free(samples);
    free(samples2);
}

static void test_exp_decay_float(const fitter *f)
{
    double y[NTE], params[2], stats[DM_NSTATS];
    exp_decay_data(f, 1000, 25, 0, 0, 1, y);
    dm_fit_config c = base_config(NTE, DM_METHOD_LM);
    params[0] = 600;
    params[1] = 60;
    int st = f->fit(&c, NULL, te, y, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_FITTED && rel_err(params[0], 1000) < 1e-4 &&
              rel_err(params[1], 25) < 1e-4,
          "float_exp_decay_lm", "status %d S0 %.8g R %.8g", st, params[0], params[1]);

    const double sigma = 20;
    exp_decay_data(f, 1000, 25, sigma, 0, 7, y);
    c = base_config(NTE, DM_METHOD_LM | DM_METHOD_MCMC);
    int ns = DM_NSAMPLES(&c);
    double *samples = malloc(sizeof(double) * ns * 2);
    params[0] = 900;
    params[1] = 20;
    st = f->fit(&c, NULL, te, y, NULL, 3, params, samples, stats, NULL);
    check(st == DM_STATUS_FITTED && fabs(params[0] - 1000) < 40 && fabs(params[1] - 25) < 3 &&
              stats[DM_STAT_ACCEPT] > 0.15 && stats[DM_STAT_ACCEPT] < 0.6,
          "float_exp_decay_mcmc", "status %d S0 %g R %g acceptance %g", st, params[0], params[1],
          stats[DM_STAT_ACCEPT]);
    free(samples);
}

/* ---- ball_1_stick ---- */

#define NDIR 64
#define NB1S (2 * NDIR + 4)
static double b1s_meas[NB1S * 4];

static void b1s_protocol(void)
{
    /* Two shells on a Fibonacci sphere (unit vectors), and b = 0 volumes. */
    int m = 0;
    for (int i = 0; i < 4; i++, m++) {
        b1s_meas[m * 4 + 0] = 1;
        b1s_meas[m * 4 + 1] = 0;
        b1s_meas[m * 4 + 2] = 0;
        b1s_meas[m * 4 + 3] = 0;
    }
    for (int shell = 1; shell <= 2; shell++)
        for (int i = 0; i < NDIR; i++, m++) {
            double z = 1 - (2.0 * i + 1) / NDIR, r = sqrt(1 - z * z);
            double a = i * 2.399963229728653 + shell;
            b1s_meas[m * 4 + 0] = r * cos(a);
            b1s_meas[m * 4 + 1] = r * sin(a);
            b1s_meas[m * 4 + 2] = z;
            b1s_meas[m * 4 + 3] = 1000.0 * shell;
        }
}

static double axis_angle_deg(double th1, double ph1, double th2, double ph2)
{
    double d = sin(th1) * cos(ph1) * sin(th2) * cos(ph2) +
               sin(th1) * sin(ph1) * sin(th2) * sin(ph2) + cos(th1) * cos(th2);
    d = fabs(d);
    return acos(d > 1 ? 1 : d) * 180 / M_PI;
}

static void test_ball_1_stick(const fitter *f)
{
    b1s_protocol();
    double truth[5] = {1000, 1.5e-3, 0.5, 1.1, 2.0};
    double y[NB1S], params[5], stats[DM_NSTATS];
    f->predict(truth, b1s_meas, NB1S, NULL, y);

    dm_fit_config c = base_config(NB1S, DM_METHOD_LM);
    double start[5] = {900, 1.0e-3, 0.3, 0.8, 2.4};
    memcpy(params, start, sizeof params);
    int st = f->fit(&c, NULL, b1s_meas, y, NULL, 0, params, NULL, stats, NULL);
    double ang = axis_angle_deg(params[3], params[4], truth[3], truth[4]);
    check(st == DM_STATUS_FITTED && ang < 0.1 && rel_err(params[0], 1000) < 1e-6 &&
              rel_err(params[1], 1.5e-3) < 1e-6 && rel_err(params[2], 0.5) < 1e-6,
          "ball_1_stick_lm_noise_free",
          "status %d angle %g deg S0 %.8g d %.8g f1 %.8g th %.6g ph %.6g", st, ang, params[0],
          params[1], params[2], params[3], params[4]);
    check(params[3] >= 0 && params[3] < M_PI && params[4] >= 0 && params[4] < 2 * M_PI,
          "ball_1_stick_lm_wraps_periodic", "th %g ph %g", params[3], params[4]);

    /* A start on the closed bound f1 = 0 still moves (the reparametrisation would pin it).
     * The orientation starts right: with it wrong, f1 = 0 is a genuine local minimum. */
    memcpy(params, start, sizeof params);
    params[2] = 0;
    params[3] = truth[3];
    params[4] = truth[4];
    st = f->fit(&c, NULL, b1s_meas, y, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_FITTED && fabs(params[2] - 0.5) < 1e-6, "lm_leaves_closed_bound",
          "status %d f1 %.8g", st, params[2]);

    /* A start a hair inside the bound, f1 = 1e-16: the atan map's dp/dx there is ~3e-32, and
     * before dm_to_free kept |x| <= 1000, LM "converged" on its first tiny step and returned
     * f1 = 2e-16 as fitted (the NODDI-Watson cascade's frozen fiso).  It must move now; and
     * so must d from 1e-17. */
    for (int which = 1; which <= 2; which++) {
        memcpy(params, start, sizeof params);
        params[which] = which == 1 ? 1e-17 : 1e-16;
        params[3] = truth[3];
        params[4] = truth[4];
        st = f->fit(&c, NULL, b1s_meas, y, NULL, 0, params, NULL, stats, NULL);
        check(st == DM_STATUS_FITTED && fabs(params[2] - 0.5) < 1e-6 &&
                  rel_err(params[1], 1.5e-3) < 1e-6,
              which == 1 ? "lm_leaves_hair_of_bound_d" : "lm_leaves_hair_of_bound_f1",
              "status %d d %.8g f1 %.8g", st, params[1], params[2]);
    }

    /* Data with no stick (f1 = 0): LM takes f1 to its bound; the status says so, never 1.
     * Held there by --fixed, the same f1 is the user's choice and not flagged. */
    double ball[5] = {1000, 1.5e-3, 0, 1.1, 2.0}, y0[NB1S];
    f->predict(ball, b1s_meas, NB1S, NULL, y0);
    memcpy(params, start, sizeof params);
    st = f->fit(&c, NULL, b1s_meas, y0, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_AT_BOUND && params[2] < 1e-3, "status_at_bound", "status %d f1 %.3g", st,
          params[2]);
    dm_fit_config cf = c;
    cf.fixed_mask = 1u << 2;
    memcpy(params, start, sizeof params);
    params[2] = 0;
    st = f->fit(&cf, NULL, b1s_meas, y0, NULL, 0, params, NULL, stats, NULL);
    check(st == DM_STATUS_FITTED && params[2] == 0 && rel_err(params[1], 1.5e-3) < 1e-6,
          "status_fixed_at_bound_not_flagged", "status %d f1 %.3g d %.8g", st, params[2],
          params[1]);

    /* The derived output: the unit fibre direction. */
    double dyad[3];
    f->derived(truth, NULL, dyad);
    check(fabs(dyad[0] - sin(1.1) * cos(2.0)) < 1e-12 && fabs(dyad[2] - cos(1.1)) < 1e-12,
          "ball_1_stick_derived", "dyads1 %g %g %g", dyad[0], dyad[1], dyad[2]);
    /* The same of 150 rows at once (blocks of 64 and a part block, in vector lanes with
     * libmvec's sin and cos): within a few ulps of one row at a time. */
    {
        enum { ROWS = 150 };
        static double rows[ROWS * 5], one[ROWS * 3], many[ROWS * 3];
        dm_rng r;
        dm_rng_init(&r, 7, 0);
        for (int s = 0; s < ROWS; s++) {
            double *q = rows + s * 5;
            q[0] = 1000, q[1] = 1.5e-3, q[2] = 0.5;
            q[3] = M_PI * dm_rng_uniform(&r), q[4] = 2 * M_PI * dm_rng_uniform(&r);
            f->derived(q, NULL, one + s * 3);
        }
        f->derived_rows(rows, ROWS, NULL, many);
        double worst = 0;
        for (int i = 0; i < ROWS * 3; i++) worst = fmax(worst, fabs(many[i] - one[i]));
        check(worst < 1e-14, "ball_1_stick_derived_rows", "largest difference %.3g", worst);
    }

    /* MCMC with phi near the wrap point 0 = 2 pi: the samples stay in [0, 2 pi) and the
     * posterior mean of phi is the circular one (near 0.03, not near pi). */
    double truth2[5] = {1000, 1.5e-3, 0.6, 1.3, 0.03};
    f->predict(truth2, b1s_meas, NB1S, NULL, y);
    dm_rng rng;
    dm_rng_init(&rng, 99, 0);
    for (int m = 0; m < NB1S; m++) y[m] += 10 * dm_rng_normal(&rng);
    c = base_config(NB1S, DM_METHOD_LM | DM_METHOD_MCMC);
    int ns = DM_NSAMPLES(&c);
    double *samples = malloc(sizeof(double) * ns * 5);
    double start2[5] = {900, 1.0e-3, 0.4, 1.2, 6.2};
    memcpy(params, start2, sizeof params);
    st = f->fit(&c, NULL, b1s_meas, y, NULL, 77, params, samples, stats, NULL);
    int in_range = 1, near_zero = 0, near_two_pi = 0;
    for (int s = 0; s < ns; s++) {
        double th = samples[s * 5 + 3], ph = samples[s * 5 + 4];
        in_range &= th >= 0 && th < M_PI && ph >= 0 && ph < 2 * M_PI;
        near_zero += ph < 0.5;
        near_two_pi += ph > 2 * M_PI - 0.5;
    }
    double circ = fabs(remainder(params[4] - 0.03, 2 * M_PI));
    check(st == DM_STATUS_FITTED && in_range, "ball_1_stick_mcmc_samples_wrapped",
          "status %d, a sample outside [0,pi) x [0,2pi)", st);
    check(circ < 0.1 && fabs(params[3] - 1.3) < 0.1 && fabs(params[2] - 0.6) < 0.05,
          "ball_1_stick_mcmc_circular_mean",
          "th %g ph %g (circular distance %g) f1 %g; %d samples near 0, %d near 2pi", params[3],
          params[4], circ, params[2], near_zero, near_two_pi);
    check(stats[DM_STAT_ACCEPT] > 0.15 && stats[DM_STAT_ACCEPT] < 0.6,
          "ball_1_stick_mcmc_acceptance", "acceptance rate %g", stats[DM_STAT_ACCEPT]);
    free(samples);
}

/* ---- a thread's workspace (fit_api.h) on a model with fixed values ---- */

/* NODDI-Watson's fixed values (its stick integrals, from the voxel input d_par) are made once
 * per workspace and again only when a voxel's inputs or the measurement rows change: voxels
 * fitted one after another through one workspace, their inputs changing and returning, then
 * with other rows, end exactly where a fit of each alone (no workspace) ends. */
#define NNW 40
static void test_workspace(const fitter *f)
{
    double meas[2][NNW * 4], vox[6][2] = {{1.7e-3, 3e-3}, {1.7e-3, 3e-3}, {1.9e-3, 3e-3},
                                          {1.9e-3, 3e-3}, {1.7e-3, 3e-3}, {1.7e-3, 2.5e-3}};
    dm_rng rng;
    dm_rng_init(&rng, 7, 0);
    for (int m = 0; m < NNW; m++) { /* g, b: 4 b=0, then b=1000 and b=2500 */
        double g[3] = {dm_rng_normal(&rng), dm_rng_normal(&rng), dm_rng_normal(&rng)};
        double n = sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
        for (int k = 0; k < 3; k++) meas[0][m * 4 + k] = meas[1][m * 4 + k] = g[k] / n;
        meas[0][m * 4 + 3] = m < 4 ? 0 : m < 22 ? 1000 : 2500;
        meas[1][m * 4 + 3] = m < 4 ? 0 : m < 22 ? 700 : 2000;
    }
    void *work = f->work_new();
    int same = work != NULL, fitted = 0;
    for (int r = 0; r < 2; r++)
        for (int v = 0; v < 6; v++) {
            double truth[6] = {1000, 0.3 + 0.08 * v, 0.1, 2 + v, 0.4 + 0.3 * v, 1 + 0.5 * v};
            double y[NNW], a[6], b[6], sa[DM_NSTATS], sb[DM_NSTATS];
            f->predict(truth, meas[r], NNW, vox[v], y);
            for (int m = 0; m < NNW; m++) y[m] += 5 * dm_rng_normal(&rng);
            dm_fit_config c = base_config(NNW, DM_METHOD_LM);
            for (int k = 0; k < 6; k++) a[k] = b[k] = truth[k] * (k < 4 ? 0.9 : 1.05);
            int st_a = f->fit(&c, NULL, meas[r], y, vox[v], v, a, NULL, sa, NULL);
            int st_b = f->fit(&c, NULL, meas[r], y, vox[v], v, b, NULL, sb, work);
            fitted += st_a == DM_STATUS_FITTED;
            same &= st_a == st_b && memcmp(a, b, sizeof a) == 0 && memcmp(sa, sb, sizeof sa) == 0;
        }
    f->work_free(work);
    check(same && fitted >= 10, "workspace_equals_fresh_fit",
          "%d of 12 voxels fitted; workspace and fresh fits %s", fitted,
          same ? "identical" : "DIFFER");
}

int main(void)
{
    fitter f;
    for (int m = 0; m < NTE; m++) te[m] = 0.005 + 0.005 * m;
    if (load_fitter("exp_decay", "double", &f) == 0) {
        test_exp_decay(&f);
        dlclose(f.handle);
    }
    if (load_fitter("exp_decay", "float", &f) == 0) {
        test_exp_decay_float(&f);
        dlclose(f.handle);
    }
    if (load_fitter("ball_1_stick", "double", &f) == 0) {
        test_ball_1_stick(&f);
        dlclose(f.handle);
    }
    /* a generated model only (no stand-in has fixed values) */
    const char *hand = getenv("DIMOC_TEST_HANDWRITTEN");
    if ((hand && *hand == '1') || access("generated/noddi_watson/model.h", R_OK) != 0)
        printf("info: workspace test skipped (no generated noddi_watson)\n");
    else
        for (int k = 0; k < 2; k++)
            if (load_fitter("noddi_watson", k ? "float" : "double", &f) == 0) {
                test_workspace(&f);
                dlclose(f.handle);
            }
    return failures ? 1 : 0;
}
