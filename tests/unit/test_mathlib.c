/* The math library (templates/maths/mathlib.h) in double precision against reference values
 * computed once with mpmath at 40 digits (they agree with scipy.special.dawsn, i0e and
 * eval_legendre to ~1e-15).  Tolerances: 1e-13 relative for Dawson, log I0, I1/I0 and the
 * Legendre polynomials (the brief asks 1e-12 for Dawson); the NODDI functions below
 * test_noddi_functions() say theirs. */
#include <math.h>
#include <stdio.h>

typedef double real;
#define DM_FN static inline
#include "maths/mathlib.h"

static const double dawson_ref[][2] = {
    {0.0, 0.0},
    {1e-08, 9.9999999999999995426e-9},
    {0.001, 0.00099999933333360002074},
    {0.1, 0.099335992397852866591},
    {0.5, 0.42443638350202229593},
    {0.924138873, 0.54104422463518169847},
    {1.0, 0.53807950691276841914},
    {1.5, 0.42824907108539862548},
    {2.0, 0.30134038892379196603},
    {3.0, 0.17827103061055828734},
    {4.5, 0.11408861022682498016},
    {6.0, 0.084542688974543852239},
    {6.49, 0.077990832061388333935},
    {6.51, 0.077745198488864599659},
    {8.0, 0.063000198707553387919},
    {10.0, 0.050253847187598528033},
    {30.0, 0.016675941401059175798},
    {100.0, 0.0050002500375093782827},
    {10000.0, 0.00005000000025000000375},
    {-0.7, -0.51050405755923176605},
    {-5.0, -0.10213407442427683544},
    {-12.0, -0.041812876453988260318},
};

static const double bessel_ref[][3] = {
    {0.0, 0.0, 0.0},
    {1e-06, 2.4999999999998435237e-13, 4.9999999999993747737e-7},
    {0.01, 0.000024999843751736089773, 0.0049999375010416488674},
    {0.3, 0.022374688622041903242, 0.14833742694087525726},
    {1.0, 0.23591435850717864869, 0.44638996589653450705},
    {2.5, 1.1908386711960280203, 0.76499674758880991728},
    {7.0, 5.1274929150828487811, 0.92553221079415218451},
    {14.99, 12.726008529137319209, 0.96604649870018840099},
    {15.0, 12.735669109476906261, 0.96606956398650812477},
    {15.01, 12.745329920312540671, 0.96609259792033553635},
    {20.0, 17.589610428244274291, 0.9746705078898071259},
    {50.0, 47.127575501871804584, 0.98994896737849775259},
    {300.0, 296.22958759300222884, 0.99833193979053352715},
    {10000.0, 9994.475903781432301, 0.99994999874987498046},
    {10000000.0, 9999991.0220136538162, 0.99999994999999875},
    {-3.0, 1.5853076218134209155, -0.80998529395650452706},
};

static const double legendre_ref[][4] = {
    {0, 0.3, 1.0, 0.0},
    {1, -0.4, -0.4000000000000000222, 1.0},
    {2, 0.5, -0.125, 1.5},
    {3, 1.0, 1.0, 6.0},
    {4, -1.0, 1.0, -10.0},
    {6, 0.77, -0.3332505843400625426, -2.3982059899874995504},
    {12, 0.31, -0.16092050525799747883, 2.1596671828462196291},
    {12, -0.999, 0.92348904365336463957, -75.034313039159071382},
    {20, 0.5, -0.048358381067373557016, 4.3185706868825946003},
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int failures;

static double rel_err(double got, double want)
{
    double scale = fabs(want) > 1e-300 ? fabs(want) : 1e-300;
    return want == got ? 0 : fabs(got - want) / scale;
}

/* Worst relative error of a table; prints one PASS/FAIL line. */
static void report(const char *name, double worst, double at, double tol)
{
    if (worst <= tol) {
        printf("PASS %s (worst relative error %.2g)\n", name, worst);
    } else {
        printf("FAIL %s: relative error %.3g at x = %.17g exceeds %.1g\n", name, worst, at, tol);
        failures++;
    }
}

/* J_l(x) = integral_-1^1 exp(-x u^2) P_l(u) du (mpmath quadrature, 40 digits): both series
 * sides of 0, both sides of the asymptotic switch at x = 40 (double), odd l. */
static const double stick_ref[][3] = {
    {0, 0.0, 2.0},
    {0, 1e-6, 1.9999993333335333333},
    {0, 0.3, 1.8167857540655010773},
    {2, 0.001, -0.00026655241269167986256},
    {2, 1.7, -0.23594319068207796664},
    {4, 5.1, 0.1023506632752250024},
    {6, 12.0, -0.064437853319540800113},
    {8, 0.5, 4.8232385714531997061e-6},
    {12, 1.0, 1.0488462852774436564e-7},
    {12, 5.1, 0.00031643853142265692273},
    {12, 19.9, 0.012532712906511398534},
    {12, 20.1, 0.01270947965234520515},
    {6, 39.9, -0.067094905857145584093},
    {6, 40.1, -0.067018126115441107014},
    {2, 100.0, -0.087293352157096664344},
    {12, 400.0, 0.018131636604782300459},
    {4, -2.0, 0.27228350510495102157},
    {14, 8.0, -0.00038999867412090967546},
    {3, 2.0, 0.0},
};

/* W_l(kappa): the mean of P_l(u) under exp(kappa u^2) on [0, 1] (mpmath quadrature). */
static const double watson_ref[][3] = {
    {2, 1e-4, 0.000013333460315767145099},
    {2, 0.5, 0.069597932111493449203},
    {2, 4.0, 0.5569398885236599243},
    {4, 16.0, 0.71262671301767020563},
    {6, 1.0, 0.00098247710988677700442},
    {8, 64.0, 0.75087199919420097993},
    {12, 64.0, 0.53813566586824988524},
    {12, 2.0, 6.1756955140151969795e-6},
    {14, 30.0, 0.1670456778928028257},
    {20, 64.0, 0.19036344580777275344},
    {2, 300.0, 0.99499159635185343028},
    {6, -3.0, -0.013329149857540665455},
    {4, 0.0, 0.0},
};

/* The Watson-averaged stick E[exp(-x (g.n)^2)], t = g.v, by 2-D quadrature over the sphere
 * (mpmath): what NODDI's degree-12 series approximates. */
static const double watson_stick_ref[][4] = {
    {1.7, 0.9, 4, 0.407753791291087},     {5.1, 0.99, 16, 0.0103421708789905},
    {5.1, 0.99, 64, 0.00737983687130748}, {5.1, 0.5, 64, 0.29729175357305},
    {3.4, 1.0, 64, 0.035261810817772},    {1.7, 0.3, 1, 0.666520750707854},
    {0.85, 0.0, 0.5, 0.790449404179378},  {5.1, 0.7, 8, 0.178753027798777},
};

/* diag(a0, a1, a2): log 1F1(1/2; 3/2; diag a) and the moments <n_i^2>, by 1-D quadrature
 * of the sphere integral (the azimuth done by I0), mpmath at 30 digits. */
static const double bingham_ref[][7] = {
    {0, 0, 0, 0.0, 0.33333333333333333, 0.33333333333333333, 0.33333333333333333},
    {1, 0, 0, 0.38025105262664983, 0.42923070582775096, 0.28538464708612452, 0.28538464708612452},
    {0, -4, -4, -1.8926619735220262, 0.70462659234910662, 0.14768670382544669, 0.14768670382544669},
    {0, -16, -16, -3.4315431839588791, 0.93513524604588314, 0.032432376977058431,
     0.032432376977058431},
    {0, -64, -64, -4.8440589401872654, 0.98424786301765796, 0.0078760684911710188,
     0.0078760684911710188},
    {0, -10, -60, -3.8587469970770332, 0.93824062369003811, 0.053349166605281483,
     0.0084102097046804072},
    {-3, -20, -25, -6.6272059379638135, 0.94624511037850161, 0.030433876057127621,
     0.023321013564370771},
    {5, 2, -1, 3.0426247606655549, 0.70824709534690105, 0.19722500778155818, 0.094527896871540775},
    {0, -0.5, -30, -2.0521403702546624, 0.55160580454361252, 0.43160410349748096,
     0.016790091958906526},
    {-41, -1.2, 0, -2.4842371428409415, 0.012325449299523471, 0.35354542597264915,
     0.63412912472782738},
};

/* The Bingham-averaged stick 1F1(D - x q q') / 1F1(D), D = diag(-k1, -k2, 0), with the
 * eigenvalues of D - x q q' found by mpmath and both 1F1 by quadrature. */
static const double bingham_stick_ref[][7] = {
    {1.7, 0.29999997350340351, 0.19999998233560236, 0.93273791761872527, 4, 4, 0.38499483132660972},
    {5.1, 0.10000004349157838, 0.0, 0.9949874327355509, 64, 16, 0.0081847614437937629},
    {3.4, 0.60000008325001732, 0.60000008325001732, 0.5291500734195778, 8, 1, 0.47130367594386126},
    {1.7, 0.0, 0.0, 1.0, 1, 1, 0.55276029251319117},
    {5.1, 1.0, 0.0, 0.0, 30, 5, 0.92308045444971234},
    {2.55, 0.50000049750074253, -0.7000006965010395, 0.50990050735125725, 20, 20,
     0.53698161459204028},
};

/* log 1F1(1/2; 3/2; A) of a symmetric matrix (diagonal d, off-diagonal o01, o02, o12) as the
 * compiler lowers it (compiler/back/lower.c): trace removed, then c1 and c0. */
static double log_hyp1f1_sym(const double d[3], const double o[3])
{
    double mean = (d[0] + d[1] + d[2]) / 3, e0 = d[0] - mean, e1 = d[1] - mean, e2 = d[2] - mean;
    double c1 = e0 * e1 + e0 * e2 + e1 * e2 - o[0] * o[0] - o[1] * o[1] - o[2] * o[2];
    double c0 = e0 * e1 * e2 + 2 * o[0] * o[1] * o[2] - e0 * o[2] * o[2] - e1 * o[1] * o[1] -
                e2 * o[0] * o[0];
    return dm_log_hyp1f1_dep(0, c1, c0) + mean;
}

/* u^2 P_l = A P_(l+2) + B P_l + C P_(l-2), the coefficients of the derivative rules. */
static void u2_coefs(int l, double *A, double *B, double *C)
{
    *A = (l + 1.0) * (l + 2) / ((2 * l + 1.0) * (2 * l + 3));
    *B = ((l + 1.0) * (l + 1) / (2 * l + 3) + (double)l * l / (2 * l - 1)) / (2 * l + 1);
    *C = l * (l - 1.0) / ((2 * l + 1.0) * (2 * l - 1));
}

static void test_noddi_functions(void)
{
    double worst = 0, at = 0;
    for (int i = 0; i < COUNT(stick_ref); i++) {
        double got = dm_stick_sh((int)stick_ref[i][0], stick_ref[i][1]);
        double e = fabs(got - stick_ref[i][2]) / fmax(fabs(stick_ref[i][2]), 1e-300);
        if (stick_ref[i][2] == 0) e = fabs(got);
        if (e > worst) worst = e, at = stick_ref[i][1];
    }
    report("stick-sh", worst, at, 1e-13);

    worst = 0;
    for (int i = 0; i < COUNT(watson_ref); i++) {
        double got = dm_watson_sh((int)watson_ref[i][0], watson_ref[i][1]);
        double e = fabs(got - watson_ref[i][2]) / fmax(fabs(watson_ref[i][2]), 1e-300);
        if (watson_ref[i][2] == 0) e = fabs(got);
        if (e > worst) worst = e, at = watson_ref[i][1];
    }
    report("watson-sh", worst, at, 1e-12);
    if (dm_watson_sh(0, 7) == 1 && dm_watson_sh(3, 7) == 0 && dm_stick_sh(5, 1) == 0)
        printf("PASS watson-sh-order-0-and-odd\n");
    else
        printf("FAIL watson-sh-order-0-and-odd: W0 %g W3 %g J5 %g\n", dm_watson_sh(0, 7),
               dm_watson_sh(3, 7), dm_stick_sh(5, 1)),
            failures++;

    /* The derivative rules of compiler/back/deriv.c against central differences:
     * J_l' = -(A J_(l+2) + B J_l + C J_(l-2)), W_l' = A W_(l+2) + B W_l + C W_(l-2) - W_l <u^2>. */
    double worst_j = 0, worst_w = 0;
    for (int l = 0; l <= 12; l += 2)
        for (double x = 0.05; x < 60; x *= 1.7) {
            double A, B, C, h = 1e-5 * fmax(x, 1);
            u2_coefs(l, &A, &B, &C);
            double rule = -(A * dm_stick_sh(l + 2, x) + B * dm_stick_sh(l, x) +
                            (l ? C * dm_stick_sh(l - 2, x) : 0));
            double fd = (dm_stick_sh(l, x + h) - dm_stick_sh(l, x - h)) / (2 * h);
            worst_j = fmax(worst_j, fabs(rule - fd) / fmax(fabs(fd), 1e-6));
            if (l == 0) continue;
            double u2 = (2 * dm_watson_sh(2, x) + 1) / 3;
            rule = A * dm_watson_sh(l + 2, x) + B * dm_watson_sh(l, x) +
                   C * dm_watson_sh(l - 2, x) - dm_watson_sh(l, x) * u2;
            fd = (dm_watson_sh(l, x + h) - dm_watson_sh(l, x - h)) / (2 * h);
            worst_w = fmax(worst_w, fabs(rule - fd) / fmax(fabs(fd), 1e-6));
        }
    report("stick-sh-derivative-rule", worst_j, 0, 1e-7);
    report("watson-sh-derivative-rule", worst_w, 0, 1e-7);

    /* NODDI's degree-12 series (what watson_stick lowers to) against the exact average: the
     * truncation is the whole error, below 1e-4 of the b=0 signal up to kappa = 64, b d = 5.1. */
    worst = 0;
    for (int i = 0; i < COUNT(watson_stick_ref); i++) {
        double x = watson_stick_ref[i][0], t = watson_stick_ref[i][1], k = watson_stick_ref[i][2];
        double s = 0;
        for (int l = 0; l <= 12; l += 2)
            s += (2 * l + 1) / 2.0 * dm_watson_sh(l, k) * dm_stick_sh(l, x) * dm_legendre(l, t);
        double e = fabs(s - watson_stick_ref[i][3]);
        if (e > worst) worst = e, at = k;
    }
    if (worst <= 1e-4)
        printf("PASS watson-stick-series (worst absolute error %.2g)\n", worst);
    else
        printf("FAIL watson-stick-series: absolute error %.3g at kappa %g exceeds 1e-4\n", worst,
               at),
            failures++;

    /* The saddle-point 1F1 against quadrature: an approximation, good to a few percent (Kume &
     * Wood 2005; here at most 5.4% at diag(0, -4, -4)), its moments to ~0.05. */
    double worst_log = 0, worst_mom = 0, worst_sum = 0, worst_fd = 0;
    for (int i = 0; i < COUNT(bingham_ref); i++) {
        const double *r = bingham_ref[i];
        double zero[3] = {0, 0, 0}, sum = 0;
        worst_log = fmax(worst_log, fabs(log_hyp1f1_sym(r, zero) - r[3]));
        for (int k = 0; k < 3; k++) {
            double m = dm_bingham_moment(k, r[0], r[1], r[2]);
            sum += m;
            worst_mom = fmax(worst_mom, fabs(m - r[4 + k]));
            double up[3] = {r[0], r[1], r[2]}, down[3] = {r[0], r[1], r[2]}, h = 1e-5;
            up[k] += h;
            down[k] -= h;
            double fd = (log_hyp1f1_sym(up, zero) - log_hyp1f1_sym(down, zero)) / (2 * h);
            worst_fd = fmax(worst_fd, fabs(m - fd));
        }
        worst_sum = fmax(worst_sum, fabs(sum - 1));
    }
    if (worst_log <= 0.06)
        printf("PASS bingham-1f1-saddle-point (worst |log error| %.3g)\n", worst_log);
    else
        printf("FAIL bingham-1f1-saddle-point: |log error| %.3g exceeds 0.06\n", worst_log),
            failures++;
    if (worst_mom <= 0.05)
        printf("PASS bingham-moments (worst absolute error %.3g)\n", worst_mom);
    else
        printf("FAIL bingham-moments: absolute error %.3g exceeds 0.05\n", worst_mom), failures++;
    report("bingham-moments-sum-to-1", worst_sum, 0, 1e-13);
    report("bingham-moments-are-log-1f1-derivatives", worst_fd, 0, 1e-8);

    /* The partials of dm_log_hyp1f1_dep against central differences in c1 and c0. */
    worst = 0;
    for (int i = 0; i < COUNT(bingham_ref); i++) {
        const double *r = bingham_ref[i];
        double mean = (r[0] + r[1] + r[2]) / 3, e0 = r[0] - mean, e1 = r[1] - mean,
               e2 = r[2] - mean;
        double c1 = e0 * e1 + e0 * e2 + e1 * e2, c0 = e0 * e1 * e2, h = 1e-4;
        double d1 = (dm_log_hyp1f1_dep(0, c1 + h, c0) - dm_log_hyp1f1_dep(0, c1 - h, c0)) / (2 * h);
        double d0 = (dm_log_hyp1f1_dep(0, c1, c0 + h) - dm_log_hyp1f1_dep(0, c1, c0 - h)) / (2 * h);
        worst = fmax(worst, fabs(dm_log_hyp1f1_dep(1, c1, c0) - d1) / fmax(fabs(d1), 1e-3));
        worst = fmax(worst, fabs(dm_log_hyp1f1_dep(2, c1, c0) - d0) / fmax(fabs(d0), 1e-3));
    }
    report("bingham-1f1-partials", worst, 0, 1e-6);

    /* The family calls (one pass for every order) give each order's single call bit for bit:
     * generated code computes several orders of one argument by one family call. */
    long differ = 0, compared = 0;
    for (int i = 0; i <= 2000; i++) {
        double k = -5 + i * 0.04, w[17], h[3], m[3];
        dm_watson_sh_family(16, k, w);
        for (int l = 0; l <= 16; l++, compared++) differ += w[l] != dm_watson_sh(l, k);
        double c1 = -0.5 - i * 0.01, c0 = 0.1 * sin(i);
        dm_log_hyp1f1_family(c1, c0, h);
        for (int j = 0; j < 3; j++, compared++) differ += h[j] != dm_log_hyp1f1_dep(j, c1, c0);
        dm_bingham_moment_family(-k * k, -k * k / 3, 0, m);
        for (int j = 0; j < 3; j++, compared++)
            differ += m[j] != dm_bingham_moment(j, -k * k, -k * k / 3, 0);
    }
    if (differ == 0)
        printf("PASS families-equal-single-calls (%ld values)\n", compared);
    else
        printf("FAIL families-equal-single-calls: %ld of %ld differ\n", differ, compared),
            failures++;

    /* The ratio NODDI-Bingham's neurite signal is (thesis eq. 5.18): errors mostly cancel,
     * to ~0.3% for concentrations above 4, 3.5% at kappa1 = kappa2 = 1. */
    worst = 0;
    for (int i = 0; i < COUNT(bingham_stick_ref); i++) {
        const double *r = bingham_stick_ref[i];
        double x = r[0], q[3] = {r[1], r[2], r[3]}, D[3] = {-r[4], -r[5], 0}, none[3] = {0, 0, 0};
        double d[3], o[3] = {-x * q[0] * q[1], -x * q[0] * q[2], -x * q[1] * q[2]};
        for (int k = 0; k < 3; k++) d[k] = D[k] - x * q[k] * q[k];
        double s = exp(log_hyp1f1_sym(d, o) - log_hyp1f1_sym(D, none));
        worst = fmax(worst, fabs(s - r[6]) / r[6]);
    }
    if (worst <= 0.04)
        printf("PASS bingham-stick-ratio (worst relative error %.3g)\n", worst);
    else
        printf("FAIL bingham-stick-ratio: relative error %.3g exceeds 0.04\n", worst), failures++;
}

int main(void)
{
    double worst = 0, at = 0;
    for (int i = 0; i < COUNT(dawson_ref); i++) {
        double e = rel_err(dm_dawson(dawson_ref[i][0]), dawson_ref[i][1]);
        if (e > worst) worst = e, at = dawson_ref[i][0];
    }
    report("dawson", worst, at, 1e-13);

    /* D'(x) = 1 - 2 x D(x) against a central difference of D (h = 1e-5: error ~1e-10). */
    worst = 0;
    for (double x = -9; x <= 9; x += 0.37) {
        double h = 1e-5, fd = (dm_dawson(x + h) - dm_dawson(x - h)) / (2 * h);
        double e = fabs(dm_dawson_deriv(x) - fd) / fmax(fabs(fd), 1e-3);
        if (e > worst) worst = e, at = x;
    }
    report("dawson-derivative", worst, at, 1e-8);

    worst = 0;
    double worst_ratio = 0, at_ratio = 0;
    for (int i = 0; i < COUNT(bessel_ref); i++) {
        double x = bessel_ref[i][0];
        double e = rel_err(dm_log_i0(x), bessel_ref[i][1]);
        if (e > worst) worst = e, at = x;
        e = rel_err(dm_log_i0_deriv(x), bessel_ref[i][2]);
        if (e > worst_ratio) worst_ratio = e, at_ratio = x;
    }
    report("log-i0", worst, at, 1e-13);
    report("log-i0-derivative-i1-over-i0", worst_ratio, at_ratio, 1e-13);
    if (isfinite(dm_log_i0(1e30)) && isfinite(dm_log_i0_deriv(1e30)))
        printf("PASS log-i0-huge-argument\n");
    else
        printf("FAIL log-i0-huge-argument: %g %g\n", dm_log_i0(1e30), dm_log_i0_deriv(1e30)),
            failures++;

    worst = 0;
    double worst_d = 0, at_d = 0;
    for (int i = 0; i < COUNT(legendre_ref); i++) {
        int n = (int)legendre_ref[i][0];
        double x = legendre_ref[i][1];
        double e = fabs(dm_legendre(n, x) - legendre_ref[i][2]) / fmax(1, fabs(legendre_ref[i][2]));
        if (e > worst) worst = e, at = x;
        e = fabs(dm_legendre_deriv(n, x) - legendre_ref[i][3]) / fmax(1, fabs(legendre_ref[i][3]));
        if (e > worst_d) worst_d = e, at_d = x;
    }
    report("legendre", worst, at, 1e-13);
    report("legendre-derivative", worst_d, at_d, 1e-13);

    /* dm_wrap maps into [lo, hi) and moves by whole periods only. */
    int wrap_ok = 1;
    for (double x = -20; x <= 20; x += 0.173) {
        double y = dm_wrap(x, 0, 3.141592653589793);
        double periods = (x - y) / 3.141592653589793;
        if (!(y >= 0 && y < 3.141592653589793) || fabs(periods - round(periods)) > 1e-12)
            wrap_ok = 0;
    }
    if (!(dm_wrap(2 * 3.141592653589793, 0, 2 * 3.141592653589793) == 0)) wrap_ok = 0;
    if (wrap_ok)
        printf("PASS wrap-periodic\n");
    else
        printf("FAIL wrap-periodic: a value left [lo, hi) or moved by a non-whole period\n"),
            failures++;

    /* The numerical-derivative step: cbrt(eps) * max(|x|, 1). */
    if (fabs(dm_fd_step(1) - cbrt(2.220446049250313e-16)) < 1e-18 &&
        fabs(dm_fd_step(-200) - 200 * cbrt(2.220446049250313e-16)) < 1e-15)
        printf("PASS fd-step\n");
    else
        printf("FAIL fd-step: %.17g\n", dm_fd_step(1)), failures++;
    test_noddi_functions();
    return failures ? 1 : 0;
}
