#include "fodtrack/calibrate.h"

#include "sphere/sh.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The amplitude at angle el from +z of the SH delta along +z (degree lmax): sum over even l of
 * Y_l0(z) Y_l0(el), the addition theorem. */
static double delta_amplitude(int lmax, double el)
{
    double z0[DM_SH_LMAX_MAX / 2 + 1], z1[DM_SH_LMAX_MAX / 2 + 1];
    dm_sh_zonal(lmax, 1.0, z0);
    dm_sh_zonal(lmax, cos(el), z1);
    double sum = 0;
    for (int l = 0; l <= lmax; l += 2) sum += z0[l / 2] * z1[l / 2];
    return sum;
}

/* iFOD2's calibration value of the arc that turns by el within the plane x-z: the delta's
 * amplitude along each sample's tangent, scaled down by the sample's sideways offset
 * (1 - x / vox, the fall-off of a one-voxel-wide fibre), in the path value's trapezoid. */
static double arc_value(int lmax, double el, double step, double vox, int nsub, double power)
{
    double lp = 0.5 * log(delta_amplitude(lmax, 0));
    for (int i = 1; i <= nsub; i++) {
        double a = el * i / nsub, x = el > 0 ? step / el * (1 - cos(a)) : 0;
        double f = delta_amplitude(lmax, a) * (1 - x / vox);
        if (!(f > 0)) return 0;
        lp += i < nsub ? log(f) : 0.5 * log(f);
    }
    return exp(power * lp);
}

/* A hexagonal lattice of spacing s (radians) mapped onto the sphere around +z, the points
 * within angle A: n of them into out (3 doubles each) when out is given. */
static int direction_grid(double A, double s, double *out)
{
    int ext = (int)ceil(A / s), n = 0;
    double max_r2 = (A / s) * (A / s);
    for (int i = -ext; i <= ext; i++)
        for (int j = -ext; j <= ext; j++) {
            double x = i + 0.5 * j, y = sqrt(3.0) / 2 * j, r2 = x * x + y * y;
            if (r2 > max_r2) continue;
            if (out) {
                double rho = s * sqrt(r2), scale = rho > 0 ? s * sin(rho) / rho : 0;
                out[3 * n] = scale * x;
                out[3 * n + 1] = scale * y;
                out[3 * n + 2] = cos(rho);
            }
            n++;
        }
    return n;
}

int dm_ft_calibrate(int ifod2, int lmax, double max_angle, double step, double vox, int nsub,
                    double power, dm_ft_calibration *out)
{
    memset(out, 0, sizeof *out);
    /* the value as the proposal turns away from the current direction, in steps of 0.001 rad
     * until it vanishes */
    int cap = (int)(max_angle / 0.001) + 2, n = 0;
    double *el = malloc(cap * sizeof *el), *val = malloc(cap * sizeof *val);
    for (float e = 0; e < max_angle && n < cap; e += 0.001f) {
        double v = ifod2 ? arc_value(lmax, e, step, vox, nsub, power)
                         : pow(delta_amplitude(lmax, e), power);
        el[n] = e;
        val[n++] = v;
        if (!(v > 0) || !isfinite(v)) break;
    }
    double zero = el[n - 1], best_cost = INFINITY, best_el = 0, best_ratio = 0;
    for (int i = 1; i < n; i++) {
        if (!(val[i] > 0) || !isfinite(val[i])) continue;
        /* the expected trials grow with the ratio; the set with its size */
        double trials = max_angle * max_angle * (1 + val[0] / val[i]) / (2 * zero * zero);
        double cost = trials + direction_grid(max_angle + el[i], sqrt(3.0) * el[i], NULL);
        if (cost > 0 && cost < best_cost) {
            best_cost = cost;
            best_el = el[i];
            best_ratio = val[0] / val[i];
        }
    }
    free(el);
    free(val);
    if (!(best_ratio > 0))
        return dm_set_error("calibrating the rejection sampler: no direction within the "
                            "maximum angle has a positive value (angle %.1f deg, step %g mm)",
                            max_angle * 180 / 3.14159265358979323846, step);
    double A = max_angle + best_el, s = sqrt(3.0) * best_el;
    out->n = direction_grid(A, s, NULL);
    out->dirs = malloc(3 * out->n * sizeof *out->dirs);
    direction_grid(A, s, out->dirs);
    out->ratio = best_ratio;
    return 0;
}

void dm_ft_calibration_free(dm_ft_calibration *c)
{
    free(c->dirs);
    memset(c, 0, sizeof *c);
}
