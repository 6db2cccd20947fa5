#!/usr/bin/env python3
"""Tractography benchmark: streamlines per second of `dimoc track` on the CPU (1 thread, all
cores) and on one GPU, for a whole-brain-sized synthetic field, and a dense connectome
(--omatrix1).  Not a test.  Rates are the program's own (tracking only, without loading and
writing); the CPU runs track a random subset of the same seeds (same per-streamline work).

  bench/bench_track.py [--seeds 100000] [--per-seed 100] [--m1-seeds 20000] [--cpu1-seeds 300]
                       [--cases whole,connectome] [--gpu-variants slots=1,slots=4,static]

--gpu-variants reruns each case's GPU run under the scheduling knobs of docs/tracking.md
(DIMOC_TRACK_SLOTS: launches in flight per GPU; DIMOC_TRACK_SCHEDULE=static: no shared
counter) and prints a second table against the default (2 slots, persistent threads).

The field: 90 x 108 x 90 voxels of 2 mm, an ellipsoidal brain; fibre 1 circles the z axis,
fibre 2 runs along z (f 0.45 and 0.25), 50 samples each with 8 degrees of spread."""
import argparse
import os
import subprocess
import sys

import nibabel as nib
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIMOC = os.path.join(ROOT, "bin", "dimoc")


def track(*args, env=None):
    p = subprocess.run([DIMOC, "track"] + [str(a) for a in args], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if p.returncode != 0:
        sys.exit(f"dimoc track failed: {p.stderr.strip()}")
    line = p.stdout.splitlines()[0]
    merge = [l for l in p.stdout.splitlines() if "merging matrix keys" in l]
    return float(line.split("streamlines/s")[0].split(",")[-1]), line + ("\n" + merge[0] if merge else "")


def variant_env(v):
    if v == "static":
        return {"DIMOC_TRACK_SCHEDULE": "static"}
    if v.startswith("slots="):
        return {"DIMOC_TRACK_SLOTS": v[6:]}
    sys.exit(f"unknown --gpu-variants entry '{v}'")


def field(d, shape=(90, 108, 90), ns=50, seed=3):
    if os.path.exists(f"{d}/nodif_brain_mask.nii"):
        return
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    aff = np.diag([2.0, 2, 2, 1])
    c = (np.array(shape) - 1) / 2
    i, j, k = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    x, y, z = (i - c[0]) / c[0], (j - c[1]) / c[1], (k - c[2]) / c[2]
    brain = x * x + y * y + z * z <= 0.95
    r = np.maximum(np.hypot(x, y), 1e-3)
    d1 = np.stack([-y / r, x / r, np.zeros_like(r)], -1).astype(np.float32)
    d2 = np.zeros(shape + (3,), np.float32)
    d2[..., 2] = 1
    for n, (dd, f) in enumerate([(d1, 0.45), (d2, 0.25)], 1):
        th = np.empty(shape + (ns,), np.float32)
        ph = np.empty(shape + (ns,), np.float32)
        for s in range(ns):  # FSL frame: x reversed for this positive-determinant affine
            v = dd + rng.normal(scale=np.radians(8), size=dd.shape).astype(np.float32)
            v /= np.linalg.norm(v, axis=-1, keepdims=True)
            th[..., s] = np.arccos(np.clip(v[..., 2], -1, 1))
            ph[..., s] = np.arctan2(v[..., 1], -v[..., 0])
        for name, a in ((f"th{n}", th), (f"ph{n}", ph), (f"f{n}", np.full(shape + (ns,), f, np.float32))):
            nib.save(nib.Nifti1Image(a * brain[..., None], aff), f"{d}/merged_{name}samples.nii")
    nib.save(nib.Nifti1Image(brain.astype(np.float32), aff), f"{d}/nodif_brain_mask.nii")


def seeds(d, name, n, seed):
    mask = np.asarray(nib.load(f"{d}/nodif_brain_mask.nii").dataobj) > 0
    idx = np.flatnonzero(mask)
    pick = np.random.default_rng(seed).choice(idx, n, replace=False)
    s = np.zeros(mask.shape, np.float32)
    s.flat[pick] = 1
    path = f"{d}/{name}.nii.gz"
    nib.save(nib.Nifti1Image(s, np.diag([2.0, 2, 2, 1])), path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100000)
    ap.add_argument("--per-seed", type=int, default=100)
    ap.add_argument("--m1-seeds", type=int, default=20000)
    ap.add_argument("--cpu1-seeds", type=int, default=300)
    ap.add_argument("--cpu-seeds", type=int, default=3000)
    ap.add_argument("--work", default=os.path.join(ROOT, "tests", "tmp", "bench_track"))
    ap.add_argument("--cases", default="whole,connectome", help="comma list: whole, connectome")
    ap.add_argument("--gpu-variants", default="", help="comma list: slots=N, static")
    a = ap.parse_args()
    d = a.work
    field(d)
    ncores = os.cpu_count()
    rows, vrows = [], []
    variants = [v for v in a.gpu_variants.split(",") if v]
    P = a.per_seed
    known = {"whole": ("whole brain", []), "connectome": ("dense connectome", ["--omatrix1"])}
    cases = [known[c] for c in a.cases.split(",")]
    for case, extra in cases:
        nseed = a.seeds if not extra else a.m1_seeds
        full = seeds(d, f"seeds_{len(extra)}", nseed, 1)
        few = seeds(d, f"few_{len(extra)}", min(a.cpu1_seeds, nseed), 2)
        some = seeds(d, f"some_{len(extra)}", min(a.cpu_seeds, nseed), 2)
        base = ["--samples", d, "-P", P, "--opd", "--rseed", 1] + extra
        r1, l1 = track(*base, "--seed", few, "--out", f"{d}/o1", "--device", "cpu", "--threads", 1)
        rn, ln = track(*base, "--seed", some, "--out", f"{d}/on", "--device", "cpu")
        rg, lg = track(*base, "--seed", full, "--out", f"{d}/og", "--device", "gpu")
        for l in (l1, ln, lg):
            print(l, flush=True)
        rows.append((case, nseed, r1, rn, rg))
        for v in variants:
            rv, lv = track(*base, "--seed", full, "--out", f"{d}/ov", "--device", "gpu", env=variant_env(v))
            print(f"[{v}] {lv}", flush=True)
            vrows.append((case, v, rv, rg))
    print()
    print(f"| case | seeds x P (GPU) | CPU 1 thread /s | CPU {ncores} threads /s | 1 GPU /s | GPU / 1 thread | GPU / {ncores} threads |")
    print("|---|---|---|---|---|---|---|")
    for case, n, r1, rn, rg in rows:
        print(f"| {case} | {n} x {P} | {r1:,.0f} | {rn:,.0f} | {rg:,.0f} | {rg / r1:,.0f}x | {rg / rn:,.1f}x |")
    if vrows:
        print()
        print("| case | GPU variant | streamlines/s | against default (2 slots, persistent) |")
        print("|---|---|---|---|")
        for case, v, rv, rg in vrows:
            print(f"| {case} | {v} | {rv:,.0f} | {rv / rg:.2f}x |")


if __name__ == "__main__":
    main()
