"""dimoc.fit (python/dimoc/_fit.py over the C API's dimoc_fit) against `dimoc fit` on the same
simulated data (`dimoc simulate`), imported from the source tree (python/, build/'s library):

- the maps and the status are the command's byte for byte: ball_1_stick by LM (the data as an
  array in Fortran and C order, as float64, as a nibabel image and as a path), LM then MCMC
  with its samples, a grid search then LM, dti in float precision with float64 maps, a cascade
  (--then) as fit(init_from=the first result), the model's measure from a file (exp_decay),
  the starts and held parameters (--init, --fixed), --predicted and --ic; to_nifti writes the
  command's values;
- LM's estimates against the simulation's truth;
- every wrong argument is a ValueError naming it, raised before any work (no progress
  callback was called);
- a cancel from another thread stops a long MCMC fit within a second (FitCancelled), Ctrl-C
  (SIGINT) raises KeyboardInterrupt as soon, and the next fit gives the reference maps;
- the GIL is free while the library fits; the library prints nothing (its warnings become
  DimocWarning); device="auto" fits on the CPU here; the progress callback sees each stage."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import nibabel as nib
import numpy as np

from dmtest import (OBLIQUE, PYTHON_SOURCE, ball_stick_dwi, check, check_refused_call, dimoc,
                    finish, load, save, source_dimoc, workdir)

dm = source_dimoc()

d = workdir("python_fit")
os.chdir(d)
bvals, bvecs = "bvals", "bvecs"
# Truth maps on an oblique 8 x 6 x 5 grid, the DWI simulated from them with Rician noise.
grid, affine = (8, 6, 5), OBLIQUE
b, g, truth = ball_stick_dwi("3x0,24x1000,24x2500", np.random.default_rng(7), grid, 40, 3)
M = b.size
sim = load("sim.nii.gz").astype(np.float32)
sim[0, 0, 0, 5] = np.nan  # outside the mask
sim[1, 0, 0, :] = 0       # inside: status 4, as the command's
img = nib.Nifti1Image(sim, affine)
img.set_qform(affine, code=1)
img.set_sform(affine, code=2)
nib.save(img, "dwi.nii.gz")
mask = np.ones(grid, np.uint8)
mask[0, 0, 0] = 0
mask[7] = 0
nib.save(nib.Nifti1Image(mask, affine), "mask.nii.gz")
data = np.asanyarray(nib.load("dwi.nii.gz").dataobj)  # as the command reads it
common = ["--data", "dwi.nii.gz", "--bvals", bvals, "--bvecs", bvecs, "--mask", "mask.nii.gz",
          "--quiet", "--threads", 2]
calls = []


def progress(stage, fraction):
    calls.append((stage, fraction))


def same_as_command(result, out, label):
    """Every map of the command's folder equals the result's, bytes and type; the status too."""
    files = sorted(f[:-7] for f in os.listdir(out) if f.endswith(".nii.gz"))
    names = sorted(list(result) + ["status"])
    bad = []
    for name in files:
        want = np.asanyarray(nib.load(os.path.join(out, name + ".nii.gz")).dataobj)
        got = result.status if name == "status" else result.get(name)
        if got is None or got.dtype != want.dtype or got.shape != want.shape or \
                got.tobytes(order="F") != want.tobytes(order="F"):
            bad.append(name)
    check(label, files == names and not bad,
          f"maps {names} vs files {files}; differing: {bad}")


def fit(*args, **kw):
    kw.setdefault("progress", progress)
    kw.setdefault("threads", 2)
    return dm.fit(*args, **kw)


# ---- LM, the data in every form ----
dimoc("fit", "ball_1_stick", *common, "--out", "cli_lm")
calls.clear()
r = fit("ball_1_stick", data, b, g, mask=mask)
same_as_command(r, "cli_lm", "python-fit-lm-equals-command")
stages = [s for s, _ in calls]
check("python-fit-progress-stages", stages and stages[0] == "load" and "compile" in stages
      and "fit" in stages and stages[-1] == "outputs" and (("fit", 1.0) in calls)
      and all(0 <= f <= 1 for _, f in calls), f"{sorted(set(stages))} {calls[-3:]}")
check("python-fit-device-auto-cpu", r.provenance["device"].startswith("cpu")
      and r.provenance["inputs"]["data"] == "data", r.provenance["device"])
forms = {"c-order": np.ascontiguousarray(data), "float64": data.astype(np.float64),
         "image": nib.load("dwi.nii.gz"), "path": "dwi.nii.gz",
         "view": np.asfortranarray(data[::-1])[::-1]}
differ = []
for label, x in forms.items():
    other = fit("ball_1_stick", x, b, g.T, mask=mask == 1, progress=False)
    if sorted(other) != sorted(r) or any(other[k].tobytes() != r[k].tobytes() for k in r) or \
            other.status.tobytes() != r.status.tobytes():
        differ.append(label)
check("python-fit-data-forms-same", not differ, f"differing: {differ}")

# the estimates against the truth, where fitted
fitted = r.status == 1
err_d = np.median(np.abs(r["d"][fitted] - truth["d"][fitted]) / truth["d"][fitted])
err_f = np.median(np.abs(r["f1"][fitted] - truth["f1"][fitted]))
v = np.stack([np.sin(truth["th1"]) * np.cos(truth["ph1"]), np.sin(truth["th1"]) *
              np.sin(truth["ph1"]), np.cos(truth["th1"])], -1)
cosang = np.abs(np.sum(r["dyads1"] * v, axis=-1))[fitted]
angle = np.degrees(np.arccos(np.clip(np.median(cosang), 0, 1)))
check("python-fit-recovers-truth", fitted.sum() >= 180 and err_d < 0.06 and err_f < 0.05
      and angle < 6, f"{fitted.sum()} fitted; median |d| error {err_d:.3f}, |f1| {err_f:.3f}, "
      f"angle {angle:.1f} deg")

# ---- MCMC after LM, with the samples, --predicted and --ic ----
mcmc = ["--method", "lm,mcmc", "--burnin", 100, "--jumps", 200, "--sample-every", 20, "--seed",
        7, "--save-samples", "--predicted", "--ic"]
dimoc("fit", "ball_1_stick", *common, *mcmc, "--out", "cli_mcmc")
r = fit("ball_1_stick", data, b, g, mask=mask, method="lm,mcmc", burnin=100, jumps=200,
        sample_every=20, seed=7, save_samples=True, predicted=True, ic=True)
same_as_command(r, "cli_mcmc", "python-fit-mcmc-equals-command")
check("python-fit-mcmc-kinds", r.kind("S0_sd") == "std" and r.kind("S0_samples") == "samples"
      and r["S0_samples"].shape == grid + (10,) and r["predicted"].shape == grid + (M,)
      and r.kind("BIC") == "ic", str({k: r.kind(k) for k in r}))

# ---- a grid search then LM ----
dimoc("fit", "ball_1_stick", *common, "--method", "grid,lm", "--grid", "f1=0.2,0.5,0.8",
      "--grid", "d=1e-3:5e-4:2e-3", "--out", "cli_grid")
r = fit("ball_1_stick", data, b, g, mask=mask, method=["grid", "lm"],
        grid={"f1": [0.2, 0.5, 0.8], "d": "1e-3:5e-4:2e-3"})
same_as_command(r, "cli_grid", "python-fit-grid-equals-command")

# ---- dti, float precision, float64 maps, held and started parameters ----
dimoc("fit", "dti", *common, "--precision", "float", "--out-type", "float64", "--out", "cli_dti")
r = fit("dti", data, b, g, mask=mask, precision="float", out_type="float64")
same_as_command(r, "cli_dti", "python-fit-dti-float-equals-command")
init_map = np.full(grid, 1.2e-3, np.float32)
save("dinit.nii.gz", init_map, affine)
dimoc("fit", "ball_1_stick", *common, "--fixed", "f1", "--init", "f1=0.45,d=dinit.nii.gz",
      "--out", "cli_init")
r = fit("ball_1_stick", data, b, g, mask=mask, fixed=["f1"], init={"f1": 0.45, "d": init_map})
same_as_command(r, "cli_init", "python-fit-init-fixed-equals-command")

# ---- a cascade: --then is fit(init_from=the previous result) ----
dimoc("fit", "ball_1_stick", *common, "--out", "cli_c1", "--method", "grid", "--grid",
      "f1=0.2,0.6", "--then", "--out", "cli_c2", "--method", "lm")
r1 = fit("ball_1_stick", data, b, g, mask=mask, method="grid", grid={"f1": [0.2, 0.6]})
r2 = fit("ball_1_stick", data, b, g, mask=mask, init_from=r1)
same_as_command(r1, "cli_c1", "python-fit-cascade-first-equals-command")
same_as_command(r2, "cli_c2", "python-fit-cascade-then-equals-init-from")

# ---- a model's measure from a file (exp_decay's TE) ----
te = np.linspace(0.02, 0.1, M)
np.savetxt("TE.txt", te)
dimoc("fit", "exp_decay", "--data", "dwi.nii.gz", "--measure", "TE=TE.txt", "--mask",
      "mask.nii.gz", "--quiet", "--out", "cli_exp")
r = fit("exp_decay", data, mask=mask, measure={"TE": te})
same_as_command(r, "cli_exp", "python-fit-measure-equals-command")
r = fit("exp_decay", data, mask=mask, measure={"TE": "TE.txt"})
same_as_command(r, "cli_exp", "python-fit-measure-file-equals-command")

# ---- to_nifti: the command's values, the data's geometry ----
r = fit("ball_1_stick", "dwi.nii.gz", b, g, mask="mask.nii.gz")
r.to_nifti("py_lm")
bad = [f for f in os.listdir("cli_lm") if f.endswith(".nii.gz") and not np.array_equal(
    load(os.path.join("py_lm", f)), load(os.path.join("cli_lm", f)))]
same_affine = np.allclose(nib.load("py_lm/d.nii.gz").affine, affine, atol=1e-5)
prov = json.load(open("py_lm/provenance.json"))
check("python-fit-to-nifti", not bad and same_affine and prov["model"]["name"] == "ball_1_stick",
      f"differing {bad}, affine {same_affine}")


# ---- wrong arguments: ValueError naming the argument, before any work ----
def refused(label, word, *args, **kw):
    check_refused_call(label, word, calls, fit, *args, **kw)


clean = np.nan_to_num(data)  # (the NaN outside the mask is refused without one)
nan_inside = data.copy()
nan_inside[2, 2, 2, 3] = np.inf
g_bad = g.copy()
g_bad[:, 10] *= 0.5
other_affine = affine.copy()
other_affine[0, 3] += 5
refused("python-fit-refuses-ndim", "data", "ball_1_stick", clean[..., 0], b, g)
refused("python-fit-refuses-dtype", "data", "ball_1_stick", clean.astype(complex), b, g)
refused("python-fit-refuses-strings", "data", "ball_1_stick", np.full((2, 2, 2, M), "x"), b, g)
refused("python-fit-refuses-nan", "data", "ball_1_stick", nan_inside, b, g, mask=mask)
refused("python-fit-refuses-bvals-count", "bvals", "ball_1_stick", clean, b[:-1], g)
refused("python-fit-refuses-bvecs-count", "bvecs", "ball_1_stick", clean, b, g[:, :-1])
refused("python-fit-refuses-bvecs-not-unit", "bvecs", "ball_1_stick", clean, b, g_bad)
refused("python-fit-refuses-negative-b", "bvals", "ball_1_stick", clean, -b, g)
refused("python-fit-refuses-no-bvals", "bvals", "ball_1_stick", clean)
refused("python-fit-refuses-mask-grid", "mask", "ball_1_stick", clean, b, g, mask=mask[:-1])
refused("python-fit-refuses-mask-affine", "mask", "ball_1_stick", nib.load("dwi.nii.gz"), b, g,
        mask=nib.Nifti1Image(mask, other_affine))
refused("python-fit-refuses-empty-mask", "mask", "ball_1_stick", clean, b, g, mask=0 * mask)
refused("python-fit-refuses-unknown-option", "colour", "ball_1_stick", clean, b, g, colour=1)
refused("python-fit-refuses-then", "then", "ball_1_stick", clean, b, g, then={"method": "lm"})
refused("python-fit-refuses-method", "method", "ball_1_stick", clean, b, g, method="lbfgs")
refused("python-fit-refuses-device", "device", "ball_1_stick", clean, b, g, device="tpu")
refused("python-fit-refuses-fixed-name", "fixed", "ball_1_stick", clean, b, g, fixed="kappa")
refused("python-fit-refuses-init-bounds", "init", "ball_1_stick", clean, b, g, init={"f1": 2})
refused("python-fit-refuses-init-map", "init", "ball_1_stick", clean, b, g,
        init={"d": np.ones((3, 3, 3))})
refused("python-fit-refuses-grid-name", "grid", "ball_1_stick", clean, b, g, method="grid",
        grid={"kappa": [1, 2]})
refused("python-fit-refuses-jumps", "jumps", "ball_1_stick", clean, b, g, jumps=0)
refused("python-fit-refuses-precision", "precision", "ball_1_stick", clean, b, g,
        precision="half")
refused("python-fit-refuses-gtab-and-bvals", "gtab", "ball_1_stick", clean, b, g,
        gtab=type("G", (), {"bvals": b, "bvecs": g.T})())
refused("python-fit-refuses-measure", "measure", "exp_decay", clean)
refused("python-fit-refuses-few-volumes", "volumes", "ball_1_stick", clean[..., :4], b[:4],
        g[:, :4])

# a DIPY GradientTable (bvals and bvecs from it) gives the same maps
try:
    from dipy.core.gradients import gradient_table
    gt = gradient_table(b, bvecs=g.T)
    r = fit("ball_1_stick", data, mask=mask, gtab=gt, progress=False)
    same_as_command(r, "cli_lm", "python-fit-gtab-equals-command")
except ImportError:
    print("skipped: DIPY is not installed")


# ---- cancel from another thread; Ctrl-C; the library usable after either ----
big = np.tile(data[:, :, 1:4], (4, 4, 4, 1))  # 6144 voxels: MCMC for some seconds
ev = threading.Event()
threading.Timer(0.6, ev.set).start()
t0 = time.time()
try:
    fit("ball_1_stick", big, b, g, method="lm,mcmc", cancel=ev, progress=False)
    check("python-fit-cancel", False, "not cancelled")
except dm.FitCancelled:
    late = time.time() - t0 - 0.6
    check("python-fit-cancel", late < 1.0, f"stopped {late:.2f} s after the cancel")
r = fit("ball_1_stick", data, b, g, mask=mask)
same_as_command(r, "cli_lm", "python-fit-after-cancel-equals-command")

script = r"""
import os, signal, sys, threading, time, json
sys.path.insert(0, sys.argv[1])
import numpy as np, nibabel as nib, dimoc
data = np.asanyarray(nib.load("dwi.nii.gz").dataobj)
b, g = np.loadtxt("bvals"), np.loadtxt("bvecs")
big = np.tile(data[:, :, 1:4], (4, 4, 4, 1))
threading.Timer(0.6, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.time()
out = {}
try:
    dimoc.fit("ball_1_stick", big, b, g, method="lm,mcmc", progress=False, threads=2)
    out["raised"] = None
except KeyboardInterrupt:
    out["raised"] = "KeyboardInterrupt"
out["late"] = time.time() - t0 - 0.6
mask = np.asanyarray(nib.load("mask.nii.gz").dataobj)
r = dimoc.fit("ball_1_stick", data, b, g, mask=mask, progress=False, threads=2)
want = np.asanyarray(nib.load("cli_lm/d.nii.gz").dataobj)
out["after"] = bool(np.array_equal(r["d"], want))
print(json.dumps(out))
"""
p = subprocess.run([sys.executable, "-c", script, PYTHON_SOURCE],
                   capture_output=True, text=True, timeout=300)
try:
    out = json.loads(p.stdout.strip().splitlines()[-1])
except (ValueError, IndexError):
    out = {}
check("python-fit-ctrl-c", out.get("raised") == "KeyboardInterrupt" and out.get("late", 9) < 1.0
      and out.get("after") is True, f"{out} {p.stderr[-500:]}")

# ---- the GIL is free during a fit: another thread runs meanwhile ----
ticks = [0]
running = threading.Event()


def spin():
    while not running.is_set():
        ticks[0] += 1


t = threading.Thread(target=spin)
t0 = time.time()
t.start()
fit("ball_1_stick", big[:8, :8], b, g, method="lm,mcmc", burnin=200, jumps=200,
    progress=False)
running.set()
t.join()
check("python-fit-releases-gil", ticks[0] > 100000, f"{ticks[0]} turns of another thread in "
      f"{time.time() - t0:.1f} s")

# ---- the library prints nothing; its warnings are DimocWarning ----
no_b0 = data[..., 3:]  # no b=0 volume: the command warns that S0 is only extrapolated
saved = os.dup(2)
with tempfile.TemporaryFile() as err, warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    os.dup2(err.fileno(), 2)
    try:
        r = fit("ball_1_stick", no_b0, b[3:], g[:, 3:], mask=mask, progress=False)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    err.seek(0)
    printed = err.read().decode()
mine = [str(w.message) for w in caught if issubclass(w.category, dm.DimocWarning)]
check("python-fit-prints-nothing", printed == "" and any("no b=0 volume" in w for w in mine)
      and r.warnings == mine, f"printed {printed!r}; warnings {mine}")
finish()
