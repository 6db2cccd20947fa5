/* Peak finding on the sphere (peaks.h): local maxima over a dense start set, each refined by
 * Newton's method in a chart of the tangent plane, duplicates merged, sorted by amplitude.
 *
 * Why a tangent-plane chart and a finite-difference Hessian: in (theta, phi) the metric is
 * singular at the poles, where peaks along z (common in scanner frames) would sit.  Around the
 * current direction d we use u(a, b) = normalise(d + a t1 + b t2), t1 and t2 orthonormal and
 * tangent at d, which is regular everywhere.  The gradient of F(a, b) = f(u) is analytic (the
 * theta and phi derivatives of sh.c, turned into a tangent vector); the Hessian is the central
 * difference of that analytic gradient.  Newton stops where the analytic gradient vanishes, so
 * the Hessian's O(h^2) error changes only how fast it gets there, never where it ends. */
#include "sphere/peaks.h"
#include "sphere/directions.h"
#include "sphere/sh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NCOEF_MAX ((DM_SH_LMAX_MAX + 1) * (DM_SH_LMAX_MAX + 2) / 2)

static int have_avx2(void);

int dm_peak_finder_init(dm_peak_finder *pf, int lmax)
{
    memset(pf, 0, sizeof *pf);
    if (lmax < 0 || lmax > DM_SH_LMAX_MAX || lmax % 2) return -1;
    const int n = DM_PEAK_START_DIRS, nc = dm_sh_ncoef(lmax);
    pf->lmax = lmax;
    pf->ncoef = nc;
    pf->nstart = n;
    pf->wide = have_avx2();
    pf->dirs = malloc(3 * (size_t)n * sizeof *pf->dirs);
    pf->basis = malloc((size_t)n * nc * sizeof *pf->basis);
    if (!pf->dirs || !pf->basis) goto fail;
    dm_dirs_hemisphere(n, pf->dirs);
    for (int i = 0; i < n; i++) { /* stored coefficient-major: the amplitudes' loop runs along i */
        double Y[NCOEF_MAX];
        dm_sh_basis(lmax, pf->dirs + 3 * i, Y);
        for (int k = 0; k < nc; k++) pf->basis[(size_t)k * n + i] = Y[k];
    }

    /* Neighbours: within 1.6 spacings (the spacing of n points over a half sphere is about
     * sqrt(2 pi / n)), antipodes counting as the same direction: about 8 each. */
    const double cos_radius = cos(1.6 * sqrt(2 * M_PI / n));
    int most = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            int k = 0;
            for (int j = 0; j < n; j++) {
                if (j == i) continue;
                const double *a = pf->dirs + 3 * i, *b = pf->dirs + 3 * j;
                if (fabs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2]) < cos_radius) continue;
                if (pass == 1) pf->neighbours[(size_t)i * pf->max_neighbours + k] = j;
                k++;
            }
            if (pass == 0 && k > most) most = k;
            if (pass == 1) pf->neighbours[(size_t)i * pf->max_neighbours + k] = -1;
        }
        if (pass == 0) {
            pf->max_neighbours = most + 1;
            pf->neighbours = malloc((size_t)n * pf->max_neighbours * sizeof *pf->neighbours);
            if (!pf->neighbours) goto fail;
        }
    }
    return 0;
fail:
    dm_peak_finder_free(pf);
    return -1;
}

void dm_peak_finder_free(dm_peak_finder *pf)
{
    free(pf->dirs);
    free(pf->basis);
    free(pf->neighbours);
    memset(pf, 0, sizeof *pf);
}

/* f's Hessian on the sphere at a point: in the orthonormal tangent frame e_theta, e_phi there
 * (ok: made; not at a pole's neighbourhood, where the frame degenerates). */
typedef struct sphere_hessian {
    double tt, tp, pp, e_th[3], e_ph[3];
    int ok;
} sphere_hessian;

/* Below this sin(theta) the Hessian is not made from the angles' derivatives (they divide by
 * sin^2 theta): Newton's step takes it by differences of the gradient instead. */
#define HESSIAN_MIN_SIN 1e-2

/* f at the unit vector u, and its gradient on the sphere (a vector tangent at u); hess (may be
 * NULL) its Hessian there. */
static double value_and_gradient(int lmax, const double *coef, const double u[3], double g[3],
                                 sphere_hessian *hess)
{
    const int nc = dm_sh_ncoef(lmax);
    double Y[NCOEF_MAX], dth[NCOEF_MAX], dph[NCOEF_MAX];
    double theta, f = 0, ft = 0, fp = 0;
    if (hess) hess->ok = 0;
    if (dm_sh_basis_unit(lmax, u, Y, dth, dph)) { /* exact: dph carries a factor sin^m theta */
        for (int i = 0; i < nc; i++) {
            f += coef[i] * Y[i];
            ft += coef[i] * dth[i];
            fp += coef[i] * dph[i];
        }
        const double st = sqrt(u[0] * u[0] + u[1] * u[1]), ct = u[2], cp = u[0] / st,
                     sp = u[1] / st;
        const double e_th[3] = {ct * cp, ct * sp, -st}, e_ph[3] = {-sp, cp, 0};
        if (hess && st > HESSIAN_MIN_SIN) {
            /* The second derivatives from the first: d2/dphi2 of Y_lm is -m^2 Y_lm, d2/dtheta
             * dphi swaps the cos and sin terms' dtheta with a factor m, and the Legendre
             * equation gives d2/dtheta2 = -cot dtheta - l(l+1) + m^2 / sin^2.  On the sphere
             * (metric diag(1, sin^2)) the Hessian in the frame e_theta, e_phi is
             *   tt = f_tt,  tp = (f_tp - cot f_p) / sin,  pp = (f_pp + sin cos f_t) / sin^2. */
            double lap = 0, fpp = 0, ftp = 0;
            for (int l = 0; l <= lmax; l += 2) {
                const int i0 = dm_sh_index(l, 0);
                lap += coef[i0] * l * (l + 1) * Y[i0];
                for (int m = 1; m <= l; m++) {
                    const double cy = coef[i0 + m] * Y[i0 + m] + coef[i0 - m] * Y[i0 - m];
                    lap += l * (l + 1) * cy;
                    fpp -= (double)m * m * cy;
                    ftp += m * (coef[i0 - m] * dth[i0 + m] - coef[i0 + m] * dth[i0 - m]);
                }
            }
            const double cot = ct / st, s2 = st * st;
            hess->tt = -cot * ft - lap - fpp / s2;
            hess->tp = (ftp - cot * fp) / st;
            hess->pp = fpp / s2 + cot * ft;
            memcpy(hess->e_th, e_th, sizeof e_th);
            memcpy(hess->e_ph, e_ph, sizeof e_ph);
            hess->ok = 1;
        }
        fp /= st; /* d/dphi is sin(theta) times the derivative along e_phi */
        for (int k = 0; k < 3; k++) g[k] = ft * e_th[k] + fp * e_ph[k];
        return f;
    }
    /* At a pole d/dphi vanishes, and d/dtheta at phi = 0 and pi/2 are the derivatives along
     * the two tangents e_theta(0) = (cos theta, 0, 0), e_theta(pi/2) = (0, cos theta, 0). */
    theta = u[2] > 0 ? 0 : M_PI;
    const double sgn = u[2] > 0 ? 1 : -1;
    dm_sh_basis_angles(lmax, theta, 0, Y, dth, NULL);
    for (int i = 0; i < nc; i++) {
        f += coef[i] * Y[i];
        ft += coef[i] * dth[i];
    }
    dm_sh_basis_angles(lmax, theta, M_PI / 2, Y, dth, NULL);
    for (int i = 0; i < nc; i++) fp += coef[i] * dth[i];
    g[0] = sgn * ft;
    g[1] = sgn * fp;
    g[2] = 0;
    return f;
}

static void normalise(double v[3])
{
    double n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int k = 0; k < 3; k++) v[k] /= n;
}

/* The chart u(a, b) = normalise(d + a t1 + b t2): u, and F and its gradient G there (and
 * f's gradient and Hessian on the sphere, g and hess (may be NULL), for the next step's
 * chart). */
static double chart(int lmax, const double *coef, const double d[3], const double t1[3],
                    const double t2[3], double a, double b, double u[3], double G[2], double g[3],
                    sphere_hessian *hess)
{
    double v[3];
    for (int k = 0; k < 3; k++) v[k] = d[k] + a * t1[k] + b * t2[k];
    double r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int k = 0; k < 3; k++) u[k] = v[k] / r;
    double f = value_and_gradient(lmax, coef, u, g, hess);
    /* du/da = (t1 - u (u.t1)) / r and g is tangent at u, so dF/da = g.t1 / r. */
    G[0] = (g[0] * t1[0] + g[1] * t1[1] + g[2] * t1[2]) / r;
    G[1] = (g[0] * t2[0] + g[1] * t2[1] + g[2] * t2[2]) / r;
    return f;
}

/* Refines d (unit, in place) to a local maximum of f; returns f there. */
static double newton(int lmax, const double *coef, double d[3])
{
    const double h = 1e-4, max_step = 0.1; /* radians */
    double u[3], G[2], Gp[2], Gm[2], g[3], gn[3];
    sphere_hessian hs, hn; /* at d; at the step tried */
    double f = value_and_gradient(lmax, coef, d, g, &hs);
    for (int iter = 0; iter < 50; iter++) {
        /* t1: d crossed with the axis it is least along; t2 = d x t1. */
        int ax = fabs(d[0]) <= fabs(d[1]) && fabs(d[0]) <= fabs(d[2]) ? 0
                 : fabs(d[1]) <= fabs(d[2])                           ? 1
                                                                      : 2;
        double e[3] = {0, 0, 0}, t1[3], t2[3];
        e[ax] = 1;
        t1[0] = d[1] * e[2] - d[2] * e[1];
        t1[1] = d[2] * e[0] - d[0] * e[2];
        t1[2] = d[0] * e[1] - d[1] * e[0];
        normalise(t1);
        t2[0] = d[1] * t1[2] - d[2] * t1[1];
        t2[1] = d[2] * t1[0] - d[0] * t1[2];
        t2[2] = d[0] * t1[1] - d[1] * t1[0];

        G[0] = g[0] * t1[0] + g[1] * t1[1] + g[2] * t1[2]; /* the chart's gradient at 0 */
        G[1] = g[0] * t2[0] + g[1] * t2[1] + g[2] * t2[2];
        /* The chart's Hessian at 0: f's Hessian on the sphere along t1, t2 (the chart's
         * straight lines through a degree-0 extension of f), or near a pole by central
         * differences of its gradient. */
        double H[2][2];
        if (hs.ok) {
            const double *t[2] = {t1, t2};
            double a[2], b[2];
            for (int i = 0; i < 2; i++) {
                a[i] = t[i][0] * hs.e_th[0] + t[i][1] * hs.e_th[1] + t[i][2] * hs.e_th[2];
                b[i] = t[i][0] * hs.e_ph[0] + t[i][1] * hs.e_ph[1] + t[i][2] * hs.e_ph[2];
            }
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                    H[i][j] = a[i] * a[j] * hs.tt + (a[i] * b[j] + b[i] * a[j]) * hs.tp +
                              b[i] * b[j] * hs.pp;
        } else {
            for (int j = 0; j < 2; j++) {
                chart(lmax, coef, d, t1, t2, j == 0 ? h : 0, j == 1 ? h : 0, u, Gp, gn, NULL);
                chart(lmax, coef, d, t1, t2, j == 0 ? -h : 0, j == 1 ? -h : 0, u, Gm, gn, NULL);
                for (int i = 0; i < 2; i++) H[i][j] = (Gp[i] - Gm[i]) / (2 * h);
            }
        }
        double off = 0.5 * (H[0][1] + H[1][0]);
        double det = H[0][0] * H[1][1] - off * off;
        double s[2];
        if (H[0][0] < 0 && det > 0) { /* concave: the Newton step s = -H^-1 G */
            s[0] = -(H[1][1] * G[0] - off * G[1]) / det;
            s[1] = -(-off * G[0] + H[0][0] * G[1]) / det;
        } else { /* not concave here (a saddle, a flank): climb the gradient */
            double gnorm = hypot(G[0], G[1]);
            if (gnorm == 0) break;
            s[0] = max_step * G[0] / gnorm;
            s[1] = max_step * G[1] / gnorm;
        }
        double len = hypot(s[0], s[1]);
        if (len > max_step) s[0] *= max_step / len, s[1] *= max_step / len, len = max_step;
        /* Backtrack until f does not fall (beyond rounding). */
        int moved = 0;
        for (int half = 0; half < 20 && !moved; half++) {
            double fn = chart(lmax, coef, d, t1, t2, s[0], s[1], u, Gp, gn, &hn);
            if (fn >= f - 1e-12 * fabs(f)) {
                memcpy(d, u, sizeof u);
                memcpy(g, gn, sizeof g);
                hs = hn;
                f = fn;
                moved = 1;
            } else {
                s[0] *= 0.5, s[1] *= 0.5, len *= 0.5;
            }
        }
        if (!moved || len < 1e-9) break;
    }
    return f;
}

typedef struct candidate {
    double dir[3], amp;
    int index; /* the start direction's */
} candidate;

/* Ties by start direction: the order is the same whatever qsort's algorithm. */
static int by_amplitude_descending(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->amp != y->amp) return x->amp < y->amp ? 1 : -1;
    return (x->index > y->index) - (x->index < y->index);
}

/* How far below its peak a lobe may be at the nearest start direction (at most about 10
 * degrees off): a lobe of lmax 8 to 12 loses well under half its height there.  A candidate
 * whose start amplitude is below half of what a peak must reach cannot become one, and is not
 * refined: most local maxima of an FOD are small ripples, and refining them is most of the
 * work. */
#define START_FRACTION 0.5

/* The amplitudes at the start directions, each summed over the coefficients in order, the
 * directions side by side (the vector units' lanes). */
#define START_AMPLITUDES(name)                                                                     \
    static void name(const double *coef, const double *basis, int nc, int n, double *amp)          \
    {                                                                                              \
        for (int i = 0; i < n; i++) amp[i] = 0;                                                    \
        for (int k = 0; k < nc; k++) {                                                             \
            const double c = coef[k], *B = basis + (size_t)k * n;                                  \
            _Pragma("omp simd") for (int i = 0; i < n; i++) amp[i] += c * B[i];                    \
        }                                                                                          \
    }
START_AMPLITUDES(start_amplitudes)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* Twice the lanes on processors with AVX2 (chosen at run time); without FMA, so the same bits. */
#pragma GCC push_options
#pragma GCC target("avx2")
START_AMPLITUDES(start_amplitudes_avx2)
#pragma GCC pop_options
static int have_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
}
#else
#define start_amplitudes_avx2 start_amplitudes
static int have_avx2(void)
{
    return 0;
}
#endif

int dm_peak_finder_find(const dm_peak_finder *pf, const double *coef, int max_peaks, double min_amp,
                        double relative, double *dirs, double *amps)
{
    const int n = pf->nstart, nc = pf->ncoef;
    if (max_peaks < 1) return 0;
    for (int i = 0; i < nc; i++)
        if (!isfinite(coef[i])) return 0;
    double amp[DM_PEAK_START_DIRS], scale = 0, top = -INFINITY;
    (pf->wide ? start_amplitudes_avx2 : start_amplitudes)(coef, pf->basis, nc, n, amp);
    for (int i = 0; i < n; i++) { /* the amplitudes are finite: plain comparisons */
        const double a = fabs(amp[i]);
        if (a > scale) scale = a;
        if (amp[i] > top) top = amp[i];
    }
    if (scale == 0) return 0;
    /* A local maximum: above every neighbour, ties (to rounding) going to the lower index so
     * that a peak midway between two start directions is kept once; a plateau (no neighbour
     * clearly lower, as everywhere on a constant function) is no peak. */
    const double tol = 1e-9 * scale;
    /* A start below START_FRACTION of what a peak must reach is not refined (below): whether it
     * is a local maximum does not matter. */
    const double must_reach = fmax(fmax(min_amp, relative * top), 0);
    const double least = START_FRACTION * must_reach;
    candidate cand[DM_PEAK_START_DIRS];
    int ncand = 0;
    for (int i = 0; i < n; i++) {
        if (amp[i] < least) continue;
        int is_max = 1, some_lower = 0;
        for (const int *j = pf->neighbours + (size_t)i * pf->max_neighbours; *j >= 0 && is_max;
             j++) {
            double diff = amp[i] - amp[*j];
            if (diff > tol)
                some_lower = 1;
            else if (diff < -tol || *j < i)
                is_max = 0;
        }
        if (!is_max || !some_lower) continue;
        candidate *c = &cand[ncand++];
        memcpy(c->dir, pf->dirs + 3 * i, sizeof c->dir);
        c->amp = amp[i];
        c->index = i;
    }
    qsort(cand, ncand, sizeof *cand, by_amplitude_descending); /* by start amplitude */

    /* Refine the candidates, largest first, into peaks[] (distinct, largest first, at most
     * max_peaks). */
    const double cos_merge = cos(DM_PEAK_MERGE_DEG * M_PI / 180);
    candidate peaks[DM_PEAK_START_DIRS];
    int found = 0;
    for (int i = 0; i < ncand; i++) {
        candidate c = cand[i];
        if (c.amp < least) break;
        if (found == max_peaks && c.amp < START_FRACTION * peaks[found - 1].amp) break;
        c.amp = newton(pf->lmax, coef, c.dir);
        if (!(c.amp > 0)) continue;
        int duplicate = 0;
        for (int k = 0; k < found && !duplicate; k++) {
            const double *p = peaks[k].dir;
            duplicate = fabs(p[0] * c.dir[0] + p[1] * c.dir[1] + p[2] * c.dir[2]) > cos_merge;
        }
        if (duplicate || (found == max_peaks && c.amp <= peaks[found - 1].amp)) continue;
        int at = found < max_peaks ? found++ : found - 1;
        while (at > 0 && peaks[at - 1].amp < c.amp) {
            peaks[at] = peaks[at - 1];
            at--;
        }
        peaks[at] = c;
    }
    int kept = 0;
    for (int k = 0; k < found; k++) {
        if (peaks[k].amp < min_amp || peaks[k].amp < relative * peaks[0].amp) break;
        double *p = dirs + 3 * kept;
        memcpy(p, peaks[k].dir, sizeof peaks[k].dir);
        double sign = fabs(p[2]) > 1e-12 ? p[2] : fabs(p[1]) > 1e-12 ? p[1] : p[0];
        if (sign < 0) p[0] = -p[0], p[1] = -p[1], p[2] = -p[2];
        amps[kept++] = peaks[k].amp;
    }
    return kept;
}

int dm_sh_peaks(int lmax, const double *coef, int max_peaks, double min_amp, double *dirs,
                double *amps)
{
    dm_peak_finder pf;
    if (dm_peak_finder_init(&pf, lmax) != 0) return -1;
    int n = dm_peak_finder_find(&pf, coef, max_peaks, min_amp, 0, dirs, amps);
    dm_peak_finder_free(&pf);
    return n;
}
