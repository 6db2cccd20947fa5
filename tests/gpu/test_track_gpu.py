"""dimoc track on the GPU against the CPU (make test-gpu): the same kernel (track_kernel.h),
the same Philox streams, float arithmetic without fused multiply-adds, so the same streamlines;
the thesis' criteria (section 6.5): fdt_paths correlation GPU vs CPU >= 0.998 and run-to-rerun
(another --rseed) >= 0.999 on each device, for 10^6 streamlines; a GIFTI --avoid gives the
CPU's outputs exactly; the phantom tests of tests/py/test_track.py pass on the GPU too; --part
K/N on the GPU: 3 and 7 parts merged by `dimoc merge` give the single GPU run's files byte for
byte (every matrix and map, --network; tests/py/test_part_track.py's check, there on the CPU)."""
import numpy as np

import test_part_track as tp
import test_track as tt
import test_track_gifti as tg
from dmtest import check, dimoc, finish, load, save, workdir

ROOT = workdir("track_gpu")


def crossing(d):
    """Two bundles crossing at 90 degrees in a 40 x 40 x 6 slab (test_track's crossing, larger)."""
    shape = (40, 40, 6)
    dirs = np.zeros(shape + (2, 3))
    fr = np.zeros(shape + (2,))
    a = np.zeros(shape, bool)
    a[:, 15:25, :] = True
    b = np.zeros(shape, bool)
    b[15:25, :, :] = True
    dirs[a & ~b, 0] = [1, 0, 0]
    fr[a & ~b, 0] = 0.6
    dirs[b & ~a, 0] = [0, 1, 0]
    fr[b & ~a, 0] = 0.6
    dirs[a & b, 0] = [1, 0, 0]
    dirs[a & b, 1] = [0, 1, 0]
    fr[a & b] = 0.35
    dirs[~(a | b), 0] = [0, 0, 1]
    return tt.write_bedpost(f"{d}/bp", dirs, fr, a | b, ns=50, spread_deg=8.0), shape


def run(bp, seed, out, device, *args):
    _, stdout, _ = dimoc("track", "--samples", bp, "--seed", seed, "--out", out, "--device", device, *args)
    rate = float(stdout.split("streamlines/s")[0].split(",")[-1])
    return rate


def corr(a, b):
    return np.corrcoef(a.ravel(), b.ravel())[0, 1]


def test_parity():
    d = ROOT
    bp, shape = crossing(d)
    seed = tt.mask_image(d, "seed", shape, (slice(1, 6), slice(17, 22), slice(1, 5)))  # 100 seeds
    way = tt.mask_image(d, "way", shape, (slice(30, 31), slice(15, 20), slice(None)))  # half the bundle
    P = 10000  # 10^6 streamlines
    base = ["-P", P, "--opd", "--waypoints", way]
    rates, paths, ways = {}, {}, {}
    for dev in ("cpu", "gpu"):
        for rs in (1, 2):
            out = f"{d}/{dev}{rs}"
            rates[dev, rs] = run(bp, seed, out, dev, *base, "--rseed", rs)
            paths[dev, rs] = load(f"{out}/fdt_paths.nii.gz")
            ways[dev, rs] = int(open(f"{out}/waytotal").read())
    c = corr(paths["gpu", 1], paths["cpu", 1])
    same = np.mean(paths["gpu", 1] == paths["cpu", 1])
    check("track_gpu_paths_vs_cpu", c >= 0.998, f"r = {c:.6f}, {100 * same:.2f}% of voxels identical")
    for dev in ("cpu", "gpu"):
        r = corr(paths[dev, 1], paths[dev, 2])
        check(f"track_gpu_rerun_{dev}", r >= 0.999, f"r = {r:.6f} between --rseed 1 and 2")
    n = 100 * P
    p = ways["cpu", 1] / n
    sigma = np.sqrt(n * p * (1 - p)) + 1
    ok = abs(ways["gpu", 1] - ways["cpu", 1]) <= 4 * sigma and abs(ways["gpu", 2] - ways["cpu", 1]) <= 4 * sigma * 1.5
    check("track_gpu_waytotal", ok and 0.05 < p < 0.99,
          f"CPU {ways['cpu', 1]}, GPU {ways['gpu', 1]} (same --rseed), GPU {ways['gpu', 2]} (another), "
          f"binomial sd {sigma:.0f}")
    print(f"rates: CPU {rates['cpu', 1]:.0f}/s, GPU {rates['gpu', 1]:.0f}/s")
    return bp, shape


def test_matrix1(bp, shape):
    d = f"{ROOT}/m1"
    seed = tt.mask_image(d, "seed", shape, (slice(2, 38, 3), slice(16, 24, 2), slice(2, 4)))
    m = {}
    for dev in ("cpu", "gpu"):
        run(bp, seed, f"{d}/{dev}", dev, "-P", 500, "--omatrix1", "--rseed", 4)
        rows = tt.read_dot(f"{d}/{dev}/fdt_matrix1.dot")
        n = len(np.loadtxt(f"{d}/{dev}/coords_for_fdt_matrix1", ndmin=2))
        a = np.zeros((n, n))
        a[rows[:, 0].astype(int) - 1, rows[:, 1].astype(int) - 1] = rows[:, 2]
        m[dev] = a
    c = corr(m["gpu"], m["cpu"])
    check("track_gpu_matrix1_vs_cpu", c >= 0.998 and m["gpu"].sum() > 0,
          f"r = {c:.6f}, {int(m['gpu'].sum())} / {int(m['cpu'].sum())} counts, identical: "
          f"{np.array_equal(m['gpu'], m['cpu'])}")


def test_surface_avoid():
    """A GIFTI --avoid (triangle grid uploaded to the GPU) gives the CPU's outputs exactly:
    test_track_gifti's bundle and surfaces, and the same bundle with 10 degrees of spread so that
    streamlines wander near the tilted mesh's edge."""
    d = f"{ROOT}/surface"
    bps = {"straight": tg.line_phantom(f"{d}/bp")}
    dirs = np.zeros(tg.SHAPE + (1, 3))
    dirs[..., 0, 0] = 1
    bps["spread"] = tt.write_bedpost(f"{d}/bp_spread", dirs, np.full(tg.SHAPE + (1,), 0.6),
                                     np.ones(tg.SHAPE, bool), ns=50, spread_deg=10.0, affine=tg.AFF)
    seeds, _ = tg.avoid_seeds(d)
    surfaces = tg.avoid_surfaces(d)
    cases = [("straight", name, 4) for name in surfaces] + [("spread", "tilted", 500)]
    bad, kept = [], []
    for bp, name, P in cases:
        res = {}
        for dev in ("cpu", "gpu"):
            out = f"{d}/{bp}_{name}_{dev}"
            _, stdout, _ = dimoc("track", "--samples", bps[bp], "--seed", seeds, "--out", out,
                                 "--device", dev, "-P", P, "--avoid", surfaces[name], "--opd")
            res[dev] = (tg.waytotal(out), tg.avoid_ends(stdout), load(f"{out}/fdt_paths.nii.gz"))
        (wc, ac, pc), (wg, ag, pg) = res["cpu"], res["gpu"]
        kept.append(f"{bp}/{name} {wg} kept, {ag} avoid ends")
        if wc != wg or ac != ag or not np.array_equal(pc, pg):
            bad.append(f"{bp}/{name}: waytotal CPU {wc} GPU {wg}, avoid ends {ac} / {ag}, "
                       f"fdt_paths identical {np.array_equal(pc, pg)}")
    spread_w, spread_a = res["gpu"][:2]
    check("track_gpu_surface_avoid_vs_cpu", not bad and spread_w > 0 and spread_a > 0,
          "; ".join(bad) if bad else "identical: " + ", ".join(kept))


def test_surface_roles():
    """GIFTI surfaces as --stop, waypoints and targets give the CPU's outputs exactly on the
    spread bundle (streamlines wander, so some cross the partial surfaces and some not)."""
    d = f"{ROOT}/roles"
    dirs = np.zeros(tg.SHAPE + (1, 3))
    dirs[..., 0, 0] = 1
    bp = tt.write_bedpost(f"{d}/bp", dirs, np.full(tg.SHAPE + (1,), 0.6), np.ones(tg.SHAPE, bool),
                          ns=50, spread_deg=10.0, affine=tg.AFF)
    seeds, _ = tg.avoid_seeds(d)
    surf = tg.role_surfaces(d)
    tilted = tg.avoid_surfaces(d)["tilted"]
    with open(f"{d}/targets.txt", "w") as fp:
        fp.write(f"{surf['ahead']}\n{tilted}\n")
    cases = {
        "stop": ["--stop", tilted],
        "waypoints": ["--waypoints", f"{tilted},{surf['behind']}"],
        "targets": ["--targetmasks", f"{d}/targets.txt", "--os2t", "--stop", surf["ahead"]],
    }
    bad, seen = [], []
    for name, args in cases.items():
        res = {}
        for dev in ("cpu", "gpu"):
            out = f"{d}/{name}_{dev}"
            _, stdout, _ = dimoc("track", "--samples", bp, "--seed", seeds, "--out", out,
                                 "--device", dev, "-P", 300, "--opd", *args)
            maps = [load(f"{out}/fdt_paths.nii.gz")]
            if name == "targets":
                maps += [load(f"{out}/seeds_to_ahead.nii.gz"), load(f"{out}/seeds_to_tilted.nii.gz")]
            res[dev] = (tg.waytotal(out), stdout.splitlines()[1], maps)
        (wc, ec, mc), (wg, eg, mg) = res["cpu"], res["gpu"]
        seen.append(f"{name}: {wg} kept" + (f", seeds_to_tilted {mg[2].sum():.0f}" if name == "targets" else ""))
        if wc != wg or ec != eg or not all(np.array_equal(a, b) for a, b in zip(mc, mg)):
            bad.append(f"{name}: waytotal {wc}/{wg}, ends same {ec == eg}, maps same "
                       f"{[np.array_equal(a, b) for a, b in zip(mc, mg)]}")
    check("track_gpu_surface_roles_vs_cpu", not bad, "; ".join(bad) or "identical: " + ", ".join(seen))


def test_options_vs_cpu():
    """--sampvox, --distthresh, --onewaycondition and --network give the CPU's outputs exactly
    (the spread bundle of test_surface_roles)."""
    d = f"{ROOT}/roles"
    bp, seeds = f"{d}/bp", f"{d}/s.surf.gii"
    way = np.zeros(tg.SHAPE)
    way[25] = 1
    save(f"{d}/way25.nii.gz", way, tg.AFF)
    cases = {"sampvox": ["--sampvox", 1.5], "distthresh": ["--distthresh", 5, "-c", 0.9],
             "oneway": ["--waypoints", f"{d}/way25.nii.gz", "--onewaycondition"]}
    bad, seen, kept = [], [], {}
    for name, args in cases.items():
        res = {}
        for dev in ("cpu", "gpu"):
            out = f"{d}/opt_{name}_{dev}"
            _, stdout, _ = dimoc("track", "--samples", bp, "--seed", seeds, "--out", out,
                                 "--device", dev, "-P", 300, "--opd", "--omatrix1", *args)
            res[dev] = (tg.waytotal(out), stdout.splitlines()[1], load(f"{out}/fdt_paths.nii.gz"),
                        open(f"{out}/fdt_matrix1.dot").read())
        (wc, ec, pc, mc), (wg, eg, pg, mg) = res["cpu"], res["gpu"]
        seen.append(f"{name}: {wg} kept")
        kept[name] = wg
        if wc != wg or ec != eg or not np.array_equal(pc, pg) or mc != mg:
            bad.append(f"{name}: waytotal {wc}/{wg}, ends same {ec == eg}, fdt_paths same "
                       f"{np.array_equal(pc, pg)}, matrix1 same {mc == mg}")
    # --network over three masks of the spread bundle (some streamlines wander off the line)
    masks = []
    for name, x, y in (("na", 10, 4), ("nb", 30, 4), ("nc", 30, 6)):
        mk = np.zeros(tg.SHAPE)
        mk[x, y, 4] = 1
        masks.append(save(f"{d}/{name}.nii.gz", mk, tg.AFF))
    with open(f"{d}/net.txt", "w") as fp:
        fp.write("\n".join(masks) + "\n")
    res = {}
    for dev in ("cpu", "gpu"):
        out = f"{d}/net_{dev}"
        dimoc("track", "--samples", bp, "--seed", f"{d}/net.txt", "--out", out, "--device", dev,
              "-P", 2000, "--opd", "--network")
        res[dev] = (open(f"{out}/fdt_network_matrix").read(), open(f"{out}/waytotal").read(),
                    load(f"{out}/fdt_paths.nii.gz"))
    (nc, wc, pc), (ng, wg, pg) = res["cpu"], res["gpu"]
    seen.append(f"network: waytotal {wg.split()}, matrix {ng.split()}")
    kept["network"] = sum(int(x) for x in wg.split())
    if nc != ng or wc != wg or not np.array_equal(pc, pg):
        bad.append(f"network: matrix same {nc == ng}, waytotal {wc.split()} / {wg.split()}, "
                   f"fdt_paths same {np.array_equal(pc, pg)}")
    # the length threshold must split the streamlines for the comparison to mean something
    check("track_gpu_options_vs_cpu", not bad and 0 < kept["distthresh"] < 2700 and 0 < kept["network"],
          "; ".join(bad) or "identical: " + ", ".join(seen))


def test_phantoms_on_gpu():
    """test_track's phantom criteria with every run on the GPU."""
    plain = tt.track
    tt.track = lambda *a, **k: plain(*a, "--device", "gpu", **k)
    tt.test_straight()
    tt.test_crossing()
    tt.test_u_bundle()
    tt.test_exact()
    tt.test_curvature()
    tt.test_loopcheck()
    tt.test_matrix1_symmetric()
    tt.test_matrix2_matrix3()
    tt.test_determinism()
    tt.track = plain


if __name__ == "__main__":
    bp, shape = test_parity()
    test_matrix1(bp, shape)
    test_surface_avoid()
    test_surface_roles()
    test_options_vs_cpu()
    test_phantoms_on_gpu()
    tp.samples_parts(f"{ROOT}/parts", device="gpu", parts=(3, 7))  # --part: merged = one run
    finish()
