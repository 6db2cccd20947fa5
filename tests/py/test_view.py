"""dimoc view: PNG size from the grid and voxel sizes, grey window, orientation, direction
colours, errors.  The PNG is decoded here with zlib and struct alone (not through libpng)."""
import os

import numpy as np

from dmtest import check, dimoc, finish, read_png, save, workdir

d = workdir("view")
nx, ny, nz = 20, 10, 6
x = np.arange(nx)[:, None, None] * np.ones((nx, ny, nz))
gradient = save(os.path.join(d, "gradient.nii.gz"), x + 1)  # values 1..20, none zero

# Size: zoom 2, 1 mm voxels: axial 40x20, coronal 40x12, sagittal 20x12, gaps of 4.
png = os.path.join(d, "g.png")
dimoc("view", gradient, "-o", png, "--zoom", 2)
img, ctype = read_png(png)
check("grey-png-size", img.shape == (20, 108) and ctype == 0, f"shape {img.shape}, colour type {ctype}")
check("no-temporary-files-left", sorted(f for f in os.listdir(d) if f.startswith(".")) == [],
      str(os.listdir(d)))

# Grey levels: the window is percentiles 1 and 99 of the non-zero voxels.
lo, hi = np.percentile(x + 1, [1, 99])
cols = np.arange(40)
vox = (cols + 0.5) // 2 + 1
expect = np.round(255 * np.clip((vox - lo) / (hi - lo), 0, 1))
err = np.abs(img[:, :40] - expect[None, :]).max()
check("grey-window-percentiles", err <= 1, f"largest difference {err} grey levels")
check("left-is-left", img[10, 0] < img[10, 39], f"left {img[10, 0]}, right {img[10, 39]}")

# Anisotropic voxels (3 mm in z): coronal and sagittal panels are three times as tall.
aniso = save(os.path.join(d, "aniso.nii.gz"), x + 1, np.diag([1.0, 1.0, 3.0, 1.0]))
dimoc("view", aniso, "-o", png, "--zoom", 2)
img, _ = read_png(png)
check("voxel-sizes-respected", img.shape == (36, 108), f"shape {img.shape}, expected (36, 108)")

# A flipped x axis (radiological storage, as FSL's LAS images): still drawn left on the left.
flipped = save(os.path.join(d, "flipped.nii.gz"), x + 1, np.diag([-1.0, 1.0, 1.0, 1.0]))
dimoc("view", flipped, "-o", png, "--zoom", 2)
img, _ = read_png(png)
check("flipped-axis-reoriented", img[10, 0] > img[10, 39], f"left {img[10, 0]}, right {img[10, 39]}")

# Anterior at the top of the axial panel; superior at the top of the coronal panel.
yz = np.arange(ny)[None, :, None] * np.ones((nx, ny, nz)) + 1
ypath = save(os.path.join(d, "y.nii.gz"), yz)
dimoc("view", ypath, "-o", png, "--zoom", 2)
img, _ = read_png(png)
check("anterior-at-top", img[0, 5] > img[19, 5], f"top {img[0, 5]}, bottom {img[19, 5]}")
# sagittal panel: columns 88..107, anterior on the left
check("anterior-on-left-of-sagittal", img[10, 88] > img[10, 107], f"left {img[10, 88]}, right {img[10, 107]}")
zz = np.arange(nz)[None, None, :] * np.ones((nx, ny, nz)) + 1
zpath = save(os.path.join(d, "z.nii.gz"), zz)
dimoc("view", zpath, "-o", png, "--zoom", 2)
img, _ = read_png(png)
# coronal panel: columns 44..83, 12 rows centred in 20 (rows 4..15)
check("superior-at-top", img[4, 60] > img[15, 60], f"top {img[4, 60]}, bottom {img[15, 60]}")

# Direction colour: dyads along x are red; a weight scales them.
dy = np.zeros((nx, ny, nz, 3))
dy[..., 0] = 1
dpath = save(os.path.join(d, "dyads.nii.gz"), dy)
dimoc("view", "--rgb-from", dpath, "-o", png, "--zoom", 1)
img, ctype = read_png(png)
axial = img[:ny, :nx]
check("dyads-along-x-are-red", ctype == 2 and (axial[..., 0] == 255).all() and (axial[..., 1:] == 0).all(),
      f"colour type {ctype}, pixel {axial[0, 0]}")
wpath = save(os.path.join(d, "w.nii.gz"), (x + 1) / 20)
dimoc("view", "--rgb-from", dpath, "--weight", wpath, "-o", png, "--zoom", 1)
img, _ = read_png(png)
scale = np.percentile((x + 1) / 20, 99)
expect = np.round(255 * np.clip((np.arange(nx) + 1) / 20 / scale, 0, 1))
err = np.abs(img[0, :nx, 0] - expect).max()
check("weight-scales-colour", err <= 1 and (img[0, :nx, 1:] == 0).all(), f"largest difference {err}")
dimoc("view", wpath, "--rgb-from", dpath, "-o", os.path.join(d, "w2.png"), "--zoom", 1)
img2, _ = read_png(os.path.join(d, "w2.png"))
check("positional-map-is-weight", (img2 == img).all(), "the same pixels as with --weight" if (img2 == img).all() else "differs from --weight")

# Bad input: one line naming the problem, non-zero exit, no picture.
bad = [
    (["view", gradient], "-o PNG is required"),
    (["view", os.path.join(d, "missing.nii.gz"), "-o", os.path.join(d, "b.png")], "missing.nii.gz"),
    (["view", "--rgb-from", gradient, "-o", os.path.join(d, "b.png")], "needs 3 volumes"),
    (["view", gradient, "--volume", 3, "-o", os.path.join(d, "b.png")], "--volume 3"),
    (["view", gradient, "--window", "5,1", "-o", os.path.join(d, "b.png")], "--window"),
    (["view", gradient, "--weight", wpath, "-o", os.path.join(d, "b.png")], "--weight goes with --rgb-from"),
    (["view", gradient, "-o", os.path.join(d, "no", "such", "dir.png")], "cannot write"),
]
for args, frag in bad:
    rc, _, err = dimoc(*args, expect_ok=False)
    check(f"error-{frag.split()[0].strip('-')}", rc != 0 and frag in err and err.count("\n") == 1, err.strip())
check("no-picture-after-errors", not os.path.exists(os.path.join(d, "b.png")))
finish()
