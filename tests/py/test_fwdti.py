"""Free-water DTI (models/fwdti.model, pipelines/fwdti.sh): 300 voxels of varied truths (f 0 to
0.6, tissue tensors of MD 0.6-0.9e-3 mm^2/s and FA 0.2-0.85 at random orientations) simulated
on 6 b=0 + 32 b=500 + 64 b=1500 (Hoy et al. 2014's shells) with Rician noise at SNR 50, fitted
by dimoc's pipeline (tensor, grid over f, LM) and by DIPY's FreeWaterTensorModel (NLS, its
default).

Tolerances: dimoc's median absolute errors of f and FA and median relative error of MD must be
no worse than DIPY's x 1.05 (+ 0.002, + 0.002, + 0.2 %), and within f 0.03, FA 0.03, MD 5 %
at SNR 50."""
import time
import warnings

import numpy as np
from dipy.core.gradients import gradient_table
from dipy.reconst.fwdti import FreeWaterTensorModel

from dmtest import check, dimoc, finish, random_directions, scheme, workdir
from modelcheck import maps, no_worse, simulate, within, pipeline

rng = np.random.default_rng(23)
d = workdir("fwdti")
bvals, bvecs = scheme(d, "6x0,32x500,64x1500")
n = 300
v1, _, _ = random_directions(rng, n)
truth = {k: np.zeros(n) for k in ["S0", "f", "l11", "l21", "l22", "l31", "l32", "l33"]}
true_fa, true_md = np.zeros(n), np.zeros(n)
for i in range(n):
    md = rng.uniform(0.6e-3, 0.9e-3)
    ratio = rng.uniform(1.3, 6.0)   # axial / radial diffusivity: FA 0.2 to 0.85
    lam = np.array([ratio, 1, 1]) * 3 * md / (ratio + 2)
    lam[1:] *= [1.1, 0.9]
    q, _ = np.linalg.qr(np.column_stack([v1[i], rng.normal(size=(3, 2))]))
    D = q @ np.diag(lam) @ q.T
    L = np.linalg.cholesky(D * 1e3)
    for k, (r, c) in zip(["l11", "l21", "l22", "l31", "l32", "l33"],
                         [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2)]):
        truth[k][i] = L[r, c]
    true_md[i] = lam.mean()
    true_fa[i] = np.sqrt(1.5 * np.sum((lam - lam.mean()) ** 2) / np.sum(lam ** 2))
truth["S0"][:] = 1000
truth["f"] = rng.uniform(0, 0.6, n)
data, mask, y = simulate(d, "fwdti", truth, bvals, bvecs)
common = ["--data", data, "--bvals", bvals, "--bvecs", bvecs, "--mask", mask]

t0 = time.time()
pipeline("fwdti", *common, "--out", f"{d}/pipe", "--quiet")
t_pipe = time.time() - t0
t0 = time.time()
dimoc("fit", "fwdti", *common, "--out", f"{d}/direct", "--quiet")
t_direct = time.time() - t0
names = ["f", "FA", "MD", "S0"]
pipe, direct = maps(f"{d}/pipe", names), maps(f"{d}/direct", names)
b, g = np.loadtxt(bvals), np.loadtxt(bvecs).T
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t0 = time.time()
    try:
        fit = FreeWaterTensorModel(gradient_table(b, g), "NLS").fit(y)
        dipy = {"f": fit.f, "FA": fit.fa, "MD": fit.md}
    except ValueError as e:
        # dipy 1.12 with numpy 2 (the GPU machine's wheels) fails inside wls_iter ("dot not
        # available for this type"); Debian's dipy, which CI runs, does not.  Then only the
        # fixed limits below are checked, and the line says so.
        print(f"DIPY's FreeWaterTensorModel failed here ({e}); fixed limits only")
        dipy = None
    t_dipy = time.time() - t0
print(f"times: dimoc pipeline {t_pipe:.1f} s, dimoc fit from its defaults {t_direct:.1f} s, "
      f"DIPY NLS {t_dipy:.1f} s")

status = maps(f"{d}/pipe/dimoc/final", ["status"])["status"]
check("fwdti-pipeline-status", np.all((status == 1) | (status == 6)),
      f"status values {sorted(set(status.tolist()))} (6: f at 0 where the truth is near 0)")
true = {"f": truth["f"], "FA": true_fa, "MD": true_md}
if dipy is not None:
    no_worse("fwdti-f-vs-dipy", pipe["f"], dipy["f"], true["f"], slack=0.002)
    no_worse("fwdti-FA-vs-dipy", pipe["FA"], dipy["FA"], true["FA"], slack=0.002)
    no_worse("fwdti-MD-vs-dipy", pipe["MD"], dipy["MD"], true["MD"], relative=True, slack=0.002)
within("fwdti-f-accuracy", pipe["f"], true["f"], 0.03)
within("fwdti-FA-accuracy", pipe["FA"], true["FA"], 0.03)
within("fwdti-MD-accuracy", pipe["MD"], true["MD"], 0.05, relative=True)
for m in ("f", "FA"):
    no_worse(f"fwdti-{m}-pipeline-vs-direct", pipe[m], direct[m], true[m], slack=0.002,
             label="direct LM")
finish()
