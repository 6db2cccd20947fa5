"""`fractions`: ball and two sticks written with `fractions f1, f2, f_ball` simulates
and fits on the CPU, recovers the truth at SNR 50, its fractions sum to one, and it gives the
same maps as the same model written by hand (1 - f1 - f2 and a constraint)."""
import os

import numpy as np

from dmtest import angle_deg, check, dimoc, finish, load, random_directions, save, scheme, workdir

HEAD = """model {name} "ball and two sticks"
measure g[3] = bvecs
measure b    = bvals
param S0  in (0, inf)    init b0
param d   in (0, 0.01)   init from md
"""
ANGLES = """param th1 in [0, pi]     init from theta(1)   prior sphere  periodic
param ph1 in [0, 2*pi]   init from phi(1)     periodic
param th2 in [0, pi]     init from theta(2)   prior sphere  periodic
param ph2 in [0, 2*pi]   init from phi(2)     periodic
multistart 3
let v1 = dir(th1, ph1)
let v2 = dir(th2, ph2)
signal S0 * (f_ball * exp(-b * d) + f1 * exp(-b * d * dot(g, v1)^2)
             + f2 * exp(-b * d * dot(g, v2)^2))
output dyads1 axis = v1
output dyads2 axis = v2
"""
WITH_FRACTIONS = HEAD + "fractions f1, f2, f_ball init 0.3, 0.1\n" + ANGLES
BY_HAND = (HEAD + "param f1 in [0, 1] init 0.3\nparam f2 in [0, 1] init 0.1\n"
           "constraint f1 + f2 <= 1\nlet f_ball = 1 - f1 - f2\n" + ANGLES
           + "output fball = f_ball\n")  # an output cannot share its let's name by hand


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


d = workdir("fractions")
frac = write(os.path.join(d, "b2f.model"), WITH_FRACTIONS.format(name="b2f"))
hand = write(os.path.join(d, "b2h.model"), BY_HAND.format(name="b2h"))
bvals, bvecs = scheme(d, "6x0,64x1000,64x2500")

rng = np.random.default_rng(17)
n = 150
v1, th1, ph1 = random_directions(rng, n)
# the second stick 90 degrees from the first: the first's frame turned about a normal
u = np.cross(v1, rng.normal(size=(n, 3)))
u /= np.linalg.norm(u, axis=1)[:, None]
u[u[:, 2] < 0] *= -1
th2, ph2 = np.arccos(u[:, 2]), np.mod(np.arctan2(u[:, 1], u[:, 0]), 2 * np.pi)
f1 = rng.uniform(0.35, 0.5, n)
f2 = rng.uniform(0.2, 0.3, n)
truth = dict(S0=np.full(n, 1000.0), d=np.full(n, 1.5e-3), f1=f1, f2=f2, th1=th1, ph1=ph1,
             th2=th2, ph2=ph2)
params = ",".join(f"{k}={save(os.path.join(d, k + '.nii.gz'), v.reshape(-1, 1, 1))}"
                  for k, v in truth.items())

# The two models' noise-free signals are the same.
for name, model in (("frac", frac), ("hand", hand)):
    dimoc("simulate", model, "--bvals", bvals, "--bvecs", bvecs, "--params", params,
          "--out", f"{d}/clean_{name}.nii.gz")
a, b = load(f"{d}/clean_frac.nii.gz"), load(f"{d}/clean_hand.nii.gz")
check("simulate-fractions-equals-by-hand", np.array_equal(a, b),
      f"max |diff| {np.max(np.abs(a - b)):.3g}")
g = np.loadtxt(bvecs).T
bv = np.loadtxt(bvals)
fb = 1 - f1 - f2
expected = 1000 * (fb[:, None] * np.exp(-bv * 1.5e-3)
                   + f1[:, None] * np.exp(-bv * 1.5e-3 * (g @ v1.T).T ** 2)
                   + f2[:, None] * np.exp(-bv * 1.5e-3 * (g @ u.T).T ** 2))
err = np.max(np.abs(a[:, 0, 0, :] / expected - 1))
check("simulate-fractions-matches-numpy", err < 1e-5, f"max relative error {err:.2e}")

dimoc("simulate", frac, "--bvals", bvals, "--bvecs", bvecs, "--params", params, "--noise",
      "gaussian", "--snr", 50, "--seed", 7, "--out", f"{d}/dwi.nii.gz")
for name, model in (("frac", frac), ("hand", hand)):
    dimoc("fit", model, "--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs,
          "--out-type", "float64", "--out", f"{d}/fit_{name}", "--quiet")

ef1, ef2, efb = (load(f"{d}/fit_frac/{k}.nii.gz")[:, 0, 0] for k in ("f1", "f2", "f_ball"))
total = np.max(np.abs(ef1 + ef2 + efb - 1))
check("fitted-fractions-sum-to-one", total < 1e-12, f"max |f1 + f2 + f_ball - 1| {total:.2e}")
for k, e, t in (("f1", ef1, f1), ("f2", ef2, f2), ("f_ball", efb, fb)):
    mae = np.mean(np.abs(e - t))
    check(f"recovers-{k}-snr50", mae < 0.04, f"mean |error| {mae:.4f}")
ang = angle_deg(load(f"{d}/fit_frac/dyads1.nii.gz")[:, 0, 0, :], v1)
check("recovers-dyads1-snr50", np.median(ang) < 5, f"median angle {np.median(ang):.2f} deg")

worst = 0.0
for k in ("S0", "d", "f1", "f2", "f_ball", "th1", "ph1", "th2", "ph2", "dyads1", "dyads2"):
    x = load(f"{d}/fit_frac/{k}.nii.gz")
    y = load(f"{d}/fit_hand/{'fball' if k == 'f_ball' else k}.nii.gz")
    worst = max(worst, np.max(np.abs(x - y) / np.maximum(np.abs(y), 1e-12)))
check("same-maps-as-by-hand", worst < 1e-6, f"max relative difference {worst:.2e}")

# `dimoc check` shows the expansion: the free members as parameters, f_ball as let and output.
_, out, _ = dimoc("check", frac)
check("check-shows-expansion", "f_ball     scalar    = 1 - f1 - f2" in out
      and "f1 + f2 <= 1" in out and "f_ball       scalar" in out, out[-300:])

# Two sets with a parameter between them (as models/activeax.model nests its fractions): each
# set's free members take the place of its statement, so the parameters keep the file's order.
nested = write(os.path.join(d, "nested.model"), """model nested "two fraction sets"
measure b = bvals
param S0 in (0, inf) init b0
fractions f_ic, f_ec init 0.6
param d in (0, 0.01) init 1e-3
fractions f_iso, f_tissue init 0.1
param d2 in (0, 0.01) init 2e-3
signal S0 * (f_iso * exp(-b * 3e-3) + f_tissue * (f_ic * exp(-b * d) + f_ec * exp(-b * d2)))
""")
_, out, _ = dimoc("check", nested)
order = [ln.split()[0] for ln in out.split("parameters")[1].split("lets:")[0].splitlines()[2:]
         if ln.strip()]
check("two-sets-keep-file-order", order == ["S0", "f_ic", "d", "f_iso", "d2"], f"{order}")
finish()
