"""dimoc commit with several zeppelins per peak (--d-perp as a list, COMMIT's d_perps) against
COMMIT 2.4.2 (tests/py/commitpeer.py) on the phantoms of test_commit_peer.py (stick-zeppelin-ball
data) and test_commit_cylinder.py (cylinder data, Delta 30 ms, delta 10 ms), 2% noise, both tools
with the same peaks and diffusivities and COMMIT's tolerances:
  - stick-zeppelin-ball with COMMIT's model default d_perps (1.19, 0.85, 0.51, 0.17)e-3;
  - cylinder-zeppelin-ball without --d-perp (dimoc's default for it: COMMIT's four, two of them
    above its d_par 0.6e-3) against COMMIT given the same four, 20 radii (COMMIT's operator takes
    at most 20 IC responses, docs/commit-facts.md), one ball of 2.0e-3;
  - cylinder-zeppelin-ball with two d_perps (0.51e-3, 0.17e-3).
For each: COMMIT's own outputs rebuilt from its x (commitpeer.rebuild: its EC columns d_perp by
d_perp, compartment_EC the sum over them of x / wmh_norm); the same voxels of the fit and as many
EC columns (entries x d_perps); compartment maps r > 0.99; mean NRMSE within 2% and the final
objective within 1e-3 (relative) of COMMIT's, or better; weights r > 0.95; the provenance's
d_perps list.  Bad --d-perp values are refused in one line each."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import commitpeer as cp  # noqa: E402
import test_commit_cylinder as cyl  # noqa: E402
from dmtest import check, dimoc, finish, workdir  # noqa: E402
from test_commit_peer import peer_iso_sum, read, run, same_fit  # noqa: E402

COMMIT_PERPS = (1.19e-3, 0.85e-3, 0.51e-3, 0.17e-3)  # COMMIT's model default (both models)


def perps_text(perps):
    return ",".join(f"{v:.9g}" for v in perps)


def compare(name, peer, me, perps, ref):
    """COMMIT's facts, the fit voxels and EC columns, the fit, the provenance's list."""
    P = peer["peer"]
    rb = cp.rebuild(peer)
    facts = max(rb[k] for k in ("objective", "weights", "ic", "ec", "iso_first_ball"))
    n_entries = len(P["ec_vox"])
    check(f"{name}_peer_facts", P["wmh"].shape[0] == len(perps) and facts < 1e-5,
          f"COMMIT: {P['wmh'].shape[0]} EC responses x {n_entries} peaks, its maps rebuilt from x to {facts:.1e}")
    m = peer["fit_mask"]
    pv = me["prov"]
    check(f"{name}_columns", pv["voxels"] == m.sum() and np.array_equal(me["ic"] != 0, m) and
          pv["ec_responses"] == len(perps) and pv["ec_compartments"] == len(perps) * n_entries and
          pv["d_perps"] == perps_text(perps),
          f"{pv['voxels']} voxels (COMMIT {m.sum()}); {pv['ec_compartments']} EC columns = "
          f"{pv['ec_responses']} x {n_entries} COMMIT peaks; d_perps {pv['d_perps']}")
    same_fit(name, peer, me, ref)


def stick(d):
    p = cp.phantom(f"{d}/phantom", noise=0.02)
    peer = cp.run_on_phantom(f"{d}/peer", p, d_perps=COMMIT_PERPS)
    out = f"{d}/dimoc"
    run(p, out, "--d-perp", perps_text(COMMIT_PERPS))
    me = read(out)
    compare("commit_zeppelins_stick", peer, me, COMMIT_PERPS,
            {"ic": peer["ic"], "ec": peer["ec"], "iso": peer_iso_sum(peer)})
    return p


def cylinders(d):
    p = cp.phantom(f"{d}/phantom", noise=0.02, fibre_signal=cyl.fibre, d_iso_true=cyl.D_ISO)
    radii = ",".join(f"{r * 1e6:.17g}" for r in cyl.RADII)
    for label, perps, given in (("default", COMMIT_PERPS, False), ("two", (0.51e-3, 0.17e-3), True)):
        peer = cp.run_on_phantom(f"{d}/peer_{label}", p, model="CylinderZeppelinBall", d_par=cyl.D_PAR,
                                 d_perps=perps, d_isos=(cyl.D_ISO,), model_extra={"Rs": list(cyl.RADII)},
                                 pulses=(cyl.DELTA, cyl.SMALL))
        out = f"{d}/dimoc_{label}"
        extra = ["--d-perp", perps_text(perps)] if given else []
        dimoc("commit", "--tractogram", p["tck"], "--data", p["dwi"], "--mask", p["wm"], "--bvals",
              p["bvals_file"], "--bvecs", p["bvecs_file"], "--peaks", p["peaks"], "--out", out, "--model",
              "cylinder-zeppelin-ball", "--scheme", f"{d}/peer_{label}/dwi.scheme", "--radii", radii, *extra)
        me = read(out)
        compare(f"commit_zeppelins_cylinder_{label}", peer, me, perps, peer)


def bad_values(d, p):
    for i, (value, must) in enumerate((("-1e-3", "diffusivities >= 0"), ("0.5e-3,x", "diffusivities >= 0"),
                                       ("0.5e-3;1e-3", "not a list"), ("", "needs a value"),
                                       (",".join(["1e-4"] * 21), "up to 20"), ("nan", "diffusivities >= 0"))):
        out = f"{d}/bad{i}"
        rc, _, err = run(p, out, "--d-perp", value, expect_ok=False)
        lines = [line for line in err.strip().splitlines() if line]
        check(f"commit_zeppelins_bad_{i}", rc != 0 and len(lines) == 1 and "--d-perp" in lines[0] and
              must in lines[0] and not os.path.exists(out), f"--d-perp {value[:30]!r}: exit {rc}: {err.strip()!r}")


def main():
    d = workdir("commit_zeppelins")
    p = stick(f"{d}/stick")
    bad_values(d, p)
    cylinders(f"{d}/cylinder")
    finish()


if __name__ == "__main__":
    main()
