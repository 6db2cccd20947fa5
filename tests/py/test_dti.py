"""dimoc dti (linear WLS tensor fit) against DIPY's TensorModel(fit_method='WLS') on DIPY's small
real datasets, against known tensors on noise-free data, its input errors, and the non-linear
tensor model (models/dti.model through `dimoc fit dti`) against the linear fit.

Mask: DIPY's median_otsu on the b=0 volumes (the usual brain mask), given to both programs.
V1 angles are compared where DIPY's FA > 0.1 (below it the principal axis is ill defined)."""
import os
import time
import warnings

import nibabel as nib
import numpy as np
from dipy.core.gradients import gradient_table
from dipy.data import get_fnames
from dipy.io import read_bvals_bvecs
from dipy.reconst.dti import TensorModel
from dipy.segment.mask import median_otsu

from dmtest import angle_deg, check, check_refused, dimoc, finish, load, save, workdir

MAPS = ["V1", "V2", "V3", "L1", "L2", "L3", "FA", "MD", "MO", "S0"]


def clean_bvecs(src, dst):
    """small_64D's bvecs give 'nan nan nan' for its b=0 volume; dimoc's reader takes numbers
    only, so the copy has 0 there (DIPY's gradient table does the same internally)."""
    np.savetxt(dst, np.nan_to_num(np.loadtxt(src)), fmt="%.17g")
    return dst


def inputs(name, d):
    data, bvals, bvecs = get_fnames(name)
    bvecs = clean_bvecs(bvecs, os.path.join(d, "bvecs"))
    img = nib.load(data)
    b, g = read_bvals_bvecs(bvals, bvecs)
    y = np.asarray(img.dataobj, dtype=np.float64)
    _, mask = median_otsu(y, vol_idx=np.where(b <= 50)[0])
    mask_path = save(os.path.join(d, "mask.nii.gz"), mask.astype(np.float32), img.affine)
    return data, bvals, bvecs, mask_path, img, y, b, g, mask


def against_dipy(name):
    d = workdir(f"dti_{name}")
    data, bvals, bvecs, mask_path, img, y, b, g, mask = inputs(name, d)
    out = os.path.join(d, "dti")
    t0 = time.time()
    dimoc("dti", "--data", data, "--bvals", bvals, "--bvecs", bvecs, "--mask", mask_path,
          "--out", out)
    t_dimoc = time.time() - t0
    t0 = time.time()
    fit = TensorModel(gradient_table(b, g), fit_method="WLS",
                      return_S0_hat=True).fit(y, mask=mask)
    t_dipy = time.time() - t0
    maps = {m: load(os.path.join(out, m + ".nii.gz")) for m in MAPS}
    check(f"{name}-all-maps-written", all(maps[m].shape[:3] == y.shape[:3] for m in MAPS) and
          all(maps[m].shape[3:] == (3,) for m in ["V1", "V2", "V3"]),
          f"{mask.sum()} voxels in the mask; dimoc {t_dimoc:.2f} s (whole command), "
          f"DIPY {t_dipy:.2f} s")

    r_fa = np.corrcoef(maps["FA"][mask], fit.fa[mask])[0, 1]
    r_md = np.corrcoef(maps["MD"][mask], fit.md[mask])[0, 1]
    check(f"{name}-FA-correlation", r_fa > 0.999,
          f"1 - r = {1 - r_fa:.1e}, max |dFA| = {np.abs(maps['FA'] - fit.fa)[mask].max():.2g}")
    check(f"{name}-MD-correlation", r_md > 0.999,
          f"1 - r = {1 - r_md:.1e}, max |dMD| = {np.abs(maps['MD'] - fit.md)[mask].max():.2g} mm^2/s")
    eig_err = max(np.abs(maps[f"L{k + 1}"] - fit.evals[..., k])[mask].max() for k in range(3))
    check(f"{name}-eigenvalues", eig_err < 1e-7, f"max |dL| = {eig_err:.2g} mm^2/s")
    s0_err = np.max(np.abs(maps["S0"][mask] / fit.S0_hat[mask] - 1))
    check(f"{name}-S0", s0_err < 1e-4, f"max relative difference {s0_err:.2g}")
    # The mode is ill conditioned in near-isotropic voxels: compared where FA > 0.1.
    aniso = mask & (fit.fa > 0.1)
    r_mo = np.corrcoef(maps["MO"][aniso], fit.mode[aniso])[0, 1]
    check(f"{name}-MO-correlation", r_mo > 0.999, f"1 - r = {1 - r_mo:.1e} over {aniso.sum()} voxels")
    ang = angle_deg(maps["V1"][aniso], fit.evecs[aniso][..., 0])
    check(f"{name}-V1-median-angle", np.median(ang) < 1.0,
          f"median {np.median(ang):.2g} deg, 95th percentile {np.percentile(ang, 95):.2g} deg, "
          f"over {aniso.sum()} voxels with FA > 0.1")
    ortho = np.abs(np.sum(maps["V1"][aniso] * maps["V3"][aniso], axis=-1)).max()
    check(f"{name}-V1-V3-orthogonal", ortho < 1e-5, f"max |V1.V3| = {ortho:.2g}")
    outside = max(np.abs(maps[m][~mask]).max() for m in MAPS)
    check(f"{name}-zero-outside-mask", outside == 0, f"max |value| outside = {outside}")
    affine_ok = all(np.allclose(nib.load(os.path.join(out, m + ".nii.gz")).affine, img.affine,
                                atol=1e-4) for m in MAPS)
    check(f"{name}-affine-kept", affine_ok, "every map read back by nibabel has the data's affine")
    return d, data, bvals, bvecs, mask_path, mask, maps


def known_tensors():
    """Noise-free signals of known tensors (64-direction protocol of small_64D): the fit must
    return them exactly; a NaN voxel and an all-zero voxel are skipped with maps 0."""
    d = workdir("dti_known")
    _, bvals_path, bvecs_src = get_fnames("small_64D")
    bvecs_path = clean_bvecs(bvecs_src, os.path.join(d, "bvecs"))
    b, g = read_bvals_bvecs(bvals_path, bvecs_path)
    rng = np.random.default_rng(3)
    evals = np.array([[1.7e-3, 0.3e-3, 0.2e-3], [1.0e-3, 0.9e-3, 0.2e-3], [0.8e-3, 0.8e-3, 0.8e-3],
                      [2.5e-3, 0.5e-3, 0.5e-3]])
    truth = []
    y = np.zeros((6, 1, 1, len(b)))
    for i, lam in enumerate(evals):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        D = q @ np.diag(lam) @ q.T
        y[i, 0, 0] = 800 * np.exp(-b * np.einsum("ji,ik,jk->j", g, D, g))
        truth.append((lam, q[:, 0]))
    y[4, 0, 0, 5] = np.nan
    data = save(os.path.join(d, "dwi.nii.gz"), y)
    out = os.path.join(d, "dti")
    dimoc("dti", "--data", data, "--bvals", bvals_path, "--bvecs", bvecs_path, "--out", out)
    m = {k: load(os.path.join(out, k + ".nii.gz")) for k in MAPS}
    worst_l = worst_a = worst_fa = 0.0
    for i, (lam, v1) in enumerate(truth):
        worst_l = max(worst_l, np.abs(np.array([m[f"L{k + 1}"][i, 0, 0] for k in range(3)]) - lam).max())
        fa = np.sqrt(0.5 * ((lam[0] - lam[1]) ** 2 + (lam[1] - lam[2]) ** 2 + (lam[2] - lam[0]) ** 2)
                     / np.sum(lam ** 2))
        worst_fa = max(worst_fa, abs(m["FA"][i, 0, 0] - fa))
        if lam[0] > lam[1] * 1.01:
            worst_a = max(worst_a, angle_deg(m["V1"][i, 0, 0], v1))
    check("known-tensors-eigenvalues", worst_l < 1e-8, f"max |dL| = {worst_l:.2g} mm^2/s")
    check("known-tensors-FA", worst_fa < 1e-5, f"max |dFA| = {worst_fa:.2g}")
    check("known-tensors-V1", worst_a < 0.01, f"max angle {worst_a:.2g} deg")
    # mode: +1 for a prolate tensor with equal minor eigenvalues (voxel 3), 0 for isotropic (2)
    check("known-tensors-mode", abs(m["MO"][3, 0, 0] - 1) < 1e-4 and m["MO"][2, 0, 0] == 0 and
          abs(m["S0"][0, 0, 0] - 800) < 1e-3,
          f"MO {m['MO'][3, 0, 0]:.6f} (prolate), {m['MO'][2, 0, 0]} (isotropic); S0 {m['S0'][0, 0, 0]:.4f}")
    skipped = max(np.abs(m[k][4:]).max() for k in MAPS)
    check("skips-nan-and-zero-voxels", skipped == 0, f"max |value| in skipped voxels = {skipped}")


def errors(d, data, bvals, bvecs, mask):
    out = os.path.join(d, "err_out")
    rc, _, err = dimoc("dti", "--data", data, "--bvals", bvals, "--out", out, expect_ok=False)
    check("error-missing-bvecs", rc != 0 and "--bvecs is required" in err and not os.path.exists(out),
          err.strip())
    rc, _, err = dimoc("dti", "--data", data, "--bvals", bvals, "--bvecs", os.path.join(d, "nope"),
                       "--out", out, expect_ok=False)
    check("error-unreadable-bvecs", rc != 0 and "nope" in err and not os.path.exists(out), err.strip())
    short = os.path.join(d, "short.bval")
    np.savetxt(short, np.loadtxt(bvals)[:-1][None], fmt="%g")
    rc, _, err = dimoc("dti", "--data", data, "--bvals", short, "--bvecs", bvecs, "--out", out,
                       expect_ok=False)
    check("error-mismatched-counts", rc != 0 and "short.bval" in err and "volumes" in err and
          err.count("\n") == 1 and not os.path.exists(out), err.strip())
    other = save(os.path.join(d, "other_mask.nii.gz"), np.ones((3, 3, 3)))
    rc, _, err = dimoc("dti", "--data", data, "--bvals", bvals, "--bvecs", bvecs, "--mask", other,
                       "--out", out, expect_ok=False)
    check("error-mask-grid", rc != 0 and "other_mask" in err and not os.path.exists(out), err.strip())
    # a diffusion-weighted volume without a direction: refused by dti and by a model that reads
    # the directions, in one line naming the bvecs file and the volume; an isotropic model fits
    b = np.loadtxt(bvals).ravel()
    g = np.loadtxt(bvecs)
    g = g if g.shape[0] == 3 else g.T
    k = int(np.argmax(b > 10))
    g[:, k] = 0
    zero = os.path.join(d, "zero_dir.bvecs")
    np.savetxt(zero, g, fmt="%.17g")
    words = f"zero_dir.bvecs: direction {k + 1} has length 0 at b = {b[k]:g}"
    check_refused("error-zero-direction-at-b", dimoc("dti", "--data", data, "--bvals", bvals, "--bvecs", zero,
                                                     "--out", out, expect_ok=False), words, out)
    check_refused("error-zero-direction-fit-dti-model",
                  dimoc("fit", "dti", "--data", data, "--bvals", bvals, "--bvecs", zero, "--mask", mask, "--out", out,
                        expect_ok=False), words, out)
    iso = {}
    for name, vecs in (("zero", zero), ("clean", bvecs)):
        iso[name] = os.path.join(d, f"ivim_{name}")
        iso[name + "_run"] = dimoc("fit", "ivim", "--data", data, "--bvals", bvals, "--bvecs", vecs, "--mask", mask,
                                   "--out", iso[name], expect_ok=False)
    rc, _, err = iso["zero_run"]
    same = rc == 0 and iso["clean_run"][0] == 0 and all(
        np.array_equal(load(os.path.join(iso["zero"], f)), load(os.path.join(iso["clean"], f)))
        for f in os.listdir(iso["clean"]) if f.endswith(".nii.gz"))
    check("zero-direction-isotropic-model-fits", same and "zero_dir" not in err,
          f"rc {rc}: {err.strip()[-300:]}; maps as with the clean bvecs: {same}")
    rc, help_text, _ = dimoc("help", "dti")
    opts = ["--data", "--bvals", "--bvecs", "--mask", "--out", "--method", "--min-signal",
            "--min-diffusivity", "--prefix", "--save-tensor", "--sse", "--threads"]
    check("help-lists-options", rc == 0 and all(o in help_text for o in opts) and
          "[default: wls]" in help_text, "dimoc help dti")


def nonlinear_model(d, data, bvals, bvecs, mask_path, mask, maps):
    """`dimoc fit dti` (models/dti.model, LM) against the linear WLS fit: on this low-SNR data
    the two estimators differ a little, but not by much."""
    out = os.path.join(d, "fit_dti")
    t0 = time.time()
    dimoc("fit", "dti", "--data", data, "--bvals", bvals, "--bvecs", bvecs, "--mask", mask_path,
          "--method", "lm", "--out", out)
    t = time.time() - t0
    fa = load(os.path.join(out, "FA.nii.gz"))
    md = load(os.path.join(out, "MD.nii.gz"))
    status = load(os.path.join(out, "status.nii.gz"))
    dfa = np.abs(fa - maps["FA"])[mask]
    dmd = np.abs(md[mask] / maps["MD"][mask] - 1)
    check("fit-dti-model-vs-wls-FA", np.median(dfa) < 0.02,
          f"median |dFA| {np.median(dfa):.4f}, 95th percentile {np.percentile(dfa, 95):.4f}; "
          f"median relative |dMD| {np.median(dmd):.4f}; {int((status[mask] == 1).sum())} of "
          f"{mask.sum()} converged; {t:.1f} s (model compiled or taken from the cache)")


def main():
    warnings.simplefilter("ignore", RuntimeWarning)  # DIPY's mode divides by 0 outside the mask
    known_tensors()
    d, data, bvals, bvecs, mask_path, mask, maps = against_dipy("small_64D")
    errors(d, data, bvals, bvecs, mask_path)
    nonlinear_model(d, data, bvals, bvecs, mask_path, mask, maps)
    against_dipy("small_101D")
    finish()


main()
