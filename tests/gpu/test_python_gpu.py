"""dimoc.fit, dimoc.track and dimoc.commit on the GPU (python/dimoc over the C API, device "gpu")
against the commands with --device gpu on the same data, imported from the source tree:

- fit: the maps and the status are `dimoc fit --device gpu`'s byte for byte for ball_1_stick by
  LM, a grid search then LM, LM then MCMC with its samples (same seed), and dti in float
  precision; device="auto" fits on the GPU here and gives the same bytes; the GPU's LM estimates
  agree with the CPU's (both converge to the same minimum); a cancel from another thread stops
  a long GPU MCMC fit within a second (dimoc.FitCancelled) and the next GPU fit gives the
  command's maps again;
- track: iFOD2 and SD_STREAM in double precision, the streamlines the command's tracks.tck point
  for point, with the provenance naming the GPU;
- commit: the weights as the command prints them and every map byte for byte, on the GPU."""
import json
import os
import re
import sys
import threading
import time

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
import commitpeer as cp  # noqa: E402
import fodsim as fs  # noqa: E402
from dmtest import OBLIQUE, ball_stick_dwi, check, dimoc, finish, source_dimoc, workdir  # noqa: E402

dm = source_dimoc()

d = workdir("python_gpu")
os.chdir(d)
grid, affine = (16, 12, 10), OBLIQUE
b, g, truth = ball_stick_dwi("3x0,24x1000,24x2500", np.random.default_rng(11), grid, 40, 3)
data = np.asanyarray(nib.load("sim.nii.gz").dataobj).astype(np.float32)
nib.save(nib.Nifti1Image(data, affine), "dwi.nii.gz")
mask = np.ones(grid, np.uint8)
mask[0] = 0
nib.save(nib.Nifti1Image(mask, affine), "mask.nii.gz")
data = np.asanyarray(nib.load("dwi.nii.gz").dataobj)
common = ["--data", "dwi.nii.gz", "--bvals", "bvals", "--bvecs", "bvecs", "--mask", "mask.nii.gz",
          "--quiet"]


def same_maps(label, result, out):
    """Every map of the command's folder equals the result's, bytes and type; the status too."""
    files = sorted(f[:-7] for f in os.listdir(out) if f.endswith(".nii.gz"))
    bad = []
    for name in files:
        want = np.asanyarray(nib.load(os.path.join(out, name + ".nii.gz")).dataobj)
        got = result.status if name == "status" else result.get(name)
        if got is None or got.dtype != want.dtype or got.tobytes(order="F") != \
                want.tobytes(order="F"):
            bad.append(name)
    device = json.load(open(os.path.join(out, "provenance.json"))).get("device", "?")
    check(label, files and not bad and str(result.provenance["device"]).startswith("gpu")
          and str(device).startswith("gpu"),
          f"differing {bad} of {files}; devices {result.provenance['device']} / {device}")


def fit(*args, **kw):
    kw.setdefault("device", "gpu")
    kw.setdefault("progress", False)
    return dm.fit(*args, **kw)


# ---- fits ----
dimoc("fit", "ball_1_stick", *common, "--device", "gpu", "--out", "cli_lm")
lm = fit("ball_1_stick", data, b, g, mask=mask)
same_maps("python-gpu-fit-lm-equals-command", lm, "cli_lm")
auto = fit("ball_1_stick", "dwi.nii.gz", b, g, mask="mask.nii.gz", device="auto")
same_maps("python-gpu-fit-auto-on-gpu", auto, "cli_lm")

dimoc("fit", "ball_1_stick", *common, "--device", "gpu", "--method", "grid,lm", "--grid",
      "f1=0.2,0.5,0.8", "--grid", "d=1e-3:5e-4:2e-3", "--out", "cli_grid")
same_maps("python-gpu-fit-grid-equals-command",
          fit("ball_1_stick", data, b, g, mask=mask, method=["grid", "lm"],
              grid={"f1": [0.2, 0.5, 0.8], "d": "1e-3:5e-4:2e-3"}), "cli_grid")

mcmc = ["--method", "lm,mcmc", "--burnin", 100, "--jumps", 200, "--sample-every", 20, "--seed", 7,
        "--save-samples"]
dimoc("fit", "ball_1_stick", *common, "--device", "gpu", *mcmc, "--out", "cli_mcmc")
same_maps("python-gpu-fit-mcmc-equals-command",
          fit("ball_1_stick", data, b, g, mask=mask, method="lm,mcmc", burnin=100, jumps=200,
              sample_every=20, seed=7, save_samples=True), "cli_mcmc")

dimoc("fit", "dti", *common, "--device", "gpu", "--precision", "float", "--out", "cli_dti")
same_maps("python-gpu-fit-dti-float-equals-command",
          fit("dti", data, b, g, mask=mask, precision="float"), "cli_dti")

cpu = fit("ball_1_stick", data, b, g, mask=mask, device="cpu", threads=2)
both = (lm.status == 1) & (cpu.status == 1)
rel = np.abs(lm["d"][both] - cpu["d"][both]) / cpu["d"][both]
df = np.abs(lm["f1"][both] - cpu["f1"][both])
check("python-gpu-fit-lm-agrees-with-cpu", both.sum() >= 0.95 * mask.sum()
      and np.percentile(rel, 99) < 1e-4 and np.percentile(df, 99) < 1e-4,
      f"{both.sum()} of {mask.sum()} fitted on both; 99th percentile |d| {np.percentile(rel, 99):.1e}"
      f" relative, |f1| {np.percentile(df, 99):.1e}")

# a cancel during a long GPU MCMC fit (long chains, few samples: the kernel's time, not the
# samples' memory), then the library again
big = np.tile(data, (6, 6, 6, 1))
ev = threading.Event()
threading.Timer(2.0, ev.set).start()
t0 = time.time()
try:
    fit("ball_1_stick", big, b, g, method="lm,mcmc", burnin=40000, jumps=1000, sample_every=50,
        cancel=ev)
    check("python-gpu-fit-cancel", False, f"not cancelled ({time.time() - t0:.1f} s)")
except dm.FitCancelled:
    late = time.time() - t0 - 2.0
    check("python-gpu-fit-cancel", late < 1.0, f"stopped {late:.2f} s after the cancel")
same_maps("python-gpu-fit-after-cancel-equals-command", fit("ball_1_stick", data, b, g,
                                                            mask=mask), "cli_lm")


# ---- tracking ----
def tck_points(path):
    raw = open(path, "rb").read()
    off = int(re.search(rb"file: \. (\d+)", raw).group(1))
    return np.frombuffer(raw[off:], dtype="<f4")


def as_tck_points(sl):
    sep = np.full((1, 3), np.nan, np.float32)
    parts = [x for s in sl for x in (np.asarray(s, np.float32), sep)]
    return np.concatenate(parts + [np.full((1, 3), np.inf, np.float32)]).astype("<f4").ravel()


p = fs.phantom(d)
for alg in ("ifod2", "sd_stream"):
    out = f"cli_track_{alg}"
    dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", out, "--algorithm", alg,
          "--select", 2000, "--rseed", 5, "--device", "gpu", "--precision", "double")
    sl = dm.track(p["fod"], seed=p["wm"], algorithm=alg, select=2000, rseed=5, device="gpu",
                  precision="double", progress=False)
    device = json.load(open(f"{out}/provenance.json"))["results"].get("device", "?")
    got, want = as_tck_points(sl), tck_points(f"{out}/tracks.tck")
    n = min(got.size, want.size)
    differ = np.nonzero(got[:n].view(np.uint32) != want[:n].view(np.uint32))[0]
    check(f"python-gpu-track-{alg}-equals-command",
          got.tobytes() == want.tobytes() and sl.provenance["results"].get("device") != "cpu"
          and device != "cpu",
          f"{len(sl)} streamlines; {got.size} values against the file's {want.size}, "
          f"{differ.size} differing from {differ[:1]} (got {got[differ[:3]]}, file "
          f"{want[differ[:3]]}); tail of the file {want[-6:]}; devices "
          f"{sl.provenance['results'].get('device')} / {device}")

# ---- COMMIT ----
q = cp.phantom(os.path.join(d, "commit"), n_true=60, n_false=15, noise=0.02)
dimoc("commit", "--tractogram", q["tck"], "--data", q["dwi"], "--bvals", q["bvals_file"],
      "--bvecs", q["bvecs_file"], "--mask", q["wm"], "--device", "gpu", "--out", "cli_commit")
r = dm.commit(q["tck"], q["dwi"], np.loadtxt(q["bvals_file"]), np.loadtxt(q["bvecs_file"]),
              mask=q["wm"], device="gpu", progress=False)
text = "".join("%.5e\n" % x for x in r["weights"])
files = sorted(f[:-7] for f in os.listdir("cli_commit") if f.endswith(".nii.gz"))
bad = [f for f in files if r.get(f) is None or r[f].tobytes(order="F") != np.asanyarray(
    nib.load(f"cli_commit/{f}.nii.gz").dataobj).tobytes(order="F")]
check("python-gpu-commit-equals-command", text == open("cli_commit/streamline_weights.txt").read()
      and files and not bad, f"differing {bad} of {files}; weights "
      f"{'same' if text == open('cli_commit/streamline_weights.txt').read() else 'differ'}")
finish()
