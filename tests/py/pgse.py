"""Pulsed-gradient protocols and restricted-diffusion signals for the tests of the models with
gradient timing (activeax, charmed, sandi): FSL bvals/bvecs plus a scheme file of G (T/m),
Delta and delta (s) per volume (`--scheme`), and the Gaussian phase approximation of the cylinder (Van
Gelderen et al. 1994) and the sphere (Murday and Cotts 1968) in numpy, with scipy's roots, as
the independent reference of the models' sums."""
import os

import numpy as np
from scipy import optimize, special

from dmtest import scheme

GAMMA = 2.6752218744e8  # rad / (s T)


def b_value(G, delta, Delta):
    """b (s/mm^2) of a pulse pair: G in T/m, delta and Delta in s."""
    return (GAMMA * G * delta) ** 2 * (Delta - delta / 3) * 1e-6


def write_scheme(path, G, Delta, delta):
    """A header scheme file (docs/fitting.md) with the columns the timing models read:
    G (T/m), Delta and delta (s), one row per volume."""
    with open(path, "w") as f:
        f.write("# G Delta delta\n")
        for row in zip(np.ravel(G), np.ravel(Delta), np.ravel(delta)):
            f.write(" ".join(repr(float(x)) for x in row) + "\n")
    return path


def protocol(d, shells, b0=6):
    """shells: (directions, G T/m, delta s, Delta s) each; b0 volumes get the first shell's
    timing and G = 0.  Writes bvals, bvecs and protocol.scheme (columns G, Delta, delta) under
    d; returns the bvals and bvecs paths, the fit options that pass the scheme, and the
    b-values, Delta and delta arrays."""
    spec = [f"{b0}x0"] + [f"{n}x{b_value(G, dl, DL):.6f}" for n, G, dl, DL in shells]
    bvals, bvecs = scheme(d, ",".join(spec))
    G = np.concatenate([[0.0] * b0] + [[G] * n for n, G, _, _ in shells])
    Delta = np.concatenate([[shells[0][3]] * b0] + [[DL] * n for n, _, _, DL in shells])
    delta = np.concatenate([[shells[0][2]] * b0] + [[dl] * n for n, _, dl, _ in shells])
    path = write_scheme(os.path.join(d, "protocol.scheme"), G, Delta, delta)
    bv = np.loadtxt(bvals).ravel()
    return bvals, bvecs, ["--scheme", path], bv, Delta, delta


def sphere_roots(n):
    """The first n positive roots of the spherical Bessel j1'(x), i.e. of
    (x^2 - 2) sin x + 2 x cos x = 0, one in each ((k - 1/2) pi, k pi)."""
    f = lambda t: (t * t - 2) * np.sin(t) + 2 * t * np.cos(t)  # noqa: E731
    return np.array([optimize.brentq(f, (k - 0.5) * np.pi, k * np.pi, xtol=1e-15, rtol=1e-15)
                     for k in range(1, n + 1)])


def gpa_log_signal(shape, R, D, G, delta, Delta, terms=400):
    """ln E across a cylinder (shape 'cylinder', roots of J1') or in a sphere ('sphere') in the
    Gaussian phase approximation, SI units (R m, D m^2/s, G T/m, s); G, delta, Delta arrays."""
    if shape == "cylinder":
        roots, c = special.jnp_zeros(1, terms), 1.0
    else:
        roots, c = sphere_roots(terms), 2.0
    a2 = (roots / R) ** 2
    x = a2[None, :] * D
    dl, DL = np.asarray(delta, float)[:, None], np.asarray(Delta, float)[:, None]
    bracket = 2 * dl / x - (2 + np.exp(-x * (DL - dl)) - 2 * np.exp(-x * dl)
                            - 2 * np.exp(-x * DL) + np.exp(-x * (DL + dl))) / x ** 2
    return -2 * GAMMA ** 2 * np.asarray(G, float) ** 2 * np.sum(bracket / (a2 * (a2 * R * R - c)), axis=1)


def simulate_and_run_pipeline(d, model, truth, bvals, bvecs, timing, seed, snr=50, options=()):
    """Simulates model on a len x 1 x 1 image of the truth maps (dict of arrays) with Rician
    noise (none with snr=None), runs `dimoc pipeline model [options]` on it (every voxel in the
    mask; DIMOC_FIT_DEVICE is passed on as --device), and returns the truth as stored (float32) and a reader of the
    pipeline's output maps."""
    from dmtest import dimoc, load, save  # noqa: E402 (dmtest also imports this module's users)
    n = len(next(iter(truth.values())))
    paths = {k: save(os.path.join(d, "true_" + k + ".nii"), np.reshape(x, (-1, 1, 1)))
             for k, x in truth.items()}
    data = os.path.join(d, "dwi.nii")
    dimoc("simulate", model, "--bvals", bvals, "--bvecs", bvecs, *timing, "--params",
          ",".join(f"{k}={p}" for k, p in paths.items()), "--seed", seed, "--out", data,
          *(["--noise", "rician", "--snr", snr] if snr else []))
    mask = save(os.path.join(d, "mask.nii"), np.ones((n, 1, 1)))
    out = os.path.join(d, f"out{seed}")
    device = ["--device", os.environ["DIMOC_FIT_DEVICE"]] if os.environ.get("DIMOC_FIT_DEVICE") else []
    dimoc("pipeline", model, "--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs,
          "--out", out, *timing, "--quiet", *device, *options)
    stored = {k: load(p)[:, 0, 0] for k, p in paths.items()}
    return stored, lambda name: load(os.path.join(out, name + ".nii.gz"))[:, 0, 0]
