"""Helpers of the comparisons with dmipy 1.0.5 (tests/py/test_dmipy_peer.py,
tests/py/test_dmipy_activeax.py): its acquisition scheme of dimoc's FSL files, its fit of the
voxels dimoc simulated, the same-signal check at the truth, and the conversions between the
two packages (dimoc: b s/mm^2, mm^2/s; dmipy: SI; both read the same b-vectors, so their
directions live in the same frame)."""
import os
import sys
import warnings

import numpy as np

from dmtest import angle_deg, check, finish, load
from modelcheck import simulate

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from dmipy.core.acquisition_scheme import acquisition_scheme_from_bvalues
except ImportError as e:
    check("dmipy-installed", False, f"{e} (scripts/install-deps.sh installs dmipy==1.0.5)")
    finish()
    sys.exit(1)

MM2_TO_M2 = 1e-6   # mm^2/s -> m^2/s
B_TO_SI = 1e6      # s/mm^2 -> s/m^2


def dmipy_scheme(bvals, bvecs, delta=0.01, Delta=0.03):
    """dmipy's acquisition scheme of dimoc's FSL bvals/bvecs; delta and Delta (s, scalars or one
    per volume) matter only to the restricted compartments (dmipy derives G from b, delta and
    Delta), the Gaussian ones do not read them."""
    b = np.loadtxt(bvals).ravel() * B_TO_SI
    g = np.loadtxt(bvecs).reshape(3, -1).T.copy()
    g[b == 0] = [1, 0, 0]  # dmipy wants unit vectors everywhere
    return acquisition_scheme_from_bvalues(b, g, delta, Delta)


def dmipy_fit(model, acquisition, d):
    """dmipy's brute2fine fit of the voxels dimoc simulated (d/dwi.nii, N x 1 x 1)."""
    data = load(os.path.join(d, "dwi.nii"))[:, 0, 0, :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = model.fit(acquisition, data, use_parallel_processing=False)
    return fit.fitted_parameters


def same_signal(name, model, dmipy_params, dimoc_model, truth, bvals, bvecs, acquisition, d,
                limit, timing=()):
    """The two models agree: dimoc's noise-free simulation at the truth against dmipy's signal
    at the same parameters (times S0), largest difference relative to S0."""
    sub = os.path.join(d, "noise_free")
    os.makedirs(sub)
    _, _, ours = simulate(sub, dimoc_model, truth, bvals, bvecs, noise="none", timing=timing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vec = model.parameters_to_parameter_vector(**dmipy_params)
        theirs = model.simulate_signal(acquisition, vec) * truth["S0"][:, None]
    worst = np.max(np.abs(ours - theirs) / truth["S0"][:, None])
    check(name, worst < limit, f"largest |dimoc - dmipy| / S0 {worst:.2e} (limit {limit:g})")
    return worst


def share_tortuosity(lambda_par, vf_intra, vf_extra):
    """d_perp = d_par (1 - f_ic / (f_ic + f_ec)), the formula dmipy's T1_tortuosity documents.
    dmipy 1.0.5's own normalises f_ic by f_ic + f_ec but leaves f_ec as it is, which is the same
    only without a ball (f_ic + f_ec = 1): with f_iso = 0.1 its signal differs from the
    documented model's by up to 2% of S0 (checked by szb-same-signal when it is left in)."""
    return (1 - vf_intra / np.maximum(vf_intra + vf_extra, 1e-12)) * lambda_par


def use_documented_tortuosity(model):
    """Gives model's tortuosity link (set_tortuous_parameter) share_tortuosity's formula."""
    for link in model.parameter_links:
        if link[1] == "lambda_perp":
            link[2] = share_tortuosity


def mu(th, ph):
    return np.stack([th, ph], -1)


def direction(mu):
    """Unit vectors of dmipy's (theta, phi) pairs."""
    th, ph = mu[:, 0], mu[:, 1]
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)


def compare_angles(name, ours, theirs, v, slack):
    a, b = np.median(angle_deg(ours, v)), np.median(angle_deg(theirs, v))
    check(name, a <= 1.05 * b + slack,
          f"median angle error dimoc {a:.3f} deg, dmipy {b:.3f} deg "
          f"(limit 1.05 x dmipy + {slack:g})")
