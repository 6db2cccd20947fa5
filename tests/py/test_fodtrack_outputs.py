"""dimoc track --fod's derived outputs against MRtrix 3 on dimoc's OWN tracks.tck (no randomness
in the comparison: the same streamlines go to both), on fodsim's phantom:
  --tdi tdi.nii.gz: the same image as `dimoc tdi tracks.tck --template FOD` (the mapping inside
    the tracker is the standalone one) and as `tckmap -template FOD tracks.tck` (tckmap's own
    mapping: Hermite upsampling, nearest voxels; the grid and affine too), voxel for voxel.
  --tdi-voxel 1: the same against `tckmap -template FOD -vox 1`.
  --connectome PARC: connectome.csv equals `tck2connectome tracks.tck PARC` (its defaults: radial
    search 4 mm, sum of streamline counts, upper triangle) and mean_length.csv equals
    `tck2connectome -scale_length -stat_edge mean` (to 1e-3 mm), with a parcellation of 16 nodes
    (a 4 x 4 in-plane partition of the brain)."""
import os
import shutil

import nibabel as nib
import numpy as np

import fodsim as fs
from dmtest import check, dimoc, finish, load, workdir


def parcellation(d, p):
    q = p["q"]
    ij = np.stack(np.meshgrid(*[np.arange(n) for n in fs.SHAPE], indexing="ij"), -1)
    labels = 1 + ij[..., 0] * 4 // fs.SHAPE[0] + 4 * (ij[..., 1] * 4 // fs.SHAPE[1])
    labels[~fs.brain(q)] = 0
    return fs.save(f"{d}/parc.nii.gz", labels, p["affine"], np.int16)


def matrix(path):
    return np.loadtxt(path, delimiter=",", ndmin=2) if open(path).read().count(",") else np.loadtxt(path, ndmin=2)


def compare_tdi(name, ours_path, tck, d, fod, vox=None):
    """dimoc's TDI against dimoc tdi and tckmap's default on the same tracks (see the top)."""
    if not os.path.exists(ours_path):
        check(f"{name}-written", False, f"{os.path.basename(ours_path)} not written")
        return
    extra = ["--voxel", vox] if vox else []
    rc, _, err = dimoc("tdi", tck, "--template", fod, "--out", f"{d}/{name}_dimoc_tdi.nii.gz", *extra,
                       expect_ok=False)
    same = rc == 0 and np.array_equal(load(ours_path), load(f"{d}/{name}_dimoc_tdi.nii.gz"))
    check(f"{name}-equals-dimoc-tdi", same, err.strip() if rc else f"identical: {same}")
    ref = f"{d}/{name}_tckmap.nii"
    fs.tckmap(tck, fod, ref, vox)
    a, b = nib.load(ours_path), nib.load(ref)
    if a.shape[:3] != b.shape[:3] or not np.allclose(a.affine, b.affine, atol=1e-4):
        check(f"{name}-grid-as-tckmap", False, f"grid {a.shape} vs tckmap's {b.shape}; affines\n"
                                               f"{a.affine.round(4)}\n{b.affine.round(4)}")
        return
    x, y = load(ours_path).reshape(b.shape[:3]), load(ref)
    eq = np.mean(x == y)
    check(f"{name}-equals-tckmap", eq >= 0.9999,
          f"{int(np.sum(x != y))} of {x.size} voxels differ, totals {x.sum():.0f} / {y.sum():.0f}")


def main():
    if not all(shutil.which(t) for t in ("tckmap", "tck2connectome")):
        check("fodtrack-outputs-mrtrix-available", False, "MRtrix3 not found (scripts/install-deps.sh)")
        finish()
    d = workdir("fodtrack_outputs")
    p = fs.phantom(d)
    rc, out, _ = dimoc("help", "track", expect_ok=False)
    missing = [o for o in ("--fod", "--tdi", "--tdi-voxel", "--connectome") if o not in out]
    if rc != 0 or missing:
        check("fodtrack-output-options-exist", False, f"`dimoc help track` lacks {missing}")
        finish()
    parc = parcellation(d, p)
    for alg in ("ifod2", "sd_stream"):
        o = f"{d}/{alg}"
        rc, _, err = dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", o, "--algorithm", alg,
                           "--select", 2000, "--rseed", 3, "--threads", 2, "--device", "cpu", "--tdi", "tdi.nii.gz",
                           "--connectome", parc, expect_ok=False)
        check(f"{alg}-runs", rc == 0, err.strip())
        if rc:
            continue
        tck = f"{o}/tracks.tck"
        compare_tdi(f"{alg}-tdi", f"{o}/tdi.nii.gz", tck, d, p["fod"])
        rc, _, err = fs.run(["tck2connectome", tck, parc, f"{d}/{alg}_conn.csv", "-quiet", "-force"])
        rc2, _, err2 = fs.run(["tck2connectome", tck, parc, f"{d}/{alg}_len.csv", "-scale_length", "-stat_edge",
                               "mean", "-quiet", "-force"])
        if rc or rc2:
            check(f"{alg}-tck2connectome-runs", False, err + err2)
            continue
        for mine, theirs, what, tol in (("connectome.csv", f"{alg}_conn.csv", "connectome", 0),
                                        ("mean_length.csv", f"{alg}_len.csv", "mean-length", 1e-3)):
            path = f"{o}/{mine}"
            if not os.path.exists(path):
                check(f"{alg}-{what}-equals-tck2connectome", False, f"{mine} not written")
                continue
            a, b = matrix(path), matrix(f"{d}/{theirs}")
            ok = a.shape == b.shape and np.abs(a - b).max() <= tol and b.sum() > 0
            check(f"{alg}-{what}-equals-tck2connectome", ok,
                  f"shape {a.shape} vs {b.shape}" + ("" if a.shape != b.shape else
                                                     f", largest difference {np.abs(a - b).max():.4g}, "
                                                     f"{int((np.abs(a - b) > tol).sum())} entries differ; "
                                                     f"sums {a.sum():.1f} / {b.sum():.1f}"))
    # super-resolved TDI (1 mm on the FOD's 2 mm oblique grid)
    o = f"{d}/ifod2_vox1"
    rc, _, err = dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", o, "--select", 1000, "--rseed", 4,
                       "--threads", 2, "--device", "cpu", "--tdi", "tdi.nii.gz", "--tdi-voxel", 1, expect_ok=False)
    check("tdi-voxel-runs", rc == 0, err.strip())
    if rc == 0:
        compare_tdi("tdi-voxel-1", f"{o}/tdi.nii.gz", f"{o}/tracks.tck", d, p["fod"], vox=1)
    finish()


if __name__ == "__main__":
    main()
