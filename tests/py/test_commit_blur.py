"""dimoc commit's blur (--blur-core-extent, --blur-gauss-extent, --blur-spacing, --blur-gauss-min:
trk2dictionary's blur_*; docs/commit-facts.md section 2), on the phantom of tests/py/commitpeer.py:
  - against COMMIT (dmri-commit 2.4.2) with the same blur (core 0.5 mm, Gaussian 1 mm, COMMIT's
    spacing 0.25 mm and gauss_min 0.1): the dictionary itself (kept streamlines, each one's
    length, norm and blurred length lenTot, the summed length per voxel), the voxels of the fit,
    the compartment maps (r > 0.99), mean NRMSE within 2% of COMMIT's and the objective within
    1e-3 (relative) of it, the streamline weights (COMMIT's scaled by lenTot / len);
  - independent of COMMIT: one straight streamline's dictionary holds, in total, its length times
    the sum of its copies' weights (the copies' grid and weights computed here), with its own
    length (the central copy's) as the streamline's length, every segment in the central
    direction and within the tube's radius of the line; a blur of a core alone counts its
    copies;
  - blur off (extents 0, any spacing) is the run without the options, byte for byte, and its
    saved header is format 1 (200 bytes); with blur format 2 (232);
  - `--stage dictionary --part K/3` with blur, merged, is the whole run's dictionary byte for
    byte, and `--dictionary` of it gives the plain blurred run's outputs byte for byte; a
    dictionary of other blur settings (or none) is refused in one line;
  - bad blur options are refused in one line."""
import filecmp
import json
import os
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import commitpeer as cp  # noqa: E402
from dmtest import check, check_refused, dimoc, finish, workdir  # noqa: E402

OUTPUTS = ["streamline_weights.txt", "compartment_IC.nii.gz", "compartment_EC.nii.gz",
           "compartment_ISO.nii.gz", "fit_RMSE.nii.gz", "fit_NRMSE.nii.gz", "filtered.tck"]
DICT = ["dictionary.bin", "dictionary_header.bin"]
MAPS = [("ic", "compartment_IC"), ("ec", "compartment_EC"), ("iso", "compartment_ISO"),
        ("nrmse", "fit_NRMSE")]
CORE, GAUSS = 0.5, 1.0
BLUR = ["--blur-core-extent", str(CORE), "--blur-gauss-extent", str(GAUSS)]


def base(p, tck=None, mask=True):
    args = ["--tractogram", tck or p["tck"], "--data", p["dwi"]]
    return args + (["--mask", p["wm"]] if mask else [])


def full(p, out, *extra, expect_ok=True):
    return dimoc("commit", *base(p), "--bvals", p["bvals_file"], "--bvecs", p["bvecs_file"],
                 "--peaks", p["peaks"], "--out", out, *extra, expect_ok=expect_ok)


def stage(p, out, *extra, tck=None, mask=True):
    return dimoc("commit", *base(p, tck, mask), "--stage", "dictionary", "--out", out, *extra)


def same_files(a, b, names):
    """Whether the files are the same bytes; for images that differ, how their values do (none:
    only the compressed bytes), and both runs' solver ends, so that a difference tells where it
    began."""
    bad = [n for n in names if not filecmp.cmp(f"{a}/{n}", f"{b}/{n}", shallow=False)]
    if not bad:
        return True, "identical"
    said = []
    for n in bad:
        if n.endswith(".nii.gz"):
            x, y = (np.asarray(nib.load(f"{r}/{n}").dataobj, float) for r in (a, b))
            diff = np.abs(x - y)
            n += f" ({int((diff > 0).sum())} voxels apart, by up to {diff.max():.3g})"
        said.append(n)
    ends = []
    for r in (a, b):
        prov = f"{r}/provenance.json"
        res = json.load(open(prov))["results"] if os.path.exists(prov) else {}
        ends.append(f"{res.get('iterations')} iterations, objective {res.get('objective')!r}")
    return False, "differ: " + ", ".join(said) + "; " + " / ".join(ends)


def read_dictionary(path, n):
    """dictionary.bin (docs/commit.md): per streamline (length, norm, segments as a record array
    of grid voxel, direction, length)."""
    b = open(path, "rb").read()
    seg_t = np.dtype([("v", "<u4"), ("d", "<u2"), ("l", "<f4")])
    o, recs = 0, []
    for s in range(n):
        i, ns = np.frombuffer(b, "<u4", 2, o)
        length, norm = np.frombuffer(b, "<f4", 2, o + 8)
        o += 16
        assert i == s
        recs.append((float(length), float(norm), np.frombuffer(b, seg_t, int(ns), o)))
        o += 10 * int(ns)
    assert o == len(b)
    return recs


def copies(core, gauss, spacing=0.25, gauss_min=0.1):
    """The blur's copies as trk2dictionary makes them: (radius, weight) of the points of a square
    grid of the spacing within core + gauss, weight 1 in the core and a Gaussian beyond it that is
    gauss_min at the rim (sigma in single precision, as COMMIT keeps it), those below 1e-3
    dropped."""
    R = core + gauss
    t = np.arange(0, R + 1e-6, spacing)
    t = np.concatenate((t, -t[1:][::-1]))
    x, y = np.meshgrid(t, t)
    r = np.hypot(x, y)
    r = r[r <= R]
    if gauss == 0:
        w = np.ones_like(r)
    else:
        sigma = float(np.float32(gauss / np.sqrt(-2 * np.log(gauss_min))))
        w = np.where(r <= core, 1.0, np.exp(-(r - core) ** 2 / (2 * sigma ** 2)))
    keep = w >= 1e-3
    return r[keep], w[keep]


def against_commit(d, p):
    n = len(p["streamlines"])
    peer = cp.run_on_phantom(f"{d}/peer", p, t2d_extra=dict(blur_core_extent=CORE,
                                                            blur_gauss_extent=GAUSS))
    z = peer["peer"]
    stage(p, f"{d}/dict", *BLUR)
    recs = read_dictionary(f"{d}/dict/dictionary.bin", n)
    kept = z["trk_kept"] > 0
    mine_kept = np.array([len(r[2]) > 0 for r in recs])
    L = np.array([r[0] for r in recs])[kept]
    N = np.array([r[1] for r in recs])[kept]
    T = np.array([r[2]["l"].astype(float).sum() for r in recs])[kept]
    rel = [np.abs(a / b - 1).max() for a, b in ((L, z["trk_len"]), (N, z["trk_norm"]),
                                                (T, z["trk_lentot"]))]
    # the summed length per voxel (COMMIT's dictionary_tdi), over the voxels of the fit
    grid = np.prod(cp.SHAPE)
    tdi = np.zeros(grid)
    for r in recs:
        np.add.at(tdi, r[2]["v"].astype(np.int64), r[2]["l"].astype(float))
    # (COMMIT's load_dictionary divides its segment lengths by the streamline's norm)
    tdi_p = np.bincount(z["ic_vox"].astype(np.int64),
                        weights=z["ic_len"] * z["trk_norm"][z["ic_str"]])
    fit = peer["fit_mask"].ravel(order="F")
    same_vox = np.array_equal(tdi > 0, fit)
    tdi_rel = np.abs(tdi[fit] - tdi_p).max() / tdi_p.max() if same_vox else np.inf
    check("commit_blur_dictionary_as_commit",
          np.array_equal(mine_kept, kept) and max(rel) < 1e-4 and same_vox and tdi_rel < 1e-4,
          f"{kept.sum()} kept as COMMIT; per streamline largest relative difference: length "
          f"{rel[0]:.1e}, norm {rel[1]:.1e}, lenTot {rel[2]:.1e} (lenTot / length up to "
          f"{(T / L).max():.1f}); {fit.sum()} voxels reached, the same: {same_vox}; summed length "
          f"per voxel within {tdi_rel:.1e} of the largest")

    out = f"{d}/dimoc"
    full(p, out, *BLUR)
    me = {k: np.asarray(nib.load(f"{out}/{name}.nii.gz").dataobj, float) for k, name in MAPS}
    prov = json.load(open(f"{out}/provenance.json"))
    res = prov["results"]
    m = peer["fit_mask"]
    check("commit_blur_fit_voxels_and_provenance",
          res["voxels"] == m.sum() and res.get("blur_copies") == copies(CORE, GAUSS)[0].size and
          prov["options"].get("blur-core-extent") == str(CORE),
          f"{res['voxels']} voxels (COMMIT {m.sum()}), {res.get('blur_copies')} copies, options "
          f"{ {k: v for k, v in prov['options'].items() if k.startswith('blur')} }")
    nvox, niso = z["iso_vox"].size, z["iso_norm"].size
    xi = z["x"][-niso * nvox:].reshape(niso, nvox) / z["iso_norm"][:, None]
    iso = np.zeros(m.shape)
    v = np.zeros(nvox)
    v[z["iso_vox"]] = xi.sum(0)
    iso[z["mask_ix"], z["mask_iy"], z["mask_iz"]] = v
    ref = {"ic": peer["ic"], "ec": peer["ec"], "iso": iso}
    for k in ("ic", "ec", "iso"):
        r = np.corrcoef(ref[k][m], me[k][m])[0, 1]
        check(f"commit_blur_map_{k}_vs_commit", r > 0.99,
              f"r = {r:.6f}; means {ref[k][m].mean():.4f} (COMMIT) {me[k][m].mean():.4f}")
    n_peer, n_me = peer["nrmse"][m].mean(), me["nrmse"][m].mean()
    check("commit_blur_nrmse_no_worse", n_me <= 1.02 * n_peer,
          f"mean NRMSE {n_me:.5f}, COMMIT {n_peer:.5f}")
    o_peer, o_me = peer["objective"], res["objective"]
    check("commit_blur_objective_no_worse", o_me <= o_peer * (1 + 1e-3),
          f"0.5||Ax-y||^2 = {o_me:.5f}, COMMIT {o_peer:.5f} "
          f"({peer['fit_details']['iterations']:.0f} iterations; dimoc {res['iterations']})")
    w = np.loadtxt(f"{out}/streamline_weights.txt")
    rw = np.corrcoef(peer["weights"], w)[0, 1]
    sums = w.sum() / peer["weights"].sum()
    check("commit_blur_weights_vs_commit", rw > 0.95 and abs(sums - 1) < 0.02,
          f"r = {rw:.4f}; sum of the weights {w.sum():.4f}, COMMIT {peer['weights'].sum():.4f} "
          f"(both scaled by lenTot / length)")


def straight(d, p):
    """One straight oblique streamline inside the image (no mask): its dictionary's total is its
    length times the sum of its copies' weights."""
    aff = p["affine"]
    centre = aff[:3, :3] @ (np.array(cp.SHAPE) / 2.0 - 0.5) + aff[:3, 3]
    u = np.array([0.6, 0.48, 0.64])
    u /= np.linalg.norm(u)
    pts = centre + np.outer(np.linspace(-6, 6, 25), u)  # 12 mm in 0.5 mm steps
    tck = cp.write_tck(f"{d}/straight.tck", [pts.astype(np.float32)])
    length = 12.0
    for name, core, gauss in (("gauss", CORE, GAUSS), ("core_only", 1.0, 0.0)):
        out = f"{d}/straight_{name}"
        stage(p, out, "--blur-core-extent", str(core), "--blur-gauss-extent", str(gauss),
              "--min-seg-len", "0", tck=tck, mask=False)
        (L, norm, seg), = read_dictionary(f"{out}/dictionary.bin", 1)
        r, wts = copies(core, gauss)
        total, want = seg["l"].astype(float).sum(), length * wts.sum()
        # every segment within the tube: its voxel centre within R + half the voxel diagonal
        ijk = np.stack(np.unravel_index(seg["v"].astype(np.int64), cp.SHAPE, order="F"), 1)
        world = ijk @ aff[:3, :3].T + aff[:3, 3]
        rel = world - centre
        dist = np.linalg.norm(rel - np.outer(rel @ u, u), axis=1)
        half_diag = 0.5 * np.linalg.norm(aff[:3, :3].sum(1))
        one_dir = np.unique(seg["d"]).size == 1
        check(f"commit_blur_straight_streamline_{name}",
              abs(total - want) < 1e-5 * want and abs(L - length) < 1e-4 and one_dir and
              dist.max() <= core + gauss + half_diag + 1e-6 and
              norm <= total and norm >= total / np.sqrt(len(np.unique(seg["v"]))) * 0.999,
              f"{wts.size} copies (weights sum {wts.sum():.4f}): total {total:.4f} mm, length x "
              f"sum {want:.4f}; its length {L:.5f} (12); one direction: {one_dir}; voxels within "
              f"{dist.max():.3f} mm of the line")


def off_and_parts(d, p):
    n = len(p["streamlines"])
    # blur off: the options at 0 (and another spacing) change nothing
    full(p, f"{d}/plain")
    full(p, f"{d}/zero", "--blur-core-extent", "0", "--blur-gauss-extent", "0", "--blur-spacing",
         "0.5")
    ok, why = same_files(f"{d}/plain", f"{d}/zero", OUTPUTS)
    stage(p, f"{d}/dict_plain")
    hp = open(f"{d}/dict_plain/dictionary_header.bin", "rb").read()
    hb = open(f"{d}/dict/dictionary_header.bin", "rb").read()
    check("commit_blur_off_unchanged", ok and len(hp) == 200 and hp[8] == 1 and len(hb) == 232 and
          hb[8] == 2, f"outputs {why}; headers {len(hp)} bytes format {hp[8]}, with blur "
          f"{len(hb)} bytes format {hb[8]}")
    # parts
    parts = []
    for k in (1, 2, 3):
        stage(p, f"{d}/part{k}", *BLUR, "--part", f"{k}/3", "--threads", "2")
        parts.append(f"{d}/part{k}")
    dimoc("merge", *parts, "--out", f"{d}/merged", "--quiet")
    ok, why = same_files(f"{d}/dict", f"{d}/merged", DICT)
    check("commit_blur_parts_merge_identical", ok, why + f" ({n} streamlines in 3 parts)")
    full(p, f"{d}/from_merged", *BLUR, "--dictionary", f"{d}/merged")
    ok, why = same_files(f"{d}/dimoc", f"{d}/from_merged", OUTPUTS)
    check("commit_blur_outputs_from_dictionary", ok, why)
    cases = [("blur_dictionary_without_blur", f"{d}/merged", [], "this run has none"),
             ("plain_dictionary_with_blur", f"{d}/dict_plain", BLUR, "made without blur"),
             ("other_spacing", f"{d}/merged", BLUR + ["--blur-spacing", "0.2"], "--blur-spacing")]
    for name, src, extra, words in cases:
        out = f"{d}/refused_{name}"
        rc, _, err = full(p, out, *extra, "--dictionary", src, expect_ok=False)
        lines = [x for x in err.strip().splitlines() if x]
        check(f"commit_blur_refuses_{name}", rc != 0 and len(lines) == 1 and words in err and
              "--dictionary" in err and not os.path.exists(out), f"rc {rc}: {err.strip()}")


def bad_options(d, p):
    cases = [("gauss_min_1", BLUR + ["--blur-gauss-min", "1"], "--blur-gauss-min"),
             ("spacing_0", BLUR + ["--blur-spacing", "0"], "--blur-spacing"),
             ("negative_extent", ["--blur-core-extent", "-1"], "--blur-core-extent"),
             ("too_fine", ["--blur-core-extent", "2", "--blur-spacing", "0.001"], "--blur-spacing")]
    for name, extra, words in cases:
        out = f"{d}/bad_{name}"
        check_refused(f"commit_blur_bad_{name}", full(p, out, *extra, expect_ok=False), words, out)


def main():
    d = workdir("commit_blur")
    p = cp.phantom(f"{d}/phantom", noise=0.02)
    against_commit(d, p)
    straight(d, p)
    off_and_parts(d, p)
    bad_options(d, p)
    finish()


if __name__ == "__main__":
    main()
