"""Bad inputs to `dimoc fit` and `dimoc simulate`: each gets a one-line error naming the file
and what is wrong, and a non-zero exit; bad voxels are flagged, never fatal.  Also: outputs
read back with nibabel keep the input's geometry, and the provenance file says what ran."""
import gzip
import json
import os

import nibabel as nib
import numpy as np

from dmtest import check, dimoc, finish, load, save, scheme, workdir

d = workdir("fit_inputs")
bvals, bvecs = scheme(d, "2x0,12x1000")
M = 14
dimoc("simulate", "ball_1_stick", "--bvals", bvals, "--bvecs", bvecs, "--voxels", 8, "--params",
      "S0=1000,d=1.5e-3,f1=0.5,th1=1.0,ph1=2.0", "--out", f"{d}/flat.nii.gz")
flat = load(f"{d}/flat.nii.gz")  # 8 x 1 x 1 x M

# A 4 x 2 x 1 image with an oblique affine, qform and sform, mm and s units.
affine = np.array([[1.8, 0.1, 0, -40], [0, 2.0, 0.2, -60], [0.05, 0, 2.5, 12], [0, 0, 0, 1]])
img = nib.Nifti1Image(flat.reshape(4, 2, 1, M).astype(np.float32), affine)
img.header.set_xyzt_units("mm", "sec")
img.set_qform(affine, code=1)
img.set_sform(affine, code=2)
nib.save(img, f"{d}/dwi.nii.gz")
save(f"{d}/mask.nii.gz", np.ones((4, 2, 1)), affine)
common = ["--bvals", bvals, "--bvecs", bvecs, "--quiet"]


def expect_error(name, fragment, *args):
    rc, out, err = dimoc(*args, expect_ok=False)
    lines = [l for l in err.strip().splitlines() if l]
    ok = rc != 0 and any(fragment in l for l in lines) and any(l.startswith("dimoc: error:") for l in lines)
    check(name, ok, f"exit {rc}, stderr: {err.strip()[-300:]}")


# Volume count that does not match bvals/bvecs.
np.savetxt(f"{d}/bvals_short", np.loadtxt(bvals)[:-1][None, :], fmt="%g")
expect_error("error-bvals-count", "bvals_short", "fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz",
             "--bvals", f"{d}/bvals_short", "--bvecs", bvecs, "--out", f"{d}/o1")
np.savetxt(f"{d}/bvecs_short", np.loadtxt(bvecs)[:, :-1], fmt="%.6f")
expect_error("error-bvecs-count", "bvecs_short", "fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz",
             "--bvals", bvals, "--bvecs", f"{d}/bvecs_short", "--out", f"{d}/o1")
# Mask of another shape.
save(f"{d}/mask_bad.nii.gz", np.ones((3, 2, 1)))
expect_error("error-mask-shape", "mask_bad.nii.gz", "fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz",
             "--mask", f"{d}/mask_bad.nii.gz", *common, "--out", f"{d}/o2")
# Empty mask.
save(f"{d}/mask_empty.nii.gz", np.zeros((4, 2, 1)))
expect_error("error-mask-empty", "mask_empty.nii.gz", "fit", "ball_1_stick", "--data",
             f"{d}/dwi.nii.gz", "--mask", f"{d}/mask_empty.nii.gz", *common, "--out", f"{d}/o3")
# Unreadable (missing) file.
expect_error("error-missing-data", "nosuch.nii.gz", "fit", "ball_1_stick", "--data",
             f"{d}/nosuch.nii.gz", *common, "--out", f"{d}/o4")
# Truncated file: an uncompressed .nii cut in the middle of its data.
raw = gzip.open(f"{d}/dwi.nii.gz").read()
open(f"{d}/trunc.nii", "wb").write(raw[: len(raw) - 100])
expect_error("error-truncated-nii", "trunc.nii", "fit", "ball_1_stick", "--data", f"{d}/trunc.nii",
             *common, "--out", f"{d}/o5")
comp = open(f"{d}/dwi.nii.gz", "rb").read()
open(f"{d}/trunc.nii.gz", "wb").write(comp[: len(comp) // 2])
expect_error("error-truncated-gz", "trunc.nii.gz", "fit", "ball_1_stick", "--data",
             f"{d}/trunc.nii.gz", *common, "--out", f"{d}/o5")
# Not a NIfTI file at all.
open(f"{d}/text.nii", "w").write("hello\n" * 100)
expect_error("error-not-nifti", "text.nii", "fit", "ball_1_stick", "--data", f"{d}/text.nii",
             *common, "--out", f"{d}/o5")
# Non-numeric text in bvals.
open(f"{d}/bvals_text", "w").write("0 0 1000 abc" + " 1000" * 10 + "\n")
expect_error("error-bvals-text", "bvals_text", "fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz",
             "--bvals", f"{d}/bvals_text", "--bvecs", bvecs, "--out", f"{d}/o6")
# Unknown model, option, parameter names.
expect_error("error-unknown-model", "nosuchmodel", "fit", "nosuchmodel", "--data", f"{d}/dwi.nii.gz",
             *common, "--out", f"{d}/o7")
expect_error("error-unknown-option", "--bogus", "fit", "ball_1_stick", "--bogus", "1")
expect_error("error-unknown-fixed", "zz", "fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz",
             *common, "--fixed", "zz", "--out", f"{d}/o8")
expect_error("error-bad-grid", "f1", "fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", *common,
             "--method", "grid", "--grid", "f1=0:-1:1", "--out", f"{d}/o8")
expect_error("error-missing-measure", "TE", "fit", "exp_decay", "--data", f"{d}/dwi.nii.gz",
             "--out", f"{d}/o8")
expect_error("error-simulate-missing-param", "th1", "simulate", "ball_1_stick", "--bvals", bvals,
             "--bvecs", bvecs, "--params", "S0=1000,d=1e-3,f1=0.5,ph1=1", "--out", f"{d}/s.nii.gz")
# A GPU asked for on a machine without one: one clear line.
if not os.path.exists("/dev/nvidia0"):
    expect_error("error-no-gpu", "GPU", "fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz",
                 *common, "--device", "gpu", "--out", f"{d}/o9")
# Nothing half-written: a failed run leaves no output maps behind.
check("error-leaves-no-output", not os.path.exists(f"{d}/o8/S0.nii.gz") and
      not any(os.path.exists(f"{d}/o{i}/status.nii.gz") for i in range(1, 9)))

# "nan nan nan" directions: accepted on b=0 volumes (as DIPY's small_64D writes them), an error
# on diffusion-weighted ones.
g = np.loadtxt(bvecs)
bv = np.loadtxt(bvals)
g_nan = g.copy()
g_nan[:, bv <= 50] = np.nan
np.savetxt(f"{d}/bvecs_nan_b0", g_nan, fmt="%.6f")
rc, out, err = dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs",
                     f"{d}/bvecs_nan_b0", "--out", f"{d}/onan", "--quiet", expect_ok=False)
check("bvecs-nan-on-b0-accepted", rc == 0, err.strip())
g_nan[:, np.argmax(bv)] = np.nan
np.savetxt(f"{d}/bvecs_nan_dw", g_nan, fmt="%.6f")
expect_error("error-bvecs-nan-on-dw", "bvecs_nan_dw", "fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz",
             "--bvals", bvals, "--bvecs", f"{d}/bvecs_nan_dw", "--out", f"{d}/onan2")

# bvecs far from unit length: normalised with a warning, the fit runs.
g = np.loadtxt(bvecs)
np.savetxt(f"{d}/bvecs_long", g * 1.5, fmt="%.6f")
rc, out, err = dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", "--bvals", bvals, "--bvecs",
                     f"{d}/bvecs_long", "--out", f"{d}/olong", "--quiet", expect_ok=False)
check("warning-bvecs-normalised", rc == 0 and "warning" in err and "bvecs" in err, err.strip())
f_long, f_ref = load(f"{d}/olong/f1.nii.gz"), None

# NaN/Inf and all-zero voxels: flagged in the status map, never fatal.
bad = flat.reshape(4, 2, 1, M).copy()
bad[0, 0, 0, 3] = np.nan
bad[1, 0, 0, 5] = np.inf
bad[2, 0, 0, :] = 0
nib.save(nib.Nifti1Image(bad.astype(np.float32), affine), f"{d}/dwi_bad.nii.gz")
rc, out, err = dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi_bad.nii.gz", *common, "--out",
                     f"{d}/obad", expect_ok=False)
st = load(f"{d}/obad/status.nii.gz") if rc == 0 else None
check("bad-voxels-flagged", rc == 0 and st[0, 0, 0] == 3 and st[1, 0, 0] == 3 and st[2, 0, 0] == 4
      and np.all(st[3, :, 0] == 1), f"exit {rc}, status {None if st is None else st[:, :, 0].tolist()}")

# Starting maps outside their bounds (a float32 map rounding onto an open bound) are moved just
# inside: the voxel is fitted, not failed (from f1 = 1.5 and d = 0 LM may end with f1 at its
# bound, status 6: an estimate, flagged).  A constant outside them is an error, as in a model.
save(f"{d}/f1_out.nii.gz", np.full((4, 2, 1), 1.5), affine)
save(f"{d}/d_zero.nii.gz", np.zeros((4, 2, 1)), affine)
dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", *common, "--init",
      f"f1={d}/f1_out.nii.gz,d={d}/d_zero.nii.gz", "--out", f"{d}/oclamp")
st = load(f"{d}/oclamp/status.nii.gz")
check("start-outside-bounds-clamped", np.all((st == 1) | (st == 6)), f"status {st.ravel().tolist()}")
expect_error("error-init-outside-bounds", "outside the bounds [0, 1] of 'f1'", "fit", "ball_1_stick",
             "--data", f"{d}/dwi.nii.gz", *common, "--init", "f1=1.5", "--out", f"{d}/oinit")
check("error-init-leaves-no-output", not os.path.exists(f"{d}/oinit"))

# Outputs keep the input's geometry and read back as written.
dimoc("fit", "ball_1_stick", "--data", f"{d}/dwi.nii.gz", "--mask", f"{d}/mask.nii.gz", *common,
      "--out", f"{d}/ofit", "--predicted", "--ic")
ok = True
for name in ("S0", "f1", "dyads1", "predicted", "BIC", "AIC", "status"):
    o = nib.load(f"{d}/ofit/{name}.nii.gz")
    ok &= np.allclose(o.affine, affine, atol=1e-5)
    ok &= o.header["qform_code"] == 1 and o.header["sform_code"] == 2
    ok &= o.header.get_xyzt_units()[0] == "mm"
    ok &= o.shape[:3] == (4, 2, 1)
check("outputs-keep-geometry", bool(ok))
pred = load(f"{d}/ofit/predicted.nii.gz")
check("predicted-matches-data", np.allclose(pred, flat.reshape(4, 2, 1, M), rtol=1e-4),
      f"max rel diff {np.max(np.abs(pred / flat.reshape(4, 2, 1, M) - 1)):.2e}")
bic, aic = load(f"{d}/ofit/BIC.nii.gz"), load(f"{d}/ofit/AIC.nii.gz")
check("bic-aic-relation", np.allclose(bic - aic, 5 * np.log(M) - 2 * 5, atol=1e-3))
prov = json.load(open(f"{d}/ofit/provenance.json"))
check("provenance", prov["model"]["name"] == "ball_1_stick" and prov["voxels"]["fitted"] +
      prov["voxels"]["not_converged"] == 8 and "fit" in prov["timings_seconds"] and
      "--predicted" in prov["command"] and prov["options"]["method"] == "lm" and
      len(prov["model"]["source_hash"]) == 16, json.dumps(prov)[:300])
leftovers = [f for f in os.listdir(f"{d}/ofit") if ".tmp" in f]
check("no-temporary-files-left", not leftovers, str(leftovers))
finish()
