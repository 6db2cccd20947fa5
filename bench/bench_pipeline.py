#!/usr/bin/env python3
"""Cascade benchmark: times a shipped pipeline (`dimoc pipeline NAME`) on a UK-Biobank-like
dataset (5 b=0, 50 b=1000, 50 b=2000) made with `dimoc simulate`, on the GPU and, for a
subset of the voxels, on the CPU of the same host.  Prints, per device, the wall time of the
whole cascade and the sum of its fits' phases (compile and the wait for the GPU's start apart)
from their provenance files, and "% floor": the stages' counted floor (bench_fit.py's: each signal
evaluation's operations at the FP32 FMA rate or its transcendental ones at the __expf rate,
whichever is longer) over their fits' time.

  bench/bench_pipeline.py [--pipeline noddi_watson] [--voxels 200000] [--cpu-voxels 2000]"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import nibabel as nib
import numpy as np

from bench_fit import floor_seconds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIMOC = os.path.join(ROOT, "bin", "dimoc")


def run(*args):
    p = subprocess.run([DIMOC] + [str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"dimoc {' '.join(map(str, args[:3]))} ... failed: {p.stderr.strip()[-2000:]}")


def params(model, n, rng):
    v = rng.normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1)[:, None]
    p = {"S0": np.full(n, 1000.0), "fintra": rng.uniform(0.3, 0.8, n), "fiso": rng.uniform(0, 0.3, n),
         "th": np.arccos(np.abs(v[:, 2])), "ph": np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)}
    if model == "noddi_watson":
        p["kappa"] = rng.uniform(1, 16, n)
    else:
        p["kappa1"] = rng.uniform(4, 16, n)
        p["kappa2"] = p["kappa1"] * rng.uniform(0.3, 1.0, n)
        p["psi"] = rng.uniform(0, np.pi, n)
    return p


def dataset(folder, model, n, seed):
    os.makedirs(folder, exist_ok=True)
    bvals, bvecs = f"{folder}/bvals", f"{folder}/bvecs"
    run("scheme", "--shells", "5x0,50x1000,50x2000", "--bvals", bvals, "--bvecs", bvecs)
    shape = (n // 200, 10, 20) if n >= 200 else (n, 1, 1)
    n = int(np.prod(shape))
    spec = []
    for k, v in params(model, n, np.random.default_rng(seed)).items():
        nib.save(nib.Nifti1Image(v.reshape(shape).astype(np.float32), np.eye(4)), f"{folder}/{k}.nii.gz")
        spec.append(f"{k}={folder}/{k}.nii.gz")
    nib.save(nib.Nifti1Image(np.ones(shape, np.float32), np.eye(4)), f"{folder}/mask.nii.gz")
    run("simulate", model, "--bvals", bvals, "--bvecs", bvecs, "--params", ",".join(spec), "--noise",
        "rician", "--snr", 30, "--seed", seed, "--out", f"{folder}/dwi.nii.gz")
    return [f"{folder}/dwi.nii.gz", f"{folder}/mask.nii.gz", bvals, bvecs], n


def cascade(name, data, out, device):
    t = time.time()
    dwi, mask, bvals, bvecs = data
    run("pipeline", name, "--data", dwi, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs, "--out", out,
        "--device", device)
    wall = time.time() - t
    phases = {"compile": 0.0, "load": 0.0, "gpu_start": 0.0, "fit": 0.0, "write": 0.0, "floor": 0.0}
    steps = 0
    for f in sorted(glob.glob(f"{out}/**/provenance.json", recursive=True)):
        prov = json.load(open(f))
        t = dict(prov["timings_seconds"])
        steps += 1
        # a stage without a compiled fitter (dti) has no compile; the first GPU stage's wait for
        # the driver and the context (gpu_start) is apart from its fit
        if "work" in prov and isinstance(prov.get("model"), dict):
            t["floor"] = floor_seconds(prov["model"]["name"], prov["work"]["signal_evaluations"])
        for k in phases:
            phases[k] += t.get(k, 0.0)
        on_gpu = device == "gpu" and t.get("floor") and t.get("fit")  # the floor is an H200's
        share = f" ({100 * t['floor'] / t['fit']:.1f}% floor)" if on_gpu else ""
        print(f"  {device} {os.path.basename(os.path.dirname(f)):12} " +
              " ".join(f"{k} {t.get(k, 0.0):6.2f}" for k in phases if k != "floor") + share, flush=True)
    return wall, phases, steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", default="noddi_watson")
    ap.add_argument("--model", default=None, help="generating model (default: the pipeline's)")
    ap.add_argument("--voxels", type=int, default=200000)
    ap.add_argument("--cpu-voxels", type=int, default=2000)
    ap.add_argument("--work", default="/tmp/dimoc-bench-pipeline")
    args = ap.parse_args()
    model = args.model or args.pipeline
    rows = []
    for device, n in (("gpu", args.voxels), ("cpu", args.cpu_voxels)):
        if n <= 0:
            continue
        data, n = dataset(f"{args.work}/{device}", model, n, 3)
        # twice: the first run fills the fitter cache (its compiles cold unless cached before), the
        # second is the command a user runs every day (the whole command, the cache warm)
        for run_label in ("first", "again"):
            shutil.rmtree(f"{args.work}/{device}/out", ignore_errors=True)
            wall, ph, steps = cascade(args.pipeline, data, f"{args.work}/{device}/out", device)
            rows.append((f"{device} {run_label}", n, wall, ph, steps))
    print(f"{'pipeline':14} {'device':9} {'voxels':>7} {'steps':>5} {'wall s':>8} {'compile':>8} {'load':>6} "
          f"{'gpu up':>6} {'fit':>7} {'write':>6} {'vox/s (fit)':>12} {'%floor':>6}")
    for device, n, wall, ph, steps in rows:
        print(f"{args.pipeline:14} {device:9} {n:7d} {steps:5d} {wall:8.2f} {ph['compile']:8.2f} {ph['load']:6.2f} "
              f"{ph['gpu_start']:6.2f} {ph['fit']:7.2f} {ph['write']:6.2f} {n / ph['fit'] if ph['fit'] else float('nan'):12.0f}"
              f" {100 * ph['floor'] / ph['fit'] if ph['fit'] and device.startswith('gpu') else float('nan'):6.1f}"
              f"  (whole / fit {wall / ph['fit'] if ph['fit'] else float('nan'):.2f})")


if __name__ == "__main__":
    main()
