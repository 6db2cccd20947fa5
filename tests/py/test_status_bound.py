"""Status 6, "at a bound": a voxel whose LM estimate has a free parameter within a
hair of a bound (3.2e-4 of a finite range) is flagged 6, never 1 (fitted); its maps are still
written, `dimoc compare` counts it, provenance.json counts it as at_bound; a parameter held
by --fixed at a bound is the user's choice and not flagged.

Data: ball & 1 stick at SNR 30, half the voxels without a ball (f1 = 1: the estimate of f1
goes to its bound in about half of them), half with f1 = 0.6.  (Without a stick, f1 = 0, the
stick fits the noise and f1 ends near 0.01 rather than at its bound.)"""
import json
import os

import numpy as np

from dmtest import check, dimoc, finish, load, random_directions, save, scheme, workdir

d = workdir("status_bound")
bvals, bvecs = scheme(d, "6x0,30x1000,30x2000")
rng = np.random.default_rng(5)
n = 120
_, th, ph = random_directions(rng, n)
f1 = np.where(np.arange(n) < n // 2, 1.0, 0.6)
maps = {"S0": np.full(n, 1000.0), "d": np.full(n, 1.5e-3), "f1": f1, "th1": th, "ph1": ph}
params = ",".join(f"{k}=" + save(os.path.join(d, f"{k}.nii.gz"), v.reshape(n, 1, 1)) for k, v in maps.items())
data, mask = os.path.join(d, "dwi.nii.gz"), os.path.join(d, "mask.nii.gz")
dimoc("simulate", "ball_1_stick", "--bvals", bvals, "--bvecs", bvecs, "--params", params, "--noise",
      "gaussian", "--snr", 30, "--seed", 3, "--out", data, "--mask-out", mask)
common = ["--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs]

out = os.path.join(d, "fit")
dimoc("fit", "ball_1_stick", *common, "--out", out)
st = load(os.path.join(out, "status.nii.gz")).ravel()
est = {k: load(os.path.join(out, f"{k}.nii.gz")).ravel() for k in ("f1", "d")}
hair = 1 / np.pi * np.arctan(1e-3)
near = (est["f1"] <= hair) | (est["f1"] >= 1 - hair) | (est["d"] <= 0.01 * hair) | (est["d"] >= 0.01 * (1 - hair))
check("at-bound-never-fitted", near.any() and np.all(st[near] == 6),
      f"{near.sum()} estimates at a bound, their status {sorted(set(st[near].tolist()))}")
check("status-6-only-at-a-bound", np.all(near[st == 6]) and np.all((st == 1) | (st == 2) | (st == 6)),
      f"status values {sorted(set(st.tolist()))}, {np.sum(st == 6)} at a bound")
check("at-bound-where-no-ball", np.all(f1[st == 6] == 1) and np.sum(st[: n // 2] == 6) >= n // 8,
      f"{np.sum(st[: n // 2] == 6)} of {n // 2} voxels without a ball flagged, "
      f"{np.sum(st[n // 2:] == 6)} of {n // 2} with one")
check("at-bound-maps-written", np.all(est["f1"][st == 6] >= 0) and np.all(est["d"][st == 6] > 0),
      "the estimates of flagged voxels are in the maps")
with open(os.path.join(out, "provenance.json")) as fh:
    counts = json.load(fh)
text = json.dumps(counts)
check("provenance-counts-at-bound", f'"at_bound": {int(np.sum(st == 6))}' in text,
      f"at_bound {np.sum(st == 6)} in provenance.json")

# f1 held at its bound 1 by --fixed: not flagged (the user's choice), the rest fitted.
out2 = os.path.join(d, "fixed")
dimoc("fit", "ball_1_stick", *common, "--out", out2, "--fixed", "f1", "--init", "f1=1")
st2 = load(os.path.join(out2, "status.nii.gz")).ravel()
check("fixed-at-bound-not-flagged", np.all(st2[: n // 2] == 1),
      f"status of the voxels without a ball: {sorted(set(st2[: n // 2].tolist()))}")
finish()
