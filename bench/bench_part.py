#!/usr/bin/env python3
"""Parts benchmark: a whole-brain-sized fit run once, and split into N parts (run one
after another on the same device, as a job array's tasks would run on N nodes) then merged.
Prints per stage (compile, load, fit, write from each run's provenance.json; the merge) the
single run against the parts, the merge's bytes and rate, and checks that every merged file is
byte-identical to the single run's.  Not a test.

  bench/bench_part.py [--parts 4] [--device gpu] [--method lm,mcmc] [--grid 104,104,72]
  DIMOC_BENCH_BIN=path/to/dimoc bench/bench_part.py ...   another build (a version to compare)

The data: a UKB-like protocol (5 b=0, 50 b=1000, 50 b=2000) on a 104 x 104 x 72 grid with an
ellipsoidal mask of about 200k voxels, ball & 2 sticks simulated at SNR 30; the fit writes
bedpostx's 50 samples per parameter (--save-samples), the heavy case for the merge."""
import argparse
import filecmp
import json
import os
import subprocess
import sys
import time

import nibabel as nib
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIMOC = os.environ.get("DIMOC_BENCH_BIN", os.path.join(ROOT, "bin", "dimoc"))


def run(*args):
    t = time.time()
    p = subprocess.run([DIMOC] + [str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"dimoc {' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return time.time() - t


def dataset(folder, shape, seed=7):
    os.makedirs(folder, exist_ok=True)
    bvals, bvecs = f"{folder}/bvals", f"{folder}/bvecs"
    run("scheme", "--shells", "5x0,50x1000,50x2000", "--bvals", bvals, "--bvecs", bvecs)
    rng = np.random.default_rng(seed)
    c = [(np.arange(s) - (s - 1) / 2) / (s / 2) for s in shape]
    x, y, z = np.meshgrid(*c, indexing="ij")
    mask = (x**2 + y**2 + z**2) < 0.97
    n = mask.size
    p = {"S0": np.full(n, 1000.0), "d": rng.uniform(1.0e-3, 2.0e-3, n)}
    left = np.ones(n)
    for i in (1, 2):
        f = rng.uniform(0.1, 0.4, n) * (left > 0.3)
        left -= f
        v = rng.normal(size=(n, 3))
        v /= np.linalg.norm(v, axis=1)[:, None]
        p[f"f{i}"], p[f"th{i}"] = f, np.arccos(np.abs(v[:, 2]))
        p[f"ph{i}"] = np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)
    spec = []
    for k, v in p.items():
        v = v.reshape(shape) * mask
        nib.save(nib.Nifti1Image(v.astype(np.float32), np.eye(4)), f"{folder}/{k}.nii.gz")
        spec.append(f"{k}={folder}/{k}.nii.gz")
    nib.save(nib.Nifti1Image(mask.astype(np.uint8), np.eye(4)), f"{folder}/mask.nii.gz")
    run("simulate", "ball_2_sticks", "--bvals", bvals, "--bvecs", bvecs, "--params", ",".join(spec),
        "--noise", "rician", "--snr", 30, "--seed", seed, "--out", f"{folder}/dwi.nii.gz")
    return int(mask.sum())


def stages(out):
    t = json.load(open(f"{out}/provenance.json"))["timings_seconds"]
    return {k: t.get(k, 0.0) for k in ("compile", "load", "fit", "write", "total")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--method", default="lm,mcmc")
    ap.add_argument("--grid", default="104,104,72")
    ap.add_argument("--work", default=os.path.join(ROOT, "bench", "tmp-part"))
    a = ap.parse_args()
    shape = tuple(int(s) for s in a.grid.split(","))
    data = f"{a.work}/data"
    nmask = dataset(data, shape)
    fit = ["fit", "ball_2_sticks", "--data", f"{data}/dwi.nii.gz", "--mask", f"{data}/mask.nii.gz",
           "--bvals", f"{data}/bvals", "--bvecs", f"{data}/bvecs", "--method", a.method,
           "--save-samples", "--quiet", "--device", a.device]
    run(*fit, "--out", f"{a.work}/warm")  # fills the compile cache: both runs below are warm
    whole = f"{a.work}/whole"
    wall_whole = run(*fit, "--out", whole)
    parts, wall_parts, sum_parts = [], [], dict.fromkeys(("compile", "load", "fit", "write", "total"), 0.0)
    for k in range(1, a.parts + 1):
        p = f"{a.work}/parts/{k}"
        wall_parts.append(run(*fit, "--out", p, "--part", f"{k}/{a.parts}"))
        for s, v in stages(p).items():
            sum_parts[s] += v
        parts.append(p)
    merged = f"{a.work}/merged"
    wall_merge = run("merge", *parts, "--out", merged, "--quiet")
    files = sorted(f for f in os.listdir(whole) if f.endswith(".nii.gz"))
    same = all(filecmp.cmp(f"{whole}/{f}", f"{merged}/{f}", shallow=False) for f in files)
    raw = sum(int(np.prod(nib.load(f"{whole}/{f}").shape)) * nib.load(f"{whole}/{f}").get_data_dtype().itemsize
              for f in files)
    gz_in = sum(os.path.getsize(f"{p}/{f}") for p in parts for f in files)
    gz_out = sum(os.path.getsize(f"{merged}/{f}") for f in files)
    w = stages(whole)
    print(f"# fit ball_2_sticks --method {a.method} --save-samples on {a.device}: grid "
          f"{'x'.join(map(str, shape))}, {nmask} voxels in the mask, {a.parts} parts run one "
          f"after another, {os.cpu_count()} host cores")
    print("| stage | single run (s) | parts, summed (s) | parts / single |")
    print("|---|---|---|---|")
    for s in ("compile", "load", "fit", "write", "total"):
        print(f"| {s} | {w[s]:.2f} | {sum_parts[s]:.2f} | {sum_parts[s] / max(w[s], 1e-9):.2f} |")
    print(f"| wall (command) | {wall_whole:.2f} | {sum(wall_parts):.2f} | "
          f"{sum(wall_parts) / wall_whole:.2f} |")
    print(f"| merge | | {wall_merge:.2f} | {wall_merge / wall_whole:.2f} of the single run |")
    print(f"\nmerge: {len(files)} files; read {gz_in / 1e6:.0f} MB compressed = "
          f"{a.parts * raw / 1e9:.2f} GB inflated ({a.parts * raw / 1e9 / wall_merge:.2f} GB/s), "
          f"wrote {gz_out / 1e6:.0f} MB ({raw / 1e9:.2f} GB raw); "
          f"byte-identical to the single run: {'yes' if same else 'NO'}")
    print(f"longest part: {max(wall_parts):.2f} s: with {a.parts} nodes the job takes "
          f"{max(wall_parts) + wall_merge:.2f} s against {wall_whole:.2f} s on one")


if __name__ == "__main__":
    main()
