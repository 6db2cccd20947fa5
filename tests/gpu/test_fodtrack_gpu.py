"""dimoc track --fod on the GPU against the CPU (make test-gpu), on fodsim's phantom, for iFOD2,
iFOD1 and SD_STREAM: the same kernel source and the same Philox stream per streamline, so
  --precision double: the same streamlines -- the same count and total_count, every point equal
    (the .tck holds float32: within 1e-5 mm, a few float32 steps at 50 mm) -- and the same
    --tdi image;
  --precision float: rounding may send a streamline elsewhere, so the tractograms agree in
    distribution: the same count, total_count within 5 binomial standard deviations, TDIs
    (dimoc's --tdi on the FOD grid; without it, the points' own densities) correlated with
    r > 0.999 for 50000 streamlines.
The TDI made during tracking equals `dimoc tdi` of the written tracks on either device.
--part K/N on the GPU (double): iFOD2 and SD_STREAM runs split into 3 and 7 parts and merged by
`dimoc merge` give the single GPU run's files byte for byte (tracks.tck, TDI, connectome, mean
lengths, weights: tests/py/test_part_track.py's check, there on the CPU).  The
provenance must say the run was on the GPU (no quiet fallback to the CPU).  Needs no MRtrix
(the device has none): the phantom is fodsim's, the TDIs dimoc's own."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
import fodsim as fs  # noqa: E402
import test_part_track as tp  # noqa: E402
import nibabel as nib  # noqa: E402
from dmtest import check, dimoc, finish, load, workdir  # noqa: E402

ROOT = workdir("fodtrack_gpu")
ALGS = ("ifod2", "ifod1", "sd_stream")


def run(out, p, alg, device, precision, n, tdi, extra=()):
    args = ["track", "--fod", p["fod"], "--seed", p["wm"], "--out", out, "--algorithm", alg, "--select", n,
            "--rseed", 5, "--device", device, "--precision", precision, *extra]
    if tdi:
        args += ["--tdi", "tdi.nii.gz"]
    rc, _, err = dimoc(*args, expect_ok=False)
    if rc:
        return None, err.strip()
    prov = json.load(open(f"{out}/provenance.json"))
    if tdi and os.path.exists(f"{out}/tdi.nii.gz"):
        # the map made during tracking (on the GPU: from the points a batch left on the device) is
        # the one `dimoc tdi` makes of the written tracks
        rc, _, err = dimoc("tdi", f"{out}/tracks.tck", "--template", p["fod"], "--out", f"{out}/retdi.nii.gz",
                           expect_ok=False)
        same = rc == 0 and np.array_equal(load(f"{out}/tdi.nii.gz"), load(f"{out}/retdi.nii.gz"))
        check(f"{alg}-{precision}-{device}-tdi-equals-dimoc-tdi", same, err.strip() if rc else f"identical: {same}")
    return {"sl": fs.streamlines(f"{out}/tracks.tck"), "head": fs.tck_header(f"{out}/tracks.tck"),
            "tdi": load(f"{out}/tdi.nii.gz") if tdi and os.path.exists(f"{out}/tdi.nii.gz") else None,
            "device": str(prov.get("results", {}).get("device", "?"))}, ""


def total(r):
    return int(r["head"].get("total_count", -1))


def five_tissues(p):
    """A five-tissue image on the phantom's grid: white matter where the bundles are, cortical
    grey matter in the rest of the brain, CSF outside."""
    wm = load(p["wm"]) > 0
    brain = load(p["brain"]) > 0
    t = np.zeros(wm.shape + (5,), np.float32)
    t[..., 3] = 1
    t[brain & ~wm] = [1, 0, 0, 0, 0]
    t[wm] = [0, 0, 1, 0, 0]
    path = f"{ROOT}/5tt.nii.gz"
    nib.save(nib.Nifti1Image(t, nib.load(p["wm"]).affine), path)
    return path


def act_parity(p, alg, five_tt):
    """ACT (with backtracking and cropping at the interface): the same streamlines in double."""
    extra = ["--act", five_tt, "--crop-at-gmwmi"] + (["--backtrack"] if alg != "sd_stream" else [])
    res = {}
    for dev in ("cpu", "gpu"):
        res[dev], err = run(f"{ROOT}/{alg}_act_{dev}", p, alg, dev, "double", 2000, False, extra)
        if res[dev] is None:
            check(f"{alg}-act-{dev}-runs", False, err)
            return
    c, g = res["cpu"], res["gpu"]
    same = len(c["sl"]) == len(g["sl"]) and all(np.array_equal(a, b) for a, b in zip(c["sl"], g["sl"]))
    check(f"{alg}-act-double-same-streamlines", same and total(c) == total(g) and g["device"] not in ("cpu", "?"),
          f"{len(c['sl'])} / {len(g['sl'])} streamlines, identical {same}, total_count {total(c)} / {total(g)}")


def double_parity(p, alg, tdi):
    res = {}
    for dev in ("cpu", "gpu"):
        res[dev], err = run(f"{ROOT}/{alg}_double_{dev}", p, alg, dev, "double", 3000, tdi)
        if res[dev] is None:
            check(f"{alg}-double-{dev}-runs", False, err)
            return
    c, g = res["cpu"], res["gpu"]
    check(f"{alg}-double-on-gpu", g["device"] not in ("cpu", "?") and c["device"] == "cpu",
          f"provenance devices: {c['device']} / {g['device']}")
    same_shape = len(c["sl"]) == len(g["sl"]) and all(a.shape == b.shape for a, b in zip(c["sl"], g["sl"]))
    diff = max(np.abs(a - b).max() for a, b in zip(c["sl"], g["sl"])) if same_shape else np.inf
    exact = np.mean([np.array_equal(a, b) for a, b in zip(c["sl"], g["sl"])]) if same_shape else 0.0
    check(f"{alg}-double-same-streamlines", same_shape and diff <= 1e-5 and total(c) == total(g),
          f"{len(c['sl'])} / {len(g['sl'])} streamlines, points per streamline "
          f"{'the same' if same_shape else 'DIFFERENT'}, largest point difference {diff:.2e} mm, "
          f"{100 * exact:.1f}% identical; total_count {total(c)} / {total(g)}")
    if not same_shape:
        first = next((i for i, (a, b) in enumerate(zip(c["sl"], g["sl"])) if a.shape != b.shape), None)
        print(f"     first streamline that differs: {first}")
    if tdi:
        tc, tg = c["tdi"], g["tdi"]
        check(f"{alg}-double-same-tdi", tc is not None and tg is not None and np.array_equal(tc, tg) and tc.sum() > 0,
              "tdi.nii.gz missing" if tc is None or tg is None else
              f"{int(np.sum(tc != tg))} voxels differ of {tc.size}; sums {tc.sum():.0f} / {tg.sum():.0f}")


def float_agreement(p, alg, tdi):
    n = 50000
    res = {}
    for dev in ("cpu", "gpu"):
        res[dev], err = run(f"{ROOT}/{alg}_float_{dev}", p, alg, dev, "float", n, tdi)
        if res[dev] is None:
            check(f"{alg}-float-{dev}-runs", False, err)
            return
    c, g = res["cpu"], res["gpu"]
    check(f"{alg}-float-on-gpu", g["device"] not in ("cpu", "?"), f"provenance device {g['device']}")
    q = n / total(c)
    sd = np.sqrt(n * (1 - q)) / q
    check(f"{alg}-float-counts", len(c["sl"]) == len(g["sl"]) == n == int(g["head"]["count"]) and
          abs(total(c) - total(g)) <= 5 * sd * np.sqrt(2) + 2,
          f"streamlines {len(c['sl'])} / {len(g['sl'])} (want {n}); total_count {total(c)} / {total(g)} "
          f"(sd {sd:.0f})")
    same = np.mean([a.shape == b.shape and np.array_equal(a, b) for a, b in zip(c["sl"], g["sl"])])
    if tdi and (c["tdi"] is None or g["tdi"] is None):
        check(f"{alg}-float-tdi", False, "tdi.nii.gz missing")
        return
    if tdi:
        tc, tg, what = c["tdi"], g["tdi"], "dimoc's --tdi"
    else:  # no --tdi yet: the streamlines' own point densities
        tc, tg = (fs.point_tdi(r["sl"], p["affine"], fs.SHAPE) for r in (c, g))
        what = "point densities on the FOD grid (no --tdi)"
    r = fs.corr(tc, tg)
    check(f"{alg}-float-tdi", r > 0.999, f"{what}: r = {r:.5f} (want > 0.999); {100 * same:.1f}% of streamlines "
                                         f"identical")


def main():
    p = fs.phantom(ROOT)
    rc, out, _ = dimoc("help", "track", expect_ok=False)
    if rc != 0 or "--fod" not in out:
        check("fodtrack-command-exists", False, "`dimoc help track` has no --fod")
        finish()
    tdi = "--tdi" in out
    check("fodtrack-tdi-option-exists", tdi, "" if tdi else "`dimoc help track` has no --tdi: TDIs not compared")
    five_tt = five_tissues(p)
    for alg in ALGS:
        double_parity(p, alg, tdi)
        float_agreement(p, alg, tdi)
        act_parity(p, alg, five_tt)
    # --part on the GPU: parts merged = the single run, byte for byte
    tp.fod_parts(f"{ROOT}/parts", device="gpu", precision="double", parts=(3, 7), seeds=(20000, 20000))
    finish()


if __name__ == "__main__":
    main()
