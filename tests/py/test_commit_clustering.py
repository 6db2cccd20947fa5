"""dimoc commit --blur-clust-thr (trk2dictionary's blur_clust_thr: dicelib's clustering, then the
dictionary of the clusters' representatives; docs/commit-facts.md), on the phantom of
tests/py/commitpeer.py with 40% of its streamlines reversed, jittered by 0.3 mm, and 20 copies of
12 points (taken as they are, not resampled):
  - against dicelib 1.3.0's run_clustering (save_clust_idx) at 1, 2 and 4 mm: the same number of
    clusters, every streamline in the same cluster (dimoc numbers them as dicelib, in the order
    they were founded) and the same representative of every cluster, exactly (dimoc repeats
    dicelib's single-precision arithmetic, so nothing is left to a tolerance);
  - against COMMIT (dmri-commit 2.4.2, whose own blur_clust_thr fails: a TypeError) run on
    dicelib's clustered tractogram at 2 mm, its weights scattered back to the input order at
    dicelib's representatives: the objective within 1e-3 (relative) or lower, the compartment
    maps r > 0.99, the weights r > 0.95; one line per input streamline, 0 off the representatives;
    filtered.tck the representatives of weight > 0; the provenance's threshold and counts;
  - --groups, --lambda-weights and --blur-apply-to with one value per input streamline: the same
    weights as the files cut to the representatives; a file of neither count refused in one line,
    and a group label that is not an integer (the line of the file named);
  - a negative threshold is refused in one line."""
import json
import os
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import commitpeer as cp  # noqa: E402
from dmtest import check, check_refused, dimoc, finish, workdir  # noqa: E402

THRS = (1.0, 2.0, 4.0)
PEER_THR = 2.0


def tractogram(d, p):
    rng = np.random.default_rng(5)
    sl = [s[::-1] if rng.random() < 0.4 else s for s in p["streamlines"]]
    sl = [s + rng.normal(0, 0.3, s.shape) for s in sl]
    for k in range(20):  # 12-point streamlines: dicelib takes them as they are
        s = sl[(37 * k) % len(sl)]
        sl.append(s[np.linspace(0, len(s) - 1, 12).round().astype(int)] + 0.2)
    return cp.write_tck(f"{d}/tracks.tck", [np.asarray(s, np.float32) for s in sl]), len(sl)


def run_dimoc(p, tck, out, thr, *extra, expect_ok=True):
    return dimoc("commit", "--tractogram", tck, "--data", p["dwi"], "--mask", p["wm"], "--bvals",
                 p["bvals_file"], "--bvecs", p["bvecs_file"], "--peaks", p["peaks"], "--out", out,
                 "--blur-clust-thr", str(thr), *extra, expect_ok=expect_ok)


def dicelib_clusters(d, tck, thr):
    import dicelib.clustering as dc
    out = f"{d}/dicelib_{thr:g}.tck"
    ref, _ = dc.run_clustering(tck, thr, out, save_clust_idx=True, verbose=0,
                               tmp_folder=f"{d}/dicelib_tmp")
    idx = np.loadtxt(f"{d}/dicelib_{thr:g}_clust_idx.txt", dtype=np.int64)
    return out, np.asarray(ref, np.int64), idx


def against_dicelib(d, p, tck, n):
    runs = {}
    for thr in THRS:
        clustered, ref, idx = runs[thr] = dicelib_clusters(d, tck, thr)
        out = f"{d}/dimoc_{thr:g}"
        run_dimoc(p, tck, out, thr)
        mine = np.loadtxt(f"{out}/streamline_clusters.txt", dtype=np.int64)
        nc = mine[:, 0].max() + 1
        reps = np.full(nc, -1)
        reps[mine[mine[:, 1] == 1, 0]] = np.flatnonzero(mine[:, 1] == 1)
        same_assign = len(mine) == n and np.array_equal(mine[:, 0], idx)
        agree = np.mean(mine[:, 0] == idx) if len(mine) == n else 0.0
        check(f"commit_clustering_{thr:g}mm_as_dicelib",
              nc == len(ref) and same_assign and np.array_equal(reps, ref),
              f"{nc} clusters (dicelib {len(ref)}) of {n} streamlines; the same cluster for "
              f"{agree:.1%} of the streamlines; representatives the same: "
              f"{np.array_equal(reps, ref)}")
    return runs[PEER_THR]


def against_commit(d, p, tck, n, clustered, ref):
    peer = cp.run_commit(f"{d}/peer", p["dwi"], p["bvals_file"], p["bvecs_file"], clustered,
                         p["wm"], p["peaks"])
    wp = np.zeros(n)
    wp[ref] = peer["weights"]  # COMMIT's one line per cluster, back to the input's order
    out = f"{d}/dimoc_{PEER_THR:g}"
    w = np.loadtxt(f"{out}/streamline_weights.txt")
    res = json.load(open(f"{out}/provenance.json"))["results"]
    m = peer["fit_mask"]
    # the ISO map: both balls' coefficients from COMMIT's solution, summed per voxel, as
    # test_commit_peer.py (peer_iso_sum) and test_commit_blur.py compare it
    z = peer["peer"]
    nvox, niso = z["iso_vox"].size, z["iso_norm"].size
    v = np.zeros(nvox)
    v[z["iso_vox"]] = (z["x"][-niso * nvox:].reshape(niso, nvox) / z["iso_norm"][:, None]).sum(0)
    ref_iso = np.zeros(m.shape)
    ref_iso[z["mask_ix"], z["mask_iy"], z["mask_iz"]] = v
    refs = {"ic": peer["ic"], "ec": peer["ec"], "iso": ref_iso}
    for k, name in (("ic", "compartment_IC"), ("ec", "compartment_EC"),
                    ("iso", "compartment_ISO")):
        me = np.asarray(nib.load(f"{out}/{name}.nii.gz").dataobj, float)
        r = np.corrcoef(refs[k][m], me[m])[0, 1]
        check(f"commit_clustering_map_{k}_vs_commit", r > 0.99,
              f"r = {r:.6f}; means {refs[k][m].mean():.4f} (COMMIT) {me[m].mean():.4f}")
    o_peer, o_me = peer["objective"], res["objective"]
    check("commit_clustering_objective_no_worse", o_me <= o_peer * (1 + 1e-3),
          f"0.5||Ax-y||^2 = {o_me:.5f}, COMMIT on dicelib's clusters {o_peer:.5f}")
    rw = np.corrcoef(wp, w)[0, 1] if len(w) == n else 0.0
    off = np.setdiff1d(np.arange(n), ref)
    check("commit_clustering_weights_vs_commit",
          len(w) == n and rw > 0.95 and np.all(w[off] == 0),
          f"{len(w)} lines for {n} input streamlines, {np.count_nonzero(w)} nonzero, all at "
          f"representatives: {np.all(w[off] == 0) if len(w) == n else False}; r = {rw:.4f} with "
          f"COMMIT's scattered to the input order")
    filt = nib.streamlines.load(f"{out}/filtered.tck").streamlines
    src = nib.streamlines.load(tck).streamlines
    pos = np.flatnonzero(w > 0)
    same = len(filt) == pos.size and all(np.array_equal(filt[i], src[j])
                                         for i, j in enumerate(pos))
    check("commit_clustering_filtered_and_provenance",
          same and res.get("clusters") == len(ref) and res.get("streamlines_input") == n and
          res.get("blur_clust_thr") == PEER_THR and res.get("streamlines") == len(ref),
          f"filtered.tck: {len(filt)} streamlines, the representatives of weight > 0 in input "
          f"order: {same}; provenance threshold {res.get('blur_clust_thr')}, clusters "
          f"{res.get('clusters')}, input {res.get('streamlines_input')}")


def per_streamline_files(d, p, tck, n):
    """--groups, --lambda-weights and --blur-apply-to with one value per input streamline give
    the fit of the same files cut to the representatives (COMMIT's form), weight for weight; a
    file of neither count is refused in one line."""
    reps = np.flatnonzero(np.loadtxt(f"{d}/dimoc_{PEER_THR:g}/streamline_clusters.txt",
                                     dtype=np.int64)[:, 1] == 1)
    i = np.arange(n)
    cases = (("groups", i % 3, ["--lambda-group", "0.05"]),
             ("lambda-weights", 0.5 + 0.5 * (i % 4), ["--lambda", "0.05"]),
             ("blur-apply-to", (i % 2).astype(float), ["--blur-core-extent", "0.5"]))
    for opt, values, extra in cases:
        runs = {}
        for form, v in (("input", values), ("representatives", values[reps])):
            f = f"{d}/{opt}_{form}.txt"
            np.savetxt(f, v, fmt="%.9g")
            out = f"{d}/per_{opt}_{form}"
            run_dimoc(p, tck, out, PEER_THR, f"--{opt}", f, *extra)
            runs[form] = (np.loadtxt(f"{out}/streamline_weights.txt"),
                          json.load(open(f"{out}/provenance.json"))["results"]["objective"])
        (wa, oa), (wb, ob) = runs["input"], runs["representatives"]
        check(f"commit_clustering_{opt}_per_input_streamline",
              wa.shape == wb.shape == (n,) and np.array_equal(wa, wb) and oa == ob,
              f"one value per input streamline ({n}) against one per representative "
              f"({reps.size}): weights the same {np.array_equal(wa, wb)}, objectives {oa:.6f}, "
              f"{ob:.6f}")
    bad = f"{d}/groups_short.txt"
    np.savetxt(bad, (i % 3)[:-1], fmt="%d")
    out = f"{d}/per_bad"
    rc, _, err = run_dimoc(p, tck, out, PEER_THR, "--groups", bad, "--lambda-group", "0.05",
                           expect_ok=False)
    errors = [x for x in err.splitlines() if "error" in x]  # after the clustering's summary line
    check("commit_clustering_per_streamline_count",
          rc != 0 and len(errors) == 1 and bad in errors[0] and
          f"{n - 1} values, but {tck} holds {n} streamlines, {reps.size} of them" in errors[0] and
          not os.path.exists(out), f"rc {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}")
    # a label that is not an integer, on a representative's line of a per-input file: the error
    # names the file, that line and the value
    labels = (i % 3).astype(float)
    labels[reps[1]] = 1.5
    bad = f"{d}/groups_fraction.txt"
    np.savetxt(bad, labels, fmt="%.9g")
    out = f"{d}/per_bad_label"
    rc, _, err = run_dimoc(p, tck, out, PEER_THR, "--groups", bad, "--lambda-group", "0.05",
                           expect_ok=False)
    errors = [x for x in err.splitlines() if "error" in x]
    check("commit_clustering_per_streamline_bad_label",
          rc != 0 and len(errors) == 1 and
          f"{bad}: line {reps[1] + 1}: '1.5' is not a group label (an integer >= 0)" in errors[0] and
          not os.path.exists(out), f"rc {rc}: {errors[0] if errors else err.strip()[-200:]}")


def main():
    d = workdir("commit_clustering")
    p = cp.phantom(f"{d}/phantom", noise=0.02)
    tck, n = tractogram(d, p)
    clustered, ref, _ = against_dicelib(d, p, tck, n)
    against_commit(d, p, tck, n, clustered, ref)
    per_streamline_files(d, p, tck, n)
    out = f"{d}/bad_negative"
    check_refused("commit_clustering_bad_negative_threshold",
                  run_dimoc(p, tck, out, -1, expect_ok=False), "--blur-clust-thr", out)
    finish()


if __name__ == "__main__":
    main()
