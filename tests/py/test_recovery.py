"""Parameter recovery, MCMC calibration, noise models, grid search and determinism of
`dimoc fit` on data made by `dimoc simulate` (issue: fitting engine on the CPU)."""
import os

import numpy as np

from dmtest import (angle_deg, check, check_refused, dimoc, finish, load, random_directions, save,
                    scheme, workdir)

rng = np.random.default_rng(12345)


def flat(wd, name, values):
    """A parameter map laid out as an N x 1 x 1 image."""
    return save(os.path.join(wd, name + ".nii.gz"), np.asarray(values).reshape(-1, 1, 1))


def params_arg(wd, **maps):
    return ",".join(f"{k}={flat(wd, k, v)}" for k, v in maps.items())


def te_file(d, n=8):
    path = os.path.join(d, "te.txt")
    np.savetxt(path, np.linspace(0.01, 0.08, n))
    return path


# exp_decay, noise-free: LM recovers S0 and R to 1e-6 relative.
d = workdir("recovery_exp_nonoise")
te = te_file(d)
S0 = rng.uniform(500, 2000, 200)
R = rng.uniform(10, 50, 200)
dimoc("simulate", "exp_decay", "--measure", f"TE={te}", "--params", params_arg(d, S0=S0, R=R),
      "--out", f"{d}/dwi.nii.gz")
y = load(f"{d}/dwi.nii.gz")
expected = S0[:, None] * np.exp(-R[:, None] * np.loadtxt(te)[None, :])
check("simulate-matches-numpy", np.allclose(y[:, 0, 0, :], expected, rtol=1e-6),
      f"max rel diff {np.max(np.abs(y[:, 0, 0, :] / expected - 1)):.2e}")
dimoc("fit", "exp_decay", "--data", f"{d}/dwi.nii.gz", "--measure", f"TE={te}", "--out", f"{d}/fit",
      "--quiet")
eS0, eR = load(f"{d}/fit/S0.nii.gz")[:, 0, 0], load(f"{d}/fit/R.nii.gz")[:, 0, 0]
# Outputs are float32 NIfTI: 1e-6 relative is at the edge of float32's 6e-8 epsilon, so fine.
err = max(np.max(np.abs(eS0 / S0 - 1)), np.max(np.abs(eR / R - 1)))
check("exp_decay-noise-free-1e-6", err < 1e-6, f"max relative error {err:.2e}")

# exp_decay, Gaussian noise SNR 50: the mean error of R over 1000 voxels is within 3 standard
# errors of zero (LM is unbiased to first order under Gaussian noise).
d = workdir("recovery_exp_gauss")
te = te_file(d)
n = 1000
dimoc("simulate", "exp_decay", "--measure", f"TE={te}", "--params", "S0=1000,R=20", "--voxels", n,
      "--noise", "gaussian", "--snr", 50, "--seed", 3, "--out", f"{d}/dwi.nii.gz")
dimoc("fit", "exp_decay", "--data", f"{d}/dwi.nii.gz", "--measure", f"TE={te}", "--out", f"{d}/fit",
      "--quiet")
for name, truth in (("R", 20.0), ("S0", 1000.0)):
    e = load(f"{d}/fit/{name}.nii.gz")[:, 0, 0] - truth
    se = e.std(ddof=1) / np.sqrt(n)
    check(f"exp_decay-gaussian-snr50-unbiased-{name}", abs(e.mean()) < 3 * se,
          f"mean error {e.mean():.4g}, 3 SE {3 * se:.4g}")

# ball_1_stick, LM, Rician SNR 30, 6 b=0 + 64 directions at b=1000, random orientations.
d = workdir("recovery_b1s_lm")
bvals, bvecs = scheme(d, "6x0,64x1000")
n = 1000
v, th, ph = random_directions(rng, n)
f1 = rng.uniform(0.4, 0.8, n)
dtrue = rng.uniform(1.2e-3, 1.8e-3, n)
dimoc("simulate", "ball_1_stick", "--bvals", bvals, "--bvecs", bvecs, "--params",
      params_arg(d, S0=np.full(n, 1000.0), d=dtrue, f1=f1, th1=th, ph1=ph), "--noise", "rician",
      "--snr", 30, "--seed", 5, "--out", f"{d}/dwi.nii.gz")
dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs,
      "--out", f"{d}/fit", "--quiet")
dy = load(f"{d}/fit/dyads1.nii.gz")[:, 0, 0, :]
ang = angle_deg(dy, v)
ef1 = load(f"{d}/fit/f1.nii.gz")[:, 0, 0]
check("ball_1_stick-lm-angle", np.median(ang) < 5, f"median angular error {np.median(ang):.2f} deg")
check("ball_1_stick-lm-f1", np.mean(np.abs(ef1 - f1)) < 0.05,
      f"mean |f1 error| {np.mean(np.abs(ef1 - f1)):.4f}")
status = load(f"{d}/fit/status.nii.gz")[:, 0, 0]
check("ball_1_stick-lm-status", np.all((status == 1) | (status == 2)),
      f"statuses {np.unique(status)}")


def coverage(d, model, names, truths, extra):
    """Share of voxels whose true value lies in the central 90% posterior interval."""
    out = {}
    for name in names:
        s = load(f"{d}/fit/{name}_samples.nii.gz")[:, 0, 0, :]
        lo, hi = np.percentile(s, 5, axis=1), np.percentile(s, 95, axis=1)
        out[name] = np.mean((truths[name] >= lo) & (truths[name] <= hi))
    return out


# MCMC calibration, exp_decay: Gaussian noise, Gaussian noise model, flat priors.
d = workdir("calibration_exp")
te = te_file(d)
n = 600
dimoc("simulate", "exp_decay", "--measure", f"TE={te}", "--params", "S0=1000,R=20", "--voxels", n,
      "--noise", "gaussian", "--snr", 30, "--seed", 11, "--out", f"{d}/dwi.nii.gz")
dimoc("fit", "exp_decay", "--data", f"{d}/dwi.nii.gz", "--measure", f"TE={te}", "--out", f"{d}/fit",
      "--method", "lm,mcmc", "--jumps", 5000, "--sample-every", 10, "--save-samples", "--quiet")
cov = coverage(d, "exp_decay", ["S0", "R"], {"S0": 1000.0, "R": 20.0}, None)
for name, c in cov.items():
    check(f"calibration-exp_decay-{name}", abs(c - 0.90) <= 0.05, f"90% interval coverage {c:.3f}")

# MCMC calibration, ball_1_stick (scalar parameters).
d = workdir("calibration_b1s")
bvals, bvecs = scheme(d, "6x0,64x1000")
n = 400
v, th, ph = random_directions(rng, n)
truth = {"S0": np.full(n, 1000.0), "d": np.full(n, 1.5e-3), "f1": rng.uniform(0.4, 0.7, n)}
dimoc("simulate", "ball_1_stick", "--bvals", bvals, "--bvecs", bvecs, "--params",
      params_arg(d, S0=truth["S0"], d=truth["d"], f1=truth["f1"], th1=th, ph1=ph), "--noise",
      "gaussian", "--snr", 30, "--seed", 13, "--out", f"{d}/dwi.nii.gz")
dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs,
      "--out", f"{d}/fit", "--method", "lm,mcmc", "--jumps", 5000, "--sample-every", 10,
      "--save-samples", "--quiet")
cov = coverage(d, "ball_1_stick", ["S0", "d", "f1"], truth, None)
for name, c in cov.items():
    check(f"calibration-ball_1_stick-{name}", abs(c - 0.90) <= 0.05, f"90% interval coverage {c:.3f}")

# Rician noise at SNR 5: the Rician noise model is less biased in R than the Gaussian one.
# 64 echoes: with a dozen, a voxel's data at SNR 5 are often explained almost as well by
# "one bright first echo, then pure noise", a plateau over large R that flat priors let
# dominate the posterior mean (seen here: posterior means of R up to 500 for a truth of 20).
d = workdir("rician_vs_gaussian")
te = os.path.join(d, "te.txt")
np.savetxt(te, np.linspace(0, 0.08, 64))
n = 300
dimoc("simulate", "exp_decay", "--measure", f"TE={te}", "--params", "S0=1000,R=20", "--voxels", n,
      "--noise", "rician", "--snr", 5, "--seed", 17, "--out", f"{d}/dwi.nii.gz")
bias = {}
for noise in ("gaussian", "rician"):
    dimoc("fit", "exp_decay", "--data", f"{d}/dwi.nii.gz", "--measure", f"TE={te}", "--out",
          f"{d}/fit_{noise}", "--method", "lm,mcmc", "--noise", noise, "--quiet")
    bias[noise] = np.mean(load(f"{d}/fit_{noise}/R.nii.gz")[:, 0, 0]) - 20.0
check("rician-less-biased-than-gaussian", abs(bias["rician"]) < abs(bias["gaussian"]),
      f"bias in R: rician {bias['rician']:.3f}, gaussian {bias['gaussian']:.3f}")

# Grid search returns the exact grid point on noise-free data generated at a grid point.
d = workdir("grid_exact")
te = te_file(d)
dimoc("simulate", "exp_decay", "--measure", f"TE={te}", "--params", "S0=900,R=25", "--out",
      f"{d}/dwi.nii.gz")
dimoc("fit", "exp_decay", "--data", f"{d}/dwi.nii.gz", "--measure", f"TE={te}", "--out", f"{d}/fit",
      "--method", "grid", "--grid", "S0=500:100:1500", "--grid", "R=5,10,15,20,25,30,35", "--quiet")
g = (load(f"{d}/fit/S0.nii.gz").ravel()[0], load(f"{d}/fit/R.nii.gz").ravel()[0])
check("grid-exact-point", g == (900.0, 25.0), f"grid estimate {g}")

# The same seed gives byte-identical outputs with 1 and 2 threads.
d = workdir("threads_determinism")
bvals, bvecs = scheme(d, "3x0,30x1000")
dimoc("simulate", "ball_1_stick", "--bvals", bvals, "--bvecs", bvecs, "--voxels", 64, "--params",
      "S0=1000,d=1.5e-3,f1=0.5,th1=1.0,ph1=2.0", "--noise", "rician", "--snr", 20, "--seed", 1,
      "--out", f"{d}/dwi.nii.gz")
for t in (1, 2):
    dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs,
          "--out", f"{d}/fit{t}", "--method", "lm,mcmc", "--burnin", 200, "--jumps", 200,
          "--sample-every", 10, "--save-samples", "--threads", t, "--seed", 99, "--quiet")
files = sorted(f for f in os.listdir(f"{d}/fit1") if f.endswith(".nii.gz"))
same = all(open(f"{d}/fit1/{f}", "rb").read() == open(f"{d}/fit2/{f}", "rb").read() for f in files)
check("same-seed-1-vs-2-threads-byte-identical", same and len(files) > 10, f"{len(files)} files compared")

# The posterior sd of a periodic parameter is circular: sqrt(-2 ln R) of its samples, as numpy
# computes it from the sample file.
th = load(f"{d}/fit1/th1_samples.nii.gz").reshape(-1, 20).astype(np.float64)
resultant = np.abs(np.exp(2j * th).mean(axis=1))  # th is periodic on [0, pi]
want = np.sqrt(-2 * np.log(resultant)) / 2
got = load(f"{d}/fit1/th1_sd.nii.gz").reshape(-1)
check("circular-sd-from-the-samples", np.allclose(got, want, rtol=1e-5, atol=1e-6),
      f"largest difference {np.max(np.abs(got - want)):.3g}")

# --samples-of: only the listed parameters' samples, the same bytes as --save-samples writes.
common = ["fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs,
          "--method", "lm,mcmc", "--burnin", 200, "--jumps", 200, "--sample-every", 10,
          "--seed", 99, "--quiet"]
dimoc(*common, "--samples-of", "f1,th1", "--out", f"{d}/fit_of")
kept = sorted(f for f in os.listdir(f"{d}/fit_of") if f.endswith("_samples.nii.gz"))
same = all(open(f"{d}/fit_of/{f}", "rb").read() == open(f"{d}/fit1/{f}", "rb").read() for f in kept)
check("samples-of-writes-the-listed-only", kept == ["f1_samples.nii.gz", "th1_samples.nii.gz"] and same,
      f"{kept}, same bytes as all parameters' {same}")
check_refused("samples-of-unknown-parameter",
              dimoc(*common, "--samples-of", "f1,f9", "--out", f"{d}/fit_bad", expect_ok=False),
              "no parameter 'f9'", f"{d}/fit_bad")

# One sample has no sd and no dispersion: those maps are not written.
dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs,
      "--method", "lm,mcmc", "--jumps", 10, "--sample-every", 10, "--quiet", "--out", f"{d}/fit_one")
names = set(os.listdir(f"{d}/fit_one"))
check("one-sample-no-sd-maps", {"f1.nii.gz", "dyads1.nii.gz"} <= names and
      not any(n.endswith(("_sd.nii.gz", "_dispersion.nii.gz")) for n in names), f"{sorted(names)}")

finish()
