"""Stage programs on the GPU (make test-gpu): a grid search or LM stage that holds parameters runs
its own program, where they are constants (compiler/back/stage.c), for voxels of the same
inputs; each row's values that read the held parameters are made as the row is read, from base
values that a block shares (templates/fit/fit_common.h, DM_ROWS_AS_READ).  A grid search alone
whose prepared values are the same for every voxel, and whose signal calls only elementary
functions, runs as the sweep (templates/fit/grid.h):
its loops turned round, each measurement's row made once for a chunk of points, the points'
values from a table in shared memory.  The estimates must be those of the same stage on the
GPU with the model's own program (DIMOC_STAGE_PROGRAMS=0) and of the CPU's stage program: the
same statuses; for a grid, every parameter the same to 1e-6 (relative) in at least 99% of the
voxels and there the cost (from the BIC map: M log(sse1 / sse0)) to 1e-9; for LM, every
parameter within 1e-6 in at least 97% of the voxels and within 1e-3 in all of the GPU's with
the model's program, 5e-2 of the CPU's (a point within rounding of another may be chosen
differently, an LM path that rounds otherwise end elsewhere in a flat valley).  Cases:
NODDI-Watson's grid of the pipeline (378 points: not a whole number of chunks) on 3,000 voxels
(many blocks) at two measurement counts (2 and 4 lanes a voxel), with points beyond the bounds
(kappa 80, fiso 1.2: costed and ignored), its fractions stage (LM),
NODDI-Bingham's grid (its signal calls the confluent hypergeometric function: the model's
program serves) and its dispersion stage (LM), and NODDI-Watson's grid with a d_par map (the
voxels' inputs differ: the model's program serves).  The compile cache shows which program ran: a
"-sweep" or "-stage" cubin."""
import os
import subprocess

import numpy as np

from dmtest import DIMOC, cached_files, check, dimoc, finish, load, random_directions, save, workdir

rng = np.random.default_rng(31)
d = workdir("stage_programs_gpu")
N = 3000


def flat(name, values):
    return save(os.path.join(d, name + ".nii.gz"), np.asarray(values, dtype=float).reshape(-1, 10, 10))


def simulate(model, truth, name, shells):
    bvals, bvecs = os.path.join(d, name + ".bval"), os.path.join(d, name + ".bvec")
    dimoc("scheme", "--shells", shells, "--bvals", bvals, "--bvecs", bvecs)
    spec = ",".join(f"{k}={flat(name + '_' + k, v)}" for k, v in truth.items())
    out = os.path.join(d, name + ".nii.gz")
    dimoc("simulate", model, "--bvals", bvals, "--bvecs", bvecs, "--params", spec, "--noise", "rician",
          "--snr", 30, "--seed", 9, "--out", out)
    return out, bvals, bvecs


_, th, ph = random_directions(rng, N)
watson = {"S0": np.full(N, 1000.0), "fintra": rng.uniform(0.2, 0.85, N), "fiso": rng.uniform(0, 0.4, N),
          "kappa": np.exp(rng.uniform(np.log(0.5), np.log(30), N)), "th": th, "ph": ph}
k1 = rng.uniform(4, 16, N)
bingham = {"S0": np.full(N, 1000.0), "fintra": rng.uniform(0.3, 0.8, N), "fiso": rng.uniform(0, 0.3, N),
           "kappa1": k1, "kappa2": k1 * rng.uniform(0.3, 1, N), "th": th, "ph": ph,
           "psi": rng.uniform(0, np.pi, N)}
WATSON_GRID = ["--method", "grid", "--fixed", "th,ph", "--grid", "fiso=0,0.1,0.2,0.35,0.6,1",
               "--grid", "fintra=0.1:0.1:0.9", "--grid", "kappa=0.5,1,2,4,8,16,32"]


def init(prefix, names):
    return [a for k in names for a in ("--init", f"{k}={os.path.join(d, prefix + '_' + k + '.nii.gz')}")]


ukb = simulate("noddi_watson", watson, "ukb", "5x0,50x1000,50x2000")
hcp = simulate("noddi_watson", watson, "hcp", "18x0,90x1000,90x2000,90x3000")
bing = simulate("noddi_bingham", bingham, "bingham", "6x0,30x1000,60x2000")
dpar = flat("dpar", rng.uniform(1.5e-3, 2.0e-3, N))
WATSON_LM = ["--method", "lm", "--fixed", "S0,kappa,th,ph"]
BINGHAM_HELD = ["fintra", "fiso", "th", "ph", "psi"]
CASES = [  # name, model, data, options, the program expected ("sweep", "stage" or "model")
    ("watson-grid-105", "noddi_watson", ukb, WATSON_GRID + init("ukb", ["th", "ph"]), "sweep"),
    ("watson-grid-288", "noddi_watson", hcp, WATSON_GRID + init("hcp", ["th", "ph"]), "sweep"),
    ("watson-grid-beyond-bounds", "noddi_watson", ukb,
     [a.replace("kappa=0.5,1,2,4,8,16,32", "kappa=0.5,1,2,4,8,16,32,80").replace(
         "fiso=0,0.1,0.2,0.35,0.6,1", "fiso=0,0.1,0.2,0.35,0.6,1,1.2") for a in WATSON_GRID]
     + init("ukb", ["th", "ph"]), "sweep"),
    ("watson-fractions", "noddi_watson", ukb, WATSON_LM + init("ukb", ["kappa", "th", "ph"]), "stage"),
    ("bingham-grid", "noddi_bingham", bing,
     ["--method", "grid", "--fixed", "S0,fintra,fiso,th,ph,psi", "--grid", "kappa1=1,2,4,8,16,32,63",
      "--grid", "kappa2=0.5,0.9,1.8,3.6,7,14,28,56"] + init("bingham", BINGHAM_HELD), "model"),
    ("bingham-dispersion", "noddi_bingham", bing,
     ["--method", "lm", "--fixed", "S0,fintra,fiso,th,ph"] + init("bingham", BINGHAM_HELD), "stage"),
    ("watson-dpar-map", "noddi_watson", ukb, WATSON_GRID + init("ukb", ["th", "ph"]) + ["--voxel", f"d_par={dpar}"],
     "model"),
]

for name, model, (data, bvals, bvecs), opts, program in CASES:
    outs, cubins = {}, {}
    for run, device, stage in (("stage", "gpu", "1"), ("model", "gpu", "0"), ("cpu", "cpu", "1")):
        out = os.path.join(d, f"{name}-{run}")
        cache = os.path.join(d, f"cache-{name}-{run}")
        env = dict(os.environ, XDG_CACHE_HOME=cache, DIMOC_STAGE_PROGRAMS=stage)
        p = subprocess.run([DIMOC, "fit", model, "--data", data, "--bvals", bvals, "--bvecs", bvecs,
                            "--out", out, "--quiet", "--device", device, "--out-type", "float64",
                            "--ic", *map(str, opts)], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"{name} {run}: dimoc fit failed: {p.stderr.strip()}")
        outs[run], cubins[run] = out, cached_files(cache, ".cubin")
    ran = ["sweep" if "-sweep-" in c else "stage" if "-stage-" in c else "model" for c in cubins["stage"]]
    check(f"{name}-ran-the-{program}-program", ran == [program], f"GPU programs: {cubins['stage']}")
    params = list(watson if model == "noddi_watson" else bingham)
    grid = "--grid" in opts
    M = len(open(bvals).read().split())
    for other in ("model", "cpu"):
        ref = outs["stage"]
        st1, st0 = load(f"{ref}/status.nii.gz"), load(f"{outs[other]}/status.nii.gz")
        check(f"{name}-statuses-as-{other}", np.array_equal(st1, st0) and np.mean(st1 == 1) >= 0.9,
              f"{int(np.sum(st1 != st0))} voxels differ, {int(np.sum(st1 != 1))} not status 1")
        close, worst = np.ones(N, bool), 0.0
        for k in params:
            a, b = load(f"{ref}/{k}.nii.gz").ravel(), load(f"{outs[other]}/{k}.nii.gz").ravel()
            rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-3)
            worst = max(worst, float(np.max(rel)))
            close &= rel <= 1e-6
        if grid:
            b1, b0 = load(f"{ref}/BIC.nii.gz").ravel(), load(f"{outs[other]}/BIC.nii.gz").ravel()
            cost = np.abs(b1 - b0) / M
            check(f"{name}-estimates-as-{other}", np.mean(close) >= 0.99 and np.max(cost[close]) <= 1e-9,
                  f"{100 * np.mean(close):.2f}% of voxels at the same point, there the worst relative "
                  f"cost difference {np.max(cost[close]):.2g}")
        else:  # the CPU's LM rounds otherwise (no fused multiply-adds): a few paths end apart
            bound = 1e-3 if other == "model" else 0.05
            check(f"{name}-estimates-as-{other}", np.mean(close) >= 0.97 and worst <= bound,
                  f"{100 * np.mean(close):.2f}% of voxels within 1e-6, worst relative difference {worst:.2g}")

finish()
