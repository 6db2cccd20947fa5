"""NODDI-DTI (models/noddi_dti.model, pipelines/noddi_dti.sh; Edwards et al. 2017).  DIPY has
no NODDI-DTI; the independent references are the paper's closed forms and NODDI-Watson itself.

1. Noise-free, 200 voxels of varied (fintra 0.2-0.9, ODI 0.05-0.6, orientation) simulated with
   noddi_dti: the paper's closed forms applied to `dimoc dti`'s MD and FA give back fintra and
   ODI to 1e-3 (the model's tensor is the paper's tensor).
2. NODDI-Watson data (fiso = 0, the same truths) on one shell, 6 b=0 + 60 b=1000, Rician noise
   at SNR 50, through the pipeline: its NDI and ODI must agree with the closed forms of the same
   data's tensor (median differences below 0.02 and 0.03: the two estimate the same thing, the
   fit with the measurements' weights and within the model's range), and recover NODDI's truth
   within what the tensor limit allows at b = 1000 (median absolute errors NDI 0.13, ODI 0.04;
   measured 0.105 and 0.026: the kurtosis that DTI ignores lowers MD at b = 1000, so NDI comes
   out high, the same for the closed forms; the paper's own caveat)."""
import os

import numpy as np
from scipy.optimize import brentq
from scipy.special import dawsn

from dmtest import check, dimoc, finish, load, random_directions, scheme, workdir
from modelcheck import maps, median_error, simulate, within, pipeline

D_PAR = 1.7e-3


def tau_of_kappa(kappa):
    sk = np.sqrt(kappa)
    return 1 / (2 * sk * dawsn(sk)) - 1 / (2 * kappa)


def closed_forms(md, fa):
    """Edwards et al. 2017: NDI from MD, then tau from FA and NDI, kappa by inverting tau(kappa);
    returns (NDI, ODI)."""
    ndi = 1 - np.sqrt(np.clip((3 * md / D_PAR - 1) / 2, 0, 1))
    delta = 3 * md * fa / np.sqrt(3 - 2 * fa ** 2)       # lambda_par - lambda_perp
    tau = 1 / 3 + 2 * delta / (3 * D_PAR * np.maximum(ndi * (2 - ndi), 1e-9))
    tau = np.clip(tau, tau_of_kappa(1e-3) + 1e-12, tau_of_kappa(64) - 1e-12)
    kappa = np.array([brentq(lambda k: tau_of_kappa(k) - t, 1e-3, 64) for t in tau])
    return ndi, 2 / np.pi * np.arctan(1 / kappa)


rng = np.random.default_rng(31)
d = workdir("noddi_dti")
bvals, bvecs = scheme(d, "6x0,60x1000")
n = 200
_, th, ph = random_directions(rng, n)
fintra = rng.uniform(0.2, 0.9, n)
odi = rng.uniform(0.05, 0.6, n)
kappa = 1 / np.tan(odi * np.pi / 2)
truth = {"S0": np.full(n, 1000.0), "fintra": fintra, "kappa": kappa, "th": th, "ph": ph}

# 1. the model's tensor is the paper's
data0, mask, _ = simulate(d, "noddi_dti", truth, bvals, bvecs, noise="none")
dimoc("dti", "--data", data0, "--bvals", bvals, "--bvecs", bvecs, "--out", f"{d}/dti0")
ndi0, odi0 = closed_forms(load(f"{d}/dti0/MD.nii.gz").ravel(), load(f"{d}/dti0/FA.nii.gz").ravel())
worst = max(np.max(np.abs(ndi0 - fintra)), np.max(np.abs(odi0 - odi)))
check("noddi_dti-model-is-the-closed-forms", worst < 1e-3,
      f"largest |dNDI|, |dODI| {worst:.2g} between the closed forms of the noise-free tensor "
      f"and the truth")

# 2. NODDI-Watson data through the pipeline
os.rename(data0, f"{d}/noise_free.nii.gz")
data, mask, _ = simulate(d, "noddi_watson", dict(truth, fiso=np.zeros(n)), bvals, bvecs)
pipeline("noddi_dti", "--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs,
      "--out", f"{d}/pipe", "--quiet")
est = maps(f"{d}/pipe", ["NDI", "ODI"])
ndi_cf, odi_cf = closed_forms(load(f"{d}/pipe/dimoc/dti/MD.nii.gz").ravel(),
                              load(f"{d}/pipe/dimoc/dti/FA.nii.gz").ravel())
dn, do = median_error(est["NDI"], ndi_cf), median_error(est["ODI"], odi_cf)
check("noddi_dti-fit-vs-closed-forms", dn < 0.02 and do < 0.03,
      f"median |NDI fit - closed form| {dn:.4f}, |ODI ...| {do:.4f}")
a = within("noddi_dti-NDI-vs-noddi-truth", est["NDI"], fintra, 0.13)
b = within("noddi_dti-ODI-vs-noddi-truth", est["ODI"], odi, 0.04)
print(f"closed forms against the truth: NDI {median_error(ndi_cf, fintra):.4f}, "
      f"ODI {median_error(odi_cf, odi):.4f}; the fit: NDI {a:.4f}, ODI {b:.4f}")
status = maps(f"{d}/pipe/dimoc/final", ["status"])["status"]
check("noddi_dti-pipeline-status", np.all((status == 1) | (status == 6)),
      f"status values {sorted(set(status.tolist()))}")
finish()
