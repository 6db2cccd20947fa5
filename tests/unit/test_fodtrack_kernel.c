/* Independent truths for the pieces of the FOD tracking kernel (templates/fodtrack/): the
 * arithmetic-only angle functions against libm, the angle-free SH amplitude (stored and fused
 * with the interpolation) against runtime/sphere/sh.c, the trilinear interpolation of a linear field (which it must reproduce
 * exactly between voxel centres), MRtrix's rotation taking z to a direction, the arc geometry
 * (length along the circle, end tangent), and the envelope's calibration against the numbers
 * tckgen 3.0.3 prints for its defaults (7 directions; ratio 2.15373945 for iFOD2 with a step of
 * half a voxel, 1.21581328 for iFOD1 at 15 degrees). */
#include "check.h"
#include "fodtrack/calibrate.h"
#include "fodtrack/fod_image.h"
#include "sphere/sh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DM_FN static inline __attribute__((unused))
#include "maths/philox.h"
#define real double
#define DM_FT(name) dm_ft_##name##_d
#include "fodtrack/det_math.h"
#include "fodtrack/fod_field.h"
#include "fodtrack/fod_track.h"

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

static void test_det_math(void)
{
    double e_acos = 0, e_sc = 0, e_log = 0, e_exp = 0;
    for (double x = -1; x <= 1; x += 1e-4)
        e_acos = fmax(e_acos, fabs(dm_ft_det_acos_d(x) - acos(x)));
    for (double x = -M_PI; x <= M_PI; x += 1e-4) {
        double s, c;
        dm_ft_det_sincos_d(x, &s, &c);
        e_sc = fmax(e_sc, fmax(fabs(s - sin(x)), fabs(c - cos(x))));
    }
    for (double x = 1e-6; x < 1e6; x *= 1.01) {
        e_log = fmax(e_log, fabs(dm_ft_det_log_d(x) - log(x)));
        e_exp = fmax(e_exp, fabs(dm_ft_det_exp_d(log(x)) / x - 1));
    }
    check(e_acos < 1e-14, "det-acos", "largest error %.3g", e_acos);
    check(e_sc < 1e-14, "det-sincos", "largest error %.3g", e_sc);
    check(e_log < 1e-13, "det-log", "largest error %.3g", e_log);
    check(e_exp < 1e-13, "det-exp", "largest relative error %.3g", e_exp);
}

/* The amplitude from coefficients stored in row order (dm_fod_row_order) against sh.c's value
 * of the same function in MRtrix's order. */
static void test_amplitude(void)
{
    dm_fod_sh_table t;
    dm_fod_sh_table_fill(&t);
    int natural[DM_FOD_NCOEF_MAX];
    int n = dm_fod_row_order(8, natural), seen[45] = {0}, perm_ok = n == 45;
    for (int j = 0; j < n && perm_ok; j++)
        perm_ok = natural[j] >= 0 && natural[j] < 45 && !seen[natural[j]]++;
    check(perm_ok, "row-order-is-a-permutation", "%d coefficients", n);
    dm_fod_field f = {1, 1, 1, 45, 8, NULL, NULL, {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, &t};
    unsigned st = 7;
    double c[45], rowc[45], worst_amp = 0;
    for (int k = 0; k < 45; k++) c[k] = urand(&st) - 0.5;
    for (int j = 0; j < 45; j++) rowc[j] = c[natural[j]];
    for (int i = 0; i < 2000; i++) {
        double d[3];
        random_dir(&st, d);
        worst_amp =
            fmax(worst_amp, fabs(dm_ft_fod_amplitude_d(&f, rowc, d) - dm_sh_value(8, c, d)));
    }
    check(worst_amp < 1e-12, "fod-amplitude-vs-sh", "largest difference %.3g", worst_amp);
}

/* The fused amplitude (interpolated as it sums, what iFOD2 evaluates) is exactly the amplitude
 * of the interpolated coefficients, and both are sh.c's value of the trilinear blend of the
 * corners' FODs (built here in MRtrix's order). */
static void test_fused_amplitude(void)
{
    enum { N = 3, NV = N * N * N, NC = 45 };
    dm_fod_sh_table t;
    dm_fod_sh_table_fill(&t);
    int natural[DM_FOD_NCOEF_MAX], row[NV];
    dm_fod_row_order(8, natural);
    static float coef[NV * NC];
    static double nat[NV][NC];
    unsigned st = 3;
    for (int v = 0; v < NV; v++) {
        row[v] = v;
        for (int k = 0; k < NC; k++) nat[v][k] = (float)(urand(&st) - 0.3);
        for (int j = 0; j < NC; j++) coef[v * NC + j] = (float)nat[v][natural[j]];
    }
    dm_fod_field f = {N, N, N, NC, 8, row, coef, {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, &t};
    double worst_ref = 0;
    int differ = 0;
    for (int i = 0; i < 500; i++) {
        double p[3] = {2 * urand(&st), 2 * urand(&st), 2 * urand(&st)}, d[3], c[DM_FOD_NCOEF_MAX];
        random_dir(&st, d);
        double fused = 0;
        int ok = dm_ft_fod_amp_at_d(&f, p, d, &fused) && dm_ft_fod_interp_d(&f, p, c);
        differ += !ok || fused != dm_ft_fod_amplitude_d(&f, c, d);
        double blend[NC] = {0};
        int lo[3];
        double w[3];
        for (int a = 0; a < 3; a++) {
            lo[a] = p[a] >= 1 ? 1 : 0;
            w[a] = p[a] - lo[a];
        }
        for (int corner = 0; corner < 8; corner++) {
            double wc = (corner & 1 ? w[0] : 1 - w[0]) * (corner & 2 ? w[1] : 1 - w[1]) *
                        (corner & 4 ? w[2] : 1 - w[2]);
            int v = ((lo[2] + (corner >> 2 & 1)) * N + lo[1] + (corner >> 1 & 1)) * N + lo[0] +
                    (corner & 1);
            for (int k = 0; k < NC; k++) blend[k] += wc * nat[v][k];
        }
        worst_ref = fmax(worst_ref, fabs(fused - dm_sh_value(8, blend, d)));
    }
    check(differ == 0, "fused-equals-interpolated", "%d of 500 differ", differ);
    check(worst_ref < 1e-12, "fused-vs-sh-of-blend", "largest difference %.3g", worst_ref);
}

/* A field linear in the voxel coordinates is reproduced exactly inside the grid; outside by
 * more than half a voxel, or where the nearest voxel is empty, the FOD is not valid. */
static void test_interpolation(void)
{
    enum { NX = 5, NY = 4, NZ = 3, NC = 6 };
    int row[NX * NY * NZ];
    float coef[NX * NY * NZ * NC];
    for (int z = 0; z < NZ; z++)
        for (int y = 0; y < NY; y++)
            for (int x = 0; x < NX; x++) {
                int v = (z * NY + y) * NX + x;
                row[v] = v;
                for (int k = 0; k < NC; k++) coef[v * NC + k] = (float)(1 + k + 2 * x - y + 3 * z);
            }
    dm_fod_sh_table t;
    dm_fod_sh_table_fill(&t);
    dm_fod_field f = {
        NX, NY, NZ, NC, 2, row, coef, {{0.5, 0, 0, 1}, {0, 0.5, 0, -1}, {0, 0, 0.5, 2}}, &t};
    /* world p -> voxel (p/2 + offset); a point at voxel (1.25, 2.5, 0.75) */
    double v[3] = {1.25, 2.5, 0.75}, p[3] = {(v[0] - 1) * 2, (v[1] + 1) * 2, (v[2] - 2) * 2}, c[NC];
    int ok = dm_ft_fod_interp_d(&f, p, c);
    double worst = 0;
    for (int k = 0; k < NC; k++)
        worst = fmax(worst, fabs(c[k] - (1 + k + 2 * v[0] - v[1] + 3 * v[2])));
    check(ok && worst < 1e-12, "interp-linear-field", "valid %d, largest error %.3g", ok, worst);
    double out[3] = {(-0.6 - 1) * 2, p[1], p[2]};
    check(!dm_ft_fod_interp_d(&f, out, c), "interp-outside", "a point 0.6 voxel out was valid");
    double edge[3] = {(-0.4 - 1) * 2, p[1], p[2]};
    ok = dm_ft_fod_interp_d(&f, edge, c);
    check(ok && fabs(c[0] - (1 + 0 - v[1] + 3 * v[2])) < 1e-12, "interp-edge-voxel-alone",
          "valid %d, value %.6g", ok, c[0]);
}

static void test_rotate_and_arc(void)
{
    unsigned st = 11;
    double worst_z = 0, worst_len = 0, worst_tan = 0, worst_ortho = 0;
    dm_ft_ctx c;
    memset(&c, 0, sizeof c);
    c.step = 1.0;
    c.nsub = 3;
    for (int i = 0; i < 500; i++) {
        double d[3], v[3], out[3], zed[3] = {0, 0, 1}, a[3], b[3];
        random_dir(&st, d);
        dm_ft_ft_rotate_d(d, zed, out); /* z goes to d */
        worst_z = fmax(worst_z, fabs(out[0] - d[0]) + fabs(out[1] - d[1]) + fabs(out[2] - d[2]));
        random_dir(&st, v);
        dm_ft_ft_rotate_d(d, v, a); /* a rotation keeps angles: v.z = a.d */
        worst_ortho = fmax(worst_ortho, fabs(v[2] - (a[0] * d[0] + a[1] * d[1] + a[2] * d[2])));
        /* an arc from the origin along d turning to e within 45 degrees */
        double e[3], local[3];
        double ct = 1 - urand(&st) * (1 - cos(M_PI / 4)), sn = sqrt(1 - ct * ct);
        local[0] = sn, local[1] = 0, local[2] = ct;
        dm_ft_ft_rotate_d(d, local, e);
        double p0[3] = {0, 0, 0}, pts[3 * DM_FT_MAX_SUB], tan[3 * DM_FT_MAX_SUB];
        dm_ft_ft_arc_d(&c, p0, d, e, pts, tan);
        /* the chord of an arc of length L turning by theta is 2 (L / theta) sin(theta / 2) */
        double theta = acos(ct), chord = theta > 0 ? 2 / theta * sin(theta / 2) : 1;
        memcpy(b, pts + 6, sizeof b);
        worst_len = fmax(worst_len, fabs(sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2]) - chord));
        worst_tan =
            fmax(worst_tan, fabs(tan[6] - e[0]) + fabs(tan[7] - e[1]) + fabs(tan[8] - e[2]));
    }
    check(worst_z < 1e-12, "rotate-takes-z-to-d", "largest error %.3g", worst_z);
    check(worst_ortho < 1e-12, "rotate-keeps-angles", "largest error %.3g", worst_ortho);
    check(worst_len < 1e-12, "arc-chord-length", "largest error %.3g", worst_len);
    check(worst_tan < 1e-12, "arc-ends-along-e", "largest error %.3g", worst_tan);
}

static void test_calibration(void)
{
    dm_ft_calibration cal;
    int rc = dm_ft_calibrate(1, 8, M_PI / 4, 1.0, 2.0, 3, 0.25, &cal);
    check(rc == 0 && cal.n == 7 && fabs(cal.ratio - 2.15373945) < 1e-5, "calibrate-ifod2-as-tckgen",
          "%d directions, ratio %.8f (tckgen: 7, 2.15373945)", cal.n, cal.ratio);
    dm_ft_calibration_free(&cal);
    rc = dm_ft_calibrate(0, 8, 15 * M_PI / 180, 0, 0, 0, 1.0, &cal);
    check(rc == 0 && cal.n == 7 && fabs(cal.ratio - 1.21581328) < 1e-5, "calibrate-ifod1-as-tckgen",
          "%d directions, ratio %.8f (tckgen: 7, 1.21581328)", cal.n, cal.ratio);
    dm_ft_calibration_free(&cal);
}

int main(void)
{
    test_det_math();
    test_amplitude();
    test_fused_amplitude();
    test_interpolation();
    test_rotate_and_arc();
    test_calibration();
    return failures != 0;
}
