#!/usr/bin/env python3
"""An HCP-sized subject end to end: simulate it, then time multi-tissue CSD, bedpostx, NODDI-Watson
and COMMIT on it, each as a whole command and by the stages its provenance.json reports, with the
counted floor where there is one, and a summary against the targets.  Not a test.

  bench/bench_hcp.py [--quick] [--device gpu|cpu] [--work DIR] [--keep]
                     [--streamlines N] [--tracks fod|synthetic]

The subject (numpy, then `dimoc simulate noddi_watson`, the first row):
  grid     96 x 96 x 98 voxels (903,168, an HCP-sized image; --quick: 24 x 24 x 20) of 2 mm, the
           geometry of bench/bench_commit.py (LAS, centred: bench_commit.affine);
  scheme   18 b=0 + 90 directions each at b = 1000, 2000, 3000 (`dimoc scheme`), 288 volumes;
  tissue   NODDI-Watson (d_par 1.7e-3, d_iso 3e-3) in a brain-like layout: a brain ellipsoid
           (0.98 of the half extents; the mask), its outer rim (beyond 0.9) and two ventricles
           CSF (fiso 0.95), a WM ellipsoid (bench_commit's WM_FRAC of the half extents) of fintra
           0.6-0.7, fiso 0.03, kappa 8-16, and GM between them (fintra 0.35, fiso 0.12, kappa 1,
           radial).  WM orientations cross between regions: along z in the core, circling z
           outside it (the larger of bench_commit.fibre_fields' two fibres, the fields its
           synthetic streamlines follow), left-right in a callosum-like slab;
  noise    Rician, SNR 25 (sigma = S0 / 25), written as dwi.nii.gz (dimoc's gzip blocks, read on
           all cores).

Runs (--device on each), one table each:
  csd         `dimoc csd` (its own response estimation: dhollander, WM/GM/CSF, then
              msmt_csd); the solve's floor is bench_csd.floor_seconds (the projection and one
              Cholesky solve per voxel at the device's double rate, or the bytes at its bandwidth);
  track       `dimoc track --fod` on the csd's WM FOD, seeds in the WM, --select --streamlines
              (1,000,000; --quick 20,000): the tractogram COMMIT weighs (no floor counted);
              --tracks synthetic takes bench_commit.make_tracks' curves instead;
  bedpostx    `dimoc pipeline bedpostx` with its defaults (3 fibres, model 2; --quick: --burnin
              100 --jumps 100, so that 2 cores finish in minutes); per fit stage its load,
              compile, fit and write, the fit's floor bench_fit.floor_seconds (the signal
              evaluations' operations at the H200's FP32 rate, or their transcendentals at its
              __expf rate; GPU runs only);
  noddi       `dimoc pipeline noddi_watson` (grid, then LM, then LM), the same per stage;
  bingham     `dimoc pipeline noddi_bingham` (the NODDI-Watson pipeline first, whose stages are
              not counted here, and a tensor's second axis for psi; then its grid, LM, LM),
              the same per fit stage;
  commit      `dimoc commit` (stick-zeppelin-ball, bench_commit's diffusivities, the truth's
              orientation as --peaks) on that tractogram; the solve's floor is its FISTA
              iterations times bench_commit.iteration_bytes at the device's bandwidth (the H200's
              nominal 4.8 TB/s, or a large copy measured here for the CPU).
--peers LIST (csd, noddi) runs the peers on the same subject and host after dimoc's runs, with
--peer-threads (default all cores), each timed whole:
  csd         MRtrix's `dwi2response dhollander` (against dimoc's response stage) and
              `dwi2fod msmt_csd` with dimoc's responses (against dimoc's solve, and its WM FOD
              against dimoc's: the largest difference over the largest coefficient);
  noddi       AMICO's NODDI (bench_amico's runner: its kernels generated, then its fit), and the
              mean absolute errors of both tools' fiso (AMICO's FWF) in the mask, and of fintra
              (NDI) and OD (ODI) where the truth's fiso is below 0.5 (not the CSF).
The stages of a pipeline are the `dimoc fit` runs under OUT/dimoc/*/ (their provenance.json).
The summary's targets are those of the full-size subject on an H200; --quick prints them
unjudged.  --work (default /tmp/dimoc-bench-hcp) is removed at the end unless --keep."""
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_amico  # noqa: E402
import bench_commit  # noqa: E402
import bench_csd  # noqa: E402
import bench_fit  # noqa: E402

DIMOC = os.environ.get("DIMOC", os.path.join(ROOT, "bin", "dimoc"))
SHAPES = {"full": (96, 96, 98), "quick": (24, 24, 20)}
SHELLS = "18x0,90x1000,90x2000,90x3000"  # bench_csd's "hcp" case: its floor counts this scheme
SNR = 25
SIMULATE_BEFORE = 209.0  # seconds `dimoc simulate` took for this subject before (the target's base)
GPU = "H200"


# ---- the subject -----------------------------------------------------------------------------

def tissue(shape, seed):
    """Parameter maps of noddi_watson (S0, fintra, fiso, kappa, th, ph in the FSL bvecs frame) and
    the masks (brain, wm) and WM orientations (world) of the layout in the module's doc."""
    rng = np.random.default_rng(seed)
    aff = bench_commit.affine(shape)
    ijk = np.indices(shape).reshape(3, -1).T
    w = ijk * np.diag(aff)[:3] + aff[:3, 3]
    brain_semi = bench_commit.semi_axes(shape, 0.98)
    wm_semi = bench_commit.semi_axes(shape, bench_commit.WM_FRAC)
    rb = ((w / brain_semi) ** 2).sum(1)
    brain = rb <= 1
    vent = np.zeros(len(w), bool)
    for side in (-1, 1):
        c = np.array([side * 0.18, 0.05, 0.1]) * brain_semi
        vent |= (((w - c) / (np.array([0.08, 0.3, 0.15]) * brain_semi)) ** 2).sum(1) <= 1
    csf = brain & ((rb > 0.9 ** 2) | vent)
    wm = brain & ~csf & (((w / wm_semi) ** 2).sum(1) <= 1)
    gm = brain & ~csf & ~wm
    f_circ, t_circ, f_z, t_z = bench_commit.fibre_fields(w, wm_semi)
    t = np.where((f_circ >= f_z)[:, None], t_circ, t_z)
    slab = wm & (np.abs(w[:, 2]) < 0.12 * wm_semi[2]) & (np.abs(w[:, 1]) < 0.5 * wm_semi[1])
    t[slab] = [1.0, 0.0, 0.0]
    radial = w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-9)
    t[gm] = radial[gm]
    t[~(wm | gm)] = [0.0, 0.0, 1.0]
    n = len(w)
    p = {"S0": np.where(csf, 1400.0, np.where(brain, 1000.0, 0.0)),
         "fintra": np.select([wm, gm], [rng.uniform(0.6, 0.7, n), np.full(n, 0.35)], 0.0),
         "fiso": np.select([wm, gm, csf], [np.full(n, 0.03), np.full(n, 0.12), np.full(n, 0.95)], 0.0),
         "kappa": np.where(wm, rng.uniform(8.0, 16.0, n), 1.0)}
    v = t * [-1.0, 1.0, 1.0]  # world -> FSL bvecs frame: the voxel axes of this LAS (det < 0) grid
    v *= np.where(v[:, 2:3] < 0, -1.0, 1.0)
    p["th"] = np.arccos(np.clip(v[:, 2], -1, 1))
    p["ph"] = np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)
    return aff, p, brain, wm, t


def make_subject(d, shape, seed=1):
    """The maps, masks, peaks and scheme in d; returns (simulate command, brain voxels, wm voxels)."""
    os.makedirs(d, exist_ok=True)
    aff, p, brain, wm, t = tissue(shape, seed)
    img = lambda a, dt: nib.Nifti1Image(a.reshape(shape + a.shape[1:]).astype(dt), aff)  # noqa: E731
    spec = []
    for k, v in p.items():
        nib.save(img(v, np.float32), f"{d}/{k}.nii.gz")
        spec.append(f"{k}={d}/{k}.nii.gz")
    nib.save(img(brain, np.uint8), f"{d}/mask.nii.gz")
    nib.save(img(wm, np.uint8), f"{d}/wm.nii.gz")
    peaks = np.zeros((len(t), 9), np.float32)  # sh2peaks' layout, world frame; one peak in the WM
    peaks[wm, :3] = t[wm] * p["fintra"][wm, None]
    nib.save(img(peaks, np.float32), f"{d}/peaks.nii.gz")
    run_ok([DIMOC, "scheme", "--shells", SHELLS, "--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs"])
    cmd = [DIMOC, "simulate", "noddi_watson", "--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs",
           "--params", ",".join(spec), "--noise", "rician", "--snr", SNR, "--seed", seed, "--out", f"{d}/dwi.nii.gz"]
    return cmd, int(brain.sum()), int(wm.sum())


# ---- running and reading -----------------------------------------------------------------------

def run_ok(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(map(str, cmd))} failed (exit {p.returncode}): {p.stderr.strip()[-600:]}")
    return p


def timed(cmd, log, must=True):
    """Wall seconds of one command (its output in `log`); on failure exits, or (must False)
    prints why and returns None."""
    t0 = time.time()
    with open(log, "w") as fh:
        rc = subprocess.run([str(c) for c in cmd], stdout=fh, stderr=subprocess.STDOUT).returncode
    wall = time.time() - t0
    if rc:
        why = f"{' '.join(map(str, cmd[:2]))} failed (exit {rc}): {bench_commit.tail(log, 3)}"
        if must:
            sys.exit(why)
        print(f"\n{why}")
        return None
    return wall


def prov_stages(path):
    """Stage -> seconds from a provenance.json: timings_seconds, then results' seconds_* (the
    whole-command "total" left out)."""
    j = json.load(open(path))
    st = {k: float(v) for k, v in (j.get("timings_seconds") or {}).items() if k != "total"}
    st.update({k[len("seconds_"):]: float(v) for k, v in (j.get("results") or {}).items()
               if k.startswith("seconds_") and isinstance(v, (int, float))})
    return j, st


def fit_stage_rows(out, device):
    """Rows (stage, seconds, floor or None) for each `dimoc fit` under out/dimoc/*/, in the order
    they ended (their provenance.json's modification time)."""
    rows, floor_sum, fit_sum = [], 0.0, 0.0
    provs = []
    for path in glob.glob(f"{out}/dimoc/*/provenance.json"):
        j, st = prov_stages(path)
        if "model" not in j:  # a step that is no fit (a pipeline's tensor or angles)
            continue
        provs.append((os.stat(path).st_mtime_ns, os.path.basename(os.path.dirname(path)), j, st))
    for _, name, j, st in sorted(provs, key=lambda x: (x[0], x[1])):
        model = j["model"]["name"]
        floor = None
        if device == "gpu" and j.get("work", {}).get("signal_evaluations"):
            floor = bench_fit.floor_seconds(model, j["work"]["signal_evaluations"])
            floor_sum += floor
            fit_sum += st.get("fit", 0.0)
        for k in ("load", "compile", "gpu_start", "fit", "write"):
            if k in st and (st[k] > 0 or k in ("load", "fit", "write")):  # no empty compile, GPU start rows
                rows.append((f"{name}: {k}" + (f" ({model})" if k == "fit" and name != model else ""),
                             st[k], floor if k == "fit" else None))
    return rows, (floor_sum, fit_sum)


def median(values):
    """The median of the values that are there (None when none is)."""
    v = sorted(x for x in values if x is not None)
    return None if not v else (v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2]))


def warm_run(run, prov, out):
    """A command again with its output folder emptied first: (wall seconds, stages)."""
    shutil.rmtree(out, ignore_errors=True)
    t = run()
    return t, prov_stages(prov)[1]


def table(title, whole, rows, note=""):
    print(f"\n{title}")
    print(f"  {'stage':44} {'seconds':>9} {'floor s':>9} {'% floor':>8}")
    print(f"  {'whole command':44} {whole:9.2f} {'':>9} {'':>8}")
    for name, sec, floor in rows:
        f = f"{floor:9.3f}" if floor is not None else f"{'-':>9}"
        pct = f"{100 * floor / sec:8.1f}" if floor is not None and sec > 0 else f"{'-':>8}"
        print(f"  {name:44} {sec:9.2f} {f} {pct}")
    if note:
        print(f"  ({note})")


RUNS = ("csd", "track", "bedpostx", "noddi", "bingham", "commit")
PEERS = ("csd", "noddi")


# ---- peers -------------------------------------------------------------------------------------

def peer_csd(w, subj, threads, dimoc_stages):
    """MRtrix's dhollander responses and msmt_csd (with dimoc's responses) on the subject."""
    grad = ["-fslgrad", f"{subj}/bvecs", f"{subj}/bvals"]
    common = ["-mask", f"{subj}/mask.nii.gz", "-nthreads", threads, "-force", "-quiet"]
    out = f"{w}/mrtrix"
    os.makedirs(out, exist_ok=True)
    resp = timed(["dwi2response", "dhollander", f"{subj}/dwi.nii.gz", *grad, f"{out}/wm.txt", f"{out}/gm.txt",
                  f"{out}/csf.txt", *common, "-scratch", out], f"{w}/dwi2response.log", must=False)
    fods = [x for t in ("wm", "gm", "csf") for x in (f"{w}/csd/{t}_response.txt", f"{out}/{t}_fod.nii")]
    fod = timed(["dwi2fod", "msmt_csd", f"{subj}/dwi.nii.gz", *grad, *fods, *common], f"{w}/dwi2fod.log")
    a = np.asarray(nib.load(f"{w}/csd/wm_fod.nii.gz").dataobj, dtype=np.float64)
    b = np.asarray(nib.load(f"{out}/wm_fod.nii").dataobj, dtype=np.float64)
    diff = np.abs(a - b).max() / np.abs(b).max()
    rows = [("dwi2response dhollander (whole)", resp, dimoc_stages.get("response")),
            ("dwi2fod msmt_csd, dimoc's responses (whole)", fod, dimoc_stages.get("solve"))]
    print(f"\npeers of dimoc csd: MRtrix {mrtrix_version()}, {threads} threads")
    print(f"  {'command':48} {'seconds':>9} {'dimoc s':>9} {'ratio':>8}")
    for name, sec, ours in rows:
        if sec is None:  # the peer failed (said above)
            continue
        ratio = f"{sec / ours:8.1f}" if ours else f"{'-':>8}"
        print(f"  {name:48} {sec:9.2f} {ours if ours else float('nan'):9.2f} {ratio}")
    print(f"  (dimoc's stage against the peer's whole command; WM FODs: largest difference {diff:.2e} of "
          "the largest coefficient)")


def mrtrix_version():
    p = subprocess.run(["dwi2fod", "--version"], capture_output=True, text=True)
    return (p.stdout.split("\n")[0].split("==")[1].strip().split()[0] if "==" in p.stdout else "?")


def peer_noddi(w, subj, threads, dimoc_whole):
    """AMICO's NODDI on the subject, and both tools' errors against the truth in the mask."""
    mask = bench_amico.load(f"{subj}/mask.nii.gz") > 0
    kappa = bench_amico.load(f"{subj}/kappa.nii.gz")
    truth = {"fintra": bench_amico.load(f"{subj}/fintra.nii.gz"), "fiso": bench_amico.load(f"{subj}/fiso.nii.gz"),
             "OD": 2 / np.pi * np.arctan(1 / kappa)}
    peer = bench_amico.run_amico(argparse.Namespace(python=sys.executable, threads=threads), subj, truth)
    maps = {"fintra": "fit_NDI", "fiso": "fit_FWF", "OD": "fit_ODI"}
    amico = {k: bench_amico.load(f"{subj}/amico/maps/{v}.nii.gz") for k, v in maps.items()}
    ours = {k: bench_amico.load(f"{w}/noddi/{k}.nii.gz") for k in maps}
    tissue = mask & (truth["fiso"] < 0.5)  # fintra and OD mean little where the voxel is free water

    def mae(est):  # noqa: E306
        return " ".join(f"{np.mean(np.abs(est[k][m] - truth[k][m])):.4f}"
                        for k, m in (("fintra", tissue), ("fiso", mask), ("OD", tissue)))
    print(f"\npeer of dimoc pipeline noddi_watson: {peer['tool']}, {threads} threads")
    print(f"  {'tool':36} {'wall s':>9} {'ratio':>8}  MAE fintra, fiso, OD (fiso in the mask, the others "
          "where its truth is below 0.5)")
    print(f"  {peer['tool']:36} {peer['wall']:9.2f} {peer['wall'] / dimoc_whole:8.1f}  {mae(amico)}")
    print(f"  {'dimoc pipeline noddi_watson':36} {dimoc_whole:9.2f} {1:8.1f}  {mae(ours)}")
    print(f"  (AMICO's kernels {peer['compile']:.1f} CPU-s and fit {peer['fit']:.1f} CPU-s inside its wall time)")


# ---- main --------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 24 x 24 x 20 subject, short bedpostx chains")
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--work", default="/tmp/dimoc-bench-hcp")
    ap.add_argument("--keep", action="store_true", help="keep --work")
    ap.add_argument("--streamlines", type=int, help="tractogram size (default 1,000,000; --quick 20,000)")
    ap.add_argument("--tracks", choices=("fod", "synthetic"), default="fod")
    ap.add_argument("--gpu-gbs", type=float, help="GPU bandwidth ceiling, GB/s (default: the H200's 4800)")
    ap.add_argument("--runs", default=",".join(RUNS),
                    help=f"the commands to time after simulate, comma-joined (default: all of {','.join(RUNS)}; "
                         "commit needs track, track needs csd unless --tracks synthetic)")
    ap.add_argument("--peers", default="", help=f"peers to run on the subject, comma-joined: {','.join(PEERS)}")
    ap.add_argument("--peer-threads", type=int, default=os.cpu_count(), help="the peers' threads (default all cores)")
    ap.add_argument("--warm", type=int, default=2,
                    help="csd and the NODDI pipelines again this many times after their first run (which fills the "
                         "program cache); the targets are judged on the median of these warm runs (default 2)")
    a = ap.parse_args()
    runs = a.runs.split(",")
    if any(r not in RUNS for r in runs):
        sys.exit(f"--runs: each of {','.join(RUNS)}")
    peers = [x for x in a.peers.split(",") if x]
    if any(x not in PEERS or x not in runs for x in peers):
        sys.exit(f"--peers: each of {','.join(PEERS)}, and among --runs")
    shape = SHAPES["quick" if a.quick else "full"]
    nstr = a.streamlines or (20000 if a.quick else 1000000)
    dev = ["--device", a.device]
    w = a.work
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    ncores = os.cpu_count()
    print(f"HCP-sized subject: {shape[0]} x {shape[1]} x {shape[2]} = {int(np.prod(shape)):,} voxels, "
          f"{SHELLS} (288 volumes), NODDI-Watson, Rician SNR {SNR}; --device {a.device}, {ncores} cores")

    # Ceilings for the floors: the H200's (GPU), or this host's (CPU: bench_csd's nominal peak
    # times the cores, a large copy measured here).
    if a.device == "gpu":
        csd_gflops, csd_gbs = bench_csd.GPU_CEILINGS[GPU]["double"]  # multi-tissue CSD solves in double
        gbs = a.gpu_gbs or bench_commit.GPU_GBS[GPU]
        csd_gbs = a.gpu_gbs or csd_gbs
        ceil_note = f"{GPU}: {csd_gflops:.0f} GFLOP/s double, {gbs:.0f} GB/s"
    else:
        pd, _, what = bench_csd.nominal_cpu_peak()
        gbs = bench_commit.host_copy_gbs(ncores)
        csd_gflops, csd_gbs = pd * ncores, gbs
        ceil_note = f"CPU: {pd:.1f} GFLOP/s double a core ({what}) x {ncores}, copy {gbs:.1f} GB/s"

    subj = f"{w}/subject"
    t0 = time.time()
    sim_cmd, nbrain, nwm = make_subject(subj, shape)
    print(f"maps made in {time.time() - t0:.1f} s: {nbrain:,} brain voxels (the mask), {nwm:,} WM voxels")
    data = ["--data", f"{subj}/dwi.nii.gz", "--bvals", f"{subj}/bvals", "--bvecs", f"{subj}/bvecs"]
    summary = {}

    # simulate
    sim = timed(sim_cmd, f"{w}/simulate.log")
    _, st = prov_stages(f"{subj}/dwi.provenance.json")
    table("dimoc simulate noddi_watson", sim, [(k, v, None) for k, v in st.items()],
          "no floor counted; the provenance reports the whole only" if not st else "no floor counted")
    summary["simulate"] = sim

    if "csd" in runs:
        # csd, with its own response estimation
        out = f"{w}/csd"
        whole = timed([DIMOC, "csd", *data, "--mask", f"{subj}/mask.nii.gz", "--out", out, *dev], f"{w}/csd.log")
        _, st = prov_stages(f"{out}/provenance.json")
        fl, flops, bytes_ = bench_csd.floor_seconds(bench_csd.scheme_counts("hcp", None), nbrain, csd_gflops, csd_gbs)
        rows = [(k, v, fl if k == "solve" else None) for k, v in st.items()]
        table("dimoc csd (multi-tissue; its responses estimated by dhollander)", whole, rows,
              f"floor of the solve: {flops / 1e9:.1f} GFLOP, {bytes_ / 1e6:.0f} MB over {nbrain:,} voxels at {ceil_note}; "
              "none counted for the other stages")
        summary["csd"] = (whole, st.get("response"), st.get("solve"))
        if a.warm > 0:
            again = [warm_run(lambda: timed([DIMOC, "csd", *data, "--mask", f"{subj}/mask.nii.gz", "--out", out,
                                             *dev], f"{w}/csd.log"), f"{out}/provenance.json", out)
                     for _ in range(a.warm)]
            for k, (t, s2) in enumerate(again):
                print(f"  warm run {k + 1}: whole {t:.2f} s, " +
                      ", ".join(f"{x} {s2[x]:.2f} s" for x in ("load", "response", "solve", "write") if x in s2))
            summary["csd"] = (median([t for t, _ in again]), median([x.get("response") for _, x in again]),
                              median([x.get("solve") for _, x in again]))
        if "csd" in peers:  # against the last run's stages (a warm one where there are)
            peer_csd(w, subj, a.peer_threads, again[-1][1] if a.warm > 0 else st)

    if "track" in runs:
        # the tractogram
        if a.tracks == "fod":
            out = f"{w}/track"
            whole = timed([DIMOC, "track", "--fod", f"{w}/csd/wm_fod.nii.gz", "--seed", f"{subj}/wm.nii.gz",
                           "--select", nstr, "--out", out, *dev], f"{w}/track.log")
            tck = f"{out}/tracks.tck"
            _, st = prov_stages(f"{out}/provenance.json")
            table(f"dimoc track --fod (iFOD2, --select {nstr:,}: COMMIT's tractogram)", whole,
                  [(k, v, None) for k, v in st.items()], "no floor counted")
        else:
            t0 = time.time()
            os.makedirs(f"{w}/tracks")
            tck, info = bench_commit.make_tracks(f"{w}/tracks", shape, nstr, 7)
            print(f"\nsynthetic tractogram (bench_commit.make_tracks): {nstr:,} streamlines, "
                  f"{info['points']:,} points in {time.time() - t0:.1f} s")

    if "bedpostx" in runs:
        # bedpostx with its defaults
        out = f"{w}/bedpostx"
        extra = ["--burnin", 100, "--jumps", 100] if a.quick else []
        whole = timed([DIMOC, "pipeline", "bedpostx", *data, "--mask", f"{subj}/mask.nii.gz", "--out", out,
                       "--quiet", *dev, *extra], f"{w}/bedpostx.log")
        rows, _ = fit_stage_rows(out, a.device)
        table("dimoc pipeline bedpostx (3 fibres, model 2" + (", --burnin 100 --jumps 100)" if a.quick else ")"),
              whole, rows, "fit floors: bench_fit.floor_seconds at the H200's rates" if a.device == "gpu"
              else "no floor counted on the CPU (bench_fit's floor is the H200's)")
        summary["bedpostx"] = whole
        summary["bedpostx_writes"] = sum(sec for stage, sec, _ in rows if stage.endswith(": write"))

    def noddi_run(pipeline, key):
        """`dimoc pipeline PIPELINE` once, then --warm times: its table, and summary[key] = (whole,
        % of the fits' floor), the warm runs' medians where there are some."""
        out = f"{w}/{key}"
        cmd = [DIMOC, "pipeline", pipeline, *data, "--mask", f"{subj}/mask.nii.gz", "--out", out, "--quiet", *dev]
        whole = timed(cmd, f"{w}/{key}.log")
        rows, (fsum, tsum) = fit_stage_rows(out, a.device)
        table(f"dimoc pipeline {pipeline}", whole, rows,
              "fit floors: bench_fit.floor_seconds at the H200's rates" if a.device == "gpu"
              else "no floor counted on the CPU (bench_fit's floor is the H200's)")
        summary[key] = (whole, 100 * fsum / tsum if tsum > 0 else None)
        if a.warm > 0:
            pcts, wholes = [], []
            for k in range(a.warm):
                shutil.rmtree(out, ignore_errors=True)
                t = timed(cmd, f"{w}/{key}.log")
                rows, (fs, ts) = fit_stage_rows(out, a.device)
                fits = sum(sec for name, sec, _ in rows if ": fit" in name)
                wholes.append(t)
                pcts.append(100 * fs / ts if ts > 0 else None)
                print(f"  warm run {k + 1}: whole {t:.2f} s, fits {fits:.2f} s" +
                      (f", {pcts[-1]:.1f}% of their floor" if pcts[-1] is not None else ""))
            summary[key] = (median(wholes), median(pcts))

    if "noddi" in runs:
        noddi_run("noddi_watson", "noddi")
        if "noddi" in peers:
            peer_noddi(w, subj, a.peer_threads, summary["noddi"][0])
    if "bingham" in runs:
        noddi_run("noddi_bingham", "bingham")

    if "commit" in runs:
        # COMMIT
        out = f"{w}/commit"
        whole = timed([DIMOC, "commit", "--tractogram", tck, *data, "--mask", f"{subj}/wm.nii.gz",
                       "--peaks", f"{subj}/peaks.nii.gz", "--out", out, "--d-par", bench_commit.D_PAR,
                       "--d-perp", bench_commit.D_PERP, "--d-iso", ",".join(f"{x:g}" for x in bench_commit.D_ISOS),
                       *dev], f"{w}/commit.log")
        j, st = prov_stages(f"{out}/provenance.json")
        r = j["results"]
        ax, aty, _, nrows = bench_commit.floor_bytes(int(r["segments"]), int(r["streamlines_kept"]),
                                                     int(r.get("ec_compartments", 0)), int(r["voxels"]), 288,
                                                     ndirs=int(r.get("lut_directions", bench_commit.NDIRS)))
        fl = int(r["iterations"]) * bench_commit.iteration_bytes("dimoc", ax, aty, nrows) / (gbs * 1e9)
        table(f"dimoc commit ({nstr:,} streamlines, {int(r['streamlines_kept']):,} kept, {int(r['iterations'])} "
              "iterations)", whole, [(k, v, fl if k == "solve" else None) for k, v in st.items()],
              f"floor of the solve: its iterations x bench_commit.iteration_bytes at {gbs:.0f} GB/s; none counted "
              "for the other stages")
        summary["commit"] = whole

    # against the targets (the full-size subject on an H200)
    judge = not a.quick and a.device == "gpu"
    def verdict(ok):  # noqa: E306
        return ("met" if ok else "MISSED") if judge and ok is not None else "-"
    lines = []
    if "csd" in summary:
        csd_whole, resp, solve = summary["csd"]
        lines += [
            ("csd whole", "<= 6 s", f"{csd_whole:.2f} s", csd_whole <= 6),
            ("csd responses", "<= 1.5 s", f"{resp:.2f} s" if resp is not None else "not reported",
             resp <= 1.5 if resp is not None else None),
            ("csd solve", "<= 3 s", f"{solve:.2f} s" if solve is not None else "not reported",
             solve <= 3 if solve is not None else None)]
    for key, name in (("noddi", "noddi_watson"), ("bingham", "noddi_bingham")):
        if key in summary:
            _, npct = summary[key]
            lines.append((f"{name} fit", ">= 15% of floor", f"{npct:.1f}%" if npct is not None else "no floor (CPU)",
                          npct >= 15 if npct is not None else None))
    if "bedpostx" in summary:
        lines.append(("bedpostx whole", "<= 30 s", f"{summary['bedpostx']:.2f} s", summary["bedpostx"] <= 30))
        writes = summary["bedpostx_writes"]
        lines.append(("bedpostx writes (its stages)", "<= 1 s", f"{writes:.2f} s", writes <= 1))
    lines.append(("simulate", f">= 10x faster than {SIMULATE_BEFORE:.0f} s", f"{summary['simulate']:.2f} s "
                  f"({SIMULATE_BEFORE / summary['simulate']:.1f}x)", summary["simulate"] <= SIMULATE_BEFORE / 10))
    if "commit" in summary:
        lines.append((f"commit {nstr:,} streamlines", "measured", f"{summary['commit']:.2f} s", None))
    warmed = [name for key, name in (("csd", "csd"), ("noddi", "noddi_watson"), ("bingham", "noddi_bingham"))
              if key in summary]
    print("\nSummary against the targets (full-size subject, H200" +
          (f"; {', '.join(warmed)}: the median of {a.warm} warm runs)" if a.warm > 0 and warmed else ")") +
          ("" if judge else ": not judged (--quick or --device cpu)"))
    print(f"  {'what':28} {'target':28} {'measured':22} {'verdict':7}")
    for what, target, got, ok in lines:
        print(f"  {what:28} {target:28} {got:22} {verdict(ok):7}")
    if not a.keep:
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
