"""Models written with `import` and the compartment library (models/lib/).

- every shipped model passes `dimoc check`;
- each shipped model rewritten with compartments and its text from before (kept under
  tests/models_before_lib/) fitted on the same simulated data on the CPU give the same maps
  (the inlined expressions lower to the same code, so the maps are expected bit-identical;
  asserted to 1e-6 relative);
- library compartments simulated by dimoc against the same formulas in numpy: the
  Van Gelderen cylinder (Gaussian phase approximation, scipy's roots of J1'), its Neuman
  long-pulse limit against the closed form -(7/48) gamma^2 G_perp^2 delta R^4 / d, the
  Watson-dispersed zeppelin (scipy's Dawson integral), the tensor, the Cholesky tensor
  (numpy's L L') and the powder-averaged stick (quadrature over the orientations);
- a stick + zeppelin + ball model written with the library recovers its parameters.
"""
import glob
import os
import re

import numpy as np
from scipy import special

from dmtest import check, dimoc, finish, load, save, scheme, workdir

trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed trapz

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LIB = os.path.join(ROOT, "models", "lib", "compartments.model")
d = workdir("model_compartments")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


# --- every shipped model checks cleanly ------------------------------------------------------
bad = []
for m in sorted(glob.glob(os.path.join(ROOT, "models", "*.model"))):
    rc, out, err = dimoc("check", m, expect_ok=False)
    if rc != 0 or err.strip():
        bad.append(f"{os.path.basename(m)}: rc={rc} {err.strip()[:200]}")
check("shipped-models-check", not bad, "; ".join(bad))

# --- rewritten models fit as their old texts did --------------------------------------------
# Both texts compile to the same C code (comments and source hashes aside) and the same metadata:
# then the fitters, built from that code and the same templates, are the same program.  Where
# the code differs, and for NODDI-Watson always (the whole way, end to end), both are fitted on
# the same data and their maps compared.
bvals, bvecs = scheme(d, "3x0,20x1000,20x2000")
dimoc("simulate", "noddi_watson", "--bvals", bvals, "--bvecs", bvecs, "--params",
      "S0=1000,fintra=0.5,fiso=0.15,kappa=3,th=1.1,ph=2", "--voxels", 12, "--noise", "rician",
      "--snr", 30, "--seed", 5, "--out", f"{d}/dwi.nii.gz")
common = ["--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs, "--quiet"]


def compiled(model, out):
    """The generated model.h without comments and blank lines, and model.meta without hashes."""
    dimoc("compile", model, "-o", out)
    code = re.sub(r"/\*.*?\*/", "", open(os.path.join(out, "model.h")).read(), flags=re.S)
    meta = open(os.path.join(out, "model.meta")).read().splitlines()
    return ([x.rstrip() for x in code.splitlines() if x.strip()],
            [x for x in meta if not x.startswith(("source_hash ", "code_hash "))])


def same_maps(name, old, new):
    dimoc("fit", new, *common, "--out", f"{d}/new_{name}")
    dimoc("fit", old, *common, "--out", f"{d}/old_{name}")
    maps = sorted(os.path.basename(p) for p in glob.glob(f"{d}/old_{name}/*.nii.gz"))
    worst, same_bits, missing = 0.0, True, []
    for m in maps:
        if not os.path.exists(f"{d}/new_{name}/{m}"):
            missing.append(m)
            continue
        a, b = load(f"{d}/old_{name}/{m}"), load(f"{d}/new_{name}/{m}")
        same_bits &= a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
        if a.shape == b.shape:
            worst = max(worst, float(np.nanmax(np.abs(a - b) / np.maximum(np.abs(a), 1e-30))))
        else:
            worst = np.inf
    check(f"same-maps-{name}", maps and not missing and worst <= 1e-6,
          f"{len(maps)} maps, largest relative difference {worst:.3g}"
          f"{', bit-identical' if same_bits else ''}{'; missing ' + str(missing) if missing else ''}")


for old in sorted(glob.glob(os.path.join(ROOT, "tests", "models_before_lib", "*.model"))):
    name = os.path.basename(old)[:-len(".model")]
    new = os.path.join(ROOT, "models", name + ".model")
    code_old, meta_old = compiled(old, f"{d}/code_old_{name}")
    code_new, meta_new = compiled(new, f"{d}/code_new_{name}")
    if code_old == code_new and meta_old == meta_new and name != "noddi_watson":
        check(f"same-maps-{name}", True, f"the same code ({len(code_new)} lines) and metadata")
    else:
        same_maps(name, old, new)

# --- library compartments against numpy -----------------------------------------------------
rng = np.random.default_rng(3)
nvol = 40
b = rng.uniform(0, 3000, nvol)
b[0] = 0                                       # the b = 0 limits (stick_powder's series)
gdir = rng.normal(size=(nvol, 3))
gdir /= np.linalg.norm(gdir, axis=1, keepdims=True)
G = rng.uniform(0.01, 0.3, nvol)               # T/m
small_delta = rng.uniform(0.005, 0.02, nvol)   # s
big_delta = small_delta + rng.uniform(0.005, 0.03, nvol)
np.savetxt(f"{d}/lib.bval", b[None, :], fmt="%.17g")
np.savetxt(f"{d}/lib.bvec", gdir.T, fmt="%.17g")
for nm, x in (("G", G), ("delta", small_delta), ("Delta", big_delta)):
    np.savetxt(f"{d}/{nm}.txt", x, fmt="%.17g")
th, ph, dd, R, kappa = 0.7, 1.9, 1.7e-3, 4e-3, 2.5
v = np.array([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)])
t = gdir @ v
gamma = 2.6752218744e8 * 1e-3                  # rad/(s T), G in T/mm
gperp2 = (gamma * G) ** 2 * (1 - t ** 2)
roots = special.jnp_zeros(1, 20)
a = roots[:, None] / R
r = dd * a ** 2
bracket = (2 * r * small_delta - 2 + 2 * np.exp(-r * small_delta) + 2 * np.exp(-r * big_delta)
           - np.exp(-r * (big_delta - small_delta)) - np.exp(-r * (big_delta + small_delta)))
vg = np.exp(-b * dd * t ** 2 - 2 * gperp2 * np.sum(bracket / (dd ** 2 * a ** 6 * (roots[:, None] ** 2 - 1)), axis=0))
neuman = np.exp(-b * dd * t ** 2 - 7 / 48 * gperp2 * small_delta * R ** 4 / dd)
sk = np.sqrt(kappa)
tau = 1 / (2 * sk * special.dawsn(sk)) - 1 / (2 * kappa)
dpar, dperp = 2e-3, 0.6e-3
dpar_avg = dpar - (dpar - dperp) * (1 - tau)
dperp_avg = dpar - (dpar - dperp) * (1 + tau) / 2
zw = np.exp(-b * (dperp_avg + (dpar_avg - dperp_avg) * t ** 2))
n1 = np.array([np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)])  # perp_axis(th, ph, 0)
tensor = np.exp(-b * (2e-3 * t ** 2 + 1e-3 * (gdir @ n1) ** 2 + 0.3e-3 * (gdir @ np.cross(v, n1)) ** 2))
chol = np.array([[1.2, 0, 0], [0.3, 0.9, 0], [-0.4, 0.2, 0.6]])   # L, sqrt(1e-3 mm^2/s)
tensor_chol = np.exp(-b * np.einsum("ij,jk,ik->i", gdir, 1e-3 * chol @ chol.T, gdir))
u = np.linspace(0, 1, 20001)                   # the stick's cosine to an isotropic axis
powder = np.array([trapezoid(np.exp(-bb * dd * u ** 2), u) for bb in b])
cases = {
    "cylinder_gpd": ("cylinder_gpd(d, R, v)", vg, 1e-6),
    "cylinder_neuman": ("cylinder_neuman(d, R, v)", neuman, 1e-5),
    "zeppelin_watson": ("zeppelin_watson(2e-3, 0.6e-3, v, kappa)", zw, 1e-6),
    "tensor": ("tensor(2e-3, 1e-3, 0.3e-3, v, perp_axis(th, ph, 0))", tensor, 1e-6),
    "tensor_cholesky": ("tensor_cholesky(1.2, 0.3, 0.9, -0.4, 0.2, 0.6)", tensor_chol, 1e-6),
    "stick_powder": ("stick_powder(d)", powder, 1e-6),
}
for name, (expr, want, tol) in cases.items():
    model = write(f"{d}/{name}.model", f"""model lib_{name} "one library compartment"
import "{LIB}"
measure g[3] = bvecs
measure b = bvals
measure G
measure delta
measure Delta
param S0 in (0, inf) init 1
param d in (0, 0.01) init 1e-3
param R in (1e-4, 0.02) init 3e-3
param kappa in (0, 64) init 1
param th in [0, pi] periodic
param ph in [0, 2*pi] periodic
let v = dir(th, ph)
signal S0 * {expr} * (1 + 0 * (d + R + kappa))
""")
    dimoc("simulate", model, "--bvals", f"{d}/lib.bval", "--bvecs", f"{d}/lib.bvec",
          "--measure", f"G={d}/G.txt", "--measure", f"delta={d}/delta.txt",
          "--measure", f"Delta={d}/Delta.txt", "--params",
          f"S0=1,d={dd},R={R},kappa={kappa},th={th},ph={ph}", "--out", f"{d}/{name}.nii.gz")
    got = load(f"{d}/{name}.nii.gz").reshape(-1)
    err = float(np.max(np.abs(got - want) / np.maximum(want, 1e-3)))
    # the image is float32: 1e-6 relative is about its resolution
    check(f"library-{name}", err <= max(tol, 2e-6) and np.ptp(want) > 0.05,
          f"largest relative difference {err:.2g}, signal {want.min():.3f}..{want.max():.3f}")

# --- a model written with the library: simulate and fit ---------------------------------------
szb = write(f"{d}/stick_zeppelin_ball.model", f"""model stick_zeppelin_ball "stick, zeppelin and ball"
import "{LIB}"
measure g[3] = bvecs
measure b = bvals
param S0 in (0, inf) init b0
param fs in [0, 1] init 0.4
param fz in [0, 1] init 0.3
param d in (0, 0.005) init 1.5e-3
param th in [0, pi] init from theta(1) periodic
param ph in [0, 2*pi] init from phi(1) periodic
constraint fs + fz <= 1
let v = dir(th, ph)
signal S0 * (fs * stick(d, v) + fz * zeppelin(d, tortuosity(d, fs / (fs + fz)), v)
             + (1 - fs - fz) * ball(3e-3))
output dyads1 axis = v
""")
bv, bc = scheme(d, "4x0,30x1000,30x2500")
truth = {"S0": 1000.0, "fs": 0.5, "fz": 0.3, "d": 1.7e-3, "th": 1.0, "ph": 0.5}
dimoc("simulate", szb, "--bvals", bv, "--bvecs", bc, "--params",
      ",".join(f"{k}={x}" for k, x in truth.items()), "--voxels", 6, "--noise", "none",
      "--out", f"{d}/szb.nii.gz")
dimoc("fit", szb, "--data", f"{d}/szb.nii.gz", "--bvals", bv, "--bvecs", bc, "--quiet",
      "--out", f"{d}/szb")
errs = {k: float(np.max(np.abs(load(f"{d}/szb/{k}.nii.gz") - truth[k]) / abs(truth[k])))
        for k in ("S0", "fs", "fz", "d")}
check("library-model-recovers", max(errs.values()) < 1e-3,
      ", ".join(f"{k} {e:.1g}" for k, e in errs.items()))
finish()
