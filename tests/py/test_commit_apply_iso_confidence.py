"""dimoc commit's --blur-apply-to, --iso-mask and --confidence-map [--confidence-map-rescale]
(COMMIT 2.4.2's trk2dictionary blur_apply_to and filename_iso_mask, and fit(
confidence_map_filename, confidence_map_rescale); docs/commit-facts.md sections 2, 2 (ISO), 5),
on the phantom of tests/py/commitpeer.py, each against dmri-commit 2.4.2 on the same inputs:
compartment maps r > 0.99, mean NRMSE within 2% of COMMIT's, the objective within 1e-3
(relative) of it or better, streamline weights r > 0.95; and
  - --blur-apply-to all 1 is the blurred run byte for byte, all 0 the run without blur (maps byte
    for byte, weights to the file's precision); with the dictionary in parts, merged, the plain
    run's outputs byte for byte (header format 3), and a dictionary of other flags refused;
  - --iso-mask: balls in exactly COMMIT's ISO voxels (the mask's nonzero voxels of the fit), the
    ISO map 0 elsewhere; with --model volume-fractions COMMIT's lesion model (lesion_mask = True):
    compartment_LESION, R_scaling_factor and the rescaled weights;
  - --confidence-map (4D, 3D with --confidence-map-rescale, 4D with --lambda): COMMIT's weighted
    objective, fit_RMSE_adjusted and fit_NRMSE_adjusted (means within 2% of COMMIT's or lower,
    maps r > 0.95: error maps, where the two forward models' small differences show more than in
    the compartment maps); a map of one value is not used (the plain run);
  - bad inputs refused in one line naming the file or the option."""
import filecmp
import json
import os
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import commitpeer as cp  # noqa: E402
from dmtest import check, check_refused, dimoc, finish, workdir  # noqa: E402

BLUR = ["--blur-core-extent", "0.5", "--blur-gauss-extent", "1"]
BLUR_T2D = dict(blur_core_extent=0.5, blur_gauss_extent=1.0)
MAPS = ["compartment_IC.nii.gz", "compartment_EC.nii.gz", "compartment_ISO.nii.gz",
        "fit_RMSE.nii.gz", "fit_NRMSE.nii.gz", "filtered.tck"]


def run(p, out, *extra, expect_ok=True):
    return dimoc("commit", "--tractogram", p["tck"], "--data", p["dwi"], "--mask", p["wm"],
                 "--bvals", p["bvals_file"], "--bvecs", p["bvecs_file"], "--peaks", p["peaks"],
                 "--out", out, *extra, expect_ok=expect_ok)


def load(path):
    return np.asarray(nib.load(path).dataobj, float)


def peer_iso(peer):
    """COMMIT's balls summed per voxel (its compartment_ISO holds the first ball only)."""
    z = peer["peer"]
    nv_fit, niso, niv = z["mask_ix"].size, z["iso_norm"].size, z["iso_vox"].size
    xi = z["x"][-niso * niv:].reshape(niso, niv) / z["iso_norm"][:, None]
    v = np.zeros(nv_fit)
    v[z["iso_vox"]] = xi.sum(0)
    iso = np.zeros(peer["fit_mask"].shape)
    iso[z["mask_ix"], z["mask_iy"], z["mask_iz"]] = v
    return iso


def compare(name, peer, out, weights_scale=None):
    """The maps, NRMSE, objective and weights of dimoc's run in `out` against COMMIT's."""
    m = peer["fit_mask"]
    res = json.load(open(f"{out}/provenance.json"))["results"]
    ref = {"IC": peer["ic"], "EC": peer["ec"], "ISO": peer_iso(peer)}
    rs = {k: np.corrcoef(ref[k][m], load(f"{out}/compartment_{k}.nii.gz")[m])[0, 1] for k in ref}
    n_me, n_peer = load(f"{out}/fit_NRMSE.nii.gz")[m].mean(), peer["nrmse"][m].mean()
    o_me, o_peer = res["objective"], peer["objective"]
    w = np.loadtxt(f"{out}/streamline_weights.txt")
    rw = np.corrcoef(peer["weights"], w)[0, 1]
    check(f"commit_{name}_vs_commit",
          min(rs.values()) > 0.99 and n_me <= 1.02 * n_peer and o_me <= o_peer * (1 + 1e-3) and
          rw > 0.95 and res["voxels"] == m.sum(),
          "maps r = " + ", ".join(f"{k} {r:.5f}" for k, r in rs.items()) +
          f"; mean NRMSE {n_me:.5f} (COMMIT {n_peer:.5f}); objective {o_me:.5f} (COMMIT "
          f"{o_peer:.5f}; iterations {res['iterations']} / {peer['fit_details']['iterations']:.0f});"
          f" weights r = {rw:.4f}; {res['voxels']} voxels (COMMIT {m.sum()})")
    return res


def same(a, b, names):
    bad = [n for n in names if not filecmp.cmp(f"{a}/{n}", f"{b}/{n}", shallow=False)]
    return not bad, ("differ: " + ", ".join(bad)) if bad else "identical"


def blur_apply_to(d, p):
    n = len(p["streamlines"])
    on = np.random.default_rng(7).random(n) < 0.5
    np.savetxt(f"{d}/apply.txt", on.astype(int), fmt="%d")
    peer = cp.run_on_phantom(f"{d}/peer_apply", p,
                             t2d_extra=dict(BLUR_T2D, blur_apply_to=[bool(v) for v in on]))
    run(p, f"{d}/apply", *BLUR, "--blur-apply-to", f"{d}/apply.txt")
    res = compare("blur_apply_to", peer, f"{d}/apply")
    # independent of COMMIT: the blurred streamlines' blurred length over their own (lenTot / len)
    # is > 1 in COMMIT's dictionary exactly where the file says 1
    z = peer["peer"]
    kept = z["trk_kept"] > 0
    blurred = z["trk_lentot"] / z["trk_len"] > 1 + 1e-4
    check("commit_blur_apply_to_provenance",
          res.get("blur_streamlines") == on.sum() and np.array_equal(blurred, on[kept]),
          f"{res.get('blur_streamlines')} streamlines blurred of {n} (the file: {on.sum()}); "
          f"COMMIT's lenTot > len for exactly those kept: {np.array_equal(blurred, on[kept])}")
    # all 1: the blurred run; all 0: the plain run
    np.savetxt(f"{d}/all1.txt", np.ones(n, int), fmt="%d")
    np.savetxt(f"{d}/all0.txt", np.zeros(n, int), fmt="%d")
    run(p, f"{d}/blur", *BLUR)
    run(p, f"{d}/blur_all1", *BLUR, "--blur-apply-to", f"{d}/all1.txt")
    run(p, f"{d}/plain")
    run(p, f"{d}/blur_all0", *BLUR, "--blur-apply-to", f"{d}/all0.txt")
    ok1, why1 = same(f"{d}/blur", f"{d}/blur_all1", MAPS + ["streamline_weights.txt"])
    ok0, why0 = same(f"{d}/plain", f"{d}/blur_all0", MAPS)
    w0, wp = (np.loadtxt(f"{d}/{x}/streamline_weights.txt") for x in ("blur_all0", "plain"))
    dw = np.abs(w0 - wp).max() / wp.max()
    check("commit_blur_apply_to_all_or_none", ok1 and ok0 and dw < 1e-5,
          f"all 1 against the blurred run: {why1}; all 0 against the plain run: maps {why0}, "
          f"weights within {dw:.1e} of the largest")
    # the dictionary in parts with it: merged, the plain run's outputs; the header records it
    apply = ["--blur-apply-to", f"{d}/apply.txt"]
    parts = []
    for k in (1, 2, 3):
        dimoc("commit", "--tractogram", p["tck"], "--data", p["dwi"], "--mask", p["wm"], "--stage",
              "dictionary", "--part", f"{k}/3", "--out", f"{d}/part{k}", *BLUR, *apply)
        parts.append(f"{d}/part{k}")
    dimoc("merge", *parts, "--out", f"{d}/merged", "--quiet")
    run(p, f"{d}/apply_from_parts", *BLUR, *apply, "--dictionary", f"{d}/merged")
    ok, why = same(f"{d}/apply", f"{d}/apply_from_parts", MAPS + ["streamline_weights.txt"])
    hb = open(f"{d}/merged/dictionary_header.bin", "rb").read()
    check("commit_blur_apply_to_in_parts", ok and len(hb) == 240 and hb[8] == 3,
          f"outputs {why}; header {len(hb)} bytes, format {hb[8]}")
    for name, extra, words in (("other_flags", ["--blur-apply-to", f"{d}/all1.txt"], "another"),
                               ("none", [], "this run has none")):
        out = f"{d}/refused_apply_{name}"
        check_refused(f"commit_blur_apply_to_dictionary_refused_{name}",
                      run(p, out, *BLUR, *extra, "--dictionary", f"{d}/merged", expect_ok=False),
                      words, out)


def iso_mask(d, p):
    aff = nib.load(p["dwi"]).affine
    shape = nib.load(p["wm"]).shape
    iso = np.zeros(shape, np.float32)
    iso[: shape[0] // 2] = 1  # balls in half of the image
    iso[shape[0] // 2:, : shape[1] // 3] = 2.5  # any nonzero value counts
    nib.save(nib.Nifti1Image(iso, aff), f"{d}/iso.nii.gz")
    peer = cp.run_on_phantom(f"{d}/peer_iso", p, t2d_extra=dict(filename_iso_mask=f"{d}/iso.nii.gz"))
    run(p, f"{d}/iso", "--iso-mask", f"{d}/iso.nii.gz")
    res = compare("iso_mask", peer, f"{d}/iso")
    m = peer["fit_mask"]
    want = int((m & (iso != 0)).sum())
    n_peer = peer["peer"]["iso_vox"].size
    mine = load(f"{d}/iso/compartment_ISO.nii.gz")
    outside = np.abs(mine[m & (iso == 0)]).max()
    niso = peer["peer"]["iso_norm"].size
    check("commit_iso_mask_voxels",
          res["iso_compartments"] == niso * want and n_peer == want and outside == 0 and
          np.abs(peer_iso(peer)[m & (iso == 0)]).max() == 0,
          f"{res['iso_compartments']} ISO compartments ({niso} balls x {want} voxels of the fit in "
          f"the mask; COMMIT {n_peer} voxels); ISO map outside the mask: {outside}")


def lesion(d, p):
    """--model volume-fractions with --iso-mask: COMMIT's ScalarMap with lesion_mask = True."""
    aff = nib.load(p["dwi"]).affine
    ic = load(p["ic_true"])
    shape = ic.shape
    box = np.zeros(shape, bool)
    box[6:14, 6:14, 3:7] = True
    les = np.where(box, 0.6, 1.0) * ic  # a lesion lowers the map in the box
    nib.save(nib.Nifti1Image(les.astype(np.float32), aff), f"{d}/ic_lesion.nii.gz")
    mask = np.zeros(shape, np.float32)
    mask[4:16, 4:16, 2:8] = 1  # the lesion mask, larger than the lesion
    nib.save(nib.Nifti1Image(mask, aff), f"{d}/lesion_mask.nii.gz")
    peer = cp.run_commit(f"{d}/peer_lesion", f"{d}/ic_lesion.nii.gz", None, None, p["tck"], p["wm"],
                         None, model="ScalarMap", model_attrs=dict(lesion_mask=True),
                         t2d_extra=dict(filename_iso_mask=f"{d}/lesion_mask.nii.gz"))
    out = f"{d}/lesion"
    dimoc("commit", "--model", "volume-fractions", "--tractogram", p["tck"], "--data",
          f"{d}/ic_lesion.nii.gz", "--mask", p["wm"], "--iso-mask", f"{d}/lesion_mask.nii.gz",
          "--out", out)
    m = peer["fit_mask"]
    res = json.load(open(f"{out}/provenance.json"))["results"]
    r = {}
    for f in ("compartment_IC", "compartment_LESION", "R_scaling_factor"):
        a, b = load(f"{peer['results']}/{f}.nii.gz")[m], load(f"{out}/{f}.nii.gz")[m]
        r[f] = np.corrcoef(a, b)[0, 1]
    iso0 = np.abs(load(f"{out}/compartment_ISO.nii.gz")).max()
    w = np.loadtxt(f"{out}/streamline_weights.txt")
    rw = np.corrcoef(peer["weights"], w)[0, 1]
    o_me, o_peer = res["objective"], peer["objective"]
    n_les = int((load(f"{peer['results']}/compartment_LESION.nii.gz") > 0).sum())
    check("commit_lesion_vs_commit",
          min(r.values()) > 0.99 and rw > 0.95 and o_me <= o_peer * (1 + 1e-3) and iso0 == 0,
          ", ".join(f"{k} r = {v:.5f}" for k, v in r.items()) + f"; weights r = {rw:.4f}; "
          f"objective {o_me:.6f} (COMMIT {o_peer:.6f}); lesion voxels {res['lesion_voxels']} "
          f"(COMMIT {n_les}); compartment_ISO all 0: {iso0 == 0}")
    # independent of COMMIT: R = (IC - LESION) / IC where LESION > 0, from dimoc's own maps
    Rf = load(f"{out}/R_scaling_factor.nii.gz")
    IC, LES = load(f"{out}/compartment_IC.nii.gz"), load(f"{out}/compartment_LESION.nii.gz")
    lz = LES > 0
    dr = np.abs(Rf[lz] - (IC[lz] - LES[lz]) / IC[lz]).max()
    check("commit_lesion_factor_definition",
          np.all(Rf[~lz] == 0) and dr < 1e-5 and lz.sum() == res["lesion_voxels"] > 0,
          f"R = (IC - LESION) / IC within {dr:.1e} in the {lz.sum()} voxels of LESION > 0, 0 "
          f"elsewhere; R in ({Rf[lz].min():.3f}, {Rf[lz].max():.3f})")


def confidence(d, p):
    aff = nib.load(p["dwi"]).affine
    shape4 = nib.load(p["dwi"]).shape
    rng = np.random.default_rng(3)
    c4 = rng.uniform(0.2, 1.0, shape4).astype(np.float32)
    c4[..., 5] = 0  # a volume left out
    nib.save(nib.Nifti1Image(c4, aff), f"{d}/conf4.nii.gz")
    c3 = rng.uniform(2.0, 5.0, shape4[:3]).astype(np.float32)
    nib.save(nib.Nifti1Image(c3, aff), f"{d}/conf3.nii.gz")
    for name, path, rescale in (("4d", f"{d}/conf4.nii.gz", False),
                                ("3d_rescale", f"{d}/conf3.nii.gz", True)):
        peer = cp.run_on_phantom(f"{d}/peer_conf_{name}", p,
                                 fit_extra=dict(confidence_map_filename=path,
                                                confidence_map_rescale=rescale))
        out = f"{d}/conf_{name}"
        run(p, out, "--confidence-map", path, *(["--confidence-map-rescale"] if rescale else []))
        compare(f"confidence_{name}", peer, out)
        m = peer["fit_mask"]
        adj = []
        for f in ("fit_RMSE_adjusted", "fit_NRMSE_adjusted"):
            a, b = load(f"{peer['results']}/{f}.nii.gz")[m], load(f"{out}/{f}.nii.gz")[m]
            adj.append((f, a.mean(), b.mean(), np.corrcoef(a, b)[0, 1]))
        check(f"commit_confidence_{name}_adjusted_errors",
              all(r > 0.95 and mb <= 1.02 * ma for _, ma, mb, r in adj),
              "; ".join(f"{f}: mean {mb:.5f} (COMMIT {ma:.5f}), r = {r:.4f}" for f, ma, mb, r in adj))
    # with the lasso: lambda from A^T y of the data unweighted, as COMMIT's set_regularisation
    peer = cp.run_on_phantom(f"{d}/peer_conf_lasso", p, lasso=0.05,
                             fit_extra=dict(confidence_map_filename=f"{d}/conf4.nii.gz"))
    run(p, f"{d}/conf_lasso", "--confidence-map", f"{d}/conf4.nii.gz", "--lambda", "0.05")
    compare("confidence_lasso", peer, f"{d}/conf_lasso")
    # one value everywhere: not used, the plain run
    nib.save(nib.Nifti1Image(np.full(shape4[:3], 0.7, np.float32), aff), f"{d}/const.nii.gz")
    run(p, f"{d}/plain_c")
    rc, _, err = run(p, f"{d}/const", "--confidence-map", f"{d}/const.nii.gz")
    ok, why = same(f"{d}/plain_c", f"{d}/const", MAPS + ["streamline_weights.txt"])
    check("commit_confidence_constant_not_used",
          ok and "not used" in err and not os.path.exists(f"{d}/const/fit_RMSE_adjusted.nii.gz"),
          f"outputs {why}; stderr: {err.strip()}")


def bad_inputs(d, p):
    n = len(p["streamlines"])
    aff = nib.load(p["dwi"]).affine
    shape4 = nib.load(p["dwi"]).shape
    np.savetxt(f"{d}/short.txt", np.ones(n - 1, int), fmt="%d")
    np.savetxt(f"{d}/two.txt", np.r_[np.ones(n - 1), 2].astype(int), fmt="%d")
    nib.save(nib.Nifti1Image(np.ones(shape4[:3] + (5,), np.float32), aff), f"{d}/c5.nii.gz")
    nib.save(nib.Nifti1Image(np.ones((4, 4, 4), np.float32), aff), f"{d}/small.nii.gz")
    neg = np.random.default_rng(1).uniform(-1, 1, shape4[:3]).astype(np.float32)
    nib.save(nib.Nifti1Image(neg, aff), f"{d}/neg.nii.gz")
    cases = [
        ("apply_to_count", BLUR + ["--blur-apply-to", f"{d}/short.txt"], f"{d}/short.txt"),
        ("apply_to_value", BLUR + ["--blur-apply-to", f"{d}/two.txt"], "not 0 or 1"),
        ("apply_to_without_blur", ["--blur-apply-to", f"{d}/short.txt"], "needs a blur"),
        ("confidence_volumes", ["--confidence-map", f"{d}/c5.nii.gz"], f"{d}/c5.nii.gz"),
        ("confidence_grid", ["--confidence-map", f"{d}/small.nii.gz"], f"{d}/small.nii.gz"),
        ("confidence_negative", ["--confidence-map", f"{d}/neg.nii.gz"], "< 0"),
        ("rescale_without_map", ["--confidence-map-rescale"], "--confidence-map"),
        ("iso_mask_grid", ["--iso-mask", f"{d}/small.nii.gz"], f"{d}/small.nii.gz"),
    ]
    for name, extra, words in cases:
        out = f"{d}/bad_{name}"
        check_refused(f"commit_bad_{name}", run(p, out, *extra, expect_ok=False), words, out)
    # a negative map is fine once rescaled
    run(p, f"{d}/neg_rescaled", "--confidence-map", f"{d}/neg.nii.gz", "--confidence-map-rescale")
    said = json.load(open(f"{d}/neg_rescaled/provenance.json"))["results"].get("confidence_map")
    check("commit_confidence_negative_rescaled", said == "used, rescaled to [0, 1]", f"{said}")


def main():
    d = workdir("commit_apply_iso_confidence")
    p = cp.phantom(f"{d}/phantom", noise=0.02)
    blur_apply_to(d, p)
    iso_mask(d, p)
    lesion(d, p)
    confidence(d, p)
    bad_inputs(d, p)
    finish()


if __name__ == "__main__":
    main()
