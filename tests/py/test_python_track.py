"""dimoc.track, dimoc.tdi and dimoc.connectome (python/dimoc/_track.py over the C API's
dimoc_track, dimoc_tdi and dimoc_connectome) against `dimoc track --fod`, `dimoc tdi` and
`dimoc connectome` on the same inputs (fodsim's phantom on its oblique grid), imported from
the source tree (python/, build/'s library):

- the streamlines are the command's tracks.tck point for point (the float32 bytes of the file's
  points, in order) for iFOD2 with --tdi and --connectome, iFOD1 with --include/--exclude on
  another grid, SD_STREAM with --seeds/--select 0/--mask/--unidirectional/lengths, ACT with
  --seed-gmwmi/--backtrack in double precision, --seed-random-per-voxel, and a seed image on a
  grid of its own; the FOD given as a nibabel image, a path, arrays in C and Fortran order and
  as float64; the counts are the .tck header's (count, total_count);
- the track-density image of dimoc.tdi is the command's --tdi map and `dimoc tdi`'s (plain,
  super-resolved with weights, the exact walk, from a .tck read by nibabel), byte for byte with
  the same grid; dimoc.connectome's matrices print as the command's connectome.csv and
  mean_length.csv, plain and weighted;
- every wrong argument is a ValueError naming it, raised before any work (no progress
  callback called);
- a cancel from another thread stops a long tracking within a second (dimoc.Cancelled) and
  Ctrl-C (SIGINT) raises KeyboardInterrupt as soon; the next call gives the command's
  streamlines;
- the library prints nothing: the command's warning is a DimocWarning."""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import nibabel as nib
import numpy as np

import fodsim as fs
from dmtest import PYTHON_SOURCE, check, check_refused_call, dimoc, finish, source_dimoc, workdir

dm = source_dimoc()

d = workdir("python_track")
os.chdir(d)
p = fs.phantom(d)
tt_path, tt = fs.five_tissue(d, p)
aff = p["affine"]
shape = fs.SHAPE
lab = np.zeros(shape, np.int16)
lab[:shape[0] // 2, :shape[1] // 2] = 1
lab[shape[0] // 2:, :shape[1] // 2] = 2
lab[:shape[0] // 2, shape[1] // 2:] = 3
lab[shape[0] // 2:, shape[1] // 2:] = 5  # label 4 unused: a node without streamlines
nib.save(nib.Nifti1Image(lab, aff), "parc.nii.gz")
nib.save(nib.Nifti1Image((tt[..., 0] > 0.2).astype(np.float32), aff), "gmwmi.nii.gz")
# a seed mask and an include region on grids of their own (1.5 mm voxels, shifted)
other = aff.copy()
other[:3, :3] *= 0.75
other[:3, 3] += [1.0, -2.0, 0.5]
big = tuple(int(n / 0.75) for n in shape)
ijk = np.indices(big).reshape(3, -1).T
world = ijk @ other[:3, :3].T + other[:3, 3]
wm = np.asanyarray(nib.load(p["wm"]).dataobj)
arc = np.asanyarray(nib.load(p["arc"]).dataobj)
near = np.rint(fs.world_to_voxel(aff, world)).astype(int)
inside = np.all((near >= 0) & (near < np.array(shape)), axis=1)
seed_other = np.zeros(len(ijk), np.uint8)
seed_other[inside] = wm[tuple(near[inside].T)]
incl_other = np.zeros(len(ijk), np.uint8)
incl_other[inside] = arc[tuple(near[inside].T)]
nib.save(nib.Nifti1Image(seed_other.reshape(big), other), "seed_other.nii.gz")
nib.save(nib.Nifti1Image(incl_other.reshape(big), other), "arc_other.nii.gz")

fod_img = nib.load(p["fod"])
fod = np.asanyarray(fod_img.dataobj)
common = ["--threads", 2, "--device", "cpu", "--rseed", 5]
calls = []


def progress(stage, fraction):
    calls.append((stage, fraction))


def tck_points(path):
    """The float32 points of a .tck as the file holds them, and its header."""
    data = open(path, "rb").read()
    off = int(re.search(rb"file: \. (\d+)", data).group(1))
    return np.frombuffer(data[off:], dtype="<f4").reshape(-1, 3), fs.tck_header(path)


def as_tck_points(sl):
    """The streamlines as a .tck lays them out: each followed by NaN NaN NaN, Inf at the end."""
    sep = np.full((1, 3), np.nan, np.float32)
    parts = [x for s in sl for x in (np.asarray(s, np.float32), sep)]
    return np.concatenate(parts + [np.full((1, 3), np.inf, np.float32)]).astype("<f4")


def same_tracks(label, sl, out):
    want, head = tck_points(f"{out}/tracks.tck")
    got = as_tck_points(sl)
    prov = sl.provenance["results"]
    ok = got.tobytes() == want.tobytes() and int(head["count"]) == len(sl) and \
        int(head["total_count"]) == prov["total_count"] and \
        float(head["step_size"]) == float("%g" % sl.step_size)
    check(label, ok, f"{len(sl)} streamlines, {got.shape[0]} rows against {want.shape[0]} "
          f"(count {head.get('count')}, total_count {head.get('total_count')} vs "
          f"{prov['total_count']})")


def track(*args, **kw):
    kw.setdefault("progress", progress)
    kw.setdefault("threads", 2)
    kw.setdefault("device", "cpu")
    kw.setdefault("rseed", 5)
    return dm.track(*args, **kw)


# ---- iFOD2 with the maps; the FOD in every form ----
dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", "cli_a", "--select", 300, *common,
      "--tdi", "tdi.nii.gz", "--tdi-voxel", 1.3, "--connectome", "parc.nii.gz")
calls.clear()
sl = track(fod_img, seed=p["wm"], select=300)
same_tracks("python-track-ifod2-equals-command", sl, "cli_a")
stages = [s for s, _ in calls]
check("python-track-progress-stages", stages and stages[0] == "load" and "track" in stages
      and ("track", 1.0) in calls and all(0 <= f <= 1 for _, f in calls),
      f"{sorted(set(stages))} {calls[-3:]}")
check("python-track-is-array-sequence",
      isinstance(sl, nib.streamlines.ArraySequence) and sl[0].dtype == np.float32
      and sl[0].shape[1] == 3 and sl.provenance["results"]["algorithm"] == "iFOD2",
      f"{type(sl)} {sl[0].dtype}")
zooms = np.array(fod_img.header.get_zooms()[:3])
forms = {"path": (p["fod"], {}), "c-order": (np.ascontiguousarray(fod), dict(affine=aff)),
         "fortran": (np.asfortranarray(fod), dict(affine=aff)),
         "float64": (fod.astype(np.float64), dict(affine=aff)),
         "view": (np.ascontiguousarray(fod[::-1])[::-1], dict(affine=aff))}
differ = []
for label, (x, extra) in forms.items():
    other_sl = track(x, seed=wm.astype(bool), select=300, voxel_size=zooms, progress=False,
                     **extra)
    if as_tck_points(other_sl).tobytes() != as_tck_points(sl).tobytes():
        differ.append(label)
check("python-track-fod-forms-same", not differ, f"differing: {differ}")

# the maps of the command's --tdi and --connectome, from the streamlines in memory
r = dm.tdi(sl, fod_img, voxel=1.3, progress=False)
want_img = nib.load("cli_a/tdi.nii.gz")
want = np.asanyarray(want_img.dataobj)
check("python-tdi-equals-track-tdi", r["tdi"].dtype == want.dtype == np.uint32 and
      r["tdi"].shape == want.shape and r["tdi"].tobytes(order="F") == want.tobytes(order="F")
      and np.allclose(r.affine, want_img.affine, atol=1e-5),
      f"{r['tdi'].dtype} {r['tdi'].shape} vs {want.dtype} {want.shape}, {int(r['tdi'].sum())} "
      f"vs {int(want.sum())}")


def csv(m):
    return "".join(",".join("%.15g" % v for v in row) + "\n" for row in m)


c = dm.connectome(sl, "parc.nii.gz", progress=False)
check("python-connectome-equals-track-connectome",
      csv(c["connectome"]) == open("cli_a/connectome.csv").read()
      and csv(c["mean_length"]) == open("cli_a/mean_length.csv").read()
      and c.provenance["results"]["nodes"] == 5 and c["connectome"].sum() > 0,
      str(c.provenance["results"]))

# dimoc tdi and dimoc connectome on the .tck, with weights
w = np.random.default_rng(3).uniform(0, 2, len(sl)).astype(np.float32)
np.savetxt("w.txt", w, fmt="%.9g")
dimoc("tdi", "cli_a/tracks.tck", "--template", p["fod"], "--out", "t_plain.nii.gz")
dimoc("tdi", "cli_a/tracks.tck", "--template", p["fod"], "--out", "t_w.nii.gz", "--voxel",
      "0.7,1,1.5", "--weights", "w.txt")
dimoc("tdi", "cli_a/tracks.tck", "--template", "parc.nii.gz", "--out", "t_exact.nii.gz",
      "--exact")
dimoc("connectome", "cli_a/tracks.tck", "--parc", "parc.nii.gz", "--out", "cli_cw", "--weights",
      "w.txt")
tck_file = nib.streamlines.load("cli_a/tracks.tck")
cases = {"plain": ("t_plain.nii.gz", dm.tdi(sl, aff, shape, voxel_size=zooms, progress=False)),
         "nibabel-tck": ("t_plain.nii.gz", dm.tdi(tck_file, fod_img, progress=False)),
         "weighted-voxel": ("t_w.nii.gz", dm.tdi(sl, fod_img, voxel=(0.7, 1, 1.5), weights=w,
                                                  progress=False)),
         "exact": ("t_exact.nii.gz", dm.tdi(list(sl), "parc.nii.gz", exact=True,
                                            progress=False))}
bad = []
for label, (path, r) in cases.items():
    img = nib.load(path)
    want = np.asanyarray(img.dataobj)
    if r["tdi"].dtype != want.dtype or r["tdi"].tobytes(order="F") != want.tobytes(order="F") \
            or not np.allclose(r.affine, img.affine, atol=1e-5):
        bad.append(label)
check("python-tdi-equals-command", not bad, f"differing: {bad}")
c = dm.connectome(sl, lab, aff, weights="w.txt", progress=False)
check("python-connectome-weighted-equals-command",
      csv(c["connectome"]) == open("cli_cw/connectome.csv").read()
      and csv(c["mean_length"]) == open("cli_cw/mean_length.csv").read(),
      str(c.provenance["results"]))

# ---- the other algorithms and options ----
runs = [
    ("ifod1-regions", ["--algorithm", "ifod1", "--select", 150, "--include", "arc_other.nii.gz",
                       "--exclude", p["third"]],
     dict(algorithm="ifod1", select=150, include="arc_other.nii.gz",
          exclude=nib.load(p["third"]))),
    ("sd-stream-seeds-mask", ["--algorithm", "sd_stream", "--seeds", 400, "--select", 0,
                              "--mask", p["brain"], "--unidirectional", "--min-length", 6,
                              "--max-length", 40, "--angle", 50],
     dict(algorithm="sd_stream", seeds=400, select=0, mask=[p["brain"]], unidirectional=True,
          min_length=6, max_length=40, angle=50)),
    ("act-gmwmi-backtrack-double", ["--act", tt_path, "--seed-gmwmi", "gmwmi.nii.gz",
                                    "--select", 120, "--backtrack", "--precision", "double",
                                    "--crop-at-gmwmi"],
     dict(act=nib.load(tt_path), seed_gmwmi="gmwmi.nii.gz", select=120, backtrack=True,
          precision="double", crop_at_gmwmi=True)),
    ("per-voxel-step-cutoff", ["--seed-random-per-voxel", 1, "--step", 0.8, "--cutoff", 0.15,
                               "--samples", 3, "--power", 0.5, "--trials", 500],
     dict(seed_random_per_voxel=1, step=0.8, cutoff=0.15, samples=3, power=0.5, trials=500)),
    ("seed-other-grid", ["--seed", "seed_other.nii.gz", "--select", 100],
     dict(seed="seed_other.nii.gz", select=100)),
]
for label, cli, kw in runs:
    seed_cli = [] if "--seed-gmwmi" in cli or "--seed" in cli else ["--seed", p["wm"]]
    dimoc("track", "--fod", p["fod"], *seed_cli, "--out", f"cli_{label}", *common, *cli)
    if "seed" not in kw and "seed_gmwmi" not in kw:
        kw["seed"] = wm
    same_tracks(f"python-track-{label}-equals-command", track(fod_img, progress=False, **kw),
                f"cli_{label}")


# ---- wrong arguments: ValueError naming the argument, before any work ----
def refused(label, word, fn, *args, **kw):
    kw.setdefault("progress", progress)
    check_refused_call(label, word, calls, fn, *args, **kw)


def t(*args, **kw):
    kw.setdefault("seed", wm)
    return dm.track(*args, **kw)


nan_aff = aff.copy()
nan_aff[0, 3] = np.nan
refused("python-track-refuses-ndim", "fod", t, fod[..., 0], aff)
refused("python-track-refuses-coefficients", "fod", t, fod[..., :7], aff)
refused("python-track-refuses-dtype", "fod", t, fod.astype(complex), aff)
refused("python-track-refuses-no-affine", "affine", t, fod)
refused("python-track-refuses-affine-3x3", "affine", t, fod, aff[:3, :3])
refused("python-track-refuses-affine-nan", "affine", t, fod, nan_aff)
refused("python-track-refuses-seed-grid", "seed", t, fod_img, seed=wm[:-1])
refused("python-track-refuses-seed-and-gmwmi", "seed", t, fod_img, seed_gmwmi=wm, act=tt)
refused("python-track-refuses-no-seed", "seed", dm.track, fod_img)
refused("python-track-refuses-gmwmi-no-act", "seed_gmwmi", dm.track, fod_img, seed_gmwmi=wm)
refused("python-track-refuses-act-volumes", "act", t, fod_img, act=tt[..., :4])
refused("python-track-refuses-step-nan", "step", t, fod_img, step=float("nan"))
refused("python-track-refuses-step-negative", "step", t, fod_img, step=-1)
refused("python-track-refuses-angle", "angle", t, fod_img, angle=120)
refused("python-track-refuses-lengths", "max_length", t, fod_img, min_length=10, max_length=5)
refused("python-track-refuses-algorithm", "algorithm", t, fod_img, algorithm="tensor_det")
refused("python-track-refuses-select", "select", t, fod_img, select=-1)
refused("python-track-refuses-backtrack", "backtrack", t, fod_img, backtrack=True)
refused("python-track-refuses-per-voxel-select", "seed_random_per_voxel", t, fod_img,
        seed_random_per_voxel=2, select=10)
refused("python-track-refuses-unknown", "tdi", t, fod_img, tdi="x.nii.gz")
refused("python-track-refuses-region-grid", "include", t, fod_img, include=arc[:, :-1])
nan_sl = [np.array(s) for s in sl[:5]]
nan_sl[2][1, 0] = np.nan
refused("python-tdi-refuses-nan-point", "streamlines", dm.tdi, nan_sl, fod_img)
refused("python-tdi-refuses-weights-count", "weights", dm.tdi, sl, fod_img, weights=w[:-1])
refused("python-tdi-refuses-weights-negative", "weights", dm.tdi, sl, fod_img, weights=-w)
refused("python-tdi-refuses-no-shape", "shape", dm.tdi, sl, aff)
refused("python-tdi-refuses-voxel", "voxel", dm.tdi, sl, fod_img, voxel=-1)
refused("python-tdi-refuses-not-streamlines", "streamlines", dm.tdi, [np.zeros((4, 2))], fod_img)
refused("python-connectome-refuses-fractions", "parcellation", dm.connectome, sl, lab + 0.5, aff)
refused("python-connectome-refuses-negative", "parcellation", dm.connectome, sl, -lab, aff)
refused("python-connectome-refuses-other-grid", "parcellation", dm.connectome, sl,
        "parc.nii.gz", other)
refused("python-connectome-refuses-no-affine", "affine", dm.connectome, sl, lab)
refused("python-connectome-refuses-no-labels", "parcellation", dm.connectome, sl, 0 * lab, aff)

# ---- cancel from another thread; Ctrl-C; the library usable after either ----
long_run = dict(seeds=1000000, select=0, cutoff=0.05, progress=False)
ev = threading.Event()
threading.Timer(0.5, ev.set).start()
t0 = time.time()
try:
    track(fod_img, seed=wm, cancel=ev, **long_run)
    check("python-track-cancel", False, "not cancelled")
except dm.Cancelled:
    late = time.time() - t0 - 0.5
    check("python-track-cancel", late < 1.0, f"stopped {late:.2f} s after the cancel")
same_tracks("python-track-after-cancel-equals-command", track(fod_img, seed=p["wm"], select=300),
            "cli_a")

script = r"""
import os, signal, sys, threading, time, json
sys.path.insert(0, sys.argv[1])
import numpy as np, nibabel as nib, dimoc
fod = nib.load(sys.argv[2])
threading.Timer(0.6, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.time()
out = {}
try:
    dimoc.track(fod, seed=sys.argv[3], seeds=1000000, select=0, cutoff=0.05, progress=False,
                threads=2, device="cpu")
    out["raised"] = None
except KeyboardInterrupt:
    out["raised"] = "KeyboardInterrupt"
out["late"] = time.time() - t0 - 0.6
sl = dimoc.track(fod, seed=sys.argv[3], select=300, rseed=5, threads=2, device="cpu",
                 progress=False)
out["after"] = [float(x) for x in np.concatenate(list(sl))[:50].ravel()]
out["count"] = len(sl)
print(json.dumps(out))
"""
proc = subprocess.run([sys.executable, "-c", script, PYTHON_SOURCE, p["fod"],
                       p["wm"]], capture_output=True, text=True, timeout=300)
try:
    out = json.loads(proc.stdout.strip().splitlines()[-1])
except (ValueError, IndexError):
    out = {}
first = np.concatenate(list(sl))[:50].ravel().astype(float).tolist()
check("python-track-ctrl-c", out.get("raised") == "KeyboardInterrupt"
      and out.get("late", 9) < 1.0 and out.get("after") == first and out.get("count") == 300,
      f"{ {k: v for k, v in out.items() if k != 'after'} } {proc.stderr[-500:]}")

# ---- the library prints nothing; its warnings are DimocWarning ----
saved = os.dup(2)
with tempfile.TemporaryFile() as err, warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    os.dup2(err.fileno(), 2)
    try:
        quiet_sl = track(fod_img, seed=wm, select=20, stop=True, progress=False)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    err.seek(0)
    printed = err.read().decode()
mine = [str(x.message) for x in caught if issubclass(x.category, dm.DimocWarning)]
check("python-track-prints-nothing", printed == "" and len(quiet_sl) == 20
      and any("--stop does nothing" in x for x in mine) and list(quiet_sl.warnings) == mine,
      f"printed {printed!r}; warnings {mine}")
finish()
