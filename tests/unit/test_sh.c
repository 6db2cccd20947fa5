/* Independent truths for the spherical harmonics (runtime/sphere/sh.c) and the peak finder
 * (runtime/sphere/peaks.c): orthonormality by quadrature, the addition theorem, the zonal
 * functions, derivatives against finite differences, the basis from a vector against the basis
 * from its angles; peaks of known lobes. */
#include "check.h"
#include "sphere/peaks.h"
#include "sphere/sh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LMAX 8
#define NC 45

static double urand(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (*state >> 8) / 16777216.0;
}

static void random_dir(unsigned *state, double d[3])
{
    double z = 2 * urand(state) - 1, phi = 2 * M_PI * urand(state), r = sqrt(1 - z * z);
    d[0] = r * cos(phi), d[1] = r * sin(phi), d[2] = z;
}

/* Legendre polynomial P_l(x) by Bonnet's recurrence. */
static double legendre_p(int l, double x)
{
    double p0 = 1, p1 = x;
    if (l == 0) return 1;
    for (int k = 2; k <= l; k++) {
        double p = ((2.0 * k - 1) * x * p1 - (k - 1.0) * p0) / k;
        p0 = p1, p1 = p;
    }
    return p1;
}

/* Gauss-Legendre nodes and weights on [-1, 1] by Newton on P_n. */
static void gauss_legendre(int n, double *x, double *w)
{
    for (int i = 0; i < n; i++) {
        double t = cos(M_PI * (i + 0.75) / (n + 0.5)), dp = 1;
        for (int it = 0; it < 100; it++) {
            double p = legendre_p(n, t), pm = legendre_p(n - 1, t);
            dp = n * (t * p - pm) / (t * t - 1);
            double dt = p / dp;
            t -= dt;
            if (fabs(dt) < 1e-15) break;
        }
        double p = legendre_p(n, t), pm = legendre_p(n - 1, t);
        dp = n * (t * p - pm) / (t * t - 1);
        x[i] = t;
        w[i] = 2 / ((1 - t * t) * dp * dp);
    }
}

static void test_orthonormality(void)
{
    /* Products of degree <= 2 LMAX in cos(theta) and in phi: 20 Gauss-Legendre nodes and 40
     * equally spaced azimuths integrate them exactly. */
    enum { NT = 20, NP = 40 };
    double x[NT], w[NT], G[NC][NC] = {{0}}, Y[NC];
    gauss_legendre(NT, x, w);
    for (int i = 0; i < NT; i++)
        for (int j = 0; j < NP; j++) {
            dm_sh_basis_angles(LMAX, acos(x[i]), 2 * M_PI * j / NP, Y, NULL, NULL);
            double wt = w[i] * 2 * M_PI / NP;
            for (int a = 0; a < NC; a++)
                for (int b = 0; b < NC; b++) G[a][b] += wt * Y[a] * Y[b];
        }
    double worst = 0;
    for (int a = 0; a < NC; a++)
        for (int b = 0; b < NC; b++) worst = fmax(worst, fabs(G[a][b] - (a == b)));
    check(worst < 1e-10, "sh-orthonormal-gram", "largest |G - I| %.3g", worst);
}

static void test_addition_theorem(void)
{
    unsigned st = 7;
    double worst = 0, Yu[NC], Yv[NC];
    for (int trial = 0; trial < 50; trial++) {
        double u[3], v[3];
        random_dir(&st, u);
        random_dir(&st, v);
        dm_sh_basis(LMAX, u, Yu);
        dm_sh_basis(LMAX, v, Yv);
        double c = u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
        for (int l = 0; l <= LMAX; l += 2) {
            double sum = 0;
            for (int m = -l; m <= l; m++) sum += Yu[dm_sh_index(l, m)] * Yv[dm_sh_index(l, m)];
            worst = fmax(worst, fabs(sum - (2 * l + 1) / (4 * M_PI) * legendre_p(l, c)));
        }
    }
    check(worst < 1e-12, "sh-addition-theorem", "largest error %.3g", worst);
}

static void test_zonal(void)
{
    unsigned st = 11;
    double worst = 0, Y[NC], z[LMAX / 2 + 1];
    for (int trial = 0; trial < 50; trial++) {
        double theta = M_PI * urand(&st), phi = 2 * M_PI * urand(&st);
        dm_sh_basis_angles(LMAX, theta, phi, Y, NULL, NULL);
        dm_sh_zonal(LMAX, cos(theta), z);
        for (int l = 0; l <= LMAX; l += 2)
            worst = fmax(worst, fabs(z[l / 2] - Y[dm_sh_index(l, 0)]));
    }
    check(worst < 1e-13, "sh-zonal-is-m0", "largest difference %.3g", worst);
    dm_sh_zonal(LMAX, 1, z);
    double y00 = 0.5 / sqrt(M_PI), y20 = sqrt(5 / (4 * M_PI));
    check(fabs(z[0] - y00) < 1e-15 && fabs(z[1] - y20) < 1e-14, "sh-zonal-known-values",
          "Y00 %.17g (want %.17g), Y20 %.17g (want %.17g)", z[0], y00, z[1], y20);
    double r = dm_sh_rh_factor(2);
    check(fabs(r - sqrt(4 * M_PI / 5)) < 1e-15, "sh-rh-factor", "%.17g", r);
}

static void test_derivatives(void)
{
    unsigned st = 23;
    const double h = 1e-6;
    double worst_t = 0, worst_p = 0;
    double Y[NC], dt[NC], dp[NC], Yp[NC], Ym[NC];
    for (int trial = 0; trial < 40; trial++) {
        double theta = 0.05 + (M_PI - 0.1) * urand(&st), phi = 2 * M_PI * urand(&st);
        dm_sh_basis_angles(LMAX, theta, phi, Y, dt, dp);
        dm_sh_basis_angles(LMAX, theta + h, phi, Yp, NULL, NULL);
        dm_sh_basis_angles(LMAX, theta - h, phi, Ym, NULL, NULL);
        for (int i = 0; i < NC; i++)
            worst_t = fmax(worst_t, fabs(dt[i] - (Yp[i] - Ym[i]) / (2 * h)));
        dm_sh_basis_angles(LMAX, theta, phi + h, Yp, NULL, NULL);
        dm_sh_basis_angles(LMAX, theta, phi - h, Ym, NULL, NULL);
        for (int i = 0; i < NC; i++)
            worst_p = fmax(worst_p, fabs(dp[i] - (Yp[i] - Ym[i]) / (2 * h)));
    }
    check(worst_t < 1e-6, "sh-dtheta-finite-difference", "largest error %.3g", worst_t);
    check(worst_p < 1e-6, "sh-dphi-finite-difference", "largest error %.3g", worst_p);
}

/* The basis from a unit vector's coordinates (cos and sin (m phi) by angle addition) against
 * the basis from its angles (cos and sin of each m phi by the maths library); a pole declined. */
static void test_basis_unit(void)
{
    unsigned st = 29;
    double worst = 0;
    double Y[NC], dt[NC], dp[NC], Yu[NC], dtu[NC], dpu[NC];
    int all = 1;
    for (int trial = 0; trial < 200; trial++) {
        double u[3];
        random_dir(&st, u);
        double theta = acos(u[2]), phi = atan2(u[1], u[0]);
        dm_sh_basis_angles(LMAX, theta, phi, Y, dt, dp);
        all &= dm_sh_basis_unit(LMAX, u, Yu, dtu, dpu);
        for (int i = 0; i < NC; i++) {
            worst = fmax(worst, fabs(Yu[i] - Y[i]));
            worst = fmax(worst, fabs(dtu[i] - dt[i]) / 10); /* derivatives up to about 10 */
            worst = fmax(worst, fabs(dpu[i] - dp[i]) / 10);
        }
    }
    check(all && worst < 1e-13, "sh-basis-unit-equals-angles", "largest difference %.3g", worst);
    const double pole[3] = {0, 0, -1};
    check(dm_sh_basis_unit(LMAX, pole, Yu, NULL, NULL) == 0, "sh-basis-unit-declines-a-pole",
          "a pole was taken");
}

static void test_lmax_for(void)
{
    const int n[] = {0, 1, 5, 6, 14, 15, 28, 44, 45, 66, 91, 100};
    const int want[] = {-1, 0, 0, 2, 2, 4, 6, 6, 8, 10, 12, 12};
    int ok = 1;
    for (int i = 0; i < 12; i++) ok &= dm_sh_lmax_for(n[i]) == want[i];
    check(ok, "sh-lmax-for", "a count gave the wrong lmax");
    check(dm_sh_ncoef(8) == 45 && dm_sh_index(8, 8) == 44 && dm_sh_index(2, -2) == 1,
          "sh-ncoef-index", "ncoef(8) %d", dm_sh_ncoef(8));
}

/* A sharp lobe: a delta function apodised to tame its ringing, which is still a positive
 * ring about 5% high at 50 degrees from the lobe (so the tests set a threshold). */
static double lobe_kernel(int l)
{
    return exp(-l * (l + 1) / 100.0);
}

/* The amplitude of one lobe of weight 1 at its peak: sum_l kernel_l (2l + 1) / 4pi. */
static double lobe_height(void)
{
    double h = 0;
    for (int l = 0; l <= LMAX; l += 2) h += lobe_kernel(l) * (2 * l + 1) / (4 * M_PI);
    return h;
}

/* The FOD sum_k w_k K(d_k . u) of axially symmetric lobes, K with zonal (Legendre)
 * coefficients kernel[l/2], projected on the basis through the addition theorem:
 * f_lm = sum_k w_k kernel_l Y_lm(d_k). */
static void make_fod(int nlobes, const double dirs[][3], const double *w, double *f)
{
    double Y[NC];
    memset(f, 0, NC * sizeof *f);
    for (int k = 0; k < nlobes; k++) {
        dm_sh_basis(LMAX, dirs[k], Y);
        for (int l = 0; l <= LMAX; l += 2) {
            double kernel = lobe_kernel(l);
            for (int m = -l; m <= l; m++)
                f[dm_sh_index(l, m)] += w[k] * kernel * Y[dm_sh_index(l, m)];
        }
    }
}

static double angle_deg(const double a[3], const double b[3])
{
    double c = fabs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2]);
    return acos(c > 1 ? 1 : c) * 180 / M_PI;
}

static void rotate_about(const double axis[3], double angle, const double in[3], double out[3])
{
    /* Rodrigues */
    double c = cos(angle), s = sin(angle), d = axis[0] * in[0] + axis[1] * in[1] + axis[2] * in[2];
    double x[3] = {axis[1] * in[2] - axis[2] * in[1], axis[2] * in[0] - axis[0] * in[2],
                   axis[0] * in[1] - axis[1] * in[0]};
    for (int k = 0; k < 3; k++) out[k] = in[k] * c + x[k] * s + axis[k] * d * (1 - c);
}

/* Finds the peaks of nlobes lobes at the given crossing angle, in random orientations; checks
 * count, directions (degrees) and order. */
static void test_lobes(const dm_peak_finder *pf, int nlobes, double crossing_deg, double tol_deg)
{
    unsigned st = 101 + nlobes * 7 + (unsigned)crossing_deg;
    const double w[3] = {1.0, 0.7, 0.5};
    double worst = 0;
    int bad_count = 0, bad_order = 0, bad_sign = 0, trials = 30;
    for (int t = 0; t < trials; t++) {
        double dirs[3][3], a[3], b[3], axis[3];
        random_dir(&st, a);
        /* a second direction at crossing_deg from the first, turned about it at random */
        random_dir(&st, axis);
        double cr[3] = {a[1] * axis[2] - a[2] * axis[1], a[2] * axis[0] - a[0] * axis[2],
                        a[0] * axis[1] - a[1] * axis[0]};
        double n = sqrt(cr[0] * cr[0] + cr[1] * cr[1] + cr[2] * cr[2]);
        for (int k = 0; k < 3; k++) cr[k] /= n;
        rotate_about(cr, crossing_deg * M_PI / 180, a, b);
        memcpy(dirs[0], a, sizeof a);
        memcpy(dirs[1], b, sizeof b);
        /* the third: b turned 120 degrees about a, so also at crossing_deg from a */
        if (nlobes == 3) {
            double c3[3];
            rotate_about(a, 2 * M_PI / 3, b, c3); /* b turned about a */
            memcpy(dirs[2], c3, sizeof c3);
        }
        double f[NC], pd[3 * 4], pa[4];
        make_fod(nlobes, (const double(*)[3])dirs, w, f);
        int np = dm_peak_finder_find(pf, f, 4, 0.4 * w[nlobes - 1] * lobe_height(), 0, pd, pa);
        if (np != nlobes) {
            bad_count++;
            continue;
        }
        for (int k = 0; k < nlobes; k++) {
            worst = fmax(worst, angle_deg(pd + 3 * k, dirs[k]));
            if (pd[3 * k + 2] < 0) bad_sign++;
            if (k && pa[k] > pa[k - 1]) bad_order++;
        }
    }
    char name[64];
    snprintf(name, sizeof name, "peaks-%d-lobes-%g-deg", nlobes, crossing_deg);
    check(!bad_count && !bad_order && !bad_sign && worst < tol_deg, name,
          "%d/%d wrong counts, %d out of order, %d with z < 0, worst angle %.2f deg (tol %.1f)",
          bad_count, trials, bad_order, bad_sign, worst, tol_deg);
    printf("    %s: worst angle %.3f deg\n", name, worst);
}

static void test_peaks(void)
{
    dm_peak_finder pf;
    check(dm_peak_finder_init(&pf, LMAX) == 0, "peak-finder-init", "failed");
    check(dm_peak_finder_init(&(dm_peak_finder){0}, 7) == -1, "peak-finder-odd-lmax-refused",
          "accepted lmax 7");

    /* One lobe exactly along z (the pole of the chart of sh.c) and along x (the rim of the
     * start half sphere): exact, amplitude the function's value there. */
    const double axes[3][3] = {{0, 0, 1}, {1, 0, 0}, {0, 1, 0}};
    for (int k = 0; k < 3; k++) {
        double f[NC], pd[3 * 3], pa[3];
        make_fod(1, &axes[k], (const double[]){1}, f);
        int np = dm_peak_finder_find(&pf, f, 3, 0.5 * lobe_height(), 0, pd, pa);
        double ang = np >= 1 ? angle_deg(pd, axes[k]) : 99;
        double val = np >= 1 ? dm_sh_value(LMAX, f, pd) : 0;
        char name[64];
        snprintf(name, sizeof name, "peaks-one-lobe-along-%c", "zxy"[k]);
        check(np == 1 && ang < 1e-5 && fabs(val - pa[0]) < 1e-12 &&
                  pd[3 * 0 + (k == 0   ? 2
                              : k == 1 ? 0
                                       : 1)] > 0,
              name, "%d peaks, angle %.3g deg, amplitude %.6g vs value %.6g", np, ang,
              np ? pa[0] : 0, val);
    }

    /* At a refined peak the gradient vanishes: f there is above f a little way off. */
    {
        unsigned st = 5;
        double f[NC], pd[3], pa[1], worst = 0;
        for (int i = 0; i < NC; i++) f[i] = 2 * urand(&st) - 1;
        f[0] = 3;
        int np = dm_peak_finder_find(&pf, f, 1, 0, 0, pd, pa);
        for (int t = 0; np == 1 && t < 20; t++) {
            double e[3], q[3];
            random_dir(&st, e);
            double dot = e[0] * pd[0] + e[1] * pd[1] + e[2] * pd[2];
            for (int k = 0; k < 3; k++) q[k] = pd[k] + 1e-4 * (e[k] - dot * pd[k]);
            double nq = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2]);
            for (int k = 0; k < 3; k++) q[k] /= nq;
            worst = fmax(worst, dm_sh_value(LMAX, f, q) - pa[0]);
        }
        check(np == 1 && worst <= 1e-12, "peaks-random-function-is-local-max",
              "%d peaks, a neighbour above the peak by %.3g", np, worst);
    }

    /* No peaks: a constant function, zeros, NaN. */
    {
        double f[NC] = {1}, pd[9], pa[3];
        int a = dm_peak_finder_find(&pf, f, 3, 0, 0, pd, pa);
        f[0] = 0;
        int b = dm_peak_finder_find(&pf, f, 3, 0, 0, pd, pa);
        f[0] = NAN;
        int c = dm_peak_finder_find(&pf, f, 3, 0, 0, pd, pa);
        check(a == 0 && b == 0 && c == 0, "peaks-none-for-flat-zero-nan",
              "constant %d, zero %d, NaN %d peaks", a, b, c);
    }

    test_lobes(&pf, 1, 0, 0.01);
    test_lobes(&pf, 2, 90, 2.0);
    test_lobes(&pf, 2, 60, 2.5);
    test_lobes(&pf, 2, 45, 3.0);
    test_lobes(&pf, 3, 90, 2.0);
    test_lobes(&pf, 3, 60, 3.0);

    /* min_amp and max_peaks are honoured; dm_sh_peaks agrees with a kept finder. */
    {
        const double dirs[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, w[3] = {1, 0.7, 0.5};
        double f[NC], pd[9], pa[3], qd[9], qa[3];
        make_fod(3, dirs, w, f);
        const double min_amp = 0.3 * lobe_height();
        int all = dm_peak_finder_find(&pf, f, 3, min_amp, 0, pd, pa);
        int two = dm_peak_finder_find(&pf, f, 2, min_amp, 0, qd, qa);
        int above =
            all == 3 ? dm_peak_finder_find(&pf, f, 3, 0.5 * (pa[1] + pa[2]), 0, qd, qa) : -1;
        int once = dm_sh_peaks(LMAX, f, 3, min_amp, qd, qa);
        check(all == 3 && two == 2 && above == 2 && once == 3 && fabs(qa[2] - pa[2]) < 1e-12,
              "peaks-max-and-threshold", "all %d, max 2 -> %d, threshold -> %d, dm_sh_peaks %d",
              all, two, above, once);
    }
    /* The thresholds skip refining small local maxima (peaks.c): the peaks kept must be those
     * of the full search, filtered afterwards.  Lobes in random directions plus ripples. */
    {
        unsigned st = 77;
        int mismatches = 0, trials = 300;
        for (int t = 0; t < trials; t++) {
            double dirs[3][3], w[3] = {1, 0.3 + 0.7 * urand(&st), 0.2 + 0.5 * urand(&st)}, f[NC];
            for (int k = 0; k < 3; k++) random_dir(&st, dirs[k]);
            make_fod(1 + t % 3, (const double(*)[3])dirs, w, f);
            for (int i = 1; i < NC; i++) f[i] += 0.05 * (2 * urand(&st) - 1);
            double ad[3 * 16], aa[16], pd[9], pa[3];
            int nall = dm_peak_finder_find(&pf, f, 16, 0, 0, ad, aa);
            double rel = t % 2 ? 0.1 : 0.3, min_amp = t % 4 < 2 ? 0 : 0.5;
            int n = dm_peak_finder_find(&pf, f, 3, min_amp, rel, pd, pa);
            int want = 0;
            while (want < nall && want < 3 && aa[want] >= min_amp && aa[want] >= rel * aa[0])
                want++;
            int same = n == want;
            for (int k = 0; same && k < n; k++)
                same = fabs(pa[k] - aa[k]) < 1e-9 && angle_deg(pd + 3 * k, ad + 3 * k) < 1e-4;
            mismatches += !same;
        }
        check(mismatches == 0, "peaks-thresholds-match-full-search",
              "%d of %d functions gave other peaks", mismatches, trials);
    }
    dm_peak_finder_free(&pf);
}

int main(void)
{
    test_orthonormality();
    test_addition_theorem();
    test_zonal();
    test_derivatives();
    test_basis_unit();
    test_lmax_for();
    test_peaks();
    return failures != 0;
}
