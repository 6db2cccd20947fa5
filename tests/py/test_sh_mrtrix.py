"""dimoc peaks against MRtrix 3: the SH basis (pinned through sh2peaks, which evaluates MRtrix's
own basis), peak directions and amplitudes on an oblique image, the FSL frame of the dyads,
what is written where there is no peak, and the input errors."""
import json
import os
import subprocess

import nibabel as nib
import numpy as np

from dmtest import check, dimoc, finish, load, workdir

d = workdir("sh_mrtrix")
rng = np.random.default_rng(3)


def rotation(axis, deg):
    a = np.radians(deg)
    c, s = np.cos(a), np.sin(a)
    i, j = [k for k in range(3) if k != axis]
    r = np.eye(3)
    r[i, i] = r[j, j] = c
    r[i, j], r[j, i] = -s, s
    return r


# Random coefficients (a positive mean so that the function has clear maxima) on an oblique,
# anisotropic grid with a positive determinant (FSL flips x of the dyads there).
shape = (12, 10, 8)
coef = rng.normal(size=shape + (45,)) * 0.4
coef[..., 0] = 2.0
affine = np.eye(4)
affine[:3, :3] = rotation(0, 20) @ rotation(2, -15) @ np.diag([2.0, 2.0, 2.5])
affine[:3, 3] = [-10, 5, 3]
fod = os.path.join(d, "fod.nii.gz")
nib.save(nib.Nifti1Image(coef.astype(np.float32), affine), fod)

out = os.path.join(d, "peaks")
dimoc("peaks", fod, "--out", out, "--relative", 0)
mrtrix = os.path.join(d, "sh2peaks.nii.gz")
subprocess.run(["sh2peaks", "-quiet", "-force", fod, mrtrix], check=True)

ours = load(os.path.join(out, "peaks.nii.gz")).reshape(-1, 9)
theirs = load(mrtrix).reshape(-1, 9)
a, b = ours[:, :3], theirs[:, :3]
na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
ang = np.degrees(np.arccos(np.clip(np.abs((a * b).sum(1)) / (na * nb), 0, 1)))
check("first-peak-direction-vs-sh2peaks", np.median(ang) < 1 and np.mean(ang < 1) > 0.95,
      f"median {np.median(ang):.4f} deg, {np.mean(ang < 1):.3f} within 1 deg")
rel = np.abs(na / nb - 1)
check("first-peak-amplitude-vs-sh2peaks", np.median(rel) < 1e-3,
      f"median relative difference {np.median(rel):.2e}")

# dyads1 in FSL's frame: back to world through the affine's orthonormalised columns, after
# negating x (determinant > 0), it is the first peak of peaks.nii.gz.
dyads = \
    load(os.path.join(out, "dyads1.nii.gz")).reshape(-1, 3)
cols = affine[:3, :3] / np.linalg.norm(affine[:3, :3], axis=0)
flip = np.diag([-1.0, 1, 1]) if np.linalg.det(affine[:3, :3]) > 0 else np.eye(3)
world = dyads @ (cols @ flip).T
# the angle by atan2 of |cross| and |dot| (arccos loses half the digits near 0)
ang = np.degrees(np.arctan2(np.linalg.norm(np.cross(world, a), axis=1), np.abs((world * a).sum(1))))
check("dyads1-in-fsl-frame", np.max(ang) < 1e-4 and np.allclose(np.linalg.norm(dyads, axis=1), 1, atol=1e-5),
      f"largest angle to peaks.nii.gz's first peak {np.max(ang):.2e} deg")
# ... and not in world: on this oblique image the two frames differ by degrees.
raw = np.degrees(np.arccos(np.clip(np.abs((dyads * a).sum(1)) / na, 0, 1)))
check("dyads1-not-world", np.median(raw) > 5, f"median angle dyads1 vs world peak {np.median(raw):.1f} deg")
amp1 = load(os.path.join(out, "peak_amp1.nii.gz")).reshape(-1)
check("peak-amp1-is-length", np.allclose(amp1, na, rtol=1e-5), "peak_amp1 differs from |peak 1|")
prov = json.load(open(os.path.join(out, "provenance.json")))
check("provenance", "peaks" in json.dumps(prov), str(prov)[:200])

# Where there is no peak: NaN in peaks.nii.gz (as sh2peaks), 0 in dyads and amplitudes.  A
# single axially symmetric lobe along world z has one peak, a constant and a zero FOD none;
# voxels outside the mask none.
c2 = np.zeros((3, 2, 1, 45))
zonal = np.array([np.sqrt((2 * l + 1) / (4 * np.pi)) * np.exp(-l * (l + 1) / 100.0) for l in range(0, 9, 2)])
for l in range(0, 9, 2):
    c2[0, 0, 0, l * (l + 1) // 2] = zonal[l // 2]
c2[1, 0, 0, 0] = 1.0  # constant
c2[2, 0, 0, :] = c2[0, 0, 0, :]
c2[0, 1, 0, :] = c2[0, 0, 0, :]
c2[2, 1, 0, :] = np.nan
mask = np.ones((3, 2, 1))
mask[0, 1, 0] = 0
small = nib.Nifti1Image(c2.astype(np.float32), np.diag([2.0, 2, 2, 1]))
nib.save(small, os.path.join(d, "small.nii.gz"))
nib.save(nib.Nifti1Image(mask.astype(np.float32), np.diag([2.0, 2, 2, 1])), os.path.join(d, "mask.nii.gz"))
out2 = os.path.join(d, "small_peaks")
dimoc("peaks", "--fod", os.path.join(d, "small.nii.gz"), "--out", out2, "--mask", os.path.join(d, "mask.nii.gz"))
# --relative 0 keeps the lobe's small positive side lobes, as sh2peaks does
out3 = os.path.join(d, "small_peaks_all")
dimoc("peaks", "--fod", os.path.join(d, "small.nii.gz"), "--out", out3, "--mask", os.path.join(d, "mask.nii.gz"),
      "--relative", 0)
subprocess.run(["sh2peaks", "-quiet", "-force", os.path.join(d, "small.nii.gz"), os.path.join(d, "small_mr.nii.gz"),
                "-mask", os.path.join(d, "mask.nii.gz")], check=True)
p = load(os.path.join(out2, "peaks.nii.gz"))
m = load(os.path.join(d, "small_mr.nii.gz"))
p_all = load(os.path.join(out3, "peaks.nii.gz"))
check("lobe-along-z", np.allclose(np.abs(p[0, 0, 0, :3]) / np.linalg.norm(p[0, 0, 0, :3]), [0, 0, 1], atol=1e-6)
      and np.all(np.isnan(p[0, 0, 0, 3:])), str(p[0, 0, 0]))
same_nan = np.array_equal(np.isnan(p_all), np.isnan(m))
check("nan-where-no-peak-as-sh2peaks", same_nan,
      f"dimoc NaN per voxel {np.isnan(p_all).sum(-1).ravel()}, sh2peaks {np.isnan(m).sum(-1).ravel()}")
check("relative-drops-side-lobes", np.isnan(p).sum(-1).ravel().tolist() == [6, 9, 9, 9, 6, 9],
      f"NaN per voxel {np.isnan(p).sum(-1).ravel()}")
dy2 = load(os.path.join(out2, "dyads2.nii.gz"))
amp = load(os.path.join(out2, "peak_amp1.nii.gz"))
check("zero-where-no-peak", np.all(dy2 == 0) and amp[1, 0, 0] == 0 and amp[0, 1, 0] == 0 and amp[2, 1, 0] == 0
      and amp[0, 0, 0] > 0, f"peak_amp1 {amp.ravel()}")

# Errors: one line naming the file and what is wrong.
bad = os.path.join(d, "bad.nii.gz")
nib.save(nib.Nifti1Image(np.zeros((2, 2, 2, 44), np.float32), np.eye(4)), bad)
rc, _, err = dimoc("peaks", bad, "--out", os.path.join(d, "x"), expect_ok=False)
check("error-bad-count", rc != 0 and "bad.nii.gz" in err and "44 volumes" in err and len(err.strip().splitlines()) == 1, err)
rc, _, err = dimoc("peaks", fod, "--fod", fod, "--out", os.path.join(d, "x"), expect_ok=False)
check("error-fod-twice", rc != 0 and "not both" in err and len(err.strip().splitlines()) == 1, err)
rc, _, err = dimoc("peaks", "--out", os.path.join(d, "x"), expect_ok=False)
check("error-no-fod", rc != 0 and "FOD" in err and len(err.strip().splitlines()) == 1, err)
nib.save(nib.Nifti1Image(np.ones((4, 4, 4), np.float32), np.eye(4)), os.path.join(d, "m4.nii.gz"))
rc, _, err = dimoc("peaks", fod, "--mask", os.path.join(d, "m4.nii.gz"), "--out", os.path.join(d, "x"), expect_ok=False)
check("error-mask-grid", rc != 0 and "m4.nii.gz" in err and len(err.strip().splitlines()) == 1, err)
check("error-leaves-nothing", not os.path.exists(os.path.join(d, "x")), str(os.listdir(d)))
finish()
