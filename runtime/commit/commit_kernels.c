#include "commit/commit_kernels.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The cylinder's sum, from the model language's math library (one source of the formula). */
typedef double real;
#define DM_FN static inline __attribute__((unused))
#include "maths/mathlib.h"
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

/* Row t of k's one table (commit_kernels.h). */
static float *table_row(const dm_commit_kernels *k, size_t t)
{
    return k->rows + t * (size_t)k->nsp;
}

/* Rows [first, first + n) divided by the norm of the first; returns that norm. */
static double normalise(const dm_commit_kernels *k, size_t first, int n)
{
    const double nrm = row_norm(table_row(k, first), k->ns);
    float *t = table_row(k, first);
    for (size_t j = 0; j < (size_t)n * k->nsp; j++) t[j] = (float)(t[j] / nrm);
    return nrm;
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
    k->nsp = (ns + 3) & ~3;
    k->nrows = (long)(k->nic + k->nec) * dirs->n + k->niso;
    double *cyl = NULL;
    k->rows = calloc((size_t)(k->nrows ? k->nrows : 1) * k->nsp, sizeof *k->rows);
    if (m->nradii > 0) cyl = cylinder_factors(m, ns, bval, pulses);
    if (!k->rows || (m->nradii > 0 && !cyl)) {
        free(cyl);
        dm_commit_kernels_free(k);
        return dm_set_error("commit: out of memory for the response tables");
    }
    const size_t ec0 = (size_t)k->nic * dirs->n, iso0 = ec0 + (size_t)k->nec * dirs->n;
#pragma omp parallel for schedule(static)
    for (int o = 0; o < dirs->n; o++) {
        const double *d = dirs->dir + 3 * o;
        for (int s = 0; s < ns; s++) {
            const double *g = grad + 3 * s;
            double b = bval[s], c = b > 0 ? g[0] * d[0] + g[1] * d[1] + g[2] * d[2] : 0;
            for (int r = 0; cyl && r < m->nradii; r++)
                table_row(k, (size_t)r * dirs->n + o)[s] =
                    (float)exp(-b * m->d_par * c * c - (1 - c * c) * cyl[(size_t)r * ns + s]);
            if (!cyl) table_row(k, o)[s] = m->scalar ? 1.0f : (float)exp(-b * m->d_par * c * c);
            for (int z = 0; z < k->nec; z++) {
                const double dp = m->d_perp[z];
                table_row(k, ec0 + (size_t)z * dirs->n + o)[s] =
                    (float)exp(-b * (dp + (m->d_par - dp) * c * c));
            }
        }
    }
    free(cyl);
    for (int i = 0; i < m->niso; i++)
        for (int s = 0; s < ns; s++) /* ScalarMap's lesion: it lowers the map */
            table_row(k, iso0 + i)[s] = m->scalar ? -1.0f : (float)exp(-bval[s] * m->d_iso[i]);
    /* the preconditioning: each table (ndirs rows; a ball's, one) over the norm of its first row */
    for (int r = 0; r < k->nic; r++) k->ic_norm[r] = normalise(k, (size_t)r * dirs->n, dirs->n);
    for (int z = 0; z < k->nec; z++)
        k->ec_norm[z] = normalise(k, ec0 + (size_t)z * dirs->n, dirs->n);
    for (int i = 0; i < k->niso; i++) k->iso_norm[i] = normalise(k, iso0 + i, 1);
    return 0;
}

void dm_commit_kernels_free(dm_commit_kernels *k)
{
    free(k->rows);
    memset(k, 0, sizeof *k);
}
