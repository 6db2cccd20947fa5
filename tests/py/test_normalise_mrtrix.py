"""`dimoc csd --normalise` against MRtrix's mtnormalise: a small 3-tissue phantom (WM sticks of
random direction, GM, CSF, random fractions, GM/CSF responses mis-scaled so that the balance
factors have work to do) under a smooth bias field, on an oblique 2 mm grid; dimoc's
normalised maps must match `mtnormalise -balanced` run on dimoc's own un-normalised maps (the
same command without --normalise): correlation > 0.99 and a few % of difference over the mask,
every WM coefficient included, and summed l=0 terms near 1/sqrt(4 pi).
dm_mtnormalise scales by the balance factors by default, hence -balanced.
Needs MRtrix3 (mtnormalise; scripts/install-deps.sh installs mrtrix3)."""
import glob
import os
import shutil

import numpy as np

import peercache
from dmtest import check, dimoc, finish, load, save, scheme, workdir

REF = 0.28209479177
SHAPE = (14, 13, 10)
LPAR, LPERP, D_GM, D_CSF = 1.7e-3, 0.2e-3, 0.8e-3, 3.0e-3
S0 = 1000.0

# How dimoc csd is called and what it writes.  The tissue maps are found by name (wm*, gm*,
# csf*) in the output folder; change these two if the command settles on other spellings.
CSD_ARGS = ["--lmax", "8"]
TISSUES = ("wm", "gm", "csf")


def affine():
    """2 mm voxels, rotated 20 degrees about z and 10 about x, with an offset: the field is a
    polynomial of scanner coordinates in mtnormalise and of voxel indices in dimoc."""
    a, b = np.radians(20), np.radians(10)
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    m = np.eye(4)
    m[:3, :3] = rz @ rx * 2.0
    m[:3, 3] = [-12, 8, -4]
    return m


def zonal(kernel, b, lmax):
    """MRtrix's response coefficients: R_l = int S(b, cos t) Y_l0 dOmega, l = 0, 2, .., lmax."""
    mu, w = np.polynomial.legendre.leggauss(64)
    out = []
    for l in range(0, lmax + 1, 2):
        p = np.polynomial.legendre.Legendre.basis(l)(mu)
        out.append(2 * np.pi * np.sum(w * kernel(b, mu) * p) * np.sqrt((2 * l + 1) / (4 * np.pi)))
    return out


def phantom(d):
    rng = np.random.default_rng(11)
    bvals, bvecs = scheme(d, "4x0,40x1000,60x2500")
    bv = np.loadtxt(bvals)
    g = np.loadtxt(bvecs)  # 3 x volumes
    n = int(np.prod(SHAPE))
    frac = rng.dirichlet([3.0, 2.0, 1.0], size=n)
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1)[:, None]
    idx = np.indices(SHAPE).reshape(3, -1).T.astype(float)
    u = (idx - (np.array(SHAPE) - 1) / 2) / (np.array(SHAPE) / 2)
    bias = np.exp(0.35 * u[:, 0] - 0.25 * u[:, 1] + 0.2 * u[:, 2] - 0.2 * u[:, 0] ** 2
                  + 0.15 * u[:, 0] * u[:, 1] + 0.1 * np.sin(1.5 * u[:, 2]))
    mask = (np.sum(u ** 2, axis=1) < 0.95).astype(float)

    def wm(b, mu):
        return S0 * np.exp(-b * (LPERP + (LPAR - LPERP) * mu ** 2))

    cos = dirs @ g  # n x volumes
    sig = frac[:, :1] * wm(bv[None, :], cos) + frac[:, 1:2] * S0 * np.exp(-bv * D_GM) \
        + frac[:, 2:] * S0 * np.exp(-bv * D_CSF)
    sig *= bias[:, None]
    sig += rng.normal(scale=4.0, size=sig.shape)
    aff = affine()
    data = np.zeros(SHAPE + (len(bv),))
    data[tuple(idx.astype(int).T)] = sig
    dwi = save(f"{d}/dwi.nii.gz", data, aff)
    m = np.zeros(SHAPE)
    m[tuple(idx.astype(int).T)] = mask
    mask_path = save(f"{d}/mask.nii.gz", m, aff)

    shells = sorted(set(np.round(bv, -2)))
    scale = {"wm": 1.0, "gm": 0.8, "csf": 1.25}  # responses off by these: the maps by 1/them
    rows = {"wm": [zonal(wm, b, 8) for b in shells],
            "gm": [[S0 * np.exp(-b * D_GM) * np.sqrt(4 * np.pi)] for b in shells],
            "csf": [[S0 * np.exp(-b * D_CSF) * np.sqrt(4 * np.pi)] for b in shells]}
    resp = []
    for t in TISSUES:
        p = f"{d}/response_{t}.txt"
        np.savetxt(p, np.array(rows[t]) * scale[t], fmt="%.6f")
        resp.append(p)
    return dwi, bvals, bvecs, mask_path, resp


def tissue_maps(folder):
    """The tissue maps of a dimoc csd output folder, in TISSUES' order."""
    found = []
    names = sorted(os.path.basename(p) for p in glob.glob(f"{folder}/*.nii*"))
    for t in TISSUES:
        hits = [x for x in names if x.lower().startswith(t)]
        if not hits:
            raise RuntimeError(f"no {t}* map in {folder}: {names}")
        found.append(os.path.join(folder, min(hits, key=len)))
    return found


def run(*args):
    rc, out, err = peercache.run(args)
    return rc, out + err


def main():
    d = workdir("normalise_mrtrix")
    if not shutil.which("mtnormalise"):
        check("normalise_mrtrix_found", False,
              "MRtrix3's mtnormalise not found (scripts/install-deps.sh installs mrtrix3)")
        return
    dwi, bvals, bvecs, mask, resp = phantom(d)
    common = ["csd", "--data", dwi, "--bvals", bvals, "--bvecs", bvecs, "--mask", mask,
              "--response", ",".join(resp)] + CSD_ARGS
    dimoc(*common, "--out", f"{d}/raw")
    dimoc(*common, "--normalise", "--out", f"{d}/norm")
    raw, ours = tissue_maps(f"{d}/raw"), tissue_maps(f"{d}/norm")

    pairs = []
    for p in raw:
        pairs += [p, f"{d}/mrtrix_{os.path.basename(p)}"]
    rc, out = run("mtnormalise", "-quiet", "-force", "-balanced", *pairs, "-mask", mask,
                  "-check_factors", f"{d}/factors.txt")
    check("normalise_mrtrix_runs", rc == 0, out.strip()[-300:])
    if rc != 0:
        return
    m = load(mask) > 0
    theirs = [load(p) for p in pairs[1::2]]
    mine = [load(p) for p in ours]
    before = [load(p) for p in raw]

    for t, a, b, r in zip(TISSUES, mine, theirs, before):
        a0, b0 = (a[..., 0] if a.ndim == 4 else a)[m], (b[..., 0] if b.ndim == 4 else b)[m]
        corr = np.corrcoef(a0, b0)[0, 1]
        rel = np.median(np.abs(a0 - b0) / np.maximum(np.abs(b0), 1e-6 * np.abs(b0).max()))
        check(f"normalise_mrtrix_{t}_l0", corr > 0.99 and rel < 0.01,
              f"l=0 correlation {corr:.4f}, median relative difference {rel:.4f} "
              f"(before normalising: correlation {np.corrcoef((r[..., 0] if r.ndim == 4 else r)[m], b0)[0, 1]:.4f})")
        if a.ndim == 4:
            diff = np.linalg.norm((a - b)[m]) / np.linalg.norm(b[m])
            check(f"normalise_mrtrix_{t}_all_coefficients", diff < 0.02,
                  f"relative difference over all {a.shape[3]} coefficients {diff:.4f}")

    total = sum((x[..., 0] if x.ndim == 4 else x) for x in mine)[m]
    med = np.median(np.abs(total / REF - 1))
    check("normalise_mrtrix_sum_at_reference", med < 0.05,
          f"summed l=0 terms off 1/sqrt(4 pi) by {med:.4f} (median over the mask)")


main()
finish()
