#include "commit/commit_kernels.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double row_norm(const float *r, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)r[i] * r[i];
    return sqrt(s);
}

int dm_commit_kernels_make(const dm_commit_model *m, const dm_commit_dirs *dirs, int ns,
                           const double *bval, const double *grad, dm_commit_kernels *k)
{
    memset(k, 0, sizeof *k);
    k->ns = ns;
    k->ndirs = dirs->n;
    k->niso = m->niso;
    size_t tab = (size_t)dirs->n * ns;
    if (m->ic_on) k->ic = malloc(tab * sizeof *k->ic);
    if (m->ec_on) k->ec = malloc(tab * sizeof *k->ec);
    k->iso = malloc((size_t)(m->niso ? m->niso : 1) * ns * sizeof *k->iso);
    if ((m->ic_on && !k->ic) || (m->ec_on && !k->ec) || !k->iso) {
        dm_commit_kernels_free(k);
        return dm_set_error("commit: out of memory for the response tables");
    }
#pragma omp parallel for schedule(static)
    for (int o = 0; o < dirs->n; o++) {
        const double *d = dirs->dir + 3 * o;
        for (int s = 0; s < ns; s++) {
            const double *g = grad + 3 * s;
            double b = bval[s], c = b > 0 ? g[0] * d[0] + g[1] * d[1] + g[2] * d[2] : 0;
            if (k->ic)
                k->ic[(size_t)o * ns + s] = m->scalar ? 1.0f : (float)exp(-b * m->d_par * c * c);
            if (k->ec)
                k->ec[(size_t)o * ns + s] =
                    (float)exp(-b * (m->d_perp + (m->d_par - m->d_perp) * c * c));
        }
    }
    for (int i = 0; i < m->niso; i++)
        for (int s = 0; s < ns; s++)
            k->iso[(size_t)i * ns + s] = /* ScalarMap's lesion: it lowers the map */
                m->scalar ? -1.0f : (float)exp(-bval[s] * m->d_iso[i]);
    /* the preconditioning: each table over the norm of its first row */
    k->ic_norm = k->ic ? row_norm(k->ic, ns) : 1;
    k->ec_norm = k->ec ? row_norm(k->ec, ns) : 1;
    for (size_t j = 0; k->ic && j < tab; j++) k->ic[j] = (float)(k->ic[j] / k->ic_norm);
    for (size_t j = 0; k->ec && j < tab; j++) k->ec[j] = (float)(k->ec[j] / k->ec_norm);
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
