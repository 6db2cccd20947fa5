/* A model that calls every built-in function, for the tests of the back end
 * (test_gradients.c, test_nvrtc.c). */
#ifndef DIMOC_TEST_ALL_BUILTINS_MODEL_H
#define DIMOC_TEST_ALL_BUILTINS_MODEL_H

/* Calls every built-in (the 3x3 matrices' ones too), a ternary, an array input, a voxel
 * input, each prior kind, a bound kind, a constraint and a user derivative (for z, equal to
 * the automatic one). */
static const char *const all_builtins_model =
    "model all_builtins \"every built-in function, for the derivative rules\"\n"
    "measure g[3] = bvecs\n"
    "measure b = bvals\n"
    "measure q[4]\n"
    "voxel T1 = 1.5\n"
    "param a in (0.2, 3) init 1\n"
    "param c in (-2, 2) init 0.5\n"
    "param th in [0, pi] init 1 periodic prior sphere\n"
    "param ph in [0, 2*pi] init 1 periodic\n"
    "param k in (0.1, 40) init 4\n"
    "param s in (0, inf) init 1 prior custom(-s)\n"
    "param u in (-inf, inf) init 0 prior gaussian(0, 1)\n"
    "param w in (0, 5) init 1 prior gamma(2, 1)\n"
    "param z in [0, 1] init 0.5 prior ard(0.5)\n"
    "param r in (-inf, 2) init 1\n"
    "constraint a + w <= 8\n"
    "let v = dir(th, ph)\n"
    "let n = cross(v, vec(0.3, -0.2, 0.9))\n"
    "let x = dot(g, v)\n"
    "let R = rotation(th, ph, c)\n"
    "let D = mul(mul(R, diag(a, w, k * 0.1)), transpose(R)) + sym(c, 0.1, -0.2, k, 0.3, u) / 9\n"
    "let E = mat(a, c, 0, u, w, 1, 0.5, r, k) * 0.5 - outer(v, n) / 2 + -diag(1, 1, 1)\n"
    "signal s * (exp(-a * b * 1e-3 * x^2) + log(a + 1) + sqrt(k) + sin(c) * cos(c)\n"
    "  + tan(c * 0.5) + asin(c / 3) + acos(c / 4) + atan(c) + atan2(c, a) + sinh(c)\n"
    "  + cosh(c * 0.5) + tanh(c) + abs(c) + pow(a, c) + min(a, k) + max(c, 0.1) + erf(c)\n"
    "  + dawson(sqrt(k)) + lgamma(a + 2) + log_i0(k * a) + legendre(4, x) + norm(n)\n"
    "  + (c > 0 ? a^3 : k^-1) + q[2] * T1 + u * u + w / a + z^0.5 + (-v / 2)[1] * c + r * c\n"
    "  + log1p(a * 0.1) + watson_sh(4, k) + stick_sh(6, a * b * 1e-3) + watson_stick(a, x, k)\n"
    "  + log_hyp1f1_bingham(-k, c, -a) + bingham_moments(-k, -a, c)[1]\n"
    "  + bingham_stick(b * 1e-3 * a, vec(x, dot(g, n), c * 0.3), k, a)\n"
    "  + bessel_j0(k * a) + bessel_j1(c * 3) * bessel_j1p_root(2)\n"
    "  + sum(m in 1..4) legendre(m, x) * bessel_j1(a * bessel_sj1p_root(m)) / m\n"
    "  + exp(-b * 1e-3 * quad(g, D)) + det(E) * 0.01 + trace(mul(D, E)) * 0.1\n"
    "  + dot(mv(E, g), v) * 0.1 + E[1][2] * D[2][0] + mv(transpose(E), g)[0] * 0.2)\n"
    "derivative z = s * 0.5 / sqrt(z)\n"
    "output OD = 2 / pi * atan(1 / k)\n"
    "output n1 vector = n\n";

#endif
