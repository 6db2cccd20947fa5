"""CHARMED (models/charmed.model) through its pipeline (pipelines/charmed.sh: the
tensor's orientation inside the fit -> grid over f_r and the diffusivities -> LM), on 200
voxels simulated with varied truths and Rician noise (SNR 50 at b = 0).

Protocol (long pulses, high b, as CHARMED's): delta 30 ms, Delta 40 ms, 5 shells of 30
directions, b 1000, 2500, 5000, 7500, 10000 s/mm^2 (G 0.023..0.072 T/m), + 6 b = 0; the axon
radius is CHARMED's fixed input (2 um).
Truths: f_r 0.3..0.7, d_h_par 1.4..2.2e-3, d_h_perp 3..8e-4, d_r 1.2..2e-3 mm^2/s, random
orientations.  Checks: median absolute errors over the voxels.
"""
import numpy as np

from dmtest import angle_deg, check, finish, random_directions, workdir
from pgse import GAMMA, protocol, simulate_and_run_pipeline

d = workdir("charmed")
rng = np.random.default_rng(2005)
G_of_b = [np.sqrt(b * 1e6 / (0.03 ** 2 * (0.04 - 0.01))) / GAMMA for b in (1000, 2500, 5000, 7500, 10000)]
bvals, bvecs, timing, *_ = protocol(d, [(30, G, 0.03, 0.04) for G in G_of_b])
n = 200
v, th, ph = random_directions(rng, n)
truth = {"S0": rng.uniform(800, 1200, n), "f_r": rng.uniform(0.3, 0.7, n),
         "d_h_par": rng.uniform(1.4e-3, 2.2e-3, n), "d_h_perp": rng.uniform(3e-4, 8e-4, n),
         "d_r": rng.uniform(1.2e-3, 2e-3, n), "th": th, "ph": ph}
truth, result = simulate_and_run_pipeline(d, "charmed", truth, bvals, bvecs, timing, 6)
err = {k: np.median(np.abs(result(k) - truth[k])) for k in ("f_r", "d_h_par", "d_h_perp", "d_r")}
e_ang = np.median(angle_deg(result("dyads1"), v))
print("charmed: median |error| " + ", ".join(f"{k} {x:.3g}" for k, x in err.items())
      + f", orientation {e_ang:.2f} deg")
check("charmed-restricted-fraction", err["f_r"] < 0.03, f"f_r {err['f_r']:.3f}")
check("charmed-diffusivities", err["d_h_par"] < 1.5e-4 and err["d_h_perp"] < 4e-5 and err["d_r"] < 1e-4,
      f"{err}")
check("charmed-orientation", e_ang < 2, f"median {e_ang:.2f} deg")
finish()
