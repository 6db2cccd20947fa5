/* Building a CSD problem's matrices (csd_plan.h). */
#include "csd/csd_plan.h"

#include "io/textio.h"
#include "sphere/directions.h"
#include "sphere/sh.h"
#include "util/error.h"
#include "util/linalg.h"
#include "util/paths.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int dm_csd_dirs_make(int rows, int cols, const double *az_el, const char *what, dm_csd_dirs *d)
{
    memset(d, 0, sizeof *d);
    if (cols != 2)
        return dm_set_error("%s: %d column%s; constraint directions are [ azimuth elevation ] "
                            "pairs in radians, one a row",
                            what, cols, cols == 1 ? "" : "s");
    if (rows < 6)
        return dm_set_error("%s: %d direction%s; a constraint set needs 6 at least", what, rows,
                            rows == 1 ? "" : "s");
    d->dirs = malloc((size_t)rows * 3 * sizeof *d->dirs);
    if (!d->dirs) return dm_set_error("out of memory reading %s", what);
    d->n = rows;
    dm_dirs_from_az_el(rows, az_el, d->dirs);
    return 0;
}

int dm_csd_dirs_read(const char *path, dm_csd_dirs *d)
{
    memset(d, 0, sizeof *d);
    char *shipped = NULL;
    if (!path) {
        shipped = dm_data_path(DM_CSD_DEFAULT_DIRECTIONS);
        if (!shipped)
            return dm_set_error("the default constraint directions (%s) are not where dimoc "
                                "ships them (the build tree or share/dimoc; DIMOC_DATA_DIR)",
                                DM_CSD_DEFAULT_DIRECTIONS);
        path = shipped;
    }
    int rows = 0, cols = 0, rc = -1;
    double *az_el = NULL;
    if (dm_read_matrix(path, &rows, &cols, &az_el) != 0) goto done;
    rc = dm_csd_dirs_make(rows, cols, az_el, path, d);
done:
    free(az_el);
    free(shipped);
    return rc;
}

void dm_csd_dirs_free(dm_csd_dirs *d)
{
    free(d->dirs);
    memset(d, 0, sizeof *d);
}

/* The soft solver's starting point, G (n x m): the signal's SH fit of degree L = min(4, what
 * the directions determine, the response's) deconvolved degree by degree, as MRtrix starts
 * (its default filter passes l <= 4). */
static int initial_deconvolution(const dm_dwi *d, dm_csd_plan *p, const dm_response *r)
{
    const int m = p->m, n = p->n;
    int L = dm_sh_lmax_for(m);
    if (L > 4) L = 4;
    if (L > r->lmax) L = r->lmax;
    if (L > p->lmax) L = p->lmax;
    const int nc = dm_sh_ncoef(L);
    double *B = malloc((size_t)m * nc * sizeof *B), *BtB = calloc((size_t)nc * nc, sizeof *BtB);
    double *col = malloc((size_t)nc * sizeof *col);
    if (!B || !BtB || !col) {
        free(B);
        free(BtB);
        free(col);
        return dm_set_error("out of memory planning CSD");
    }
    for (int j = 0; j < m; j++) dm_sh_basis(L, d->dir + 3 * p->vol[j], B + (size_t)j * nc);
    for (int a = 0; a < nc; a++)
        for (int b = 0; b < nc; b++)
            for (int j = 0; j < m; j++)
                BtB[a * nc + b] += B[(size_t)j * nc + a] * B[(size_t)j * nc + b];
    for (int a = 0; a < nc; a++) BtB[a * nc + a] += 1e-6 * BtB[0];
    int rc = dm_cholesky(BtB, nc, 0.0);
    for (int j = 0; rc == 0 && j < m; j++) {
        memcpy(col, B + (size_t)j * nc, (size_t)nc * sizeof *col);
        dm_cholesky_solve(BtB, nc, col);
        for (int l = 0; l <= L; l += 2)
            for (int mm = -l; mm <= l; mm++) {
                int i = dm_sh_index(l, mm);
                double rh = dm_sh_rh_factor(l) * r->r[0][l / 2];
                p->G[(size_t)i * m + j] = rh != 0.0 ? col[i] / rh : 0.0;
            }
    }
    (void)n;
    free(B);
    free(BtB);
    free(col);
    return rc == 0 ? 0 : dm_set_error("the directions do not determine a degree-%d fit", L);
}

static int is_isotropic(const dm_response *r)
{
    for (int s = 0; s < r->nshell; s++)
        for (int k = 1; k <= r->lmax / 2; k++)
            if (r->r[s][k] != 0.0) return 0;
    return 1;
}

/* dm_csd_plan_build with its direction set at hand. */
static int build(const dm_dwi *d, int ntissue, const dm_response *resp, int *const *map, int lmax,
                 const dm_csd_dirs *set, dm_csd_plan *p)
{
    p->lmax = lmax;
    p->ntissue = ntissue;
    /* Measurements: those of the shells the responses cover (the first response's). */
    int used_shell[DM_MAX_SHELLS] = {0};
    int row_of_shell[DM_CSD_MAX_TISSUES][DM_MAX_SHELLS];
    for (int t = 0; t < ntissue; t++) {
        for (int s = 0; s < DM_MAX_SHELLS; s++) row_of_shell[t][s] = -1;
        for (int s = 0; s < resp[t].nshell; s++) row_of_shell[t][map[t][s]] = s;
    }
    for (int s = 0; s < resp[0].nshell; s++) used_shell[map[0][s]] = 1;
    p->vol = malloc((size_t)d->nvol * sizeof *p->vol);
    if (!p->vol) return dm_set_error("out of memory planning CSD");
    for (int t = 0; t < d->nvol; t++)
        if (used_shell[d->shell_of[t]]) p->vol[p->m++] = t;
    int n = 0;
    for (int t = 0; t < ntissue; t++) {
        p->tissue_lmax[t] = is_isotropic(&resp[t]) ? 0 : t == 0 ? lmax : resp[t].lmax;
        if (p->tissue_lmax[t] > lmax) p->tissue_lmax[t] = lmax;
        p->tissue_off[t] = n;
        n += dm_sh_ncoef(p->tissue_lmax[t]);
    }
    p->n = n;
    const int ndir = set->n;
    p->k = 0;
    for (int t = 0; t < ntissue; t++) p->k += p->tissue_lmax[t] ? ndir : 1;
    const int m = p->m, k = p->k;
    p->A = calloc((size_t)m * n, sizeof(double));
    p->G = calloc((size_t)n * m, sizeof(double));
    p->C = calloc((size_t)k * n, sizeof(double));
    p->P = calloc((size_t)k * n, sizeof(double));
    p->Qd = calloc((size_t)k, sizeof(double));
    p->Qdf = malloc((size_t)k * sizeof(float));
    p->At = calloc((size_t)n * m, sizeof(double));
    p->Hp = calloc((size_t)n * (n + 1) / 2, sizeof(double));
    p->Ct = calloc((size_t)n * k, sizeof(double));
    p->Hpf = malloc((size_t)n * (n + 1) / 2 * sizeof(float));
    p->Ctf = malloc((size_t)n * k * sizeof(float));
    p->Gf = malloc((size_t)n * m * sizeof(float));
    p->Cf = malloc((size_t)k * n * sizeof(float));
    p->Pf = malloc((size_t)k * n * sizeof(float));
    p->Atf = malloc((size_t)n * m * sizeof(float));
    double *H = calloc((size_t)n * n, sizeof(double));
    const double *dirs = set->dirs;
    double Y[dm_sh_ncoef(DM_SH_LMAX_MAX)];
    if (!p->A || !p->G || !p->C || !p->P || !p->Qd || !p->Qdf || !p->At || !p->Hp || !p->Ct ||
        !p->Hpf || !p->Ctf || !p->Gf || !p->Cf || !p->Pf || !p->Atf || !H) {
        free(H);
        return dm_set_error("out of memory planning CSD (%d unknowns, %d measurements)", n, m);
    }
    /* A: measurement j of shell s sees tissue t through its rotational harmonics. */
    for (int j = 0; j < m; j++) {
        int vol = p->vol[j], s = d->shell_of[vol];
        int zero = d->bval[vol] <= DM_BZERO_MAX;
        for (int t = 0; t < ntissue; t++) {
            int row = row_of_shell[t][s], lt = p->tissue_lmax[t];
            if (row < 0) continue; /* this tissue has no response at this shell: 0 */
            dm_sh_basis(lt, d->dir + 3 * vol, Y);
            for (int l = 0; l <= lt; l += 2) {
                double rh = l <= resp[t].lmax ? dm_sh_rh_factor(l) * resp[t].r[row][l / 2] : 0.0;
                for (int mm = -l; mm <= l; mm++) {
                    double y = zero ? (l == 0 ? 0.5 / sqrt(M_PI) : 0.0) : Y[dm_sh_index(l, mm)];
                    p->A[(size_t)j * n + p->tissue_off[t] + dm_sh_index(l, mm)] = y * rh;
                }
            }
        }
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b <= a; b++) {
            double s = 0.0;
            for (int j = 0; j < m; j++) s += p->A[(size_t)j * n + a] * p->A[(size_t)j * n + b];
            H[a * n + b] = H[b * n + a] = s;
        }
    double diag = 0.0;
    for (int a = 0; a < n; a++)
        if (H[a * n + a] > diag) diag = H[a * n + a];
    p->soft = ntissue == 1 && resp[0].nshell == 1;
    p->ridge = p->soft ? 2e-4 * H[0] : 1e-10 * diag;
    for (int a = 0; a < n; a++) H[a * n + a] += p->ridge;
    for (int a = 0, ab = 0; a < n; a++)
        for (int b = 0; b <= a; b++, ab++) p->Hp[ab] = H[a * n + b];
    for (int a = 0; a < n; a++)
        for (int j = 0; j < m; j++) p->At[(size_t)a * m + j] = p->A[(size_t)j * n + a];
    if (dm_cholesky(H, n, 0.0) != 0) {
        free(H);
        return dm_set_error("the responses give a singular deconvolution (a response of zeros?)");
    }
    /* Constraints: each anisotropic tissue's FOD on the dense set, each isotropic one >= 0. */
    int row = 0;
    for (int t = 0; t < ntissue; t++) {
        int lt = p->tissue_lmax[t], nc = dm_sh_ncoef(lt);
        if (lt == 0) {
            p->C[(size_t)row++ * n + p->tissue_off[t]] = 1.0;
            continue;
        }
        for (int i = 0; i < ndir; i++, row++) {
            dm_sh_basis(lt, dirs + 3 * i, Y);
            memcpy(p->C + (size_t)row * n + p->tissue_off[t], Y, (size_t)nc * sizeof(double));
        }
    }
    double *col = malloc((size_t)n * sizeof(double));
    if (!col) {
        free(H);
        return dm_set_error("out of memory planning CSD");
    }
    if (p->soft) {
        /* The penalty weight on each negative direction, as MRtrix's csd: 50 r_0 / (directions). */
        double w = 50.0 * resp[0].r[0][0] / ndir;
        for (size_t i = 0; i < (size_t)k * n; i++) p->C[i] *= w;
        if (initial_deconvolution(d, p, &resp[0]) != 0) {
            free(col);
            free(H);
            return -1;
        }
    }
    for (int j = 0; j < m && !p->soft; j++) { /* G = H^-1 A': column j is H^-1 (row j of A) */
        memcpy(col, p->A + (size_t)j * n, (size_t)n * sizeof(double));
        dm_cholesky_solve(H, n, col);
        for (int a = 0; a < n; a++) p->G[(size_t)a * m + j] = col[a];
    }
    for (int i = 0; i < k; i++) { /* P: row i is H^-1 C_i' */
        memcpy(p->P + (size_t)i * n, p->C + (size_t)i * n, (size_t)n * sizeof(double));
        dm_cholesky_solve(H, n, p->P + (size_t)i * n);
    }
    for (int i = 0; i < k; i++) {
        double q = 0.0;
        for (int a = 0; a < n; a++) q += p->C[(size_t)i * n + a] * p->P[(size_t)i * n + a];
        p->Qd[i] = q;
        p->Qdf[i] = (float)q;
    }
    for (size_t i = 0; i < (size_t)n * m; i++) {
        p->Gf[i] = (float)p->G[i];
        p->Atf[i] = (float)p->At[i];
    }
    for (size_t i = 0; i < (size_t)n * (n + 1) / 2; i++) p->Hpf[i] = (float)p->Hp[i];
    for (int i = 0; i < k; i++)
        for (int a = 0; a < n; a++) {
            p->Ct[(size_t)a * k + i] = p->C[(size_t)i * n + a];
            p->Ctf[(size_t)a * k + i] = (float)p->C[(size_t)i * n + a];
        }
    for (size_t i = 0; i < (size_t)k * n; i++) {
        p->Cf[i] = (float)p->C[i];
        p->Pf[i] = (float)p->P[i];
    }
    free(col);
    free(H);
    return 0;
}

int dm_csd_plan_build(const dm_dwi *d, int ntissue, const dm_response *resp, int *const *map,
                      int lmax, const dm_csd_dirs *set, dm_csd_plan *p)
{
    memset(p, 0, sizeof *p);
    dm_csd_dirs shipped = {0};
    if (!set) {
        if (dm_csd_dirs_read(NULL, &shipped) != 0) return -1;
        set = &shipped;
    }
    int rc = build(d, ntissue, resp, map, lmax, set, p);
    dm_csd_dirs_free(&shipped);
    if (rc != 0) dm_csd_plan_free(p);
    return rc;
}

void dm_csd_plan_free(dm_csd_plan *p)
{
    free(p->vol);
    free(p->A);
    free(p->G);
    free(p->C);
    free(p->P);
    free(p->Qd);
    free(p->Qdf);
    free(p->At);
    free(p->Hp);
    free(p->Ct);
    free(p->Hpf);
    free(p->Ctf);
    free(p->Gf);
    free(p->Cf);
    free(p->Pf);
    free(p->Atf);
    memset(p, 0, sizeof *p);
}
