"""The bedpostx pipeline on the GPU with its default precision (auto): the LM stage in double,
the MCMC stages in float (each stage's provenance.json), against the truth of a crossing
phantom (ball_2_sticks_gamma, SNR 30, 6 b=0 + 64 b=1000 + 64 b=2000: single-fibre voxels, 90
and 60 degree crossings) and against double chains on the same GPU.  A float chain and a double
chain are two chains: they part after a few hundred proposals, so the yardstick for their
difference is the difference between two double chains of different seeds (the Monte Carlo
spread of a posterior mean); the float chains must stay within 1.5 times it, for the fractions,
d, d_std and the fibres' directions."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
from crossings import REGIONS, crossing_phantom  # noqa: E402
from dmtest import angle_deg, check, dimoc, finish, load, workdir  # noqa: E402

N = 100  # voxels per region
d = workdir("bedpostx_gpu")
inputs, dirs = crossing_phantom(d, N, seed=2026, noise_seed=5)
inputs += ["--device", "gpu", "--quiet"]


def bedpostx(tag, *extra):
    out = os.path.join(d, tag)
    rc, _, err = dimoc("pipeline", "bedpostx", *inputs, "--out", out, *extra, expect_ok=False)
    check(f"runs-{tag}", rc == 0, err.strip()[-300:])
    if rc != 0:
        finish()
    return out


runs = {"auto": bedpostx("auto"), "double": bedpostx("double", "--precision", "double"),
        "double-seed7": bedpostx("double-seed7", "--precision", "double", "--seed", "7")}


def precisions(out):
    return {m: json.load(open(os.path.join(out, "dimoc", m, "provenance.json")))["options"]["precision"]
            for m in ("ball_1_stick_gamma", "ball_2_sticks_gamma", "ball_3_sticks_gamma")}


got = precisions(runs["auto"])
check("auto-float-for-mcmc-only", got == {"ball_1_stick_gamma": "double", "ball_2_sticks_gamma": "float",
                                          "ball_3_sticks_gamma": "float"}, str(got))
got = precisions(runs["double"])
check("double-when-asked", set(got.values()) == {"double"}, str(got))

maps = {tag: {k: load(os.path.join(out, k + ".nii.gz")) for k in
              ("mean_f1samples", "mean_f2samples", "mean_f3samples", "mean_dsamples", "mean_d_stdsamples",
               "dyads1", "dyads2")} for tag, out in runs.items()}

# The float run against the truth, as tests/py/test_bedpostx.py checks the double one.
m = maps["auto"]
found = [np.mean(m["mean_f2samples"][r] > 0.05) for r in range(3)]
check("float-ard", found[0] <= 0.10 and min(found[1:]) >= 0.90,
      "mean_f2samples > 0.05 in " + ", ".join(f"{100 * x:.0f}%" for x in found) + " of "
      + "/".join(REGIONS) + " voxels (single at most 10%, crossings at least 90%)")


def fibre_errors(m, r):
    """Per voxel, the angles of dyads1 and dyads2 to the true fibres, in the better pairing."""
    a, b = m["dyads1"][r], m["dyads2"][r]
    same = np.maximum(angle_deg(a, dirs[0, r]), angle_deg(b, dirs[1, r]))
    swap = np.maximum(angle_deg(a, dirs[1, r]), angle_deg(b, dirs[0, r]))
    return np.minimum(same, swap)


errs = [np.median(angle_deg(m["dyads1"][0], dirs[0, 0]))] + [np.median(fibre_errors(m, r)) for r in (1, 2)]
check("float-angles", max(errs) < 10, "median angular error " + ", ".join(f"{e:.1f}" for e in errs)
      + " degrees (single, cross90, cross60; at most 10)")


# Float against double: per quantity, the median over a region's voxels of the absolute
# difference between the float and the double run, at most twice the same median between two
# double runs of different seeds (medians: a few voxels whose second fibre moves to the third
# stick in one chain and not the other would rule a root mean square).
def dyad_gap(m1, m2, r):
    """Per voxel, the larger angle between the two runs' fibres, in the better pairing."""
    if r == 0:
        return angle_deg(m1["dyads1"][0], m2["dyads1"][0])
    a1, b1, a2, b2 = m1["dyads1"][r], m1["dyads2"][r], m2["dyads1"][r], m2["dyads2"][r]
    return np.minimum(np.maximum(angle_deg(a1, a2), angle_deg(b1, b2)),
                      np.maximum(angle_deg(a1, b2), angle_deg(b1, a2)))


def quantities(m, r):
    """A region's posterior means that do not depend on the sticks' labels."""
    f = m["mean_f1samples"][r] if r == 0 else \
        m["mean_f1samples"][r] + m["mean_f2samples"][r] + m["mean_f3samples"][r]
    return {"f1" if r == 0 else "f1+f2+f3": f, "d": m["mean_dsamples"][r], "d_std": m["mean_d_stdsamples"][r]}


f, dbl, seed = maps["auto"], maps["double"], maps["double-seed7"]
rows = []
for r, region in enumerate(REGIONS):
    qf, qd, qs = quantities(f, r), quantities(dbl, r), quantities(seed, r)
    for k in qf:
        rows.append((f"{region} {k}", float(np.median(np.abs(qf[k] - qd[k]))), float(np.median(np.abs(qs[k] - qd[k])))))
    rows.append((f"{region} dyads (degrees)", float(np.median(dyad_gap(f, dbl, r))),
                 float(np.median(dyad_gap(seed, dbl, r)))))
bad = [f"{name}: float-double {g:.3g}, double seeds {ref:.3g}" for name, g, ref in rows if not g <= 2 * ref]
check("float-within-monte-carlo-spread", not bad and len(rows) == 12,
      "; ".join(bad[:4]) or f"{len(rows)} quantities, the largest ratio "
      f"{max(g / ref for _, g, ref in rows):.2f} (at most 2)")
status = {tag: load(os.path.join(out, "dimoc", "ball_3_sticks_gamma", "status.nii.gz")) for tag, out in runs.items()}
check("every-voxel-fitted", all((s == 1).all() for s in status.values()),
      ", ".join(f"{tag}: {int((s != 1).sum())} not fitted" for tag, s in status.items()))
finish()
