"""The crossing phantom of the bedpostx tests: three regions of n voxels (x = 0: one fibre,
f1 = 0.5; x = 1 and 2: two fibres of f = 0.3 each, crossing at 90 and 60 degrees in a random
plane), the first fibre's direction random, d = 1.5e-3 and d_std = 5e-4 (ball_2_sticks_gamma,
FSL's model 2), S0 = 1000, 6 b=0 + 64 b=1000 + 64 b=2000, Rician noise at SNR 30."""
import os

import numpy as np

from dmtest import dimoc, save, scheme

REGIONS = ["single", "cross90", "cross60"]
D, D_STD = 1.5e-3, 5e-4


def unit(v):
    return v / np.linalg.norm(v)


def to_angles(v):
    v = v if v[2] >= 0 else -v
    return np.arccos(np.clip(v[2], -1, 1)), np.mod(np.arctan2(v[1], v[0]), 2 * np.pi)


def crossing_phantom(d, n, seed, noise_seed):
    """Writes dwi.nii.gz, mask.nii.gz, bvals, bvecs and the truth's maps in d; returns the
    inputs as options (--data --mask --bvals --bvecs) and the true fibres, dirs[fibre, region,
    voxel, 0] (unit vectors; the second fibre of a single-fibre voxel is unused)."""
    bvals, bvecs = scheme(d, "6x0,64x1000,64x2000")
    rng = np.random.default_rng(seed)
    names = ["S0", "d", "d_std", "f1", "th1", "ph1", "f2", "th2", "ph2"]
    truth = {k: np.zeros((3, n, 1)) for k in names}
    dirs = np.zeros((2, 3, n, 1, 3))
    for r, angle in enumerate([0, 90, 60]):
        for y in range(n):
            u = unit(rng.normal(size=3))
            w = unit(np.cross(u, unit(rng.normal(size=3))))
            v = np.cos(np.radians(angle)) * u + np.sin(np.radians(angle)) * w
            f1, f2 = (0.5, 0.0) if r == 0 else (0.3, 0.3)
            (th1, ph1), (th2, ph2) = to_angles(u), to_angles(v)
            for k, val in zip(names, [1000, D, D_STD, f1, th1, ph1, f2, th2, ph2]):
                truth[k][r, y, 0] = val
            dirs[0, r, y, 0], dirs[1, r, y, 0] = u, v
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    params = ",".join(f"{k}={save(os.path.join(d, k + '.nii.gz'), truth[k], affine)}" for k in names)
    mask = save(os.path.join(d, "mask.nii.gz"), np.ones((3, n, 1)), affine)
    data = os.path.join(d, "dwi.nii.gz")
    dimoc("simulate", "ball_2_sticks_gamma", "--bvals", bvals, "--bvecs", bvecs, "--params", params,
          "--noise", "rician", "--snr", 30, "--seed", noise_seed, "--out", data)
    return ["--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs], dirs
