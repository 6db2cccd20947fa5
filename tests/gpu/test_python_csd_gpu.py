"""dimoc.csd on the GPU (python/dimoc/_csd.py over the C API's dimoc_csd, device "gpu") against
`dimoc csd --device gpu` on the same data, imported from the source tree: the FODs, the
responses, the voxels and the status are the command's byte for byte -- multi-tissue with
responses estimated (dhollander, three shells) and single-shell with given responses in float
--; the GPU's responses are the CPU's (the same voxels, the rows within 1e-9) and, from the same
responses, the GPU's FODs are the CPU's within 1e-6 of each voxel's largest coefficient; a cancel
during the GPU's run is taken after it (dimoc.Cancelled) and the library stays usable."""
import os
import threading

import nibabel as nib
import numpy as np

import csdsim as cs
from dmtest import check, dimoc, finish, source_dimoc, workdir

dm = source_dimoc()

d = workdir("python_csd_gpu")
os.chdir(d)
dimoc("scheme", "--shells", "3x0,40x1000,40x2000", "--bvals", "bvals", "--bvecs", "bvecs")
b, g = np.loadtxt("bvals"), np.loadtxt("bvecs")
rng = np.random.default_rng(5)
SHAPE = (30, 30, 8)
aff = cs.oblique_affine(SHAPE)
gw = cs.fsl_to_world(aff, g)
data, mask, _, _ = cs.three_tissue_slab(rng, b, gw, SHAPE, (14.5, 7, 4))
nib.save(nib.Nifti1Image(data.astype(np.float32), aff), "dwi.nii.gz")
nib.save(nib.Nifti1Image(mask, aff), "mask.nii.gz")
img = nib.load("dwi.nii.gz")
D = ["--data", "dwi.nii.gz", "--bvals", "bvals", "--bvecs", "bvecs", "--mask", "mask.nii.gz"]


def same(result, folder, label):
    files = sorted(f for f in os.listdir(folder) if f.endswith(".nii.gz"))
    bad = [f for f in files if result.get(f[:-7]) is None or result[f[:-7]].tobytes(order="F") !=
           np.asanyarray(nib.load(os.path.join(folder, f)).dataobj).tobytes(order="F")]
    check(label, not bad and files, f"differing {bad} of {files}")


dimoc("csd", *D, "--device", "gpu", "--out", "cli_gpu")
gpu = dm.csd(img, b, g, mask=mask, device="gpu", progress=False)
same(gpu, "cli_gpu", "python-csd-gpu-msmt-equals-command")
cpu = dm.csd(img, b, g, mask=mask, device="cpu", progress=False)
# The responses: tournier's passes deconvolved on the GPU (rounded as the GPU's soft solver
# rounds) pick the CPU's voxels, and the rows agree to rounding.
worst, voxels_same = 0.0, True
for t in ("wm", "gm", "csf"):
    rg, rc = np.asarray(gpu[f"{t}_response"]), np.asarray(cpu[f"{t}_response"])
    worst = max(worst, float(np.abs(rg - rc).max() / np.abs(rc).max()))
    voxels_same &= np.array_equal(np.asarray(gpu[f"{t}_voxels"]), np.asarray(cpu[f"{t}_voxels"]))
check("python-csd-gpu-responses-equal-cpu", voxels_same and worst < 1e-9,
      f"voxels the same: {voxels_same}; largest relative difference of a row {worst:.2e}")
# The solve: from the CPU's responses, each voxel's FOD within 1e-6 of its largest coefficient
# (from responses that differ by rounding, an ill-conditioned voxel's active set may not).
gpu = dm.csd(img, b, g, mask=mask, device="gpu", response=cpu, progress=False)
fg, fc = gpu["wm_fod"].astype(np.float64), cpu["wm_fod"].astype(np.float64)
scale = np.maximum(np.abs(fc).max(axis=-1, keepdims=True), 1e-12)
err = float(np.max(np.abs(fg - fc) / scale))
check("python-csd-gpu-equals-cpu", err < 1e-6 and gpu.provenance["results"]["device"] != "cpu",
      f"largest difference {err:.2e} of a voxel's largest coefficient; "
      f"{gpu.provenance['results']['device']}")

one = (b <= 10) | (np.abs(b - 1000) < 50)
nib.save(nib.Nifti1Image(data[..., one].astype(np.float32), aff), "dwi1.nii.gz")
np.savetxt("bvals1", b[one][None], fmt="%g")
np.savetxt("bvecs1", g[:, one], fmt="%.17g")
resp = dm.response("dwi1.nii.gz", b[one], g[:, one], mask=mask, progress=False)
resp.to_files("resp")
dimoc("csd", "--data", "dwi1.nii.gz", "--bvals", "bvals1", "--bvecs", "bvecs1", "--mask",
      "mask.nii.gz", "--response", "resp/wm_response.txt", "--precision", "float", "--device",
      "gpu", "--out", "cli_ss")
same(dm.csd("dwi1.nii.gz", b[one], g[:, one], mask=mask, response=["resp/wm_response.txt"],
            precision="float", device="gpu", progress=False), "cli_ss",
     "python-csd-gpu-single-shell-float-equals-command")

ev = threading.Event()


def cancel_at_solve(stage, fraction):
    if stage == "csd":
        ev.set()


try:
    dm.csd(img, b, g, mask=mask, device="gpu", response=cpu, cancel=ev,
           progress=cancel_at_solve)
    check("python-csd-gpu-cancel", False, "not cancelled")
except dm.Cancelled:
    check("python-csd-gpu-cancel", True)
same(dm.csd(img, b, g, mask=mask, device="gpu", progress=False), "cli_gpu",
     "python-csd-gpu-after-cancel-equals-command")
finish()
