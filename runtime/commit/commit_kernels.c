#include "commit/commit_kernels.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The cylinder's sum, from the model language's math library (one source of the formula). */
typedef double real;
#define DM_FN static inline __attribute__((unused))
#include "mathlib.h"
#undef DM_FN

/* Terms of the Van Gelderen sum at most; they fall as m^-6, so the sum has converged to double
 * precision long before (AMICO keeps 60 tabulated roots and stops at 1e-7 of the sum). */
#define CYLINDER_TERMS 200

static double row_norm(const float *r, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)r[i] * r[i];
    return sqrt(s);
}

/* Per radius and measurement, the exponent's factor 2 gamma^2 G^2 S of the cylinder's
 * perpendicular attenuation (0 where b = 0): nradii x ns. */
static double *cylinder_factors(const dm_commit_model *m, int ns, const double *bval,
                                const dm_commit_pulses *p)
{
    double *f = malloc((size_t)m->nradii * ns * sizeof *f);
    if (!f) return NULL;
    const double d = m->d_par * 1e-6; /* m^2/s */
    for (int r = 0; r < m->nradii; r++)
        for (int s = 0; s < ns; s++) {
            double gg = DM_COMMIT_GAMMA * p->G[s];
            f[(size_t)r * ns + s] = bval[s] > 0
                                        ? 2 * gg * gg *
                                              dm_cylinder_gpd_sum(d, m->radius[r], p->delta[s],
                                                                  p->Delta[s], CYLINDER_TERMS)
                                        : 0;
        }
    return f;
}

int dm_commit_kernels_make(const dm_commit_model *m, const dm_commit_dirs *dirs, int ns,
                           const double *bval, const double *grad, const dm_commit_pulses *pulses,
                           dm_commit_kernels *k)
{
    memset(k, 0, sizeof *k);
    if (m->nradii > 0 && !(pulses && pulses->G && pulses->Delta && pulses->delta))
        return dm_set_error("commit: the cylinder model needs the pulses' timing (--scheme)");
    k->ns = ns;
    k->ndirs = dirs->n;
    k->niso = m->niso;
    k->nic = m->nradii > 0 ? m->nradii : 1;
    if (m->ec_on && !(m->nperp >= 1 && m->nperp <= DM_COMMIT_MAX_PERP))
        return dm_set_error("commit: 1 to %d zeppelin diffusivities, not %d", DM_COMMIT_MAX_PERP,
                            m->nperp);
    k->nec = m->ec_on ? m->nperp : 0;
    size_t tab = (size_t)dirs->n * ns;
    double *cyl = NULL;
    if (m->ic_on) k->ic = malloc(tab * k->nic * sizeof *k->ic);
    if (m->ec_on) k->ec = malloc(tab * k->nec * sizeof *k->ec);
    k->iso = malloc((size_t)(m->niso ? m->niso : 1) * ns * sizeof *k->iso);
    if (m->nradii > 0) cyl = cylinder_factors(m, ns, bval, pulses);
    if ((m->ic_on && !k->ic) || (m->ec_on && !k->ec) || !k->iso || (m->nradii > 0 && !cyl)) {
        free(cyl);
        dm_commit_kernels_free(k);
        return dm_set_error("commit: out of memory for the response tables");
    }
#pragma omp parallel for schedule(static)
    for (int o = 0; o < dirs->n; o++) {
        const double *d = dirs->dir + 3 * o;
        for (int s = 0; s < ns; s++) {
            const double *g = grad + 3 * s;
            double b = bval[s], c = b > 0 ? g[0] * d[0] + g[1] * d[1] + g[2] * d[2] : 0;
            if (k->ic && cyl)
                for (int r = 0; r < m->nradii; r++)
                    k->ic[r * tab + (size_t)o * ns + s] =
                        (float)exp(-b * m->d_par * c * c - (1 - c * c) * cyl[(size_t)r * ns + s]);
            else if (k->ic)
                k->ic[(size_t)o * ns + s] = m->scalar ? 1.0f : (float)exp(-b * m->d_par * c * c);
            for (int z = 0; k->ec && z < k->nec; z++) {
                const double dp = m->d_perp[z];
                k->ec[z * tab + (size_t)o * ns + s] =
                    (float)exp(-b * (dp + (m->d_par - dp) * c * c));
            }
        }
    }
    free(cyl);
    for (int i = 0; i < m->niso; i++)
        for (int s = 0; s < ns; s++)
            k->iso[(size_t)i * ns + s] = /* ScalarMap's lesion: it lowers the map */
                m->scalar ? -1.0f : (float)exp(-bval[s] * m->d_iso[i]);
    /* the preconditioning: each table over the norm of its first row */
    for (int r = 0; r < k->nic; r++) {
        float *t = k->ic ? k->ic + r * tab : NULL;
        k->ic_norm[r] = t ? row_norm(t, ns) : 1;
        for (size_t j = 0; t && j < tab; j++) t[j] = (float)(t[j] / k->ic_norm[r]);
    }
    for (int z = 0; k->ec && z < k->nec; z++) {
        float *t = k->ec + z * tab;
        k->ec_norm[z] = row_norm(t, ns);
        for (size_t j = 0; j < tab; j++) t[j] = (float)(t[j] / k->ec_norm[z]);
    }
    for (int i = 0; i < m->niso; i++) {
        float *r = k->iso + (size_t)i * ns;
        k->iso_norm[i] = row_norm(r, ns);
        for (int s = 0; s < ns; s++) r[s] = (float)(r[s] / k->iso_norm[i]);
    }
    return 0;
}

void dm_commit_kernels_free(dm_commit_kernels *k)
{
    free(k->ic);
    free(k->ec);
    free(k->iso);
    memset(k, 0, sizeof *k);
}
