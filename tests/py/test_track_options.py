"""probtrackx options of dimoc track on hand-checkable cases: the .tck header's count and
total_count (MRtrix's meaning: streamlines generated to get those in the file), --distthresh,
--sampvox, --onewaycondition, and --network over a list of seed masks.

The phantom is test_track's line phantom: one fibre along +x everywhere, no spread, 1 mm voxels,
so a streamline seeded at voxel (20, j, k) runs straight along x: its first half towards +x, its
second towards -x, 0.5 mm per step."""
import numpy as np

import test_track as tt
from dmtest import check, finish, workdir

ROOT = workdir("track_options")
SHAPE = (40, 9, 9)


def waytotal(out):
    return int(open(f"{out}/waytotal").read())


def test_total_count(bp):
    d = f"{ROOT}/count"
    # seeds at y = 2..6 (seed k = y - 2), a waypoint that only y = 4's streamlines pass
    seed = tt.mask_image(d, "seed", SHAPE, (slice(20, 21), slice(2, 7), slice(4, 5)))
    way = tt.mask_image(d, "way", SHAPE, (slice(25, 26), slice(4, 5), slice(4, 5)))
    got = {}
    for cap in (100, 2):
        tt.track(bp, seed, f"{d}/o{cap}", "--nearest", "-P", 4, "-S", 20, "--waypoints", way,
                 "--save-streamlines", f"{d}/t{cap}.tck", "--save-max", cap)
        _, t = tt.tck_read(f"{d}/t{cap}.tck")
        got[cap] = (int(t.header["count"]), int(t.header["total_count"]))
    # all 20 tracked for the 4 kept; with a cap of 2, streamlines 0..9 (ids 8, 9 are the kept)
    check("track_tck_total_count", got == {100: (4, 20), 2: (2, 10)},
          f"(count, total_count): {got} (want {{100: (4, 20), 2: (2, 10)}})")


def test_distthresh(bp):
    d = f"{ROOT}/dist"
    seed = tt.mask_image(d, "seed", SHAPE, (slice(20, 21), slice(4, 5), slice(4, 5)))
    kept = {}
    for thr in (0, 9.9, 10.1):  # every streamline is 2 x 10 steps of 0.5 mm: 10 mm
        tt.track(bp, seed, f"{d}/o{thr}", "--nearest", "-P", 6, "-S", 20, "--distthresh", thr, "--opd")
        kept[thr] = (waytotal(f"{d}/o{thr}"), float(tt.load(f"{d}/o{thr}/fdt_paths.nii.gz").sum()))
    check("track_distthresh", kept == {0: (6, 66.0), 9.9: (6, 66.0), 10.1: (0, 0.0)},
          f"(waytotal, fdt_paths sum) by threshold: {kept} (10 mm streamlines)")


def test_sampvox(bp):
    d = f"{ROOT}/sampvox"
    seed = tt.mask_image(d, "seed", SHAPE, (slice(20, 21), slice(4, 5), slice(4, 5)))
    P, R = 400, 1.5
    tt.track(bp, seed, f"{d}/o", "--nearest", "-P", P, "-S", 20, "--sampvox", R,
             "--save-streamlines", f"{d}/t.tck", "--save-max", P)
    sl, _ = tt.tck_read(f"{d}/t.tck")
    # each streamline: 10 points of its second half reversed, then its start, then 10 more
    starts = np.array([s[10] for s in sl if len(s) == 21])
    r = np.linalg.norm(starts - np.array([20.0, 4, 4]), axis=1)
    inner = (r <= R / 2).mean()  # uniform in the ball: (1/2)^3 = 1/8 of the points
    ok = len(starts) == P and r.max() <= R + 1e-4 and 0.07 <= inner <= 0.19 and r.min() < 0.5 * R \
        and abs(starts.mean(axis=0) - [20, 4, 4]).max() < 0.2
    check("track_sampvox_uniform_ball", ok,
          f"{len(starts)} starts, radius {r.min():.2f}..{r.max():.2f} mm (<= {R}), "
          f"{100 * inner:.1f}% within {R / 2} mm (uniform: 12.5%), mean {starts.mean(axis=0).round(2)}")
    tt.track(bp, seed, f"{d}/plain", "--nearest", "-P", 3, "-S", 20, "--save-streamlines", f"{d}/p.tck")
    sl, _ = tt.tck_read(f"{d}/p.tck")
    check("track_sampvox_off_starts_at_seed", all(np.allclose(s[10], [20, 4, 4]) for s in sl),
          "without --sampvox every streamline starts at the seed voxel's centre")


def test_onewaycondition(bp):
    d = f"{ROOT}/oneway"
    seed = tt.mask_image(d, "seed", SHAPE, (slice(20, 21), slice(4, 5), slice(4, 5)))
    ahead = tt.mask_image(d, "ahead", SHAPE, (slice(23, 24), slice(None), slice(None)))
    behind = tt.mask_image(d, "behind", SHAPE, (slice(17, 18), slice(None), slice(None)))
    P = 5
    res = {}
    for name, args in {"whole": ["--waypoints", ahead], "oneway": ["--waypoints", ahead, "--onewaycondition"],
                       "and_whole": ["--waypoints", f"{ahead},{behind}"],
                       "and_oneway": ["--waypoints", f"{ahead},{behind}", "--onewaycondition"]}.items():
        tt.track(bp, seed, f"{d}/{name}", "--nearest", "-P", P, "-S", 20, "--opd", *args)
        paths = tt.load(f"{d}/{name}/fdt_paths.nii.gz")[:, 4, 4]
        res[name] = (waytotal(f"{d}/{name}"), tuple(np.nonzero(paths)[0][[0, -1]]) if paths.any() else ())
    # the first half (towards +x) passes x = 23 and is kept alone with --onewaycondition; no
    # half passes both x = 23 and x = 17
    want = {"whole": (P, (15, 25)), "oneway": (P, (20, 25)), "and_whole": (P, (15, 25)), "and_oneway": (0, ())}
    check("track_onewaycondition", res == want, f"(waytotal, visited x range): {res} (want {want})")


def test_network(bp):
    d = f"{ROOT}/network"
    # A and B on the line y = 4 (10 mm apart), C on the line y = 6: A and B reach each other,
    # C reaches neither
    masks = [tt.mask_image(d, name, SHAPE, (slice(x, x + 1), slice(y, y + 1), slice(4, 5)))
             for name, x, y in (("A", 10, 4), ("B", 20, 4), ("C", 20, 6))]
    with open(f"{d}/masks.txt", "w") as fp:
        fp.write("# seed masks\n" + "\n".join(masks) + "\n")
    P = 5
    tt.track(bp, f"{d}/masks.txt", f"{d}/net", "--nearest", "-P", P, "-S", 100, "--network", "--opd")
    net = np.loadtxt(f"{d}/net/fdt_network_matrix")
    way = [int(x) for x in open(f"{d}/net/waytotal").read().split()]
    paths = tt.load(f"{d}/net/fdt_paths.nii.gz")
    want = np.array([[0, P, 0], [P, 0, 0], [0, 0, 0]])
    check("track_network_matrix", np.array_equal(net, want) and way == [P, P, 0]
          and paths[:, 4, 4].max() == 2 * P and paths[:, 6, 4].sum() == 0,
          f"fdt_network_matrix {net.astype(int).tolist()} (want {want.tolist()}), waytotal {way}, "
          f"paths on A-B line max {paths[:, 4, 4].max():.0f}, on C's line {paths[:, 6, 4].sum():.0f}")
    # without --network the list is the union of the masks' seeds: all kept, one waytotal
    tt.track(bp, f"{d}/masks.txt", f"{d}/union", "--nearest", "-P", P, "-S", 100)
    union = open(f"{d}/union/waytotal").read().split()
    with open(f"{d}/one.txt", "w") as fp:
        fp.write(masks[0] + "\n")
    rc, _, err = tt.track(bp, f"{d}/one.txt", f"{d}/bad", "--network", expect_ok=False)
    check("track_network_list_and_errors", union == [str(3 * P)] and rc != 0
          and "2 to 32 masks" in err and len(err.strip().splitlines()) == 1,
          f"union waytotal {union} (want [{3 * P}]); one mask with --network: rc {rc}, {err.strip()!r}")


if __name__ == "__main__":
    bp = tt.line_phantom(f"{ROOT}/bp")
    test_total_count(bp)
    test_distthresh(bp)
    test_sampvox(bp)
    test_onewaycondition(bp)
    test_network(bp)
    finish()
