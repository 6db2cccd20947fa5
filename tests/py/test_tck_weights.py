"""Per-streamline weights (the text file of MRtrix's -tck_weights_in and tcksift2's output).

- dimoc tdi --weights against tckmap -tck_weights_in on random smooth streamlines in an oblique
  2 mm image (the helpers of test_tractogram_mrtrix.py), on the template's grid (ratio 1) and
  with --voxel 0.5 (ratio 4): the same voxels hit, and float32 sums within 1e-5 relative in
  >= 99.99% of the voxels (measured: all, the largest difference one float32 step: tckmap adds
  in float in the order its threads deliver, dimoc in double in streamline order, so that one
  thread gives the same map as several, checked).  With every weight 1 the map holds the
  unweighted counts.  --exact --weights equals an independent
  walk (test_tractogram_mrtrix.exact_tdi) with the same weights.
- dimoc connectome --weights against tck2connectome -tck_weights_in: the sums of weights per
  edge within 1e-9 relative (both read the weights as float and add them in double: measured
  equal), and the weighted mean lengths (tck2connectome -scale_length -stat_edge mean
  -tck_weights_in: sum(w len) / sum(w)) within 1e-3 relative, as the unweighted test.
- A weights file with MRtrix's '#' comment line, several values a line, or ',' between
  them reads as one value per line does.
- Bad weights files (fewer or more values than streamlines, a word, a negative value, NaN, a
  missing file): one error line naming the file and what is wrong, a non-zero exit, and no
  output (nor a temporary file) written.
- dimoc track --fod --weights NAME: NAME has one value, 1, per streamline of tracks.tck (read
  by nibabel, and its header count), tckmap -tck_weights_in takes it; with --tdi and
  --connectome the maps are those of a run without --weights; stopped by SIGINT, the shorter
  tracks.tck and NAME still have the same count.
Needs MRtrix3 (scripts/install-deps.sh installs it)."""
import glob
import os
import shutil
import signal
import subprocess
import time

import nibabel as nib
import numpy as np

import fodsim
from dmtest import DIMOC, check, dimoc, finish, save, workdir
from test_tractogram_mrtrix import (exact_tdi, mrtrix, oblique_affine, parcellation,
                                    random_streamlines, write_tck)


def write_weights(path, w, style="lines"):
    """w as text: one a line, or tcksift2's way (a '#' comment line, then all on one line), or
    several a line separated by ', '."""
    text = ["%.9g" % x for x in np.asarray(w, np.float32)]
    with open(path, "w") as f:
        if style == "lines":
            f.write("\n".join(text) + "\n")
        elif style == "sift":
            f.write("# tcksift2 tracks.tck wm_fod.mif weights.txt (version=3.0.3)\n" + " ".join(text) + "\n")
        else:  # commas, ten a line
            f.write("\n".join(", ".join(text[i:i + 10]) for i in range(0, len(text), 10)) + "\n")
    return path


def compare_map(name, ours, theirs):
    """Weighted maps: same grid, float32, the same voxels hit, values within 1e-5 relative."""
    a, b = nib.load(ours), nib.load(theirs)
    if a.shape != b.shape or not np.allclose(a.affine, b.affine, atol=1e-4):
        check(name, False, f"grids differ: {a.shape} vs {b.shape}")
        return
    x, y = np.asarray(a.dataobj, np.float64), np.asarray(b.dataobj, np.float64)
    close = np.isclose(x, y, rtol=1e-5, atol=1e-6)
    same_hit = ((x > 0) == (y > 0)).mean()
    rel = np.abs(x - y)[y > 0] / y[y > 0]
    check(name, a.get_data_dtype() == np.float32 and close.mean() >= 0.9999 and same_hit >= 0.9999
          and y.sum() > 0, f"{a.get_data_dtype()}; {(~close).sum()} of {x.size} voxels differ by more "
          f"than 1e-5; {(y > 0).sum()} hit, {((x > 0) != (y > 0)).sum()} hit by one only; largest "
          f"relative difference {rel.max():.2e}; totals {x.sum():.3f} vs {y.sum():.3f}")


def test_tdi(d, tck, streamlines, template, w):
    wfile = write_weights(f"{d}/weights.txt", w)
    for vox in (None, 0.5):
        name = f"tdi_weighted_{vox or 2}mm"
        ours, theirs = f"{d}/{name}.nii.gz", f"{d}/{name}_mrtrix.nii.gz"
        dimoc("tdi", tck, "--template", template, "--out", ours, "--weights", wfile,
              *(["--voxel", vox] if vox else []))
        mrtrix("tckmap", tck, theirs, "-template", template, "-tck_weights_in", wfile,
               *(["-vox", vox] if vox else []))
        compare_map(f"{name}_equals_tckmap", ours, theirs)
    # The other layouts of the file read as the same weights; one thread adds the same sums.
    want = np.asarray(nib.load(f"{d}/tdi_weighted_2mm.nii.gz").dataobj)
    dimoc("tdi", tck, "--template", template, "--out", f"{d}/one_thread.nii.gz", "--weights", wfile,
          "--threads", 1)
    got = np.asarray(nib.load(f"{d}/one_thread.nii.gz").dataobj)
    check("tdi_weighted_threads", np.array_equal(got, want) and want.sum() > 0,
          f"{(got != want).sum()} voxels differ between 1 thread and all")
    for style in ("sift", "commas"):
        other = write_weights(f"{d}/weights_{style}.txt", w, style)
        dimoc("tdi", tck, "--template", template, "--out", f"{d}/{style}.nii.gz", "--weights", other)
        got = np.asarray(nib.load(f"{d}/{style}.nii.gz").dataobj)
        check(f"weights_file_{style}", np.array_equal(got, want) and want.sum() > 0,
              f"totals {got.sum():.3f} vs {want.sum():.3f}")
    # All weights 1: the unweighted counts, as float32.
    ones = write_weights(f"{d}/ones.txt", np.ones(len(streamlines)))
    dimoc("tdi", tck, "--template", template, "--out", f"{d}/ones.nii.gz", "--weights", ones)
    dimoc("tdi", tck, "--template", template, "--out", f"{d}/plain.nii.gz")
    x = np.asarray(nib.load(f"{d}/ones.nii.gz").dataobj, np.float64)
    y = np.asarray(nib.load(f"{d}/plain.nii.gz").dataobj, np.float64)
    check("tdi_weights_one_is_count", np.array_equal(x, y) and y.sum() > 0,
          f"{(x != y).sum()} voxels differ; totals {x.sum()} vs {y.sum()}")
    # The exact walk, weighted, against an independent walk with the same weights.
    dimoc("tdi", tck, "--template", template, "--out", f"{d}/exact.nii.gz", "--exact", "--weights", wfile)
    a = nib.load(f"{d}/exact.nii.gz")
    x = np.asarray(a.dataobj, np.float64)
    ref = exact_tdi(streamlines, a.affine, a.shape, np.asarray(w, np.float32).astype(np.float64))
    close = np.isclose(x, ref, rtol=1e-5, atol=1e-6)
    check("tdi_weighted_exact_equals_reference_walk", close.mean() >= 0.9999 and ref.sum() > 0,
          f"{(~close).sum()} of {x.size} voxels differ; totals {x.sum():.3f} vs {ref.sum():.3f}")


def test_connectome(d, tck, parc, w):
    wfile = write_weights(f"{d}/weights_conn.txt", w, "sift")
    dimoc("connectome", tck, "--parc", parc, "--out", f"{d}/conn", "--weights", wfile)
    mrtrix("tck2connectome", tck, parc, f"{d}/mr_count.csv", "-tck_weights_in", wfile)
    mrtrix("tck2connectome", tck, parc, f"{d}/mr_length.csv", "-tck_weights_in", wfile,
           "-scale_length", "-stat_edge", "mean")
    mrtrix("tck2connectome", tck, parc, f"{d}/mr_plain.csv")
    ours = np.loadtxt(f"{d}/conn/connectome.csv", delimiter=",")
    theirs = np.loadtxt(f"{d}/mr_count.csv", delimiter=",")
    plain = np.loadtxt(f"{d}/mr_plain.csv", delimiter=",")
    same = ours.shape == theirs.shape
    rel = np.abs(ours - theirs).max() / theirs.max() if same else -1
    check("connectome_weighted_counts", same and rel <= 1e-9 and (theirs > 0).sum() > 10
          and not np.allclose(theirs, plain),
          f"shapes {ours.shape} vs {theirs.shape}; {(theirs > 0).sum()} edges; largest difference "
          f"{rel:.2e} of the largest entry; weighted total {theirs.sum():.3f}, {plain.sum():.0f} "
          f"streamlines")
    ours = np.loadtxt(f"{d}/conn/mean_length.csv", delimiter=",")
    theirs = np.loadtxt(f"{d}/mr_length.csv", delimiter=",")
    rel = np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-9)
    check("connectome_weighted_mean_length", ours.shape == theirs.shape and rel.max() < 1e-3
          and (theirs > 0).sum() > 10, f"{(theirs > 0).sum()} edges; largest relative difference "
          f"{rel.max():.2e}")


def one_error_line(name, args, want, out):
    rc, _, err = dimoc(*args, expect_ok=False)
    lines = [l for l in err.splitlines() if l.strip()]
    base = os.path.basename(out)
    left = [n for n in os.listdir(os.path.dirname(out)) if n == base or n.startswith("." + base.split(".")[0])]
    ok = rc != 0 and len(lines) == 1 and all(w in lines[0] for w in want) and not left
    check(name, ok, f"rc {rc}, stderr {err.strip()!r}; wanted one line with {want}; left {left}")


def test_bad_weights(d, tck, template, parc, n):
    rng = np.random.default_rng(5)
    w = rng.uniform(0.1, 2, n)
    bad = {
        "fewer": (write_weights(f"{d}/fewer.txt", w[:-1]), [f"{n - 1} weights", tck, f"{n} streamlines"]),
        "more": (write_weights(f"{d}/more.txt", np.r_[w, 1.0]), [f"{n + 1} weights", tck]),
        "word": (None, ["weight 8", "'abc'", "not a number", "line 8"]),
        "negative": (None, ["weight 3", "'-0.5'", "negative"]),
        "nan": (None, ["weight 5", "not finite"]),
        "missing": (f"{d}/no_such_weights.txt", ["No such file"]),
    }
    text = ["%.6g" % x for x in w]
    for key, at, token in (("word", 7, "abc"), ("negative", 2, "-0.5"), ("nan", 4, "nan")):
        t = list(text)
        t[at] = token
        path = f"{d}/{key}.txt"
        open(path, "w").write("\n".join(t) + "\n")
        bad[key] = (path, bad[key][1])
    for key, (path, want) in bad.items():
        one_error_line(f"tdi_weights_{key}", ["tdi", tck, "--template", template, "--out",
                                              f"{d}/bad_{key}.nii.gz", "--weights", path],
                       [path] + want, f"{d}/bad_{key}.nii.gz")
        one_error_line(f"connectome_weights_{key}", ["connectome", tck, "--parc", parc, "--out",
                                                     f"{d}/badconn_{key}", "--weights", path],
                       [path] + want, f"{d}/badconn_{key}")
    for cmd in ("tdi", "connectome"):
        rc, out, _ = dimoc("help", cmd, expect_ok=False)
        check(f"help_{cmd}_weights", rc == 0 and "--weights" in out and "tck_weights_in" in out, out[:80])


def test_track(d):
    """dimoc track --fod --weights on the FOD phantom of fodsim."""
    p = fodsim.phantom(f"{d}")
    parc = parcellation(np.random.default_rng(2), nib.load(p["fod"]).shape[:3])
    parc = save(f"{d}/track_parc.nii.gz", parc, nib.load(p["fod"]).affine)
    common = ["--fod", p["fod"], "--seed", p["wm"], "--select", 400, "--rseed", 7, "--threads", 2,
              "--device", "cpu", "--tdi", "tdi.nii.gz", "--connectome", parc]
    dimoc("track", *common, "--out", f"{d}/trk_w", "--weights", "weights.txt")
    dimoc("track", *common, "--out", f"{d}/trk_plain")
    tck = f"{d}/trk_w/tracks.tck"
    n = len(nib.streamlines.load(tck).streamlines)
    w = np.loadtxt(f"{d}/trk_w/weights.txt", ndmin=1)
    head = fodsim.tck_header(tck)
    check("track_weights_count", len(w) == n == int(head["count"]) > 0 and np.all(w == 1),
          f"{len(w)} weights, {n} streamlines read, header count {head['count']}, values {set(w.tolist())}")
    # the same streamlines (the headers differ: they hold the command line)
    a, b = (nib.streamlines.load(f"{d}/{o}/tracks.tck").streamlines for o in ("trk_w", "trk_plain"))
    same = [len(a) == len(b) and all(np.array_equal(s, t) for s, t in zip(a, b))]
    same += [open(f"{d}/trk_w/{f}", "rb").read() == open(f"{d}/trk_plain/{f}", "rb").read()
             for f in ("connectome.csv", "mean_length.csv")]
    x = np.asarray(nib.load(f"{d}/trk_w/tdi.nii.gz").dataobj)
    y = np.asarray(nib.load(f"{d}/trk_plain/tdi.nii.gz").dataobj)
    check("track_weights_change_nothing_else", all(same) and np.array_equal(x, y) and x.dtype == np.uint32
          and not os.path.exists(f"{d}/trk_plain/weights.txt"),
          f"tracks, connectome, mean_length equal: {same}; tdi equal {np.array_equal(x, y)} ({x.dtype})")
    mrtrix("tckmap", tck, f"{d}/trk_mr_w.nii.gz", "-template", p["fod"], "-tck_weights_in",
           f"{d}/trk_w/weights.txt")
    z = np.asarray(nib.load(f"{d}/trk_mr_w.nii.gz").dataobj)
    check("track_weights_read_by_tckmap", np.array_equal(z, x) and x.sum() > 0, f"totals {z.sum()} vs {x.sum()}")
    rc, _, err = dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", f"{d}/trk_bad",
                       "--weights", "tracks.tck", expect_ok=False)
    check("track_weights_name_clash", rc != 0 and len(err.strip().splitlines()) == 1 and "--weights" in err
          and not os.path.exists(f"{d}/trk_bad"), f"rc {rc}, {err.strip()!r}")
    # Stopped by SIGINT: tckgen's rule keeps the streamlines so far; the weights match them.
    out = f"{d}/trk_int"
    proc = subprocess.Popen([DIMOC, "track", "--fod", p["fod"], "--seed", p["wm"], "--out", out, "--select",
                             "10000000", "--device", "cpu", "--threads", "2", "--weights", "w.txt"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t_end = time.time() + 60
    while not glob.glob(f"{d}/.trk_int.tmp.*") and proc.poll() is None and time.time() < t_end:
        time.sleep(0.01)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    ok = proc.returncode == 130 and os.path.exists(f"{out}/tracks.tck") and os.path.exists(f"{out}/w.txt")
    n = len(nib.streamlines.load(f"{out}/tracks.tck").streamlines) if ok else -1
    w = np.loadtxt(f"{out}/w.txt", ndmin=1) if ok else np.zeros(0)
    check("track_weights_interrupted", ok and len(w) == n and n < 10000000 and np.all(w == 1),
          f"rc {proc.returncode}, {n} streamlines, {len(w)} weights; {err.strip()[-200:]!r}")


def main():
    if not (shutil.which("tckmap") and shutil.which("tck2connectome")):
        check("tck_weights_mrtrix", False, "MRtrix3's tckmap/tck2connectome not found")
        return
    d = workdir("tck_weights")
    rng = np.random.default_rng(23)
    shape = (24, 26, 20)
    aff = oblique_affine([2.0, 2.0, 2.0], [-20, -30, -15])
    template = save(f"{d}/template.nii.gz", np.zeros(shape), aff)
    streamlines = random_streamlines(rng, 1500, aff, shape)
    tck = write_tck(f"{d}/tracks.tck", streamlines)
    w = rng.uniform(0.05, 3.0, len(streamlines))
    w[[10, 200]] = 0  # allowed: the streamline counts nowhere
    test_tdi(d, tck, streamlines, template, w)
    parc = save(f"{d}/parc.nii.gz", parcellation(rng, (16, 18, 14)),
                oblique_affine([3.0, 3.0, 3.0], [-21, -31, -16]))
    test_connectome(d, tck, parc, w)
    test_bad_weights(d, tck, template, parc, len(streamlines))
    os.makedirs(f"{d}/fod")
    test_track(f"{d}/fod")


main()
finish()
