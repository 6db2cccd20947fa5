"""dimoc.dti (python/dimoc/_dti.py over the C API's dimoc_dti) against `dimoc dti` on the same
data, imported from the source tree (python/, build/'s library):

- every map of the command (V1 V2 V3 L1 L2 L3 FA MD MO S0, tensor and sse when asked) is the
  result's, byte for byte: WLS with a mask, dwi2tensor's --iter 2 with --save-tensor and --sse,
  OLS with --min-diffusivity none and --min-signal, --iter 0, an MRtrix table (--grad with the
  image's affine); the data as an array in Fortran and C order, as float64, as a nibabel image
  and as a path, and a DIPY GradientTable;
- on noise-free signals of known tensors MD and FA are the tensors' own;
- every wrong argument is a ValueError naming it, raised before any work;
- a cancel from another thread stops a long fit within a second (dimoc.Cancelled), Ctrl-C
  (SIGINT) raises KeyboardInterrupt as soon, and the next call gives the command's maps; the
  library prints nothing."""
import json
import os
import tempfile
import threading
import time

import nibabel as nib
import numpy as np

from dmtest import (OBLIQUE, ball_stick_dwi, check, check_ctrl_c, check_refused_call, dimoc,
                    finish, load, source_dimoc, workdir)

dm = source_dimoc()

MAPS = ["V1", "V2", "V3", "L1", "L2", "L3", "FA", "MD", "MO", "S0"]
d = workdir("python_dti")
os.chdir(d)
# A ball and stick DWI on an oblique grid with Rician noise (dimoc simulate), a mask, and a NaN
# outside the mask.
rng = np.random.default_rng(5)
grid, affine = (8, 6, 5), OBLIQUE
b, g, truth = ball_stick_dwi("3x0,30x1000,30x2000", rng, grid, 30, 9)
M = b.size
sim = load("sim.nii.gz").astype(np.float32)
sim[0, 0, 0, 4] = np.nan  # outside the mask
sim[1, 0, 0, :] = 0       # inside: skipped, 0 in every map, as the command's
img = nib.Nifti1Image(sim, affine)
img.set_qform(affine, code=1)
img.set_sform(affine, code=2)
nib.save(img, "dwi.nii.gz")
mask = np.ones(grid, np.uint8)
mask[0, 0, 0] = 0
mask[7] = 0
nib.save(nib.Nifti1Image(mask, affine), "mask.nii.gz")
data = np.asanyarray(nib.load("dwi.nii.gz").dataobj)  # as the command reads it
common = ["--data", "dwi.nii.gz", "--bvals", "bvals", "--bvecs", "bvecs", "--mask",
          "mask.nii.gz", "--threads", 2]
calls = []


def progress(stage, fraction):
    calls.append((stage, fraction))


def same(result, out, label, extra=()):
    """Every map the command wrote in `out` is the result's, bytes, type and shape."""
    files = sorted(f[:-7] for f in os.listdir(out) if f.endswith(".nii.gz"))
    bad = []
    for name in files:
        want = np.asanyarray(nib.load(os.path.join(out, name + ".nii.gz")).dataobj)
        got = result.get(name)
        if got is None or got.dtype != want.dtype or got.shape != want.shape or \
                got.tobytes(order="F") != want.tobytes(order="F"):
            bad.append(name)
    check(label, files == sorted(MAPS + list(extra)) and sorted(result) == files and not bad,
          f"files {files}, result {sorted(result)}; differing: {bad}")


def dti(*args, **kw):
    kw.setdefault("progress", progress)
    kw.setdefault("threads", 2)
    return dm.dti(*args, **kw)


# ---- WLS with a mask, the data in every form ----
dimoc("dti", *common, "--out", "cli_wls")
calls.clear()
r = dti(data, b, g, mask=mask)
same(r, "cli_wls", "python-dti-wls-equals-command")
check("python-dti-progress", calls and calls[0] == ("dti", 0) and calls[-1] == ("dti", 1.0),
      str(calls[:2] + calls[-2:]))
prov = json.load(open("cli_wls/provenance.json"))
check("python-dti-provenance", r.provenance["command"] == "dimoc_dti" and
      r.provenance["results"]["fitted"] == prov["results"]["fitted"] and
      r.provenance["results"]["skipped_zero"] == 1, str(r.provenance["results"]))
forms = {"c-order": np.ascontiguousarray(data), "float64": data.astype(np.float64),
         "image": nib.load("dwi.nii.gz"), "path": "dwi.nii.gz",
         "view": np.asfortranarray(data[::-1])[::-1]}
differ = []
for label, x in forms.items():
    other = dti(x, b, g.T, mask=mask.astype(bool), progress=False)
    if sorted(other) != sorted(r) or any(other[k].tobytes() != r[k].tobytes() for k in r):
        differ.append(label)
check("python-dti-data-forms-same", not differ, f"differing: {differ}")

# ---- dwi2tensor's iterations, the tensor and the SSE; OLS; --iter 0 ----
dimoc("dti", *common, "--iter", 2, "--save-tensor", "--sse", "--out", "cli_iter")
same(dti(data, b, g, mask=mask, iter=2, save_tensor=True, sse=True), "cli_iter",
     "python-dti-iter-equals-command", ("tensor", "sse"))
dimoc("dti", *common, "--method", "ols", "--min-diffusivity", "none", "--min-signal", 0.5,
      "--out", "cli_ols")
same(dti(data, b, g, mask=mask, method="ols", min_diffusivity="none", min_signal=0.5),
     "cli_ols", "python-dti-ols-equals-command")
dimoc("dti", *common, "--method", "ols", "--iter", 0, "--min-diffusivity", "2e-5", "--out",
      "cli_ols0")
same(dti(data, b, g, mask=mask, method="ols", iter=0, min_diffusivity=2e-5), "cli_ols0",
     "python-dti-iter0-equals-command")
wide = dti(data, b, g, mask=mask, out_type="float64", progress=False)
check("python-dti-float64-rounds-to-command", all(
    wide[k].dtype == np.float64 and wide[k].astype(np.float32).tobytes() == r[k].tobytes()
    for k in MAPS), "")

# ---- an MRtrix table in world coordinates, with the image's affine ----
R = affine[:3, :3] / np.linalg.norm(affine[:3, :3], axis=0)
u, _, vt = np.linalg.svd(R)
R = u @ vt  # the polar factor: the voxel axes' world directions
if np.linalg.det(affine[:3, :3]) > 0:
    R = R @ np.diag([-1.0, 1, 1])  # FSL's x flip of a neurological image
table = np.column_stack([(R @ g).T, b])
np.savetxt("grad.b", table, fmt="%.17g")
table = np.loadtxt("grad.b")
dimoc("dti", "--data", "dwi.nii.gz", "--grad", "grad.b", "--mask", "mask.nii.gz", "--threads", 2,
      "--out", "cli_grad")
same(dti("dwi.nii.gz", mask=mask, grad=table), "cli_grad", "python-dti-grad-equals-command")
same(dti(data, mask=mask, grad=table, affine=nib.load("dwi.nii.gz").affine), "cli_grad",
     "python-dti-grad-affine-equals-command")  # the affine as the header stores it (float32)

# a DIPY GradientTable gives the same maps
try:
    from dipy.core.gradients import gradient_table
    same(dti(data, mask=mask, gtab=gradient_table(b, bvecs=g.T)), "cli_wls",
         "python-dti-gtab-equals-command")
except ImportError:
    print("skipped: DIPY is not installed")

# ---- noise-free signals of known tensors: MD and FA are theirs ----
n = 50
lam = np.sort(rng.uniform(0.2e-3, 2.0e-3, (n, 3)), axis=1)[:, ::-1]
q, _ = np.linalg.qr(rng.normal(size=(n, 3, 3)))
D = np.einsum("nij,nj,nkj->nik", q, lam, q)
clean = (1000 * np.exp(-b * np.einsum("im,nij,jm->nm", g, D, g))).reshape(n, 1, 1, M)
t = dti(clean, b, g, out_type="float64", progress=False)
md = lam.mean(axis=1)
fa = np.sqrt(1.5 * ((lam - md[:, None]) ** 2).sum(axis=1) / (lam ** 2).sum(axis=1))
err_md = np.max(np.abs(t["MD"].ravel() - md) / md)
err_fa = np.max(np.abs(t["FA"].ravel() - fa))
check("python-dti-known-tensors", err_md < 1e-9 and err_fa < 1e-9,
      f"largest relative MD error {err_md:.1e}, FA error {err_fa:.1e}")


# ---- wrong arguments: ValueError naming the argument, before any work ----
def refused(label, word, *args, **kw):
    check_refused_call(label, word, calls, dti, *args, **kw)


finite = np.nan_to_num(data)
nan_inside = data.copy()
nan_inside[2, 2, 2, 3] = np.inf
g_bad = g.copy()
g_bad[:, 10] *= 0.5
other_affine = affine.copy()
other_affine[0, 3] += 5
refused("python-dti-refuses-ndim", "data", finite[..., 0], b, g)
refused("python-dti-refuses-dtype", "data", finite.astype(complex), b, g)
refused("python-dti-refuses-nan", "data", nan_inside, b, g, mask=mask)
refused("python-dti-refuses-few-volumes", "data", finite[..., :6], b[:6], g[:, :6])
refused("python-dti-refuses-bvals-count", "bvals", finite, b[:-1], g)
refused("python-dti-refuses-bvecs-count", "bvecs", finite, b, g[:, :-1])
refused("python-dti-refuses-bvecs-not-unit", "bvecs", finite, b, g_bad)
refused("python-dti-refuses-no-table", "bvals", finite)
refused("python-dti-refuses-mask-grid", "mask", finite, b, g, mask=mask[:-1])
refused("python-dti-refuses-mask-affine", "mask", nib.load("dwi.nii.gz"), b, g,
        mask=nib.Nifti1Image(mask, other_affine))
refused("python-dti-refuses-empty-mask", "mask", finite, b, g, mask=0 * mask)
refused("python-dti-refuses-method", "method", finite, b, g, method="nlls")
refused("python-dti-refuses-iter", "iter", finite, b, g, iter=11)
refused("python-dti-refuses-min-diffusivity", "min_diffusivity", finite, b, g,
        min_diffusivity="tiny")
refused("python-dti-refuses-min-signal", "min_signal", finite, b, g, min_signal=0)
refused("python-dti-refuses-grad-no-affine", "grad", finite, grad=table)
refused("python-dti-refuses-unknown-option", "prefix", finite, b, g, prefix="dti_")

# ---- cancel from another thread; Ctrl-C; the library usable after either ----
big = np.tile(finite, (8, 10, 10, 1))  # 192000 voxels: seconds on two threads
np.save("big.npy", big)
ev = threading.Event()
started = []


def cancel_soon(stage, fraction):
    """The cancel 0.3 s after the fit's first report (the checks before it take their time)."""
    if not started:
        started.append(time.time())
        threading.Timer(0.3, ev.set).start()


try:
    dti(big, b, g, cancel=ev, progress=cancel_soon, iter=5)
    check("python-dti-cancel", False, "not cancelled")
except dm.Cancelled:
    late = time.time() - started[0] - 0.3
    check("python-dti-cancel", late < 1.0, f"stopped {late:.2f} s after the cancel")
same(dti(data, b, g, mask=mask), "cli_wls", "python-dti-after-cancel-equals-command")

check_ctrl_c(
    "python-dti-ctrl-c", 'big = np.load("big.npy")',
    "dimoc.dti(big, b, g, progress=interrupt_soon, threads=2, iter=5)",
    'data = np.asanyarray(nib.load("dwi.nii.gz").dataobj)\n'
    'mask = np.asanyarray(nib.load("mask.nii.gz").dataobj)\n'
    'r = dimoc.dti(data, b, g, mask=mask, progress=False, threads=2)\n'
    'want = np.asanyarray(nib.load("cli_wls/FA.nii.gz").dataobj)\n'
    'after_ok = r["FA"].tobytes() == want.tobytes()', timeout=300)
os.remove("big.npy")

# ---- the library prints nothing; to_nifti writes the command's maps ----
saved = os.dup(2)
saved_out = os.dup(1)
with tempfile.TemporaryFile() as err:
    os.dup2(err.fileno(), 2)
    os.dup2(err.fileno(), 1)
    try:
        r = dti("dwi.nii.gz", b, g, mask="mask.nii.gz", progress=False)
    finally:
        os.dup2(saved, 2)
        os.dup2(saved_out, 1)
        os.close(saved)
        os.close(saved_out)
    err.seek(0)
    printed = err.read().decode()
check("python-dti-prints-nothing", printed == "", repr(printed))
r.to_nifti("py_wls")
bad = [f for f in os.listdir("cli_wls") if f.endswith(".nii.gz") and not np.array_equal(
    load(os.path.join("py_wls", f)), load(os.path.join("cli_wls", f)))]
check("python-dti-to-nifti", not bad and np.allclose(nib.load("py_wls/FA.nii.gz").affine, affine,
                                                     atol=1e-5), f"differing {bad}")
finish()
