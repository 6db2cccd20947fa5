/* runtime/csd/normalise.c: three synthetic tissues whose l = 0 terms sum to 1 / sqrt(4 pi),
 * spoilt by a known smooth bias (exp of a cubic), known per-tissue scale errors, a little noise
 * and a few outlier voxels; dm_mtnormalise must undo the bias and the scales (up to the one
 * overall constant), scale every WM coefficient alike, leave the outliers out, and fail
 * cleanly on bad settings. */
#include "csd/normalise.h"
#include "util/error.h"

#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NX 28
#define NY 24
#define NZ 20
#define NVOX (NX * NY * NZ)
#define NWM 45 /* lmax 8 */
#define REF DM_MTNORM_REFERENCE

static unsigned long long rng = 0x9E3779B97F4A7C15ULL;
static double uniform(void) /* xorshift64, in (0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((rng >> 11) + 0.5) / 9007199254740992.0;
}

static const double scale_err[3] = {1.3, 0.8, 1.1};

/* The true bias at voxel (i, j, k) of an nx x ny x nz grid: exp of a cubic of positions
 * scaled over the grid. */
static double true_bias(int i, int j, int k, int nx, int ny, int nz)
{
    double x = nx > 1 ? 2.0 * i / (nx - 1) - 1 : 0, y = ny > 1 ? 2.0 * j / (ny - 1) - 1 : 0;
    double z = nz > 1 ? 2.0 * k / (nz - 1) - 1 : 0;
    double q = 0.1 + 0.3 * x - 0.2 * y + 0.15 * z + 0.2 * x * y - 0.25 * x * x + 0.1 * z * z +
               0.12 * x * x * x - 0.1 * y * z * z + 0.08 * x * y * z;
    return exp(q);
}

typedef struct phantom {
    int nx, ny, nz;
    double *map[3];      /* WM (NWM per voxel), GM, CSF */
    unsigned char *mask; /* an ellipsoid */
    unsigned char *bad;  /* outlier voxels (inside the mask) */
    double *bias;        /* the truth */
} phantom;

/* Fractions summing to 1, times the bias and the scale errors, 0.3% noise on each tissue;
 * outlier voxels x5 or x0.1, one voxel of zeros and one NaN inside the mask. */
static void make_phantom(phantom *p, int nx, int ny, int nz, int outliers)
{
    size_t n = (size_t)nx * ny * nz;
    p->nx = nx;
    p->ny = ny;
    p->nz = nz;
    p->map[0] = malloc(n * NWM * sizeof(double));
    p->map[1] = malloc(n * sizeof(double));
    p->map[2] = malloc(n * sizeof(double));
    p->mask = calloc(n, 1);
    p->bad = calloc(n, 1);
    p->bias = malloc(n * sizeof(double));
    double y00 = 1.0 / sqrt(4 * M_PI);
    for (int k = 0; k < nz; k++)
        for (int j = 0; j < ny; j++)
            for (int i = 0; i < nx; i++) {
                size_t v = i + (size_t)nx * (j + (size_t)ny * k);
                double dx = (i - 0.5 * (nx - 1)) / (0.5 * nx),
                       dy = (j - 0.5 * (ny - 1)) / (0.5 * ny);
                double dz = nz > 1 ? (k - 0.5 * (nz - 1)) / (0.5 * nz) : 0;
                p->mask[v] = dx * dx + dy * dy + dz * dz < 0.9;
                double f[3] = {uniform(), 0.5 * uniform(), 0.3 * uniform()};
                double sum = f[0] + f[1] + f[2];
                p->bias[v] = true_bias(i, j, k, nx, ny, nz);
                for (int t = 0; t < 3; t++) {
                    double c = f[t] / sum * y00 * scale_err[t] * p->bias[v] *
                               (1 + 0.006 * (uniform() - 0.5));
                    p->map[t][v * (t == 0 ? NWM : 1)] = c;
                }
                for (int m = 1; m < NWM; m++) p->map[0][v * NWM + m] = uniform() - 0.5;
            }
    int placed = 0;
    while (placed < outliers) {
        size_t v = (size_t)(uniform() * n);
        if (!p->mask[v] || p->bad[v]) continue;
        double m = placed % 3 == 2 ? 0.1 : 5.0;
        p->bad[v] = 1;
        p->map[0][v * NWM] *= m;
        p->map[1][v] *= m;
        p->map[2][v] *= m;
        placed++;
    }
    if (outliers) {
        for (size_t v = n / 2;; v++)
            if (p->mask[v] && !p->bad[v]) {
                p->bad[v] = 1;
                p->map[0][v * NWM] = p->map[1][v] = p->map[2][v] = 0;
                break;
            }
        for (size_t v = n / 3;; v++)
            if (p->mask[v] && !p->bad[v]) {
                p->bad[v] = 1;
                p->map[0][v * NWM] = NAN;
                break;
            }
    }
}

static void free_phantom(phantom *p)
{
    for (int t = 0; t < 3; t++) free(p->map[t]);
    free(p->mask);
    free(p->bad);
    free(p->bias);
}

static double l0_sum(const phantom *p, size_t v)
{
    return p->map[0][v * NWM] + p->map[1][v] + p->map[2][v];
}

/* Pearson correlation of a and b over the voxels where sel is set. */
static double correlation(const double *a, const double *b, const unsigned char *sel, size_t n)
{
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, m = 0;
    for (size_t v = 0; v < n; v++) {
        if (!sel[v]) continue;
        sa += a[v];
        sb += b[v];
        saa += a[v] * a[v];
        sbb += b[v] * b[v];
        sab += a[v] * b[v];
        m++;
    }
    double ca = saa - sa * sa / m, cb = sbb - sb * sb / m, cab = sab - sa * sb / m;
    return cab / sqrt(ca * cb);
}

static const int stride[3] = {NWM, 1, 1};

static void test_recovery(void)
{
    phantom p;
    make_phantom(&p, NX, NY, NZ, 20);
    double *before = malloc((size_t)NVOX * NWM * sizeof(double));
    memcpy(before, p.map[0], (size_t)NVOX * NWM * sizeof(double));
    double *field = malloc(NVOX * sizeof(double)), *inv_bias = malloc(NVOX * sizeof(double));
    double bal[3];
    dm_volume grid = {.nx = NX, .ny = NY, .nz = NZ, .nt = 1};
    int rc = dm_mtnormalise(&grid, p.mask, 3, p.map, stride, NULL, field, bal);
    check(rc == 0, "normalise-runs", "%s", dm_last_error());

    /* The summed l = 0 terms over the clean voxels of the mask. */
    double worst = 0, mean = 0;
    size_t n = 0;
    for (size_t v = 0; v < NVOX; v++) {
        inv_bias[v] = 1.0 / p.bias[v];
        if (!p.mask[v] || p.bad[v]) continue;
        double e = fabs(l0_sum(&p, v) / REF - 1);
        if (e > worst) worst = e;
        mean += e;
        n++;
    }
    mean /= n;
    check(worst < 0.015 && mean < 0.004, "normalise-sum-at-reference",
          "summed l=0 off the reference by %.4f at most, %.4f on average", worst, mean);

    unsigned char *clean = malloc(NVOX);
    for (size_t v = 0; v < NVOX; v++) clean[v] = p.mask[v] && !p.bad[v];
    double r = correlation(field, inv_bias, clean, NVOX);
    check(r > 0.999, "normalise-field-correlates", "correlation with the true 1/bias %.5f", r);
    /* Beyond correlation: field * bias is one constant over the mask (the overall scale). */
    double lo = INFINITY, hi = -INFINITY;
    for (size_t v = 0; v < NVOX; v++)
        if (clean[v]) {
            double q = field[v] * p.bias[v];
            lo = q < lo ? q : lo;
            hi = q > hi ? q : hi;
        }
    check(hi / lo < 1.01, "normalise-field-shape", "field x bias spans %.4f..%.4f", lo, hi);

    /* Balance factors: a_t * scale_t the same for every tissue, geometric mean 1. */
    double k0 = bal[0] * scale_err[0], k1 = bal[1] * scale_err[1], k2 = bal[2] * scale_err[2];
    check(fabs(k1 / k0 - 1) < 0.005 && fabs(k2 / k0 - 1) < 0.005, "normalise-balance-ratios",
          "factors %.4f %.4f %.4f, times the scale errors %.4f %.4f %.4f", bal[0], bal[1], bal[2],
          k0, k1, k2);
    check(fabs(log(bal[0]) + log(bal[1]) + log(bal[2])) < 1e-9, "normalise-balance-geomean",
          "sum of log factors %g", log(bal[0]) + log(bal[1]) + log(bal[2]));

    /* Every WM coefficient of every voxel scaled by the factor of its l = 0 term. */
    double dev = 0;
    for (size_t v = 0; v < NVOX; v++) {
        double g = bal[0] * field[v];
        for (int m = 0; m < NWM; m++) {
            double b = before[v * NWM + m], a = p.map[0][v * NWM + m];
            if (!isfinite(b)) continue;
            double d = fabs(a - g * b) / (fabs(g * b) + 1e-300);
            if (b != 0 && d > dev) dev = d;
        }
    }
    check(dev < 1e-12, "normalise-wm-coefficients-alike", "relative deviation %g", dev);

    /* The outliers did not pull the fit: the x5 ones still sum to ~5x the reference. */
    int off = 0, nout = 0;
    for (size_t v = 0; v < NVOX; v++) {
        if (!p.bad[v] || !isfinite(l0_sum(&p, v)) || l0_sum(&p, v) == 0) continue;
        double q = l0_sum(&p, v) / REF;
        off += !(fabs(q - 5) < 0.1 || fabs(q - 0.1) < 0.002);
        nout++;
    }
    check(nout == 20 && off == 0, "normalise-outliers-ignored", "%d of %d outliers off", off, nout);

    /* Run again on the result: nothing left to do. */
    double field2[NVOX], bal2[3];
    rc = dm_mtnormalise(&grid, p.mask, 3, p.map, stride, NULL, field2, bal2);
    double worst_f = 0;
    for (size_t v = 0; v < NVOX; v++)
        if (clean[v] && fabs(field2[v] - 1) > worst_f) worst_f = fabs(field2[v] - 1);
    check(rc == 0 && worst_f < 2e-3 && fabs(bal2[0] - 1) < 1e-3 && fabs(bal2[1] - 1) < 1e-3 &&
              fabs(bal2[2] - 1) < 1e-3,
          "normalise-idempotent", "second pass field off 1 by %g, factors %g %g %g", worst_f,
          bal2[0], bal2[1], bal2[2]);
    free(clean);
    free(before);
    free(field);
    free(inv_bias);
    free_phantom(&p);
}

/* balanced = 0 (mtnormalise's default): the maps get the field only; the factors still come
 * out, and applying them gives the reference. */
static void test_unbalanced(void)
{
    phantom p;
    make_phantom(&p, NX, NY, NZ, 0);
    dm_mtnorm_settings s;
    dm_mtnorm_defaults(&s);
    s.balanced = 0;
    double bal[3], *field = malloc(NVOX * sizeof(double));
    double *orig = malloc(NVOX * sizeof(double));
    for (size_t v = 0; v < NVOX; v++) orig[v] = p.map[1][v];
    dm_volume grid = {.nx = NX, .ny = NY, .nz = NZ, .nt = 1};
    int rc = dm_mtnormalise(&grid, NULL, 3, p.map, stride, &s, field, bal);
    double worst = 0, dev = 0;
    for (size_t v = 0; v < NVOX; v++) {
        double sum = bal[0] * p.map[0][v * NWM] + bal[1] * p.map[1][v] + bal[2] * p.map[2][v];
        if (p.mask[v] && fabs(sum / REF - 1) > worst) worst = fabs(sum / REF - 1);
        double d = fabs(p.map[1][v] - orig[v] * field[v]) / (orig[v] * field[v]);
        if (d > dev) dev = d;
    }
    check(rc == 0 && worst < 0.015 && dev < 1e-12, "normalise-unbalanced",
          "rc %d, weighted sum off by %.4f, GM off field x map by %g", rc, worst, dev);
    free(field);
    free(orig);
    free_phantom(&p);
}

/* Order 0 and one slice: a constant bias is recovered exactly; on a single-slice grid the z
 * monomials are dropped (their normal equations are singular) and the in-plane cubic remains. */
static void test_order0_and_slice(void)
{
    phantom p;
    make_phantom(&p, NX, NY, NZ, 0);
    size_t n = NVOX;
    for (size_t v = 0; v < n; v++) { /* replace the cubic bias by a constant 2.5 */
        double g = 2.5 / p.bias[v];
        for (int m = 0; m < NWM; m++) p.map[0][v * NWM + m] *= g;
        p.map[1][v] *= g;
        p.map[2][v] *= g;
    }
    dm_mtnorm_settings s;
    dm_mtnorm_defaults(&s);
    s.order = 0;
    double bal[3], *field = malloc(n * sizeof(double));
    dm_volume grid = {.nx = NX, .ny = NY, .nz = NZ, .nt = 1};
    int rc = dm_mtnormalise(&grid, p.mask, 3, p.map, stride, &s, field, bal);
    double k = bal[0] * scale_err[0] * 2.5 * field[0];
    check(rc == 0 && fabs(k - 1) < 0.003 && fabs(field[0] - field[n - 1]) < 1e-12,
          "normalise-order0", "rc %d, balance x scale x bias x field %.5f (want 1)", rc, k);
    free(field);
    free_phantom(&p);

    make_phantom(&p, 40, 36, 1, 6);
    n = 40 * 36;
    field = malloc(n * sizeof(double));
    double *inv = malloc(n * sizeof(double));
    for (size_t v = 0; v < n; v++) inv[v] = 1.0 / p.bias[v];
    dm_volume slice = {.nx = 40, .ny = 36, .nz = 1, .nt = 1};
    rc = dm_mtnormalise(&slice, p.mask, 3, p.map, stride, NULL, field, bal);
    unsigned char *clean = malloc(n);
    for (size_t v = 0; v < n; v++) clean[v] = p.mask[v] && !p.bad[v];
    double r = rc == 0 ? correlation(field, inv, clean, n) : 0;
    double worst = 0;
    for (size_t v = 0; v < n; v++)
        if (clean[v] && fabs(l0_sum(&p, v) / REF - 1) > worst)
            worst = fabs(l0_sum(&p, v) / REF - 1);
    check(rc == 0 && r > 0.999 && worst < 0.02, "normalise-single-slice",
          "rc %d (%s), field correlation %.5f, sum off by %.4f", rc, rc ? dm_last_error() : "", r,
          worst);
    free(clean);
    free(inv);
    free(field);
    free_phantom(&p);
}

static void test_errors(void)
{
    phantom p;
    make_phantom(&p, 8, 8, 8, 0);
    double keep = p.map[1][100];
    dm_volume grid = {.nx = 8, .ny = 8, .nz = 8, .nt = 1};
    dm_mtnorm_settings s;
    dm_mtnorm_defaults(&s);
    s.order = 4;
    int rc = dm_mtnormalise(&grid, p.mask, 3, p.map, stride, &s, NULL, NULL);
    check(rc == -1 && strstr(dm_last_error(), "order") && !strchr(dm_last_error(), '\n'),
          "normalise-error-order", "rc %d: %s", rc, dm_last_error());
    unsigned char none[512] = {0};
    rc = dm_mtnormalise(&grid, none, 3, p.map, stride, NULL, NULL, NULL);
    check(rc == -1 && strstr(dm_last_error(), "empty") && p.map[1][100] == keep,
          "normalise-error-empty-mask", "rc %d: %s", rc, dm_last_error());
    /* GM a copy of CSF: their balance cannot be separated. */
    for (size_t v = 0; v < 512; v++) p.map[2][v] = 0.5 * p.map[1][v];
    rc = dm_mtnormalise(&grid, NULL, 3, p.map, stride, NULL, NULL, NULL);
    check(rc == -1 && strstr(dm_last_error(), "tissue 3") && p.map[1][100] == keep,
          "normalise-error-dependent-tissues", "rc %d: %s", rc, dm_last_error());
    /* A tissue that is zero everywhere keeps a factor of 1 and does not stop the fit. */
    for (size_t v = 0; v < 512; v++) p.map[2][v] = 0;
    double bal[3];
    rc = dm_mtnormalise(&grid, NULL, 3, p.map, stride, NULL, NULL, bal);
    check(rc == 0 && bal[2] == 1.0 && fabs(log(bal[0]) + log(bal[1])) < 1e-9,
          "normalise-absent-tissue", "rc %d (%s), factors %g %g %g", rc, rc ? dm_last_error() : "",
          bal[0], bal[1], bal[2]);
    free_phantom(&p);
}

int main(void)
{
    test_recovery();
    test_unbalanced();
    test_order0_and_slice();
    test_errors();
    return failures != 0;
}
