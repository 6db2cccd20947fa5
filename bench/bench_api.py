#!/usr/bin/env python3
"""The Python package's fit (dimoc.fit on arrays, python/dimoc) against the command (`dimoc fit`
on files) on the same simulated data, the same threads and device: prints a table of seconds
(the median of --repeat runs) and the ratio to the command.  Not a test.

  bench/bench_api.py [--voxels 200000] [--model ball_1_stick] [--shells 5x0,50x1000,50x2000]
                     [--method lm] [--threads N] [--device cpu] [--repeat 3]

Rows: the command (reads the NIfTI image, fits, writes the maps); dimoc.fit on the array in
memory (what a Python pipeline does between its own steps); dimoc.fit from the file to the
files (nibabel's read, the fit, FitResult.to_nifti), the command's job done from Python.  "fit"
is the engine's own time (provenance.json's timings_seconds.fit) of the same run: the two
drive one engine, so it is the same up to noise, and the rest is each side's overhead.  The
fitter is compiled (and cached) by a first run that is not timed."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIMOC = os.path.join(ROOT, "bin", "dimoc")
sys.path.insert(0, os.path.join(ROOT, "python"))
import dimoc  # noqa: E402  (the source tree's package and library)

PARAMS = {"ball_1_stick": "S0=1000,d=1.5e-3,f1=0.5,th1=1.0,ph1=2.0",
          "ball_2_sticks": "S0=1000,d=1.5e-3,f1=0.4,th1=1.0,ph1=2.0,f2=0.2,th2=0.5,ph2=0.3",
          "dti": "S0=1000,l11=0.04,l21=0.0,l22=0.03,l31=0.0,l32=0.0,l33=0.02"}


def run(*args):
    p = subprocess.run([DIMOC, *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"dimoc {' '.join(map(str, args))}: {p.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--voxels", type=int, default=200000)
    ap.add_argument("--model", default="ball_1_stick", choices=sorted(PARAMS))
    ap.add_argument("--shells", default="5x0,50x1000,50x2000")
    ap.add_argument("--method", default="lm")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu", "auto"))
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import nibabel as nib

    work = tempfile.mkdtemp(prefix="bench_api.")
    os.chdir(work)
    run("scheme", "--shells", a.shells, "--bvals", "bvals", "--bvecs", "bvecs")
    run("simulate", a.model, "--bvals", "bvals", "--bvecs", "bvecs", "--voxels", a.voxels,
        "--params", PARAMS[a.model], "--noise", "rician", "--snr", 30, "--out", "sim.nii.gz")
    b, g = np.loadtxt("bvals"), np.loadtxt("bvecs")
    data = np.asanyarray(nib.load("sim.nii.gz").dataobj)
    options = dict(method=a.method, threads=a.threads, device=a.device, progress=False)
    command = ["fit", a.model, "--data", "sim.nii.gz", "--bvals", "bvals", "--bvecs", "bvecs",
               "--method", a.method, "--threads", a.threads, "--device", a.device, "--quiet"]

    def the_command():
        t = time.perf_counter()
        run(*command, "--out", "cli")
        wall = time.perf_counter() - t
        return wall, json.load(open("cli/provenance.json"))["timings_seconds"]["fit"]

    def on_arrays():
        t = time.perf_counter()
        r = dimoc.fit(a.model, data, b, g, **options)
        return time.perf_counter() - t, r.provenance["timings_seconds"]["fit"]

    def file_to_files():
        t = time.perf_counter()
        r = dimoc.fit(a.model, "sim.nii.gz", b, g, **options)
        r.to_nifti("py", affine=np.eye(4))
        return time.perf_counter() - t, r.provenance["timings_seconds"]["fit"]

    rows = [("dimoc fit (files in, files out)", the_command),
            ("dimoc.fit on arrays (Python)", on_arrays),
            ("dimoc.fit file -> to_nifti (Python)", file_to_files)]
    for _, fn in rows:  # the fitter compiled and cached, the files warm
        fn()
    times = {name: [] for name, _ in rows}
    for _ in range(a.repeat):  # interleaved: a slower minute hits every row alike
        for name, fn in rows:
            times[name].append(fn())
    M = b.size
    print(f"{a.model}, {a.voxels} voxels x {M} measurements, --method {a.method}, "
          f"{a.threads} threads, {a.device}; median of {a.repeat}")
    print(f"{'':40s} {'seconds':>9s} {'ratio':>7s} {'fit':>9s} {'other':>8s}")
    base = statistics.median(t for t, _ in times[rows[0][0]])
    for name, _ in rows:
        wall = statistics.median(t for t, _ in times[name])
        fit = statistics.median(f for _, f in times[name])
        print(f"{name:40s} {wall:9.3f} {wall / base:7.3f} {fit:9.3f} {wall - fit:8.3f}")


if __name__ == "__main__":
    main()
