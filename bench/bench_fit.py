#!/usr/bin/env python3
"""Fitting benchmark: prints a table of time per phase, voxels/s, signal evaluations/s and
achieved GFLOP/s for GPU runs, with the CPU backend of the same host as the baseline measured in
the same run.  Not a test.

  bench/bench_fit.py [--voxels 200000] [--cpu-voxels 4000] [--workloads ukb_b2s,hcp_b3s]
                     [--precisions float,double] [--lanes auto] [--gpus 0] [--cold]

Datasets are made with `dimoc simulate`: UKB-like (5 b=0, 50 b=1000, 50 b=2000; 105
measurements) and HCP-like (18 b=0, 90 each at b=1000, 2000, 3000; 288 measurements).  FLOP
counts come from the compiler (flops of one signal / gradient evaluation) times the evaluations
the run made (provenance.json); the ceilings are the rates measured on an H200 (docs/performance.md).
"% floor" (float GPU rows): the counted floor's time over the fit's -- each signal evaluation's
operations at the FP32 FMA rate or its transcendental ones (`dimoc info`) at the __expf rate,
whichever is longer (docs/performance.md, "Floor").  --cold: every run in an empty compile cache of
its own and with the driver's (~/.nv/ComputeCache, which NVRTC also reuses) disabled, so that
"compile" is the cold compile on every row."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import nibabel as nib
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIMOC = os.path.join(ROOT, "bin", "dimoc")
CEILING_GFLOPS = {"float": 56700.0, "double": 33200.0}  # FMA rates measured on an H200
EXPF_PER_SECOND = 3.9e12  # __expf, measured on an H200 (docs/performance.md)
WORKLOADS = {
    "ukb_b2s": ("ball_2_sticks", "5x0,50x1000,50x2000", 2),
    "hcp_b3s": ("ball_3_sticks", "18x0,90x1000,90x2000,90x3000", 3),
}


COLD_ENV = None  # --cold: the environment of every run (set in main)


def run(*args):
    t = time.time()
    env = None
    if COLD_ENV is not None:
        shutil.rmtree(COLD_ENV["XDG_CACHE_HOME"], ignore_errors=True)
        env = COLD_ENV
    p = subprocess.run([DIMOC] + [str(a) for a in args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"dimoc {' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return time.time() - t


def signal_ops(model):
    """(operations, transcendental ones) of one signal evaluation, from `dimoc info`."""
    out = subprocess.run([DIMOC, "info", model], capture_output=True, text=True, check=True).stdout
    m = re.search(r"signal (\d+) operations \((\d+) transcendental\)", out)
    return int(m.group(1)), int(m.group(2))


def floor_seconds(model, evaluations):
    ops, transc = signal_ops(model)
    return max(evaluations * ops / (CEILING_GFLOPS["float"] * 1e9), evaluations * transc / EXPF_PER_SECOND)


def dataset(folder, model, shells, nfib, n, seed):
    os.makedirs(folder, exist_ok=True)
    bvals, bvecs = f"{folder}/bvals", f"{folder}/bvecs"
    run("scheme", "--shells", shells, "--bvals", bvals, "--bvecs", bvecs)
    rng = np.random.default_rng(seed)
    shape = (n // 200, 10, 20) if n >= 200 else (n, 1, 1)
    n = int(np.prod(shape))
    p = {"S0": np.full(n, 1000.0), "d": rng.uniform(1.0e-3, 2.0e-3, n)}
    left = np.ones(n)
    for i in range(1, nfib + 1):
        f = rng.uniform(0.1, 0.4, n) * (left > 0.3)
        left -= f
        v = rng.normal(size=(n, 3))
        v /= np.linalg.norm(v, axis=1)[:, None]
        p[f"f{i}"], p[f"th{i}"], p[f"ph{i}"] = f, np.arccos(np.abs(v[:, 2])), np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)
    spec = []
    for k, v in p.items():
        nib.save(nib.Nifti1Image(v.reshape(shape).astype(np.float32), np.eye(4)), f"{folder}/{k}.nii.gz")
        spec.append(f"{k}={folder}/{k}.nii.gz")
    run("simulate", model, "--bvals", bvals, "--bvecs", bvecs, "--params", ",".join(spec), "--noise",
        "rician", "--snr", 30, "--seed", seed, "--out", f"{folder}/dwi.nii.gz")
    return ["--data", f"{folder}/dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs], n


def fit(model, data, out, device, precision, extra, nvrtc=""):
    os.environ["DIMOC_NVRTC_OPTIONS"] = nvrtc
    wall = run("fit", model, *data, "--method", "lm,mcmc", "--device", device, "--precision", precision,
               "--out", out, "--quiet", *extra)
    prov = json.load(open(f"{out}/provenance.json"))
    return wall, prov


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--voxels", type=int, default=200000)
    ap.add_argument("--cpu-voxels", type=int, default=4000)
    ap.add_argument("--workloads", default="ukb_b2s")
    ap.add_argument("--precisions", default="float,double")
    ap.add_argument("--lanes", default="auto")
    ap.add_argument("--gpus", default="0")
    ap.add_argument("--work", default="/tmp/dimoc-bench")
    ap.add_argument("--nvrtc-variants", default="", help="';'-separated extra NVRTC options to compare")
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU baseline")
    ap.add_argument("--cold", action="store_true", help="every run compiles cold (empty caches)")
    args = ap.parse_args()
    global COLD_ENV
    if args.cold:
        COLD_ENV = dict(os.environ, XDG_CACHE_HOME=f"{args.work}/cold-cache", CUDA_CACHE_DISABLE="1")
    rows = []
    for w in args.workloads.split(","):
        model, shells, nfib = WORKLOADS[w]
        data, n = dataset(f"{args.work}/{w}", model, shells, nfib, args.voxels, 1)
        if not args.no_cpu:
            cdata, cn = dataset(f"{args.work}/{w}_cpu", model, shells, nfib, args.cpu_voxels, 2)
        for prec in args.precisions.split(","):
            cpu_rate = float("nan")
            if not args.no_cpu:
                wall, prov = fit(model, cdata, f"{args.work}/out_cpu", "cpu", prec, [])
                rows.append((w, cn, "cpu, all cores", prec, "-", prov))
                cpu_rate = prov["voxels"]["per_second"]
            for gpus in args.gpus.split(";"):
                for lanes in args.lanes.split(","):
                    for nv in [""] + [v for v in args.nvrtc_variants.split(";") if v]:
                        extra = ["--gpus", gpus] + ([] if lanes == "auto" else ["--lanes", lanes])
                        wall, prov = fit(model, data, f"{args.work}/out_gpu", "gpu", prec, extra, nv)
                        prov["_vs_cpu"] = prov["voxels"]["per_second"] / cpu_rate
                        label = f"gpu {gpus}" + (f" {nv.replace('--maxrregcount=', 'r')}" if nv else "")
                        prov["_model"] = model
                        rows.append((w, n, label, prec, lanes, prov))
    print(f"{'workload':9} {'voxels':>7} {'device':15} {'prec':6} {'lanes':5} {'compile':>7} {'load':>6} "
          f"{'gpu up':>6} {'fit':>7} {'write':>6} {'vox/s':>9} {'Geval/s':>8} {'GFLOP/s':>8} {'%peak':>6} {'%floor':>6} "
          f"{'x CPU':>7}")
    for w, n, dev, prec, lanes, prov in rows:
        t, work = prov["timings_seconds"], prov["work"]
        gf = work["gflop_per_second"]
        floor = float("nan")
        if "_model" in prov and prec == "float":
            floor = 100 * floor_seconds(prov["_model"], work["signal_evaluations"]) / t["fit"]
        print(f"{w:9} {n:7d} {dev:15} {prec:6} {lanes:5} {t['compile']:7.2f} {t['load']:6.2f} "
              f"{t.get('gpu_start', 0.0):6.2f} {t['fit']:7.2f} "
              f"{t['write']:6.2f} {prov['voxels']['per_second']:9.0f} {work['signal_evaluations'] / t['fit'] / 1e9:8.2f} "
              f"{gf:8.1f} {100 * gf / CEILING_GFLOPS[prec]:6.2f} {floor:6.1f} {prov.get('_vs_cpu', 1.0):7.1f}")
    print("(device strings:)")
    for w, n, dev, prec, lanes, prov in rows:
        print(f"  {w} {prec} {lanes}: {prov['device']}")


if __name__ == "__main__":
    main()
