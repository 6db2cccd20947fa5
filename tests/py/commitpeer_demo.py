"""Builds the COMMIT phantom (tests/py/commitpeer.py), runs dmri-commit on it and prints what it found:
streamline counts, the share of the weight on the false streamlines, the compartment maps, the fit
errors and the timings.  Not a test (no PASS/FAIL): `python3 tests/py/commitpeer_demo.py [DIR]`.
--converged also runs COMMIT to tight tolerances (its defaults stop at a relative change of the
objective of 1e-3 or 100 iterations); --noise S adds Rician noise of sigma S x S0; --check recomputes
COMMIT's outputs from its own x, kernels and dictionary and its per-voxel lengths from the .tck
(commitpeer.rebuild, commitpeer.check_lengths: docs/commit-facts.md)."""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import commitpeer as cp  # noqa: E402


def show(title, r, p):
    s = cp.summary(r, p)
    w = r["weights"]
    print(f"== {title}")
    print(f"  streamlines {s['streamlines']} ({s['false_count']} false), kept by trk2dictionary {s['kept']}, "
          f"weight > 0: {s['nonzero']} (false ones at 0: {s['false_zero']})")
    print(f"  weight on false streamlines: {100 * s['false_weight_fraction']:.3f}% of the total")
    for name in list(cp.BUNDLES) + list(cp.FALSE):
        sel = p["label"] == name
        print(f"    {name:10s} n={sel.sum():3d}  weight mean {w[sel].mean():.4e}  sum {w[sel].sum():.4e}")
    m = r["fit_mask"]
    print(f"  fit voxels (streamlines pass) {s['fit_voxels']}; maps over them: mean IC {s['ic_mean']:.3f} "
          f"EC {s['ec_mean']:.3f} ISO {s['iso_mean']:.3f} (first ball only, as COMMIT writes it), "
          f"IC+EC+ISO {s['total_mean']:.3f}")
    print(f"  IC map vs the truth (NU_IC x fibre fraction): correlation {s['ic_corr_truth']:.3f}")
    print(f"  NRMSE mean {s['nrmse_mean']:.4f} max {s['nrmse_max']:.4f}; RMSE mean {s['rmse_mean']:.4f}; "
          f"voxels with NRMSE > 0.1: {int(np.count_nonzero(r['nrmse'][m] > 0.1))}")
    print(f"  objective 0.5||Ax-y||^2 = {s['objective']:.6g} after {s['iterations']} iterations ({s['stop']})")
    sec = r["seconds"]
    print("  seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in sec.items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?", default=os.path.join(os.environ.get("TMPROOT", "/tmp"), "commitpeer_demo"))
    ap.add_argument("--converged", action="store_true")
    ap.add_argument("--noise", type=float, default=0.0)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    t = time.time()
    p = cp.phantom(os.path.join(a.dir, "phantom"), noise=a.noise)
    print(f"phantom: grid {cp.SHAPE} of {cp.VOXEL} mm, {len(p['bvals'])} volumes "
          f"({int(np.sum(p['bvals'] == 0))} b=0, shells {cp.SHELLS}), {len(p['streamlines'])} streamlines, "
          f"noise {a.noise} ({time.time() - t:.2f} s)")
    r = cp.run_on_phantom(os.path.join(a.dir, "commit"), p)
    print(f"dmri-commit {r['info']['version']} (dmri-amico {r['info']['amico_version']}): "
          f"{r['info']['n_ic']} IC segments, {r['info']['n_ec']} EC peaks, {r['info']['n_iso']} ISO voxels")
    show("COMMIT, its default tolerances (tol_fun 1e-3, max_iter 100)", r, p)
    if a.check:
        print("  rebuilt from COMMIT's x, kernels, dictionary (relative differences): " +
              ", ".join(f"{k} {v:.1e}" for k, v in cp.rebuild(r).items()))
        print("  per-voxel lengths from the .tck vs COMMIT's dictionary (mm, voxel counts): " +
              ", ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} {v}" for k, v in cp.check_lengths(r, p).items()))
    if a.converged:
        rc = cp.run_on_phantom(os.path.join(a.dir, "commit_converged"), p, tol_fun=1e-8, tol_x=1e-10, max_iter=5000)
        show("COMMIT converged (tol_fun 1e-8, tol_x 1e-10, max_iter 5000)", rc, p)
        print(f"  weights correlation, default vs converged: {np.corrcoef(r['weights'], rc['weights'])[0, 1]:.3f}")
        print(f"  maps correlation, default vs converged: IC "
              f"{np.corrcoef(r['ic'].ravel(), rc['ic'].ravel())[0, 1]:.4f}, EC "
              f"{np.corrcoef(r['ec'].ravel(), rc['ec'].ravel())[0, 1]:.4f}, ISO "
              f"{np.corrcoef(r['iso'].ravel(), rc['iso'].ravel())[0, 1]:.4f}")


if __name__ == "__main__":
    main()
