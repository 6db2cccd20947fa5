"""Helpers of the comparisons with dmipy 1.0.5 (tests/py/test_dmipy_peer.py,
tests/py/test_dmipy_activeax.py, tests/peers/test_dmipy_sandi.py): its acquisition scheme of
dimoc's FSL files, its fit of the voxels dimoc simulated, the same-signal check at the truth,
and the conversions between the two packages (dimoc: b s/mm^2, mm^2/s; dmipy: SI; both read the
same b-vectors, so their directions live in the same frame)."""
import hashlib
import os
import sys
import warnings

import numpy as np

from dmtest import angle_deg, check, finish, load
from modelcheck import simulate
import peercache

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from dmipy.core.acquisition_scheme import acquisition_scheme_from_bvalues
        from dmipy.utils.utils import cart2sphere
        from dipy.reconst.shm import real_sym_sh_mrtrix
except ImportError as e:
    check("dmipy-installed", False, f"{e} (scripts/install-deps.sh installs dmipy==1.0.5)")
    finish()
    sys.exit(1)

MM2_TO_M2 = 1e-6   # mm^2/s -> m^2/s
UM_TO_M = 1e-6     # um -> m
B_TO_SI = 1e6      # s/mm^2 -> s/m^2


def dmipy_scheme(bvals, bvecs, delta=0.01, Delta=0.03):
    """dmipy's acquisition scheme of dimoc's FSL bvals/bvecs; delta and Delta (s, scalars or one
    per volume) matter only to the restricted compartments (dmipy derives G from b, delta and
    Delta), the Gaussian ones do not read them."""
    b = np.loadtxt(bvals).ravel() * B_TO_SI
    g = np.loadtxt(bvecs).reshape(3, -1).T.copy()
    g[b == 0] = [1, 0, 0]  # dmipy wants unit vectors everywhere
    return acquisition_scheme_from_bvalues(b, g, delta, Delta)


def determined_sh_orders(acquisition):
    """Caps the spherical-harmonic order of each shell of acquisition at the highest even order
    its directions determine.  dmipy's spherical-mean models estimate a shell's mean as the c00
    of a least-squares SH fit whose order follows from b alone (up to 14, 120 coefficients);
    with fewer directions than coefficients that fit is underdetermined and its c00 is not the
    mean (20 directions of a constant 0.19 at b 4000 give 0.05)."""
    for k in acquisition.unique_dwi_indices:
        shell = acquisition.shell_indices == k
        order = acquisition.shell_sh_orders[k]
        while (order + 1) * (order + 2) // 2 > np.sum(shell):
            order -= 2
        _, theta, phi = cart2sphere(acquisition.gradient_directions[shell]).T
        acquisition.shell_sh_orders[k] = order
        acquisition.shell_sh_matrices[k] = real_sym_sh_mrtrix(order, theta, phi)[0]


def _describe(x):
    """A stable description of a piece of a dmipy model (no object addresses)."""
    if hasattr(x, "parameter_names"):
        return type(x).__name__
    if callable(x):
        return getattr(x, "__name__", type(x).__name__)
    return repr(x)


def dmipy_fit(model, acquisition, d):
    """dmipy's brute2fine fit of the voxels dimoc simulated (d/dwi.nii, N x 1 x 1), cached
    (tests/py/peercache.py) by the data, the scheme, the model's parameters, bounds and links,
    and the code of the test that built the model."""
    dwi = os.path.join(d, "dwi.nii")

    def compute(folder):
        data = load(dwi)[:, 0, 0, :]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = model.fit(acquisition, data, use_parallel_processing=False)
        np.savez(os.path.join(folder, "fitted.npz"), **fit.fitted_parameters)

    scheme = hashlib.sha256()
    for a in (acquisition.bvalues, acquisition.gradient_directions, acquisition.delta,
              acquisition.Delta, acquisition.shell_sh_orders):
        scheme.update(repr(a).encode() if isinstance(a, dict) else np.asarray(a).tobytes())
    spec = {"scheme": scheme.hexdigest(), "parameters": repr(sorted(model.parameter_ranges.items())),
            "cardinality": repr(sorted(model.parameter_cardinality.items())),
            "links": [[_describe(x) for x in link] for link in model.parameter_links],
            "models": [type(m).__name__ for m in model.models]}
    code = [__file__, os.path.abspath(sys.argv[0])]
    entry, _ = peercache.cached_folder("dmipy", peercache.python_versions("dmipy"), spec, compute,
                                       [dwi], code)
    return dict(np.load(os.path.join(entry, "fitted.npz")))


def same_signal(name, model, dmipy_params, dimoc_model, truth, bvals, bvecs, acquisition, d,
                limit, timing=(), shell_means=False):
    """The two models agree: dimoc's noise-free simulation at the truth against dmipy's signal
    at the same parameters (times S0), largest difference relative to S0.  shell_means: dmipy's
    model is a spherical-mean one (one value per shell of acquisition), so dimoc's signal is
    averaged over each shell's volumes first."""
    sub = os.path.join(d, "noise_free")
    os.makedirs(sub)
    _, _, ours = simulate(sub, dimoc_model, truth, bvals, bvecs, noise="none", timing=timing)
    if shell_means:
        shell = acquisition.shell_indices
        ours = np.stack([ours[:, shell == k].mean(1) for k in range(shell.max() + 1)], -1)
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
