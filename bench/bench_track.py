#!/usr/bin/env python3
"""Tractography benchmark: streamlines per second of `dimoc track` on the CPU (1 thread, all
cores) and on one GPU, for a whole-brain-sized synthetic field, and a dense connectome
(--omatrix1).  Not a test.  Rates are the program's own (tracking only, without loading and
writing); the CPU runs track a random subset of the same seeds (same per-streamline work).

  bench/bench_track.py [--seeds 100000] [--per-seed 100] [--m1-seeds 20000] [--cpu1-seeds 300]
                       [--cases whole,connectome,fod] [--gpu-variants slots=1,slots=4,static]

Case fod (FOD tractography against MRtrix's tckgen, same options, same host): a synthetic
whole-brain FOD image (90 x 108 x 90 voxels of 2 mm, about 200k white-matter voxels with two
fibres: one circling the z axis, one along z), seeds in the white matter, `--fod-select`
streamlines (1M) on one GPU for iFOD2 and iFOD1, fewer on CPU threads and for tckgen on one
thread and on all cores; rates are streamlines per second of the whole command (tckgen has no
stages), with dimoc's own stages (load, compile, tracing, write) from its provenance, and the
work counted: FOD amplitudes evaluated, each at least 8 x 45 multiply-adds of the trilinear
interpolation (fused with the SH sum) plus the basis (about 100 flops).

--gpu-variants reruns each case's GPU run under the scheduling knobs of docs/tracking.md
(DIMOC_TRACK_SLOTS: launches in flight per GPU; DIMOC_TRACK_SCHEDULE=static: no shared
counter) and prints a second table against the default (2 slots, persistent threads).

The field: 90 x 108 x 90 voxels of 2 mm, an ellipsoidal brain; fibre 1 circles the z axis,
fibre 2 runs along z (f 0.45 and 0.25), 50 samples each with 8 degrees of spread."""
import argparse
import json
import os
import subprocess
import sys
import time

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


def sh_basis(d, lmax=8):
    """MRtrix's real SH basis (even l, index l(l+1)/2 + m, Condon-Shortley phase) at unit
    vectors d (n x 3): the associated Legendre recurrence on z, (x + iy)^m for the azimuth."""
    n = len(d)
    out = np.zeros((n, (lmax + 1) * (lmax + 2) // 2))
    x, y, z = d[:, 0], d[:, 1], d[:, 2]
    re, im = np.ones(n), np.zeros(n)
    for m in range(lmax + 1):
        if m:
            re, im = re * x - im * y, re * y + im * x
        q = (-1) ** m * np.sqrt((2 * m + 1) / (4 * np.pi) * np.prod([(2 * k - 1) / (2 * k) for k in range(1, m + 1)]))
        q_prev, q_cur = np.zeros(n), np.full(n, q)
        for l in range(m, lmax + 1):
            if l > m:
                a = np.sqrt((4 * l * l - 1) / (l * l - m * m))
                b = np.sqrt(((l - 1) ** 2 - m * m) / (4 * (l - 1) ** 2 - 1)) if l - 1 > m else 0
                q_prev, q_cur = q_cur, a * (z * q_cur - b * q_prev)
            if l % 2:
                continue
            c = l * (l + 1) // 2
            if m == 0:
                out[:, c] = q_cur
            else:
                out[:, c + m] = np.sqrt(2) * q_cur * re
                out[:, c - m] = np.sqrt(2) * q_cur * im
    return out


def fod_image(d, shape=(90, 108, 90)):
    """The synthetic whole-brain FOD (wm_fod.nii.gz) and its white matter (wm.nii.gz)."""
    if os.path.exists(f"{d}/wm_fod.nii.gz"):
        return f"{d}/wm_fod.nii.gz", f"{d}/wm.nii.gz"
    os.makedirs(d, exist_ok=True)
    aff = np.array([[-2.0, 0, 0, 90], [0, 2, 0, -126], [0, 0, 2, -72], [0, 0, 0, 1]])
    c = (np.array(shape) - 1) / 2
    i, j, k = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    x, y, z = (i - c[0]) / c[0], (j - c[1]) / c[1], (k - c[2]) / c[2]
    wm = x * x + y * y + z * z <= 0.76 ** 2
    idx = np.flatnonzero(wm)
    xs, ys = x.flat[idx], y.flat[idx]
    r = np.maximum(np.hypot(xs, ys), 1e-3)
    circ = np.stack([-ys / r, xs / r, np.zeros_like(r)], 1)
    # world directions: the affine flips x
    circ[:, 0] *= -1
    along = np.tile([0.0, 0, 1], (len(idx), 1))
    smooth = np.repeat([np.exp(-l * (l + 1) * 0.03) for l in range(0, 9, 2)], [2 * l + 1 for l in range(0, 9, 2)])
    lobe = lambda dd: sh_basis(dd) * smooth
    peak = (lobe(np.array([[0.0, 0, 1]])) @ sh_basis(np.array([[0.0, 0, 1]])).T)[0, 0]
    coef = (0.6 * lobe(circ) + 0.4 * lobe(along)) / peak
    data = np.zeros((int(np.prod(shape)), coef.shape[1]), np.float32)
    data[idx] = coef
    nib.save(nib.Nifti1Image(data.reshape(shape + (-1,)), aff), f"{d}/wm_fod.nii.gz")
    nib.save(nib.Nifti1Image(wm.astype(np.float32), aff), f"{d}/wm.nii.gz")
    return f"{d}/wm_fod.nii.gz", f"{d}/wm.nii.gz"


def timed(cmd, env=None):
    t0 = time.time()
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed: {p.stderr.strip()[-400:]}")
    return time.time() - t0


def fod_bench(a, d):
    fod, wm = fod_image(d)
    nwm = int(np.asarray(nib.load(wm).dataobj).sum())
    ncores = os.cpu_count()
    print(f"FOD image: {nwm} white-matter voxels, {ncores} cores", flush=True)
    rows = []
    one = dict(os.environ, OMP_NUM_THREADS="1")
    for alg, tck_alg in (("ifod2", "iFOD2"), ("ifod1", "iFOD1")):
        gpu_n = a.fod_select if alg == "ifod2" else a.fod_select_ifod1
        runs = [("dimoc", "1 GPU", gpu_n, ["--device", "gpu"]),
                ("dimoc", f"{ncores} threads", a.fod_cpu_select, ["--device", "cpu"])]
        for tool, where, n, extra in runs:
            out = f"{d}/fod_{alg}"
            wall = timed([DIMOC, "track", "--fod", fod, "--seed", wm, "--algorithm", alg,
                          "--select", n, "--out", out, "--rseed", 1] + extra)
            prov = json.load(open(f"{out}/provenance.json"))["results"]
            rows.append((alg, tool, where, n, wall, prov))
            print(f"{alg} {tool} {where}: {n} in {wall:.2f} s", flush=True)
        for where, n, threads in (("1 thread", a.tckgen1_select, 1), (f"{ncores} threads", a.fod_cpu_select, ncores)):
            wall = timed(["tckgen", "-quiet", "-force", "-nthreads", threads, fod, f"{d}/tckgen.tck",
                          "-algorithm", tck_alg, "-seed_image", wm, "-select", n])
            rows.append((alg, "tckgen", where, n, wall, None))
            print(f"{alg} tckgen {where}: {n} in {wall:.2f} s", flush=True)
    print()
    print("| algorithm | tool | where | streamlines | wall s | load | compile | tracing | write | streamlines/s | x tckgen 1 thread | x tckgen all cores | GFLOP/s (floor) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for alg in ("ifod2", "ifod1"):
        sel = [r for r in rows if r[0] == alg]
        ref1 = next(r for r in sel if r[1] == "tckgen" and r[2] == "1 thread")
        refn = next(r for r in sel if r[1] == "tckgen" and r[2] != "1 thread")
        r1, rn = ref1[3] / ref1[4], refn[3] / refn[4]
        for _, tool, where, n, wall, prov in sel:
            rate = n / wall
            if prov:
                st = [prov.get(k, 0) for k in ("seconds_load", "seconds_compile", "seconds_tracing", "seconds_write")]
                per_eval = 8 * 45 * 2 + 100 if alg == "ifod2" else 45 * 2 + 100
                gf = prov["fod_amplitudes_evaluated"] * per_eval / max(prov["seconds_tracing"], 1e-9) / 1e9
                stages = " | ".join(f"{v:.2f}" for v in st)
                gfs = f"{gf:,.0f}"
            else:
                stages, gfs = "- | - | - | -", "-"
            print(f"| {alg} | {tool} | {where} | {n:,} | {wall:.2f} | {stages} | {rate:,.0f} | {rate / r1:,.0f}x | {rate / rn:,.1f}x | {gfs} |")


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
    ap.add_argument("--fod-select", type=int, default=1000000)
    ap.add_argument("--fod-select-ifod1", type=int, default=200000,
                    help="iFOD1's GPU run (5x the points of iFOD2's per streamline: 7 GB of .tck for 1M)")
    ap.add_argument("--fod-cpu-select", type=int, default=20000)
    ap.add_argument("--tckgen1-select", type=int, default=1000)
    a = ap.parse_args()
    d = a.work
    if "fod" in a.cases.split(","):
        fod_bench(a, d)
        a.cases = ",".join(c for c in a.cases.split(",") if c != "fod")
        if not a.cases:
            return
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
