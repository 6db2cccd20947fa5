/* The model's data-driven starts (`init b0`, `init from b0 | md | theta(K) | phi(K)`, see
 * docs/model-language.md), voxel by voxel, and the multi-start settings of the fit config.
 * The tensor comes from runtime/dti's linear fit (OLS then WLS) of the voxel's own signal;
 * the same start values go to the CPU and the GPU fitters.  The starts are planned with the
 * stage and made before a CPU fit, or for a GPU fit on a thread of their own while the GPU
 * opens and fits, each batch waiting for its voxels' (241,416 tensors of 105 measurements took
 * 0.09-0.10 s of an H200 host's 16 cores, about as long as the GPU's grid search on them). */
#include "fit/fit_starts.h"

#include "dti/dti_fit.h"
#include "util/error.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The mean of the b <= 50 measurements; the largest measurement when the model reads no
 * b-values or none is that small. */
static double b0_estimate(const dm_problem *p, const double *y)
{
    double sum = 0, mx = 0;
    int n = 0;
    for (int j = 0; j < p->M; j++) {
        if (y[j] > mx) mx = y[j];
        if (p->bvals && p->bvals[j] <= 50) {
            sum += y[j];
            n++;
        }
    }
    return n && sum > 0 ? sum / n : mx;
}

/* The unit gradient directions (M x 3) from the bvecs measure's columns; NULL when none. */
static double *directions(const dm_problem *p)
{
    const dm_model_info *mi = &p->mi;
    for (int i = 0; i < mi->nmeasures; i++) {
        if (mi->measures[i].source != DM_SRC_BVECS) continue;
        double *g = malloc((size_t)p->M * 3 * sizeof *g);
        for (int j = 0; j < p->M; j++)
            for (int c = 0; c < 3; c++)
                g[3 * j + c] = p->meas[(size_t)j * mi->measure_width + mi->measures[i].column + c];
        return g;
    }
    return NULL;
}

/* The start of rule `x` from a tensor fit; 0 when the rule has no value (the fallback stays). */
static int tensor_start(const dm_param_info *x, const dm_dti_result *t, double *out)
{
    if (x->start == DM_START_MD) {
        if (!(t->MD > 0) || !isfinite(t->MD)) return 0;
        *out = t->MD;
        return 1;
    }
    const double *v = t->vec[x->start_axis - 1];
    double s = v[2] < 0 ? -1 : 1; /* an axis: the end with z >= 0 */
    double vx = s * v[0], vy = s * v[1], vz = s * v[2];
    if (!(vx * vx + vy * vy + vz * vz > 0.5)) return 0;
    if (x->start == DM_START_THETA)
        *out = acos(vz > 1 ? 1 : vz);
    else {
        *out = atan2(vy, vx);
        if (*out < 0) *out += 2 * M_PI;
    }
    return 1;
}

/* The starts still to be made from each voxel's signal (dm_problem.starts), and the thread
 * that makes them chunk by chunk in voxel order (dm_fit_starts_begin) while the GPU fits. */
struct dm_fit_starts_plan {
    unsigned pending; /* bit k: parameter k's start comes from the voxel's signal */
    /* the model's parameters as planned: a stage may run its own program's model meanwhile */
    dm_param_info *params;
    int nparams;
    int need_tensor;
    dm_dti_protocol proto;
    atomic_int failures; /* voxels whose tensor fit failed */
    pthread_t thread;
    int threaded, threads; /* the filling thread started; its OpenMP threads */
    pthread_mutex_t lock;
    pthread_cond_t more;
    size_t filled;         /* voxels [0, filled) made (all of them once the thread ends) */
    atomic_size_t next;    /* the next chunk a thread of the filling team takes */
    unsigned char *done;   /* chunk c made (under lock) */
    double began, seconds; /* the thread's start; its time to make every start */
    atomic_int stop;       /* the thread is asked to end early */
};

double dm_fit_clamp_start(const dm_param_info *x, double v)
{
    if (x->periodic) return v;
    double width = isfinite(x->hi - x->lo) ? x->hi - x->lo : 1;
    if (isfinite(x->lo) && (v < x->lo || (!x->lo_closed && v == x->lo)))
        v = x->lo_closed ? x->lo : x->lo + 1e-6 * fmax(width, fabs(x->lo));
    if (isfinite(x->hi) && (v > x->hi || (!x->hi_closed && v == x->hi)))
        v = x->hi_closed ? x->hi : x->hi - 1e-6 * fmax(width, fabs(x->hi));
    return v;
}

void dm_fit_starts(dm_problem *p, unsigned supplied)
{
    const dm_model_info *mi = &p->mi;
    int P = mi->nparams, need_tensor = 0;
    unsigned pending = 0;
    for (int k = 0; k < P; k++) {
        const int rule = mi->params[k].start;
        if (supplied >> k & 1u || (rule != DM_START_B0 && rule < DM_START_MD)) continue;
        pending |= 1u << k;
        need_tensor |= rule >= DM_START_MD;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p->nfit; i++)
        for (int k = 0; k < P; k++) p->start[i * P + k] = mi->params[k].init;
    if (!pending) return;
    struct dm_fit_starts_plan *plan = calloc(1, sizeof *plan);
    plan->pending = pending;
    plan->nparams = P;
    plan->params = malloc((size_t)P * sizeof *plan->params);
    memcpy(plan->params, mi->params, (size_t)P * sizeof *plan->params);
    double *g = need_tensor ? directions(p) : NULL;
    if (need_tensor &&
        (!g || !p->bvals || dm_dti_protocol_init(&plan->proto, p->M, p->bvals, g) != 0)) {
        dm_warn("model '%s': no tensor fit for its starts (%s); its constant starts are used",
                mi->name, g && p->bvals ? dm_last_error() : "no b-values or directions");
        need_tensor = 0;
    }
    free(g);
    plan->need_tensor = need_tensor;
    p->starts = plan;
}

/* Voxel i's starts from its signal (the constants stay for a voxel that is not fitted); 1 when
 * its tensor fit failed.  work: 2M doubles. */
static int fill_voxel(dm_problem *p, size_t i, double *work)
{
    const struct dm_fit_starts_plan *plan = p->starts;
    const int P = plan->nparams;
    double *start = p->start + i * P;
    const double *y = p->y + i * (size_t)p->M;
    if (p->status[p->index[i]] != DM_STATUS_FITTED) return 0;
    dm_dti_result t;
    int have_tensor = 0;
    if (plan->need_tensor) {
        int st = dm_dti_fit_voxel(&plan->proto, y, work, &t);
        have_tensor = st == DM_DTI_FITTED || st == DM_DTI_OLS_ONLY;
    }
    for (int k = 0; k < P; k++) {
        if (!(plan->pending >> k & 1u)) continue;
        const dm_param_info *x = &plan->params[k];
        double v = x->init;
        if (x->start == DM_START_B0)
            v = b0_estimate(p, y);
        else if (have_tensor && !tensor_start(x, &t, &v))
            v = x->init;
        start[k] = dm_fit_clamp_start(x, v);
    }
    return plan->need_tensor && !have_tensor;
}

void dm_fit_starts_fill(dm_problem *p)
{
    struct dm_fit_starts_plan *plan = p->starts;
    if (!plan || plan->threaded) return;
    const double t0 = dm_now_seconds();
    int failures = 0;
#pragma omp parallel reduction(+ : failures)
    {
        double *work = malloc((size_t)p->M * 2 * sizeof *work);
#pragma omp for schedule(dynamic, 256)
        for (size_t i = 0; i < p->nfit; i++) failures += fill_voxel(p, i, work);
        free(work);
    }
    plan->failures = failures;
    plan->filled = p->nfit;
    plan->seconds = dm_now_seconds() - t0;
}

/* The thread's team takes chunks of voxels in order, each as it is free, with no barrier
 * between them: beside other work on the cores (a study's reading and writing), a team member
 * that is descheduled holds back its own chunk only.  A chunk made moves the frontier of
 * dm_fit_starts_wait past every chunk made before it. */
enum { FILL_CHUNK = 256 };

static void *fill_main(void *arg)
{
    dm_problem *p = arg;
    struct dm_fit_starts_plan *plan = p->starts;
    const size_t chunks = (p->nfit + FILL_CHUNK - 1) / FILL_CHUNK;
    omp_set_num_threads(plan->threads); /* the caller's setting (--threads) */
#pragma omp parallel
    {
        double *work = malloc((size_t)p->M * 2 * sizeof *work);
        int failures = 0;
        for (size_t c;
             !atomic_load(&plan->stop) && (c = atomic_fetch_add(&plan->next, 1)) < chunks;) {
            const size_t end = (c + 1) * FILL_CHUNK < p->nfit ? (c + 1) * FILL_CHUNK : p->nfit;
            for (size_t i = c * FILL_CHUNK; i < end; i++) failures += fill_voxel(p, i, work);
            pthread_mutex_lock(&plan->lock);
            plan->done[c] = 1;
            size_t filled = plan->filled;
            while (filled < p->nfit && plan->done[filled / FILL_CHUNK])
                filled = filled + FILL_CHUNK < p->nfit ? filled + FILL_CHUNK : p->nfit;
            if (filled != plan->filled) {
                plan->filled = filled;
                pthread_cond_broadcast(&plan->more);
            }
            pthread_mutex_unlock(&plan->lock);
        }
        atomic_fetch_add(&plan->failures, failures);
        free(work);
    }
    pthread_mutex_lock(&plan->lock); /* stopped early: the waits end (the constants stay) */
    plan->filled = p->nfit;
    plan->seconds = dm_now_seconds() - plan->began;
    pthread_cond_broadcast(&plan->more);
    pthread_mutex_unlock(&plan->lock);
    return NULL;
}

void dm_fit_starts_begin(dm_problem *p)
{
    struct dm_fit_starts_plan *plan = p->starts;
    if (!plan || plan->threaded || plan->filled == p->nfit) return;
    plan->threads = omp_get_max_threads();
    plan->done = calloc((p->nfit + FILL_CHUNK - 1) / FILL_CHUNK, 1);
    plan->began = dm_now_seconds();
    pthread_mutex_init(&plan->lock, NULL);
    pthread_cond_init(&plan->more, NULL);
    plan->threaded = plan->done && pthread_create(&plan->thread, NULL, fill_main, p) == 0;
    if (!plan->threaded) { /* no thread: made here */
        pthread_mutex_destroy(&plan->lock);
        pthread_cond_destroy(&plan->more);
        dm_fit_starts_fill(p);
    }
}

void dm_fit_starts_wait(dm_problem *p, size_t end)
{
    struct dm_fit_starts_plan *plan = p->starts;
    if (!plan || !plan->threaded) return;
    pthread_mutex_lock(&plan->lock);
    while (plan->filled < end) pthread_cond_wait(&plan->more, &plan->lock);
    pthread_mutex_unlock(&plan->lock);
}

double dm_fit_starts_finish(dm_problem *p)
{
    struct dm_fit_starts_plan *plan = p->starts;
    if (!plan) return 0;
    if (plan->threaded) {
        atomic_store(&plan->stop, 1);
        pthread_join(plan->thread, NULL);
        pthread_mutex_destroy(&plan->lock);
        pthread_cond_destroy(&plan->more);
    }
    p->starts = NULL;
    const int failures = plan->failures;
    if (failures)
        dm_warn("model '%s': the tensor fit failed in %d voxel%s; their constant starts are used",
                p->mi.name, failures, failures == 1 ? "" : "s");
    if (plan->need_tensor) dm_dti_protocol_free(&plan->proto);
    const double seconds = plan->seconds;
    free(plan->done);
    free(plan->params);
    free(plan);
    return seconds;
}

void dm_fit_multistart_config(dm_problem *p, unsigned user_starts)
{
    const dm_model_info *mi = &p->mi;
    dm_fit_config *cfg = &p->cfg;
    cfg->starts = 1;
    cfg->norient = 0;
    /* The pairs in the order of their tensor axis K. */
    for (int axis = 1; axis <= 3; axis++) {
        int th = -1, ph = -1;
        for (int k = 0; k < mi->nparams; k++) {
            if (mi->params[k].start_axis != axis) continue;
            if (mi->params[k].start == DM_START_THETA) th = k;
            if (mi->params[k].start == DM_START_PHI) ph = k;
        }
        if (th < 0 || ph < 0) continue;
        cfg->orient_theta[cfg->norient] = th;
        cfg->orient_phi[cfg->norient] = ph;
        cfg->norient++;
    }
    /* Turning directions that the user gave (--init, --init-from) or holds (--fixed) would
     * override the user: one start then. */
    unsigned pairs = 0;
    for (int i = 0; i < cfg->norient; i++)
        pairs |= 1u << cfg->orient_theta[i] | 1u << cfg->orient_phi[i];
    if (mi->multistart > 1 && cfg->norient >= 2 && !(pairs & (user_starts | cfg->fixed_mask)))
        cfg->starts = mi->multistart;
}
