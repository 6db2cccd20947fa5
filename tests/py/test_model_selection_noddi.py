"""Model selection by BIC between NODDI-Watson and NODDI-Bingham (as thesis Table 5.4 compares
them on real data): data simulated from each model, fitted with both by the shipped pipelines
with --ic (noddi_bingham.sh runs noddi_watson.sh first, into OUTDIR/noddi_watson), then
`dimoc select` on the two BIC maps.  BIC must pick the generating model in at least 90% of
each half's voxels.

Protocol of thesis Table 5.3 (9 b=0, 30 at b=711, 60 at b=2855), SNR 20 (Rician), S0 1000,
random orientations.  Watson voxels: fintra 0.4-0.8, kappa 1-16, fiso 0-0.2.  Bingham voxels:
the same fractions, kappa1 4-25 and kappa2 = kappa1 / (3 to 8), psi random: clearly
anisotropic dispersion (a nearly isotropic Bingham is a Watson, and BIC rightly picks the
simpler model there)."""
import os

import nibabel as nib
import numpy as np

from dmtest import check, dimoc, finish, load, random_directions, save, scheme, workdir

N = 500  # voxels per generating model
d = workdir("model_selection_noddi")
bvals, bvecs = scheme(d, "9x0,30x711,60x2855")
rng = np.random.default_rng(31)

fintra = rng.uniform(0.4, 0.8, (2, N))
fiso = rng.uniform(0.0, 0.2, (2, N))
_, th, ph = random_directions(rng, 2 * N)
th, ph = th.reshape(2, N), ph.reshape(2, N)
kappa = rng.uniform(1, 16, N)
kappa1 = rng.uniform(4, 25, N)
kappa2 = kappa1 / rng.uniform(3, 8, N)
psi = rng.uniform(0, np.pi, N)


def maps(prefix, values):
    return ",".join(f"{k}={save(os.path.join(d, prefix + k + '.nii.gz'), np.reshape(v, (1, N, 1)))}"
                    for k, v in values.items())


common = ["--bvals", bvals, "--bvecs", bvecs, "--noise", "rician", "--snr", 20]
w = {"S0": np.full(N, 1000.0), "fintra": fintra[0], "fiso": fiso[0], "kappa": kappa, "th": th[0], "ph": ph[0]}
dimoc("simulate", "noddi_watson", "--params", maps("w_", w), *common, "--seed", 5, "--out", f"{d}/w.nii.gz")
b = {"S0": np.full(N, 1000.0), "fintra": fintra[1], "fiso": fiso[1], "kappa1": kappa1, "kappa2": kappa2,
     "th": th[1], "ph": ph[1], "psi": psi}
dimoc("simulate", "noddi_bingham", "--params", maps("b_", b), *common, "--seed", 6, "--out", f"{d}/b.nii.gz")
# One image: row 0 Watson, row 1 Bingham.
both = np.concatenate([np.asarray(nib.load(f"{d}/{x}.nii.gz").dataobj) for x in ("w", "b")], axis=0)
data = save(os.path.join(d, "dwi.nii.gz"), both)
mask = save(os.path.join(d, "mask.nii.gz"), np.ones((2, N, 1)))

extra = ["--device", os.environ["DIMOC_FIT_DEVICE"]] if os.environ.get("DIMOC_FIT_DEVICE") else []
out = os.path.join(d, "fit")
rc, _, err = dimoc("pipeline", "noddi_bingham", "--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs,
                   "--out", out, "--ic", "--quiet", *extra,
                   expect_ok=False)
check("pipelines-run", rc == 0, err.strip()[-300:])
if rc != 0:
    finish()
best = os.path.join(d, "best_BIC.nii.gz")
rc, table, err = dimoc("select", f"{out}/noddi_watson/BIC.nii.gz", f"{out}/BIC.nii.gz", "--names",
                       "noddi_watson,noddi_bingham", "--mask", mask, "--out", best, expect_ok=False)
check("select-runs", rc == 0, err.strip())
if rc != 0:
    finish()
labels = load(best)[:, :, 0]
watson = np.mean(labels[0] == 1)
bingham = np.mean(labels[1] == 2)
print(table.strip())
check("watson-data-picks-watson", watson >= 0.9, f"noddi_watson lowest BIC in {100 * watson:.1f}% of its voxels")
check("bingham-data-picks-bingham", bingham >= 0.9, f"noddi_bingham lowest BIC in {100 * bingham:.1f}% of its voxels")
finish()
