"""dimoc view of an FOD: glyphs in the right colour and shape and place, the rule that picks
glyphs, the picture's size, errors.  The FODs are made here with DIPY's tournier07 basis
(legacy=False: MRtrix 3's), the PNG decoded by dmtest.read_png."""
import os

import numpy as np
from dipy.reconst.shm import real_sh_tournier

from dmtest import check, dimoc, finish, read_png, save, workdir

d = workdir("view_fod")
rng = np.random.default_rng(0)
v = rng.normal(size=(2000, 3))
v /= np.linalg.norm(v, axis=1)[:, None]
theta, phi = np.arccos(v[:, 2]), np.arctan2(v[:, 1], v[:, 0])
B, _, _ = real_sh_tournier(8, theta, phi, legacy=False)  # 2000 x 45
pinv = np.linalg.pinv(B)


def lobe_coef(axis, kappa=8.0):
    """SH coefficients (lmax 8) of exp(-kappa (1 - (u.axis)^2)), fitted on 2000 directions."""
    return pinv @ np.exp(-kappa * (1 - (v @ np.asarray(axis, float)) ** 2))


nx, ny, nz, cell = 8, 8, 6, 16
# x of the voxels runs against world x (an LAS image): the glyphs must still follow world x.
affine = np.diag([-2.0, 2.0, 2.0, 1.0])


def fod_image(name, axis):
    return save(os.path.join(d, name), np.broadcast_to(lobe_coef(axis), (nx, ny, nz, 45)), affine)


def cells(img, x0, nh, nv, y0=0):
    """The cell x cell blocks of a panel, as (nv, nh, cell, cell, 3)."""
    p = img[y0:y0 + nv * cell, x0:x0 + nh * cell]
    return p.reshape(nv, cell, nh, cell, 3).transpose(0, 2, 1, 3, 4)


def extents(block):
    """Horizontal and vertical extent (pixels) of the lit pixels of one cell."""
    lit = block.sum(-1) > 0
    ys, xs = np.nonzero(lit)
    return (xs.max() - xs.min() + 1, ys.max() - ys.min() + 1) if len(xs) else (0, 0)


# One lobe along world x in every voxel.
fx = fod_image("fod_x.nii.gz", [1, 0, 0])
png = os.path.join(d, "x.png")
dimoc("view", fx, "-o", png, "--zoom", cell)
img, ctype = read_png(png)
width = (nx + nx + ny) * cell + 8
height = max(ny, nz) * cell
check("glyph-png-size", img.shape == (height, width, 3) and ctype == 2, f"shape {img.shape}, colour type {ctype}")

axial = cells(img, 0, nx, ny, (height - ny * cell) // 2)
lit = axial.reshape(-1, 3)[axial.reshape(-1, 3).sum(-1) > 0]
red = np.mean((lit[:, 0] > 2 * lit[:, 1]) & (lit[:, 0] > 2 * lit[:, 2])) if len(lit) else 0
check("axial-x-lobe-red", len(lit) > 0 and red > 0.95, f"{len(lit)} lit pixels, {red:.3f} red-dominant")
ext = np.array([extents(axial[j, i]) for j in range(ny) for i in range(nx)])
check("axial-x-lobe-horizontal", np.all(ext[:, 0] >= 2.5 * ext[:, 1]) and ext[:, 0].min() >= cell * 0.8,
      f"horizontal extents {sorted(set(ext[:, 0]))}, vertical {sorted(set(ext[:, 1]))}")
coronal = cells(img, nx * cell + 4, nx, nz, (height - nz * cell) // 2)
ext_c = np.array([extents(coronal[j, i]) for j in range(nz) for i in range(nx)])
check("coronal-x-lobe-horizontal", np.all(ext_c[:, 0] >= 2.5 * ext_c[:, 1]), f"extents {ext_c[:3].tolist()}")
sagittal = cells(img, 2 * nx * cell + 8, ny, nz, (height - nz * cell) // 2)
n_sag = (sagittal.sum(-1) > 0).sum() / (ny * nz)
n_ax = (axial.sum(-1) > 0).sum() / (nx * ny)
check("sagittal-x-lobe-through-plane-small", 0 < n_sag < 0.5 * n_ax,
      f"lit pixels per cell: sagittal {n_sag:.1f}, axial {n_ax:.1f}")

# One lobe along world y: green and vertical in the axial panel, horizontal in the sagittal.
fy = fod_image("fod_y.nii.gz", [0, 1, 0])
dimoc("view", fy, "-o", png, "--zoom", cell)
img, _ = read_png(png)
axial = cells(img, 0, nx, ny, (height - ny * cell) // 2)
lit = axial.reshape(-1, 3)[axial.reshape(-1, 3).sum(-1) > 0]
green = np.mean((lit[:, 1] > 2 * lit[:, 0]) & (lit[:, 1] > 2 * lit[:, 2])) if len(lit) else 0
ext = np.array([extents(axial[j, i]) for j in range(ny) for i in range(nx)])
check("axial-y-lobe-green-vertical", green > 0.95 and np.all(ext[:, 1] >= 2.5 * ext[:, 0]),
      f"{green:.3f} green-dominant, extents {ext[:3].tolist()}")
sagittal = cells(img, 2 * nx * cell + 8, ny, nz, (height - nz * cell) // 2)
ext_s = np.array([extents(sagittal[j, i]) for j in range(nz) for i in range(ny)])
check("sagittal-y-lobe-horizontal", np.all(ext_s[:, 0] >= 2.5 * ext_s[:, 1]), f"extents {ext_s[:3].tolist()}")

# Orientation: voxels 0..3 along x (world x 0..-6 mm: the right-hand side of the picture, as
# x runs against world x) hold x lobes, voxels 4..7 y lobes.
half = np.empty((nx, ny, nz, 45))
half[:4], half[4:] = lobe_coef([1, 0, 0]), lobe_coef([0, 1, 0])
dimoc("view", save(os.path.join(d, "halves.nii.gz"), half, affine), "-o", png, "--zoom", cell)
img, _ = read_png(png)
axial = cells(img, 0, nx, ny, (height - ny * cell) // 2)
left, right = axial[:, :4].reshape(-1, 3).sum(0), axial[:, 4:].reshape(-1, 3).sum(0)
check("world-x-lobes-on-the-right", right[0] > 5 * right[1] and left[1] > 5 * left[0],
      f"left half RGB sums {left.tolist()}, right half {right.tolist()}")

# The rule: 45 volumes are glyphs by themselves; --volume asks for one volume in grey; --glyphs
# draws 6 volumes (lmax 2) too; a map of other counts is refused with --glyphs.
dimoc("view", fx, "-o", png)
_, ctype = read_png(png)
dimoc("view", fx, "-o", png, "--volume", 0)
_, ctype_grey = read_png(png)
check("auto-glyphs-and-volume-grey", ctype == 2 and ctype_grey == 0, f"colour types {ctype}, {ctype_grey}")
f6 = save(os.path.join(d, "fod6.nii.gz"), np.broadcast_to(lobe_coef([1, 0, 0])[:6], (nx, ny, nz, 6)), affine)
dimoc("view", f6, "-o", png)
_, ctype6 = read_png(png)
dimoc("view", f6, "--glyphs", "-o", png)
_, ctype6g = read_png(png)
check("six-volumes-glyphs-only-when-asked", ctype6 == 0 and ctype6g == 2, f"colour types {ctype6}, {ctype6g}")
m3 = save(os.path.join(d, "three.nii.gz"), np.ones((4, 4, 4, 3)))
rc, _, err = dimoc("view", m3, "--glyphs", "-o", png, expect_ok=False)
check("glyphs-refuses-non-sh", rc != 0 and "three.nii.gz" in err and "3" in err and len(err.strip().splitlines()) == 1, err)
finish()
