"""A synthetic FOD phantom in MRtrix's SH basis, and the MRtrix side of the FOD tractography
tests (tckgen, tckmap, .tck headers, lengths, TDI correlation).

Basis.  MRtrix 3's real orthonormal basis of even degrees up to lmax: coefficient index
l(l+1)/2 + m; with N_lm = sqrt((2l+1)/(4 pi) (l-|m|)!/(l+|m|)!) and P_l^m the associated
Legendre function WITH the Condon-Shortley phase (-1)^m (scipy's lpmv):
    m < 0:  sqrt(2) N P_l^|m|(cos th) sin(|m| ph)
    m = 0:  N P_l^0(cos th)
    m > 0:  sqrt(2) N P_l^m(cos th) cos(m ph)
th, ph the polar angle and azimuth of a WORLD (scanner) direction.  tests/py/test_fodtrack_mrtrix.py
checks this against sh2amp (amplitudes of random coefficients) and sh2peaks (the lobe of the
phantom's kernel lands on the world direction it was rotated to, on the oblique grid).

Kernel.  One fibre is the zonal function k(cos g) = sum_l k_l Y_l0, a delta apodised by
exp(-l(l+1) / (2 s^2)) -- the shape of a CSD FOD of one fibre -- scaled to amplitude 1 along
its axis.  Rotated to a unit direction t its coefficients are (addition theorem, true for any
real orthonormal basis of each degree)
    c_lm = k_l sqrt(4 pi / (2l+1)) Y_lm(t).

Phantom.  An oblique grid (csdsim.oblique_affine: a 25 degree rotation, 2 mm voxels) of
36 x 36 x 14 voxels.  Geometry is defined in the grid's own mm frame q = 2 (ijk - centre);
a tangent t_q there is the world direction R t_q (R the affine's rotation).  Bundles are tubes
(weight 1 inside, a cos^2 taper over the last 2 mm of the radius):
    arc      a quarter circle in the q_z = 0 plane: centre (-36, -36, 0), radius 44, tube radius 7
    straight along q_x at q_y = -36 + 44 sin 20 deg: crosses the arc at 70 degrees, radius 6
    third    along q_y at q_x = +22: crosses `straight` at 90 degrees, radius 6
FOD = sum of weight x kernel along each bundle's tangent; zero outside the bundles and outside
the brain mask (an ellipsoid of semi-axes 38, 38, 13 mm)."""
import os
import re
from math import factorial

import nibabel as nib
import numpy as np
from scipy.special import lpmv

import csdsim as cs
import peercache

LMAX = 8
SHAPE = (28, 28, 10)
VOXEL = 2.0
ARC_C, ARC_R, ARC_W = np.array([-28.0, -28.0]), 34.0, 5.0
STRAIGHT_Y, STRAIGHT_W = -28.0 + 34.0 * np.sin(np.radians(20)), 5.0
THIRD_X, THIRD_W = 18.0, 5.0
BRAIN = (30.0, 30.0, 9.5)


def nsh(lmax):
    return (lmax + 1) * (lmax + 2) // 2


def sh_basis(dirs, lmax=LMAX):
    """(N, 3) unit directions -> (N, nsh) matrix of MRtrix's basis functions."""
    dirs = np.asarray(dirs, float).reshape(-1, 3)
    th = np.arccos(np.clip(dirs[:, 2], -1, 1))
    ph = np.arctan2(dirs[:, 1], dirs[:, 0])
    x = np.cos(th)
    out = np.zeros((len(dirs), nsh(lmax)))
    for l in range(0, lmax + 1, 2):
        c = l * (l + 1) // 2
        for m in range(0, l + 1):
            n = np.sqrt((2 * l + 1) / (4 * np.pi) * factorial(l - m) / factorial(l + m))
            p = n * lpmv(m, l, x)
            if m == 0:
                out[:, c] = p
            else:
                out[:, c + m] = np.sqrt(2) * p * np.cos(m * ph)
                out[:, c - m] = np.sqrt(2) * p * np.sin(m * ph)
    return out


def kernel(lmax=LMAX, s=3.0):
    """Zonal coefficients k_l (l = 0, 2, .., lmax) of the single-fibre lobe, amplitude 1 on its axis."""
    k = np.array([np.sqrt((2 * l + 1) / (4 * np.pi)) * np.exp(-l * (l + 1) / (2 * s * s))
                  for l in range(0, lmax + 1, 2)])
    peak = sum(kl * np.sqrt((2 * l + 1) / (4 * np.pi)) for kl, l in zip(k, range(0, lmax + 1, 2)))
    return k / peak


def lobe(t, lmax=LMAX, k=None):
    """SH coefficients (N, nsh) of the kernel rotated to the unit directions t (N, 3)."""
    k = kernel(lmax) if k is None else k
    Y = sh_basis(t, lmax)
    scale = np.zeros(nsh(lmax))
    for i, l in enumerate(range(0, lmax + 1, 2)):
        c = l * (l + 1) // 2
        scale[c - l:c + l + 1] = k[i] * np.sqrt(4 * np.pi / (2 * l + 1))
    return Y * scale


def amplitude(coef, dirs, lmax=LMAX):
    return coef @ sh_basis(dirs, lmax).T


def taper(r, radius, edge=2.0):
    """1 inside radius - edge, cos^2 down to 0 at radius, 0 beyond."""
    u = np.clip((r - (radius - edge)) / edge, 0, 1)
    return np.where(u < 1, np.cos(0.5 * np.pi * u) ** 2, 0.0)


def affine():
    return cs.oblique_affine(SHAPE, voxel=VOXEL)


def grid_mm(shape=SHAPE, voxel=VOXEL):
    """The grid's own mm frame q (shape + (3,)) at voxel centres."""
    ijk = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), -1).astype(float)
    return voxel * (ijk - (np.array(shape) - 1) / 2)


def bundles(q):
    """[(name, weight (shape), tangent in q's frame (shape + (3,)))] of the three bundles."""
    out = []
    dx, dy = q[..., 0] - ARC_C[0], q[..., 1] - ARC_C[1]
    rho = np.hypot(dx, dy)
    r = np.hypot(rho - ARC_R, q[..., 2])
    w = taper(r, ARC_W) * (dx > 0) * (dy > 0)
    t = np.stack([-dy, dx, np.zeros_like(dx)], -1) / np.maximum(rho, 1e-9)[..., None]
    out.append(("arc", w, t))
    r = np.hypot(q[..., 1] - STRAIGHT_Y, q[..., 2])
    out.append(("straight", taper(r, STRAIGHT_W), np.broadcast_to([1.0, 0, 0], q.shape)))
    r = np.hypot(q[..., 0] - THIRD_X, q[..., 2])
    out.append(("third", taper(r, THIRD_W), np.broadcast_to([0, 1.0, 0], q.shape)))
    return out


def brain(q):
    return (q[..., 0] / BRAIN[0]) ** 2 + (q[..., 1] / BRAIN[1]) ** 2 + (q[..., 2] / BRAIN[2]) ** 2 <= 1


def save(path, data, aff, dtype=np.float32):
    nib.save(nib.Nifti1Image(np.asarray(data, dtype=dtype), aff), path)
    return path


def phantom(d, floor=0.0):
    """Writes the phantom into d: fod.nii.gz (45 volumes), brain.nii.gz (the ellipsoid mask),
    wm.nii.gz (voxels where some bundle's weight > 0.5: the seed mask), <bundle>.nii.gz (each
    bundle's weight > 0.5).  Returns a dict of paths plus 'affine', 'q' and 'weights'.
    floor > 0 adds an isotropic FOD of that amplitude to every voxel of the grid (as real FODs
    are small but not zero in grey matter and CSF): then no voxel's coefficients are all zero,
    so the FOD is valid everywhere in the image (MRtrix treats an all-zero voxel as outside)."""
    aff = affine()
    R = aff[:3, :3] / VOXEL
    q = grid_mm()
    inside = brain(q)
    fod = np.zeros(SHAPE + (nsh(LMAX),))
    out = {"affine": aff, "q": q, "weights": {}}
    for name, w, t in bundles(q):
        w = w * inside
        sel = w > 0
        fod[sel] += w[sel, None] * lobe(t[sel] @ R.T)
        out["weights"][name] = w
        out[name] = save(f"{d}/{name}.nii.gz", w > 0.5, aff, np.uint8)
    fod[..., 0] += floor / sh_basis([[0.0, 0, 1]], 0)[0, 0]
    out["fod"] = save(f"{d}/fod.nii.gz", fod, aff)
    out["brain"] = save(f"{d}/brain.nii.gz", inside, aff, np.uint8)
    out["wm"] = save(f"{d}/wm.nii.gz", sum(out["weights"].values()) > 0.5, aff, np.uint8)
    return out


def world_to_voxel(aff, pts):
    return (np.asarray(pts) - aff[:3, 3]) @ np.linalg.inv(aff[:3, :3]).T


def point_tdi(sl, aff, shape):
    """A track density image without MRtrix: per voxel, the streamlines with a point in it (nearest
    voxel).  Close to tckmap's where points are closer than a voxel; for comparing two tractograms
    on a machine without MRtrix."""
    tdi = np.zeros(shape)
    for s in sl:
        ijk = np.rint(world_to_voxel(aff, s)).astype(int)
        ijk = ijk[np.all((ijk >= 0) & (ijk < np.array(shape)), axis=1)]
        if len(ijk):
            u = np.unique(np.ravel_multi_index(ijk.T, shape))
            tdi.flat[u] += 1
    return tdi


def in_mask(mask, aff, pts):
    """Whether each world point (N, 3) lies in a voxel of mask (nearest voxel; outside the grid: no)."""
    ijk = np.rint(world_to_voxel(aff, pts)).astype(int)
    ok = np.all((ijk >= 0) & (ijk < np.array(mask.shape[:3])), axis=1)
    res = np.zeros(len(ijk), bool)
    res[ok] = mask[ijk[ok, 0], ijk[ok, 1], ijk[ok, 2]] > 0
    return res


# ---- MRtrix and .tck --------------------------------------------------------------------------

def run(cmd, env=None):
    """(exit status, stdout, stderr) of a command; MRtrix's through the peers' cache."""
    return peercache.run(cmd, env=env)


def tckgen(fod, out, seed, *opts, rng=1, nthreads=2, seed_kind="-seed_image"):
    """tckgen FOD OUT -seed_image SEED OPTS with MRTRIX_RNG_SEED=rng; raises on failure."""
    env = dict(os.environ, MRTRIX_RNG_SEED=str(rng))
    seedargs = [seed_kind] + (list(seed) if isinstance(seed, (list, tuple)) else [seed])
    rc, _, err = run(["tckgen", fod, out, *seedargs, *opts, "-quiet", "-force", "-nthreads", nthreads], env)
    if rc:
        raise RuntimeError(f"tckgen failed: {err.strip()}")
    return out


def tckmap(tck, template, out, vox=None):
    """Track density image of tck on template's grid (or super-resolved to vox mm)."""
    rc, _, err = run(["tckmap", tck, out, "-template", template, "-quiet", "-force", "-nthreads", 1] +
                     (["-vox", vox] if vox else []))
    if rc:
        raise RuntimeError(f"tckmap failed: {err.strip()}")
    return np.asarray(nib.load(out).dataobj, dtype=np.float64)


def corr(a, b):
    return float(np.corrcoef(np.ravel(a), np.ravel(b))[0, 1])


def tck_header(path):
    """The .tck header's key: value lines as a dict of strings (repeated keys: the last)."""
    head = {}
    with open(path, "rb") as f:
        first = f.readline()
        if first.strip() != b"mrtrix tracks":
            raise ValueError(f"{path}: not a .tck file (first line {first[:40]!r})")
        for line in f:
            line = line.decode("latin-1").strip()
            if line == "END":
                break
            k, _, v = line.partition(":")
            head[k.strip()] = v.strip()
    return head


def streamlines(path):
    return [np.asarray(s, float) for s in nib.streamlines.load(path).streamlines]


def lengths(sl):
    return np.array([np.linalg.norm(np.diff(s, axis=0), axis=1).sum() for s in sl])


def tckinfo_count(path):
    """(header count, actual count) as tckinfo -count reports them."""
    rc, out, err = run(["tckinfo", "-count", path])
    a = re.search(r"actual count in file:\s*(\d+)", out)
    h = re.search(r"^\s*count:\s*(\d+)", out, re.M)
    return (int(h.group(1)) if h else -1), (int(a.group(1)) if a else -1)


# ---- ACT: a five-tissue-type image on the phantom's grid ---------------------------------------
#
# Tissues are smooth functions of the grid's mm frame q, sampled at the voxel centres, so that
# every boundary is a partial-volume ramp about 1.5 voxels wide (trilinear interpolation of the
# 5TT then decides where a streamline changes tissue, as in tckgen).
#   cortical GM  a shell of the brain ellipsoid: normalised radius s (s = 1 on the FOD's brain
#                boundary) from CGM_S = (0.78, 0.88) rising to 1, falling again over (1.0, 1.08);
#                so each bundle's end (the straight and the third meet the boundary, the arc's
#                ends lie at s > 0.93) is in cortical GM while its FOD still carries on.  The
#                ellipsoid is flat (13 mm in z), so the shell also lies above and below the
#                bundles (from |q_z| of about 4 mm near the sub-cortical ball, 7 mm at the centre):
#                streamlines leaving a bundle upwards end in cortex, and the top and bottom of
#                the sub-cortical ball touch it (sub-cortical GM then cortical GM)
#   sub-cortical GM  a ball of radius SGM_R (cos^2 edge over the last 2.5 mm) on the straight
#                bundle at q = SGM_C, between its left end and the crossing with the arc
#   WM           (1 - GM) x min(1, sum of the bundles' weights): WM where the bundles are
#   CSF          the rest (1 - GM - WM): between the bundles, and all around the brain
#   pathology    0
# Every voxel sums to 1 (5ttcheck: "checked OK").
CGM_S = (0.78, 0.88, 1.0, 1.08)
SGM_C, SGM_R = np.array([-12.0, STRAIGHT_Y, 0.0]), 5.0


def smoothstep(x, a, b):
    """0 below a, 1 above b, sin^2 in between."""
    u = np.clip((np.asarray(x, float) - a) / (b - a), 0, 1)
    return np.sin(0.5 * np.pi * u) ** 2


def five_tissue(d, p):
    """Writes d/5tt.nii.gz (float32, 5 volumes: cGM, sGM, WM, CSF, pathology) on the phantom p's
    grid (p from phantom()).  Returns (path, array)."""
    q = p["q"]
    s = np.sqrt(((q / np.array(BRAIN)) ** 2).sum(-1))
    cgm = smoothstep(s, CGM_S[0], CGM_S[1]) * (1 - smoothstep(s, CGM_S[2], CGM_S[3]))
    sgm = taper(np.linalg.norm(q - SGM_C, axis=-1), SGM_R, 2.5) * (1 - cgm)
    rest = 1 - cgm - sgm
    wm = rest * np.minimum(1.0, sum(p["weights"].values()))
    csf = rest - wm
    tt = np.stack([cgm, sgm, wm, csf, np.zeros_like(wm)], -1)
    return save(f"{d}/5tt.nii.gz", tt, p["affine"]), tt


def tissue_class(tt, aff, pts):
    """For world points (N, 3): the 5TT volume (0 cGM, 1 sGM, 2 WM, 3 CSF, 4 pathology) largest at
    the nearest voxel; -1 outside the grid."""
    ijk = np.rint(world_to_voxel(aff, pts)).astype(int)
    ok = np.all((ijk >= 0) & (ijk < np.array(tt.shape[:3])), axis=1)
    out = np.full(len(ijk), -1)
    out[ok] = np.argmax(tt[ijk[ok, 0], ijk[ok, 1], ijk[ok, 2]], axis=1)
    return out


def trilinear(vol, aff, pts):
    """Trilinear interpolation of vol (3-D, or 4-D: per volume) at world points (N, 3), with
    MRtrix's rules at the edges (an edge voxel alone up to half a voxel beyond its centre); NaN
    farther out."""
    v = world_to_voxel(aff, pts)
    shape = np.array(vol.shape[:3])
    bad = np.any((v <= -0.5) | (v >= shape - 0.5), axis=1)
    v = np.clip(v, 0, shape - 1)
    i0 = np.minimum(np.floor(v).astype(int), shape - 2)
    f = v - i0
    out = 0
    for corner in range(8):
        o = np.array([(corner >> k) & 1 for k in range(3)])
        w = np.prod(np.where(o, f, 1 - f), axis=1)
        idx = i0 + o
        val = vol[idx[:, 0], idx[:, 1], idx[:, 2]]
        out = out + (w[:, None] * val if val.ndim == 2 else w * val)
    out = np.asarray(out, float)
    out[bad] = np.nan
    return out
