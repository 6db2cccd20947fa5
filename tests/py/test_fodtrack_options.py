"""dimoc track --fod: tckgen's options and rules that hold for every streamline (no statistics),
on fodsim's phantom, for iFOD2, iFOD1 and SD_STREAM.  Each rule is checked on dimoc's output
and, as a control of the rule itself, on tckgen's output with the same options (MRtrix 3.0.3's
behaviour, measured: -maxlength cuts iFOD2 at exactly the length and first-order algorithms a
few steps past it; -mask leaves no written point outside the mask; -stop ends a streamline at
its first point inside the last include region; -seed_unidirectional starts at the seed).

  --select N: exactly N streamlines (header count, nibabel, tckinfo -count);  --seeds N:
  total_count N;  --min-length / --max-length: lengths in range, and the longest equal to
  tckgen's (the cap);  --include: every streamline visits it;  --exclude: no point in it;
  --mask: no point outside, and streamlines are cut there (not dropped);  --stop: one end in the
  include region, at most one point inside;  --unidirectional: the first point in the seed
  mask (bidirectional: almost never);  --seed-random-per-voxel N: total_count N x voxels;
  seed and include images on another grid (world space, as tckgen);
  --rseed: the same seed, the same streamlines, another seed others;  --threads 1 and 2: the
  same streamlines;  bad inputs: one error line naming the problem, non-zero status, no --out
  folder (among them a seed image 500 mm outside the FOD image, where tckgen, the control, tries
  every seed and writes no streamline with exit 0)."""
import os
import shutil

import nibabel as nib
import numpy as np

import fodsim as fs
from dmtest import check, dimoc, finish, workdir

ALGS = {"ifod2": ("iFOD2", 1.0), "ifod1": ("iFOD1", 0.2), "sd_stream": ("SD_Stream", 0.2)}  # tckgen name, step
N = 200


class Tracks:
    def __init__(self, tck):
        self.tck = tck
        self.sl = fs.streamlines(tck)
        self.header = fs.tck_header(tck)
        self.lengths = fs.lengths(self.sl)

    def count(self):
        return int(self.header.get("count", -1))

    def total(self):
        return int(self.header.get("total_count", -1))


def run_dimoc(out, fod, seed, alg, *opts):
    rc, _, err = dimoc("track", "--fod", fod, "--seed", seed, "--out", out, "--algorithm", alg, "--rseed", 11,
                       "--threads", 2, "--device", "cpu", *opts, expect_ok=False)
    if rc:
        return None, err.strip()
    return Tracks(f"{out}/tracks.tck"), ""


def run_tckgen(out, fod, seed, alg, *opts, seed_kind="-seed_image"):
    return Tracks(fs.tckgen(fod, out, seed, "-algorithm", ALGS[alg][0], *opts, rng=424242, seed_kind=seed_kind))


def both(name, d, fod, seed, alg, dimoc_opts, tckgen_opts, rule, seed_kind="-seed_image"):
    """Runs dimoc and tckgen with the same options; the rule (Tracks -> (ok, detail)) must hold on
    both: dimoc's as the test, tckgen's as the control that the rule is tckgen's."""
    dm, err = run_dimoc(f"{d}/{alg}_{name}", fod, seed, alg, *dimoc_opts)
    mr = run_tckgen(f"{d}/{alg}_{name}.tck", fod, seed if seed_kind == "-seed_image" else [seed, dimoc_opts[1]],
                    alg, *tckgen_opts, seed_kind=seed_kind)
    ok_t, det_t = rule(mr, mr)
    check(f"{alg}-{name}-tckgen-control", ok_t, f"tckgen: {det_t}")
    if dm is None:
        check(f"{alg}-{name}", False, f"dimoc failed: {err}")
        return None, mr
    ok, det = rule(dm, mr)
    check(f"{alg}-{name}", ok, f"dimoc: {det}")
    return dm, mr


def rois(d, p):
    aff, q = p["affine"], p["q"]
    R = aff[:3, :3] / fs.VOXEL
    out = {}
    out["include"] = fs.brain(q) & (q[..., 1] > -2) & (q[..., 0] < 0)  # the arc's upper end
    out["exclude"] = p["weights"]["third"] > 0  # the whole third bundle
    out["mask"] = fs.brain(q) & (q[..., 0] < 8)  # cuts the straight bundle and the arc's lower end
    block = np.zeros(fs.SHAPE, bool)  # 3x3x3 voxels in the straight bundle, away from crossings
    c = np.rint(fs.world_to_voxel(aff, [R @ np.array([-10.0, fs.STRAIGHT_Y, 0])])[0]).astype(int)
    block[c[0] - 1:c[0] + 2, c[1] - 1:c[1] + 2, c[2] - 1:c[2] + 2] = True
    out["block"] = block
    paths = {k: fs.save(f"{d}/{k}.nii.gz", v, aff, np.uint8) for k, v in out.items()}
    return out, paths


def seeds_like(total, ref_total, seeds):
    """total_count from a fixed number of seeds: exactly the seeds where tckgen's is, else within
    4 binomial standard deviations of tckgen's (the seeds that gave a streamline)."""
    if ref_total == seeds:
        return total == seeds
    p = ref_total / seeds
    return total <= seeds and abs(total - ref_total) <= 4 * np.sqrt(2 * seeds * p * (1 - p)) + 2


def same_streamlines(a, b):
    return len(a.sl) == len(b.sl) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a.sl, b.sl))


def rules_per_algorithm(d, p, alg, roi, path):
    fod, wm, aff = p["fod"], p["wm"], p["affine"]
    step = ALGS[alg][1]
    inside = lambda m, s: fs.in_mask(m, aff, s)

    def select_rule(t, _):
        h, a = fs.tckinfo_count(t.tck)
        return (t.count() == N == len(t.sl) == h == a and t.total() >= N,
                f"header count {t.count()}, nibabel {len(t.sl)}, tckinfo {h}/{a} (want {N}); total_count {t.total()}")
    both("select", d, fod, wm, alg, ["--select", N], ["-select", N], select_rule)

    def seeds_rule(t, ref):
        # tckgen: total_count = N for iFOD1/2; for SD_STREAM it counts only the seeds that gave a
        # streamline (kept or rejected), fewer than N: then dimoc's is compared to tckgen's as a
        # binomial count
        ok = seeds_like(t.total(), ref.total(), 300)
        return (ok and 0 < t.count() == len(t.sl) <= t.total(),
                f"total_count {t.total()} (tckgen {ref.total()}, of 300 seeds), count {t.count()}, in file {len(t.sl)}")
    both("seeds", d, fod, wm, alg, ["--seeds", 300], ["-seeds", 300], seeds_rule)

    def length_rule(t, ref):
        lo, hi = t.lengths.min(), t.lengths.max()
        cap = ref.lengths.max()
        return (lo >= 20 - 1e-3 and abs(hi - cap) < 0.01 and np.mean(t.lengths > 29) > 0.3,
                f"lengths {lo:.3f}..{hi:.3f} mm with --min-length 20 --max-length 30 (tckgen's longest {cap:.3f}); "
                f"{100 * np.mean(t.lengths > 29):.0f}% longer than 29 mm")
    both("min-max-length", d, fod, wm, alg, ["--select", N, "--min-length", 20, "--max-length", 30],
         ["-select", N, "-minlength", 20, "-maxlength", 30], length_rule)

    def include_rule(t, _):
        miss = sum(not inside(roi["include"], s).any() for s in t.sl)
        return (miss == 0 and len(t.sl) == N, f"{miss} of {len(t.sl)} streamlines never in the include region")
    both("include", d, fod, wm, alg, ["--select", N, "--include", path["include"]],
         ["-select", N, "-include", path["include"]], include_rule)

    def exclude_rule(t, _):
        hit = sum(inside(roi["exclude"], s).any() for s in t.sl)
        return (hit == 0 and len(t.sl) == N, f"{hit} of {len(t.sl)} streamlines with a point in the exclude region")
    both("exclude", d, fod, wm, alg, ["--select", N, "--exclude", path["exclude"]],
         ["-select", N, "-exclude", path["exclude"]], exclude_rule)

    def mask_rule(t, _):
        out = sum((~inside(roi["mask"], s)).sum() for s in t.sl)
        # the farthest point from the mask, in steps: outside points must be within one step
        far = 0.0
        for s in t.sl:
            o = s[~inside(roi["mask"], s)]
            if len(o):
                far = max(far, np.min(np.linalg.norm(o[:, None] - s[inside(roi["mask"], s)][None], axis=2), 1).max())
        q_x = np.array([max(s[0] @ aff[:3, 0], s[-1] @ aff[:3, 0]) / fs.VOXEL for s in t.sl])  # q = R^T x
        cut = np.mean(q_x > 6)  # streamlines with an end within 2 mm of the plane q_x = 8
        return (out == 0 and cut > 0.2, f"{out} points outside the mask (farthest {far:.2f} mm from a point "
                                        f"inside); {100 * cut:.0f}% of streamlines end within 2 mm of the cut")
    both("mask", d, fod, wm, alg, ["--select", N, "--mask", path["mask"]], ["-select", N, "-mask", path["mask"]],
         mask_rule)

    def stop_rule(t, _):
        ends = [inside(roi["include"], s[[0, -1]]) for s in t.sl]
        n_in = np.array([inside(roi["include"], s).sum() for s in t.sl])
        no_end = sum(not e.any() for e in ends)
        return (no_end == 0 and n_in.max() <= 1 and len(t.sl) == N,
                f"{no_end} of {len(t.sl)} streamlines without an end in the include region; points inside per "
                f"streamline: at most {n_in.max()}")
    both("stop", d, fod, wm, alg, ["--select", N, "--include", path["include"], "--stop"],
         ["-select", N, "-include", path["include"], "-stop"], stop_rule)

    def uni_rule(t, _):
        first = np.mean([inside(roi["block"], s[:1])[0] for s in t.sl])
        return (first == 1.0 and len(t.sl) == N, f"{100 * first:.1f}% of first points in the seed block")
    both("unidirectional", d, fod, path["block"], alg, ["--select", N, "--unidirectional"],
         ["-select", N, "-seed_unidirectional"], uni_rule)

    def bi_rule(t, _):
        first = np.mean([inside(roi["block"], s[:1])[0] for s in t.sl])
        return (first < 0.2 and len(t.sl) == N, f"{100 * first:.1f}% of first points in the seed block "
                                                f"(bidirectional: the first point is an end)")
    both("bidirectional", d, fod, path["block"], alg, ["--select", N], ["-select", N], bi_rule)

    nvox = int(roi["block"].sum())

    def per_voxel_rule(t, ref):
        return (seeds_like(t.total(), ref.total(), 5 * nvox) and 0 < len(t.sl) == t.count() <= t.total(),
                f"total_count {t.total()} (5 x {nvox} voxels = {5 * nvox} seeds; tckgen {ref.total()}), count "
                f"{t.count()}, in file {len(t.sl)}")
    both("seed-random-per-voxel", d, fod, path["block"], alg, ["--seed-random-per-voxel", 5], [], per_voxel_rule,
         seed_kind="-seed_random_per_voxel")


def other_grid(d, p, roi):
    """Seeds and ROIs are regions in world space, on any grid (tckgen's -seed_image and -include
    take images of any voxel size and orientation): a seed box and an include region on an
    axis-aligned 1.5 mm grid, unlike the FOD's rotated 2 mm one."""
    fod, aff = p["fod"], p["affine"]
    R = aff[:3, :3] / fs.VOXEL
    centre = R @ np.array([-10.0, fs.STRAIGHT_Y, 0])  # world mm, in the straight bundle
    g = np.diag([1.5, 1.5, 1.5, 1.0])
    g[:3, 3] = centre - 1.5 * 3
    box = np.zeros((7, 7, 7), bool)
    box[2:5, 2:5, 2:5] = True  # a 4.5 mm cube around the centre
    seed = fs.save(f"{d}/seed_grid15.nii.gz", box, g, np.uint8)
    # the include region (the arc's upper end) resampled on a 1.5 mm axis-aligned grid
    h = np.diag([1.5, 1.5, 1.5, 1.0])
    h[:3, 3] = [-45.0, -45.0, -15.0]
    ijk = np.stack(np.meshgrid(*[np.arange(n) for n in (60, 60, 20)], indexing="ij"), -1).reshape(-1, 3)
    world = ijk * 1.5 + h[:3, 3]
    inc = fs.in_mask(roi["include"], aff, world).reshape(60, 60, 20)
    inc_path = fs.save(f"{d}/include_grid15.nii.gz", inc, h, np.uint8)

    def seed_rule(t, _):
        first = np.mean([fs.in_mask(box, g, s[:1])[0] for s in t.sl])
        return first == 1.0 and len(t.sl) == N, f"{100 * first:.1f}% of first points in the 1.5 mm seed box"
    both("other-grid-seed", d, fod, seed, "ifod2", ["--select", N, "--unidirectional"],
         ["-select", N, "-seed_unidirectional"], seed_rule)

    def include_rule(t, _):
        miss = sum(not fs.in_mask(inc, h, s).any() for s in t.sl)
        return miss == 0 and len(t.sl) == N, f"{miss} of {len(t.sl)} streamlines miss the 1.5 mm include region"
    both("other-grid-include", d, fod, p["wm"], "ifod2", ["--select", N, "--include", inc_path],
         ["-select", N, "-include", inc_path], include_rule)


def determinism(d, p, alg):
    fod, wm = p["fod"], p["wm"]
    runs = {}
    for key, rseed, threads in (("a", 3, 2), ("b", 3, 2), ("c", 4, 2), ("t1", 3, 1)):
        out = f"{d}/{alg}_det_{key}"
        rc, _, err = dimoc("track", "--fod", fod, "--seed", wm, "--out", out, "--algorithm", alg, "--select", N,
                           "--rseed", rseed, "--threads", threads, "--device", "cpu", expect_ok=False)
        runs[key] = Tracks(f"{out}/tracks.tck") if rc == 0 else None
        if rc:
            check(f"{alg}-determinism-runs", False, err.strip())
            return
    a, b, c, t1 = runs["a"], runs["b"], runs["c"], runs["t1"]
    check(f"{alg}-same-rseed-same-tracks", same_streamlines(a, b) and a.total() == b.total(),
          f"{len(a.sl)} / {len(b.sl)} streamlines, total_count {a.total()} / {b.total()}")
    strip = lambda path: open(path, "rb").read().split(b"\nEND\n", 1)[-1]
    check(f"{alg}-same-rseed-same-data-bytes", strip(a.tck) == strip(b.tck), "the bytes after the headers")
    check(f"{alg}-other-rseed-other-tracks", not same_streamlines(a, c) and len(c.sl) == N,
          f"--rseed 3 and 4 give {'the same' if same_streamlines(a, c) else 'different'} streamlines")
    check(f"{alg}-threads-1-equals-2", same_streamlines(a, t1) and a.total() == t1.total(),
          f"{len(a.sl)} / {len(t1.sl)} streamlines, total_count {a.total()} / {t1.total()}")


def bad_inputs(d, p):
    fod, wm, aff = p["fod"], p["wm"], p["affine"]
    seven = fs.save(f"{d}/seven.nii.gz", np.random.default_rng(0).normal(size=fs.SHAPE + (7,)), aff)
    three_d = fs.save(f"{d}/fod3d.nii.gz", np.ones(fs.SHAPE), aff)
    empty = fs.save(f"{d}/seed_empty.nii.gz", np.zeros(fs.SHAPE), aff, np.uint8)
    far_aff = aff.copy()
    far_aff[0, 3] += 500  # the WM mask moved 500 mm along x: no seed in the FOD image
    far = fs.save(f"{d}/seed_far.nii.gz", np.asarray(nib.load(wm).dataobj), far_aff, np.uint8)
    cases = [
        ("fod-7-volumes", ["--fod", seven, "--seed", wm], ["seven.nii.gz", "7"]),
        ("fod-3d", ["--fod", three_d, "--seed", wm], ["fod3d.nii.gz"]),
        ("seed-empty", ["--fod", fod, "--seed", empty], ["seed_empty.nii.gz"]),
        ("seed-4d", ["--fod", fod, "--seed", seven], ["seven.nii.gz"]),
        ("unknown-option", ["--fod", fod, "--seed", wm, "--frobnicate", 3], ["--frobnicate"]),
        ("algorithm-foo", ["--fod", fod, "--seed", wm, "--algorithm", "foo"], ["foo"]),
        ("select-0-no-seeds", ["--fod", fod, "--seed", wm, "--select", 0], ["--seeds"]),
        ("missing-fod-file", ["--fod", f"{d}/nope.nii.gz", "--seed", wm], ["nope.nii.gz"]),
        ("no-seed", ["--fod", fod], ["--seed"]),
        ("include-empty", ["--fod", fod, "--seed", wm, "--include", empty], ["seed_empty.nii.gz"]),
        ("negative-step", ["--fod", fod, "--seed", wm, "--step", -1], ["--step"]),
        ("seed-outside-fod", ["--fod", fod, "--seed", far],
         ["seed_far.nii.gz", "does not overlap the FOD image", "fod.nii.gz", "mm (world coordinates)"]),
    ]
    for name, args, words in cases:
        out = f"{d}/bad_{name}"
        extra = [] if "--select" in args else ["--select", 10]
        rc, _, err = dimoc("track", *args, "--out", out, *extra, expect_ok=False)
        lines = [l for l in err.strip().splitlines() if l.strip()]
        left = [f for f in os.listdir(d) if f.startswith(f"bad_{name}") or f.startswith(f".bad_{name}")]
        ok = rc != 0 and len(lines) == 1 and all(w in lines[0] for w in words) and not left
        check(f"bad-input-{name}", ok, f"rc {rc}, stderr {err.strip()!r} (want one line naming {words}); "
                                       f"left behind {left}")
    # what tckgen does there (why dimoc refuses): every seed tried, no streamline, exit 0
    mr = Tracks(fs.tckgen(fod, f"{d}/seed_far_tckgen.tck", far, "-select", 10, rng=1))
    check("seed-outside-fod-tckgen-control", mr.count() == 0 and len(mr.sl) == 0,
          f"tckgen: exit 0, {mr.count()} streamlines")


def main():
    if not shutil.which("tckgen"):
        check("fodtrack-options-mrtrix-available", False, "MRtrix3 not found (scripts/install-deps.sh)")
        finish()
    d = workdir("fodtrack_options")
    p = fs.phantom(d)
    rc, out, _ = dimoc("help", "track", expect_ok=False)
    if rc != 0 or "--fod" not in out:
        check("fodtrack-command-exists", False, "`dimoc help track` has no --fod")
        finish()
    roi, path = rois(d, p)
    for alg in ALGS:
        rules_per_algorithm(d, p, alg, roi, path)
        determinism(d, p, alg)
    other_grid(d, p, roi)
    bad_inputs(d, p)
    finish()


if __name__ == "__main__":
    main()
