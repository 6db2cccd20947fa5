"""The COMMIT side of the `dimoc commit` tests: a small tractogram-filtering phantom, and a run of
dmri-commit (COMMIT, the peer; installed by scripts/install-deps.sh) on it.  docs/commit-facts.md
says what COMMIT computes; this module only prepares its inputs and reads its outputs.

Phantom (phantom()).  A grid of 20 x 20 x 10 voxels of 2 mm whose voxel -> world matrix is
csdsim.oblique_affine (a 25 degree rotation, det > 0, offset so the grid's centre is at world 0)
shifted by OFFSET mm.  Geometry lives in the grid's own mm frame q = 2 (ijk - centre); a q-frame
direction t is the world direction R t (R the affine's rotation).  Bundles are tubes (weight 1
inside, cos^2 over the last 2 mm of the radius, fodsim.taper), all centred on q_z = 0:
    horizontal  along q_x at q_y = -9, radius 6
    vertical    along q_y at q_x = +9, radius 6 (crosses `horizontal` at 90 degrees)
    arc         a quarter circle about (q_x, q_y) = (-20, 20) of radius 17, tube radius 5
Each bundle f_b(v) is its weight at the voxel centre; the fibre fraction F = min(1, sum f_b).
Signal (S0 = S0_VALUE), the stick-zeppelin-ball model COMMIT fits:
    S / S0 = sum_b f_b [ NU_IC stick(t_b) + (1 - NU_IC) zeppelin(t_b) ] + (1 - F) ball(D_ISO_TRUE)
    stick(t)    = exp(-b d_par (g.t)^2)
    zeppelin(t) = exp(-b [d_perp + (d_par - d_perp) (g.t)^2])
    ball        = exp(-b d_iso)
with g, t world directions (D_PAR, D_PERP, D_ISO_TRUE below: COMMIT's demo values).
Streamlines: each true bundle gets n_true streamlines spread uniformly (a sunflower pattern) over a
disc of the tube's radius less 1 mm, points every STEP mm along the centre line's parallel, from
grid edge to grid edge.  False streamlines (n_false per set) run where no fibre has their
orientation:
    false_x  along q_x at q_y = +12 (crosses `arc` and `vertical` at about 90 degrees, and voxels
             of pure ball), disc radius 3
    false_y  along q_y at q_x = -12 (crosses `horizontal` and `arc`), disc radius 3
The WM mask is the grid less a one-voxel border in x and y (streamlines leave it: COMMIT drops
segments outside the mask).  Peaks: sh2peaks' layout, 3 x 3 volumes, each present bundle's world
tangent scaled by f_b (largest first), zeros where none (nan_peaks=True writes NaN there, as
sh2peaks and `dimoc peaks` do).  bvals/bvecs: FSL format; bvecs in FSL's frame (voxel axes with x
negated, as det > 0), written from world directions g by g_fsl = F R^T g.

COMMIT's frames (docs/commit-facts.md): it maps .tck points to voxels with the affine, but takes
the scheme's gradient directions as they are, in VOXEL axes; so run_commit() gives it the
voxel-frame directions R^T g (the FSL bvecs with x negated back), unless bvecs_frame="fsl" (the FSL
bvecs as they are: what fsl2scheme gives, mirrored in x on this grid).  Peaks are world-frame and
passed with peaks_use_affine=True (COMMIT multiplies them by the affine's transpose)."""
import json
import os
import subprocess
import sys
import time

import nibabel as nib
import numpy as np

import csdsim as cs
import fodsim as fs
import peercache

SHAPE = (20, 20, 10)
VOXEL = 2.0
OFFSET = np.array([3.0, -5.0, 7.0])  # world mm added to csdsim.oblique_affine's translation
STEP = 0.5  # mm between streamline points
S0_VALUE = 1000.0
NU_IC = 0.6
D_PAR, D_PERP, D_ISO_TRUE = 1.7e-3, 0.51e-3, 1.7e-3
D_ISOS = (1.7e-3, 3.0e-3)
SHELLS = (1000, 2000, 3000)
NDIR = 30
NB0 = 3
BUNDLES = {  # name: (kind, parameters, tube radius, streamline disc radius)
    "horizontal": ("line", (np.array([0.0, -9.0, 0.0]), np.array([1.0, 0, 0])), 6.0, 5.0),
    "vertical": ("line", (np.array([9.0, 0.0, 0.0]), np.array([0.0, 1, 0])), 6.0, 5.0),
    "arc": ("arc", (np.array([-20.0, 20.0]), 17.0), 5.0, 4.0),
}
FALSE = {
    "false_x": ("line", (np.array([0.0, 12.0, 0.0]), np.array([1.0, 0, 0])), 0.0, 3.0),
    "false_y": ("line", (np.array([-12.0, 0.0, 0.0]), np.array([0.0, 1, 0])), 0.0, 3.0),
}
GAMMA_AMICO = 2.675987e8  # rad/(s T): amico.synthesis._GAMMA (its 7-column schemes' b)
PYTHON = os.environ.get("PYTHON", sys.executable)
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dimoc-commitpeer")


# ---- geometry ------------------------------------------------------------------------------

def affine(shape=SHAPE, voxel=VOXEL):
    A = cs.oblique_affine(shape, voxel=voxel)
    A[:3, 3] += OFFSET
    return A


def rotation_of(aff):
    M = aff[:3, :3]
    return M / np.linalg.norm(M, axis=0)


def q_to_world(aff, q, shape=SHAPE, voxel=VOXEL):
    """Grid-frame mm (..., 3) -> world mm."""
    ijk = np.asarray(q) / voxel + (np.array(shape) - 1) / 2
    return ijk @ aff[:3, :3].T + aff[:3, 3]


def grid_box(shape=SHAPE, voxel=VOXEL):
    """Half extents (mm) of the grid in its own frame (to the outer voxel faces)."""
    return np.array(shape) * voxel / 2


def bundle_field(kind, par, radius, q):
    """(weight at q, unit tangent at q in the q frame) of one tube."""
    if kind == "line":
        c, e = par
        d = q - c
        r = np.linalg.norm(d - (d @ e)[..., None] * e, axis=-1)
        return fs.taper(r, radius), np.broadcast_to(e, q.shape)
    centre, rho0 = par
    dx, dy = q[..., 0] - centre[0], q[..., 1] - centre[1]
    rho = np.hypot(dx, dy)
    r = np.hypot(rho - rho0, q[..., 2])
    w = fs.taper(r, radius) * (dx > 0) * (dy < 0)
    t = np.stack([-dy, dx, np.zeros_like(dx)], -1) / np.maximum(rho, 1e-9)[..., None]
    return w, t


def sunflower(n, radius):
    """n points spread uniformly over a disc (Vogel's spiral): (n, 2)."""
    k = np.arange(n) + 0.5
    r = radius * np.sqrt(k / n)
    th = k * np.pi * (3 - np.sqrt(5))
    return np.stack([r * np.cos(th), r * np.sin(th)], -1)


def clip_to_box(pts, box):
    """The longest run of points strictly inside the box |q| < box (margin 1e-3 mm)."""
    inside = np.all(np.abs(pts) < box - 1e-3, axis=1)
    best, cur, start = (0, 0), 0, 0
    for i, ok in enumerate(np.append(inside, False)):
        if ok:
            if cur == 0:
                start = i
            cur += 1
        else:
            if cur > best[1] - best[0]:
                best = (start, start + cur)
            cur = 0
    return pts[best[0]:best[1]]


def tube_streamlines(kind, par, disc, n, box, step=STEP):
    """n streamlines (q frame) filling a disc of radius `disc` about the bundle's centre line."""
    off = sunflower(n, disc)
    out = []
    if kind == "line":
        c, e = par
        u = np.cross(e, [0.0, 0, 1]) if abs(e[2]) < 0.9 else np.cross(e, [1.0, 0, 0])
        u /= np.linalg.norm(u)
        v = np.cross(e, u)
        L = np.linalg.norm(box) * 2
        s = np.arange(-L, L + step / 2, step)
        for a, b in off:
            p = c + a * u + b * v
            out.append(clip_to_box(p + s[:, None] * e, box))
    else:
        centre, rho0 = par
        for a, b in off:
            rho = rho0 + a
            phi = np.arange(-np.pi / 2, 0 + 1e-9, step / rho)
            p = np.stack([centre[0] + rho * np.cos(phi), centre[1] + rho * np.sin(phi),
                          np.full_like(phi, b)], -1)
            out.append(clip_to_box(p, box))
    return [s for s in out if len(s) >= 3]


# ---- acquisition ---------------------------------------------------------------------------

def fibonacci(n):
    k = np.arange(n) + 0.5
    z = 1 - 2 * k / n
    th = k * np.pi * (3 - np.sqrt(5))
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(th), r * np.sin(th), z], -1)


def acquisition(rng, shells=SHELLS, ndir=NDIR, nb0=NB0):
    """(bvals (N,), world unit directions (N, 3)): nb0 b = 0 volumes spread through the series, then
    ndir directions per shell (a Fibonacci set, randomly rotated per shell)."""
    b, g = [], []
    for sb in shells:
        q, r = np.linalg.qr(rng.normal(size=(3, 3)))
        d = fibonacci(ndir) @ (q * np.sign(np.diag(r))).T
        b += [float(sb)] * ndir
        g += list(d)
    b, g = np.array(b), np.array(g)
    at = np.linspace(0, len(b), nb0, endpoint=False).astype(int) + np.arange(nb0)
    for i in at:
        b = np.insert(b, i, 0.0)
        g = np.insert(g, i, [1.0, 0, 0], axis=0)
    return b, g


def world_to_fsl(aff, g):
    R = rotation_of(aff)
    F = np.diag([-1.0, 1, 1]) if np.linalg.det(aff[:3, :3]) > 0 else np.eye(3)
    return (F @ R.T @ np.asarray(g).T).T


def fsl_to_voxel(aff, g_fsl):
    """FSL bvecs (N, 3) -> directions in voxel axes (what COMMIT's scheme must hold)."""
    F = np.diag([-1.0, 1, 1]) if np.linalg.det(aff[:3, :3]) > 0 else np.eye(3)
    return np.asarray(g_fsl) @ F.T


def sig_stick(b, c2, d_par=D_PAR):
    return np.exp(-b * d_par * c2)


def sig_zeppelin(b, c2, d_par=D_PAR, d_perp=D_PERP):
    return np.exp(-b * (d_perp + (d_par - d_perp) * c2))


def sig_ball(b, d):
    return np.exp(-b * d)


# ---- the phantom ---------------------------------------------------------------------------

def phantom(d, n_true=150, n_false=30, noise=0.0, seed=1, nan_peaks=False, shells=SHELLS, ndir=NDIR,
            nb0=NB0, with_false=True, fibre_signal=None, d_iso_true=D_ISO_TRUE):
    """Writes into d: dwi.nii.gz, bvals, bvecs (FSL), wm.nii.gz, peaks.nii.gz, tracks.tck
    (true streamlines first, then the false ones), ic_true.nii.gz (NU_IC x F).  noise: Rician
    sigma as a fraction of S0.  Returns a dict of paths plus 'affine', 'label' (per streamline:
    bundle name), 'is_false' (bool per streamline), 'fractions' (name -> f_b), 'bvals', 'g_world',
    'streamlines' (world mm).  fibre_signal(b, c2): a fibre's signal instead of the stick-zeppelin
    mixture above (c2 = (g.t)^2), with d_iso_true the ball's diffusivity."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    aff = affine()
    R = rotation_of(aff)
    q = fs.grid_mm(SHAPE, VOXEL)
    box = grid_box()
    bvals, g = acquisition(rng, shells, ndir, nb0)
    fr, tangents = {}, {}
    for name, (kind, par, radius, _) in BUNDLES.items():
        w, t = bundle_field(kind, par, radius, q)
        fr[name], tangents[name] = w, t @ R.T  # world tangents
    F = np.minimum(1.0, sum(fr.values()))
    scale = np.where(F > 0, F / np.maximum(sum(fr.values()), 1e-12), 0)
    sig = (1 - F)[..., None] * sig_ball(bvals, d_iso_true)
    fibre = fibre_signal or (lambda b, c2: NU_IC * sig_stick(b, c2) + (1 - NU_IC) * sig_zeppelin(b, c2))
    for name in BUNDLES:
        f = fr[name] * scale
        c2 = np.einsum("...k,nk->...n", tangents[name], g) ** 2
        sig = sig + f[..., None] * fibre(bvals, c2)
    sig = S0_VALUE * sig
    if noise > 0:
        sig = cs.add_noise(rng, sig, noise * S0_VALUE)
    out = {"affine": aff, "fractions": fr, "bvals": bvals, "g_world": g}
    out["dwi"] = fs.save(f"{d}/dwi.nii.gz", sig, aff)
    out["ic_true"] = fs.save(f"{d}/ic_true.nii.gz", NU_IC * F, aff)
    bv, bvec = f"{d}/bvals", f"{d}/bvecs"
    np.savetxt(bv, bvals[None], fmt="%g")
    np.savetxt(bvec, world_to_fsl(aff, g).T, fmt="%.8f")
    out["bvals_file"], out["bvecs_file"] = bv, bvec
    mask = np.zeros(SHAPE, np.uint8)
    mask[1:-1, 1:-1, :] = 1
    out["wm"] = fs.save(f"{d}/wm.nii.gz", mask, aff, np.uint8)
    # peaks: up to 3 per voxel, largest first
    names = list(BUNDLES)
    amp = np.stack([fr[n] for n in names], -1)
    vec = np.stack([tangents[n] for n in names], -2)
    order = np.argsort(-amp, axis=-1)
    peaks = np.zeros(SHAPE + (9,), np.float32)
    for k in range(3):
        a = np.take_along_axis(amp, order[..., k:k + 1], -1)[..., 0]
        v = np.take_along_axis(vec, order[..., k:k + 1, None], -2)[..., 0, :]
        p = a[..., None] * v
        if nan_peaks:
            p[a <= 0] = np.nan
        peaks[..., 3 * k:3 * k + 3] = p
    out["peaks"] = fs.save(f"{d}/peaks.nii.gz", peaks, aff)
    # streamlines
    sl, label = [], []
    sets = dict(BUNDLES, **(FALSE if with_false else {}))
    for name, (kind, par, _, disc) in sets.items():
        n = n_false if name in FALSE else n_true
        for s in tube_streamlines(kind, par, disc, n, box):
            sl.append(q_to_world(aff, s))
            label.append(name)
    out["streamlines"] = sl
    out["label"] = np.array(label)
    out["is_false"] = np.array([n in FALSE for n in label])
    out["tck"] = write_tck(f"{d}/tracks.tck", sl)
    return out


def write_tck(path, streamlines):
    t = nib.streamlines.Tractogram([np.asarray(s, np.float32) for s in streamlines], affine_to_rasmm=np.eye(4))
    nib.streamlines.save(t, path)
    return path


# ---- running COMMIT ------------------------------------------------------------------------

_SCRIPT = r'''
import json, os, pickle, sys, time
cfg = json.load(open(sys.argv[1]))
os.environ["DIPY_HOME"] = cfg["cache"]
T = {}
t = time.time()
import numpy as np
import amico, amico.lut, amico.util
import commit
from commit import trk2dictionary
from importlib.metadata import version
T["import"] = time.time() - t
t = time.time()
amico.lut.precompute_rotation_matrices(cfg["lmax"], cfg["ndirs"])   # what commit.core.setup() does, for one ndirs
T["setup"] = time.time() - t
work = cfg["work"]
t = time.time()
if "blur_apply_to" in cfg["t2d_extra"]:  # an array of bools (COMMIT reads its .size)
    cfg["t2d_extra"]["blur_apply_to"] = np.array(cfg["t2d_extra"]["blur_apply_to"], dtype=bool)
trk2dictionary.run(filename_tractogram=cfg["tck"], filename_peaks=cfg["peaks"], filename_mask=cfg["mask"],
                   path_out=os.path.join(work, "COMMIT"), fiber_shift=cfg["fiber_shift"],
                   peaks_use_affine=cfg["peaks_use_affine"], vf_THR=cfg["vf_THR"], min_seg_len=cfg["min_seg_len"],
                   min_fiber_len=cfg["min_fiber_len"], max_fiber_len=cfg["max_fiber_len"], ndirs=cfg["ndirs"],
                   n_threads=cfg["threads"], verbose=cfg["verbose"], **cfg["t2d_extra"])
T["trk2dictionary"] = time.time() - t
mit = commit.Evaluation(work, ".", dictionary_path="COMMIT")
mit.set_verbose(cfg["verbose"])
for k, v in cfg["config"].items():
    mit.set_config(k, v)
t = time.time()
mit.load_data(cfg["dwi"], cfg["scheme"], b0_thr=cfg["b0_thr"], b0_min_signal=cfg["b0_min_signal"])
T["load_data"] = time.time() - t
mit.set_model(cfg["model"])
for k, v in cfg["model_attrs"].items():  # e.g. ScalarMap's lesion_mask
    setattr(mit.model, k, v)
if cfg["model"] == "StickZeppelinBall":
    mit.model.set(d_par=cfg["d_par"], d_perps_zep=cfg["d_perps"], d_isos=cfg["d_isos"], **cfg["model_extra"])
if cfg["model"] == "CylinderZeppelinBall":
    mit.model.set(d_par=cfg["d_par"], Rs=cfg["model_extra"]["Rs"], d_perps=cfg["d_perps"], d_isos=cfg["d_isos"])
    mit.model.isExvivo = False  # dmri-amico 2.1.1's get_params reads it, nothing sets it (docs/commit-facts.md)
t = time.time()
mit.generate_kernels(regenerate=True, lmax=cfg["lmax"], ndirs=cfg["ndirs"])
mit.load_kernels()
T["kernels"] = time.time() - t
t = time.time()
mit.load_dictionary()
mit.set_threads(cfg["threads"])
mit.build_operator()
T["operator"] = time.time() - t
lassos = [cfg.get("lasso") if not cfg.get("group_lasso") else None, cfg.get("lasso_ec"), cfg.get("lasso_iso")]
nonneg = tuple(cfg.get("is_nonnegative") or (True, True, True))
if cfg.get("iso_weights_img"):  # the weighted ISO lasso from an image (its own set_regularisation)
    mit.set_wLasso_ISO(cfg["iso_weights_img"], cfg["lasso_iso"])
elif any(lassos) or not all(nonneg):  # COMMIT's lasso per block (IC, EC, ISO)
    ic_params = ({"coeff_weights": np.array(cfg["ic_weights"], dtype=np.float64)}
                 if cfg.get("ic_weights") is not None else None)
    mit.set_regularisation(regularisers=tuple("lasso" if v else None for v in lassos),
                           lambdas=tuple(v if v else None for v in lassos), is_nonnegative=nonneg,
                           params=(ic_params, None, None))
if cfg.get("group_lasso"):  # COMMIT2: a fit without regularisation first (the adaptive weights)
    mit.fit(tol_fun=cfg["tol_fun"], tol_x=cfg["tol_x"], max_iter=cfg["max_iter"])
    labels = np.array(cfg["groups"])
    idx = np.empty(len(np.unique(labels)), dtype=np.object_)
    for k, l in enumerate(np.unique(labels)):
        idx[k] = np.flatnonzero(labels == l).astype(np.int32)
    # both lambdas: COMMIT2's sparse group lasso (the lasso's soft threshold, then the groups')
    reg, lam = (("sparse_group_lasso", (cfg["lasso"], cfg["group_lasso"])) if cfg.get("lasso")
                else ("group_lasso", cfg["group_lasso"]))
    ic_params = {"group_idx": idx, "group_weights_cardinality": True, "group_weights_adaptive": True}
    if cfg.get("ic_weights") is not None:  # the weighted sparse group lasso
        ic_params["coeff_weights"] = np.array(cfg["ic_weights"], dtype=np.float64)
    mit.set_regularisation(regularisers=(reg, None, None), lambdas=(lam, None, None), is_nonnegative=nonneg,
                           params=(ic_params, None, None))
t = time.time()
mit.fit(tol_fun=cfg["tol_fun"], tol_x=cfg["tol_x"], max_iter=cfg["max_iter"], **cfg["fit_extra"])
T["fit"] = time.time() - t
t = time.time()
mit.save_results()
T["save"] = time.time() - t
K = mit.KERNELS
D = mit.DICTIONARY
np.savez(os.path.join(work, "peer.npz"), x=mit.x,
         wmr=K["wmr"], wmh=K["wmh"], iso=K["iso"],
         wmr_norm=K.get("wmr_norm", np.zeros(0)), wmh_norm=K.get("wmh_norm", np.zeros(0)),
         iso_norm=K.get("iso_norm", np.zeros(0)),
         trk_kept=D["TRK"]["kept"], trk_norm=D["TRK"]["norm"], trk_len=D["TRK"]["len"],
         trk_lentot=D["TRK"]["lenTot"], ic_str=D["IC"]["str"], ic_vox=D["IC"]["vox"],
         ic_dir=D["IC"]["dir"], ic_len=D["IC"]["len"], ec_vox=D["EC"]["vox"], ec_dir=D["EC"]["dir"],
         iso_vox=D["ISO"]["vox"], mask_ix=D["MASK_ix"], mask_iy=D["MASK_iy"], mask_iz=D["MASK_iz"],
         y=mit.get_y())
fd = dict(mit.CONFIG["optimization"]["fit_details"])
json.dump({"fit_details": {k: (float(v) if not isinstance(v, str) else v) for k, v in fd.items()},
           "seconds": T, "version": version("dmri-commit"), "amico_version": version("dmri-amico"),
           "nSTR": int(D["IC"]["nSTR"]), "n_ic": int(D["IC"]["n"]), "n_ec": int(D["EC"]["n"]),
           "n_iso": int(D["ISO"]["n"]), "n_vox": int(D["IC"]["nVOX"]),
           "nS": int(mit.niiDWI_img.shape[3]), "results": mit.get_config("RESULTS_path")},
          open(os.path.join(work, "peer.json"), "w"), indent=1)
'''


def write_scheme(path, bvals, g):
    """COMMIT/AMICO's 4-column scheme (x y z b, one row per volume, Camino header)."""
    with open(path, "w") as f:
        f.write("VERSION: BVECTOR\n")
        for v, b in zip(np.asarray(g), bvals):
            f.write(f"{v[0]:.8f} {v[1]:.8f} {v[2]:.8f} {b:g}\n")
    return path


def pulse_strength(bvals, Delta, delta):
    """G (T/m) that gives each b-value (s/mm^2) with these pulse timings (s), by AMICO's gamma."""
    return np.sqrt(np.asarray(bvals, float) * 1e6 / (Delta - delta / 3)) / (GAMMA_AMICO * delta)


def write_scheme_st(path, bvals, g, Delta, delta, TE=0.08):
    """Camino's STEJSKALTANNER scheme (x y z G Delta delta TE), what COMMIT's cylinders need."""
    G = pulse_strength(bvals, Delta, delta)
    with open(path, "w") as f:
        f.write("VERSION: STEJSKALTANNER\n")
        for v, Gi in zip(np.asarray(g), G):
            f.write(f"{v[0]:.8f} {v[1]:.8f} {v[2]:.8f} {Gi:.10g} {Delta:g} {delta:g} {TE:g}\n")
    return path


def load_fsl(bvals, bvecs):
    b = np.loadtxt(bvals).ravel()
    g = np.loadtxt(bvecs)
    return b, (g.T if g.shape[0] == 3 else g)


def run_commit(work, dwi, bvals, bvecs, tck, mask, peaks, d_par=D_PAR, d_perps=(D_PERP,), d_isos=D_ISOS,
               model="StickZeppelinBall", fiber_shift=0.5, peaks_use_affine=True, vf_THR=0.1,
               min_seg_len=1e-3, min_fiber_len=0.0, max_fiber_len=250.0, ndirs=500, lmax=12, tol_fun=1e-3,
               tol_x=1e-6, max_iter=100, b0_thr=0.0, b0_min_signal=0.0, threads=1, bvecs_frame="voxel",
               config=None, model_extra=None, t2d_extra=None, verbose=2, timeout=600, lasso=0.0,
               group_lasso=0.0, groups=None, pulses=None, fit_extra=None, model_attrs=None, lasso_ec=0.0,
               lasso_iso=0.0, ic_weights=None, iso_weights_img=None, is_nonnegative=None):
    """Runs COMMIT (dmri-commit) in a child python on these inputs, in the fresh folder `work`; returns a
    dict: 'weights' (streamline_weights.txt, one per streamline of the .tck), 'ic', 'ec', 'iso',
    'nrmse', 'rmse' (the maps, arrays), 'objective' (the solver's final 0.5||Ax-y||^2 + Omega, in its
    b0-normalised units), 'fit_details' (iterations, stopping criterion, ...), 'seconds' (per stage,
    and 'total' for the whole child process), 'peer' (np.load of work/peer.npz: COMMIT's x, kernels,
    dictionary), 'info' (counts, versions), 'results' (the results folder), 'log' (its output).
    Defaults are COMMIT's (trk2dictionary.run, Evaluation.fit), except: fiber_shift 0.5 (COMMIT's
    own .tck demo: voxel centres as NIfTI has them; COMMIT's default 0 puts voxel corners there),
    peaks_use_affine True (world-frame peaks), the model's diffusivities (COMMIT's demo values, not
    the model's defaults: d_perps (1.19, 0.85, 0.51, 0.17)e-3, d_isos (3.0e-3,)) and threads 1.
    bvecs_frame 'voxel': the scheme holds the FSL bvecs turned into voxel axes (correct for any
    affine); 'fsl': the FSL bvecs as they are (a mirror in x where det(affine) > 0).
    config: Evaluation.set_config keys (doNormalizeSignal, doMergeB0, doNormalizeKernels, ...).
    lasso: COMMIT's lasso on the IC block, set_regularisation(('lasso', None, None), (lasso, ...))
    (0: none); group_lasso with groups (a label per streamline): COMMIT2's group lasso (with lasso
    too: its sparse group lasso), after a
    fit without it (its adaptive weights), cardinality and adaptive weights on.
    lasso_ec, lasso_iso: COMMIT's lasso on the EC and ISO blocks (0: none), with lasso in one
    set_regularisation(('lasso' or None, ...), (lasso, lasso_ec, lasso_iso)).
    ic_weights: one weight per streamline, the IC lasso's coeff_weights; is_nonnegative: (IC, EC,
    ISO) flags of set_regularisation; iso_weights_img: set_wLasso_ISO(image, lasso_iso) instead
    (the ISO lasso weighted per voxel, weights >= 1).
    pulses (Delta, delta) in s: a STEJSKALTANNER scheme (G from each b by AMICO's gamma), for
    model 'CylinderZeppelinBall' (its radii in metres: model_extra={'Rs': [...]}).
    t2d_extra, fit_extra: more arguments of trk2dictionary.run and of the final fit()
    (blur_apply_to given as a list is passed as a bool array); model_attrs: attributes set on
    mit.model after set_model (ScalarMap's lesion_mask)."""
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    os.makedirs(CACHE, exist_ok=True)
    if model == "ScalarMap":  # a 3D map, no scheme, no peaks, one direction (COMMIT forces it)
        scheme, peaks, ndirs = None, None, 1
    else:
        b, g = load_fsl(bvals, bvecs)
        aff = nib.load(dwi).affine
        gs = fsl_to_voxel(aff, g) if bvecs_frame == "voxel" else g
        if pulses:  # (Delta, delta): the 7-column scheme (CylinderZeppelinBall)
            scheme = write_scheme_st(os.path.join(work, "dwi.scheme"), b, gs, *pulses)
        else:
            scheme = write_scheme(os.path.join(work, "dwi.scheme"), b, gs)
    cfg = dict(cache=CACHE, work=os.path.abspath(work), tck=os.path.abspath(tck), peaks=os.path.abspath(peaks) if peaks else None,
               mask=os.path.abspath(mask) if mask else None, dwi=os.path.abspath(dwi),
               scheme=os.path.abspath(scheme) if scheme else None,
               fiber_shift=fiber_shift, peaks_use_affine=peaks_use_affine, vf_THR=vf_THR,
               min_seg_len=min_seg_len, min_fiber_len=min_fiber_len, max_fiber_len=max_fiber_len,
               ndirs=ndirs, lmax=lmax, tol_fun=tol_fun, tol_x=tol_x, max_iter=max_iter, b0_thr=b0_thr,
               b0_min_signal=b0_min_signal, threads=threads, model=model, d_par=d_par, d_perps=list(d_perps),
               d_isos=list(d_isos), config=config or {}, model_extra=model_extra or {},
               t2d_extra=t2d_extra or {}, verbose=verbose, lasso=lasso, group_lasso=group_lasso,
               lasso_ec=lasso_ec, lasso_iso=lasso_iso,
               ic_weights=[float(v) for v in ic_weights] if ic_weights is not None else None,
               iso_weights_img=os.path.abspath(iso_weights_img) if iso_weights_img else None,
               is_nonnegative=list(is_nonnegative) if is_nonnegative is not None else None,
               groups=[int(v) for v in groups] if groups is not None else None,
               fit_extra=fit_extra or {}, model_attrs=model_attrs or {})
    cfg_path = os.path.join(work, "peer_config.json")
    json.dump(cfg, open(cfg_path, "w"), indent=1)
    script = os.path.join(work, "peer_run.py")
    open(script, "w").write(_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONWARNINGS="ignore")

    def compute(folder):  # COMMIT in a child python, in `work`; the folder kept in the cache
        t0 = time.time()
        p = subprocess.run([PYTHON, script, cfg_path], capture_output=True, text=True, env=env,
                           timeout=timeout, cwd=work)
        log = p.stdout + p.stderr
        open(os.path.join(work, "peer.log"), "w").write(log)
        if p.returncode != 0 or not os.path.exists(os.path.join(work, "peer.json")):
            raise RuntimeError(f"dmri-commit failed (exit {p.returncode}):\n{log[-3000:]}")
        peercache.copy_files(work, folder)
        results = json.load(open(os.path.join(work, "peer.json")))["results"]
        return {"results": os.path.relpath(results, work), "total": time.time() - t0}

    # The run's key: its settings, its input files by content (not by path), the child's script.
    spec = {k: v for k, v in cfg.items() if k not in ("cache", "work")}
    inputs = []
    for k in ("tck", "peaks", "mask", "dwi", "scheme", "iso_weights_img"):
        if spec.get(k):
            inputs.append(spec[k])
            spec[k] = os.path.splitext(spec[k])[1]
    entry, meta = peercache.cached_folder(
        "commit", peercache.python_versions("dmri-commit", "dmri-amico", "dmri-dicelib", "cython"),
        dict(spec, script=_SCRIPT), compute, inputs)
    peercache.copy_files(entry, work)
    log, total = open(os.path.join(work, "peer.log")).read(), meta["total"]
    info = json.load(open(os.path.join(work, "peer.json")))
    res = os.path.join(work, meta["results"])
    out = {"work": work, "results": res, "log": log, "info": info, "fit_details": info["fit_details"],
           "objective": info["fit_details"]["cost_function"], "seconds": dict(info["seconds"], total=total)}
    out["weights"] = np.loadtxt(os.path.join(res, "streamline_weights.txt"), ndmin=1)
    for key, name in [("ic", "compartment_IC"), ("ec", "compartment_EC"), ("iso", "compartment_ISO"),
                      ("nrmse", "fit_NRMSE"), ("rmse", "fit_RMSE")]:
        out[key] = np.asarray(nib.load(os.path.join(res, name + ".nii.gz")).dataobj, dtype=np.float64)
    out["peer"] = dict(np.load(os.path.join(work, "peer.npz")))
    out["fit_mask"] = np.asarray(nib.load(os.path.join(work, "COMMIT", "dictionary_tdi.nii.gz")).dataobj) > 0
    return out


def run_on_phantom(work, p, **kw):
    """run_commit on a phantom() dict."""
    return run_commit(work, p["dwi"], p["bvals_file"], p["bvecs_file"], p["tck"], p["wm"], p["peaks"], **kw)


# ---- reading results -----------------------------------------------------------------------

def objective(y, Ax):
    """COMMIT's data term 0.5 ||Ax - y||^2 (y b0-normalised, over the fit voxels, every volume)."""
    return 0.5 * float(np.sum((np.asarray(Ax) - np.asarray(y)) ** 2))


def nrmse_of(y, yhat):
    """COMMIT's fit_NRMSE of one voxel's (or (..., nS)) signals: sqrt(sum (y - yhat)^2 / sum y^2), 0
    where sum y^2 < 1e-12; every volume, b = 0 included."""
    y, yhat = np.asarray(y, float), np.asarray(yhat, float)
    den = np.sum(y * y, axis=-1)
    num = np.sum((y - yhat) ** 2, axis=-1)
    return np.where(den < 1e-12, 0.0, np.sqrt(num / np.where(den < 1e-12, 1, den)))


def summary(r, p=None):
    """A few numbers of a run (and of the phantom p's truth, when given) as a dict."""
    m = r["fit_mask"]
    s = {"streamlines": int(r["weights"].size), "kept": int(r["peer"]["trk_kept"].sum()),
         "nonzero": int(np.count_nonzero(r["weights"] > 0)), "objective": r["objective"],
         "iterations": int(r["fit_details"]["iterations"]), "stop": r["fit_details"]["stopping_criterion"],
         "fit_voxels": int(m.sum()), "nrmse_mean": float(r["nrmse"][m].mean()),
         "nrmse_max": float(r["nrmse"][m].max()), "rmse_mean": float(r["rmse"][m].mean())}
    for k in ("ic", "ec", "iso"):
        s[k + "_mean"] = float(r[k][m].mean())
    s["total_mean"] = float((r["ic"] + r["ec"] + r["iso"])[m].mean())
    if p is not None:
        w = r["weights"]
        s["false_weight_fraction"] = float(w[p["is_false"]].sum() / max(w.sum(), 1e-300))
        s["false_zero"] = int(np.count_nonzero(w[p["is_false"]] == 0))
        s["false_count"] = int(p["is_false"].sum())
        ic_true = np.asarray(nib.load(p["ic_true"]).dataobj, float)
        s["ic_corr_truth"] = float(np.corrcoef(r["ic"][m], ic_true[m])[0, 1])
    return s


# ---- checking COMMIT's outputs against the facts (docs/commit-facts.md) ----------------------

def voxel_lengths(pts_world, aff, shape, mask=None, fiber_shift=0.0, voxel=None, min_seg_len=1e-3):
    """Per-voxel lengths (mm) of one polyline as trk2dictionary cuts it: points go to voxel
    coordinates through the affine, plus fiber_shift voxels; voxel i holds coordinates [i, i + 1)
    (so fiber_shift 0.5 gives the nearest voxel centre); every step is cut at voxel faces, each piece
    belongs to the voxel of its midpoint; pieces outside the grid or the mask, or not longer than
    min_seg_len, are dropped.  Returns {(i, j, k): length}.  (Orientation bins are not split here.)"""
    vs = np.linalg.norm(aff[:3, :3], axis=0) if voxel is None else np.broadcast_to(voxel, 3)
    u = (np.asarray(pts_world, float) - aff[:3, 3]) @ np.linalg.inv(aff[:3, :3]).T + fiber_shift
    out = {}
    for a, b in zip(u[:-1], u[1:]):
        d = b - a
        ts = [0.0, 1.0]
        for k in range(3):
            if d[k] != 0:
                lo, hi = sorted((a[k], b[k]))
                ts += [(c - a[k]) / d[k] for c in range(int(np.floor(lo)) + 1, int(np.ceil(hi)))]
        ts = sorted(ts)
        for t0, t1 in zip(ts[:-1], ts[1:]):
            L = float(np.linalg.norm(d * (t1 - t0) * vs))
            if L <= min_seg_len:
                continue
            v = tuple(int(c) for c in np.floor(a + d * (t0 + t1) / 2))
            if any(c < 0 or c >= n for c, n in zip(v, shape)) or (mask is not None and not mask[v]):
                continue
            out[v] = out.get(v, 0.0) + L
    return out


def rebuild(r):
    """Recomputes, from COMMIT's own x, kernels and dictionary (r['peer']), what docs/commit-facts.md
    says it computes: A x and the objective, the streamline weights, the IC/EC/ISO maps, NRMSE and
    RMSE.  Returns the largest discrepancies (dict); all are ~1e-6 or less when the facts hold, except
    'iso_all_balls' (the ISO map with every ball counted, which COMMIT 2.4.2 does not write)."""
    P = r["peer"]
    x = P["x"]
    nSTR, nE, nI = len(P["trk_norm"]), len(P["ec_vox"]), len(P["iso_vox"])
    nRF, nEC, nISO = P["wmr"].shape[0], P["wmh"].shape[0], P["iso"].shape[0]
    ix, iy, iz = P["mask_ix"], P["mask_iy"], P["mask_iz"]
    nV = len(ix)
    y = P["y"].reshape(nV, -1)
    Y = np.zeros_like(y)
    xic = x[:nSTR * nRF].reshape(nRF, nSTR)
    for k in range(nRF):
        np.add.at(Y, P["ic_vox"], (xic[k][P["ic_str"]] * P["ic_len"])[:, None] * P["wmr"][k][P["ic_dir"]])
    xec = x[nSTR * nRF:nSTR * nRF + nE * nEC].reshape(nEC, nE)
    for k in range(nEC):
        np.add.at(Y, P["ec_vox"], xec[k][:, None] * P["wmh"][k][P["ec_dir"]])
    xiso = x[nSTR * nRF + nE * nEC:].reshape(nISO, nI)
    for k in range(nISO):
        np.add.at(Y, P["iso_vox"], xiso[k][:, None] * P["iso"][k][None])
    kept = P["trk_kept"] == 1
    w = np.zeros(kept.size)
    w[kept] = (xic / (P["wmr_norm"][:, None] * P["trk_norm"][None])).sum(0)
    L = P["ic_len"] * P["trk_norm"][P["ic_str"]]  # back to mm (load_dictionary divided by the norm)
    ic = np.zeros(nV)
    np.add.at(ic, P["ic_vox"], w[kept][P["ic_str"]] * L)
    ec = np.zeros(nV)
    for k in range(nEC):
        np.add.at(ec, P["ec_vox"], xec[k] / P["wmh_norm"][k])
    iso0, iso = np.zeros(nV), np.zeros(nV)
    np.add.at(iso0, P["iso_vox"], xiso[0] / P["iso_norm"][0])
    for k in range(nISO):
        np.add.at(iso, P["iso_vox"], xiso[k] / P["iso_norm"][k])
    rel = lambda a, b: float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))  # noqa: E731
    return {"objective": abs(objective(y, Y) - r["objective"]) / r["objective"],
            "weights": rel(w, r["weights"]), "ic": rel(ic, r["ic"][ix, iy, iz]), "ec": rel(ec, r["ec"][ix, iy, iz]),
            "iso_first_ball": rel(iso0, r["iso"][ix, iy, iz]), "iso_all_balls": rel(iso, r["iso"][ix, iy, iz]),
            "nrmse": float(np.abs(nrmse_of(y, Y) - r["nrmse"][ix, iy, iz]).max()),
            "rmse": float(np.abs(np.sqrt(np.mean((y - Y) ** 2, -1)) - r["rmse"][ix, iy, iz]).max())}


def check_lengths(r, p, fiber_shift=0.5, every=1):
    """Largest differences (mm) between voxel_lengths() and COMMIT's dictionary over the streamlines
    of phantom p (every `every`-th): per-voxel lengths, in-mask length (TRK len), norm (TRK norm);
    and the number of voxels found by one side only."""
    P = r["peer"]
    mask = np.asarray(nib.load(p["wm"]).dataobj) > 0
    ix, iy, iz = P["mask_ix"], P["mask_iy"], P["mask_iz"]
    L = P["ic_len"] * P["trk_norm"][P["ic_str"]]
    row = np.cumsum(P["trk_kept"]) - 1
    worst = {"voxel": 0.0, "len": 0.0, "norm": 0.0, "unmatched": 0}
    for s in range(0, len(p["streamlines"]), every):
        mine = voxel_lengths(p["streamlines"][s], p["affine"], SHAPE, mask, fiber_shift)
        if not P["trk_kept"][s]:
            worst["unmatched"] += len(mine)
            continue
        sel = P["ic_str"] == row[s]
        theirs = {}
        for v, l in zip(P["ic_vox"][sel], L[sel]):
            k = (int(ix[v]), int(iy[v]), int(iz[v]))
            theirs[k] = theirs.get(k, 0.0) + float(l)
        worst["unmatched"] += len(set(mine) ^ set(theirs))
        worst["voxel"] = max([worst["voxel"]] + [abs(mine.get(k, 0) - theirs.get(k, 0)) for k in set(mine) | set(theirs)])
        worst["len"] = max(worst["len"], abs(sum(mine.values()) - float(P["trk_len"][row[s]])))
        worst["norm"] = max(worst["norm"], abs(np.sqrt(sum(v * v for v in mine.values())) - float(P["trk_norm"][row[s]])))
    return worst
