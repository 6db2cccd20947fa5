"""NODDI-Bingham recovery with the shipped pipeline (pipelines/noddi_bingham.sh), on the synthetic
set of thesis section 5.5.2, Table 5.3: 9 b=0, 30 at b=711, 60 at b=2855 s/mm^2; S0 1000,
fintra 0.8, fiso 0, psi = pi/3, SNR 20 (Rician); the four dispersion scenarios (kappa1, kappa2)
= (40, 39), (2.1, 1.8), (5.5, 1.5), (25, 0.9), each with N random orientations, and a fifth of
wide dispersion, (1, 0.5), below the least concentration at which LM begins a parameter (about
1.02: closer to a bound it starts at that distance), where a grid that began kappa1 at 1 left
a quarter of the voxels on the constraint kappa2 = kappa1.  The thesis generates with NODDI's
axon-radius model; here noddi_bingham itself generates the data.

Checked (medians over each scenario's voxels): fintra within 0.05 and fiso within 0.03 of the
truth in every scenario, the mean orientation within 5 degrees (12 at ODItot 0.6, where it is
weakly determined), the fanning direction within 10 degrees where the dispersion is
anisotropic, ODItot within 0.02 everywhere, every concentration below 16 within 15%, and fewer
than 5% of the voxels ending with kappa2 = kappa1 exactly.  Concentrations above 16 (40, 39, 25) are the known
difficulty (thesis: "high concentration values (kappa > 16) are more difficult to estimate"):
their medians are printed and written into docs/pipelines.md, not held to a tolerance."""
import os
import time

import numpy as np

from dmtest import angle_deg, check, dimoc, finish, load, random_directions, save, scheme, workdir

N = 250  # orientations per scenario, as the thesis
SCENARIOS = [(40.0, 39.0), (2.1, 1.8), (5.5, 1.5), (25.0, 0.9), (1.0, 0.5)]
d = workdir("noddi_bingham")
bvals, bvecs = scheme(d, "9x0,30x711,60x2855")
rng = np.random.default_rng(53)

names = ["S0", "fintra", "fiso", "kappa1", "kappa2", "th", "ph", "psi"]
truth = {k: np.zeros((len(SCENARIOS), N, 1)) for k in names}
for r, (k1, k2) in enumerate(SCENARIOS):
    _, th, ph = random_directions(rng, N)
    for k, val in zip(names, [1000, 0.8, 0.0, k1, k2, th[:, None], ph[:, None], np.pi / 3]):
        truth[k][r] = val
params = ",".join(f"{k}={save(os.path.join(d, 'true_' + k + '.nii.gz'), m)}" for k, m in truth.items())
data, mask = os.path.join(d, "dwi.nii.gz"), save(os.path.join(d, "mask.nii.gz"), np.ones((len(SCENARIOS), N, 1)))
dimoc("simulate", "noddi_bingham", "--bvals", bvals, "--bvecs", bvecs, "--params", params,
      "--noise", "rician", "--snr", 20, "--seed", 8, "--out", data)

out = os.path.join(d, "fit")
extra = ["--device", os.environ["DIMOC_FIT_DEVICE"]] if os.environ.get("DIMOC_FIT_DEVICE") else []
t0 = time.time()
rc, _, err = dimoc("pipeline", "noddi_bingham", "--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs,
                   "--out", out, "--quiet", *extra,
                   expect_ok=False)
check("pipeline-runs", rc == 0, f"{time.time() - t0:.1f} s" if rc == 0 else err.strip()[-300:])
if rc != 0:
    finish()

est = {k: load(os.path.join(out, k + ".nii.gz"))[:, :, 0] for k in ("fintra", "fiso", "kappa1", "kappa2", "ODItot")}
th, ph, psi = truth["th"][:, :, 0], truth["ph"][:, :, 0], truth["psi"][:, :, 0]
v = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
e_th = np.stack([np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)], -1)
e_ph = np.stack([-np.sin(ph), np.cos(ph), np.zeros_like(ph)], -1)
fan_true = np.cos(psi)[..., None] * e_ph - np.sin(psi)[..., None] * e_th  # n2 = v x n1
dyad_err = angle_deg(load(os.path.join(out, "dyads1.nii.gz"))[:, :, 0], v)
fan_err = angle_deg(load(os.path.join(out, "fanning.nii.gz"))[:, :, 0], fan_true)

for r, (k1, k2) in enumerate(SCENARIOS):
    tag = f"k{k1:g}-{k2:g}"
    med = {k: np.median(x[r]) for k, x in est.items()}
    odi_true = 2 / np.pi * np.arctan(1 / np.sqrt(k1 * k2))
    print(f"scenario ({k1:g}, {k2:g}): median kappa1 {med['kappa1']:.2f} kappa2 {med['kappa2']:.2f} "
          f"fintra {med['fintra']:.3f} fiso {med['fiso']:.3f} ODItot {med['ODItot']:.4f} (true {odi_true:.4f}) "
          f"orientation {np.median(dyad_err[r]):.1f} deg fanning {np.median(fan_err[r]):.1f} deg")
    check(f"{tag}-fintra", abs(med["fintra"] - 0.8) < 0.05, f"median {med['fintra']:.3f}, true 0.8")
    check(f"{tag}-fiso", abs(med["fiso"]) < 0.03, f"median {med['fiso']:.3f}, true 0")
    check(f"{tag}-ODItot", abs(med["ODItot"] - odi_true) < 0.02, f"median {med['ODItot']:.4f}, true {odi_true:.4f}")
    max_err = 5 if odi_true < 0.5 else 12
    check(f"{tag}-orientation", np.median(dyad_err[r]) < max_err, f"median error {np.median(dyad_err[r]):.1f} deg")
    # a start on the constraint kappa2 = kappa1 stays there (LM's steps off it are refused)
    on_ridge = np.mean(est["kappa1"][r] == est["kappa2"][r])
    check(f"{tag}-not-left-on-the-constraint", on_ridge < 0.05,
          f"{100 * on_ridge:.1f}% of voxels end with kappa2 = kappa1")
    if k1 / k2 > 2:  # a fanning direction exists
        check(f"{tag}-fanning", np.median(fan_err[r]) < 10, f"median error {np.median(fan_err[r]):.1f} deg")
    for name, true in (("kappa1", k1), ("kappa2", k2)):
        rel = med[name] / true - 1
        if true < 16:
            check(f"{tag}-{name}", abs(rel) < 0.15, f"median {med[name]:.2f}, true {true:g} ({100 * rel:+.0f}%)")
        else:
            print(f"  high concentration {name}: median {med[name]:.2f}, true {true:g} ({100 * rel:+.0f}%), "
                  f"quartiles {np.percentile(est[name][r], 25):.1f}-{np.percentile(est[name][r], 75):.1f}")
status = load(os.path.join(out, "dimoc", "final", "status.nii.gz"))
# Status 6 (at a bound) only where a fraction of the estimate is at 0 or 1, or a kappa at 64.
at_bound = status[:, :, 0] == 6
near = (est["fiso"] < 1e-3) | (est["fintra"] < 1e-3) | (est["fintra"] > 1 - 1e-3) | \
    (est["kappa1"] > 63.9) | (est["kappa2"] > 63.9) | (est["kappa2"] < 0.03)
check("status", np.all((status == 1) | (status == 2) | (status == 6)) and np.all(near[at_bound]),
      f"status values {sorted(set(status.ravel().tolist()))}, {at_bound.sum()} at a bound")
finish()
