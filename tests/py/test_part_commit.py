"""dimoc commit's dictionary stage in parts (docs/commit.md, "The dictionary in parts"), on the
phantom of tests/py/commitpeer.py (no COMMIT needed):
  - `--stage dictionary` over the whole tractogram, and in N = 1, 3, 7 parts (`--part K/N`,
    other thread counts) joined by `dimoc merge`: the same dictionary.bin and header, byte for
    byte; the parts' record files joined by hand are the whole file too;
  - `dimoc commit --dictionary DIR` (a merged folder, and a whole-run one) writes the outputs of
    a plain `dimoc commit` byte for byte (weights, maps, filtered.tck) and says in its
    provenance where the dictionary came from; likewise with --model volume-fractions;
  - a dictionary made from another tractogram (fewer streamlines, or moved points), with another
    option, mask or direction count is refused with one line, and nothing is written;
  - a part folder given to --dictionary, a missing part given to merge: refused."""
import filecmp
import json
import os
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import commitpeer as cp  # noqa: E402
from dmtest import check, dimoc, finish, workdir  # noqa: E402

OUTPUTS = ["streamline_weights.txt", "compartment_IC.nii.gz", "compartment_EC.nii.gz",
           "compartment_ISO.nii.gz", "fit_RMSE.nii.gz", "fit_NRMSE.nii.gz", "filtered.tck"]
DICT = ["dictionary.bin", "dictionary_header.bin"]


def base(p, tck=None, mask=None):
    return ["--tractogram", tck or p["tck"], "--data", p["dwi"], "--mask", mask or p["wm"]]


def full(p, out, *extra, expect_ok=True):
    return dimoc("commit", *base(p), "--bvals", p["bvals_file"], "--bvecs", p["bvecs_file"],
                 "--peaks", p["peaks"], "--out", out, *extra, expect_ok=expect_ok)


def stage(p, out, *extra, tck=None, mask=None, expect_ok=True):
    return dimoc("commit", *base(p, tck, mask), "--stage", "dictionary", "--out", out, *extra,
                 expect_ok=expect_ok)


def same_files(a, b, names):
    bad = [n for n in names if not filecmp.cmp(f"{a}/{n}", f"{b}/{n}", shallow=False)]
    return not bad, "differ: " + ", ".join(bad) if bad else "identical"


def one_line_refusal(rc, err, out, words):
    lines = [x for x in err.strip().splitlines() if x]
    ok = rc != 0 and len(lines) == 1 and all(w in err for w in words) and not os.path.exists(out)
    return ok, f"rc {rc}: {err.strip()}"


def main():
    d = workdir("part_commit")
    p = cp.phantom(f"{d}/in", n_true=60, n_false=15, noise=0.02)
    nstr = len(p["streamlines"])
    whole = f"{d}/whole"
    _, so, _ = stage(p, whole, "--threads", "4")
    check("part_commit_whole_stage", all(os.path.exists(f"{whole}/{n}") for n in DICT) and
          not os.path.exists(f"{whole}/part.json"), so.strip())

    merged = {}
    for n in (1, 3, 7):
        parts = []
        for k in range(1, n + 1):
            out = f"{d}/p{n}_{k}"
            stage(p, out, "--part", f"{k}/{n}", "--threads", "2")
            parts.append(out)
        m = f"{d}/merged{n}"
        dimoc("merge", *parts, "--out", m, "--quiet")
        merged[n] = m
        ok, why = same_files(whole, m, DICT)
        check(f"part_commit_merged_{n}_parts_identical", ok, why)
        kinds = json.load(open(f"{parts[0]}/part.json"))["files"]
        joined = b"".join(open(f"{q}/dictionary.bin", "rb").read() for q in parts)
        check(f"part_commit_{n}_parts_concatenate",
              joined == open(f"{whole}/dictionary.bin", "rb").read() and
              kinds == {"dictionary.bin": "concat", "dictionary_header.bin": "same"}, str(kinds))

    # the rest of the run from a dictionary folder: the plain run's outputs, byte for byte
    plain = f"{d}/plain"
    full(p, plain)
    for name, src in (("merged", merged[7]), ("whole", whole)):
        out = f"{d}/from_{name}"
        full(p, out, "--dictionary", src)
        ok, why = same_files(plain, out, OUTPUTS)
        prov = json.load(open(f"{out}/provenance.json"))
        said = src in prov["results"].get("dictionary", "") and \
            prov["inputs"].get("dictionary") == src
        check(f"part_commit_outputs_from_{name}_dictionary", ok and said,
              f"{why}; provenance: {prov['results'].get('dictionary')}")
    check("part_commit_plain_provenance_says_built",
          json.load(open(f"{plain}/provenance.json"))["results"]["dictionary"] == "built")

    # streamlines left out (--min-length: records of no segment), 3 parts
    lim = ["--min-length", "30"]
    stage(p, f"{d}/lim_whole", *lim)
    parts = []
    for k in (1, 2, 3):
        stage(p, f"{d}/lim{k}", *lim, "--part", f"{k}/3")
        parts.append(f"{d}/lim{k}")
    dimoc("merge", *parts, "--out", f"{d}/lim_merged", "--quiet")
    full(p, f"{d}/lim_plain", *lim)
    full(p, f"{d}/lim_from", *lim, "--dictionary", f"{d}/lim_merged")
    ok1, why1 = same_files(f"{d}/lim_whole", f"{d}/lim_merged", DICT)
    ok2, why2 = same_files(f"{d}/lim_plain", f"{d}/lim_from", OUTPUTS)
    kept = json.load(open(f"{d}/lim_plain/provenance.json"))["results"]["streamlines_kept"]
    check("part_commit_streamlines_left_out", ok1 and ok2 and 0 < kept < nstr,
          f"dictionary {why1}, outputs {why2}; {kept} of {nstr} kept")

    # volume-fractions (one lookup direction): the same, through parts
    vf = ["--model", "volume-fractions"]
    parts = []
    for k in (1, 2):
        dimoc("commit", "--tractogram", p["tck"], "--data", p["ic_true"], "--mask", p["wm"],
              *vf, "--stage", "dictionary", "--part", f"{k}/2", "--out", f"{d}/vf{k}")
        parts.append(f"{d}/vf{k}")
    dimoc("merge", *parts, "--out", f"{d}/vf_merged", "--quiet")
    args = ["commit", "--tractogram", p["tck"], "--data", p["ic_true"], "--mask", p["wm"], *vf]
    dimoc(*args, "--out", f"{d}/vf_plain")
    dimoc(*args, "--dictionary", f"{d}/vf_merged", "--out", f"{d}/vf_from")
    ok, why = same_files(f"{d}/vf_plain", f"{d}/vf_from", OUTPUTS)
    check("part_commit_volume_fractions_from_parts", ok, why)

    # refusals: each one line, nothing written
    fewer = cp.write_tck(f"{d}/in/fewer.tck", p["streamlines"][:-1])
    moved = [s.copy() for s in p["streamlines"]]
    moved[nstr // 2][3] += 0.01
    moved = cp.write_tck(f"{d}/in/moved.tck", moved)
    stage(p, f"{d}/d_fewer", tck=fewer)
    stage(p, f"{d}/d_moved", tck=moved)
    stage(p, f"{d}/d_seg", "--min-seg-len", "0.01")
    stage(p, f"{d}/d_shift", "--fiber-shift", "0.1")
    stage(p, f"{d}/d_ndirs", "--ndirs", "300")
    mask2 = np.asarray(nib.load(p["wm"]).dataobj).copy()
    mask2[5, 5, 5] = 0
    m2 = f"{d}/in/wm2.nii.gz"
    nib.save(nib.Nifti1Image(mask2, p["affine"]), m2)
    stage(p, f"{d}/d_mask", mask=m2)
    cases = [("fewer_streamlines", "d_fewer", ["streamlines"]),
             ("moved_points", "d_moved", ["other streamlines"]),
             ("min_seg_len", "d_seg", ["--min-seg-len"]),
             ("fiber_shift", "d_shift", ["--fiber-shift"]),
             ("ndirs", "d_ndirs", ["--ndirs"]),
             ("mask", "d_mask", ["--mask"]),
             ("part_not_merged", "p3_2", ["merge"])]
    for name, src, words in cases:
        out = f"{d}/refused_{name}"
        rc, _, err = full(p, out, "--dictionary", f"{d}/{src}", expect_ok=False)
        ok, why = one_line_refusal(rc, err, out, ["--dictionary", *words])
        check(f"part_commit_refuses_{name}", ok, why)
    cut = f"{d}/d_truncated"
    os.makedirs(cut)
    for n in DICT:
        data = open(f"{whole}/{n}", "rb").read()
        open(f"{cut}/{n}", "wb").write(data[:-10] if n == "dictionary.bin" else data)
    out = f"{d}/refused_truncated"
    rc, _, err = full(p, out, "--dictionary", cut, expect_ok=False)
    ok, why = one_line_refusal(rc, err, out, ["--dictionary", "dictionary.bin"])
    check("part_commit_refuses_truncated", ok, why)
    out = f"{d}/merge_missing"
    rc, _, err = dimoc("merge", f"{d}/p3_1", f"{d}/p3_3", "--out", out, expect_ok=False)
    ok, why = one_line_refusal(rc, err, out, ["part 2 of 3 is missing"])
    check("part_commit_merge_refuses_missing_part", ok, why)
    rc, _, err = dimoc("commit", *base(p), "--part", "1/2", "--out", f"{d}/x", expect_ok=False)
    check("part_commit_part_needs_stage", rc != 0 and "--stage dictionary" in err, err.strip())


main()
finish()
