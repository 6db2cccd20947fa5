/* The model's data-driven starts (`init b0`, `init from b0 | md | theta(K) | phi(K)`, see
 * docs/model-language.md), voxel by voxel, and the multi-start settings of the fit config.
 * The tensor comes from runtime/dti's linear fit (OLS then WLS) of the voxel's own signal;
 * the same start values go to the CPU and the GPU fitters. */
#include "fit/fit_starts.h"

#include "dti/dti_fit.h"
#include "util/error.h"

#include <math.h>
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

void dm_fit_starts(dm_problem *p, unsigned supplied)
{
    const dm_model_info *mi = &p->mi;
    int P = mi->nparams, need_tensor = 0;
    for (int k = 0; k < P; k++)
        need_tensor |= mi->params[k].start >= DM_START_MD && !(supplied >> k & 1u);
    dm_dti_protocol proto;
    double *g = need_tensor ? directions(p) : NULL;
    if (need_tensor && (!g || !p->bvals || dm_dti_protocol_init(&proto, p->M, p->bvals, g) != 0)) {
        dm_warn("model '%s': no tensor fit for its starts (%s); its constant starts are used",
                mi->name, g && p->bvals ? dm_last_error() : "no b-values or directions");
        need_tensor = 0;
    }
    free(g);

    int failures = 0;
#pragma omp parallel reduction(+ : failures)
    {
        double *work = need_tensor ? malloc((size_t)p->M * 2 * sizeof *work) : NULL;
#pragma omp for schedule(dynamic, 256)
        for (size_t i = 0; i < p->nfit; i++) {
            double *start = p->start + i * P;
            const double *y = p->y + i * (size_t)p->M;
            int usable = p->status[p->index[i]] == DM_STATUS_FITTED;
            dm_dti_result t;
            int have_tensor = 0;
            if (usable && need_tensor) {
                int st = dm_dti_fit_voxel(&proto, y, work, &t);
                have_tensor = st == DM_DTI_FITTED || st == DM_DTI_OLS_ONLY;
                failures += !have_tensor;
            }
            for (int k = 0; k < P; k++) {
                const dm_param_info *x = &mi->params[k];
                double v = x->init;
                if (x->start == DM_START_B0 && usable)
                    v = b0_estimate(p, y);
                else if (x->start >= DM_START_MD && have_tensor && !tensor_start(x, &t, &v))
                    v = x->init;
                start[k] = v;
            }
        }
        free(work);
    }
    if (need_tensor) dm_dti_protocol_free(&proto);
    if (failures)
        dm_warn("model '%s': the tensor fit failed in %d voxel%s; their constant starts are used",
                mi->name, failures, failures == 1 ? "" : "s");
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
