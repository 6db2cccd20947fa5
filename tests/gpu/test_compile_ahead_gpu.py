"""A cascade's later stages compiled ahead (make test-gpu): once the first stage has the GPU
open, the programs of the stages after it are compiled on threads of their own, into the
program cache where each stage then finds its program (runtime/fit/fit_run.c's ahead_job).
With an empty cache, `dimoc pipeline noddi_watson` (grid, fractions, final: one `dimoc fit ...
--then`) must report its first stage's program compiled and the later stages' from the cache
(their provenance's device line), each later stage's compile wait below its first stage's, and
give the same maps, value for value, as the same pipeline run again on the filled cache (where
no stage compiles), and in at least 95% of the voxels within 1e-3 of the CPU's."""
import json
import os
import shutil

import numpy as np

from dmtest import check, dimoc_in_cache, finish, load, random_directions, save, workdir

rng = np.random.default_rng(5)
d = workdir("compile_ahead_gpu")
N = 2000


def flat(name, values):
    return save(os.path.join(d, name + ".nii.gz"), np.asarray(values, dtype=float).reshape(-1, 10, 10))


warm_cache = os.path.join(d, "cache-shared")
bvals, bvecs = os.path.join(d, "dwi.bval"), os.path.join(d, "dwi.bvec")
dimoc_in_cache(warm_cache, "scheme", "--shells", "5x0,30x1000,30x2000", "--bvals", bvals, "--bvecs", bvecs)
_, th, ph = random_directions(rng, N)
truth = {"S0": np.full(N, 1000.0), "fintra": rng.uniform(0.2, 0.85, N), "fiso": rng.uniform(0, 0.4, N),
         "kappa": np.exp(rng.uniform(np.log(0.5), np.log(30), N)), "th": th, "ph": ph}
spec = ",".join(f"{k}={flat('truth_' + k, v)}" for k, v in truth.items())
dwi, mask = os.path.join(d, "dwi.nii.gz"), flat("mask", np.ones(N))
p = dimoc_in_cache(warm_cache, "simulate", "noddi_watson", "--bvals", bvals, "--bvecs", bvecs, "--params",
                   spec, "--noise", "rician", "--snr", 30, "--seed", 3, "--out", dwi)
assert p.returncode == 0, p.stderr


def pipeline(cache, out, device):
    shutil.rmtree(out, ignore_errors=True)
    p = dimoc_in_cache(cache, "pipeline", "noddi_watson", "--data", dwi, "--mask", mask, "--bvals", bvals,
                       "--bvecs", bvecs, "--out", out, "--device", device)
    assert p.returncode == 0, p.stderr
    stages = {}
    for s in ("grid", "fractions", "final"):
        prov = json.load(open(os.path.join(out, "dimoc", s, "provenance.json")))
        stages[s] = (prov["device"], prov["timings_seconds"]["compile"])
    return stages


def maps(out):
    return {m: load(os.path.join(out, m + ".nii.gz")) for m in ("fintra", "fiso", "kappa", "OD", "S0")}


cold_cache = os.path.join(d, "cache-cold")
shutil.rmtree(cold_cache, ignore_errors=True)
cold = pipeline(cold_cache, os.path.join(d, "cold"), "gpu")
print("cold cache:", cold)
check("first-stage-compiles", "fitter from cache" not in cold["grid"][0] and cold["grid"][1] > 0,
      f"grid stage: {cold['grid']}")
for s in ("fractions", "final"):
    check(f"{s}-program-compiled-ahead", "fitter from cache" in cold[s][0],
          f"{s}: {cold[s][0]!r} (compile {cold[s][1]:.2f} s)")
    check(f"{s}-waits-less-than-a-compile", cold[s][1] < cold["grid"][1],
          f"{s} waited {cold[s][1]:.2f} s, the grid stage compiled for {cold['grid'][1]:.2f} s")

warm = pipeline(cold_cache, os.path.join(d, "warm"), "gpu")
print("warm cache:", warm)
check("warm-run-compiles-nothing", all("fitter from cache" in v[0] for v in warm.values()), f"{warm}")
a, b = maps(os.path.join(d, "cold")), maps(os.path.join(d, "warm"))
for m in a:
    check(f"{m}-same-as-warm-cache-run", np.array_equal(a[m], b[m], equal_nan=True),
          f"largest difference {np.nanmax(np.abs(a[m] - b[m])):.3g}")

pipeline(warm_cache, os.path.join(d, "cpu"), "cpu")
cpu = maps(os.path.join(d, "cpu"))
for m in ("fintra", "fiso", "OD"):
    close = np.mean(np.abs(a[m] - cpu[m]) <= 1e-3)
    check(f"{m}-gpu-near-cpu", close >= 0.95, f"{close:.3f} of the voxels within 1e-3")
finish()
