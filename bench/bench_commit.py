#!/usr/bin/env python3
"""COMMIT benchmark: `dimoc commit` against dmri-commit 2.4.2 (COMMIT itself, the named peer,
measured in the same run on the same host, inputs, peaks, model and diffusivities), per stage,
with the floor of the operator products counted and the fraction of the memory bandwidth
reached.  Not a test.

  bench/bench_commit.py [--streamlines 1000000] [--copies K] [--small] [--work DIR]
                        [--devices cpu[,gpu]] [--threads N] [--peer-threads N] [--skip-commit]
                        [--repeat K] [--estimate-only]

The case (synthetic, built with numpy and cached in --work: reused when its parameters match):
  grid     90 x 108 x 90 voxels of 2 mm (--small: 40 x 40 x 40), LAS: voxel -> world is
           diag(-2, 2, 2) plus a shift that puts the grid's centre at world 0 (det < 0, so the
           FSL bvecs are the voxel axes, which is what COMMIT takes them as: its scheme gets the
           same numbers and both tools see the same directions);
  WM       the ellipsoid of 0.76 of the grid's half extents (about 200,000 voxels; --small
           about 14,000), inside a "brain" ellipsoid (0.95) of grey-matter-like signal;
  fibres   two smooth fields in every WM voxel (those of bench/bench_track.py): one circling the
           z axis, one along z, fractions varying with the distance to the axis (0.25 + 0.35 t
           and 0.45 - 0.25 t, t = rho / semi-axis); the rest two balls (d 1.7e-3 and 3.0e-3);
  signal   stick-zeppelin-ball (COMMIT's model: intra-axonal share 0.6, d_par 1.7e-3, d_perp
           0.51e-3), S0 1000, Rician noise (--snr 30); 3 shells b = 1000, 2000, 3000 with
           --directions (40) directions each (a Fibonacci set turned at random per shell) and
           6 b = 0 volumes;
  peaks    sh2peaks' layout (3 peaks x 3 volumes, world frame, the larger fraction first, zeros
           where no peak: NOT NaN, which COMMIT reads wrongly);
  tracks   --streamlines (1,000,000; --small 20,000) analytic curves sampled every 1 mm: 55%
           arcs of the circles about z, 35% lines along z, both with a 0.5 mm sinusoidal wobble,
           and 10% false ones (straight lines in random directions, which no fibre supports),
           each of a random length in 20-150 mm around a seed uniform in the WM and cut to the
           longest piece inside it that holds the seed; written as MRtrix .tck.  --copies K
           writes that tractogram K times over, each streamline of each copy moved by its own
           random offset (uniform in +-half a voxel on each axis): a large input (10 x 1,000,000)
           without generating every curve.

Runs (each tool with COMMIT's default tolerances: tol_fun 1e-3, tol_x 1e-6, 100 iterations;
d_par 1.7e-3, d_perp 0.51e-3, d_iso 1.7e-3,3.0e-3; fibre positions as NIfTI voxel centres: dimoc's
default, COMMIT's fiber_shift=0.5; peaks_use_affine=True):
  dimoc   `dimoc commit --threads N` (all cores by default); with --devices cpu,gpu also
          `--device gpu` (the option is passed only then); stages from its provenance.json;
  COMMIT  a driver script in the peer's Python (the first of $PYTHON, this Python, /usr/bin/python3
          that imports commit) timing trk2dictionary.run (dictionary), load_data (load),
          generate_kernels + load_kernels (kernels), load_dictionary + set_threads +
          build_operator (operator), fit (solve) and save_results (write); n_threads and
          set_threads = --peer-threads (all cores by default); BLAS threads left as they are.
"whole" is the wall time of each process (COMMIT's includes importing it, about 0.5-2 s).  Peak
memory is the process's maximum resident set (wait4's ru_maxrss; the case is built in a separate
process so that the bench's own high-water mark, which Linux carries into its children, stays
small).  --repeat K runs the tools K times in turn and reports each one's fastest run (for a
shared host).  --estimate-only prints the case's sizes, the operator's floor and the memory each
tool needs (memory_estimate(), with the segments counted on 20,000 sampled streamlines) without
building or running anything.

Floor of the operator products (per product; see floor_bytes()): the bytes a product cannot
avoid moving, counted from each tool's own dictionary sizes.  COMMIT's FISTA does 2 A x and 1
A^T y per iteration; dimoc's 1 A x and 1 A^T y, the residual at the extrapolated point being the
sum of those at the two points it comes from (reading two residuals and writing one: 24 bytes a
row, counted).  Both do one A x per backtracking step and 3 products before the first
iteration, not counted.  The bandwidth figure takes each tool's bytes an iteration
(iteration_bytes()), the iteration count from the tool, and the solve stage's seconds (which
also hold the solver's vector updates on the unknowns, not counted).
The ceiling: a large copy measured here on the host (CPU runs, both tools), the GPU's nominal
bandwidth (H100 3.35 TB/s, H200 4.8 TB/s; --gpu-gbs).  GFLOP/s beside it counts one multiply-add
per sample for every segment, EC and ISO compartment of each product (2 flops): where the
dictionary fits in cache (the --small case) the products are bound by arithmetic, not memory."""
import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time

import nibabel as nib
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIMOC = os.environ.get("DIMOC", os.path.join(ROOT, "bin", "dimoc"))

VOXEL = 2.0
WM_FRAC, BRAIN_FRAC = 0.76, 0.95
SHELLS = (1000.0, 2000.0, 3000.0)
NB0 = 6
S0 = 1000.0
NU_IC = 0.6
D_PAR, D_PERP, D_ISOS = 1.7e-3, 0.51e-3, (1.7e-3, 3.0e-3)
ISO_SHARE = (0.6, 0.4)  # of the non-fibre fraction: ball 1.7e-3, ball 3.0e-3
STEP = 1.0  # mm between streamline points
LEN_MIN, LEN_MAX = 20.0, 150.0
KINDS = (0.55, 0.35, 0.10)  # circling z, along z, false
WOBBLE = 0.5  # mm
NDIRS = 500  # both tools' lookup-table directions (COMMIT's default ndirs)
CASES = {"big": ((90, 108, 90), 1000000), "small": ((40, 40, 40), 20000)}
GPU_GBS = {"H200": 4800.0, "H100": 3350.0}  # nominal HBM bandwidth, GB/s


# ---- the case ------------------------------------------------------------------------------

def affine(shape):
    """LAS, 2 mm, the grid's centre at world 0: world = (-2 (i - ci), 2 (j - cj), 2 (k - ck))."""
    c = (np.array(shape) - 1) / 2
    a = np.diag([-VOXEL, VOXEL, VOXEL, 1.0])
    a[:3, 3] = [VOXEL * c[0], -VOXEL * c[1], -VOXEL * c[2]]
    return a


def semi_axes(shape, frac):
    return frac * (np.array(shape) - 1) * VOXEL / 2


def fibonacci(n):
    k = np.arange(n) + 0.5
    z = 1 - 2 * k / n
    th = k * np.pi * (3 - np.sqrt(5))
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(th), r * np.sin(th), z], -1)


def scheme(rng, ndir):
    """(bvals, world unit directions): NB0 b = 0 volumes spread through the series, ndir
    directions per shell (a Fibonacci set, turned at random per shell)."""
    b, g = [], []
    for sb in SHELLS:
        q, r = np.linalg.qr(rng.normal(size=(3, 3)))
        b += [sb] * ndir
        g += list(fibonacci(ndir) @ (q * np.sign(np.diag(r))).T)
    b, g = np.array(b), np.array(g)
    for i in np.linspace(0, len(b), NB0, endpoint=False).astype(int) + np.arange(NB0):
        b = np.insert(b, i, 0.0)
        g = np.insert(g, i, [1.0, 0, 0], axis=0)
    return b, g


def fibre_fields(w, semi):
    """At world points w (n, 3): (f_circ, t_circ, f_z, t_z) with unit world tangents."""
    rho = np.hypot(w[:, 0], w[:, 1])
    t = np.clip(rho / semi[0], 0, 1)
    safe = np.maximum(rho, 1e-9)
    tc = np.stack([-w[:, 1] / safe, w[:, 0] / safe, np.zeros(len(w))], 1)
    tc[rho < 1e-9] = [1.0, 0, 0]
    tz = np.tile([0.0, 0, 1], (len(w), 1))
    return 0.25 + 0.35 * t, tc, 0.45 - 0.25 * t, tz


def make_data(d, shape, ndir, snr, seed):
    """dwi.nii (float32, uncompressed: both tools' load stage is then reading, not gunzip),
    bvals, bvecs, wm.nii.gz, peaks.nii.gz, meta.json; reused when meta.json matches."""
    meta = {"shape": list(shape), "directions": ndir, "snr": snr, "seed": seed, "version": 1}
    mpath = f"{d}/meta.json"
    if os.path.exists(mpath) and json.load(open(mpath)).get("params") == meta:
        return json.load(open(mpath))
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    rng = np.random.default_rng(seed)
    aff = affine(shape)
    bvals, g = scheme(rng, ndir)
    nvol = len(bvals)
    wm_semi, br_semi = semi_axes(shape, WM_FRAC), semi_axes(shape, BRAIN_FRAC)
    ijk = np.indices(shape).reshape(3, -1).T
    w = ijk * np.diag(aff)[:3] + aff[:3, 3]
    wm = (((w / wm_semi) ** 2).sum(1) <= 1)
    brain = (((w / br_semi) ** 2).sum(1) <= 1)
    data = np.zeros((int(np.prod(shape)), nvol), np.float32)
    peaks = np.zeros((int(np.prod(shape)), 9), np.float32)
    ball = lambda dd: np.exp(-bvals * dd)  # noqa: E731
    sigma = S0 / snr
    # grey-matter-like signal outside the WM
    gm = np.flatnonzero(brain & ~wm)
    for lo in range(0, len(gm), 50000):
        v = gm[lo:lo + 50000]
        s = S0 * (0.8 * ball(0.8e-3) + 0.2 * ball(3.0e-3))
        data[v] = np.hypot(s + rng.normal(scale=sigma, size=(len(v), nvol)),
                           rng.normal(scale=sigma, size=(len(v), nvol)))
    vox = np.flatnonzero(wm)
    iso_sig = ISO_SHARE[0] * ball(D_ISOS[0]) + ISO_SHARE[1] * ball(D_ISOS[1])
    for lo in range(0, len(vox), 50000):
        v = vox[lo:lo + 50000]
        f1, t1, f2, t2 = fibre_fields(w[v], wm_semi)
        s = (1 - f1 - f2)[:, None] * iso_sig[None]
        for f, t in ((f1, t1), (f2, t2)):
            c2 = (t @ g.T) ** 2
            s += f[:, None] * (NU_IC * np.exp(-bvals * D_PAR * c2) +
                               (1 - NU_IC) * np.exp(-bvals * (D_PERP + (D_PAR - D_PERP) * c2)))
        s *= S0
        data[v] = np.hypot(s + rng.normal(scale=sigma, size=s.shape), rng.normal(scale=sigma, size=s.shape))
        big = f1 >= f2
        p1 = np.where(big[:, None], f1[:, None] * t1, f2[:, None] * t2)
        p2 = np.where(big[:, None], f2[:, None] * t2, f1[:, None] * t1)
        peaks[v, 0:3], peaks[v, 3:6] = p1, p2
    img = lambda a, n: a.reshape(shape + ((n,) if n else ()), order="C")  # noqa: E731
    nib.save(nib.Nifti1Image(img(data, nvol), aff), f"{d}/dwi.nii")
    nib.save(nib.Nifti1Image(img(peaks, 9), aff), f"{d}/peaks.nii.gz")
    nib.save(nib.Nifti1Image(img(wm.astype(np.uint8), 0), aff), f"{d}/wm.nii.gz")
    np.savetxt(f"{d}/bvals", bvals[None], fmt="%g")
    # FSL bvecs: voxel axes for this det < 0 affine, i.e. R^T g with R = diag(-1, 1, 1)
    np.savetxt(f"{d}/bvecs", (g * [-1.0, 1, 1]).T, fmt="%.8f")
    out = {"params": meta, "wm_voxels": int(wm.sum()), "grid_voxels": int(np.prod(shape)), "volumes": nvol,
           "seconds": time.time() - t0}
    json.dump(out, open(mpath, "w"), indent=1)
    return out


def uniform_in_ellipsoid(rng, n, semi):
    u = rng.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return u * rng.uniform(0, 1, (n, 1)) ** (1 / 3) * semi


def streamline_chunk(rng, n, semi, min_points=10):
    """n streamlines (world mm): (points (P, 3) float32 streamline after streamline, counts (n,),
    kind (n,): 0 circling z, 1 along z, 2 false, voxel-face crossings, length in mm)."""
    K = int(np.ceil(LEN_MAX / 2 / STEP))
    s = np.arange(-K, K + 1) * STEP
    M = len(s)
    j = np.arange(M)
    pts_out, cnt_out, kind_out = [], [], []
    crossings = length = 0.0
    have = 0
    while have < n:
        m = int((n - have) * 1.25) + 64
        kind = rng.choice(3, size=m, p=KINDS)
        seed = uniform_in_ellipsoid(rng, m, semi)
        h = rng.uniform(LEN_MIN, LEN_MAX, m) / 2
        arg = 2 * np.pi * s[None] / rng.uniform(30, 60, (m, 1)) + rng.uniform(0, 2 * np.pi, (m, 1))
        wob_a, wob_b = WOBBLE * np.sin(arg), WOBBLE * np.cos(arg)
        pts = np.empty((m, M, 3))
        c = kind == 0
        rho = np.maximum(np.hypot(seed[c, 0], seed[c, 1]), 1e-3)
        phi = np.arctan2(seed[c, 1], seed[c, 0])[:, None] + s[None] / rho[:, None]
        h[c] = np.minimum(h[c], 0.95 * np.pi * rho)  # never round the circle onto itself
        r = rho[:, None] + wob_a[c]
        pts[c, :, 0], pts[c, :, 1] = r * np.cos(phi), r * np.sin(phi)
        pts[c, :, 2] = seed[c, 2][:, None] + wob_b[c]
        z = kind == 1
        pts[z, :, 0] = seed[z, 0][:, None] + wob_a[z]
        pts[z, :, 1] = seed[z, 1][:, None] + wob_b[z]
        pts[z, :, 2] = seed[z, 2][:, None] + s[None]
        f = kind == 2
        u = rng.normal(size=(int(f.sum()), 3))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        pts[f] = seed[f][:, None, :] + s[None, :, None] * u[:, None, :]
        inside = (((pts / semi) ** 2).sum(-1) <= 1) & (np.abs(s)[None] <= h[:, None])
        bad = ~inside
        start = np.where(bad[:, :K], j[None, :K], -1).max(1) + 1
        end = np.where(bad[:, K:], j[None, K:], M).min(1)
        ok = inside[:, K] & (end - start >= min_points)
        sel = np.flatnonzero(ok)[:n - have]
        keep = (j[None] >= start[sel, None]) & (j[None] < end[sel, None])
        p = pts[sel]
        pts_out.append(p[keep].astype(np.float32))
        cnt_out.append(end[sel] - start[sel])
        kind_out.append(kind[sel])
        step_ok = keep[:, 1:] & keep[:, :-1]
        dp = np.diff(p, axis=1)
        crossings += float((np.abs(dp).sum(-1) * step_ok).sum()) / VOXEL
        length += float((np.linalg.norm(dp, axis=-1) * step_ok).sum())
        have += len(sel)
    return np.concatenate(pts_out), np.concatenate(cnt_out), np.concatenate(kind_out), crossings, length


def tck_header(count):
    body = ("mrtrix tracks\ndatatype: Float32LE\n"
            f"count: {count}\nstep_size: {STEP:g}\nsource: bench/bench_commit.py\n")
    off = 0
    while True:
        hdr = body + f"file: . {off}\nEND\n"
        if len(hdr) == off:
            return hdr.encode()
        off = len(hdr)


def make_tracks(d, shape, n, seed):
    """tracks_N.tck (MRtrix format, written here directly: float32 triplets, a NaN triplet after
    each streamline, an Inf triplet at the end) and tracks_N.json (its statistics); reused when
    the JSON matches."""
    params = {"shape": list(shape), "streamlines": n, "seed": seed, "kinds": list(KINDS), "version": 1}
    path, jpath = f"{d}/tracks_{n}.tck", f"{d}/tracks_{n}.json"
    if os.path.exists(path) and os.path.exists(jpath) and json.load(open(jpath)).get("params") == params:
        return path, json.load(open(jpath))
    t0 = time.time()
    rng = np.random.default_rng(seed + 1)
    semi = semi_axes(shape, WM_FRAC)
    stats = {"points": 0, "crossings": 0.0, "length_mm": 0.0, "false": 0}
    with open(path + ".part", "wb") as fh:
        fh.write(tck_header(n))
        done = 0
        while done < n:
            k = min(50000, n - done)
            pts, cnt, kind, cr, ln = streamline_chunk(rng, k, semi)
            out = np.full((len(pts) + k, 3), np.nan, np.float32)
            out[np.arange(len(pts)) + np.repeat(np.arange(k), cnt)] = pts
            fh.write(out.tobytes())
            stats["points"] += int(len(pts))
            stats["crossings"] += cr
            stats["length_mm"] += ln
            stats["false"] += int((kind == 2).sum())
            done += k
        fh.write(np.full(3, np.inf, np.float32).tobytes())
    os.replace(path + ".part", path)
    out = dict(stats, params=params, seconds=time.time() - t0)
    json.dump(out, open(jpath, "w"), indent=1)
    return path, out


def copy_tracks(d, base, binfo, k, seed):
    """tracks_NxK.tck: the streamlines of `base` (a .tck of make_tracks) written k times, each
    streamline of each copy moved by its own offset, uniform in +-half a voxel on each axis;
    reused when its JSON matches."""
    n = binfo["params"]["streamlines"]
    params = dict(binfo["params"], copies=k)
    path, jpath = f"{d}/tracks_{n}x{k}.tck", f"{d}/tracks_{n}x{k}.json"
    if os.path.exists(path) and os.path.exists(jpath) and json.load(open(jpath)).get("params") == params:
        return path, json.load(open(jpath))
    t0 = time.time()
    raw = open(base, "rb").read()
    off = len(tck_header(n))
    xyz = np.frombuffer(raw, np.float32, offset=off).reshape(-1, 3)[:-1]  # the Inf triplet left out
    ends = np.isnan(xyz[:, 0])
    which = np.cumsum(ends) - ends  # each triplet's streamline (a NaN triplet its streamline's)
    rng = np.random.default_rng(seed + 2)
    with open(path + ".part", "wb") as fh:
        fh.write(tck_header(n * k))
        for _ in range(k):
            shift = rng.uniform(-VOXEL / 2, VOXEL / 2, (n, 3)).astype(np.float32)
            fh.write((xyz + shift[which]).tobytes())  # NaN + shift stays NaN: the separators kept
        fh.write(np.full(3, np.inf, np.float32).tobytes())
    os.replace(path + ".part", path)
    out = {"points": binfo["points"] * k, "crossings": binfo["crossings"] * k,
           "length_mm": binfo["length_mm"] * k, "false": binfo["false"] * k, "params": params,
           "seconds": time.time() - t0}
    json.dump(out, open(jpath, "w"), indent=1)
    return path, out


def hemisphere(n=500):
    """n quasi-uniform directions with y >= 0 (a Fibonacci set of 2n, its y >= 0 half): a stand-in
    for the tools' lookup-table directions when counting segments."""
    d = fibonacci(2 * n)
    return d[d[:, 1] >= 0]


def sample_tracks(shape, n=20000, seed=11, sub=8):
    """Statistics per streamline of the case's tractogram from n sampled streamlines (for the
    estimates): points, voxel-face crossings, length (mm), and dictionary segments, counted as the
    tools build them: each 1 mm step sampled at `sub` points, each sample in the voxel it rounds
    to (inside the WM mask), the step's orientation to the nearest of 500 directions, one segment
    per distinct (streamline, voxel, direction)."""
    semi = semi_axes(shape, WM_FRAC)
    pts, cnt, _, cr, ln = streamline_chunk(np.random.default_rng(seed), n, semi)
    pts = pts.astype(np.float64)
    sid = np.repeat(np.arange(n), cnt)
    step = np.flatnonzero(sid[1:] == sid[:-1])  # steps within a streamline: i -> i + 1
    a, b = pts[step], pts[step + 1]
    u = (b - a) / np.maximum(np.linalg.norm(b - a, axis=1, keepdims=True), 1e-12)
    dirs = hemisphere(NDIRS).astype(np.float32)
    bins = np.concatenate([np.abs(u[lo:lo + 100000].astype(np.float32) @ dirs.T).argmax(1)
                           for lo in range(0, len(u), 100000)])
    aff = affine(shape)
    t = (np.arange(sub) + 0.5) / sub
    q = a[:, None, :] + t[None, :, None] * (b - a)[:, None, :]  # world mm
    ijk = np.rint((q - aff[:3, 3]) / np.diag(aff)[:3]).astype(np.int64)
    inside = np.all((ijk >= 0) & (ijk < np.array(shape)), axis=-1)
    w = ijk * np.diag(aff)[:3] + aff[:3, 3]
    inside &= ((w / semi) ** 2).sum(-1) <= 1  # the voxel's centre in the WM
    vox = (ijk[..., 0] * shape[1] + ijk[..., 1]) * shape[2] + ijk[..., 2]
    key = (sid[step][:, None] * (int(np.prod(shape)) * NDIRS) + vox * NDIRS + bins[:, None])[inside]
    return {"points": float(cnt.sum()) / n, "crossings": cr / n, "length_mm": ln / n,
            "segments": float(np.unique(key).size) / n}


def prepare(a, shape, n):
    """The case's files and the sampled statistics (run in a fresh process: see main())."""
    case = os.path.join(a.work, f"case_{shape[0]}x{shape[1]}x{shape[2]}_d{a.directions}_snr{a.snr:g}_s{a.seed}")
    out = {"case": case, "sample": sample_tracks(shape)}
    aff = affine(shape)
    w = np.indices(shape).reshape(3, -1).T * np.diag(aff)[:3] + aff[:3, 3]
    out["wm_voxels"] = int((((w / semi_axes(shape, WM_FRAC)) ** 2).sum(1) <= 1).sum())
    if not a.estimate_only:
        out["info"] = make_data(case, shape, a.directions, a.snr, a.seed)
        out["tck"], out["tinfo"] = make_tracks(case, shape, n, a.seed)
        if a.copies > 1:
            out["tck"], out["tinfo"] = copy_tracks(case, out["tck"], out["tinfo"], a.copies, a.seed)
    return out


# ---- sizes, floor, memory ------------------------------------------------------------------

def floor_bytes(nseg, nf, ne, nv, ns, niso=2, ndirs=NDIRS):
    """Bytes one operator product cannot avoid moving (the dictionary in its smallest layout, every
    vector once):
      segment records  10 bytes each (voxel or streamline index 4, direction index 2, length 4),
                       read once by A x (by voxel) and once by A^T y (by streamline);
      EC records       A x 2 bytes (direction; the voxel is implied by the by-voxel order),
                       A^T y 6 (voxel 4, direction 2);
      lookup tables    IC and EC ndirs x ns floats and niso x ns: read once (they fit in cache:
                       500 x 126 x 4 = 252 kB each, so each segment's ns-float row is a cache hit,
                       not memory traffic; counting it per segment would be 504 bytes a segment);
      x and y          8 bytes an entry: A x reads x (ncols) and writes y (nrows = nv x ns), A^T y
                       reads y and writes its result (ncols).
    Not counted: the per-voxel / per-streamline start offsets (8 bytes each, under 1% here) and the
    gathers' wasted cache-line bytes (x[streamline] in A x, y[voxel] rows in A^T y are read where
    the segments point, not in order: a real kernel moves more than this floor).
    Returns (bytes of A x, bytes of A^T y, ncols, nrows)."""
    ncols, nrows = nf + ne + niso * nv, nv * ns
    lut = (2 * ndirs + niso) * ns * 4
    ax = 10 * nseg + 2 * ne + lut + 8 * ncols + 8 * nrows
    aty = 10 * nseg + 6 * ne + lut + 8 * nrows + 8 * ncols
    return ax, aty, ncols, nrows


def iteration_bytes(tool, ax, aty, nrows):
    """The floor bytes of one FISTA iteration of `tool` (see the module's doc): COMMIT 2 A x + 1
    A^T y, dimoc 1 A x + 1 A^T y + the extrapolated residual (3 x 8 bytes a row)."""
    if tool == "dimoc":
        return ax + aty + 24 * nrows
    return 2 * ax + aty


def memory_estimate(grid_voxels, nvol, nstr, points, nseg, nv, ne, threads, niso=2):
    """Peak resident bytes of each tool, from reading their code (dimoc: runtime/commit/*.c;
    COMMIT 2.4.2: core.pyx, trk2dictionary.pyx), as the sum of the large arrays of its stages (a
    bound from above: some are freed before others are made):
      dimoc   the DWI as doubles (grid x volumes x 8), the mask (8 + 1 a grid voxel), the .tck in
              memory (12 a point, 16 a streamline), the dictionary (33 a streamline; 10 a segment,
              + 8 while it is built), the operator's arrays (16 a segment: streamline and length
              in voxel order, run and length in streamline order) and, while the voxel order is
              made, a key per segment (16), y, the solver's two residuals, A g and the fitted
              signal (5 x 8 a row), the scales, x, its extrapolation, previous value, gradient and
              output (6 x 8 a column);
      COMMIT  the DWI as float32 (grid x volumes x 4), the
              dictionary (uint32 streamline and voxel, uint16 direction, float32 length: 14 a
              segment, + 1 for A^T y's thread map, + 8 + 4 while argsort reorders it), the TDI per
              trk2dictionary thread (grid x 8 x threads), y and FISTA's residual and temporaries
              (about 4 x 8 a row), x, x-hat, gradient, previous x and temporaries (about 6 x 8 a
              column), plus Python, numpy and COMMIT themselves (about 0.15 GB)."""
    nrows, ncols = nv * nvol, nstr + ne + niso * nv
    dimoc = (grid_voxels * nvol * 8 + grid_voxels * 9 + points * 12 + nstr * 16 + nstr * 33 +
             nseg * (10 + 16 + 16) + nrows * 8 * 5 + ncols * 8 * 6)
    dimoc_build = grid_voxels * nvol * 8 + points * 12 + nstr * 49 + nseg * 18 + grid_voxels * 8
    commit = (0.15e9 + grid_voxels * nvol * 4 + nseg * (15 + 12) + grid_voxels * 8 * threads +
              nrows * 8 * 4 + ncols * 8 * 6)
    return max(dimoc, dimoc_build), commit


def host_copy_gbs(threads):
    """GB/s of a large copy (read + write counted), the best of 1 and `threads` threads (numpy
    releases the GIL while it copies)."""
    code = ("import json, sys, time\n"
            "import numpy as np\n"
            "from concurrent.futures import ThreadPoolExecutor\n"
            "best = 0\n"
            "n = 2 ** 26\n"
            "a = np.ones(n); b = np.empty_like(a)\n"
            "for T in sorted({1, int(sys.argv[1])}):\n"
            "    cut = np.linspace(0, n, T + 1).astype(int)\n"
            "    cp = lambda i: np.copyto(b[cut[i]:cut[i + 1]], a[cut[i]:cut[i + 1]])\n"
            "    with ThreadPoolExecutor(T) as ex:\n"
            "        list(ex.map(cp, range(T)))\n"
            "        for _ in range(5):\n"
            "            t = time.perf_counter(); list(ex.map(cp, range(T)))\n"
            "            best = max(best, 2 * a.nbytes / (time.perf_counter() - t) / 1e9)\n"
            "print(json.dumps(best))\n")
    p = subprocess.run([sys.executable, "-c", code, str(threads)], capture_output=True, text=True)
    return json.loads(p.stdout) if p.returncode == 0 else float("nan")


def gpu_name():
    if shutil.which("nvidia-smi") is None:
        return None
    p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    return p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else None


# ---- running the tools ---------------------------------------------------------------------

def run_timed(cmd, log, env=None, cwd=None):
    """(exit status, wall seconds, peak resident bytes) of one process; its output to `log`."""
    with open(log, "w") as fh:
        t0 = time.time()
        p = subprocess.Popen([str(c) for c in cmd], stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.time() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_maxrss * 1024


def tail(path, n=6):
    try:
        return " | ".join(line.strip() for line in open(path).read().strip().splitlines()[-n:])
    except OSError:
        return ""


def run_dimoc(case, tck, out, threads, device):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [DIMOC, "commit", "--tractogram", tck, "--data", f"{case}/dwi.nii", "--mask", f"{case}/wm.nii.gz",
           "--bvals", f"{case}/bvals", "--bvecs", f"{case}/bvecs", "--peaks", f"{case}/peaks.nii.gz",
           "--out", out, "--d-par", D_PAR, "--d-perp", D_PERP, "--d-iso", ",".join(f"{d:g}" for d in D_ISOS),
           "--ndirs", NDIRS, "--threads", threads]
    if device == "gpu":
        cmd += ["--device", "gpu"]  # only when asked: the option is newer than this bench
    log = out + ".log"
    rc, wall, rss = run_timed(cmd, log)
    if rc != 0:
        return None, f"dimoc commit ({device}) failed (exit {rc}): {tail(log)}"
    r = json.load(open(f"{out}/provenance.json"))["results"]
    st = {k: float(r.get(f"seconds_{k}", float("nan"))) for k in
          ("load", "dictionary", "kernels", "operator", "solver_setup", "solve", "write")}
    return {"stages": st, "whole": wall, "rss": rss, "iterations": int(r["iterations"]),
            "objective": float(r["objective"]), "kept": int(r["streamlines_kept"]), "voxels": int(r["voxels"]),
            "segments": int(r["segments"]), "ec": int(r.get("ec_compartments", 0)),
            "ndirs": int(r.get("lut_directions", NDIRS)), "weights": f"{out}/streamline_weights.txt",
            "ic": f"{out}/compartment_IC.nii.gz", "stopped": r.get("stopped", "")}, None


_DRIVER = r'''
import json, os, sys, time
cfg = json.load(open(sys.argv[1]))
os.environ["DIPY_HOME"] = cfg["dipy_home"]
T = {}
t = time.time()
import numpy as np
import amico.lut
import commit
from commit import trk2dictionary
from importlib.metadata import version
T["import"] = time.time() - t
t = time.time()
amico.lut.precompute_rotation_matrices(12, cfg["ndirs"])  # what commit.core.setup() does, for this ndirs only
T["setup"] = time.time() - t
t = time.time()
trk2dictionary.run(filename_tractogram=cfg["tck"], filename_peaks=cfg["peaks"], filename_mask=cfg["mask"],
                   path_out=os.path.join(cfg["work"], "COMMIT"), fiber_shift=0.5, peaks_use_affine=True,
                   ndirs=cfg["ndirs"], n_threads=cfg["threads"], verbose=2)
T["dictionary"] = time.time() - t
mit = commit.Evaluation(cfg["work"], ".", dictionary_path="COMMIT")
mit.set_verbose(2)
t = time.time()
mit.load_data(cfg["dwi"], cfg["scheme"])
T["load"] = time.time() - t
t = time.time()
mit.set_model("StickZeppelinBall")
mit.model.set(d_par=cfg["d_par"], d_perps_zep=[cfg["d_perp"]], d_isos=cfg["d_isos"])
mit.generate_kernels(regenerate=True, lmax=12, ndirs=cfg["ndirs"])
mit.load_kernels()
T["kernels"] = time.time() - t
t = time.time()
mit.load_dictionary()
mit.set_threads(cfg["threads"])
mit.build_operator()
T["operator"] = time.time() - t
t = time.time()
mit.fit(tol_fun=1e-3, tol_x=1e-6, max_iter=100)
T["solve"] = time.time() - t
t = time.time()
mit.save_results()
T["write"] = time.time() - t
D = mit.DICTIONARY
fd = mit.CONFIG["optimization"]["fit_details"]
json.dump({"seconds": T, "iterations": int(fd["iterations"]), "objective": float(fd["cost_function"]),
           "stopped": str(fd["stopping_criterion"]), "kept": int(D["IC"]["nSTR"]), "segments": int(D["IC"]["n"]),
           "voxels": int(D["IC"]["nVOX"]), "ec": int(D["EC"]["n"]), "iso": int(D["ISO"]["n"]),
           "ns": int(mit.niiDWI_img.shape[3]), "results": mit.get_config("RESULTS_path"),
           "version": version("dmri-commit")}, open(os.path.join(cfg["work"], "peer.json"), "w"), indent=1)
'''


def peer_python():
    for py in (os.environ.get("PYTHON"), sys.executable, "/usr/bin/python3"):
        if py and subprocess.run([py, "-c", "import commit, amico"], capture_output=True).returncode == 0:
            return py
    return None


def run_commit(py, case, tck, work, threads):
    """COMMIT on the case, in a fresh `work` (its rotation matrices cached beside it)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    home = os.path.join(os.path.dirname(work), "commit_dipy_home")
    os.makedirs(home, exist_ok=True)
    b = np.loadtxt(f"{case}/bvals").ravel()
    g = np.loadtxt(f"{case}/bvecs").T  # FSL bvecs: the voxel axes here (det < 0), what COMMIT wants
    with open(f"{work}/dwi.scheme", "w") as fh:
        fh.write("VERSION: BVECTOR\n")
        for v, bb in zip(g, b):
            fh.write(f"{v[0]:.8f} {v[1]:.8f} {v[2]:.8f} {bb:g}\n")
    cfg = {"dipy_home": home, "work": work, "tck": tck, "peaks": f"{case}/peaks.nii.gz", "mask": f"{case}/wm.nii.gz",
           "dwi": f"{case}/dwi.nii", "scheme": f"{work}/dwi.scheme", "threads": threads, "ndirs": NDIRS,
           "d_par": D_PAR, "d_perp": D_PERP, "d_isos": list(D_ISOS)}
    json.dump(cfg, open(f"{work}/config.json", "w"), indent=1)
    open(f"{work}/driver.py", "w").write(_DRIVER)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    rc, wall, rss = run_timed([py, f"{work}/driver.py", f"{work}/config.json"], f"{work}/peer.log", env=env, cwd=work)
    if rc != 0 or not os.path.exists(f"{work}/peer.json"):
        return None, f"dmri-commit failed (exit {rc}): {tail(work + '/peer.log')}"
    r = json.load(open(f"{work}/peer.json"))
    st = {k: r["seconds"][k] for k in ("load", "dictionary", "kernels", "operator", "solve", "write")}
    st["solver_setup"] = 0.0  # COMMIT has no such stage (its solver needs no device)
    return {"stages": st, "whole": wall, "rss": rss, "iterations": r["iterations"], "objective": r["objective"],
            "kept": r["kept"], "voxels": r["voxels"], "segments": r["segments"], "ec": r["ec"], "ndirs": NDIRS,
            "weights": f"{r['results']}/streamline_weights.txt", "ic": f"{r['results']}/compartment_IC.nii.gz",
            "stopped": r["stopped"], "import": r["seconds"]["import"] + r["seconds"]["setup"],
            "version": r["version"]}, None


# ---- main ----------------------------------------------------------------------------------

def gb(x):
    return f"{x / 1e9:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streamlines", type=int, help="default 1,000,000 (--small: 20,000)")
    ap.add_argument("--copies", type=int, default=1,
                    help="the tractogram written this many times over, each streamline moved by up to half a "
                         "voxel: --copies 10 makes 10,000,000 streamlines of the default case")
    ap.add_argument("--small", action="store_true", help="40 x 40 x 40 grid, 20,000 streamlines: a quick run")
    ap.add_argument("--work", default=os.path.join(ROOT, "tests", "tmp", "bench_commit"))
    ap.add_argument("--devices", default="cpu", help="comma list of dimoc's devices: cpu, gpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="dimoc's CPU threads (default all cores)")
    ap.add_argument("--peer-threads", type=int, default=os.cpu_count(),
                    help="COMMIT's n_threads and set_threads (default all cores)")
    ap.add_argument("--skip-commit", action="store_true", help="do not run the peer (no x COMMIT columns)")
    ap.add_argument("--directions", type=int, default=40, help="directions per shell")
    ap.add_argument("--snr", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each tool this many times, in turn; the fastest (whole) run is reported")
    ap.add_argument("--gpu-gbs", type=float, help="the GPU's memory bandwidth ceiling (GB/s)")
    ap.add_argument("--estimate-only", action="store_true",
                    help="print the case's sizes and the memory each tool needs, from a sample of the "
                         "tractogram; run nothing")
    a = ap.parse_args()
    shape, n_default = CASES["small" if a.small else "big"]
    n = a.streamlines or n_default
    if a.copies < 1:
        sys.exit("--copies: 1 or more")
    devices = [d for d in a.devices.split(",") if d]
    if any(d not in ("cpu", "gpu") for d in devices):
        sys.exit("--devices: a comma list of cpu, gpu")
    ncores = os.cpu_count()
    nvol = NB0 + len(SHELLS) * a.directions
    grid = int(np.prod(shape))
    # Linux's ru_maxrss of a child keeps its parent's high-water mark across exec: the case is built
    # in a fresh process so that this one stays small (its floor is printed below).
    floor_rss = run_timed(["true"], os.devnull)[2]
    t0 = time.time()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        prep = pool.apply(prepare, (a, shape, n))
    n *= a.copies
    nwm, per = prep["wm_voxels"], prep["sample"]
    print(f"case: {shape[0]} x {shape[1]} x {shape[2]} voxels of {VOXEL:g} mm, {nwm:,} WM voxels, {nvol} volumes "
          f"({NB0} b=0 + {len(SHELLS)} x {a.directions}), {n:,} streamlines; host {ncores} cores", flush=True)
    nseg = int(n * per["segments"])
    est = memory_estimate(grid, nvol, n, per["points"] * n, nseg, nwm, 2 * nwm, a.peer_threads)
    ax, aty, ncols, nrows = floor_bytes(nseg, n, 2 * nwm, nwm, nvol)
    print(f"estimate (20,000 sampled streamlines): {per['length_mm']:.0f} mm and {per['points']:.0f} points a "
          f"streamline, {per['segments']:.1f} segments a streamline: about {nseg:,} segments, {ncols:,} columns, "
          f"{nrows:,} rows; .tck {gb(n * (per['points'] + 1) * 12)} GB, COMMIT's dictionary files "
          f"{gb(nseg * 14)} GB; peak memory about {gb(est[0])} GB for dimoc, {gb(est[1])} GB for COMMIT "
          f"({a.peer_threads} threads); operator floor {gb(ax)} GB a product (A x), {gb(aty)} GB (A^T y)", flush=True)
    if a.estimate_only:
        return
    case, tck, info, tinfo = prep["case"], prep["tck"], prep["info"], prep["tinfo"]
    print(f"data: {case} ({time.time() - t0:.1f} s; built in {info['seconds']:.1f} + {tinfo['seconds']:.1f} s "
          f"when first made); {tinfo['false']:,} false streamlines", flush=True)

    rows, notes = [], []
    runs = os.path.join(a.work, "runs")
    os.makedirs(runs, exist_ok=True)
    py = None if a.skip_commit else peer_python()
    if not a.skip_commit and py is None:
        notes.append("COMMIT skipped: no Python here imports commit (set PYTHON)")
    gpu = gpu_name()
    plan = ([("commit", "dmri-commit", f"{a.peer_threads} threads", "cpu")] if py else []) + \
        [(f"dimoc_{d}", "dimoc", f"{a.threads} threads" if d == "cpu" else f"1 GPU ({gpu or 'none found'})", d)
         for d in devices]
    best, failed, walls = {}, set(), {}
    load_before = os.getloadavg()
    for rep in range(a.repeat):  # in turn, so that a noisy host hits every tool alike; the fastest run kept
        for key, tool, where, dev in plan:
            if key in failed:
                continue
            print(f"{tool} {where} (run {rep + 1} of {a.repeat}) ...", flush=True)
            if key == "commit":
                r, err = run_commit(py, case, tck, os.path.join(runs, "commit"), a.peer_threads)
            else:
                r, err = run_dimoc(case, tck, os.path.join(runs, key), a.threads, dev)
            if err:
                notes.append(err)
                failed.add(key)
                continue
            print(f"  {r['whole']:.2f} s (solve {r['stages']['solve']:.2f} s)", flush=True)
            walls.setdefault(key, []).append(r["whole"])
            if key not in best or r["whole"] < best[key][3]["whole"]:
                best[key] = (tool + (" " + r["version"] if key == "commit" else ""), where, dev, r)
    load_after = os.getloadavg()
    rows = [best[k] for k, *_ in plan if k in best]
    peer = best["commit"][3] if "commit" in best else None
    if a.repeat > 1:
        notes.append("whole seconds of every run (the fastest is in the table): " +
                     "; ".join(f"{k}: " + ", ".join(f"{w:.2f}" for w in v) for k, v in walls.items()))
    notes.append(f"load average (1 min) {load_before[0]:.2f} before the runs, {load_after[0]:.2f} after, on "
                 f"{ncores} cores (above 0 means other work shared the host)")

    print()
    print(f"## bench_commit: {shape[0]} x {shape[1]} x {shape[2]}, {n:,} streamlines, {nvol} volumes, "
          f"host {ncores} cores")
    print()
    print("| tool | where | streamlines kept | voxels | load | dictionary | kernels | operator | solver setup | solve | "
          "write | whole "
          "| iterations | objective | peak GB | x COMMIT (whole) | x COMMIT (solve) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for tool, where, dev, r in rows:
        st = r["stages"]
        xw = f"{peer['whole'] / r['whole']:.1f}x" if peer else "-"
        xs = f"{peer['stages']['solve'] / st['solve']:.1f}x" if peer and st["solve"] > 0 else "-"
        print(f"| {tool} | {where} | {r['kept']:,} | {r['voxels']:,} | " +
              " | ".join(f"{st[k]:.2f}" for k in ("load", "dictionary", "kernels", "operator", "solver_setup",
                                                  "solve", "write")) +
              f" | {r['whole']:.2f} | {r['iterations']} | {r['objective']:.6g} | {gb(r['rss'])} | {xw} | {xs} |")
    print()
    cpu_gbs = host_copy_gbs(max(a.threads, a.peer_threads))
    print("Operator floor (bytes a product must move, floor_bytes(); an iteration: COMMIT 2 A x + 1 A^T y, dimoc "
          "1 A x + 1 A^T y + the extrapolated residual, iteration_bytes(); backtracking steps not counted; "
          "GFLOP/s: one multiply-add a sample for each segment, EC and ISO compartment of each product, 2 flops "
          "each):")
    print()
    print("| tool | where | segments | EC | columns | rows | A x GB | A^T y GB | iterations | solve s | GB/s | "
          "ceiling GB/s | % of ceiling | GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for tool, where, dev, r in rows:
        ax, aty, ncols, nrows = floor_bytes(r["segments"], r["kept"], r["ec"], r["voxels"], nvol, ndirs=r["ndirs"])
        rate = r["iterations"] * iteration_bytes(tool, ax, aty, nrows) / r["stages"]["solve"] / 1e9
        fma = (r["segments"] + r["ec"] + 2 * r["voxels"]) * nvol  # multiply-adds a product
        products = 2 if tool == "dimoc" else 3
        gflops = r["iterations"] * products * 2 * fma / r["stages"]["solve"] / 1e9
        if dev == "gpu":
            ceil = a.gpu_gbs or next((v for k, v in GPU_GBS.items() if gpu and k in gpu), float("nan"))
        else:
            ceil = cpu_gbs
        print(f"| {tool} | {where} | {r['segments']:,} | {r['ec']:,} | {ncols:,} | {nrows:,} | {gb(ax)} | {gb(aty)} | "
              f"{r['iterations']} | {r['stages']['solve']:.2f} | {rate:.2f} | {ceil:.1f} | {100 * rate / ceil:.1f} | "
              f"{gflops:.2f} |")
    print()
    notes.append(f"CPU ceiling: a {gb(2 * 8 * 2 ** 26)} GB copy (read + write) on this host, best of 1 and "
                 f"{max(a.threads, a.peer_threads)} threads: {cpu_gbs:.1f} GB/s")
    notes.append(f"peak memory estimated before the runs (memory_estimate()): dimoc {gb(est[0])} GB, COMMIT "
                 f"{gb(est[1])} GB; measured above (peak GB: wait4's ru_maxrss, which cannot fall below this "
                 f"bench's own {gb(floor_rss)} GB)")
    if peer:
        notes.append(f"COMMIT's whole includes importing it and its rotation matrices: {peer['import']:.2f} s; "
                     f"its trk2dictionary sleeps 0.5 s in every run; stopped: {peer['stopped']}")
        notes.append(f"COMMIT's A^T y: each of its {a.peer_threads} threads scans all {peer['segments']:,} segment "
                     f"records (15 bytes: voxel, direction, length, streamline, thread byte) and keeps its own "
                     f"streamlines: {gb(15 * peer['segments'] * a.peer_threads)} GB read a product against the "
                     f"floor's {gb(10 * peer['segments'])} GB of records")
        wp = np.loadtxt(peer["weights"], ndmin=1)
        icp = np.asarray(nib.load(peer["ic"]).dataobj, float)
        for tool, where, dev, r in rows:
            if tool != "dimoc":
                continue
            w = np.loadtxt(r["weights"], ndmin=1)
            ic = np.asarray(nib.load(r["ic"]).dataobj, float)
            m = (ic != 0) | (icp != 0)
            notes.append(f"dimoc {where} against COMMIT: weights r = {np.corrcoef(w, wp)[0, 1]:.4f}, "
                         f"compartment_IC r = {np.corrcoef(ic[m], icp[m])[0, 1]:.4f}, objective "
                         f"{r['objective']:.6g} vs {peer['objective']:.6g} ({r['iterations']} vs "
                         f"{peer['iterations']} iterations), segments {r['segments']:,} vs {peer['segments']:,}, "
                         f"kept {r['kept']:,} vs {peer['kept']:,}; dimoc stopped: {r['stopped']}")
    for note in notes:
        print("note:", note)


if __name__ == "__main__":
    main()
