"""The Bessel built-ins and bounded sums, through the compiler and the runtime.

- bessel_j0, bessel_j1 evaluated by `dimoc simulate` (host, double; the image is float32)
  at 4000 points of [-120, 120] against scipy.special.j0 / j1;
- bessel_j1p_root(k) for k = 1..200 against scipy.special.jnp_zeros(1, 200), and
  bessel_sj1p_root(k) against the roots of tan x = 2x / (2 - x^2) found by scipy's brentq,
  both reached through `sum(k in 1..200)` (k standing where a constant integer is needed);
- a model whose signal is a truncated series with a closed form (a geometric series in
  exp(-b D)), simulated and compared with the closed form, then fitted to recover S0 and D;
- the Van Gelderen cylinder (Gaussian phase approximation) written with sum and the roots,
  against the same formula in numpy with scipy's roots;
- the errors of sum: file:line:col and the message (tests/compiler/bad_cases.txt holds more).
"""
import os

import numpy as np
from scipy import optimize, special

from dmtest import check, dimoc, finish, load, workdir

d = workdir("bessel_sum")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


# --- values and roots ----------------------------------------------------------------------
rng = np.random.default_rng(17)
x = np.concatenate([rng.uniform(-120, 120, 3000), rng.uniform(-25, 25, 1000),
                    [0.0, 1e-8, 1.0, 10.0, 20.0, 25.0, 100.0]])
rows = [(xi, 0) for xi in x] + [(xi, 1) for xi in x]
rows += [(k, 2) for k in range(1, 201)] + [(k, 3) for k in range(1, 201)]
meas = os.path.join(d, "xsel.txt")
np.savetxt(meas, np.array(rows, dtype=np.float64), fmt="%.17g")
model = write(os.path.join(d, "values.model"), """model bessel_values "J0, J1 and the roots"
measure q[2]                  # q[0] the argument, q[1] which function
param S0 in (0, inf) init 1
let x = q[0]
let sel = q[1]
signal S0 * (sel == 0 ? bessel_j0(x) : sel == 1 ? bessel_j1(x)
             : sel == 2 ? sum(k in 1..200) (x == k ? bessel_j1p_root(k) : 0)
             : sum(k in 1..200) (x == k ? bessel_sj1p_root(k) : 0))
""")
dimoc("simulate", model, "--measure", f"q={meas}", "--params", "S0=1", "--out", f"{d}/v.nii")
y = load(f"{d}/v.nii")[0, 0, 0, :]
n = len(x)
ref = np.concatenate([special.j0(x), special.j1(x)])
err = np.max(np.abs(y[:2 * n] - ref.astype(np.float32)))
check("j0-j1-vs-scipy", err <= 1.2e-7, f"{2 * n} points, max |diff| {err:.2e} (float32 image)")

roots = special.jnp_zeros(1, 200)
rel = np.max(np.abs(y[2 * n:2 * n + 200] / roots - 1))
check("j1p-roots-vs-scipy-jnp_zeros", rel < 1.2e-7, f"200 roots, max rel diff {rel:.2e}")


def g(t):  # t^3 j1'(t)
    return (t * t - 2) * np.sin(t) + 2 * t * np.cos(t)


sroots = np.array([optimize.brentq(g, k * np.pi - np.pi / 2, k * np.pi, xtol=1e-15, rtol=1e-15)
                   for k in range(1, 201)])
rel = np.max(np.abs(y[2 * n + 200:] / sroots - 1))
check("sj1p-roots-vs-brentq", rel < 1.2e-7 and abs(sroots[0] - 2.0815759778181) < 1e-12,
      f"200 roots, max rel diff {rel:.2e}")

# --- a truncated series with a closed form, simulated and fitted ---------------------------
# sum_{k=0}^{N} r^k = (1 - r^(N+1)) / (1 - r), r = exp(-b D): a signal that sums the series
# must equal the closed form, and a fit of the series must recover S0 and D.
series = write(os.path.join(d, "series.model"), """model geometric "a geometric series in exp(-b D)"
measure b = bvals
param S0 in (0, inf) init b0
param D in (0, 0.01) init 1e-3
signal S0 / 13 * sum(k in 0..12) exp(-k * b * D)
""")
bv = np.repeat([0.0, 500.0, 1000.0, 2000.0, 3000.0], 6)
np.savetxt(f"{d}/bvals", bv[None, :], fmt="%g")
dirs = rng.normal(size=(3, len(bv)))
dirs /= np.linalg.norm(dirs, axis=0)
np.savetxt(f"{d}/bvecs", dirs)
nvox = 50
S0 = rng.uniform(500, 1500, nvox)
D = rng.uniform(2e-4, 2e-3, nvox)
import nibabel as nib  # noqa: E402

for name, v in (("S0", S0), ("D", D)):
    nib.save(nib.Nifti1Image(v.reshape(-1, 1, 1).astype(np.float32), np.eye(4)), f"{d}/{name}.nii")
S0f = load(f"{d}/S0.nii")[:, 0, 0]
Df = load(f"{d}/D.nii")[:, 0, 0]
dimoc("simulate", series, "--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs", "--params",
      f"S0={d}/S0.nii,D={d}/D.nii", "--out", f"{d}/series.nii")
ys = load(f"{d}/series.nii")[:, 0, 0, :]
r = np.exp(-bv[None, :] * Df[:, None])
with np.errstate(invalid="ignore", divide="ignore"):
    closed = np.where(r < 1, S0f[:, None] / 13 * (1 - r ** 13) / (1 - r), S0f[:, None])
rel = np.max(np.abs(ys / closed - 1))
check("sum-series-equals-closed-form", rel < 1e-6, f"max rel diff {rel:.2e}")
dimoc("fit", series, "--data", f"{d}/series.nii", "--bvals", f"{d}/bvals", "--bvecs",
      f"{d}/bvecs", "--out", f"{d}/fit", "--quiet")
eS0 = load(f"{d}/fit/S0.nii.gz")[:, 0, 0]
eD = load(f"{d}/fit/D.nii.gz")[:, 0, 0]
err = max(np.max(np.abs(eS0 / S0f - 1)), np.max(np.abs(eD / Df - 1)))
check("sum-series-fit-recovers", err < 1e-5, f"{nvox} voxels, max rel error {err:.2e}")

# --- Van Gelderen's cylinder (GPA), with sum and the roots of J1' ---------------------------
# ln E_perp = -2 gamma^2 G^2 sum_m [2 D a_m^2 delta - 2 + 2 e^(-D a_m^2 delta)
#             + 2 e^(-D a_m^2 Delta) - e^(-D a_m^2 (Delta - delta))
#             - e^(-D a_m^2 (Delta + delta))] / (D^2 a_m^6 (R^2 a_m^2 - 1)), a_m = j'_1m / R.
vg = write(os.path.join(d, "vg.model"), """model vangelderen "Van Gelderen cylinder, GPA"
measure G                      # gradient strength (T/m), --measure G=file
param R in (0.5e-6, 20e-6) init 3e-6
let D = 1.7e-9
let dl = 0.01
let DL = 0.03
let gamma = 2.6752218744e8
signal exp(-2 * gamma^2 * G^2 * sum(m in 1..60) vg_term(m))
""")
# vg_term is not a function: write the term inline (the model language has no functions)
body = ("(2 * D * (bessel_j1p_root(m) / R)^2 * dl - 2 + 2 * exp(-D * (bessel_j1p_root(m) / R)^2 * dl)"
        " + 2 * exp(-D * (bessel_j1p_root(m) / R)^2 * DL)"
        " - exp(-D * (bessel_j1p_root(m) / R)^2 * (DL - dl))"
        " - exp(-D * (bessel_j1p_root(m) / R)^2 * (DL + dl)))"
        " / (D^2 * (bessel_j1p_root(m) / R)^6 * (R^2 * (bessel_j1p_root(m) / R)^2 - 1))")
write(vg, open(vg).read().replace("vg_term(m)", body))
G = np.linspace(0, 0.3, 16)
np.savetxt(f"{d}/G.txt", G)
dimoc("simulate", vg, "--measure", f"G={d}/G.txt", "--params", "R=5e-6", "--out", f"{d}/vg.nii")
yv = load(f"{d}/vg.nii")[0, 0, 0, :]
a = special.jnp_zeros(1, 60) / 5e-6
Dd, dl, DL, gam = 1.7e-9, 0.01, 0.03, 2.6752218744e8
terms = (2 * Dd * a**2 * dl - 2 + 2 * np.exp(-Dd * a**2 * dl) + 2 * np.exp(-Dd * a**2 * DL)
         - np.exp(-Dd * a**2 * (DL - dl)) - np.exp(-Dd * a**2 * (DL + dl))) \
    / (Dd**2 * a**6 * (5e-6**2 * a**2 - 1))
ref = np.exp(-2 * gam**2 * G**2 * terms.sum())
rel = np.max(np.abs(yv / ref - 1))
check("van-gelderen-vs-numpy", rel < 1e-6 and ref.min() < 0.9,
      f"max rel diff {rel:.2e}, smallest signal {ref.min():.3f}")

# --- errors ---------------------------------------------------------------------------------
cases = [
    ("sum(k in 1..N) k * d", "the upper bound of 'sum' must be a constant, but 'N' is a parameter"),
    ("sum(k in 3..1) k * d", "the sum's range 3..1 is empty"),
    ("sum(k in 0..201) k * d", "the sum 0..201 has 202 terms; at most 201"),
    ("sum(d in 1..3) d", "the sum's variable 'd' would hide a parameter"),
]
for i, (expr, message) in enumerate(cases):
    path = write(os.path.join(d, f"bad{i}.model"), "model bad \"x\"\nmeasure b = bvals\n"
                 "param N in (0, 10) init 1\nparam d in (0, 1) init 0.5\n"
                 f"signal N * exp(-b * d) + {expr}\n")
    rc, out, err = dimoc("check", path, expect_ok=False)
    col = len("signal N * exp(-b * d) + ") + 1
    want_col = {0: col + 12, 1: col + 12, 2: col + 12, 3: col + 4}[i]
    first = err.splitlines()[0] if err.splitlines() else ""
    check(f"sum-error-{i}", rc == 1 and first.startswith(f"{path}:5:{want_col}: error: ")
          and message in first and "^" in err, first)

finish()
