"""Tensors written with the language's 3x3 matrices (sym, quad, mul, transpose, diag,
rotation) against the same tensors written with scalars and vectors.

- DTI written as tensor_sym(...) of the Cholesky elements (the library's matrix compartment)
  and models/dti.model simulate the same signal at the same truth, and both agree with numpy's
  exp(-b g'Dg) in double (the image is float32: 2e-6 relative is about its resolution);
- a tensor written as R diag(d2, d3, d1) R' with R = rotation(th, ph, psi) simulates the
  library's eigen-form `tensor` compartment and numpy's R diag R';
- fitting both DTI models to the same noisy data gives the same maps (1e-6 relative; the
  matrix route lowers to the same sums in another order, so bit-identity is not expected).
The 1e-12 comparison in double is tests/unit/test_gradients.c (matrix-route-...).
"""
import os

import numpy as np

from dmtest import check, dimoc, finish, load, scheme, workdir

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LIB = os.path.join(ROOT, "models", "lib", "compartments.model")
DTI = os.path.join(ROOT, "models", "dti.model")
d = workdir("matrix_models")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def rel(a, b):
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-3 * np.max(np.abs(b)))))


# --- DTI by the matrix compartment --------------------------------------------------------
with open(DTI) as f:
    dti_text = f.read()
params = dti_text[dti_text.index("param S0"):dti_text.index("# gᵀDg")]
dti_sym = write(f"{d}/dti_sym.model", f"""model dti_sym "DTI with a symmetric matrix"
import "{LIB}"
measure g[3] = bvecs
measure b = bvals
{params}
let L = mat(l11, 0, 0, l21, l22, 0, l31, l32, l33)
let D = 1e-3 * mul(L, transpose(L))
signal S0 * tensor_sym(D[0][0], D[0][1], D[0][2], D[1][1], D[1][2], D[2][2])
output MD = trace(D) / 3
output Dxy = D[0][1]
""")
rc, out, err = dimoc("check", dti_sym)
check("matrix-model-checks", rc == 0 and not err.strip(), err.strip()[:300])

bvals, bvecs = scheme(d, "3x0,30x1000,30x2000")
truth = {"S0": 1000.0, "l11": 1.3, "l21": 0.2, "l22": 0.8, "l31": -0.3, "l32": 0.25, "l33": 0.6}
ptext = ",".join(f"{k}={x}" for k, x in truth.items())
sims = {}
for name, model in (("dti", DTI), ("dti_sym", dti_sym)):
    dimoc("simulate", model, "--bvals", bvals, "--bvecs", bvecs, "--params", ptext,
          "--out", f"{d}/{name}.nii.gz")
    sims[name] = load(f"{d}/{name}.nii.gz").reshape(-1).astype(np.float64)
b = np.loadtxt(bvals).reshape(-1)
g = np.loadtxt(bvecs).reshape(3, -1).T
L = np.array([[truth["l11"], 0, 0], [truth["l21"], truth["l22"], 0],
              [truth["l31"], truth["l32"], truth["l33"]]])
want = truth["S0"] * np.exp(-b * np.einsum("ij,jk,ik->i", g, 1e-3 * L @ L.T, g))
e_models = rel(sims["dti_sym"], sims["dti"])
check("tensor-sym-equals-dti", e_models <= 2e-6 and np.ptp(want) > 100,
      f"largest relative difference {e_models:.2g}"
      f"{' (bit-identical)' if np.array_equal(sims['dti_sym'], sims['dti']) else ''}")
e_numpy = rel(sims["dti_sym"], want)
check("tensor-sym-equals-numpy", e_numpy <= 2e-6, f"largest relative difference {e_numpy:.2g}")

# --- the eigen form: R diag R' with rotation() against the library's `tensor` ---------------
th, ph, psi, d1, d2, d3 = 0.9, 2.3, 0.6, 2.1e-3, 0.8e-3, 0.3e-3
common = f"""import "{LIB}"
measure g[3] = bvecs
measure b = bvals
param S0 in (0, inf) init 1
param d1 in (0, 0.01) init 1e-3
param d2 in (0, 0.01) init 1e-3
param d3 in (0, 0.01) init 1e-3
param th in [0, pi] periodic
param ph in [0, 2*pi] periodic
param psi in [0, pi] periodic
"""
rot = write(f"{d}/tensor_rot.model", f"""model tensor_rot "tensor by rotation()"
{common}let R = rotation(th, ph, psi)
let D = mul(mul(R, diag(d2, d3, d1)), transpose(R))
signal S0 * exp(-b * quad(g, D))
""")
eig = write(f"{d}/tensor_eig.model", f"""model tensor_eig "tensor by eigenvectors"
{common}signal S0 * tensor(d1, d2, d3, dir(th, ph), perp_axis(th, ph, psi))
""")
ptext = f"S0=1,d1={d1},d2={d2},d3={d3},th={th},ph={ph},psi={psi}"
for name, model in (("rot", rot), ("eig", eig)):
    dimoc("simulate", model, "--bvals", bvals, "--bvecs", bvecs, "--params", ptext,
          "--out", f"{d}/{name}.nii.gz")
    sims[name] = load(f"{d}/{name}.nii.gz").reshape(-1).astype(np.float64)
e3 = np.array([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)])
e_th = np.array([np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)])
e_ph = np.array([-np.sin(ph), np.cos(ph), 0])
c1 = np.cos(psi) * e_th + np.sin(psi) * e_ph
R = np.column_stack([c1, np.cross(e3, c1), e3])
want = np.exp(-b * np.einsum("ij,jk,ik->i", g, R @ np.diag([d2, d3, d1]) @ R.T, g))
e_models = rel(sims["rot"], sims["eig"])
e_numpy = rel(sims["rot"], want)
check("rotation-tensor-equals-eigen-tensor", e_models <= 2e-6 and e_numpy <= 2e-6
      and np.ptp(want) > 0.1 and abs(np.linalg.det(R) - 1) < 1e-12,
      f"against tensor(): {e_models:.2g}, against numpy's R diag R': {e_numpy:.2g}")

# --- the same fitted maps -------------------------------------------------------------------
truth = {"S0": 1000.0, "l11": 1.3, "l21": 0.2, "l22": 0.8, "l31": -0.3, "l32": 0.25, "l33": 0.6}
dimoc("simulate", DTI, "--bvals", bvals, "--bvecs", bvecs, "--params",
      ",".join(f"{k}={x}" for k, x in truth.items()), "--voxels", 20, "--noise", "rician",
      "--snr", 30, "--seed", 7, "--out", f"{d}/noisy.nii.gz")
for name, model in (("dti", DTI), ("dti_sym", dti_sym)):
    dimoc("fit", model, "--data", f"{d}/noisy.nii.gz", "--bvals", bvals, "--bvecs", bvecs,
          "--quiet", "--out", f"{d}/fit_{name}")
worst, names = 0.0, []
for p in ("S0", "l11", "l21", "l22", "l31", "l32", "l33", "MD"):
    a, c = load(f"{d}/fit_dti/{p}.nii.gz"), load(f"{d}/fit_dti_sym/{p}.nii.gz")
    worst = max(worst, rel(c.astype(np.float64), a.astype(np.float64)))
    names.append(p)
md = load(f"{d}/fit_dti/MD.nii.gz")
md_true = 1e-3 * np.trace(L @ L.T) / 3
check("dti-fit-same-maps", worst <= 1e-6 and np.all(np.abs(md - md_true) < 0.1 * md_true),
      f"{len(names)} maps, largest relative difference {worst:.2g}; MD within 10% of the truth")
finish()
