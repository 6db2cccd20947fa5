"""ActiveAx (models/activeax.model) through its pipeline (pipelines/activeax.sh:
the tensor's orientation inside the fit -> grid over f_ic, f_iso, R -> LM), on 200 voxels
simulated with varied truths and Rician noise (SNR 50 at b = 0).

Protocol (4 shells of 30 directions + 6 b = 0, a Connectom-like scanner, G up to 0.3 T/m):
  G 0.08 T/m, delta 8 ms, Delta 20 ms (b ~ 510 s/mm^2);  G 0.20, 8, 20 (b ~ 3180);
  G 0.14, 8, 40 (b ~ 3350);  G 0.30, 6, 30 (b ~ 5500).
Truths: f_ic 0.45..0.8, f_iso 0..0.2, axon radius R 2..5 um (diameters 4..10 um: above the
resolution limit of this protocol at SNR 50; smaller axons are not resolved, as Alexander et
al. 2010 and Nilsson et al. 2017 describe), random orientations.
Checks (median absolute errors over the voxels): f_ic, f_iso, diameter, orientation.
"""
import numpy as np

from dmtest import angle_deg, check, finish, random_directions, workdir
from pgse import protocol, simulate_and_run_pipeline

d = workdir("activeax")
rng = np.random.default_rng(2010)
shells = [(30, 0.08, 0.008, 0.020), (30, 0.20, 0.008, 0.020), (30, 0.14, 0.008, 0.040),
          (30, 0.30, 0.006, 0.030)]
bvals, bvecs, timing, *_ = protocol(d, shells)
n = 200
v, th, ph = random_directions(rng, n)
truth = {"S0": rng.uniform(800, 1200, n), "f_ic": rng.uniform(0.45, 0.8, n),
         "f_iso": rng.uniform(0, 0.2, n), "R": rng.uniform(2, 5, n), "th": th, "ph": ph}
truth, result = simulate_and_run_pipeline(d, "activeax", truth, bvals, bvecs, timing, 3)
est = {k: result(k) for k in ("f_ic", "f_iso", "diameter")}
dy = result("dyads1")
e_fic = np.median(np.abs(est["f_ic"] - truth["f_ic"]))
e_fiso = np.median(np.abs(est["f_iso"] - truth["f_iso"]))
e_diam = np.median(np.abs(est["diameter"] - 2 * truth["R"]))
e_ang = np.median(angle_deg(dy, v))
corr = np.corrcoef(est["diameter"], 2 * truth["R"])[0, 1]
print(f"activeax: median |error| f_ic {e_fic:.3f}, f_iso {e_fiso:.3f}, diameter {e_diam:.2f} um "
      f"(r = {corr:.2f}), orientation {e_ang:.2f} deg")
check("activeax-fractions", e_fic < 0.03 and e_fiso < 0.02, f"f_ic {e_fic:.3f}, f_iso {e_fiso:.3f}")
check("activeax-diameter", e_diam < 0.6 and corr > 0.85,
      f"median |error| {e_diam:.2f} um over diameters 4..10 um, correlation {corr:.2f}")
check("activeax-orientation", e_ang < 3, f"median {e_ang:.2f} deg")
finish()
