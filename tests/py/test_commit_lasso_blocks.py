"""dimoc commit's lasso on the extra-axonal and isotropic blocks (--lambda-ec, --lambda-iso) against
COMMIT's set_regularisation(regularisers=(IC, 'lasso', 'lasso'), lambdas=(.., F_EC, F_ISO))
(dmri-commit 2.4.2, tests/py/commitpeer.py), on the phantom of test_commit_peer.py (three true
bundles, false streamlines, 2% noise), each tool with COMMIT's defaults (tol_fun 1e-3, 100
iterations).  For each case (the EC lasso, the ISO lasso, the three lassos together, and the ISO
lasso with a 4D --confidence-map, uniform in [0.2, 1]: COMMIT's lambda_max is of the data
unweighted, the objective the weighted one):
  - compartment maps r > 0.99, mean NRMSE within 2% and the objective (with the penalties)
    within 1e-3 (relative) of COMMIT's or better, weights r > 0.95 (test_commit_peer.same_fit);
  - each block's lambda is COMMIT's (its fraction of max |A^T y| over the block) within 2%
    (dimoc's responses are exact, COMMIT's through degree-12 SH: A^T y differs a little);
  - the lasso does what it is for: alone, the penalised block's total is smaller than without
    it (with all three the EC's falls and the balls take some of its signal).
Bad inputs: --lambda-ec outside [0, 1], and with --model volume-fractions (no EC block)."""
import os
import pickle
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import commitpeer as cp  # noqa: E402
from dmtest import check, dimoc, finish, workdir  # noqa: E402
from test_commit_peer import one_error_line, peer_iso_sum, read, run, same_fit  # noqa: E402

CASES = (("lasso_ec", {"lasso_ec": 0.02}, ("--lambda-ec", "0.02")),
         ("lasso_iso", {"lasso_iso": 0.1}, ("--lambda-iso", "0.1")),
         ("lasso_all_blocks", {"lasso": 0.02, "lasso_ec": 0.05, "lasso_iso": 0.05},
          ("--lambda", "0.02", "--lambda-ec", "0.05", "--lambda-iso", "0.05")))


def peer_lambdas(peer):
    """COMMIT's lambdas as set_regularisation computed them (its results.pickle)."""
    res = pickle.load(open(os.path.join(peer["results"], "results.pickle"), "rb"))
    reg = res[0]["optimization"]["regularisation"]
    return {k: float(reg.get(k) or 0) for k in ("lambdaIC", "lambdaEC", "lambdaISO")}


def main():
    d = workdir("commit_lasso_blocks")
    p = cp.phantom(f"{d}/phantom", noise=0.02)
    run(p, f"{d}/plain", "--device", "cpu")
    plain = read(f"{d}/plain")
    shape4 = nib.load(p["dwi"]).shape
    conf = np.random.default_rng(5).uniform(0.2, 1.0, shape4).astype(np.float32)
    nib.save(nib.Nifti1Image(conf, nib.load(p["dwi"]).affine), f"{d}/conf4.nii.gz")
    cases = CASES + (("lasso_iso_confidence", {"lasso_iso": 0.1},
                      ("--lambda-iso", "0.1", "--confidence-map", f"{d}/conf4.nii.gz")),)
    for tag, kw, args in cases:
        extra = {"fit_extra": {"confidence_map_filename": f"{d}/conf4.nii.gz"}} if "confidence" in tag else {}
        peer = cp.run_on_phantom(f"{d}/peer_{tag}", p, **kw, **extra)
        run(p, f"{d}/dimoc_{tag}", *args, "--device", "cpu")
        me = read(f"{d}/dimoc_{tag}")
        same_fit(f"commit_{tag}", peer, me, {"ic": peer["ic"], "ec": peer["ec"], "iso": peer_iso_sum(peer)})
        lam = peer_lambdas(peer)
        pairs = [(me["prov"][mine], lam[theirs]) for key, mine, theirs in
                 (("lasso", "lasso_lambda", "lambdaIC"), ("lasso_ec", "lasso_lambda_ec", "lambdaEC"),
                  ("lasso_iso", "lasso_lambda_iso", "lambdaISO")) if kw.get(key)]
        worst = max(abs(a - b) / b for a, b in pairs)
        check(f"commit_{tag}_lambdas_as_commit", worst < 0.02,
              "dimoc / COMMIT: " + ", ".join(f"{a:.5g} / {b:.5g}" for a, b in pairs))
        m = peer["fit_mask"]
        shrunk = [(k, me[k][m].sum(), plain[k][m].sum()) for k, key in (("ec", "lasso_ec"), ("iso", "lasso_iso"))
                  if kw.get(key)]
        if len(kw) > 1:
            continue
        check(f"commit_{tag}_shrinks_its_block", all(a < b for _, a, b in shrunk),
              ", ".join(f"{k} total {a:.3f} (without the lasso {b:.3f})" for k, a, b in shrunk))
    one_error_line("commit_lambda_ec_range", p, f"{d}/e1", ["--lambda-ec", "1.5"], ["--lambda-ec", "[0, 1]"])
    rc, _, err = dimoc("commit", "--model", "volume-fractions", "--tractogram", p["tck"], "--data", p["ic_true"],
                       "--mask", p["wm"], "--out", f"{d}/e2", "--lambda-ec", "0.1", expect_ok=False)
    check("commit_lambda_ec_not_for_volume_fractions", rc != 0 and "--lambda-ec" in err and
          len(err.strip().splitlines()) == 1 and not os.path.exists(f"{d}/e2"), err.strip())
    rc, _, err = dimoc("commit", "--model", "volume-fractions", "--tractogram", p["tck"], "--data", p["ic_true"],
                       "--mask", p["wm"], "--out", f"{d}/e3", "--lambda-iso", "0.1", expect_ok=False)
    check("commit_lambda_iso_needs_balls", rc != 0 and "--lambda-iso" in err and "isotropic" in err and
          len(err.strip().splitlines()) == 1 and not os.path.exists(f"{d}/e3"), err.strip())
    finish()


if __name__ == "__main__":
    main()
