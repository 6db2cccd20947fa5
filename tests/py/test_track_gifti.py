"""dimoc track with GIFTI surfaces: every vertex of --seed FILE.gii a seed (world mm),
--avoid FILE.gii rejecting streamlines whose steps cross a triangle, --stop FILE.gii ending
them at the first point past it, and surfaces among the waypoints and the targets, which count
as visited when a step crosses them.

The phantom is a straight bundle along x filling a 40x9x9 image of 2 mm voxels whose world
coordinates are x = 2i - 10, y = 2j + 5, z = 2k + 3, with no orientation spread, so every
streamline is a straight line along x through its seed."""
import os
import re

import nibabel as nib
import numpy as np
from nibabel.gifti import GiftiDataArray, GiftiImage

from dmtest import check, dimoc, finish, save

AFF = np.array([[2.0, 0, 0, -10], [0, 2, 0, 5], [0, 0, 2, 3], [0, 0, 0, 1]])
SHAPE = (40, 9, 9)


def line_phantom(d, ns=4):
    """bedpostx-style folder: one fibre along x everywhere (FSL frame: x reversed, det > 0)."""
    os.makedirs(d, exist_ok=True)
    th = np.full(SHAPE + (ns,), np.pi / 2)
    ph = np.full(SHAPE + (ns,), np.pi)  # (-1, 0, 0) in FSL's frame is +x in voxel axes
    save(f"{d}/merged_th1samples.nii.gz", th, AFF)
    save(f"{d}/merged_ph1samples.nii.gz", ph, AFF)
    save(f"{d}/merged_f1samples.nii.gz", np.full(SHAPE + (ns,), 0.6), AFF)
    save(f"{d}/nodif_brain_mask.nii.gz", np.ones(SHAPE), AFF)
    return d


def grid_surface(path, xs, ys, zs):
    """A GIFTI surface: vertices on the grid of ys x zs at x = xs(y, z) (world mm), two
    triangles per grid square."""
    ny, nz = len(ys), len(zs)
    v = np.array([[xs(y, z), y, z] for y in ys for z in zs], np.float32)
    tri = []
    for a in range(ny - 1):
        for b in range(nz - 1):
            i = a * nz + b
            tri += [[i, i + nz, i + 1], [i + 1, i + nz, i + nz + 1]]
    g = GiftiImage(darrays=[GiftiDataArray(v, intent="NIFTI_INTENT_POINTSET"),
                            GiftiDataArray(np.array(tri, np.int32), intent="NIFTI_INTENT_TRIANGLE")])
    nib.save(g, path)
    return path, v


def track(bp, seed, out, *args, expect_ok=True):
    return dimoc("track", "--samples", bp, "--seed", seed, "--out", out, *args, expect_ok=expect_ok)


def waytotal(out):
    return int(open(f"{out}/waytotal").read())


def avoid_ends(stdout):
    """Half-streamlines that ended at the exclusion surface.  Every streamline starts along +x
    (the samples' sign, no spread), so the first half is the one that crosses and the second,
    not run, counts as rejected too: 2 per rejected streamline."""
    return int(re.search(r"(\d+) avoid", stdout).group(1))


def test_surface_seeds(d, bp):
    # 9 vertices at world x = 30 (voxel 20), y 12..14, z 10..12 (around voxel (20, 4, 4))
    surf, verts = grid_surface(f"{d}/seeds.surf.gii", lambda y, z: 30.0, [12, 13, 14], [10, 11, 12])
    P = 3
    _, out, _ = track(bp, surf, f"{d}/seeds", "--nearest", "-P", P, "-S", 20, "--opd",
                      "--save-streamlines", f"{d}/seeds.tck")
    t = nib.streamlines.load(f"{d}/seeds.tck")
    sl = [np.asarray(s) for s in t.streamlines]
    mids = np.array([s[len(s) // 2] for s in sl])
    want = np.repeat(verts, P, axis=0)
    ok = (waytotal(f"{d}/seeds") == len(verts) * P and len(sl) == len(verts) * P
          and all(len(s) == 21 for s in sl) and np.allclose(mids, want, atol=1e-4)
          and all(abs(s[:, 0].min() - 25) < 1e-4 and abs(s[:, 0].max() - 35) < 1e-4 for s in sl))
    check("track_gifti_vertex_seeds", ok,
          f"waytotal {waytotal(f'{d}/seeds')} (want {len(verts)} vertices x {P}), {len(sl)} streamlines, "
          f"seed points match the vertices: {np.allclose(mids, want, atol=1e-4)}")


def avoid_seeds(d):
    """The 9 seed vertices of the --avoid tests (world x = 30, y 12..14, z 10..12)."""
    return grid_surface(f"{d}/s.surf.gii", lambda y, z: 30.0, [12, 13, 14], [10, 11, 12])


def avoid_surfaces(d):
    """Exclusion surfaces: across the whole bundle at x = 40.5 (between steps), at x = 40 (a
    step lands on it), beside it (y >= 15.5: the streamlines run at y 12..14), and a fine tilted
    mesh covering y <= 13.5 only."""
    return {
        "across": grid_surface(f"{d}/across.surf.gii", lambda y, z: 40.5, [0, 30], [0, 30])[0],
        "touch": grid_surface(f"{d}/touch.surf.gii", lambda y, z: 40.0, [0, 30], [0, 30])[0],
        "beside": grid_surface(f"{d}/beside.surf.gii", lambda y, z: 40.5, [15.5, 30], [0, 30])[0],
        "tilted": grid_surface(f"{d}/tilted.surf.gii", lambda y, z: 40.5 + 0.4 * (z - 11),
                               np.linspace(0, 13.5, 15), np.linspace(0, 30, 15))[0],
    }


def test_surface_avoid(d, bp):
    seeds, verts = avoid_seeds(d)
    n = len(verts) * 4
    runs = {}
    for name, surf in avoid_surfaces(d).items():
        _, out, _ = track(bp, seeds, f"{d}/{name}", "-P", 4, "--avoid", surf, "--opd")
        runs[name] = (waytotal(f"{d}/{name}"), avoid_ends(out))
    check("track_gifti_avoid_across_rejects_all", runs["across"] == (0, 2 * n) and runs["touch"] == (0, 2 * n),
          f"across: waytotal {runs['across'][0]}, {runs['across'][1]} avoid ends; touching: "
          f"{runs['touch'][0]}, {runs['touch'][1]} (want 0 and {2 * n})")
    check("track_gifti_avoid_beside_rejects_none", runs["beside"] == (n, 0),
          f"waytotal {runs['beside'][0]} of {n}, {runs['beside'][1]} avoid ends")
    # tilted fine mesh (392 triangles on a grid): the 6 vertices at y 12, 13 are blocked, the 3 at y 14 not
    check("track_gifti_avoid_partial_mesh", runs["tilted"] == (3 * 4, 2 * 6 * 4),
          f"waytotal {runs['tilted'][0]} (want 12), {runs['tilted'][1]} avoid ends (want 48)")
    # the voxel mask and the paths agree: nothing of the rejected streamlines is counted
    paths = np.asarray(nib.load(f"{d}/across/fdt_paths.nii.gz").dataobj)
    check("track_gifti_avoid_no_paths", paths.sum() == 0, f"fdt_paths sum {paths.sum()}")


def role_surfaces(d):
    """Surfaces for the stop, waypoint and target tests: across the bundle at x = 40.25 (the
    first halves cross it, between the steps at 40 and 40.5), across it at x = 20.25 (the
    second halves cross it), and beside it."""
    return {
        "ahead": grid_surface(f"{d}/ahead.surf.gii", lambda y, z: 40.25, [0, 30], [0, 30])[0],
        "behind": grid_surface(f"{d}/behind.surf.gii", lambda y, z: 20.25, [0, 30], [0, 30])[0],
        "beside": grid_surface(f"{d}/beside.surf.gii", lambda y, z: 40.5, [15.5, 30], [0, 30])[0],
    }


def test_surface_stop(d, bp):
    seeds, verts = avoid_seeds(d)
    surf = role_surfaces(d)
    _, out, _ = track(bp, seeds, f"{d}/stop", "-P", 2, "--stop", surf["ahead"], "--opd",
                      "--save-streamlines", f"{d}/stop.tck")
    sl = [np.asarray(s) for s in nib.streamlines.load(f"{d}/stop.tck").streamlines]
    stops = int(re.search(r"(\d+) stop", out).group(1))
    xmax = sorted({round(float(s[:, 0].max()), 4) for s in sl})
    xmin = sorted({round(float(s[:, 0].min()), 4) for s in sl})
    n = len(verts) * 2
    # first halves end at x = 40.5 (the first point past 40.25); second halves run to the
    # image's edge (the last point inside voxel 0, centred at x = -10: x = -11)
    check("track_gifti_stop_surface", stops == n and xmax == [40.5] and xmin == [-11.0]
          and waytotal(f"{d}/stop") == n,
          f"{stops} stop ends (want {n}), streamlines end at x {xmax} (want [40.5]) and {xmin}")


def test_surface_waypoints(d, bp):
    seeds, verts = avoid_seeds(d)
    surf = role_surfaces(d)
    n = len(verts) * 2
    mask = np.zeros(SHAPE)
    mask[5] = 1  # voxel slice i = 5 (x = 0): every second half passes it
    save(f"{d}/way_mask.nii.gz", mask, AFF)
    with open(f"{d}/ways.txt", "w") as fp:  # a text list mixing a surface and an image
        fp.write(f"{surf['behind']}\n{d}/way_mask.nii.gz\n")
    runs = {
        "ahead AND behind": ([f"{surf['ahead']},{surf['behind']}"], n),
        "ahead AND beside": ([f"{surf['ahead']},{surf['beside']}"], 0),
        "ahead OR beside": ([f"{surf['ahead']},{surf['beside']}", "--waycond", "OR"], n),
        "beside": ([surf["beside"]], 0),
        "list: behind, mask": ([f"{d}/ways.txt"], n),
    }
    bad = []
    for name, (args, want) in runs.items():
        out = f"{d}/way_{len(bad)}_{abs(hash(name)) % 1000}"
        track(bp, seeds, out, "-P", 2, "--waypoints", *args)
        if waytotal(out) != want:
            bad.append(f"{name}: waytotal {waytotal(out)}, want {want}")
    check("track_gifti_waypoint_surfaces", not bad, "; ".join(bad) or f"{len(runs)} conditions as expected")


def test_surface_targets(d, bp):
    seeds, verts = avoid_seeds(d)
    surf = role_surfaces(d)
    mask = np.zeros(SHAPE)
    mask[30] = 1  # x = 50: beyond the stop surface
    save(f"{d}/far.nii.gz", mask, AFF)
    with open(f"{d}/targets.txt", "w") as fp:
        fp.write(f"{surf['ahead']}\n{surf['beside']}\n{d}/far.nii.gz\n")
    P = 3
    track(bp, seeds, f"{d}/targets", "-P", P, "--targetmasks", f"{d}/targets.txt", "--os2t")
    got = {t: float(np.asarray(nib.load(f"{d}/targets/seeds_to_{t}.nii.gz").dataobj).sum())
           for t in ("ahead", "beside", "far")}
    track(bp, seeds, f"{d}/targets_stop", "-P", P, "--targetmasks", f"{d}/targets.txt", "--os2t",
          "--stop", surf["ahead"])
    stopped = float(np.asarray(nib.load(f"{d}/targets_stop/seeds_to_far.nii.gz").dataobj).sum())
    n = len(verts) * P
    check("track_gifti_target_surfaces",
          got == {"ahead": n, "beside": 0, "far": n} and stopped == 0,
          f"seeds_to_ahead/beside/far sums {got} (want {n}, 0, {n}); with --stop at 'ahead', "
          f"seeds_to_far {stopped} (want 0)")


def test_errors(d, bp):
    with open(f"{d}/bad.gii", "w") as fp:
        fp.write("this is not xml\n")
    seeds, _ = grid_surface(f"{d}/s.surf.gii", lambda y, z: 30.0, [12, 13], [10, 11])
    nib.save(GiftiImage(darrays=[GiftiDataArray(np.zeros((3, 3), np.float32),
                                                intent="NIFTI_INTENT_POINTSET")]), f"{d}/points.gii")
    cases = [
        ("--seed bad.gii", track(bp, f"{d}/bad.gii", f"{d}/o", expect_ok=False), "not a readable GIFTI"),
        ("--avoid bad.gii", track(bp, seeds, f"{d}/o", "--avoid", f"{d}/bad.gii", expect_ok=False),
         "not a readable GIFTI"),
        ("--seed missing.gii", track(bp, f"{d}/missing.gii", f"{d}/o", expect_ok=False), "cannot read"),
        ("--avoid without triangles", track(bp, seeds, f"{d}/o", "--avoid", f"{d}/points.gii",
                                            expect_ok=False), "NIFTI_INTENT_TRIANGLE"),
    ]
    bad = [f"{name}: rc {rc}, {err.strip()!r}" for name, (rc, _, err), want in cases
           if rc == 0 or want not in err or len(err.strip().splitlines()) != 1]
    check("track_gifti_clear_errors", not bad,
          "; ".join(bad) if bad else " | ".join(c[1][2].strip() for c in cases))


def test_avoid_device_gpu(d, bp):
    """A surface --avoid runs on GPUs too: --device gpu tracks where a GPU is usable (every
    streamline crosses "across": none kept) and otherwise stops with the usual one-line error."""
    seeds, _ = avoid_seeds(d)
    across = avoid_surfaces(d)["across"]
    rc, _, err = track(bp, seeds, f"{d}/gpu", "-P", 4, "--avoid", across, "--device", "gpu",
                       expect_ok=False)
    if rc == 0:
        ok, what = waytotal(f"{d}/gpu") == 0, f"ran on the GPU, waytotal {waytotal(f'{d}/gpu')} (want 0)"
    else:
        ok = "no usable GPU" in err and len(err.strip().splitlines()) == 1
        what = f"rc {rc}: {err.strip()!r}"
    check("track_gifti_avoid_device_gpu", ok, what)


if __name__ == "__main__":
    from dmtest import workdir
    root = workdir("track_gifti")
    bp = line_phantom(f"{root}/bp")
    test_surface_seeds(root, bp)
    test_surface_avoid(root, bp)
    test_surface_stop(root, bp)
    test_surface_waypoints(root, bp)
    test_surface_targets(root, bp)
    test_errors(root, bp)
    test_avoid_device_gpu(root, bp)
    finish()
