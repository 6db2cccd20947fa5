#!/usr/bin/env python3
"""dimoc's NODDI-Watson against AMICO's NODDI (PyPI dmri-amico), on CPUs, on simulated data of
known truth.

The data: `dimoc simulate noddi_watson` on N voxels (default 2000, an N x 1 x 1 image) with
fintra ~ U(0.2, 0.9), fiso ~ U(0, 0.4), kappa log-uniform in [0.5, 30] (OD 0.02 to 0.71), S0
1000, orientations uniform on the sphere; 6 b=0 volumes and shells of 30, 60 and 90 random
directions at b = 1000, 2000, 3000 s/mm^2 (--shells to change it); Rician noise at SNR 25
(sigma = S0 / 25).  Every tool runs as a subprocess and is charged the CPU time (user + sys) of
its whole process tree (resource.getrusage(RUSAGE_CHILDREN) before and after):

  amico        AMICO 2's NODDI (dPar 1.7e-3, dIso 3e-3, its default grids), nthreads and
               BLAS threads as --threads, its kernels generated in a fresh folder: kernel
               generation (setup, generate_kernels, load_kernels) and fit timed apart inside
               the process, the total charged as above;
  dimoc --fast `dimoc pipeline noddi_watson --fast --threads T` (the tensor start, the dictionary
               fit), its fitter compiled once beforehand (as AMICO caches its kernels: the
               first run is timed too and reported as "compile");
  dimoc        the normal cascade `dimoc pipeline noddi_watson --threads T`, for reference.

Conventions: AMICO's NDI is the intra-neurite fraction of the non-free-water signal (dimoc's
fintra), FWF its free-water fraction (fiso), ODI = 2/pi atan(1/kappa) (dimoc's OD output).
Prints a table: tool, CPU s (kernels or compile, fit, total), wall s, MAE of fintra, fiso, OD.

usage: bench/bench_amico.py [--voxels N] [--threads T] [--snr S] [--seed K] [--no-normal]
       [--work DIR] [--dimoc bin/dimoc] [--python /usr/bin/python3]
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import nibabel as nib
import numpy as np

AMICO_RUNNER = r"""
import sys, time
import amico
work, out, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
amico.util.set_verbose(1)
t0 = time.process_time()
amico.core.setup()
amico.util.fsl2scheme(work + "/bvals", work + "/bvecs", out + "/amico.scheme")
ae = amico.Evaluation(study_path=out, subject=".", output_path=out + "/maps")
ae.set_config("nthreads", threads)
ae.set_config("BLAS_nthreads", threads)
ae.load_data(work + "/dwi.nii.gz", out + "/amico.scheme", mask_filename=work + "/mask.nii.gz",
             b0_thr=0)
ae.set_model("NODDI")
ae.generate_kernels(regenerate=True)
ae.load_kernels()
t1 = time.process_time()
ae.fit()
ae.save_results()
t2 = time.process_time()
print("AMICO_TIMES", t1 - t0, t2 - t1)
"""


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd):
    """Runs cmd; (CPU s of its process tree, wall s, stdout)."""
    c0, t0 = cpu_children(), time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"bench_amico: {' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return cpu_children() - c0, time.time() - t0, p.stdout


def simulate(args, work, rng):
    n = args.voxels
    counts = [int(c) for c in args.shells.split(",")]
    bs = [1000 * (i + 1) for i in range(len(counts))]

    def dirs(k):
        v = rng.normal(size=(k, 3))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    b = np.concatenate([np.zeros(6)] + [np.full(c, bb) for c, bb in zip(counts, bs)])
    g = np.concatenate([np.zeros((6, 3))] + [dirs(c) for c in counts])
    np.savetxt(os.path.join(work, "bvals"), b[None], fmt="%g")
    np.savetxt(os.path.join(work, "bvecs"), g.T, fmt="%.8f")
    v = dirs(n)
    v[v[:, 2] < 0] *= -1
    truth = {"S0": np.full(n, 1000.0), "fintra": rng.uniform(0.2, 0.9, n),
             "fiso": rng.uniform(0, 0.4, n),
             "kappa": np.exp(rng.uniform(np.log(0.5), np.log(30), n)),
             "th": np.arccos(v[:, 2]), "ph": np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)}
    params = []
    for k, val in truth.items():
        path = os.path.join(work, f"true_{k}.nii.gz")
        nib.save(nib.Nifti1Image(val.reshape(n, 1, 1), np.eye(4)), path)
        params.append(f"{k}={path}")
    nib.save(nib.Nifti1Image(np.ones((n, 1, 1), np.uint8), np.eye(4)),
             os.path.join(work, "mask.nii.gz"))
    run([args.dimoc, "simulate", "noddi_watson", "--bvals", os.path.join(work, "bvals"),
         "--bvecs", os.path.join(work, "bvecs"), "--params", ",".join(params), "--noise",
         "rician", "--snr", str(args.snr), "--seed", str(args.seed), "--out",
         os.path.join(work, "dwi.nii.gz")])
    truth["OD"] = 2 / np.pi * np.arctan(1 / truth["kappa"])
    return truth


def load(path):
    return np.asarray(nib.load(path).dataobj, dtype=np.float64).ravel()


def mae(est, truth):
    return {k: float(np.mean(np.abs(est[k] - truth[k]))) for k in ("fintra", "fiso", "OD")}


def run_amico(args, work, truth):
    out = os.path.join(work, "amico")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    runner = os.path.join(work, "run_amico.py")
    with open(runner, "w") as f:
        f.write(AMICO_RUNNER)
    cpu, wall, text = run([args.python, runner, work, out, str(args.threads)])
    kernels, fit = (float(x) for x in text.split("AMICO_TIMES")[1].split())
    maps = os.path.join(out, "maps")
    est = {"fintra": load(os.path.join(maps, "fit_NDI.nii.gz")),
           "fiso": load(os.path.join(maps, "fit_FWF.nii.gz")),
           "OD": load(os.path.join(maps, "fit_ODI.nii.gz"))}
    return {"tool": f"AMICO {amico_version(args)} NODDI", "compile": kernels, "fit": fit,
            "cpu": cpu, "wall": wall, **mae(est, truth)}


def amico_version(args):
    p = subprocess.run([args.python, "-c", "import amico; print(amico.__version__)"],
                       stdout=subprocess.PIPE, text=True)
    return p.stdout.strip()


def run_dimoc(args, work, truth, fast):
    out = os.path.join(work, "dimoc_fast" if fast else "dimoc")
    cmd = [args.dimoc, "pipeline", "noddi_watson"] + (["--fast"] if fast else []) + [
        "--threads", str(args.threads), "--data", os.path.join(work, "dwi.nii.gz"), "--mask",
        os.path.join(work, "mask.nii.gz"), "--bvals", os.path.join(work, "bvals"), "--bvecs",
        os.path.join(work, "bvecs"), "--out", out]
    env_cache = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = os.path.join(work, "cache")  # a cold cache of its own
    first, _, _ = run(cmd)  # compiles the fitter (once per model and machine)
    cpu, wall, _ = run(cmd)  # the cached fitter, as AMICO's kernels are cached
    if env_cache is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = env_cache
    est = {k: load(os.path.join(out, f"{k}.nii.gz")) for k in ("fintra", "fiso", "OD")}
    return {"tool": "dimoc noddi_watson" + (" --fast" if fast else ""),
            "compile": max(first - cpu, 0.0), "fit": cpu, "cpu": cpu, "wall": wall,
            **mae(est, truth)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--voxels", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--snr", type=float, default=25)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--shells", default="30,60,90", help="directions at b = 1000, 2000, ...")
    ap.add_argument("--no-normal", action="store_true", help="skip the normal dimoc cascade")
    ap.add_argument("--work", help="working folder (default: a temporary one, removed)")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--dimoc", default=os.path.join(here, "..", "bin", "dimoc"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the python that has amico")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="bench_amico.")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    truth = simulate(args, work, rng)
    rows = [run_amico(args, work, truth), run_dimoc(args, work, truth, True)]
    if not args.no_normal:
        rows.append(run_dimoc(args, work, truth, False))
    print(f"{args.voxels} voxels, shells {args.shells} at b=1000.., 6 b=0, SNR {args.snr:g} "
          f"Rician, {args.threads} threads")
    print("| tool | CPU s kernels/compile | CPU s run (cached) | wall s | MAE fintra (NDI) "
          "| MAE fiso (FWF) | MAE OD (ODI) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        run_cpu = r["cpu"]
        print(f"| {r['tool']} | {r['compile']:.2f} | {run_cpu:.2f} | {r['wall']:.2f} | "
              f"{r['fintra']:.4f} | {r['fiso']:.4f} | {r['OD']:.4f} |")
    print("AMICO's run: kernels + fit inside its process, charged whole (python start included);"
          " dimoc's: the whole pipeline with its fitter cached, the compile apart.")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
