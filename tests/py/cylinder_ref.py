"""Writes tests/unit/commit_cylinder_ref.h (the reference of test_commit.c's commit-cylinder-kernel):
Van Gelderen's cylinder in numpy, with the roots of J1' from scipy.special.jnp_zeros.
    /usr/bin/python3 tests/py/cylinder_ref.py > tests/unit/commit_cylinder_ref.h"""
import numpy as np
from scipy.special import jnp_zeros
GAMMA = 2.675987e8
roots = jnp_zeros(1, 400)
def S(d, R, delta, Delta):
    a = roots / R; r = d * a * a
    br = 2*r*delta - 2 + 2*np.exp(-r*delta) + 2*np.exp(-r*Delta) - np.exp(-r*(Delta-delta)) - np.exp(-r*(Delta+delta))
    return np.sum(br / (d*d*a**6*(roots**2 - 1)))
d_mm = 0.6e-3
rows = []
for R in (0.01, 0.5, 2.0, 4.5, 8.0):
    for (G, Delta, delta) in ((0.04, 0.03, 0.01), (0.3, 0.02, 0.005), (0.08, 0.05, 0.03)):
        for c in (0.0, 0.3, 0.8, 1.0):
            b = (GAMMA*G*delta)**2*(Delta-delta/3)*1e-6
            v = np.exp(-b*d_mm*c*c - 2*GAMMA**2*G**2*(1-c*c)*S(d_mm*1e-6, R*1e-6, delta, Delta))
            rows.append((R, G, Delta, delta, c, v))
print("/* Cylinder responses (Van Gelderen's Gaussian phase approximation) for d_par 0.6e-3 mm^2/s:")
print(" * {R (um), G (T/m), Delta (s), delta (s), cos(g, axis), E}, E = exp(-b d c^2 - 2 gamma^2 G^2")
print(" * (1 - c^2) S), b = (gamma G delta)^2 (Delta - delta/3), gamma = 2.675987e8, S summed over")
print(" * 400 roots of J1' from scipy.special.jnp_zeros (numpy, double).  Made by the script in")
print(" * tests/py/cylinder_ref.py. */")
print("static const double commit_cylinder_ref[][6] = {")
for r in rows:
    print("    {%r, %r, %r, %r, %r, %.17g}," % r)
print("};")
