"""The restricted-diffusion signals of the shipped models with gradient timing (G,
Delta and delta from a scheme file, `--scheme`), through `dimoc simulate`, against independent
numpy/scipy implementations (pgse.py):

- activeax's cylinder (the library's cylinder_gpd: Van Gelderen's GPA, 20 roots of J1' from
  the compiler) against the same formula with 400 roots from scipy.special.jnp_zeros, for 5
  radii x 24 gradients of varied G, delta, Delta and direction: 1e-6 relative;
- sandi's sphere (the library's sphere_gpd: Murday-Cotts GPA, 20 roots of j1' from the
  compiler) against 400 roots found by scipy's brentq: 1e-6 relative;
- the limits: R -> 0 gives 1; a radius far beyond the diffusion length gives free diffusion
  along the gradient, exp(-b D) (cylinder: exp(-b D (1 - (g.v)^2)) across);
- charmed's Neuman long-pulse signal against its formula in numpy (1e-6), and against the
  Van Gelderen GPA in the long-pulse regime (delta = Delta >> R^2 / D), whose leading term
  it is (7/96 = 2 sum 1 / (a^4 (a^2 - 1)) over the roots of J1').
"""
import os
import re

import numpy as np

from dmtest import check, dimoc, finish, load, save, workdir
from pgse import GAMMA, b_value, gpa_log_signal, write_scheme

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
d = workdir("restricted_formulas")
rng = np.random.default_rng(1717)

# 24 gradients: G 0.02..0.3 T/m, delta 3..20 ms, Delta delta+2..60 ms, random directions,
# plus a b = 0 volume.
n = 24
G = np.concatenate([[0.0], rng.uniform(0.02, 0.3, n)])
delta = np.concatenate([[0.01], rng.uniform(0.003, 0.02, n)])
Delta = delta + np.concatenate([[0.02], rng.uniform(0.002, 0.04, n)])
g = rng.normal(size=(3, n + 1))
g /= np.linalg.norm(g, axis=0)
b = b_value(G, delta, Delta)
np.savetxt(f"{d}/bvals", b[None, :], fmt="%.17g")
np.savetxt(f"{d}/bvecs", g, fmt="%.17g")
timing = ["--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs", "--scheme",
          write_scheme(f"{d}/protocol.scheme", G, Delta, delta)]
b_rounded = np.loadtxt(f"{d}/bvals")  # what dimoc reads


def maps(name, values):
    return save(os.path.join(d, name + ".nii"), np.asarray(values, float).reshape(-1, 1, 1))


def simulate(model, params, voxel=""):
    out = os.path.join(d, model + ".nii")
    args = ["simulate", model, *timing, "--params", params, "--out", out]
    if voxel:
        args += ["--voxel", voxel]
    dimoc(*args)
    return load(out)[:, 0, 0, :]


def series_error(y, ref):
    """The larger of the relative errors of E where E > 1e-3 and of ln E (the series itself)
    where 1e-30 < E < 0.5: below 1e-3 a relative error of ln E is what the truncated sum controls."""
    big = ref > 1e-3
    small = (ref < 0.5) & (ref > 1e-30)  # float32 image: ln E to 1e-7 only there
    return max(np.max(np.abs(y[big] / ref[big] - 1)),
               np.max(np.abs(np.log(y[small]) / np.log(ref[small]) - 1)))


def widened(model, terms, rmax):
    """The shipped model's text with a larger radius bound, beside a copy of the compartment
    library whose sums have more terms: the free-diffusion limit needs radii far beyond the
    shipped bounds, and then many more roots."""
    lib = open(os.path.join(ROOT, "models", "lib", "compartments.model")).read()
    wide_lib = lib.replace("sum(m in 1..20)", f"sum(m in 1..{terms})")
    assert wide_lib.count(f"1..{terms}") == lib.count("1..20") == 3
    os.makedirs(os.path.join(d, "lib"), exist_ok=True)
    open(os.path.join(d, "lib", "compartments.model"), "w").write(wide_lib)
    text = open(os.path.join(ROOT, "models", model + ".model")).read()
    text = re.sub(r"(param (R|R_soma) +in [\[(])[0-9.]+, [0-9.]+[\])]", rf"\g<1>0.1, {rmax})", text)
    assert f"0.1, {rmax})" in text and 'import "lib/compartments.model"' in text
    path = os.path.join(d, model + "_wide.model")
    open(path, "w").write(text)
    return path


# --- the cylinder (activeax with f_ic = 1, f_iso = 0, the axis along z) --------------------
radii = np.array([0.5, 1.0, 2.5, 5.0, 8.0])  # um
d_par = 1.7e-3  # mm^2/s
t = g[2]
y = simulate("activeax", f"S0=1,f_ic=1,f_iso=0,th=0,ph=0,R={maps('R', radii)}")
ref = np.array([np.exp(-b_rounded * d_par * t ** 2
                       + gpa_log_signal("cylinder", R * 1e-6, d_par * 1e-6, G * np.sqrt(1 - t ** 2),
                                        delta, Delta)) for R in radii])
rel = series_error(y, ref)
check("cylinder-gpa-vs-scipy", rel < 1e-6 and ref.min() < 0.5,
      f"{len(radii)} radii x {n + 1} gradients, max rel diff {rel:.2e}, smallest {ref.min():.3f}")

# limits: R -> 0 (the signal along the axis only); R >> sqrt(D Delta) (free diffusion)
y = simulate("activeax", "S0=1,f_ic=1,f_iso=0,th=0,ph=0,R=0.1000001")
along = np.exp(-b_rounded * d_par * t ** 2)
err0 = np.max(np.abs(y[0] / along - 1))
check("cylinder-limit-small-radius", err0 < 2e-3,
      f"R = 0.1 um: max |E / E_along - 1| {err0:.1e}")


def free_limit(model, params, radius_name, radii):
    """ln E / (-b_perp D) for growing radii, short pulses (delta 2 ms, Delta 3 ms) across the
    axis (g = x): 1 for free diffusion; it approaches 1 as sqrt(D t) / R (Mitra et al. 1992)."""
    global timing
    saved = timing
    Gs = np.array([0.0, 0.1, 0.2, 0.3])
    bs = b_value(Gs, 0.002, 0.003)
    np.savetxt(os.path.join(d, "bshort"), bs[None, :], fmt="%.17g")
    np.savetxt(os.path.join(d, "gshort"), np.tile([[1.0], [0.0], [0.0]], 4))
    timing = ["--bvals", f"{d}/bshort", "--bvecs", f"{d}/gshort", "--scheme",
              write_scheme(f"{d}/short.scheme", Gs, [0.003] * 4, [0.002] * 4)]
    y = simulate(model, f"{params},{radius_name}={maps(radius_name, radii)}")
    timing = saved
    bs = np.loadtxt(f"{d}/bshort")
    return np.log(y[:, 1:]) / -bs[None, 1:]


ratio = free_limit(widened("activeax", 200, 1000), "S0=1,f_ic=1,f_iso=0,th=0,ph=0", "R",
                   np.array([3.0, 30.0, 300.0])) / d_par
close = np.max(np.abs(ratio - 1), axis=1)
check("cylinder-limit-large-radius", close[2] < 0.02 and close[0] > close[1] > close[2],
      f"ln E / (-b D) off 1 by {', '.join(f'{c:.3f}' for c in close)} at R = 3, 30, 300 um")

# --- the sphere (sandi with f_soma = 1) -----------------------------------------------------
soma_radii = np.array([1.0, 3.0, 6.0, 9.0, 12.0])
D_soma = 3e-3
y = simulate("sandi", f"S0=1,f_neurite=0,f_soma=1,D_in=1e-3,D_ec=1e-3,R_soma={maps('Rs', soma_radii)}")
ref = np.array([np.exp(gpa_log_signal("sphere", R * 1e-6, D_soma * 1e-6, G, delta, Delta))
                for R in soma_radii])
rel = series_error(y, ref)
check("sphere-gpa-vs-scipy", rel < 1e-6 and ref.min() < 0.5,
      f"{len(soma_radii)} radii x {n + 1} gradients, max rel diff {rel:.2e}, smallest {ref.min():.3f}")
y = simulate("sandi", "S0=1,f_neurite=0,f_soma=1,D_in=1e-3,D_ec=1e-3,R_soma=1", "D_soma=1e-1")
err0 = np.max(np.abs(y[0] - 1))  # a tiny sphere: E ~ 1 even for fast diffusion
check("sphere-limit-small-radius", err0 < 0.02, f"R = 1 um, D = 0.1 mm^2/s: max |E - 1| {err0:.1e}")
ratio = free_limit(widened("sandi", 200, 1000), "S0=1,f_neurite=0,f_soma=1,D_in=1e-3,D_ec=1e-3",
                   "R_soma", np.array([3.0, 30.0, 300.0])) / D_soma
close = np.max(np.abs(ratio - 1), axis=1)
check("sphere-limit-large-radius", close[2] < 0.02 and close[0] > close[1] > close[2],
      f"ln E / (-b D) off 1 by {', '.join(f'{c:.3f}' for c in close)} at R = 3, 30, 300 um")

# --- sandi's neurites: the powder average of a stick, against quadrature over the sphere ----
y = simulate("sandi", "S0=1,f_neurite=1,f_soma=0,D_in=2e-3,D_ec=1e-3,R_soma=5")
u = np.linspace(0, 1, 20001)
quad = np.array([(getattr(np, "trapezoid", None) or np.trapz)(np.exp(-bb * 2e-3 * u ** 2), u) for bb in b_rounded])
rel = np.max(np.abs(y[0] / quad - 1))
check("powder-stick-vs-quadrature", rel < 1e-6, f"max rel diff {rel:.2e}")

# --- charmed's restricted compartment (f_r = 1, the axis along z) ---------------------------
R, d_r = 2.0, 1.5e-3
y = simulate("charmed", f"S0=1,f_r=1,d_h_par=1e-3,d_h_perp=5e-4,d_r={d_r},th=0,ph=0")
Du, dl = d_r * 1e3, delta * 1e3  # um^2/ms, ms
gg = (GAMMA * G) ** 2 * 1e-18  # 1/(um^2 ms^2)
neuman = -7 / 96 * gg * (1 - t ** 2) * R ** 4 * dl / Du * (2 - 99 * R ** 2 / (112 * Du * dl))
ref = np.exp(-b_rounded * d_r * t ** 2 + neuman)
rel = np.max(np.abs(y[0] / ref - 1))
check("charmed-neuman-vs-numpy", rel < 1e-6 and ref.min() < 0.9, f"max rel diff {rel:.2e}")
# long pulses (delta = Delta = 60 ms, R^2 / (D delta) = 0.044): Neuman ~ the full GPA
long_dl = np.full(n + 1, 0.06)
Glong = np.linspace(0, 0.15, n + 1)
np.savetxt(f"{d}/bvals", b_value(Glong, long_dl, long_dl)[None, :], fmt="%.17g")
gx = np.zeros((3, n + 1))
gx[0] = 1
np.savetxt(f"{d}/bvecs", gx)
timing = ["--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs", "--scheme",
          write_scheme(f"{d}/long.scheme", Glong, long_dl, long_dl)]
y = simulate("charmed", f"S0=1,f_r=1,d_h_par=1e-3,d_h_perp=5e-4,d_r={d_r},th=0,ph=0")
gpa = gpa_log_signal("cylinder", R * 1e-6, d_r * 1e-6, Glong, long_dl, long_dl)
rel = np.max(np.abs(np.log(y[0][1:]) / gpa[1:] - 1))
check("charmed-neuman-vs-gpa-long-pulses", rel < 0.01 and gpa.min() < -0.1,
      f"ln E within {rel:.1e} (relative) of Van Gelderen's, smallest E {np.exp(gpa.min()):.3f}")
finish()
