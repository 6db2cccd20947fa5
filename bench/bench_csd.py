#!/usr/bin/env python3
"""CSD benchmark: `dimoc csd` against MRtrix's `dwi2fod` (the named peer, measured in the same run,
same data, same exact responses, lmax 8), per stage (load, response, solve, write) where dimoc's
provenance.json reports them, with the floor counted and the fraction of it reached.  Not a test.

  bench/bench_csd.py [--voxels 200000] [--cpu1-voxels 20000] [--cases single,hcp,mrtrix,mrtrix_msmt]
                     [--threads 1,2,all] [--precisions float] [--no-peer] [--no-gpu]
                     [--response] [--quick] [--work DIR]

Cases (synthetic: a pool of 4,000 noisy crossing-fibre voxels from tests/py/csdsim.py, SNR 30,
tiled to --voxels):
  single  5 b=0 + 64 b=2500, one WM response: `dimoc csd` / `dwi2fod csd`
  hcp     18 b=0 + 90 each at b=1000, 2000, 3000, WM/GM/CSF responses (pool voxels mix the three):
          `dimoc csd --msmt` / `dwi2fod msmt_csd`
MRtrix's own dwi2fod regression data (tests/data/mrtrix_dwi2fod: the signals of the mask's voxels,
tiled to --voxels, with the responses its tests use; real, noisy scanner data):
  mrtrix       8 b=0 + 60 b=3000, response.txt: `dimoc csd` / `dwi2fod csd`
  mrtrix_msmt  b=0 (6), 700 (16), 1200 (30), 2800 (50), msmt/wm,gm,csf.txt: `dimoc csd` with
               three responses / `dwi2fod msmt_csd`
Runs with one thread use the first --cpu1-voxels voxels (rates are per voxel, so the ratios are
fair); the others use all.  --response adds `dimoc response --algorithm tournier` against
`dwi2response tournier` (single and mrtrix cases, all threads) and `dimoc response --algorithm
dhollander` at each thread count on the hcp case's voxels tiled into a 48 x 48 x 40 volume with
an ellipsoid brain mask (41,800 voxels; row hcp-dh, its estimation seconds).  Without MRtrix the
peer columns are skipped (with a note); without a GPU (or when `dimoc csd --device gpu` fails on
a tiny input) the GPU rows are skipped.

Floor.  Per voxel, with n = 45 WM coefficients (+ 1 per isotropic tissue) and M measurements used
(single shell: the DW volumes; msmt: all), the least a CSD solve can cost is the unconstrained
projection (2 n M flops) plus one n x n Cholesky factorisation and solve of the constrained system
(n^3 / 3 + 2 n^2 flops); bytes: the float32 data read and the float32 coefficients written.  The
floor time is max(flops / compute ceiling, bytes / bandwidth ceiling); the compute ceiling for the
CPU is the nominal per-core peak (instruction set and clock from /proc/cpuinfo) times the
threads, the bandwidth ceiling a large copy measured here; for the GPU, the H200's measured FMA
rates and nominal 4.8 TB/s (docs/performance.md, "Floor"), or --gpu-gflops / --gpu-gbs."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import nibabel as nib
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
import csdsim as cs  # noqa: E402

DIMOC = os.environ.get("DIMOC", os.path.join(ROOT, "bin", "dimoc"))
S0, SNR, LMAX = 1000.0, 30.0, 8
CASES = {
    "single": ("5x0,64x2500", [2500], ["wm"]),
    "hcp": ("18x0,90x1000,90x2000,90x3000", [0, 1000, 2000, 3000], ["wm", "gm", "csf"]),
}
REGRESSION = os.path.join(ROOT, "tests", "data", "mrtrix_dwi2fod")
REAL_CASES = {"mrtrix": ("", ["response.txt"]), "mrtrix_msmt": ("msmt", ["wm.txt", "gm.txt", "csf.txt"])}
GPU_CEILINGS = {"H200": {"float": (56700.0, 4800.0), "double": (33200.0, 4800.0)},  # GFLOP/s (measured, docs/performance.md), GB/s (nominal)
                "H100": {"float": (60000.0, 3350.0), "double": (30000.0, 3350.0)}}  # nominal


def sh(cmd, env=None):
    t = time.time()
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    return p.returncode, time.time() - t, p.stderr.strip()


def regression_dataset(folder, case, n):
    """MRtrix's regression data: the mask's voxels tiled to n voxels, its gradients and responses."""
    sub, resp_names = REAL_CASES[case]
    src = os.path.join(REGRESSION, sub)
    os.makedirs(folder, exist_ok=True)
    data = f"{folder}/dwi_{n}.nii"
    bvals, bvecs = f"{folder}/bvals", f"{folder}/bvecs"
    resp = [f"{folder}/{r}" for r in resp_names]
    if not os.path.exists(data):
        img = nib.load(os.path.join(src, "dwi.nii.gz"))
        a = np.asarray(img.dataobj, dtype=np.float32)
        mask = np.asarray(nib.load(os.path.join(src, "mask.nii.gz")).dataobj) > 0
        y = a[mask]  # (voxels, volumes)
        shape = (max(n // 100, 1), 10, 10) if n >= 100 else (n, 1, 1)
        full = np.resize(y, (int(np.prod(shape)), y.shape[1])).reshape(shape + (y.shape[1],))
        nib.save(nib.Nifti1Image(full, img.affine), data)
        shutil.copy(os.path.join(src, "dwi.bvals"), bvals)
        shutil.copy(os.path.join(src, "dwi.bvecs"), bvecs)
        for r in resp_names:
            shutil.copy(os.path.join(src, r), f"{folder}/{r}")
    return data, bvals, bvecs, resp


def dataset(folder, case, n):
    if case in REAL_CASES:
        return regression_dataset(folder, case, n)
    spec, shells, tissues = CASES[case]
    os.makedirs(folder, exist_ok=True)
    data = f"{folder}/dwi_{n}.nii"
    bvals, bvecs = f"{folder}/bvals", f"{folder}/bvecs"
    resp = [f"{folder}/{t}.txt" for t in tissues]
    if os.path.exists(data):
        return data, bvals, bvecs, resp
    rc, _, err = sh([DIMOC, "scheme", "--shells", spec, "--bvals", bvals, "--bvecs", bvecs])
    if rc:
        sys.exit(f"dimoc scheme failed: {err}")
    b, g = np.loadtxt(bvals), np.loadtxt(bvecs)
    rng = np.random.default_rng(7)
    pool = 4000
    shape = (max(n // 100, 1), 10, 10) if n >= 100 else (n, 1, 1)
    n = int(np.prod(shape))
    aff = cs.oblique_affine(shape)
    gw = cs.fsl_to_world(aff, g)
    y = np.zeros((pool, len(b)))
    frac = rng.dirichlet([4, 1, 1], pool) if len(tissues) == 3 else np.tile([1.0, 0, 0], (pool, 1))
    for i in range(pool):
        k = 1 + i % 3
        fib = cs.triad(rng, 1)[0] if k == 3 else (cs.crossing(rng, 1, rng.uniform(45, 90))[0] if k == 2
                                                    else cs.random_unit(rng, 1))
        for d in fib:
            y[i] += frac[i, 0] / k * cs.fibre_signal(b, gw, d)
        y[i] += frac[i, 1] * np.exp(-b * cs.D_GM) + frac[i, 2] * np.exp(-b * cs.D_CSF)
    y = cs.add_noise(rng, S0 * y, S0 / SNR).astype(np.float32)
    full = np.resize(y, (n, len(b))).reshape(shape + (len(b),))
    nib.save(nib.Nifti1Image(full, aff), data)
    for t, path in zip(tissues, resp):
        cs.write_response(path, shells, LMAX, t, S0)
    return data, bvals, bvecs, resp


BRAIN_SHAPE = (48, 48, 40)


def brain_volume(folder, data):
    """The case's voxels tiled into a 48 x 48 x 40 volume with an ellipsoid mask (what response
    estimation needs: an erodable brain, not slabs), for --response on the hcp case."""
    out, mask = f"{folder}/brain.nii", f"{folder}/brain_mask.nii"
    if not os.path.exists(out):
        img = nib.load(data)
        a = np.asarray(img.dataobj)
        v = a.reshape(-1, a.shape[-1])
        n = int(np.prod(BRAIN_SHAPE))
        nib.save(nib.Nifti1Image(np.resize(v, (n, v.shape[1])).reshape(BRAIN_SHAPE + (v.shape[1],)), img.affine),
                 out)
        x, y, z = np.meshgrid(*[np.linspace(-1, 1, k) for k in BRAIN_SHAPE], indexing="ij")
        nib.save(nib.Nifti1Image(((x * x + y * y + z * z) < 0.95).astype(np.uint8), img.affine), mask)
    return out, mask


def subset(data, n):
    """The first n voxels (whole slabs) of a dataset, for the single-thread runs."""
    out = data.replace(".nii", f"_first{n}.nii")
    if not os.path.exists(out):
        img = nib.load(data)
        a = np.asarray(img.dataobj)
        k = max(1, n // (a.shape[1] * a.shape[2]))
        nib.save(nib.Nifti1Image(a[:k], img.affine), out)
    return out


def nvox(path):
    s = nib.load(path).shape
    return s[0] * s[1] * s[2]


def stages(prov, wall):
    """Stage seconds from dimoc's provenance.json when it has them, else the whole command."""
    t = dict(prov.get("timings_seconds") or {})
    t.update({k[len("seconds_"):]: v for k, v in (prov.get("results") or {}).items() if k.startswith("seconds_")})
    pick = {"compile": ["compile"], "load": ["load", "read"], "response": ["response"],
            "solve": ["solve", "fit", "csd"], "write": ["write"]}
    out = {k: next((float(t[a]) for a in alts if a in t), None) for k, alts in pick.items()}
    return out, any(v is not None for v in out.values())


def measure_cpu_ceilings():
    """GFLOP/s of numpy GEMM on one thread (float64, float32) and GB/s of a large copy."""
    code = ("import numpy as np, time, json\n"
            "r = {}\n"
            "for dt in ('float64', 'float32'):\n"
            "    a = np.random.rand(1024, 1024).astype(dt); a @ a; t = time.time(); k = 0\n"
            "    while time.time() - t < 1.0: a @ a; k += 1\n"
            "    r[dt] = 2 * 1024 ** 3 * k / (time.time() - t) / 1e9\n"
            "x = np.ones(2 ** 27); y = np.empty_like(x); np.copyto(y, x); t = time.time()\n"
            "for _ in range(5): np.copyto(y, x)\n"
            "r['gbs'] = 5 * 2 * x.nbytes / (time.time() - t) / 1e9\n"
            "print(json.dumps(r))\n")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return json.loads(p.stdout)


def nominal_cpu_peak(ghz=None):
    """Per-core peak GFLOP/s (double, float) from the instruction set in /proc/cpuinfo and the clock:
    2 FMA units x vector width x 2 flops per cycle (AVX-512 16/32, AVX2+FMA 8/16 doubles/floats per
    FMA pair, else SSE2 4/8)."""
    flags, mhz = set(), 0.0
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            if line.startswith("cpu MHz") and not mhz:
                mhz = float(line.split(":", 1)[1])
    except OSError:
        pass
    ghz = ghz or (mhz / 1000 if mhz else 2.5)
    per_cycle = 32 if "avx512f" in flags else (16 if {"avx2", "fma"} <= flags else 4)
    isa = "AVX-512" if per_cycle == 32 else ("AVX2+FMA" if per_cycle == 16 else "SSE2")
    return ghz * per_cycle, ghz * per_cycle * 2, f"{isa} at {ghz:.2f} GHz"


def scheme_counts(case, bvals):
    """(measurements a voxel's solve uses, all measurements, tissues) of a case."""
    if case in REAL_CASES:
        b = np.loadtxt(bvals)
        ntissue = len(REAL_CASES[case][1])
        return (int((b > 10).sum()) if ntissue == 1 else len(b)), len(b), ntissue
    spec, shells, tissues = CASES[case]
    counts = [(int(c), float(b)) for c, b in (s.split("x") for s in spec.split(","))]
    M = sum(c for c, b in counts if b > 0) if len(tissues) == 1 else sum(c for c, _ in counts)
    return M, sum(c for c, _ in counts), len(tissues)


def floor_seconds(counts, n, flops_rate_g, gbs):
    M, Mall, ntissue = counts
    ncoef = 45 + (ntissue - 1)
    flops = n * (2 * ncoef * M + ncoef ** 3 / 3 + 2 * ncoef ** 2)
    bytes_ = n * 4 * (Mall + ncoef)
    return max(flops / (flops_rate_g * 1e9), bytes_ / (gbs * 1e9)), flops, bytes_


def gpu_available():
    if shutil.which("nvidia-smi") is None:
        return None
    p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    return p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--voxels", type=int, default=200000)
    ap.add_argument("--cpu1-voxels", type=int, default=20000)
    ap.add_argument("--cases", default="single,hcp,mrtrix,mrtrix_msmt")
    ap.add_argument("--threads", default="1,2,all")
    ap.add_argument("--precisions", default="float", help="GPU precisions, comma list")
    ap.add_argument("--work", default="/tmp/dimoc-bench-csd")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--response", action="store_true", help="also time dimoc response against dwi2response")
    ap.add_argument("--cpu-ghz", type=float, help="clock for the nominal CPU peak (default: /proc/cpuinfo)")
    ap.add_argument("--gpu-gflops", type=float)
    ap.add_argument("--gpu-gbs", type=float)
    ap.add_argument("--quick", action="store_true", help="small smoke run: 3,000 voxels, 1,000 single-thread")
    a = ap.parse_args()
    if a.quick:
        a.voxels, a.cpu1_voxels = 3000, 1000
    ncores = os.cpu_count()
    threads = [ncores if t == "all" else int(t) for t in a.threads.split(",")]
    threads = sorted(set(threads))
    peer = not a.no_peer and shutil.which("dwi2fod") is not None
    gpu = None if a.no_gpu else gpu_available()
    notes = []
    if not peer:
        notes.append("peer skipped: " + ("--no-peer" if a.no_peer else "MRtrix's dwi2fod not found"))
    meas = measure_cpu_ceilings()
    pd, pf, what = nominal_cpu_peak(a.cpu_ghz)
    ceil = {"float64": pd, "float32": pf, "gbs": meas["gbs"]}
    notes.append(f"CPU compute ceiling: nominal per-core peak {pd:.1f} GFLOP/s double, {pf:.1f} float ({what}) "
                 f"times the threads; numpy GEMM on one thread measured {meas['float64']:.1f} / "
                 f"{meas['float32']:.1f} GFLOP/s (for reference); bandwidth ceiling: a large copy, "
                 f"{meas['gbs']:.1f} GB/s")
    rows = []
    for case in a.cases.split(","):
        folder = f"{a.work}/{case}"
        data, bvals, bvecs, resp = dataset(folder, case, a.voxels)
        small = subset(data, a.cpu1_voxels)
        counts = scheme_counts(case, bvals)
        _, fl1, by1 = floor_seconds(counts, 1, 1.0, 1.0)
        notes.append(f"{case} floor per voxel: {fl1 / 1e3:.1f} kflop (projection + one Cholesky solve), "
                     f"{by1:.0f} bytes; {nvox(data)} voxels: {fl1 * nvox(data) / 1e9:.2f} GFLOP, "
                     f"{by1 * nvox(data) / 1e6:.0f} MB")
        if gpu:
            shutil.rmtree(f"{folder}/gpu_probe", ignore_errors=True)
            rc, _, err = sh([DIMOC, "csd", "--data", subset(data, 100), "--bvals", bvals, "--bvecs", bvecs,
                             "--response", ",".join(resp), "--device", "gpu", "--out", f"{folder}/gpu_probe"]
                            + (["--msmt"] if len(resp) > 1 else []))
            if rc:
                notes.append(f"GPU rows skipped ({gpu}): {err}")
                gpu = None
        msmt = ["--msmt"] if len(resp) > 1 else []
        runs = [(f"cpu {t}t", t, "cpu", "double", small if t == 1 else data) for t in threads]
        if gpu:
            runs += [(f"gpu {p}", ncores, "gpu", p, data) for p in a.precisions.split(",")]
        peer_rate = {}
        if peer:
            for t in threads:
                src = small if t == 1 else data
                out = f"{folder}/mr_fod.nii"
                if len(resp) == 1:
                    cmd = ["dwi2fod", "csd", src, "-fslgrad", bvecs, bvals, resp[0], out]
                else:
                    cmd = ["dwi2fod", "msmt_csd", src, "-fslgrad", bvecs, bvals, resp[0], out, resp[1],
                           f"{folder}/mr_gm.nii", resp[2], f"{folder}/mr_csf.nii"]
                rc, wall, err = sh(cmd + ["-lmax", f"{LMAX}" if len(resp) == 1 else f"{LMAX},0,0",
                                          "-nthreads", t, "-force", "-quiet"])
                if rc:
                    notes.append(f"dwi2fod failed: {err}")
                    continue
                n = nvox(src)
                peer_rate[t] = n / wall
                fl, _, _ = floor_seconds(counts, n, ceil["float64"] * t, ceil["gbs"])
                rows.append((case, n, f"dwi2fod -nthreads {t}", {"total": wall}, wall, 1.0, fl / wall))
        for label, t, dev, prec, src in runs:
            out = f"{folder}/dimoc_out"
            shutil.rmtree(out, ignore_errors=True)
            rc, wall, err = sh([DIMOC, "csd", "--data", src, "--bvals", bvals, "--bvecs", bvecs, "--out", out,
                                "--lmax", LMAX, "--response", ",".join(resp), "--device", dev, "--precision", prec,
                                "--threads", t] + msmt)
            if rc:
                notes.append(f"dimoc csd {label} failed: {err}")
                continue
            n = nvox(src)
            prov = {}
            if os.path.exists(f"{out}/provenance.json"):
                prov = json.load(open(f"{out}/provenance.json"))
            st, have = stages(prov, wall)
            if not have:
                notes.append(f"{case} {label}: provenance.json has no stage timings; the whole command timed")
            solve = st["solve"] if st["solve"] else wall
            if dev == "gpu":
                name = next((k for k in GPU_CEILINGS if k in gpu), "H200")
                gf, gb = GPU_CEILINGS[name][prec]
                gf, gb = a.gpu_gflops or gf, a.gpu_gbs or gb
                ref = peer_rate.get(max(peer_rate)) if peer_rate else None
            else:
                gf, gb = ceil["float64" if prec == "double" else "float32"] * t, ceil["gbs"]
                ref = peer_rate.get(t)
            fl, _, _ = floor_seconds(counts, n, gf, gb)
            ratio = (n / wall) / ref if ref else float("nan")
            one = peer_rate.get(1)
            if one:  # the yardstick: dwi2fod on one core, against the solve stage alone
                notes.append(f"{case} {label} {prec}: solve stage {n / solve:,.0f} voxels/s = "
                             f"{n / solve / one:.0f}x dwi2fod on one core ({one:,.0f} voxels/s); "
                             f"whole command {n / wall / one:.0f}x")
            rows.append((case, n, f"dimoc {label} {prec}", st, wall, ratio, fl / solve))
            res = prov.get("results") or {}
            if "mean_active_set_steps" in res:
                notes.append(f"{case} {label} {prec}: {res.get('solved')} of {res.get('voxels')} voxels solved, "
                             f"{res['mean_active_set_steps']:.1f} active-set steps per voxel on average, "
                             f"{res.get('unknowns')} unknowns, {res.get('measurements')} measurements, "
                             f"{res.get('constraints')} constraints, device {res.get('device')}")
        if a.response and case in ("single", "mrtrix"):
            t = max(threads)
            shutil.rmtree(f"{folder}/dimoc_resp", ignore_errors=True)
            rc, wall, err = sh([DIMOC, "response", "--data", data, "--bvals", bvals, "--bvecs", bvecs, "--out",
                                f"{folder}/dimoc_resp", "--algorithm", "tournier", "--threads", t])
            ref = None
            if peer:
                rc2, w2, err2 = sh(["dwi2response", "tournier", data, "-fslgrad", bvecs, bvals,
                                    f"{folder}/mr_resp.txt", "-nthreads", t, "-force", "-quiet"])
                if rc2 == 0:
                    ref = w2
                    rows.append((case, nvox(data), f"dwi2response -nthreads {t}", {"response": w2}, w2, 1.0,
                                 float("nan")))
            if rc == 0:
                rows.append((case, nvox(data), f"dimoc response {t}t", {"response": wall}, wall,
                             ref / wall if ref else float("nan"), float("nan")))
            else:
                notes.append(f"dimoc response failed: {err}")
        if a.response and case == "hcp":
            brain, mask = brain_volume(folder, data)
            nb = int(np.asarray(nib.load(mask).dataobj).sum())
            for t in threads:
                out = f"{folder}/dimoc_resp_dh"
                shutil.rmtree(out, ignore_errors=True)
                rc, wall, err = sh([DIMOC, "response", "--data", brain, "--mask", mask, "--bvals", bvals, "--bvecs",
                                    bvecs, "--out", out, "--algorithm", "dhollander", "--threads", t])
                if rc:
                    notes.append(f"dimoc response --algorithm dhollander failed: {err}")
                    continue
                prov = json.load(open(f"{out}/provenance.json"))
                secs = float((prov.get("results") or {}).get("seconds_response", wall))
                rows.append(("hcp-dh", nb, f"dimoc response dhollander {t}t", {"response": secs}, wall,
                             float("nan"), float("nan")))
            notes.append(f"hcp-dh: dhollander response estimation on a {BRAIN_SHAPE} volume of the hcp pool with a "
                         f"brain-shaped mask ({nb} voxels); 'response' is the estimation alone (provenance), "
                         f"'total' the whole command")

    def f(v):
        return f"{v:8.2f}" if isinstance(v, float) else f"{'-':>8}"
    print(f"{'case':7} {'voxels':>7} {'run':28} {'compile':>8} {'load':>8} {'response':>8} {'solve':>8} "
          f"{'write':>8} {'total':>8} {'vox/s':>9} {'x peer':>7} {'% floor':>7}")
    for case, n, label, st, wall, ratio, frac in rows:
        print(f"{case:7} {n:7d} {label:28} {f(st.get('compile'))} {f(st.get('load'))} {f(st.get('response'))} "
              f"{f(st.get('solve'))} {f(st.get('write'))} {wall:8.2f} {n / wall:9.0f} {ratio:7.2f} {100 * frac:7.2f}")
    print("x peer: voxels/s against dwi2fod with the same thread count (GPU: against dwi2fod on all "
          "threads); % floor: floor time / solve time (the whole command when no stages).")
    for note in dict.fromkeys(notes):
        print("note:", note)


if __name__ == "__main__":
    main()
