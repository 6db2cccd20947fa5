#!/usr/bin/env python3
"""The Python package's fit (dimoc.fit on arrays, python/dimoc) against the command (`dimoc fit`
on files) on the same simulated data, the same threads and device: prints a table of wall
seconds (the median and the least of --repeat runs, interleaved), their ratio to the command's,
and the CPU seconds of each (its process's, or the command's children: steadier than the wall
time on a machine that others share).  Not a test.

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
import resource
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


def cpu_seconds(who):
    u = resource.getrusage(who)
    return u.ru_utime + u.ru_stime


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
        "--params", PARAMS[a.model], "--noise", "rician", "--snr", 30, "--out", "flat.nii.gz")
    b, g = np.loadtxt("bvals"), np.loadtxt("bvecs")
    # an image of slices of 100 x 100 voxels (a flat N x 1 x 1 one is no brain's shape, and
    # beyond 32767 voxels along x NIfTI-1 headers need a hack)
    flat = np.asanyarray(nib.load("flat.nii.gz").dataobj)
    nz = -(-a.voxels // 10000)
    grid = np.zeros((100, 100, nz, b.size), np.float32, order="F")
    view = grid.reshape(-1, b.size, order="F")  # a view of the Fortran-ordered grid
    assert np.shares_memory(view, grid)
    view[:a.voxels] = flat.reshape(-1, b.size, order="F")
    nib.save(nib.Nifti1Image(grid, np.eye(4)), "sim.nii.gz")
    data = np.asanyarray(nib.load("sim.nii.gz").dataobj)
    options = dict(method=a.method, threads=a.threads, device=a.device, progress=False)
    command = ["fit", a.model, "--data", "sim.nii.gz", "--bvals", "bvals", "--bvecs", "bvecs",
               "--method", a.method, "--threads", a.threads, "--device", a.device, "--quiet"]

    def timed(fn, who):
        c, t = cpu_seconds(who), time.perf_counter()
        fit = fn()
        return time.perf_counter() - t, cpu_seconds(who) - c, fit

    def the_command():
        run(*command, "--out", "cli")
        return json.load(open("cli/provenance.json"))["timings_seconds"]["fit"]

    def on_arrays():
        return dimoc.fit(a.model, data, b, g, **options).provenance["timings_seconds"]["fit"]

    def file_to_files():
        r = dimoc.fit(a.model, "sim.nii.gz", b, g, **options)
        r.to_nifti("py")
        return r.provenance["timings_seconds"]["fit"]

    children, me = resource.RUSAGE_CHILDREN, resource.RUSAGE_SELF
    rows = [("dimoc fit (files in, files out)", the_command, children),
            ("dimoc.fit on arrays (Python)", on_arrays, me),
            ("dimoc.fit file -> to_nifti (Python)", file_to_files, me)]
    for _, fn, _ in rows:  # the fitter compiled and cached, the files warm
        fn()
    times = {name: [] for name, _, _ in rows}
    for _ in range(a.repeat):  # interleaved: a slower minute hits every row alike
        for name, fn, who in rows:
            times[name].append(timed(fn, who))
    M = b.size
    print(f"{a.model}, {a.voxels} voxels x {M} measurements, --method {a.method}, "
          f"{a.threads} threads, {a.device}; {a.repeat} runs each")
    print(f"{'':38s} {'median s':>9s} {'ratio':>6s} {'least s':>8s} {'ratio':>6s} "
          f"{'fit s':>7s} {'cpu s':>7s} {'ratio':>6s}")
    med = {n: [statistics.median(x[k] for x in times[n]) for k in range(3)] for n in times}
    low = {n: min(x[0] for x in times[n]) for n in times}
    base = rows[0][0]
    for name, _, _ in rows:
        wall, cpu, fit = med[name]
        print(f"{name:38s} {wall:9.3f} {wall / med[base][0]:6.3f} {low[name]:8.3f} "
              f"{low[name] / low[base]:6.3f} {fit:7.3f} {cpu:7.3f} {cpu / med[base][1]:6.3f}")


if __name__ == "__main__":
    main()
