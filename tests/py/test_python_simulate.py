"""dimoc.simulate (python/dimoc/_simulate.py over the C API's dimoc_simulate) against
`dimoc simulate` on the same inputs, imported from the source tree (python/, build/'s library):

- the signal and the mask are the command's byte for byte: ball_1_stick from maps on an oblique
  grid with Rician noise (the maps as arrays in Fortran and C order, as float64, as nibabel
  images, as paths, and a FitResult's parameters), constants over N x 1 x 1 voxels with
  Gaussian noise, a model's measure from a file and as an array (exp_decay), a per-voxel input
  map (noddi_watson), a mask (the command's --mask); out_type float64 rounds to the command's
  float32;
- without noise the signal is ball_1_stick's formula evaluated here in numpy;
- every wrong argument is a ValueError naming it, raised before any work (no progress callback
  was called);
- a cancel from another thread stops a long simulation within a second (dimoc.Cancelled),
  Ctrl-C (SIGINT) raises KeyboardInterrupt as soon, and the next call gives the command's
  image; the library prints nothing."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import nibabel as nib
import numpy as np

from dmtest import (OBLIQUE, PYTHON_SOURCE, ball_stick_truth, check, check_refused_call, dimoc,
                    finish, load, save, source_dimoc, workdir)

dm = source_dimoc()

d = workdir("python_simulate")
os.chdir(d)
dimoc("scheme", "--shells", "3x0,20x1000,20x2500", "--bvals", "bvals", "--bvecs", "bvecs")
b, g = np.loadtxt("bvals"), np.loadtxt("bvecs")
M = b.size

rng = np.random.default_rng(11)
grid, affine = (7, 5, 4), OBLIQUE
truth = ball_stick_truth(rng, grid)
maps = {k: np.asanyarray(nib.load(f"true_{k}.nii.gz").dataobj) for k in truth}  # as the command
params = ",".join(f"{k}=true_{k}.nii.gz" for k in truth)
calls = []


def progress(stage, fraction):
    calls.append((stage, fraction))


def same(sim, image, mask, label):
    """The simulation's signal and mask are the command's files, bytes, type and shape (the
    command writes the mask of an image made without maps as float32: its values then)."""
    want = np.asanyarray(nib.load(image).dataobj)
    ok = sim.signal.dtype == want.dtype and sim.signal.shape == want.shape and \
        sim.signal.tobytes(order="F") == want.tobytes(order="F")
    why = f"signal {sim.signal.dtype} {sim.signal.shape} vs {want.dtype} {want.shape}"
    if mask:
        wm = np.asanyarray(nib.load(mask).dataobj)
        if wm.dtype == np.float32:
            wm = wm.astype(np.uint8)
        ok = ok and sim.mask.dtype == wm.dtype and sim.mask.tobytes(order="F") == \
            wm.tobytes(order="F")
        why += f"; mask {sim.mask.dtype} {int(sim.mask.sum())} vs {wm.dtype} {int(wm.sum())}"
    check(label, ok, why)


def simulate(*args, **kw):
    kw.setdefault("progress", progress)
    kw.setdefault("threads", 2)
    return dm.simulate(*args, **kw)


# ---- maps with Rician noise, the maps in every form ----
dimoc("simulate", "ball_1_stick", "--bvals", "bvals", "--bvecs", "bvecs", "--params", params,
      "--noise", "rician", "--snr", 25, "--seed", 4, "--out", "cli_maps.nii.gz", "--mask-out",
      "cli_maps_mask.nii.gz")
calls.clear()
sim = simulate("ball_1_stick", b, g, params=maps, noise="rician", snr=25, seed=4)
same(sim, "cli_maps.nii.gz", "cli_maps_mask.nii.gz", "python-simulate-maps-equals-command")
stages = [s for s, _ in calls]
check("python-simulate-progress-stages", stages and stages[0] == "compile" and
      ("simulate", 1.0) in calls and all(0 <= f <= 1 for _, f in calls), f"{calls[-3:]}")
signal, mask = sim
prov = sim.provenance
check("python-simulate-unpacks-provenance", signal is sim.signal and mask is sim.mask and
      prov["command"] == "dimoc_simulate" and prov["results"]["model_name"] == "ball_1_stick"
      and prov["results"]["voxels"] == 140 and prov["options"]["noise"] == "rician", str(prov))
forms = {"c-order": {k: np.ascontiguousarray(v) for k, v in maps.items()},
         "float64": {k: v.astype(np.float64) for k, v in maps.items()},
         "images": {k: nib.load(f"true_{k}.nii.gz") for k in truth},
         "paths": {k: f"true_{k}.nii.gz" for k in truth}}
differ = []
for label, p in forms.items():
    other = simulate("ball_1_stick", b, g.T, params=p, noise="rician", snr=25, seed=4,
                     progress=False)
    if other.signal.tobytes() != sim.signal.tobytes() or other.mask.tobytes() != \
            sim.mask.tobytes():
        differ.append(label)
check("python-simulate-param-forms-same", not differ, f"differing: {differ}")
img = simulate("ball_1_stick", b, g, params={k: f"true_{k}.nii.gz" for k in truth},
               progress=False)
check("python-simulate-affine-of-maps", np.allclose(img.affine, affine, atol=1e-5),
      str(img.affine))

# a fit's parameters simulate the fit's predicted signal
fit = dm.fit("ball_1_stick", sim.signal, b, g, progress=False, threads=2)
for k in truth:
    save(f"fit_{k}.nii.gz", fit[k], affine)
dimoc("simulate", "ball_1_stick", "--bvals", "bvals", "--bvecs", "bvecs", "--params",
      ",".join(f"{k}=fit_{k}.nii.gz" for k in truth), "--out", "cli_fit.nii.gz")
same(simulate("ball_1_stick", b, g, params=fit), "cli_fit.nii.gz", None,
     "python-simulate-fitresult-params-equals-command")

# ---- constants over N x 1 x 1 voxels, Gaussian noise, float64 ----
const = {"S0": 1000, "d": 1.5e-3, "f1": 0.5, "th1": 1.0, "ph1": 2.0}
dimoc("simulate", "ball_1_stick", "--bvals", "bvals", "--bvecs", "bvecs", "--params",
      ",".join(f"{k}={v!r}" for k, v in const.items()), "--noise", "gaussian", "--voxels", 60,
      "--seed", 8, "--out", "cli_const.nii.gz", "--mask-out", "cli_const_mask.nii.gz")
sim = simulate("ball_1_stick", b, g, params=const, noise="gaussian", voxels=60, seed=8)
same(sim, "cli_const.nii.gz", "cli_const_mask.nii.gz", "python-simulate-constants-equals-command")
wide = simulate("ball_1_stick", b, g, params=const, noise="gaussian", voxels=60, seed=8,
                out_type="float64")
check("python-simulate-float64-rounds-to-command", wide.signal.dtype == np.float64 and
      wide.signal.astype(np.float32).tobytes() == sim.signal.tobytes(), str(wide.signal.dtype))

# ---- without noise: the formula, evaluated here ----
clean = simulate("ball_1_stick", b, g, params=maps, out_type="float64", progress=False).signal
th, ph = maps["th1"].astype(np.float64), maps["ph1"].astype(np.float64)
v = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
dots = np.einsum("xyzc,mc->xyzm", v, g.T)
f32 = {k: maps[k].astype(np.float64)[..., None] for k in truth}
ref = f32["S0"] * ((1 - f32["f1"]) * np.exp(-b * f32["d"]) +
                   f32["f1"] * np.exp(-b * f32["d"] * dots ** 2))
err = np.max(np.abs(clean - ref) / ref)
check("python-simulate-formula", err < 1e-12, f"largest relative difference {err:.2e}")

# ---- a model's measure (exp_decay's TE): a file, and values ----
te = np.linspace(0.02, 0.1, M)
np.savetxt("TE.txt", te)
dimoc("simulate", "exp_decay", "--measure", "TE=TE.txt", "--params", "S0=900,R=25", "--noise",
      "rician", "--voxels", 12, "--out", "cli_exp.nii.gz")
same(simulate("exp_decay", params={"S0": 900, "R": 25}, measure={"TE": te}, noise="rician",
              voxels=12), "cli_exp.nii.gz", None, "python-simulate-measure-equals-command")
same(simulate("exp_decay", params={"S0": 900, "R": 25}, measure={"TE": "TE.txt"},
              noise="rician", voxels=12), "cli_exp.nii.gz", None,
     "python-simulate-measure-file-equals-command")

# ---- a per-voxel input map (noddi_watson's d_par) and a mask ----
dpar = rng.uniform(1.2e-3, 2.0e-3, grid)
save("dpar.nii.gz", dpar, affine)
m = (rng.uniform(0, 1, grid) > 0.3).astype(np.uint8)
save("mask.nii.gz", m, affine)
noddi = {"S0": "true_S0.nii.gz", "fintra": 0.6, "fiso": 0.1, "kappa": 4.0, "th": "true_th1.nii.gz",
         "ph": 1.0}
dimoc("simulate", "noddi_watson", "--bvals", "bvals", "--bvecs", "bvecs", "--params",
      ",".join(f"{k}={v}" for k, v in noddi.items()), "--voxel", "d_par=dpar.nii.gz", "--noise",
      "gaussian", "--snr", 20, "--seed", 2, "--mask", "mask.nii.gz", "--out", "cli_noddi.nii.gz",
      "--mask-out", "cli_noddi_mask.nii.gz")
sim = simulate("noddi_watson", b, g, params=noddi,
               voxel={"d_par": np.asanyarray(nib.load("dpar.nii.gz").dataobj)}, noise="gaussian",
               snr=20, seed=2, mask=m.astype(bool))
same(sim, "cli_noddi.nii.gz", "cli_noddi_mask.nii.gz", "python-simulate-voxel-mask-equals-command")
check("python-simulate-mask-zero-outside", not sim.signal[m == 0].any() and
      sim.mask[m == 1].all(), f"{int(sim.mask.sum())} of {int(m.sum())}")
sim.to_nifti("py_noddi.nii.gz", "py_noddi_mask.nii.gz")
check("python-simulate-to-nifti", np.array_equal(load("py_noddi.nii.gz"), load("cli_noddi.nii.gz"))
      and np.allclose(nib.load("py_noddi.nii.gz").affine, affine, atol=1e-5), "")

# a DIPY GradientTable gives the same image
try:
    from dipy.core.gradients import gradient_table
    same(simulate("ball_1_stick", gtab=gradient_table(b, bvecs=g.T), params=maps, noise="rician",
                  snr=25, seed=4), "cli_maps.nii.gz", None, "python-simulate-gtab-equals-command")
except ImportError:
    print("skipped: DIPY is not installed")


# ---- wrong arguments: ValueError naming the argument, before any work ----
def refused(label, word, *args, **kw):
    check_refused_call(label, word, calls, simulate, *args, **kw)


nan_map = dict(maps, d=maps["d"].copy())
nan_map["d"][1, 1, 1] = np.nan
g_bad = g.copy()
g_bad[:, 5] *= 0.5
refused("python-simulate-refuses-unknown-param", "kappa", "ball_1_stick", b, g,
        params=dict(maps, kappa=1))
refused("python-simulate-refuses-missing-param", "f1", "ball_1_stick", b, g,
        params={k: v for k, v in maps.items() if k != "f1"})
refused("python-simulate-refuses-no-params", "params", "ball_1_stick", b, g)
refused("python-simulate-refuses-nan", "params d", "ball_1_stick", b, g, params=nan_map)
refused("python-simulate-refuses-map-grid", "params d", "ball_1_stick", b, g,
        params=dict(maps, d=maps["d"][:-1]))
refused("python-simulate-refuses-map-dtype", "params d", "ball_1_stick", b, g,
        params=dict(maps, d=maps["d"].astype(complex)))
refused("python-simulate-refuses-mask-grid", "mask", "ball_1_stick", b, g, params=maps,
        mask=m[:-1])
refused("python-simulate-refuses-mask-affine", "mask", "ball_1_stick", b, g,
        params={k: nib.load(f"true_{k}.nii.gz") for k in truth},
        mask=nib.Nifti1Image(m, np.diag([3.0, 3, 3, 1])))
refused("python-simulate-refuses-bvecs-count", "bvecs", "ball_1_stick", b, g[:, :-1],
        params=maps)
refused("python-simulate-refuses-bvecs-not-unit", "bvecs", "ball_1_stick", b, g_bad,
        params=maps)
refused("python-simulate-refuses-negative-b", "bvals", "ball_1_stick", -b, g, params=maps)
refused("python-simulate-refuses-no-protocol", "bvals", "ball_1_stick", params=const)
refused("python-simulate-refuses-noise", "noise", "ball_1_stick", b, g, params=maps,
        noise="poisson")
refused("python-simulate-refuses-snr", "snr", "ball_1_stick", b, g, params=maps,
        noise="rician", snr=0)
refused("python-simulate-refuses-seed", "seed", "ball_1_stick", b, g, params=maps, seed=-1)
refused("python-simulate-refuses-voxels", "voxels", "ball_1_stick", b, g, params=const, voxels=0)
refused("python-simulate-refuses-unknown-option", "colour", "ball_1_stick", b, g, params=maps,
        colour=1)
refused("python-simulate-refuses-voxel-input", "voxel", "noddi_watson", b, g, params=noddi,
        voxel={"d_perp": 1e-3})
refused("python-simulate-refuses-measure-length", "measure", "exp_decay", b, g,
        params={"S0": 1, "R": 2}, measure={"TE": te[:-3]})
refused("python-simulate-refuses-no-measure", "measure", "exp_decay", b, g,
        params={"S0": 1, "R": 2})

# ---- cancel from another thread; Ctrl-C; the library usable after either ----
long = {"S0": 1000, "fintra": 0.6, "fiso": 0.1, "kappa": 5, "th": 1, "ph": 1}
ev = threading.Event()
threading.Timer(0.5, ev.set).start()
t0 = time.time()
try:
    simulate("noddi_watson", b, g, params=long, voxels=400000, noise="rician", cancel=ev,
             progress=False)
    check("python-simulate-cancel", False, "not cancelled")
except dm.Cancelled:
    late = time.time() - t0 - 0.5
    check("python-simulate-cancel", late < 1.0, f"stopped {late:.2f} s after the cancel")
same(simulate("ball_1_stick", b, g, params=maps, noise="rician", snr=25, seed=4),
     "cli_maps.nii.gz", "cli_maps_mask.nii.gz", "python-simulate-after-cancel-equals-command")

script = r"""
import os, signal, sys, threading, time, json
sys.path.insert(0, sys.argv[1])
import numpy as np, nibabel as nib, dimoc
b, g = np.loadtxt("bvals"), np.loadtxt("bvecs")
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.time()
out = {}
try:
    dimoc.simulate("noddi_watson", b, g, params=dict(S0=1000, fintra=0.6, fiso=0.1, kappa=5,
                   th=1, ph=1), voxels=400000, noise="rician", progress=False, threads=2)
    out["raised"] = None
except KeyboardInterrupt:
    out["raised"] = "KeyboardInterrupt"
out["late"] = time.time() - t0 - 0.5
maps = {k: np.asanyarray(nib.load(f"true_{k}.nii.gz").dataobj) for k in
        ("S0", "d", "f1", "th1", "ph1")}
s = dimoc.simulate("ball_1_stick", b, g, params=maps, noise="rician", snr=25, seed=4,
                   progress=False)
want = np.asanyarray(nib.load("cli_maps.nii.gz").dataobj)
out["after"] = s.signal.tobytes() == want.tobytes()
print(json.dumps(out))
"""
p = subprocess.run([sys.executable, "-c", script, PYTHON_SOURCE],
                   capture_output=True, text=True, timeout=300)
try:
    out = json.loads(p.stdout.strip().splitlines()[-1])
except (ValueError, IndexError):
    out = {}
check("python-simulate-ctrl-c", out.get("raised") == "KeyboardInterrupt" and
      out.get("late", 9) < 1.0 and out.get("after") is True, f"{out} {p.stderr[-500:]}")

# ---- the library prints nothing ----
saved = os.dup(2)
with tempfile.TemporaryFile() as err:
    os.dup2(err.fileno(), 2)
    try:
        simulate("ball_1_stick", b, g, params=const, noise="rician", voxels=5, progress=False)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    err.seek(0)
    printed = err.read().decode()
check("python-simulate-prints-nothing", printed == "", repr(printed))
finish()
