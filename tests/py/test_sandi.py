"""SANDI (models/sandi.model) through its pipeline (pipelines/sandi.sh: grid over
f_neurite, f_soma, R_soma, D_in, D_ec -> LM), on simulated voxels of varied truths.

Protocol (Connectom-like, as SANDI's): delta 10 ms, Delta 20 ms, 7 shells of 20 directions,
G 0.065..0.29 T/m (b ~ 500, 1000, 2500, 4000, 6000, 8000, 10000 s/mm^2), + 4 b = 0.
Truths: f_neurite 0.3..0.55, f_soma 0.15..0.4, R_soma 6..11 um, D_in 1.5..2.5e-3,
D_ec 0.8..1.5e-3 mm^2/s.
Checks (median absolute errors over the voxels): noise-free, every parameter found (60
voxels); Rician noise at SNR 50 per direction (100 voxels), the accuracy measured
when this test was written, with a margin (LM from the grid; `--mcmc`, the estimator
docs/pipelines.md advises at this SNR, is compared with dmipy in tests/peers/test_dmipy_sandi.py).
"""
import numpy as np

from dmtest import check, finish, workdir
from pgse import protocol, simulate_and_run_pipeline

d = workdir("sandi")
rng = np.random.default_rng(2020)
shells = [(20, G, 0.010, 0.020) for G in (0.065, 0.092, 0.145, 0.183, 0.224, 0.259, 0.29)]
bvals, bvecs, timing, *_ = protocol(d, shells, b0=4)


def draw(n):
    return {"S0": rng.uniform(800, 1200, n), "f_neurite": rng.uniform(0.3, 0.55, n),
            "f_soma": rng.uniform(0.15, 0.4, n), "R_soma": rng.uniform(6, 11, n),
            "D_in": rng.uniform(1.5e-3, 2.5e-3, n), "D_ec": rng.uniform(0.8e-3, 1.5e-3, n)}


def errors(label, truth, result):
    err = {k: np.median(np.abs(result(k) - truth[k])) for k in truth if k != "S0"}
    corr = np.corrcoef(result("R_soma"), truth["R_soma"])[0, 1]
    print(f"sandi {label}: median |error| " + ", ".join(f"{k} {v:.3g}" for k, v in err.items())
          + f"; R_soma correlation {corr:.2f}")
    return err, corr


# Without noise the cascade must find the truth: the model and the grid are sound.
err, corr = errors("noise-free", *simulate_and_run_pipeline(d, "sandi", draw(60), bvals, bvecs,
                                                             timing, 4, snr=None))
check("sandi-noise-free", err["f_neurite"] < 0.01 and err["f_soma"] < 0.01 and err["R_soma"] < 0.1
      and err["D_in"] < 2e-5 and err["D_ec"] < 2e-5, f"{err}")
# With noise SANDI's five parameters are poorly conditioned (SANDI itself fits them with
# machine learning on simulations); at SNR 50 per direction LM from the grid gives these median
# errors (measured: f_neurite 0.11, f_soma 0.11, R_soma 0.9 um, D_in 7.9e-4, D_ec 2.8e-4):
err, corr = errors("SNR 50", *simulate_and_run_pipeline(d, "sandi", draw(100), bvals, bvecs,
                                                         timing, 5, snr=50))
check("sandi-noisy", err["f_neurite"] < 0.14 and err["f_soma"] < 0.19 and err["R_soma"] < 1.5
      and err["D_in"] < 1.1e-3 and err["D_ec"] < 4e-4, f"{err}")
finish()
