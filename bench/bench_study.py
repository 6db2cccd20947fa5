#!/usr/bin/env python3
"""Study benchmark: N synthetic UK-Biobank-sized subjects as a BIDS dataset, processed by one
`dimoc bids ... participant` process against N separate `dimoc pipeline` commands (the peer: the
same pipeline, one process per subject, as a shell loop or a job array runs it), in the same run
on the same host.  Prints subjects per hour for both, their ratio, and per subject its whole time
over its fit's time (from the qc.json of each unit: read, fit, write, total), and where the
time goes: a table of each stage's median load, compile, gpu_start, fit and write (the stages'
provenance.json) for both sides, and each unit's read, plan, stages, finish and write (qc.json)
beside each separate command's whole time.  Not a test.

  bench/bench_study.py [--subjects 20] [--pipeline noddi_watson] [--device gpu|cpu]
                       [--grid 104,104,72] [--work DIR] [--peer-subjects K] [--keep]
                       [--drop-caches]

--peer-subjects K runs the separate commands on the first K subjects only and counts the peer's
time for all N at their rate: a study of many subjects (whose start and last writes weigh less
on each) measured without N separate commands.

A subject: a 104 x 104 x 72 grid at 2 mm (UK Biobank's), 5 b=0 + 50 b=1000 + 50 b=2000, an
ellipsoidal brain of about 216,000 voxels with NODDI-Watson tissue (the neurite density, the
dispersion and the direction varying smoothly across it), Rician noise at SNR 30 with a seed of
its own (`dimoc simulate`), its brain mask in derivatives/ (so both sides fit the same voxels).
The data are written first; with --drop-caches the page cache is emptied before each side (root
only), so that both read from the disk.

The floor of a study is its fits: subjects per hour at most 3600 / (fit seconds per subject).
The target on one H200: 6,000 NODDI-Watson subjects an hour, each subject's whole time
at most 1.2 x its fit."""
import argparse
import glob
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
DIMOC = os.environ.get("DIMOC", os.path.join(ROOT, "bin", "dimoc"))


def run(*args, **kw):
    p = subprocess.run([DIMOC] + [str(a) for a in args], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"dimoc {' '.join(map(str, args[:4]))} ... failed: {p.stderr.strip()[-2000:]}")
    return p


def tissue(shape, rng):
    """Parameter maps of NODDI-Watson in an ellipsoidal brain, and its mask."""
    ax = [np.linspace(-1, 1, n) for n in shape]
    x, y, z = np.meshgrid(*ax, indexing="ij")
    r = np.sqrt((x / 0.85) ** 2 + (y / 0.9) ** 2 + (z / 0.8) ** 2)
    mask = r < 1
    v = np.stack([np.cos(3 * y), np.sin(3 * y) * np.cos(2 * z), np.sin(3 * y) * np.sin(2 * z)], -1)
    v /= np.linalg.norm(v, axis=-1)[..., None]
    v *= np.sign(v[..., 2:3] + 1e-12)
    p = {"S0": np.where(mask, 1000.0, 0.0),
         "fintra": np.clip(0.3 + 0.5 * (1 - r) + 0.05 * rng.standard_normal(shape), 0.05, 0.95),
         "fiso": np.clip(0.05 + 0.3 * r ** 4, 0, 0.9),
         "kappa": 1 + 15 * (0.5 + 0.5 * np.cos(4 * x) * np.cos(3 * z)),
         "th": np.arccos(np.clip(v[..., 2], -1, 1)),
         "ph": np.mod(np.arctan2(v[..., 1], v[..., 0]), 2 * np.pi)}
    return p, mask


def dataset(work, n, shape):
    bids = f"{work}/bids"
    if os.path.exists(f"{bids}/.complete-{n}-{'x'.join(map(str, shape))}"):
        return bids
    shutil.rmtree(bids, ignore_errors=True)
    os.makedirs(f"{work}/maps", exist_ok=True)
    aff = np.diag([2.0, 2.0, 2.0, 1.0])
    p, mask = tissue(shape, np.random.default_rng(1))
    spec = []
    for k, v in p.items():
        nib.save(nib.Nifti1Image(v.astype(np.float32), aff), f"{work}/maps/{k}.nii.gz")
        spec.append(f"{k}={work}/maps/{k}.nii.gz")
    bval, bvec = f"{work}/maps/dwi.bval", f"{work}/maps/dwi.bvec"
    run("scheme", "--shells", "5x0,50x1000,50x2000", "--bvals", bval, "--bvecs", bvec)
    os.makedirs(bids)
    json.dump({"Name": "dimoc bench_study", "BIDSVersion": "1.9.0"},
              open(f"{bids}/dataset_description.json", "w"))
    t = time.time()
    for s in range(1, n + 1):
        sub = f"sub-{s:03d}"
        d = f"{bids}/{sub}/dwi"
        os.makedirs(d)
        run("simulate", "noddi_watson", "--bvals", bval, "--bvecs", bvec, "--params", ",".join(spec),
            "--noise", "rician", "--snr", 30, "--seed", s, "--out", f"{d}/{sub}_dwi.nii.gz")
        shutil.copy(bval, f"{d}/{sub}_dwi.bval")
        shutil.copy(bvec, f"{d}/{sub}_dwi.bvec")
        m = f"{bids}/derivatives/masks/{sub}/dwi"
        os.makedirs(m)
        nib.save(nib.Nifti1Image(mask.astype(np.uint8), aff), f"{m}/{sub}_desc-brain_mask.nii.gz")
    print(f"dataset: {n} subjects of {shape} ({int(mask.sum())} brain voxels), 105 volumes, made in "
          f"{time.time() - t:.1f} s", flush=True)
    json.dump({"Name": "masks", "BIDSVersion": "1.9.0", "DatasetType": "derivative"},
              open(f"{bids}/derivatives/masks/dataset_description.json", "w"))
    open(f"{bids}/.complete-{n}-{'x'.join(map(str, shape))}", "w").close()
    return bids


def drop_caches(on):
    if not on:
        return
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        print(f"note: page cache not dropped ({e})", flush=True)


def separate(bids, out, pipeline, device, n, each=None):
    """The peer: one `dimoc pipeline` per subject; each command's seconds appended to each."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    t = time.time()
    for s in range(1, n + 1):
        sub = f"sub-{s:03d}"
        d = f"{bids}/{sub}/dwi/{sub}_dwi"
        mask = f"{bids}/derivatives/masks/{sub}/dwi/{sub}_desc-brain_mask.nii.gz"
        t0 = time.time()
        run("pipeline", pipeline, "--data", d + ".nii.gz", "--mask", mask, "--bvals", d + ".bval",
            "--bvecs", d + ".bvec", "--out", f"{out}/{sub}", "--device", device)
        if each is not None:
            each.append(time.time() - t0)
    return time.time() - t


def one_process(bids, out, pipeline, device):
    shutil.rmtree(out, ignore_errors=True)
    t = time.time()
    run("bids", bids, out, "participant", "--pipeline", pipeline, "--device", device)
    wall = time.time() - t
    units = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/sub-*/dwi/*_qc.json"))]
    return wall, units


TIMINGS = ("load", "compile", "gpu_start", "fit", "starts_wait", "starts", "write", "total")


def stage_timings(pattern):
    """From the provenance.json files under pattern (one folder per stage; each stage of a
    cascade has its own): {stage: {timing: [seconds, one per subject]}} and {subject: {timing:
    the sum over its stages}}."""
    stages, subjects = {}, {}
    for f in sorted(glob.glob(pattern)):
        prov = json.load(open(f))
        t = prov.get("timings_seconds") or {}
        name = os.path.basename(os.path.dirname(f))
        sub = re.search(r"/(sub-[^/]+)/", f).group(1)
        per = subjects.setdefault(sub, dict.fromkeys(TIMINGS + ("path", "write_path"), 0.0))
        for k in TIMINGS:
            v = float(t.get(k, 0) or 0)
            stages.setdefault(name, {}).setdefault(k, []).append(v)
            per[k] += v
        # On the command's path: its load, compile, GPU start and fit, and the write of the
        # command's last stage (a cascade writes its other stages while the next one fits).
        c = prov.get("cascade") or {}
        last = not c or c.get("stage") == c.get("stages")
        w = float(t.get("write", 0) or 0) if last else 0.0
        per["path"] += sum(float(t.get(k, 0) or 0) for k in ("load", "compile", "gpu_start", "fit")) + w
        per["write_path"] += w
    return stages, subjects


def med(v):
    v = [x for x in v if x is not None]
    return float(np.median(v)) if len(v) else float("nan")


def breakdown(bids_side, sep_side, units, sep_each):
    """Where the time goes: each stage's medians over subjects on both sides, then each unit's
    (bids: qc.json's seconds; separate: the command's wall time) against its stages' sums."""
    (st_b, sub_b), (st_s, sub_s) = bids_side, sep_side
    print("\nper stage, median over subjects, seconds (the stages' provenance.json):")
    print(f"{'stage':14} {'side':9}" + "".join(f"{k:>10}" for k in TIMINGS))
    for name in list(st_s) + [k for k in st_b if k not in st_s]:
        for side, st in (("bids", st_b), ("separate", st_s)):
            if name in st:
                print(f"{name:14} {side:9}" + "".join(f"{med(st[name][k]):10.3f}" for k in TIMINGS))
    print("\nper unit, median over subjects, seconds: the sums over its stages ('path': load, "
          "compile, gpu_start and fit of every stage,\n  and the write of each command's last "
          "stage, the others being written while the next stage fits), then the unit's own")
    print("  bids: qc.json's read (the mask, the wait for the DWI), plan, stages (the plan and "
          "the commands), finish")
    print("  (the closing work) and write (the derivatives), both on the writer thread; "
          "separate: the command's wall")
    print("  time; 'other': what is in neither (bids: dispatch and waits between the commands; "
          "separate: the process's")
    print("  and the driver's start, bash, links, PNGs)")
    sums_of = ("load", "write_path", "fit", "path")
    head = "".join(f"{'sum ' + k.replace('_path', ''):>13}" for k in sums_of)
    print(f"{'side':9}{head}{'read':>8}{'plan':>8}{'stages':>8}{'finish':>8}{'write':>8}"
          f"{'total':>8}{'command':>9}{'other':>8}")
    for side, subs in (("bids", sub_b), ("separate", sub_s)):
        sums = "".join(f"{med([v[k] for v in subs.values()]):13.3f}" for k in sums_of)
        if side == "bids":
            q = {k: med([u["seconds"].get(k) for u in units]) for k in
                 ("read", "plan", "stages", "finish", "write", "total")}
            own = "".join(f"{q[k]:8.3f}" for k in q) + f"{'':>9}" + \
                f"{q['stages'] - q['plan'] - med([v['path'] for v in subs.values()]):8.3f}"
        else:
            cmd = med(sep_each)
            own = f"{'':>48}{cmd:9.3f}{cmd - med([v['path'] for v in subs.values()]):8.3f}"
        print(f"{side:9}{sums}{own}")
    print("(bids 'other': stages - plan - path: dispatch and waits between the commands; "
          "separate: command - path)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--subjects", type=int, default=20)
    ap.add_argument("--pipeline", default="noddi_watson")
    ap.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    ap.add_argument("--grid", default="104,104,72")
    ap.add_argument("--work", default="/tmp/dimoc-bench-study")
    ap.add_argument("--peer-subjects", type=int, default=0,
                    help="run the separate commands on the first K subjects only (0: all); their "
                         "rate is that of the K")
    ap.add_argument("--keep", action="store_true", help="keep the dataset and the outputs")
    ap.add_argument("--drop-caches", action="store_true")
    args = ap.parse_args()
    shape = tuple(int(x) for x in args.grid.split(","))
    n = args.subjects
    bids = dataset(args.work, n, shape)
    # a first subject through both, unmeasured: the fitters compiled into the cache
    warm = f"{args.work}/warm"
    separate(bids, warm, args.pipeline, args.device, 1)
    shutil.rmtree(warm, ignore_errors=True)

    drop_caches(args.drop_caches)
    sep_each = []
    n_sep = args.peer_subjects if 0 < args.peer_subjects < n else n
    t_sep = separate(bids, f"{args.work}/separate", args.pipeline, args.device, n_sep, sep_each)
    t_sep *= n / n_sep  # the peer's time for all n subjects at its rate over the n_sep
    drop_caches(args.drop_caches)
    t_one, units = one_process(bids, f"{args.work}/derivatives", args.pipeline, args.device)
    bids_side = stage_timings(f"{args.work}/derivatives/sub-*/dwi/dimoc/*/dimoc/*/provenance.json")
    sep_side = stage_timings(f"{args.work}/separate/sub-*/dimoc/*/provenance.json")

    fit = np.array([u["seconds"]["fit"] for u in units])
    total = np.array([u["seconds"]["total"] for u in units])
    ratio = total / np.maximum(fit, 1e-9)
    print(f"\nstudy: {n} subjects of {'x'.join(map(str, shape))}, pipeline {args.pipeline}, "
          f"device {args.device}")
    print(f"{'how':34} {'wall s':>8} {'s/subject':>10} {'subjects/h':>11} {'vs separate':>12}")
    peer = f"{n} x dimoc pipeline (peer)" if n_sep == n else f"{n} x dimoc pipeline (peer, {n_sep} run)"
    for how, wall in ((peer, t_sep), ("one dimoc bids process", t_one)):
        print(f"{how:34} {wall:8.2f} {wall / n:10.3f} {3600 * n / wall:11.0f} {t_sep / wall:11.2f}x")
    if len(units):
        floor = 3600 / np.median(fit)
        print(f"{'floor (fits alone)':34} {fit.sum():8.2f} {np.median(fit):10.3f} {floor:11.0f}"
              f"   reached {100 * (3600 * n / t_one) / floor:.0f}%")
        # A subject's whole time in one process is the time it adds to the study: the wall
        # time over the subjects (its reading, closing work and derivatives overlap the others'
        # fits); 'on the path' is what the fits wait for (qc.json's read + stages), and 'alone'
        # each unit's own seconds summed, as if nothing overlapped.
        path = np.array([u["seconds"]["read"] + u["seconds"]["stages"] for u in units])
        print(f"per subject (bids): fit median {np.median(fit):.3f} s; whole (wall / subjects) "
              f"{t_one / n:.3f} s = {t_one / n / np.median(fit):.2f} x fit (target <= 1.2); "
              f"on the path median {np.median(path):.3f} s = {np.median(path / np.maximum(fit, 1e-9)):.2f} x fit; "
              f"alone median {np.median(total):.3f} s = {np.median(ratio):.2f} x fit")
    breakdown(bids_side, sep_side, units, sep_each)
    if not args.keep:
        shutil.rmtree(f"{args.work}/separate", ignore_errors=True)
        shutil.rmtree(f"{args.work}/derivatives", ignore_errors=True)


if __name__ == "__main__":
    main()
