"""MRtrix 3's own regression tests of dwi2fod, run with `dimoc csd` in dwi2fod's place.

MRtrix's testing/binaries/tests/dwi2fod lists five cases, each a dwi2fod command line and a
`testing_diff_image OUT REF -voxel|-abs TOL` against outputs stored in MRtrix3/test_data. Their
inputs and references are in tests/data/mrtrix_dwi2fod (converted from .mif to NIfTI and FSL
bvals/bvecs once; README.md there says how and from where). Each case runs here with dimoc's
defaults, which are dwi2fod's, and is checked as testing_diff_image checks it:

  -voxel TOL  in every voxel, max |a - b| over the volumes <= TOL * (max |a| + max |b|) / 2
              (MRtrix's check_images_voxel; a voxel of zeros in both must match exactly);
  -abs TOL    every value within TOL, and the headers the same (voxel sizes, transform within
              0.001: check_images_abs checks them).

  csd         dwi2fod csd dwi.mif response.txt                     out.mif          -voxel 1e-5
  csd_mask    ... -mask mask.mif                                   out_mask.mif     -voxel 1e-5
  csd_lmax12  ... -lmax 12 (a degree-8 response: super-resolution) out_lmax12.mif   -voxel 1e-5
  msmt        dwi2fod msmt_csd msmt/dwi.mif wm.txt gm.txt csf.txt  wm, gm, csf.mif  -abs 1e-5
  msmt_mask   ... -mask msmt/mask.mif                              *_masked.mif     -abs 1e-5

Beyond them: no voxel is flagged degenerate (status 3) where msmt_csd's reference has a
solution; `--directions` with the shipped file gives the default's bits, another set changes the
FODs, and a file that is not [ az el ] pairs is refused with one line; without --lmax a degree-6
response gives a degree-6 FOD (dwi2fod's default: 8, or the response's degree when lower).
Every case is supported; none is skipped. About 4 s on 2 cores."""
import json
import os

import nibabel as nib
import numpy as np

from dmtest import check, dimoc, finish, workdir

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "mrtrix_dwi2fod")
SHIPPED_DIRS = os.path.join(HERE, "..", "..", "data", "directions", "electrostatic_repulsion_300.txt")


def src(name):
    return os.path.join(DATA, name)


SINGLE = ["--data", src("dwi.nii.gz"), "--bvals", src("dwi.bvals"), "--bvecs", src("dwi.bvecs"),
          "--response", src("response.txt")]
MSMT = ["--data", src("msmt/dwi.nii.gz"), "--bvals", src("msmt/dwi.bvals"), "--bvecs", src("msmt/dwi.bvecs"),
        "--response", ",".join(src(f"msmt/{t}.txt") for t in ("wm", "gm", "csf"))]

# name, dimoc's options, [(dimoc's output, MRtrix's reference, check, tolerance)]
CASES = [
    ("csd", SINGLE, [("wm_fod.nii.gz", "out.nii.gz", "voxel", 1e-5)]),
    ("csd_mask", SINGLE + ["--mask", src("mask.nii.gz")], [("wm_fod.nii.gz", "out_mask.nii.gz", "voxel", 1e-5)]),
    ("csd_lmax12", SINGLE + ["--lmax", 12], [("wm_fod.nii.gz", "out_lmax12.nii.gz", "voxel", 1e-5)]),
    ("msmt", MSMT, [("wm_fod.nii.gz", "msmt/wm.nii.gz", "abs", 1e-5), ("gm.nii.gz", "msmt/gm.nii.gz", "abs", 1e-5),
                    ("csf.nii.gz", "msmt/csf.nii.gz", "abs", 1e-5)]),
    ("msmt_mask", MSMT + ["--mask", src("msmt/mask.nii.gz")],
     [("wm_fod.nii.gz", "msmt/wm_masked.nii.gz", "abs", 1e-5), ("gm.nii.gz", "msmt/gm_masked.nii.gz", "abs", 1e-5),
      ("csf.nii.gz", "msmt/csf_masked.nii.gz", "abs", 1e-5)]),
]


def find_key(tree, key):
    """The value of `key` anywhere in a JSON tree, or None."""
    if isinstance(tree, dict):
        if key in tree:
            return tree[key]
        tree = list(tree.values())
    if isinstance(tree, list):
        for v in tree:
            found = find_key(v, key)
            if found is not None:
                return found
    return None


def volumes(img):
    """The image as (x, y, z, volumes), a 3D map as one volume."""
    a = np.asarray(img.dataobj, dtype=np.float64)
    return a.reshape(a.shape[:3] + (-1,))


def same_header(a, b):
    """check_headers: the same dimensions, voxel sizes within 1e-4 (relative), transform within
    0.001; the reason when not."""
    if volumes(a).shape != volumes(b).shape:
        return f"shape {volumes(a).shape} vs {volumes(b).shape}"
    za, zb = np.array(a.header.get_zooms()[:3]), np.array(b.header.get_zooms()[:3])
    if np.any(np.abs((za - zb) / (za + zb)) > 1e-4):
        return f"voxel sizes {za} vs {zb}"
    if np.abs(a.affine[:3] - b.affine[:3]).max() > 0.001:
        return f"transforms differ by {np.abs(a.affine[:3] - b.affine[:3]).max():.3g}"
    return ""


def compare(name, out, ref, kind, tol):
    """testing_diff_image OUT REF -KIND TOL; returns the largest difference found (relative to the
    voxel's scale for -voxel, absolute for -abs)."""
    a_img, b_img = nib.load(out), nib.load(ref)
    a, b = volumes(a_img), volumes(b_img)
    if a.shape != b.shape:
        check(name, False, f"shape {a.shape} vs MRtrix's {b.shape}")
        return np.inf
    diff = np.abs(a - b).max(axis=-1)
    if kind == "voxel":
        scale = 0.5 * (np.abs(a).max(axis=-1) + np.abs(b).max(axis=-1))
        bad = diff > tol * scale
        rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1), np.where(diff > 0, np.inf, 0))
        worst = rel.max()
        check(name, not bad.any(),
              f"-voxel {tol:g}: max |difference| / voxel's largest |value| = {worst:.2e} over {a.shape[:3]} x "
              f"{a.shape[3]}; {bad.sum()} voxel(s) outside")
        return worst
    why = same_header(a_img, b_img)
    worst = diff.max()
    check(name, worst <= tol and not why,
          f"-abs {tol:g}: max |difference| {worst:.2e} (largest |value| {np.abs(b).max():.3g}); "
          f"{(diff > tol).sum()} voxel(s) outside{'; header: ' + why if why else ''}")
    return worst


def main():
    d = workdir("dwi2fod_regression")
    summary = []
    for name, opts, outputs in CASES:
        out = os.path.join(d, name)
        rc, _, err = dimoc("csd", *opts, "--out", out, "--device", "cpu", "--threads", 2, expect_ok=False)
        check(f"{name}-runs", rc == 0, err.strip())
        if rc != 0:
            continue
        for mine, ref, kind, tol in outputs:
            w = compare(f"{name}-{mine.split('.')[0]}", os.path.join(out, mine), src(ref), kind, tol)
            summary.append(f"{name} {mine.split('.')[0]} -{kind} {w:.2e}")
        if name.startswith("msmt"):
            # Degenerate (status 3) only where msmt_csd's reference has no solution either.
            status = np.asarray(nib.load(os.path.join(out, "status.nii.gz")).dataobj)
            solved = np.zeros(status.shape, bool)
            for _, ref, _, _ in outputs:
                solved |= np.any(volumes(nib.load(src(ref))) != 0, axis=-1)
            flagged = (status == 3) & solved
            check(f"{name}-no-degenerate-where-mrtrix-solves", not flagged.any(),
                  f"{flagged.sum()} voxel(s) of status 3 where MRtrix has a solution; statuses "
                  f"{dict(zip(*np.unique(status, return_counts=True)))}")
    print("     largest differences against MRtrix's references: " + "; ".join(summary))

    # --directions: the shipped file given explicitly is the default; another set is used.
    base = os.path.join(d, "csd_mask", "wm_fod.nii.gz")
    mask = ["--mask", src("mask.nii.gz"), "--device", "cpu", "--threads", 2]
    out = os.path.join(d, "directions_shipped")
    rc, _, err = dimoc("csd", *SINGLE, *mask, "--directions", SHIPPED_DIRS, "--out", out, expect_ok=False)
    same = rc == 0 and os.path.exists(base) and np.array_equal(volumes(nib.load(base)),
                                                              volumes(nib.load(os.path.join(out, "wm_fod.nii.gz"))))
    check("directions-shipped-file-is-the-default", same, err.strip())
    # 200 directions of a Fibonacci lattice on the half sphere, as [ az el ] pairs with commas
    n = 200
    z = 1 - (np.arange(n) + 0.5) / n
    az = np.mod(np.pi * (3 - np.sqrt(5)) * np.arange(n) + np.pi, 2 * np.pi) - np.pi
    other = os.path.join(d, "fibonacci_200.txt")
    with open(other, "w") as f:
        f.write("# azimuth, elevation\n")
        for a, e in zip(az, np.arccos(z)):
            f.write(f"{a:.10f}, {e:.10f}\n")
    out = os.path.join(d, "directions_other")
    rc, _, err = dimoc("csd", *SINGLE, *mask, "--directions", other, "--out", out, expect_ok=False)
    if rc == 0:
        a, b = volumes(nib.load(base)), volumes(nib.load(os.path.join(out, "wm_fod.nii.gz")))
        scale = np.abs(b).max()
        rel = np.abs(a - b).max() / scale
        with open(os.path.join(out, "provenance.json")) as f:
            ndirs = find_key(json.load(f), "constraint_directions")
        check("directions-other-set-used", 0 < rel < 1 and ndirs == 200,
              f"max |difference| from the default set {rel:.2e} of the largest coefficient; "
              f"provenance's constraint_directions {ndirs}")
    else:
        check("directions-other-set-used", False, err.strip())
    # lmax by default: 8, or the response's degree when lower (dwi2fod's): a degree-6 response
    r6 = os.path.join(d, "response_lmax6.txt")
    with open(src("response.txt")) as f:
        row = f.read().split()
    with open(r6, "w") as f:
        f.write(" ".join(row[:4]) + "\n")
    out = os.path.join(d, "lmax_default_6")
    opts6 = [o if o != src("response.txt") else r6 for o in SINGLE]
    rc, _, err = dimoc("csd", *opts6, *mask, "--out", out, expect_ok=False)
    nvol = volumes(nib.load(os.path.join(out, "wm_fod.nii.gz"))).shape[3] if rc == 0 else None
    check("lmax-default-is-the-response-degree-below-8", nvol == 28, f"{nvol} volumes; {err.strip()[-200:]}")
    bad = os.path.join(d, "three_columns.txt")
    np.savetxt(bad, np.eye(3)[[0, 1, 2, 0, 1, 2]])
    out = os.path.join(d, "directions_bad")
    rc, _, err = dimoc("csd", *SINGLE, *mask, "--directions", bad, "--out", out, expect_ok=False)
    lines = [x for x in err.strip().splitlines() if x]
    check("directions-not-az-el-refused", rc != 0 and len(lines) == 1 and "three_columns.txt" in err
          and "azimuth" in err and not os.path.exists(out), f"rc {rc}: {err.strip()}")
    finish()


if __name__ == "__main__":
    main()
