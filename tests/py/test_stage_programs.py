"""Stage programs: a fit that holds parameters at their starts (--fixed; in a grid search alone,
every parameter it does not grid) runs a program of its own in which they are constants
(compiler/back/stage.c).  Its estimates must be those of the model's own program
(DIMOC_STAGE_PROGRAMS=0): the same statuses, and every parameter the same to rounding (1e-6
relative) in at least 97% of the voxels and within 1e-3 in all of them (a rounding apart can send
LM or a grid's tie another way).  Cases: NODDI-Watson's grid and fractions stages, NODDI-Bingham's
grid and LM on its dispersion, ball & 2 sticks' LM and MCMC with the diffusivity and one stick
held (periodic angles held), and ball & 1 stick, which has no voxel inputs, with its
orientation held.  The compile cache shows that a stage program was built: one more host
fitter than with DIMOC_STAGE_PROGRAMS=0."""
import os
import subprocess

import numpy as np

from dmtest import DIMOC, cached_files, check, dimoc, finish, load, random_directions, save, scheme, workdir

rng = np.random.default_rng(77)
d = workdir("stage_programs")
bvals, bvecs = scheme(d, "6x0,30x1000,60x2000")
N = 120


def flat(name, values):
    return save(os.path.join(d, name + ".nii.gz"), np.asarray(values, dtype=float).reshape(-1, 1, 1))


def simulate(model, truth, name):
    spec = ",".join(f"{k}={flat(name + '_' + k, v)}" for k, v in truth.items())
    out = os.path.join(d, name + ".nii.gz")
    dimoc("simulate", model, "--bvals", bvals, "--bvecs", bvecs, "--params", spec, "--noise", "rician",
          "--snr", 30, "--seed", 5, "--out", out)
    return out


_, th, ph = random_directions(rng, N)
_, th2, ph2 = random_directions(rng, N)
watson = {"S0": np.full(N, 1000.0), "fintra": rng.uniform(0.3, 0.8, N), "fiso": rng.uniform(0, 0.3, N),
          "kappa": rng.uniform(1, 16, N), "th": th, "ph": ph}
k1 = rng.uniform(4, 16, N)
bingham = {"S0": np.full(N, 1000.0), "fintra": rng.uniform(0.3, 0.8, N), "fiso": rng.uniform(0, 0.3, N),
           "kappa1": k1, "kappa2": k1 * rng.uniform(0.3, 1, N), "th": th, "ph": ph,
           "psi": rng.uniform(0, np.pi, N)}
sticks = {"S0": np.full(N, 1000.0), "d": rng.uniform(1e-3, 2e-3, N), "f1": rng.uniform(0.3, 0.5, N),
          "th1": th, "ph1": ph, "f2": rng.uniform(0.1, 0.3, N), "th2": th2, "ph2": ph2}
stick = {"S0": np.full(N, 1000.0), "d": rng.uniform(1e-3, 2e-3, N), "f1": rng.uniform(0.3, 0.7, N),
         "th1": th, "ph1": ph}
data = {"noddi_watson": simulate("noddi_watson", watson, "watson"),
        "noddi_bingham": simulate("noddi_bingham", bingham, "bingham"),
        "ball_2_sticks": simulate("ball_2_sticks", sticks, "sticks"),
        "ball_1_stick": simulate("ball_1_stick", stick, "stick")}
truths = {"noddi_watson": ("watson", watson), "noddi_bingham": ("bingham", bingham),
          "ball_2_sticks": ("sticks", sticks), "ball_1_stick": ("stick", stick)}


def init_from_truth(model, names):
    prefix, truth = truths[model]
    return [a for k in names for a in ("--init", f"{k}={os.path.join(d, prefix + '_' + k + '.nii.gz')}")]


CASES = [
    ("watson-grid", "noddi_watson", ["--method", "grid", "--fixed", "th,ph", "--grid", "fiso=0,0.1,0.2,0.35,0.6,1",
                                     "--grid", "fintra=0.1:0.1:0.9", "--grid", "kappa=0.5,1,2,4,8,16,32"]
     + init_from_truth("noddi_watson", ["th", "ph"])),
    ("watson-fractions", "noddi_watson", ["--method", "lm", "--fixed", "S0,kappa,th,ph"]
     + init_from_truth("noddi_watson", ["kappa", "th", "ph"])),
    ("bingham-grid", "noddi_bingham", ["--method", "grid", "--fixed", "S0,fintra,fiso,th,ph,psi",
                                       "--grid", "kappa1=1,2,4,8,16,32,63", "--grid", "kappa2=0.5,0.9,1.8,3.6,7,14,28,56"]
     + init_from_truth("noddi_bingham", ["fintra", "fiso", "th", "ph", "psi"])),
    ("bingham-dispersion", "noddi_bingham", ["--method", "lm", "--fixed", "S0,fintra,fiso,th,ph"]
     + init_from_truth("noddi_bingham", ["fintra", "fiso", "th", "ph", "psi"])),
    ("sticks-lm-mcmc", "ball_2_sticks", ["--method", "lm,mcmc", "--burnin", 100, "--jumps", 100, "--fixed", "d,th2,ph2"]
     + init_from_truth("ball_2_sticks", ["d", "th2", "ph2"])),
    ("stick-orientation", "ball_1_stick", ["--method", "lm", "--fixed", "th1,ph1"]
     + init_from_truth("ball_1_stick", ["th1", "ph1"])),
]

for name, model, opts in CASES:
    outs, sos = {}, {}
    for mode in ("1", "0"):
        out = os.path.join(d, f"{name}-{mode}")
        cache = os.path.join(d, f"cache-{name}-{mode}")
        env = dict(os.environ, XDG_CACHE_HOME=cache, DIMOC_STAGE_PROGRAMS=mode)
        p = subprocess.run([DIMOC, "fit", model, "--data", data[model], "--bvals", bvals, "--bvecs", bvecs,
                            "--out", out, "--quiet", "--device", "cpu", "--out-type", "float64", *map(str, opts)],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"{name}: dimoc fit failed: {p.stderr.strip()}")
        outs[mode], sos[mode] = out, cached_files(cache, ".so")
    check(f"{name}-built-a-stage-program", len(sos["1"]) == len(sos["0"]) + 1,
          f"{len(sos['1'])} host fitters with stage programs, {len(sos['0'])} without")
    st1, st0 = load(f"{outs['1']}/status.nii.gz"), load(f"{outs['0']}/status.nii.gz")
    check(f"{name}-statuses", np.array_equal(st1, st0), f"{int(np.sum(st1 != st0))} voxels differ")
    worst, close = 0.0, np.ones(N, bool)
    _, truth = truths[model]
    for k in truth:
        a, b = load(f"{outs['1']}/{k}.nii.gz").ravel(), load(f"{outs['0']}/{k}.nii.gz").ravel()
        rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-3)
        worst = max(worst, float(np.max(rel)))
        close &= rel <= 1e-6
    check(f"{name}-same-estimates", np.mean(close) >= 0.97 and worst <= 1e-3,
          f"{100 * np.mean(close):.1f}% of voxels within 1e-6, worst relative difference {worst:.2g}")

finish()
