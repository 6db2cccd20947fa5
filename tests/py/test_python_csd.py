"""dimoc.response, dimoc.csd and dimoc.peaks (python/dimoc/_csd.py over the C API's
dimoc_response, dimoc_csd and dimoc_peaks) against `dimoc response`, `dimoc csd` and `dimoc
peaks` on the same data, imported from the source tree (python/, build/'s library):

- a three-tissue phantom (a slab of WM, mostly single fibres of known direction, around GM and
  CSF; three shells, an oblique affine, noise): the responses (tournier, dhollander, fa on one
  shell; each row to the file's 15 digits) and their voxels, every map of `dimoc csd` (the
  default multi-tissue run with estimated responses; given response files with --normalise and
  --lmax 6; single-shell in float; --msmt with --directions; --part 2/3) and of `dimoc peaks`
  (default; --mask --num 2 --relative 0 --threshold) are the results', byte for byte; the data
  as an array, an image and a path; a response result handed on to csd;
- the single-fibre voxels' first peak against the phantom's fibre directions, and the WM
  response against the phantom's exact zonal coefficients;
- every wrong argument is a ValueError naming it, raised before any work;
- a cancel from another thread stops a deconvolution within a second (dimoc.Cancelled), Ctrl-C
  (SIGINT) raises KeyboardInterrupt as soon, and the next call gives the command's FODs; the
  library prints nothing."""
import json
import os
import tempfile
import threading
import time
import warnings

import nibabel as nib
import numpy as np

import csdsim as cs
from dmtest import check, check_ctrl_c, check_refused_call, dimoc, finish, source_dimoc, workdir

dm = source_dimoc()

d = workdir("python_csd")
os.chdir(d)
dimoc("scheme", "--shells", "3x0,30x1000,30x2000", "--bvals", "bvals", "--bvecs", "bvecs")
b, g = np.loadtxt("bvals"), np.loadtxt("bvecs")
rng = np.random.default_rng(3)
SHAPE = (22, 22, 4)
aff = cs.oblique_affine(SHAPE)
gw = cs.fsl_to_world(aff, g)
data, mask, single, fibre = cs.three_tissue_slab(rng, b, gw, SHAPE, (10.5, 5, 3))
nib.save(nib.Nifti1Image(data.astype(np.float32), aff), "dwi.nii.gz")
nib.save(nib.Nifti1Image(mask, aff), "mask.nii.gz")
one = (b <= 10) | (np.abs(b - 1000) < 50)
nib.save(nib.Nifti1Image(data[..., one].astype(np.float32), aff), "dwi1.nii.gz")
np.savetxt("bvals1", b[one][None], fmt="%g")
np.savetxt("bvecs1", g[:, one], fmt="%.17g")
dirs = cs.random_unit(rng, 60)
np.savetxt("dirs60.txt", np.column_stack([np.arctan2(dirs[:, 1], dirs[:, 0]),
                                          np.arccos(np.clip(dirs[:, 2], -1, 1))]), fmt="%.17g")
img = nib.load("dwi.nii.gz")
dwi = np.asanyarray(img.dataobj)  # as the command reads it
A = img.affine  # as the header holds it: arrays come with it (the directions' world frame)
img1 = nib.load("dwi1.nii.gz")
b1, g1 = np.loadtxt("bvals1"), np.loadtxt("bvecs1")
D = ["--data", "dwi.nii.gz", "--bvals", "bvals", "--bvecs", "bvecs", "--mask", "mask.nii.gz",
     "--threads", 2]
D1 = ["--data", "dwi1.nii.gz", "--bvals", "bvals1", "--bvecs", "bvecs1", "--mask", "mask.nii.gz",
      "--threads", 2]
calls = []


def progress(stage, fraction):
    calls.append((stage, fraction))


def same(result, folder, label):
    """Every image and response file of the command's folder is the result's: images byte for
    byte (type and shape), responses row for row as the file prints them."""
    files = sorted(f for f in os.listdir(folder) if f.endswith((".nii.gz", "_response.txt")))
    bad = []
    for f in files:
        if f.endswith(".nii.gz"):
            want = np.asanyarray(nib.load(os.path.join(folder, f)).dataobj)
            got = result.get(f[:-7])
            if got is None or got.dtype != want.dtype or got.shape != want.shape or \
                    got.tobytes(order="F") != want.tobytes(order="F"):
                bad.append(f)
        else:
            rows = [ln.split() for ln in open(os.path.join(folder, f))
                    if ln.strip() and not ln.startswith("#")]
            got = result.get(f[:-4])
            if got is None or [["%.15g" % v for v in row] for row in got] != rows:
                bad.append(f)
    names = sorted(k for k in result if not k.endswith("_shells"))
    want = sorted(f[:-7] if f.endswith(".gz") else f[:-4] for f in files)
    check(label, not bad and names == want, f"differing {bad}; result {names}, files {want}")


def run(fn, *args, **kw):
    kw.setdefault("progress", progress)
    kw.setdefault("threads", 2)
    return fn(*args, **kw)


# ---- responses: tournier, dhollander, fa on one shell ----
dimoc("response", *D, "--out", "cli_tournier")
calls.clear()
resp = run(dm.response, dwi, b, g, mask=mask, affine=A)
same(resp, "cli_tournier", "python-response-tournier-equals-command")
check("python-response-progress", calls and calls[0] == ("response", 0) and
      calls[-1] == ("response", 1.0), str(calls))
dimoc("response", *D, "--algorithm", "dhollander", "--out", "cli_dhollander")
dh = run(dm.response, "dwi.nii.gz", b, g, mask="mask.nii.gz", algorithm="dhollander")
same(dh, "cli_dhollander", "python-response-dhollander-equals-command")
prov = json.load(open("cli_dhollander/provenance.json"))
check("python-response-provenance", all(dh.provenance["results"][k] == prov["results"][k]
                                        for k in ("wm_voxels", "gm_voxels", "csf_voxels",
                                                  "iterations")), str(dh.provenance["results"]))
dimoc("response", *D1, "--algorithm", "fa", "--lmax", 6, "--out", "cli_fa")
same(run(dm.response, img1, b1, g1, mask=mask, algorithm="fa", lmax=6), "cli_fa",
     "python-response-fa-equals-command")
truth = [1000 * cs.zonal_response(bb, 10, "wm") for bb in (0, 1000, 2000)]
rows = dh["wm_response"]
err = max(np.max(np.abs(rows[s, :3] - truth[s][:3])) / truth[s][0] for s in range(3))
check("python-response-wm-truth", err < 0.05 and
      np.allclose(dh["wm_response_shells"], [0, 1000, 2000], atol=1),
      f"largest difference of l = 0, 2, 4 from the truth, over r_0: {err:.3f}")

# ---- CSD: estimated, given files, single-shell, msmt on one shell, a part ----
dimoc("csd", *D, "--out", "cli_csd")
calls.clear()
fods = run(dm.csd, dwi, b, g, mask=mask, affine=A)
same(fods, "cli_csd", "python-csd-estimated-equals-command")
stages = [s for s, _ in calls]
check("python-csd-progress", stages[0] == "response" and ("csd", 1.0) in calls and
      all(0 <= f <= 1 for _, f in calls), f"{sorted(set(stages))}")
check("python-csd-image-and-path-same", all(
    all(o[k].tobytes() == fods[k].tobytes() for k in fods)
    for o in (run(dm.csd, img, b, g, mask=mask, progress=False),
              run(dm.csd, "dwi.nii.gz", b, g.T, mask="mask.nii.gz", progress=False))), "")
given = ",".join(f"cli_dhollander/{t}_response.txt" for t in ("wm", "gm", "csf"))
dimoc("csd", *D, "--response", given, "--normalise", "--lmax", 6, "--out", "cli_csd_files")
same(run(dm.csd, dwi, b, g, mask=mask, affine=A, response=given.split(","), normalise=True,
         lmax=6),
     "cli_csd_files", "python-csd-response-files-equals-command")
dimoc("csd", *D1, "--precision", "float", "--max-iter", 20, "--out", "cli_csd_ss")
same(run(dm.csd, img1, b1, g1, mask=mask, precision="float", max_iter=20), "cli_csd_ss",
     "python-csd-single-shell-equals-command")
dimoc("csd", *D1, "--msmt", "--directions", "dirs60.txt", "--out", "cli_csd_msmt1")
same(run(dm.csd, np.asanyarray(img1.dataobj), b1, g1, mask=mask, affine=A, msmt=True,
         directions=np.loadtxt("dirs60.txt")),
     "cli_csd_msmt1", "python-csd-msmt-directions-equals-command")
dimoc("csd", *D, "--part", "2/3", "--out", "cli_csd_part")
same(run(dm.csd, dwi, b, g, mask=mask, affine=A, part="2/3"), "cli_csd_part",
     "python-csd-part-equals-command")
# the responses of dimoc.response handed on: the FODs of estimating them in the same call
handed = run(dm.csd, dwi, b, g, mask=mask, affine=A, response=dh)
check("python-csd-response-result-equals-estimated", all(
    handed[k].tobytes() == fods[k].tobytes() for k in ("wm_fod", "gm", "csf", "status")) and
    not any(k.endswith("_voxels") for k in handed), sorted(handed))

# ---- peaks ----
dimoc("peaks", "cli_csd/wm_fod.nii.gz", "--out", "cli_peaks", "--threads", 2)
same(run(dm.peaks, "cli_csd/wm_fod.nii.gz"), "cli_peaks", "python-peaks-equals-command")
dimoc("peaks", "cli_csd/wm_fod.nii.gz", "--mask", "mask.nii.gz", "--num", 2, "--relative", 0,
      "--threshold", 0.05, "--out", "cli_peaks2", "--threads", 2)
pk = run(dm.peaks, fods, mask=mask, num=2, relative=0, threshold=0.05)
same(pk, "cli_peaks2", "python-peaks-options-equals-command")
first = pk["peaks"][..., :3]
unit = first / np.linalg.norm(first, axis=-1, keepdims=True)
cosang = np.abs(np.sum(unit[single] * fibre[single], axis=-1))
angle = np.degrees(np.arccos(np.clip(np.median(cosang), 0, 1)))
check("python-peaks-fibre-truth", angle < 5, f"median angle to the single fibres {angle:.2f} deg "
      f"over {int(single.sum())} voxels")


# ---- wrong arguments: ValueError naming the argument, before any work ----
def refused(label, word, fn, *args, **kw):
    check_refused_call(label, word, calls, run, fn, *args, **kw)


nan_inside = dwi.copy()
nan_inside[10, 10, 1, 3] = np.nan
g_bad = g.copy()
g_bad[:, 10] *= 0.5
fod = np.asanyarray(nib.load("cli_csd/wm_fod.nii.gz").dataobj)
refused("python-csd-refuses-ndim", "data", dm.csd, dwi[..., 0], b, g)
refused("python-csd-refuses-nan", "data", dm.csd, nan_inside, b, g, mask=mask)
refused("python-csd-refuses-bvals-count", "bvals", dm.csd, dwi, b[:-1], g)
refused("python-csd-refuses-bvecs-not-unit", "bvecs", dm.csd, dwi, b, g_bad)
refused("python-csd-refuses-mask-grid", "mask", dm.csd, dwi, b, g, mask=mask[:-1])
refused("python-csd-refuses-response-shape", "response", dm.csd, dwi, b, g,
        response=[np.ones((3, 20))])
refused("python-csd-refuses-response-tissue", "response", dm.csd, dwi, b, g,
        response={"wm": "cli_dhollander/wm_response.txt", "fat": np.ones(3)})
refused("python-csd-refuses-algorithm-with-response", "algorithm", dm.csd, dwi, b, g,
        response=dh, algorithm="tournier")
refused("python-csd-refuses-algorithm", "algorithm", dm.csd, dwi, b, g, algorithm="msmt_5tt")
refused("python-csd-refuses-directions", "directions", dm.csd, dwi, b, g,
        directions=np.ones((4, 2)))
refused("python-csd-refuses-lmax", "lmax", dm.csd, dwi, b, g, lmax=7)
refused("python-csd-refuses-device", "device", dm.csd, dwi, b, g, device="tpu")
refused("python-csd-refuses-precision", "precision", dm.csd, dwi, b, g, precision="half")
refused("python-csd-refuses-part", "part", dm.csd, dwi, b, g, part="4/3")
refused("python-csd-refuses-part-normalise", "part", dm.csd, dwi, b, g, part="1/2",
        normalise=True)
refused("python-csd-refuses-unknown-option", "out", dm.csd, dwi, b, g, out="folder")
refused("python-response-refuses-algorithm", "algorithm", dm.response, dwi, b, g,
        algorithm="manual")
refused("python-response-refuses-lmax", "lmax", dm.response, dwi, b, g, lmax=9)
refused("python-response-refuses-no-table", "bvals", dm.response, dwi)
refused("python-peaks-refuses-volumes", "fod", dm.peaks, fod[..., :7])
refused("python-peaks-refuses-num", "num", dm.peaks, fod, num=0)
refused("python-peaks-refuses-relative", "relative", dm.peaks, fod, relative=2)
refused("python-peaks-refuses-mask-grid", "mask", dm.peaks, fod, mask=mask[1:])

# ---- cancel from another thread; Ctrl-C; the library usable after either ----
big = np.tile(dwi, (2, 2, 2, 1))
big_mask = np.tile(mask, (2, 2, 2))
np.save("big.npy", big)
np.save("big_mask.npy", big_mask)
ev = threading.Event()
started = []


def cancel_soon(stage, fraction):
    """The cancel 0.4 s after the deconvolution's first report."""
    if stage == "csd" and not started:
        started.append(time.time())
        threading.Timer(0.4, ev.set).start()


try:
    run(dm.csd, big, b, g, mask=big_mask, affine=A, response=dh, cancel=ev,
        progress=cancel_soon)
    check("python-csd-cancel", False, "not cancelled")
except dm.Cancelled:
    late = time.time() - started[0] - 0.4
    check("python-csd-cancel", late < 1.0, f"stopped {late:.2f} s after the cancel")
same(run(dm.csd, dwi, b, g, mask=mask, affine=A, progress=False), "cli_csd",
     "python-csd-after-cancel-equals-command")

check_ctrl_c(
    "python-csd-ctrl-c",
    'big, big_mask = np.load("big.npy"), np.load("big_mask.npy")\n'
    'resp = [f"cli_dhollander/{t}_response.txt" for t in ("wm", "gm", "csf")]',
    "dimoc.csd(big, b, g, mask=big_mask, response=resp, progress=interrupt_soon, threads=2)",
    'mask = np.asanyarray(nib.load("mask.nii.gz").dataobj)\n'
    'r = dimoc.peaks(dimoc.csd(nib.load("dwi.nii.gz"), b, g, mask=mask, progress=False, threads=2),\n'
    '                progress=False)\n'
    'want = np.asanyarray(nib.load("cli_peaks/peaks.nii.gz").dataobj)\n'
    'after_ok = r["peaks"].tobytes() == want.tobytes()',
    stage="csd")
os.remove("big.npy")

# ---- the library prints nothing (the command's progress line and notes are not printed) ----
saved, saved_out = os.dup(2), os.dup(1)
with tempfile.TemporaryFile() as err, warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    os.dup2(err.fileno(), 2)
    os.dup2(err.fileno(), 1)
    try:
        r = run(dm.csd, img1, b1, g1, mask=mask, progress=False, max_iter=2)
    finally:
        os.dup2(saved, 2)
        os.dup2(saved_out, 1)
        os.close(saved)
        os.close(saved_out)
    err.seek(0)
    printed = err.read().decode()
mine = [str(w.message) for w in caught if issubclass(w.category, dm.DimocWarning)]
check("python-csd-prints-nothing", printed == "" and any("not solved" in w for w in mine) and
      mine == r.warnings, f"printed {printed!r}; warnings {r.warnings}")
r.to_nifti("py_csd")
r.to_files("py_csd")

def rows_of(path):
    return [ln for ln in open(path).read().splitlines() if not ln.startswith("# command")]


check("python-csd-to-files", rows_of("py_csd/wm_response.txt") ==
      rows_of("cli_csd_ss/wm_response.txt") and os.path.exists("py_csd/wm_fod.nii.gz"),
      f"{rows_of('py_csd/wm_response.txt')} vs {rows_of('cli_csd_ss/wm_response.txt')}")
finish()
