"""Stick, zeppelin and ball (models/stick_zeppelin_ball.model) through its pipeline
(pipelines/stick_zeppelin_ball.sh: the tensor's orientation inside the fit -> grid over f_ic,
f_iso, d_par -> LM), on 300 voxels simulated with varied truths and Rician noise (SNR 50 at
b = 0); 6 b = 0 and three shells of 30 directions at b 1000, 2000, 3000 s/mm^2 (no timing
needed).
Truths: f_ic 0.3..0.7, f_iso 0..0.25, d_par 1.5..2.2e-3 mm^2/s, random orientations; the
zeppelin's d_perp follows from them by tortuosity.  Checks: median absolute errors.
"""
import numpy as np

from dmtest import angle_deg, check, finish, random_directions, scheme, workdir
from pgse import simulate_and_run_pipeline

d = workdir("stick_zeppelin_ball")
rng = np.random.default_rng(2012)
bvals, bvecs = scheme(d, "6x0,30x1000,30x2000,30x3000")
n = 300
v, th, ph = random_directions(rng, n)
truth = {"S0": rng.uniform(800, 1200, n), "f_ic": rng.uniform(0.3, 0.7, n),
         "f_iso": rng.uniform(0, 0.25, n), "d_par": rng.uniform(1.5e-3, 2.2e-3, n), "th": th, "ph": ph}
truth, result = simulate_and_run_pipeline(d, "stick_zeppelin_ball", truth, bvals, bvecs, [], 7)
err = {k: np.median(np.abs(result(k) - truth[k])) for k in ("f_ic", "f_iso", "d_par")}
d_perp = truth["d_par"] * (1 - truth["f_ic"] - truth["f_iso"]) / (1 - truth["f_iso"])
err["d_perp"] = np.median(np.abs(result("d_perp") - d_perp))
e_ang = np.median(angle_deg(result("dyads1"), v))
print("stick_zeppelin_ball: median |error| " + ", ".join(f"{k} {x:.3g}" for k, x in err.items())
      + f", orientation {e_ang:.2f} deg")
check("szb-fractions", err["f_ic"] < 0.015 and err["f_iso"] < 0.035, f"{err}")
check("szb-diffusivities", err["d_par"] < 1e-4 and err["d_perp"] < 5e-5, f"{err}")
check("szb-orientation", e_ang < 2, f"median {e_ang:.2f} deg")
finish()
