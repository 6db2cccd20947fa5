/* Multi-tissue log-domain intensity normalisation (normalise.h), written from the description
 * of mtnormalise (Raffelt et al. 2017, Dhollander et al. 2021) and its documented behaviour:
 *
 *   model     sum_t a_t c_t(v) / b(v) ~ reference, with c_t the tissues' l = 0 terms, a_t the
 *             balance factors (geometric mean 1) and b = exp(p), p a polynomial of the voxel
 *             position (the bias; the maps are multiplied by 1 / b).
 *   iterate   max_iter times: up to balance_iter rounds of {a by linear least squares of
 *             sum_t a_t c_t / b against the reference over the inliers; outliers again}, then p
 *             by least squares of log(sum_t a_t c_t) - log(reference) over the inliers.
 *   outliers  a voxel is an inlier when log(sum_t a_t c_t) - p lies within outlier_range
 *             interquartile ranges of the quartiles of all fitted voxels; it is decided afresh
 *             each time, so a voxel rejected early (when the field was still flat) comes back
 *             once the field explains it.  The first pass, before any fit, uses a wider range.
 *
 * The balance factors are fitted in the linear domain (the sum of tissues is linear in them)
 * and the field in the log domain (the bias is multiplicative, and a polynomial of its log is
 * positive by construction). */
#include "csd/normalise.h"

#include "util/key_sort.h"
#include "util/error.h"
#include "util/interrupt.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 20 /* monomials of total order <= 3 in 3 variables */

void dm_mtnorm_defaults(dm_mtnorm_settings *s)
{
    s->order = 3;
    s->reference = DM_MTNORM_REFERENCE;
    s->max_iter = 15;
    s->balance_iter = 7;
    s->outlier_range = 1.5;
    s->first_outlier_range = 3.0;
    s->tolerance = 1e-6;
    s->balanced = 1;
}

/* The fit over the mask's voxels. */
typedef struct fit {
    size_t n;           /* voxels in the mask */
    size_t *vox;        /* their grid indices */
    int ntissue;        /* tissues */
    double *c;          /* n x ntissue l = 0 terms, negative values as 0 */
    double *logb;       /* n: p, the log bias */
    double *resid;      /* n: log(sum) - p, NaN where the sum is not positive */
    double *work;       /* n: for the quartiles */
    unsigned char *in;  /* n: inlier flags */
    int nx, ny;         /* grid (for a voxel's position) */
    double centre[3];   /* the positions are (index - centre) / half, in [-1, 1] over the */
    double half[3];     /* mask's bounding box, so that the normal equations of the cubic */
    int nterm;          /* stay well conditioned whatever the grid's size */
    int power[MAXP][3]; /* exponents of x, y, z of each monomial, lowest total order first */
} fit;

/* The monomials of voxel v at the grid position (i, j, k). */
static void basis(const fit *f, size_t v, double *phi)
{
    size_t i = v % (size_t)f->nx, j = (v / (size_t)f->nx) % (size_t)f->ny;
    size_t k = v / ((size_t)f->nx * (size_t)f->ny);
    double pos[3] = {(double)i, (double)j, (double)k}, pw[3][4];
    for (int a = 0; a < 3; a++) {
        double u = f->half[a] > 0 ? (pos[a] - f->centre[a]) / f->half[a] : 0.0;
        pw[a][0] = 1.0;
        for (int e = 1; e < 4; e++) pw[a][e] = pw[a][e - 1] * u;
    }
    for (int t = 0; t < f->nterm; t++)
        phi[t] = pw[0][f->power[t][0]] * pw[1][f->power[t][1]] * pw[2][f->power[t][2]];
}

static double dot(const double *a, const double *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Marks the inliers for the factors a and the current field; returns how many voxels changed. */
static size_t detect_outliers(fit *f, const double *a, double range)
{
    size_t m = 0, changed = 0;
    for (size_t v = 0; v < f->n; v++) {
        double s = dot(f->c + v * f->ntissue, a, f->ntissue);
        f->resid[v] = s > 0 && isfinite(s) ? log(s) - f->logb[v] : NAN;
        if (isfinite(f->resid[v])) f->work[m++] = f->resid[v];
    }
    double lo = 0, hi = -1; /* no finite voxel: every voxel out */
    if (m > 0) {
        double q1 = dm_select_kth(f->work, m, (size_t)floor(0.25 * (double)(m - 1) + 0.5));
        double q3 = dm_select_kth(f->work, m, (size_t)floor(0.75 * (double)(m - 1) + 0.5));
        lo = q1 - range * (q3 - q1);
        hi = q3 + range * (q3 - q1);
    }
    for (size_t v = 0; v < f->n; v++) {
        double r = f->resid[v];
        unsigned char in = isfinite(r) && r >= lo && r <= hi;
        changed += in != f->in[v];
        f->in[v] = in;
    }
    return changed;
}

/* Cholesky factorisation in place (lower triangle of the n x n row-major A) that drops the
 * unknowns whose pivot falls below rel_tol of their diagonal: they depend on earlier ones over
 * the fitted voxels (a mask of one slice has no z terms, a 2-slice mask no z^2), and get 0,
 * which leaves the least-squares fit over those voxels the same.  drop[j] says which. */
static void cholesky_dropping(double *A, int n, double rel_tol, int *drop)
{
    for (int j = 0; j < n; j++) {
        double d = A[j * n + j], orig = d;
        for (int k = 0; k < j; k++) d -= A[j * n + k] * A[j * n + k];
        drop[j] = !(orig > 0) || !(d > rel_tol * orig);
        if (drop[j]) {
            for (int i = j; i < n; i++) A[i * n + j] = 0;
            continue;
        }
        d = sqrt(d);
        A[j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = A[i * n + j];
            for (int k = 0; k < j; k++) s -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = s / d;
        }
    }
}

/* Solves L L' x = b with the factor of cholesky_dropping (dropped unknowns: 0). */
static void cholesky_solve(const double *L, int n, const int *drop, const double *b, double *x)
{
    for (int i = 0; i < n; i++) {
        if (drop[i]) {
            x[i] = 0;
            continue;
        }
        double s = b[i];
        for (int k = 0; k < i; k++) s -= L[i * n + k] * x[k];
        x[i] = s / L[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        if (drop[i]) continue;
        double s = x[i];
        for (int k = i + 1; k < n; k++) s -= L[k * n + i] * x[k];
        x[i] = s / L[i * n + i];
    }
}

/* The balance factors: least squares of sum_t a_t c_t / b against the reference over the
 * inliers, then scaled to a geometric mean of 1 (the overall scale is the field's). */
static int update_balance(const fit *f, double reference, double *a)
{
    int nt = f->ntissue;
    double H[nt * nt], g[nt], x[nt];
    memset(H, 0, sizeof H);
    memset(g, 0, sizeof g);
    for (size_t v = 0; v < f->n; v++) {
        if (!f->in[v]) continue;
        double inv = exp(-f->logb[v]);
        for (int t = 0; t < nt; t++) x[t] = f->c[v * nt + t] * inv;
        for (int t = 0; t < nt; t++) {
            g[t] += x[t] * reference;
            for (int u = 0; u <= t; u++) H[t * nt + u] += x[t] * x[u];
        }
    }
    /* A tissue absent from every inlier has no factor to fit: it keeps 1. */
    int act[nt], na = 0;
    for (int t = 0; t < nt; t++)
        if (H[t * nt + t] > 0) act[na++] = t;
    if (na == 0) return dm_set_error("mtnormalise: no tissue has a positive l=0 term in the mask");
    double R[na * na], r[na], y[na];
    int drop[na];
    for (int i = 0; i < na; i++) {
        r[i] = g[act[i]];
        for (int k = 0; k <= i; k++) R[i * na + k] = H[act[i] * nt + act[k]];
    }
    cholesky_dropping(R, na, 1e-12, drop);
    for (int i = 0; i < na; i++)
        if (drop[i])
            return dm_set_error("mtnormalise: tissue %d's l=0 map is proportional to a mix of the "
                                "others over the mask; their balance cannot be told apart",
                                act[i] + 1);
    cholesky_solve(R, na, drop, r, y);
    double logmean = 0;
    for (int i = 0; i < na; i++) {
        if (!(y[i] > 0) || !isfinite(y[i]))
            return dm_set_error("mtnormalise: tissue %d got a non-positive balance factor (%g)",
                                act[i] + 1, y[i]);
        logmean += log(y[i]) / na;
    }
    for (int t = 0; t < nt; t++) a[t] = 1.0;
    for (int i = 0; i < na; i++) a[act[i]] = y[i] / exp(logmean);
    return 0;
}

/* The log field: least squares of log(sum_t a_t c_t) - log(reference) over the inliers.
 * Returns the largest change of the log field over the mask. */
static double update_field(fit *f, const double *a, double log_ref, double *coef)
{
    int P = f->nterm, drop[MAXP];
    double H[MAXP * MAXP] = {0}, g[MAXP] = {0}, phi[MAXP];
    for (size_t v = 0; v < f->n; v++) {
        if (!f->in[v]) continue;
        double s = dot(f->c + v * f->ntissue, a, f->ntissue);
        if (!(s > 0) || !isfinite(s)) continue;
        double y = log(s) - log_ref;
        basis(f, f->vox[v], phi);
        for (int i = 0; i < P; i++) {
            g[i] += phi[i] * y;
            for (int k = 0; k <= i; k++) H[i * P + k] += phi[i] * phi[k];
        }
    }
    cholesky_dropping(H, P, 1e-10, drop);
    cholesky_solve(H, P, drop, g, coef);
    double change = 0;
    for (size_t v = 0; v < f->n; v++) {
        basis(f, f->vox[v], phi);
        double p = dot(phi, coef, P);
        if (fabs(p - f->logb[v]) > change) change = fabs(p - f->logb[v]);
        f->logb[v] = p;
    }
    return change;
}

static int check_settings(const dm_mtnorm_settings *s)
{
    if (s->order < 0 || s->order > 3)
        return dm_set_error("mtnormalise: order must be 0..3, got %d", s->order);
    if (!(s->reference > 0) || !isfinite(s->reference))
        return dm_set_error("mtnormalise: reference must be positive, got %g", s->reference);
    if (s->max_iter < 1 || s->balance_iter < 1)
        return dm_set_error("mtnormalise: iterations must be at least 1, got %d and %d",
                            s->max_iter, s->balance_iter);
    if (!(s->outlier_range > 0) || !(s->first_outlier_range > 0))
        return dm_set_error("mtnormalise: outlier ranges must be positive, got %g and %g",
                            s->outlier_range, s->first_outlier_range);
    if (!(s->tolerance >= 0)) return dm_set_error("mtnormalise: tolerance must be >= 0");
    return 0;
}

static void fit_free(fit *f)
{
    free(f->vox);
    free(f->c);
    free(f->logb);
    free(f->resid);
    free(f->work);
    free(f->in);
}

/* Collects the mask's voxels, their l = 0 terms and the scaling of the positions. */
static int fit_init(fit *f, const dm_volume *grid, const unsigned char *mask, int ntissue,
                    double *const *maps, const int *stride, int order)
{
    size_t nvox = DM_NVOX(grid);
    memset(f, 0, sizeof *f);
    f->ntissue = ntissue;
    f->nx = grid->nx;
    f->ny = grid->ny;
    for (size_t v = 0; v < nvox; v++) f->n += !mask || mask[v];
    if (f->n == 0) return dm_set_error("mtnormalise: the mask is empty");
    f->vox = malloc(f->n * sizeof *f->vox);
    f->c = malloc(f->n * ntissue * sizeof *f->c);
    f->logb = calloc(f->n, sizeof *f->logb);
    f->resid = malloc(f->n * sizeof *f->resid);
    f->work = malloc(f->n * sizeof *f->work);
    f->in = calloc(f->n, 1);
    if (!f->vox || !f->c || !f->logb || !f->resid || !f->work || !f->in) {
        fit_free(f);
        return dm_set_error("mtnormalise: out of memory for %zu voxels", f->n);
    }
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    size_t n = 0;
    for (size_t v = 0; v < nvox; v++) {
        if (mask && !mask[v]) continue;
        f->vox[n] = v;
        for (int t = 0; t < ntissue; t++) {
            double x = maps[t][v * (size_t)stride[t]];
            f->c[n * ntissue + t] = x < 0 ? 0.0 : x; /* NaN stays NaN: the voxel stays out */
        }
        double pos[3] = {(double)(v % f->nx), (double)((v / f->nx) % f->ny),
                         (double)(v / ((size_t)f->nx * f->ny))};
        for (int a = 0; a < 3; a++) {
            if (pos[a] < lo[a]) lo[a] = pos[a];
            if (pos[a] > hi[a]) hi[a] = pos[a];
        }
        n++;
    }
    for (int a = 0; a < 3; a++) {
        f->centre[a] = 0.5 * (lo[a] + hi[a]);
        f->half[a] = 0.5 * (hi[a] - lo[a]);
    }
    for (int deg = 0; deg <= order; deg++)
        for (int x = deg; x >= 0; x--)
            for (int y = deg - x; y >= 0; y--) {
                f->power[f->nterm][0] = x;
                f->power[f->nterm][1] = y;
                f->power[f->nterm][2] = deg - x - y;
                f->nterm++;
            }
    return 0;
}

int dm_mtnormalise(const dm_volume *grid, const unsigned char *mask, int ntissue,
                   double *const *maps, const int *stride, const dm_mtnorm_settings *s,
                   double *field_out, double *balance_out)
{
    dm_mtnorm_settings defaults;
    if (!s) {
        dm_mtnorm_defaults(&defaults);
        s = &defaults;
    }
    if (check_settings(s)) return -1;
    if (!grid || grid->nx < 1 || grid->ny < 1 || grid->nz < 1)
        return dm_set_error("mtnormalise: no grid or an empty one");
    if (ntissue < 1 || ntissue > DM_MTNORM_MAX_TISSUES || !maps || !stride)
        return dm_set_error("mtnormalise: need 1..%d tissue maps, got %d", DM_MTNORM_MAX_TISSUES,
                            ntissue);
    for (int t = 0; t < ntissue; t++)
        if (!maps[t] || stride[t] < 1)
            return dm_set_error("mtnormalise: tissue %d has no map or a stride of %d", t + 1,
                                stride[t]);

    fit f;
    if (fit_init(&f, grid, mask, ntissue, maps, stride, s->order)) return -1;
    double a[ntissue], coef[MAXP] = {0};
    for (int t = 0; t < ntissue; t++) a[t] = 1.0;
    double log_ref = log(s->reference);
    int rc = 0;

    detect_outliers(&f, a, s->first_outlier_range);
    for (int iter = 0; iter < s->max_iter; iter++) {
        if (dm_stop_requested()) {
            rc = dm_stop_error();
            break;
        }
        size_t changed = 0;
        for (int round = 0; round < s->balance_iter; round++) {
            if (ntissue > 1 && (rc = update_balance(&f, s->reference, a))) break;
            changed = detect_outliers(&f, a, s->outlier_range);
            if (changed == 0) break;
        }
        if (rc) break;
        size_t nin = 0;
        for (size_t v = 0; v < f.n; v++) nin += f.in[v];
        if (nin == 0) {
            rc = dm_set_error("mtnormalise: no voxel of the mask has a positive, finite sum of "
                              "the tissues' l=0 terms");
            break;
        }
        double moved = update_field(&f, a, log_ref, coef);
        if (s->tolerance > 0 && changed == 0 && moved < s->tolerance) break;
    }
    fit_free(&f);
    if (rc) return -1;

    /* The fitted polynomial applies to the whole grid, as mtnormalise's output does. */
    size_t nvox = DM_NVOX(grid);
    for (size_t v = 0; v < nvox; v++) {
        double phi[MAXP];
        basis(&f, v, phi);
        double corr = exp(-dot(phi, coef, f.nterm));
        if (field_out) field_out[v] = corr;
        for (int t = 0; t < ntissue; t++) {
            double m = s->balanced ? corr * a[t] : corr, *x = maps[t] + v * (size_t)stride[t];
            for (int k = 0; k < stride[t]; k++) x[k] *= m;
        }
    }
    if (balance_out)
        for (int t = 0; t < ntissue; t++) balance_out[t] = a[t];
    return 0;
}
