"""Helpers shared by the tests of the shipped models (test_ivim, test_dki, test_fwdti,
test_noddi_dti): simulate a row of voxels with known parameters, run a fit or a pipeline, read
its maps, and compare errors against the truth with another estimator's (DIPY's)."""
import os

import numpy as np

from dmtest import check, dimoc, load, save


def simulate(d, model, truth, bvals, bvecs, snr=50, noise="rician", seed=11, timing=()):
    """truth: NAME -> 1D array of n voxels (an n x 1 x 1 image); timing: extra options such as
    ["--scheme", FILE].  Writes d/dwi.nii.gz and a mask of ones; returns (data path, mask path,
    the signal as an n x volumes array)."""
    n = len(next(iter(truth.values())))
    params = ",".join(f"{k}={save(os.path.join(d, 'true_' + k + '.nii.gz'), np.reshape(v, (n, 1, 1)))}"
                      for k, v in truth.items())
    data = os.path.join(d, "dwi.nii.gz")
    dimoc("simulate", model, "--bvals", bvals, "--bvecs", bvecs, *timing, "--params", params,
          "--noise", noise, "--snr", snr, "--seed", seed, "--out", data)
    mask = save(os.path.join(d, "mask.nii.gz"), np.ones((n, 1, 1)))
    return data, mask, load(data)[:, 0, 0, :]


def maps(folder, names):
    """NAME -> 1D array of the n x 1 x 1 maps in folder."""
    return {k: load(os.path.join(folder, k + ".nii.gz")).reshape(-1) for k in names}


def median_error(est, truth, relative=False):
    e = np.abs(est - truth)
    return float(np.median(e / np.abs(truth) if relative else e))


def no_worse(name, ours, theirs, truth, relative=False, factor=1.05, slack=0.0, label="DIPY"):
    """PASS when dimoc's median (absolute or relative) error against the truth is at most
    factor x the other estimator's + slack; prints both."""
    a = median_error(ours, truth, relative)
    b = median_error(theirs, truth, relative)
    kind = "relative" if relative else "absolute"
    check(name, a <= factor * b + slack,
          f"median {kind} error dimoc {a:.4g}, {label} {b:.4g} (limit {factor} x {label} + {slack:g})")
    return a, b


def within(name, est, truth, limit, relative=False):
    """PASS when the median (absolute or relative) error against the truth is below limit."""
    a = median_error(est, truth, relative)
    kind = "relative" if relative else "absolute"
    check(name, a < limit, f"median {kind} error {a:.4g} (limit {limit:g})")
    return a


def pipeline(name, *args):
    """`dimoc pipeline NAME ARGS`, on the GPU when DIMOC_FIT_DEVICE says so (dmtest.dimoc adds
    --device to `dimoc fit` only; a pipeline passes it on to each of its fits)."""
    device = os.environ.get("DIMOC_FIT_DEVICE")
    return dimoc("pipeline", name, *args, *(["--device", device] if device else []))
