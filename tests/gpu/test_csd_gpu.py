"""dimoc csd on the GPU against the CPU (make test-gpu): the same solver (templates/csd/csd_solve.h)
on both, so the same FODs -- double precision within 1e-9 (relative to each voxel's largest
coefficient), float within 1e-4 -- for single-shell CSD (Tournier's iterations) and multi-shell
multi-tissue CSD (the hard-constraint active set, which solves in double for --precision float
too), on a crossing-fibre phantom with an oblique affine (multi-tissue also on one large enough
to reach the GPU in several pieces); and dimoc csd with its own dhollander
responses (tournier's passes deconvolved on the GPU) against the same on the CPU: the same
voxels, responses within 1e-9, FODs within 1e-6; and `dimoc response` (dhollander, tournier)
with --device gpu against --device cpu: the same voxels, responses within 1e-9, the GPU's
deconvolution time in its provenance."""
import json
import os

import numpy as np

from dmtest import check, dimoc, finish, load, save, workdir

ROOT = workdir("csd_gpu")
rng = np.random.default_rng(7)


def fibonacci(n):
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    r = np.sqrt(1 - z * z)
    ph = np.pi * (3 - np.sqrt(5)) * i
    return np.stack([r * np.cos(ph), r * np.sin(ph), z], 1)


def scheme(shells, ndir, nb0):
    g = [np.zeros(3)] * nb0
    b = [0.0] * nb0
    for bv in shells:
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        g += list(fibonacci(ndir) @ q)
        b += [bv] * ndir
    return np.array(b), np.array(g)


def zonal(f, lmax=8):
    from numpy.polynomial.legendre import leggauss, legval
    x, w = leggauss(200)
    out = []
    for l in range(0, lmax + 1, 2):
        c = np.zeros(l + 1)
        c[l] = 1
        out.append(2 * np.pi * np.sum(w * f(x) * np.sqrt((2 * l + 1) / (4 * np.pi)) * legval(x, c)))
    return out


def write_response(path, shells, rows):
    with open(path, "w") as f:
        f.write("# Shells: " + ",".join("%g" % b for b in shells) + "\n")
        for r in rows:
            f.write(" ".join("%.12g" % v for v in r) + "\n")


def phantom(d, shells, nb0, tissues, shape=(10, 10, 4)):
    """Voxels of 1-3 fibres (plus GM and CSF when tissues), signal made in world space, bvecs
    written in FSL's frame of an oblique affine with a positive determinant."""
    b, gw = scheme(shells, 60, nb0)
    rot, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    if np.linalg.det(rot) < 0:
        rot[:, 0] *= -1
    aff = np.eye(4)
    aff[:3, :3] = rot * 2.0
    S = np.zeros(shape + (len(b),))
    for idx in np.ndindex(shape):
        nf = 1 + (idx[0] + idx[1]) % 3
        u = rng.normal(size=(nf, 3))
        u /= np.linalg.norm(u, axis=1)[:, None]
        w = rng.dirichlet([4] * nf)
        wm = sum(wi * np.exp(-b * (0.2e-3 + 1.5e-3 * (gw @ ui) ** 2)) for wi, ui in zip(w, u))
        if tissues:
            f = rng.dirichlet([3, 1, 1])
            s = f[0] * wm + f[1] * np.exp(-b * 0.8e-3) + f[2] * np.exp(-b * 3e-3)
        else:
            s = wm
        S[idx] = 1000 * s + rng.normal(scale=20, size=len(b))
    # world -> voxel frame (R^T), then FSL's x flip for a positive determinant
    gv = gw @ rot
    gv[:, 0] *= -1
    save(f"{d}/dwi.nii.gz", S, aff)
    np.savetxt(f"{d}/bvals", b[None], fmt="%g")
    np.savetxt(f"{d}/bvecs", gv.T, fmt="%.8f")
    allb = sorted(set(b.tolist()))
    dw = [x for x in allb if x > 0] if not tissues else allb
    write_response(f"{d}/wm.txt", dw,
                   [zonal(lambda c, bb=bb: 1000 * np.exp(-bb * (0.2e-3 + 1.5e-3 * c * c))) for bb in dw])
    resp = f"{d}/wm.txt"
    if tissues:
        for name, D in (("gm", 0.8e-3), ("csf", 3e-3)):
            write_response(f"{d}/{name}.txt", allb, [[1000 * np.exp(-bb * D) * np.sqrt(4 * np.pi)] for bb in allb])
        resp += f",{d}/gm.txt,{d}/csf.txt"
    return resp


def compare(name, d, resp):
    fods = {}
    for dev in ("cpu", "gpu"):
        for prec in ("double", "float"):
            out = f"{d}/{dev}-{prec}"
            dimoc("csd", "--data", f"{d}/dwi.nii.gz", "--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs",
                  "--response", resp, "--out", out, "--device", dev, "--precision", prec)
            fods[dev, prec] = load(f"{out}/wm_fod.nii.gz")
            st = load(f"{out}/status.nii.gz")
            check(f"{name}: {dev} {prec}: every voxel solved", np.all(st == 1),
                  f"status counts {np.unique(st, return_counts=True)}")
    scale = np.abs(fods["cpu", "double"]).max(axis=-1, keepdims=True)
    for prec, tol in (("double", 1e-9), ("float", 1e-4)):
        err = np.abs(fods["gpu", prec] - fods["cpu", "double"]) / scale
        check(f"{name}: GPU {prec} equals the CPU's double FODs within {tol:g}", err.max() < tol,
              f"largest relative difference {err.max():.3g}")
    err = np.abs(fods["cpu", "float"] - fods["cpu", "double"]) / scale
    check(f"{name}: CPU float equals CPU double within 1e-4", err.max() < 1e-4,
          f"largest relative difference {err.max():.3g}")


def slab(d, scale=1, depth=10):
    """A three-tissue slab (CSF core, a GM ring, WM outside, single fibres of random direction and
    some crossings) of 24 x 24 x depth voxels times scale in-plane, three shells, in d."""
    import csdsim as cs
    n = 24 * scale
    shape = (n, n, depth)
    dimoc("scheme", "--shells", "6x0,60x1000,60x2000,60x3000", "--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs")
    b, g = np.loadtxt(f"{d}/bvals"), np.loadtxt(f"{d}/bvecs")
    aff = cs.oblique_affine(shape)
    gw = cs.fsl_to_world(aff, g)
    x, y = np.meshgrid(np.arange(n) - (n - 1) / 2, np.arange(n) - (n - 1) / 2, indexing="ij")
    r = np.hypot(x, y) / scale
    data = np.zeros(shape + (len(b),))
    for i, j, k in np.ndindex(shape):
        if r[i, j] >= 11:
            continue
        if r[i, j] >= 5.5:
            u = cs.random_unit(rng, 2)
            f = cs.fibre_signal(b, gw, u[0])
            s = f if rng.random() < 0.7 else 0.5 * (f + cs.fibre_signal(b, gw, u[1]))
        else:
            s = np.exp(-b * (cs.D_GM if r[i, j] >= 3 else cs.D_CSF))
        data[i, j, k] = 1000 * s + rng.normal(scale=20, size=len(b))
    save(f"{d}/dwi.nii.gz", data, aff)
    save(f"{d}/mask.nii.gz", np.repeat((r < 11)[:, :, None], shape[2], axis=2).astype(np.float32), aff)


def dhollander_case(d):
    """dimoc csd with its own dhollander responses, the passes' deconvolutions on the GPU and then
    the msmt solve there, against the same command on the CPU, on the slab."""
    slab(d)
    out = {}
    for dev in ("cpu", "gpu"):
        out[dev] = f"{d}/{dev}"
        dimoc("csd", "--data", f"{d}/dwi.nii.gz", "--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs", "--mask",
              f"{d}/mask.nii.gz", "--out", out[dev], "--device", dev)
    worst = 0.0
    for t in ("wm", "gm", "csf"):
        rows = [np.loadtxt(f"{out[dev]}/{t}_response.txt", ndmin=2) for dev in ("cpu", "gpu")]
        worst = max(worst, np.abs(rows[1] - rows[0]).max() / np.abs(rows[0]).max())
        vox = [load(f"{out[dev]}/{t}_voxels.nii.gz") > 0 for dev in ("cpu", "gpu")]
        same = np.array_equal(vox[0], vox[1])
        check(f"dhollander on the GPU: the CPU's {t} voxels", same,
              f"{int(vox[0].sum())} voxels on the CPU, {int((vox[0] != vox[1]).sum())} differ on the GPU")
    check("dhollander on the GPU: the CPU's responses within 1e-9", worst < 1e-9,
          f"largest relative difference {worst:.3g}")
    fods = [load(f"{out[dev]}/wm_fod.nii.gz") for dev in ("cpu", "gpu")]
    err = np.abs(fods[1] - fods[0]).max() / np.abs(fods[0]).max()
    check("dhollander on the GPU: the CPU's FODs within 1e-6", err < 1e-6, f"largest relative difference {err:.3g}")


def response_case(d):
    """dimoc response with --device gpu against --device cpu on a slab 3 x 3 times as large (about
    10,000 WM candidates in the eroded mask, whose first dhollander pass is deconvolved on the GPU:
    more than 250 a core of a 16-core host; tournier's passes of 3,000 voxels stay on the host's
    cores, so that only its result is compared)."""
    slab(d, scale=3)
    for alg, tissues in (("dhollander", ("wm", "gm", "csf")), ("tournier", ("wm",))):
        resp = {}
        for dev in ("cpu", "gpu"):
            resp[dev] = f"{d}/response-{alg}-{dev}"
            dimoc("response", "--data", f"{d}/dwi.nii.gz", "--bvals", f"{d}/bvals", "--bvecs", f"{d}/bvecs",
                  "--mask", f"{d}/mask.nii.gz", "--algorithm", alg, "--out", resp[dev], "--device", dev)
        worst, same = 0.0, True
        for t in tissues:
            rows = [np.loadtxt(f"{resp[dev]}/{t}_response.txt", ndmin=2) for dev in ("cpu", "gpu")]
            worst = max(worst, np.abs(rows[1] - rows[0]).max() / np.abs(rows[0]).max())
            vox = [load(f"{resp[dev]}/{t}_voxels.nii.gz") > 0 for dev in ("cpu", "gpu")]
            same &= np.array_equal(vox[0], vox[1]) and vox[0].sum() > 0
        gpu_s = json.load(open(f"{resp['gpu']}/provenance.json"))["results"].get("seconds_response_gpu")
        on_gpu = gpu_s is not None and (gpu_s > 0 or alg == "tournier")
        check(f"dimoc response {alg} --device gpu: the CPU's voxels and responses within 1e-9",
              same and worst < 1e-9 and on_gpu,
              f"voxels the same: {same}, largest relative difference {worst:.3g}, GPU seconds {gpu_s}")


d = os.path.join(ROOT, "single")
os.makedirs(d)
compare("single-shell b=2500", d, phantom(d, [2500], 4, False))
d = os.path.join(ROOT, "msmt")
os.makedirs(d)
compare("msmt 1000/2000/3000", d, phantom(d, [1000, 2000, 3000], 6, True))
# 9,600 voxels: the signals go to the GPU in three pieces of 4,096 (csd_gpu.c's PIECE_MIN), the
# kernel's runs each waiting for their own
d = os.path.join(ROOT, "msmt-pieces")
os.makedirs(d)
compare("msmt in pieces", d, phantom(d, [1000, 2000, 3000], 6, True, shape=(40, 40, 6)))
d = os.path.join(ROOT, "dhollander")
os.makedirs(d)
dhollander_case(d)
d = os.path.join(ROOT, "response")
os.makedirs(d)
response_case(d)
finish()
