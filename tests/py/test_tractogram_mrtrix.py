"""dimoc tdi and dimoc connectome against MRtrix's tckmap and tck2connectome (3.0.x), with
their defaults, on random smooth streamlines (0.5 mm steps) written here as .tck, in an oblique
2 mm image.

- tdi (default): tckmap's default mapping (its Hermite upsampling at ratio
  ceil(step_size / (0.333 x voxel)), samples rounded to voxels, in single precision), so equal
  to tckmap -template voxel for voxel: on the 2 mm grid (ratio 1), with --voxel 0.5 (ratio 4)
  and 1.5 (ratio 2), on templates that MRtrix realigns (an axis reversed, two swapped; with
  -vox 1.5 not dividing the field of view, so the grid ends where tckmap's does), and for a
  .tck without step_size (ratio 1).  Asserted: >= 99.99% of the
  voxels equal (all of them, measured).
- tdi --exact: equal to an independent walk written here (segments cut at every voxel face,
  pieces looked up at their midpoints) in >= 99.99% of voxels; the few others come from the
  map's affine read back from its float32 header, which moves a face by ~1e-7 mm.
- tdi --exact against tckmap: the same grid (dims and affine) with -template and with -vox 0.5
  and -vox 1.5.  Measured against tckmap -upsample 40 (samples 0.0125 mm apart): 98.8% of the
  voxels equal at 2 mm, 99.0% at 1.5 mm, 99.7% at 0.5 mm (r >= 0.994); the voxels that differ
  are ones a segment only grazes (depth below 0.001 voxel: a corner cut between samples) or
  where the curve bulges past a face.  The limits are 98.5% (2 and 1.5 mm) and 99.5% (0.5 mm),
  r > 0.99.  tckmap's default misses many more grazed voxels (68% equal at 2 mm, 97.5% at
  0.5 mm) and adds almost none: checked as tckmap <= dimoc --exact in 99.9% of the voxels.
- connectome: counts equal edge by edge (the assignment is the same computation), mean lengths
  within 1e-3 relative (tck2connectome sums segment lengths in single precision).
- the .tck reader: a wrong header count, a truncated file, a file that is not a tractogram, an
  unknown datatype: each one error line naming the file, and a non-zero exit; Float32BE,
  Float64LE and Float64BE read as Float32LE does; a file without the end-of-file marker whose
  count agrees is read.
Needs MRtrix3 (scripts/install-deps.sh installs it)."""
import os
import shutil

import nibabel as nib
import numpy as np

import peercache
from dmtest import check, dimoc, finish, save, workdir

STEP = 0.5  # mm between points


def oblique_affine(vox, origin):
    """A 10-degree rotation about z and 5 about x: no axis swap in MRtrix's realignment."""
    a, b = np.radians(10), np.radians(5)
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    aff = np.eye(4)
    aff[:3, :3] = rz @ rx @ np.diag(vox)
    aff[:3, 3] = origin
    return aff


def random_streamlines(rng, n, aff, shape):
    """Smooth random walks (persistent direction, about 4 degrees of turn per mm), started
    inside the image; some leave it."""
    out = []
    for _ in range(n):
        ijk = rng.uniform([2, 2, 2], np.array(shape) - 3)
        p = aff[:3, :3] @ ijk + aff[:3, 3]
        d = rng.normal(size=3)
        d /= np.linalg.norm(d)
        pts = [p]
        for _ in range(rng.integers(16, 180)):
            d = d + rng.normal(scale=0.05, size=3)
            d /= np.linalg.norm(d)
            p = p + STEP * d
            pts.append(p)
        out.append(np.array(pts, dtype=np.float32))
    return out


def write_tck(path, streamlines, count=None, end_marker=True, dtype="Float32LE", step=True):
    head = "mrtrix tracks\ndatatype: %s\n%scount: %d\n" % (
        dtype, "step_size: %g\n" % STEP if step else "", len(streamlines) if count is None else count)
    offset = len(head) + 32
    head += "file: . %d\nEND\n" % offset
    data = head.encode().ljust(offset, b" ")
    t = {"Float32LE": "<f4", "Float32BE": ">f4", "Float64LE": "<f8", "Float64BE": ">f8"}[dtype]
    nan, inf = np.full(3, np.nan, t).tobytes(), np.full(3, np.inf, t).tobytes()
    data += b"".join(np.asarray(s, t).tobytes() + nan for s in streamlines)
    if end_marker:
        data += inf
    with open(path, "wb") as f:
        f.write(data)
    return path


def mrtrix(*args):
    rc, _, err = peercache.run([*args, "-quiet", "-force"])
    if rc != 0:
        raise RuntimeError(f"{args[0]} failed: {err.strip()}")


def exact_tdi(streamlines, affine, shape, weights=None):
    """The voxels each polyline passes through, computed another way than dimoc's walk: every
    segment is cut at all the voxel faces it crosses (in voxel coordinates, voxel i spanning
    [i - 0.5, i + 0.5)), and each piece of non-zero length is looked up at its midpoint.  Each
    voxel gains 1 per streamline, or the streamline's weight when weights are given."""
    inv = np.linalg.inv(affine)
    tdi = np.zeros(int(np.prod(shape)), np.int64 if weights is None else np.float64)
    dims = np.array(shape)
    for n, s in enumerate(streamlines):
        v = np.asarray(s, np.float64) @ inv[:3, :3].T + inv[:3, 3]
        a, b = v[:-1], v[1:]
        d = b - a
        reach = int(np.ceil(np.abs(d).max())) + 1
        ts = [np.zeros((len(a), 1)), np.ones((len(a), 1))]
        for k in range(3):
            lo = np.minimum(a[:, k], b[:, k])
            hi = np.maximum(a[:, k], b[:, k])
            faces = np.floor(lo + 0.5)[:, None] + 0.5 + np.arange(reach)[None, :]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (faces - a[:, k:k + 1]) / d[:, k:k + 1]
            t[(faces <= lo[:, None]) | (faces >= hi[:, None])] = np.nan
            ts.append(t)
        t = np.sort(np.concatenate(ts, axis=1), axis=1)  # NaNs last
        mid = 0.5 * (t[:, 1:] + t[:, :-1])
        keep = np.isfinite(mid) & (t[:, 1:] > t[:, :-1])
        seg = np.nonzero(keep)[0]
        p = a[seg] + mid[keep][:, None] * d[seg]
        c = np.floor(p + 0.5).astype(np.int64)
        inside = np.all((c >= 0) & (c < dims), axis=1)
        c = c[inside]
        tdi[np.unique(c[:, 0] + shape[0] * (c[:, 1] + shape[1] * c[:, 2]))] += (
            1 if weights is None else weights[n])
    return tdi.reshape(shape, order="F")


def agreement(x, y):
    hit = (x > 0) | (y > 0)
    return (x == y).mean(), (x[hit] == y[hit]).mean(), np.corrcoef(x.ravel(), y.ravel())[0, 1]


def compare_tdi(d, name, tck, streamlines, template, vox, limit_dense):
    vox_args = ["--voxel", vox] if vox else []
    ours = f"{d}/{name}_dimoc.nii.gz"
    dimoc("tdi", tck, "--template", template, "--out", ours, "--exact", *vox_args)
    a = nib.load(ours)
    x = np.asarray(a.dataobj, float)
    exact = exact_tdi(streamlines, a.affine, a.shape)
    eq, _, _ = agreement(x, exact)
    check(f"tdi_{name}_exact", a.get_data_dtype() == np.uint32 and eq >= 0.9999,
          f"{a.get_data_dtype()}; {eq:.4%} of {x.size} voxels equal to the reference walk "
          f"(totals {x.sum():.0f} vs {exact.sum():.0f})")
    for kind, extra in (("dense", ["-upsample", 40]), ("default", [])):
        theirs = f"{d}/{name}_mrtrix_{kind}.nii.gz"
        mrtrix("tckmap", tck, theirs, "-template", template, *(["-vox", vox] if vox else []), *extra)
        b = nib.load(theirs)
        same_grid = a.shape == b.shape and np.allclose(a.affine, b.affine, atol=1e-4)
        if kind == "dense":
            check(f"tdi_{name}_grid", same_grid,
                  f"dimoc {a.shape} {a.affine.round(4).tolist()} vs tckmap {b.shape} "
                  f"{b.affine.round(4).tolist()}")
        if not same_grid:
            return
        y = np.asarray(b.dataobj, float)
        eq, eq_hit, r = agreement(x, y)
        detail = (f"{eq:.2%} of {x.size} voxels equal, {eq_hit:.2%} of the {((x > 0) | (y > 0)).sum()} "
                  f"hit; r = {r:.5f}; totals {x.sum():.0f} vs {y.sum():.0f}; tckmap higher in "
                  f"{(y > x).sum()} voxels, lower in {(y < x).sum()}")
        if kind == "dense":
            check(f"tdi_{name}_exact_vs_tckmap_upsample40", eq >= limit_dense and r > 0.99, detail)
        else:  # tckmap's own sampling misses voxels, it does not add any
            check(f"tdi_{name}_exact_vs_tckmap_default", (y <= x).mean() >= 0.999 and r > 0.9, detail)
    # The default: tckmap's mapping, voxel for voxel.
    default = f"{d}/{name}_dimoc_default.nii.gz"
    dimoc("tdi", tck, "--template", template, "--out", default, *vox_args)
    same_as_tckmap(f"tdi_{name}_equals_tckmap", default, f"{d}/{name}_mrtrix_default.nii.gz")


def same_as_tckmap(name, ours, theirs):
    """Voxel for voxel: >= 99.99% equal asserted, the number that differ reported."""
    a, b = nib.load(ours), nib.load(theirs)
    if a.shape != b.shape or not np.allclose(a.affine, b.affine, atol=1e-4):
        check(name, False, f"grids differ: {a.shape} vs {b.shape}")
        return
    x, y = np.asarray(a.dataobj, np.int64), np.asarray(b.dataobj, np.int64)
    differ = int((x != y).sum())
    check(name, a.get_data_dtype() == np.uint32 and differ <= 1e-4 * x.size and y.sum() > 0,
          f"{differ} of {x.size} voxels differ ({1 - differ / x.size:.4%} equal); "
          f"{(y > 0).sum()} hit; totals {x.sum()} vs {y.sum()}")


def parcellation(rng, shape):
    """Labels 1..27 in 3x3x3 blocks, with 40% of voxels left unlabelled so that endpoints
    search; label 27 unused where the blocks leave it out."""
    idx = np.indices(shape)
    lab = 1 + sum((idx[k] * 3 // shape[k]) * 3 ** k for k in range(3))
    lab[rng.random(shape) < 0.4] = 0
    return lab.astype(np.float32)


def test_connectome(d, rng, tck, aff_parc, shape):
    parc = save(f"{d}/parc.nii.gz", parcellation(rng, shape), aff_parc)
    dimoc("connectome", tck, "--parc", parc, "--out", f"{d}/conn")
    mrtrix("tck2connectome", tck, parc, f"{d}/mr_count.csv")
    mrtrix("tck2connectome", tck, parc, f"{d}/mr_length.csv", "-scale_length", "-stat_edge", "mean")
    ours = np.loadtxt(f"{d}/conn/connectome.csv", delimiter=",")
    theirs = np.loadtxt(f"{d}/mr_count.csv", delimiter=",")
    same = ours.shape == theirs.shape
    diff = np.abs(ours - theirs).sum() if same else -1
    check("connectome_counts", same and diff == 0 and theirs.sum() > 100,
          f"shapes {ours.shape} vs {theirs.shape}; {theirs.sum():.0f} streamlines in edges, "
          f"{diff:.0f} counted differently")
    ours = np.loadtxt(f"{d}/conn/mean_length.csv", delimiter=",")
    theirs = np.loadtxt(f"{d}/mr_length.csv", delimiter=",")
    rel = np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-9)
    check("connectome_mean_length", ours.shape == theirs.shape and rel.max() < 1e-3
          and (theirs > 0).sum() > 10,
          f"{(theirs > 0).sum()} edges; largest relative difference {rel.max():.2e}")
    text = open(f"{d}/conn/connectome.csv").read().splitlines()
    check("connectome_csv_layout", len(text) == 27 and all(len(t.split(",")) == 27 for t in text)
          and np.all(np.tril(np.loadtxt(f"{d}/conn/connectome.csv", delimiter=","), -1) == 0),
          "27 rows of 27 values, upper triangle")


def one_error_line(name, args, want):
    rc, out, err = dimoc(*args, expect_ok=False)
    lines = [l for l in err.splitlines() if l.strip()]
    ok = rc != 0 and len(lines) == 1 and all(w in lines[0] for w in want)
    check(name, ok, f"rc {rc}, stderr {err.strip()!r}; wanted one line with {want}")


def test_bad_inputs(d, streamlines, template, parc):
    good = write_tck(f"{d}/good.tck", streamlines[:50])
    wrong = write_tck(f"{d}/wrong_count.tck", streamlines[:50], count=60)
    one_error_line("tck_wrong_count", ["tdi", wrong, "--template", template, "--out",
                                       f"{d}/x.nii.gz"], [wrong, "60", "50"])
    data = open(good, "rb").read()
    cut = f"{d}/truncated.tck"
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2 + 5])
    one_error_line("tck_truncated", ["connectome", cut, "--parc", parc, "--out", f"{d}/c2"],
                   [cut, "truncated"])
    one_error_line("tck_not_a_tck", ["tdi", template, "--template", template, "--out",
                                     f"{d}/x.nii.gz"], [template, "not an MRtrix tracks file"])
    no_end = f"{d}/no_end.tck"
    with open(no_end, "wb") as f:
        f.write(data[:-12])  # whole streamlines, no Inf triplet, the count right: accepted
    rc, _, err = dimoc("tdi", no_end, "--template", template, "--out", f"{d}/x.nii.gz",
                       expect_ok=False)
    check("tck_no_end_marker_whole", rc == 0, err.strip())
    check("tdi_no_leftover", not os.path.exists(f"{d}/c2") and not any(
        n.startswith(".") for n in os.listdir(d)), str(sorted(os.listdir(d))))
    one_error_line("tdi_unknown_option", ["tdi", good, "--template", template, "--out",
                                          f"{d}/x.nii.gz", "--vox", "1"], ["--vox", "dimoc help tdi"])
    one_error_line("connectome_unknown_option", ["connectome", good, "--parc", parc, "--out",
                                                 f"{d}/c3", "--symmetric"],
                   ["--symmetric", "dimoc help connectome"])
    frac = save(f"{d}/frac.nii.gz", np.full((4, 4, 4), 1.5))
    one_error_line("parc_not_integer", ["connectome", good, "--parc", frac, "--out", f"{d}/c4"],
                   [frac, "whole number"])
    neg = save(f"{d}/neg.nii.gz", -np.ones((4, 4, 4)))
    one_error_line("parc_negative", ["connectome", good, "--parc", neg, "--out", f"{d}/c4"],
                   [neg, "negative"])
    # The other datatypes read as the same streamlines (points stored as floats).
    want = nib.load(f"{d}/x.nii.gz").get_fdata()
    for dtype in ("Float32BE", "Float64LE", "Float64BE"):
        other = write_tck(f"{d}/{dtype}.tck", streamlines[:50], dtype=dtype)
        dimoc("tdi", other, "--template", template, "--out", f"{d}/{dtype}.nii.gz")
        got = nib.load(f"{d}/{dtype}.nii.gz").get_fdata()
        check(f"tck_{dtype}", np.array_equal(got, want) and want.sum() > 0, f"{got.sum()} vs {want.sum()}")
    bad_type = write_tck(f"{d}/int.tck", streamlines[:5])
    raw = open(bad_type, "rb").read().replace(b"Float32LE", b"Int16LE  ", 1)
    open(bad_type, "wb").write(raw)
    one_error_line("tck_unknown_datatype", ["tdi", bad_type, "--template", template, "--out",
                                            f"{d}/y.nii.gz"], [bad_type, "Int16LE"])
    for cmd in ("tdi", "connectome"):
        rc, out, _ = dimoc("help", cmd, expect_ok=False)
        check(f"help_{cmd}", rc == 0 and f"dimoc {cmd}" in out and "--threads" in out
              and (cmd != "tdi" or "--exact" in out), out[:80])


def main():
    if not (shutil.which("tckmap") and shutil.which("tck2connectome")):
        check("tractogram_mrtrix", False, "MRtrix3's tckmap/tck2connectome not found")
        return
    d = workdir("tractogram_mrtrix")
    rng = np.random.default_rng(11)
    shape = (24, 26, 20)
    aff = oblique_affine([2.0, 2.0, 2.0], [-20, -30, -15])
    template = save(f"{d}/template.nii.gz", np.zeros(shape), aff)
    streamlines = random_streamlines(rng, 3000, aff, shape)
    tck = write_tck(f"{d}/tracks.tck", streamlines)
    compare_tdi(d, "2mm", tck, streamlines, template, None, 0.985)
    compare_tdi(d, "vox0.5", tck, streamlines, template, 0.5, 0.995)
    compare_tdi(d, "vox1.5", tck, streamlines, template, 1.5, 0.985)
    # A template tckmap realigns (x reversed, the axes of y and x swapped), 25 voxels so that
    # -vox 1.5 does not divide the field of view: the grid and its counts still tckmap's.
    for label, cols, extent in (("las", [0, 1, 2], (25, 26, 20)), ("swapped", [1, 0, 2], (25, 27, 19))):
        other = aff[:, cols + [3]]
        other[:3, 0] *= -1
        # centred where the streamlines are
        other[:3, 3] = aff[:3, :3] @ (np.array(shape) / 2) + aff[:3, 3] - other[:3, :3] @ (
            np.array(extent) / 2)
        tpl = save(f"{d}/template_{label}.nii.gz", np.zeros(extent), other)
        for vox in (None, 1.5):
            name = f"{label}_{vox or 2}"
            vox_args = ["--voxel", vox] if vox else []
            dimoc("tdi", tck, "--template", tpl, "--out", f"{d}/{name}.nii.gz", *vox_args)
            mrtrix("tckmap", tck, f"{d}/{name}_mrtrix.nii.gz", "-template", tpl,
                   *(["-vox", vox] if vox else []))
            same_as_tckmap(f"tdi_{name}_equals_tckmap", f"{d}/{name}.nii.gz",
                           f"{d}/{name}_mrtrix.nii.gz")
    # No step_size in the header: tckmap does not upsample; neither does dimoc.
    bare = write_tck(f"{d}/no_step.tck", streamlines, step=False)
    dimoc("tdi", bare, "--template", template, "--out", f"{d}/no_step.nii.gz", "--voxel", 0.5)
    mrtrix("tckmap", bare, f"{d}/no_step_mrtrix.nii.gz", "-template", template, "-vox", 0.5)
    same_as_tckmap("tdi_no_step_size_equals_tckmap", f"{d}/no_step.nii.gz",
                   f"{d}/no_step_mrtrix.nii.gz")
    # The parcellation on a grid of its own: 3 mm, shifted.
    pshape = (16, 18, 14)
    test_connectome(d, rng, tck, oblique_affine([3.0, 3.0, 3.0], [-21, -31, -16]), pshape)
    test_bad_inputs(d, streamlines, template, f"{d}/parc.nii.gz")


if __name__ == "__main__":  # test_tck_weights.py imports the helpers above
    main()
    finish()
