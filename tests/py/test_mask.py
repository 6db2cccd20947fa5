"""dimoc mask against MRtrix 3.0.3's dwi2mask, and against the truth of a simulated head.

1. MRtrix's own regression test of dwi2mask (testing/binaries/tests/dwi2mask: `dwi2mask dwi.mif`
   against dwi2mask/out.mif, compared exactly, as the mask is bitwise): tests/data/mrtrix_dwi2mask
   holds both files (README.md there).  dimoc's mask must equal the reference voxel for voxel, on
   the same grid: from dwi.mif and its own dw_scheme, written as .mif (as MRtrix's test runs),
   and from the NIfTI mrconvert makes of it with FSL bvals/bvecs, or with an MRtrix b-table.
2. MRtrix's multi-shell dwi2fod test data (tests/data/mrtrix_dwi2fod/msmt: b = 0, 700, 1200,
   2800), against dwi2mask run here: identical.
3. A simulated head, 48 x 56 x 32 voxels of 2 mm, b = 0 (5), 1000 (24), 2000 (24) with Rician
   noise (sigma 25 against S0 1000 in tissue): an ellipsoid brain (tissue D = 0.8e-3 mm^2/s,
   ventricles of CSF), a hole inside it (no signal: noise only), a blob of tissue apart from it,
   an "eye" of CSF joined to its tip by a 3 x 3 voxel bridge, a voxel whose every volume is 0
   and one with a NaN.  dimoc and dwi2mask must agree voxel for voxel at --clean-scale 2 (the
   default), 1, 0 and 12 (beyond the mask's erosion depth); each shell's threshold must be
   mrthreshold's (its automatic threshold is the same Ridgway search) on the shell's mean image
   to the 6 digits both print; against the
   truth (the ellipsoid, hole included), Dice >= 0.97; the hole is filled, the blob left out,
   the eye cut off at scale 2 and kept at 0, the all-zero voxel left out when cleaning.
   --threads 1 gives the same bytes as all threads.
4. Bad inputs (3D data, bvals or bvecs not matching the volumes, no b = 0, no gradient table,
   --bvals alone, a missing file, an unknown option, a bad --clean-scale, an output name of no
   image format): each refused with one line naming the file or option, a non-zero status and no
   output (an existing output is left as it was, no temporary left behind).

Every comparison prints the number of differing voxels out of the grid's.  About 5 s on 2
cores (dwi2mask's outputs cached by tests/py/peercache.py)."""
import json
import os

import nibabel as nib
import numpy as np

from dmtest import check, dimoc, finish, workdir
from peercache import run_command

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "mrtrix_dwi2mask")
MSMT = os.path.join(HERE, "..", "data", "mrtrix_dwi2fod", "msmt")


def mrtrix(*args):
    rc, out, err = run_command([str(a) for a in args] + ["-quiet"])
    if rc != 0:
        raise RuntimeError(f"{args[0]} failed: {err.strip()}")
    return out


def mask_of(path):
    return np.asarray(nib.load(path).dataobj) != 0


def agree(name, ours, theirs, detail=""):
    """check() that two mask files hold the same voxels on the same grid."""
    a, b = nib.load(ours), nib.load(theirs)
    same_grid = a.shape == b.shape and np.allclose(a.affine, b.affine, atol=1e-4)
    diff = int((mask_of(ours) != mask_of(theirs)).sum()) if a.shape == b.shape else -1
    n = int(np.prod(a.shape))
    check(name, same_grid and diff == 0 and a.get_data_dtype() == np.uint8,
          f"{diff} of {n} voxels differ, {int(mask_of(theirs).sum())} in the mask{detail}"
          + ("" if same_grid else f"; grids differ: {a.shape} {b.shape}"))
    return diff


def run_mask(d, name, data, bvals, bvecs, *extra):
    out = os.path.join(d, f"{name}.nii.gz")
    _, stdout, _ = dimoc("mask", "--data", data, "--bvals", bvals, "--bvecs", bvecs, "--out", out, *extra)
    return out, stdout


def regression(d):
    ref = f"{d}/ref.nii"
    mrtrix("mrconvert", os.path.join(DATA, "out.mif"), ref, "-datatype", "uint8")
    # as MRtrix's test runs it: the .mif with its own dw_scheme, the mask written as .mif
    ours_mif = f"{d}/mrtrix_test.mif"
    dimoc("mask", "--data", os.path.join(DATA, "dwi.mif"), "--out", ours_mif)
    ours = f"{d}/mrtrix_test_mif.nii"
    mrtrix("mrconvert", ours_mif, ours)
    agree("mrtrix-regression-dwi2mask-mif", ours, ref)
    # the same data as NIfTI with FSL bvals/bvecs, and with an MRtrix b-table (--grad)
    dwi, bvecs, bvals, grad = f"{d}/dwi.nii", f"{d}/dwi.bvecs", f"{d}/dwi.bvals", f"{d}/dwi.b"
    mrtrix("mrconvert", os.path.join(DATA, "dwi.mif"), dwi, "-export_grad_fsl", bvecs, bvals,
           "-export_grad_mrtrix", grad)
    ours, _ = run_mask(d, "mrtrix_test", dwi, bvals, bvecs)
    agree("mrtrix-regression-dwi2mask-nifti-fsl", ours, ref)
    ours = f"{d}/mrtrix_test_grad.nii.gz"
    dimoc("mask", "--data", dwi, "--grad", grad, "--out", ours)
    agree("mrtrix-regression-dwi2mask-nifti-grad", ours, ref)

    msmt = [os.path.join(MSMT, f) for f in ("dwi.nii.gz", "dwi.bvals", "dwi.bvecs")]
    theirs = f"{d}/msmt_dwi2mask.nii.gz"
    mrtrix("dwi2mask", msmt[0], "-fslgrad", msmt[2], msmt[1], theirs)
    ours, _ = run_mask(d, "msmt", *msmt)
    agree("msmt-dwi2mask", ours, theirs, " (b = 0, 700, 1200, 2800)")


# The simulated head: its regions on the grid (voxel indices).
SHAPE = (48, 56, 32)
CENTRE, RADII = np.array([24.0, 24.0, 15.5]), np.array([17.0, 18.0, 11.0])
HOLE, HOLE_R = np.array([30.0, 20.0, 16.0]), 2.6
BLOB, BLOB_R = np.array([6.0, 48.0, 6.0]), 3.2
EYE, EYE_R = np.array([24.0, 49.0, 15.5]), 4.6
DEAD, NAN_AT = (18, 24, 15), (26, 28, 12)


def head(d):
    """Writes the head's DWI, bvals and bvecs; returns their paths and the regions."""
    rng = np.random.default_rng(20)
    b = np.r_[np.zeros(4), 5.0, 1000 + rng.uniform(-15, 15, 24), 2000 + rng.uniform(-15, 15, 24)]
    g = rng.normal(size=(len(b), 3))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    g[b < 10] = 0
    idx = np.stack(np.meshgrid(*[np.arange(s) for s in SHAPE], indexing="ij"), -1).astype(float)
    inside = lambda c, r: (((idx - c) / r) ** 2).sum(-1) <= 1  # noqa: E731
    brain = inside(CENTRE, RADII)
    ventricles = inside(CENTRE + [0, -2, 1], np.array([5.0, 8.0, 3.0]))
    hole = inside(HOLE, HOLE_R)
    blob = inside(BLOB, BLOB_R)
    eye = inside(EYE, EYE_R)
    bridge = np.zeros(SHAPE, bool)
    bridge[23:26, 40:47, 14:17] = True  # 3 x 3 voxels across, from the brain's tip to the eye
    bridge &= ~brain & ~eye
    s0 = np.zeros(SHAPE)
    diff = np.zeros(SHAPE)
    tissue = (brain | blob | bridge) & ~hole
    s0[tissue] = 1000 * (1 + 0.1 * np.sin(idx[tissue, 0] / 4) * np.cos(idx[tissue, 1] / 5))
    diff[tissue] = 0.8e-3
    csf = ventricles | eye
    s0[csf], diff[csf] = 1800, 3.0e-3
    clean = s0[..., None] * np.exp(-b * diff[..., None])
    sigma = 25.0
    noisy = np.hypot(clean + rng.normal(0, sigma, clean.shape), rng.normal(0, sigma, clean.shape))
    noisy[DEAD] = 0
    noisy[NAN_AT + (30,)] = np.nan
    aff = np.diag([2.0, 2.0, 2.0, 1.0])
    aff[:3, 3] = [-48, -60, -30]
    data = f"{d}/head.nii.gz"
    nib.save(nib.Nifti1Image(noisy.astype(np.float32), aff), data)
    bvals, bvecs = f"{d}/head.bvals", f"{d}/head.bvecs"
    np.savetxt(bvals, b[None], fmt="%.6g")
    np.savetxt(bvecs, g.T, fmt="%.6f")
    regions = {"brain": brain, "hole": hole, "blob": blob, "eye": inside(EYE, EYE_R - 1.5)}
    return data, bvals, bvecs, regions, b, noisy


def shell_means(b, noisy):
    """The shells' mean images as dwi2mask makes them: positive values as float32, summed in
    double in volume order, divided by the shell's count, rounded to float32."""
    x = noisy.astype(np.float32).astype(np.float64)
    x = np.where(x > 0, x, 0.0)
    return {s: (x[..., sel].sum(-1) / sel.sum()).astype(np.float32)
            for s, sel in (("0", b <= 10), ("1000", (b > 10) & (b < 1500)), ("2000", b >= 1500))}


def simulated(d):
    data, bvals, bvecs, regions, b, noisy = head(d)
    n = int(np.prod(SHAPE))
    for scale in (2, 1, 0, 12):
        theirs = f"{d}/head_dwi2mask_{scale}.nii.gz"
        mrtrix("dwi2mask", data, "-fslgrad", bvecs, bvals, theirs, "-clean_scale", scale)
        ours, stdout = run_mask(d, f"head_{scale}", data, bvals, bvecs, "--clean-scale", scale)
        agree(f"head-dwi2mask-clean-scale-{scale}", ours, theirs)
        m = mask_of(ours)
        if scale == 2:
            dice = 2 * (m & regions["brain"]).sum() / (m.sum() + regions["brain"].sum())
            check("head-dice-truth", dice >= 0.97,
                  f"Dice {dice:.4f} with the ellipsoid; {int((m != regions['brain']).sum())} of {n} "
                  f"voxels differ from it")
            check("head-hole-filled", m[regions["hole"]].all(), f"{int(m[regions['hole']].sum())} of "
                  f"{int(regions['hole'].sum())} hole voxels in the mask")
            check("head-blob-left-out", not m[regions["blob"]].any(),
                  f"{int(m[regions['blob']].sum())} blob voxels in the mask")
            check("head-eye-cut-off", not m[regions["eye"]].any() and not m[DEAD] and m[NAN_AT],
                  f"{int(m[regions['eye']].sum())} eye voxels in the mask; all-zero voxel "
                  f"{'in' if m[DEAD] else 'out'}, NaN voxel {'in' if m[NAN_AT] else 'out'}")
            thresholds = [float(t.split()[-1]) for t in stdout.split("images:")[1].split(";")[0].split(",")]
            means = shell_means(b, noisy)
            want = []
            for name, img in means.items():
                p = f"{d}/mean_{name}.nii"
                nib.save(nib.Nifti1Image(img, np.eye(4)), p)
                want.append(float(mrtrix("mrthreshold", p).split()[0]))
            ok = len(thresholds) == 3 and np.allclose(thresholds, want, rtol=2e-6, atol=0)
            check("head-thresholds-mrthreshold", ok, f"dimoc {thresholds}, mrthreshold {want}")
            again, _ = run_mask(d, "head_1thread", data, bvals, bvecs, "--threads", 1)
            same = open(again, "rb").read() == open(ours, "rb").read()
            check("head-threads-same-bytes", same, "--threads 1 and all threads")
            prov_path = ours.replace(".nii.gz", ".provenance.json")
            prov = json.load(open(prov_path)) if os.path.exists(prov_path) else {}
            res = prov.get("results", {})
            check("head-provenance", prov.get("dimoc_command") == "mask"
                  and prov.get("inputs", {}).get("data") == data
                  and res.get("voxels") == int(m.sum()) and res.get("shells") == len(thresholds)
                  and np.allclose([res.get(f"shell{k + 1}_threshold", np.nan) for k in range(len(thresholds))],
                                  thresholds, rtol=1e-5),  # printed to 6 digits
                  json.dumps(prov)[:300])
        if scale == 0:
            check("head-no-clean-keeps-eye", m[regions["eye"]].all() and m[DEAD],
                  f"{int(m[regions['eye']].sum())} of {int(regions['eye'].sum())} eye voxels; "
                  f"all-zero voxel {'in' if m[DEAD] else 'out'}")
    return data, bvals, bvecs


def refused(name, args, words, out, keep=None):
    """A run that must fail: one line holding every word, status non-zero, `out` absent (or, with
    keep, the bytes it had), nothing else left in out's folder."""
    folder = os.path.dirname(out)
    before = set(os.listdir(folder))
    rc, _, err = dimoc("mask", *args, "--out", out, expect_ok=False)
    lines = [x for x in err.strip().splitlines() if x]
    left = keep is None and os.path.exists(out) or keep is not None and open(out, "rb").read() != keep
    new = set(os.listdir(folder)) - before
    ok = 0 < rc < 126 and len(lines) == 1 and all(w in err for w in words) and not left and not new
    check(f"refused-{name}", ok, f"rc {rc}: {err.strip()}" + (f"; left {sorted(new)}" if new else "")
          + ("; output written" if left else ""))


def bad_inputs(d, data, bvals, bvecs):
    out = f"{d}/bad/mask.nii.gz"
    os.makedirs(os.path.dirname(out))
    vol = nib.load(data)
    three_d = f"{d}/three_d.nii.gz"
    nib.save(nib.Nifti1Image(np.asarray(vol.dataobj)[..., 0], vol.affine), three_d)
    b = np.loadtxt(bvals)
    g = np.loadtxt(bvecs)
    short_bvals, short_bvecs, no_b0 = f"{d}/short.bvals", f"{d}/short.bvecs", f"{d}/no_b0.bvals"
    np.savetxt(short_bvals, b[None, :-1], fmt="%.6g")
    np.savetxt(short_bvecs, g[:, :-1], fmt="%.6f")
    nb = b.copy()
    nb[nb <= 10] = 1000
    gb = g.copy()
    gb[:, b <= 10] = [[1.0], [0.0], [0.0]]
    np.savetxt(no_b0, nb[None], fmt="%.6g")
    no_b0_vecs = f"{d}/no_b0.bvecs"
    np.savetxt(no_b0_vecs, gb, fmt="%.6f")
    good = ["--data", data, "--bvals", bvals, "--bvecs", bvecs]
    refused("3d-data", ["--data", three_d, "--bvals", bvals, "--bvecs", bvecs], [three_d, "3D"], out)
    refused("bvals-count", ["--data", data, "--bvals", short_bvals, "--bvecs", bvecs], [short_bvals], out)
    refused("bvecs-count", ["--data", data, "--bvals", bvals, "--bvecs", short_bvecs], [short_bvecs], out)
    refused("no-b0", ["--data", data, "--bvals", no_b0, "--bvecs", no_b0_vecs], [no_b0, "b = 0"], out)
    refused("no-table", ["--data", data], [data], out)
    refused("bvals-alone", ["--data", data, "--bvals", bvals], ["--bvecs"], out)
    refused("missing-data", ["--data", f"{d}/absent.nii.gz", "--bvals", bvals, "--bvecs", bvecs],
            [f"{d}/absent.nii.gz"], out)
    refused("unknown-option", good + ["--clean_scale", "2"], ["--clean_scale"], out)
    refused("clean-scale-negative", good + ["--clean-scale", "-1"], ["--clean-scale"], out)
    refused("clean-scale-word", good + ["--clean-scale", "two"], ["--clean-scale"], out)
    refused("out-ending", good, [f"{d}/bad/mask.txt"], f"{d}/bad/mask.txt")
    # a failed run leaves an existing output as it was
    dimoc("mask", *good, "--out", out)
    kept = open(out, "rb").read()
    refused("keeps-existing", ["--data", data, "--bvals", short_bvals, "--bvecs", bvecs], [short_bvals],
            out, keep=kept)


def main():
    d = workdir("mask")
    regression(d)
    data, bvals, bvecs = simulated(d)
    bad_inputs(d, data, bvals, bvecs)
    finish()


if __name__ == "__main__":
    main()
