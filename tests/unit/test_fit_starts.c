/* The starts a fit makes from each voxel's signal (fit_starts.h), against two references: the
 * simulation's truth (each voxel's signal is a tensor's, without noise, so the b = 0 signal,
 * the mean diffusivity and the principal direction are known) and the same starts made in
 * place on all threads (dm_fit_starts_fill).  The thread that makes them beside a GPU fit must
 * give the same bits voxel for voxel, and dm_fit_starts_wait(p, end) must return only once
 * voxels [0, end) have their final values, chunk boundaries and the last partial chunk
 * included; voxels that are not fitted keep their constants; a thread stopped at once leaves
 * each voxel either made or at its constants. */
#include "fit/fit_starts.h"
#include "model/model_info.h"
#include "util/error.h"
#include "check.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { NB0 = 5, NDIR = 30, M = NB0 + 2 * NDIR, NFIT = 5000, SKIP_EVERY = 97 };

static const double L1 = 1.7e-3, L2 = 0.3e-3; /* the tensor's eigenvalues (L2 twice) */

/* A direction on the sphere from two numbers in [0, 1). */
static void direction(double u, double v, double g[3])
{
    const double z = 1 - 2 * u, r = sqrt(1 - z * z), a = 2 * M_PI * v;
    g[0] = r * cos(a), g[1] = r * sin(a), g[2] = z;
}

typedef struct truth {
    double s0, theta, phi;
} truth;

/* The problem: ball_1_stick's parameters, NB0 b = 0 and NDIR directions at b = 1000 and 2000,
 * NFIT voxels of a prolate tensor each, every SKIP_EVERY-th voxel all zero and skipped. */
static int make_problem(dm_problem *p, truth *t)
{
    memset(p, 0, sizeof *p);
    if (dm_model_load("ball_1_stick", &p->mi) != 0) return -1;
    const dm_model_info *mi = &p->mi;
    p->M = M;
    p->nfit = p->nvox = NFIT;
    p->meas = calloc((size_t)M * mi->measure_width, sizeof *p->meas);
    p->bvals = malloc(M * sizeof *p->bvals);
    p->y = malloc((size_t)NFIT * M * sizeof *p->y);
    p->index = malloc(NFIT * sizeof *p->index);
    p->status = malloc(NFIT);
    p->start = malloc((size_t)NFIT * mi->nparams * sizeof *p->start);
    double g[M][3];
    for (int j = 0; j < M; j++) {
        p->bvals[j] = j < NB0 ? 0 : j < NB0 + NDIR ? 1000 : 2000;
        const int k = j < NB0 ? 0 : (j - NB0) % NDIR;
        direction((k + 0.5) / NDIR, fmod(k * 0.618033988749895, 1), g[j]);
        for (int i = 0; i < mi->nmeasures; i++) {
            double *row = p->meas + (size_t)j * mi->measure_width + mi->measures[i].column;
            if (mi->measures[i].source == DM_SRC_BVALS) row[0] = p->bvals[j];
            if (mi->measures[i].source == DM_SRC_BVECS) memcpy(row, g[j], sizeof g[j]);
        }
    }
    srand(7);
    for (size_t i = 0; i < NFIT; i++) {
        p->index[i] = i;
        double *y = p->y + i * M;
        if (i % SKIP_EVERY == 3) {
            p->status[i] = DM_STATUS_SKIPPED_ZERO;
            memset(y, 0, M * sizeof *y);
            continue;
        }
        p->status[i] = DM_STATUS_FITTED;
        double v[3];
        direction(rand() / (RAND_MAX + 1.0), rand() / (RAND_MAX + 1.0), v);
        if (v[2] < 0) v[0] = -v[0], v[1] = -v[1], v[2] = -v[2];
        t[i].s0 = 800 + 400 * (rand() / (RAND_MAX + 1.0));
        t[i].theta = acos(v[2]);
        t[i].phi = atan2(v[1], v[0]);
        if (t[i].phi < 0) t[i].phi += 2 * M_PI;
        for (int j = 0; j < M; j++) {
            const double c = v[0] * g[j][0] + v[1] * g[j][1] + v[2] * g[j][2];
            const double adc = L2 + (L1 - L2) * c * c; /* gᵀDg of the prolate tensor */
            y[j] = t[i].s0 * exp(-p->bvals[j] * adc);
        }
    }
    return 0;
}

static void free_problem(dm_problem *p)
{
    dm_model_info_free(&p->mi);
    free(p->meas), free(p->bvals), free(p->y), free(p->index), free(p->status), free(p->start);
}

/* The angle between the axes (theta, phi) of two directions. */
static double axis_angle(double t1, double p1, double t2, double p2)
{
    const double c = sin(t1) * sin(t2) * cos(p1 - p2) + cos(t1) * cos(t2);
    return acos(fmin(1, fabs(c)));
}

int main(void)
{
    dm_problem p;
    static truth t[NFIT];
    if (make_problem(&p, t) != 0) {
        check(0, "load-ball_1_stick", "%s", dm_last_error());
        return 1;
    }
    const int P = p.mi.nparams;
    const int kS0 = dm_model_param_index(&p.mi, "S0"), kd = dm_model_param_index(&p.mi, "d"),
              kth = dm_model_param_index(&p.mi, "th1"), kph = dm_model_param_index(&p.mi, "ph1"),
              kf = dm_model_param_index(&p.mi, "f1");
    check(kS0 >= 0 && kd >= 0 && kth >= 0 && kph >= 0 && kf >= 0, "parameters", "not found");

    /* In place, on all threads: against the truth. */
    dm_fit_starts(&p, 0);
    dm_fit_starts_fill(&p);
    const double filled_seconds = dm_fit_starts_finish(&p);
    double *ref = malloc((size_t)NFIT * P * sizeof *ref);
    memcpy(ref, p.start, (size_t)NFIT * P * sizeof *ref);
    double worst_s0 = 0, worst_md = 0, worst_angle = 0;
    int constants_kept = 1;
    for (size_t i = 0; i < NFIT; i++) {
        const double *s = ref + i * P;
        if (p.status[i] != DM_STATUS_FITTED) {
            for (int k = 0; k < P; k++) constants_kept &= s[k] == p.mi.params[k].init;
            continue;
        }
        worst_s0 = fmax(worst_s0, fabs(s[kS0] - t[i].s0) / t[i].s0);
        worst_md = fmax(worst_md, fabs(s[kd] - (L1 + 2 * L2) / 3) / ((L1 + 2 * L2) / 3));
        worst_angle = fmax(worst_angle, axis_angle(s[kth], s[kph], t[i].theta, t[i].phi));
        constants_kept &= s[kf] == p.mi.params[kf].init;
    }
    check(worst_s0 < 1e-9, "b0-start-is-the-truth", "largest relative error %.3g", worst_s0);
    check(worst_md < 1e-9, "md-start-is-the-truth", "largest relative error %.3g", worst_md);
    check(worst_angle < 1e-6, "direction-start-is-the-truth", "largest angle %.3g rad",
          worst_angle);
    check(constants_kept, "constants-where-no-rule-or-not-fitted", "a constant start changed");
    check(filled_seconds > 0, "fill-seconds", "%g", filled_seconds);

    /* On their thread, with waits at chunk boundaries and inside chunks: each wait returns
     * with the voxels before its end final, bit for bit the in-place starts. */
    const size_t ends[] = {1, 255, 256, 257, 1000, 4096, NFIT - 1, NFIT};
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < (size_t)NFIT * P; i++) p.start[i] = -12345; /* made anew below */
        dm_fit_starts(&p, 0);
        dm_fit_starts_begin(&p);
        int ordered = 1;
        for (size_t e = 0; e < sizeof ends / sizeof *ends; e++) {
            dm_fit_starts_wait(&p, ends[e]);
            if (memcmp(p.start, ref, ends[e] * P * sizeof *ref) != 0) ordered = 0;
        }
        const double seconds = dm_fit_starts_finish(&p);
        char name[64];
        snprintf(name, sizeof name, "thread-waits-give-final-starts-%d", round);
        check(ordered, name, "a wait returned before its voxels' starts were made");
        snprintf(name, sizeof name, "thread-starts-bitwise-in-place-%d", round);
        check(memcmp(p.start, ref, (size_t)NFIT * P * sizeof *ref) == 0, name,
              "the thread's starts differ from the in-place ones");
        check(seconds > 0, "thread-seconds", "%g", seconds);
    }

    /* Stopped at once: every voxel made or at its constants, nothing else. */
    dm_fit_starts(&p, 0);
    dm_fit_starts_begin(&p);
    dm_fit_starts_finish(&p);
    int whole = 1;
    for (size_t i = 0; i < NFIT; i++) {
        int made = memcmp(p.start + i * P, ref + i * P, P * sizeof *ref) == 0, at_constants = 1;
        for (int k = 0; k < P; k++) at_constants &= p.start[i * P + k] == p.mi.params[k].init;
        whole &= made || at_constants;
    }
    check(whole, "stopped-thread-leaves-made-or-constant", "a voxel's start is neither");

    free(ref);
    free_problem(&p);
    return failures != 0;
}
