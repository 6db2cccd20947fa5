"""Synthetic diffusion data for the CSD tests and benchmark: fibres as axially symmetric tensors on
an oblique grid, their exact zonal-SH responses in MRtrix's text format, and peak matching.

Frames.  The image's voxel -> world matrix is A = R S (R a rotation, det > 0; S the voxel sizes).
FSL's bvecs are directions in the voxel frame with x negated when det(A) > 0, so a bvec g_fsl is
the world direction
    g_world = R F g_fsl,   F = diag(-1, 1, 1)
and the fibre directions of the truth, d_world, enter the signal as (g_world . d_world).  This is
the rule MRtrix applies to -fslgrad, and the one dimoc applies to --bvecs.  FODs and sh2peaks'
peaks are in the world frame, like the truth.

Response.  For a fibre along z with signal S(cos theta) on a shell, the zonal coefficient in
MRtrix's orthonormal basis is
    r_l = 2 pi int_{-1}^{1} S(x) Y_l0(x) dx,   Y_l0(x) = sqrt((2l + 1) / (4 pi)) P_l(x)
(Gauss-Legendre quadrature, exact to double precision for these smooth integrands).  An
isotropic compartment has r_0 = sqrt(4 pi) S and no other term."""
import itertools
import os
import shutil
import subprocess

import numpy as np
from numpy.polynomial.legendre import leggauss

import peercache
from scipy.special import eval_legendre

LAMBDA_PAR, LAMBDA_PERP = 1.7e-3, 0.2e-3  # mm^2/s
D_GM, D_CSF = 0.8e-3, 3.0e-3
MRTRIX = ["dwi2response", "dwi2fod", "sh2peaks"]


def have_mrtrix():
    return all(shutil.which(t) for t in MRTRIX)


def mrtrix(*args):
    """Runs an MRtrix command quietly, single-threaded (deterministic); returns (rc, stderr)."""
    rc, _, err = peercache.run([*args, "-quiet", "-force", "-nthreads", "1"])
    return rc, err.strip()


def rotation(axis, deg):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    t = np.radians(deg)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(t) * K + (1 - np.cos(t)) * K @ K


def oblique_affine(shape, voxel=2.0, axis=(1.0, 2.0, 0.5), deg=25.0):
    """A voxel -> world matrix with a 25-degree rotation (each voxel axis stays within 45 degrees of
    its world axis, so no tool reorders the axes) and a positive determinant."""
    R = rotation(axis, deg)
    A = np.eye(4)
    A[:3, :3] = R * voxel
    A[:3, 3] = -A[:3, :3] @ ((np.array(shape[:3]) - 1) / 2)
    return A


def fsl_to_world(affine, bvecs_fsl):
    """bvecs_fsl (3, N) -> world directions (N, 3)."""
    M = affine[:3, :3]
    R = M / np.linalg.norm(M, axis=0)
    F = np.diag([-1.0, 1, 1]) if np.linalg.det(M) > 0 else np.eye(3)
    return (R @ F @ bvecs_fsl).T


def fibre_signal(b, g_world, d_world):
    """Signal (S0 = 1) of one fibre: b (N,), g_world (N, 3), d_world (..., 3) -> (..., N)."""
    c = np.einsum("...k,nk->...n", d_world, g_world)
    return np.exp(-b * (LAMBDA_PERP + (LAMBDA_PAR - LAMBDA_PERP) * c * c))


def zonal_response(b, lmax, kind="wm"):
    """Zonal SH coefficients (l = 0, 2, .., lmax) of a tissue's signal (S0 = 1) on shell b."""
    x, w = leggauss(200)
    if kind == "wm":
        s = np.exp(-b * (LAMBDA_PERP + (LAMBDA_PAR - LAMBDA_PERP) * x * x))
    else:
        s = np.full_like(x, np.exp(-b * (D_GM if kind == "gm" else D_CSF)))
    return np.array([2 * np.pi * np.sum(w * s * np.sqrt((2 * l + 1) / (4 * np.pi)) * eval_legendre(l, x))
                     for l in range(0, lmax + 1, 2)])


def write_response(path, shells, lmax, kind, s0):
    """MRtrix response file: '# Shells:' line, one row per shell (isotropic tissues: one column)."""
    rows = [s0 * zonal_response(b, lmax if kind == "wm" else 0, kind) for b in shells]
    with open(path, "w") as f:
        f.write("# Shells: " + ",".join(str(int(b)) for b in shells) + "\n")
        for r in rows:
            f.write(" ".join(f"{v:.10g}" for v in r) + "\n")
    return path


def read_response(path):
    rows, shells = [], None
    for line in open(path):
        line = line.strip()
        if line.startswith("#"):
            if line[1:].strip().lower().startswith("shells:"):
                shells = [float(v) for v in line.split(":", 1)[1].split(",")]
            continue
        if line:
            rows.append([float(v) for v in line.replace(",", " ").split()])
    return np.array(rows), shells


def random_unit(rng, n):
    v = rng.normal(size=(n, 3))
    return v / np.linalg.norm(v, axis=1)[:, None]


def crossing(rng, n, angle_deg):
    """n pairs of world directions at the given angle, in random planes."""
    a = random_unit(rng, n)
    p = np.cross(a, random_unit(rng, n))
    p /= np.linalg.norm(p, axis=1)[:, None]
    t = np.radians(angle_deg)
    return np.stack([a, np.cos(t) * a + np.sin(t) * p], 1)


def triad(rng, n):
    """n randomly rotated orthonormal triads (three fibres at 90 degrees)."""
    out = np.empty((n, 3, 3))
    for i in range(n):
        q, r = np.linalg.qr(rng.normal(size=(3, 3)))
        out[i] = (q * np.sign(np.diag(r))).T
    return out


def three_tissue_slab(rng, b, g_world, shape, radii):
    """A slab of shape (nx, ny, nz), the same in every slice: discs about the centre of the first
    two axes, WM out to radii[0] (fibres of random world direction, 70% single, else two equal
    ones), GM inside radii[1], CSF inside radii[2]; S0 1000, Gaussian noise of sigma 20.
    Returns the signals (shape + (len(b),)), the mask (uint8), the single-fibre voxels and their
    fibre directions."""
    c0, c1 = (shape[0] - 1) / 2, (shape[1] - 1) / 2
    x, y = np.meshgrid(np.arange(shape[0]) - c0, np.arange(shape[1]) - c1, indexing="ij")
    r = np.hypot(x, y)
    tissue = np.full(shape[:2], -1)
    tissue[r < radii[0]] = 0
    tissue[r < radii[1]] = 1
    tissue[r < radii[2]] = 2
    data = np.zeros(tuple(shape) + (b.size,))
    single = np.zeros(shape, bool)
    fibre = np.zeros(tuple(shape) + (3,))
    for i, j, k in np.ndindex(*shape):
        t = tissue[i, j]
        if t < 0:
            continue
        if t == 0:
            u = random_unit(rng, 2)
            if rng.random() < 0.7:
                s = fibre_signal(b, g_world, u[0])
                single[i, j, k], fibre[i, j, k] = True, u[0]
            else:
                s = 0.5 * (fibre_signal(b, g_world, u[0]) + fibre_signal(b, g_world, u[1]))
        else:
            s = np.exp(-b * (D_GM if t == 1 else D_CSF))
        data[i, j, k] = 1000 * s + rng.normal(scale=20, size=b.size)
    mask = np.repeat((tissue >= 0)[:, :, None], shape[2], axis=2).astype(np.uint8)
    return data, mask, single, fibre


def add_noise(rng, s, sigma, kind="rician"):
    if kind == "rician":
        return np.hypot(s + rng.normal(scale=sigma, size=s.shape), rng.normal(scale=sigma, size=s.shape))
    return s + rng.normal(scale=sigma, size=s.shape)


def peaks_of(peaks, rel=0.1):
    """sh2peaks output (..., 3N) -> list per voxel of unit directions whose amplitude is at least rel
    times the voxel's largest."""
    p = peaks.reshape(-1, peaks.shape[-1] // 3, 3)
    amp = np.linalg.norm(np.nan_to_num(p), axis=-1)
    out = []
    for v in range(p.shape[0]):
        keep = amp[v] > 0
        if keep.any():
            keep &= amp[v] >= rel * amp[v].max()
        out.append(p[v][keep] / amp[v][keep][:, None])
    return out


def angular_errors(found, truth):
    """Per true fibre, the angle (degrees) to its matched peak: the assignment of true fibres to
    distinct found peaks with the smallest total angle; a fibre left without a peak (fewer peaks
    than fibres) takes the angle to its closest peak; a voxel with no peak at all, 90."""
    k = len(truth)
    if len(found) == 0:
        return np.full(k, 90.0)
    a = np.degrees(np.arccos(np.clip(np.abs(truth @ found.T), 0, 1)))  # (k, nfound)
    best = None
    if len(found) >= k:
        for perm in itertools.permutations(range(len(found)), k):
            e = a[np.arange(k), perm]
            if best is None or e.sum() < best.sum():
                best = e
        return best
    return a.min(axis=1)


def sh2peaks(fod, out, num=3, mask=None):
    args = ["sh2peaks", fod, out, "-num", num] + (["-mask", mask] if mask else [])
    return mrtrix(*args)


def run_ok(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    return p.returncode, p.stdout, p.stderr


def exists_all(*paths):
    return all(os.path.exists(p) for p in paths)
