"""The dispersion pipelines (pipelines/noddi_watson.sh, noddi_bingham.sh, ball_1_racket.sh,
noddi_2_binghams.sh through `dimoc pipeline`) and `dimoc angles`, the helper that turns their
tensor's eigenvectors into starting angles.

A 6 x 5 x 2 phantom (2 mm voxels) simulated with noddi_2_binghams: x < 3 one fibre population
(ffan2 = 0), x >= 3 two at 90 degrees (ffan2 = 0.4), each Bingham-dispersed (kappa 16, 4);
the mask leaves out four voxels.  Every pipeline runs on it with --ic; every NIfTI file each
one writes (its outputs and every stage's) is read back with nibabel: the phantom's grid,
3 volumes for directions, finite values inside the mask; the named outputs and the PNGs are all
there.  noddi_watson also runs with --mcmc (short chains), and noddi_2_binghams must find the
two orientations of the crossings."""
import glob
import os

import nibabel as nib
import numpy as np

from dmtest import angle_deg, check, dimoc, finish, load, save, scheme, workdir

d = workdir("pipeline_noddi")
extra = ["--device", os.environ["DIMOC_FIT_DEVICE"]] if os.environ.get("DIMOC_FIT_DEVICE") else []
rng = np.random.default_rng(99)


def unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def angles_of(v):
    v = np.where(v[..., 2:3] < 0, -v, v)
    return np.arccos(np.clip(v[..., 2], -1, 1)), np.mod(np.arctan2(v[..., 1], v[..., 0]), 2 * np.pi)


def frame(th, ph):
    e_th = np.stack([np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)], -1)
    e_ph = np.stack([-np.sin(ph), np.cos(ph), np.zeros_like(ph)], -1)
    return e_th, e_ph


# --- dimoc angles: th, ph of the first map, psi that makes n2 = v x n1 the second's direction.
shape = (4, 3, 2)
v = unit(rng.normal(size=shape + (3,)))
w = unit(np.cross(v, rng.normal(size=shape + (3,))))
v[0, 0, 0] = 0  # a zero vector (outside a mask): angles 0
aff = np.diag([2.0, 2.0, 2.0, 1.0])
save(os.path.join(d, "v.nii.gz"), v, aff)
save(os.path.join(d, "w.nii.gz"), w + 0.3 * v, aff)  # only the part perpendicular to v counts
dimoc("angles", os.path.join(d, "v.nii.gz"), "--fanning", os.path.join(d, "w.nii.gz"), "--suffix", "1",
      "--out", os.path.join(d, "ang"))
th, ph, psi = (load(os.path.join(d, "ang", n + "1.nii.gz")) for n in ("th", "ph", "psi"))
e_th, e_ph = frame(th, ph)
back = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
n2 = np.cos(psi)[..., None] * e_ph - np.sin(psi)[..., None] * e_th
ok = np.ones(shape, bool)
ok[0, 0, 0] = False
check("angles-direction", np.max(angle_deg(back[ok], v[ok])) < 1e-3 and th[0, 0, 0] == 0 and ph[0, 0, 0] == 0,
      f"largest error {np.max(angle_deg(back[ok], v[ok])):.2e} deg")
check("angles-fanning", np.max(angle_deg(n2[ok], w[ok])) < 1e-3 and np.all((psi >= 0) & (psi < np.pi)),
      f"largest error {np.max(angle_deg(n2[ok], w[ok])):.2e} deg, psi in [{psi.min():.3f}, {psi.max():.3f}]")
rc, _, err = dimoc("angles", os.path.join(d, "ang", "th1.nii.gz"), "--out", d, expect_ok=False)
check("angles-error-not-vectors", rc != 0 and "th1.nii.gz has 1 volume" in err, err.strip())

# --- The phantom.
nx, ny, nz = 6, 5, 2
names = ["S0", "fiso", "ffan2", "fintra1", "kappa11", "kappa12", "th1", "ph1", "psi1",
         "fintra2", "kappa21", "kappa22", "th2", "ph2", "psi2"]
u = unit(rng.normal(size=(nx, ny, nz, 3)))
x = unit(np.cross(u, unit(rng.normal(size=(nx, ny, nz, 3)))))
th1, ph1 = angles_of(u)
th2, ph2 = angles_of(x)
cross = (np.arange(nx) >= 3)[:, None, None] * np.ones((nx, ny, nz), bool)
truth = {"S0": 1000, "fiso": 0.1, "ffan2": np.where(cross, 0.4, 0.0), "fintra1": 0.7, "kappa11": 16,
         "kappa12": 4, "th1": th1, "ph1": ph1, "psi1": rng.uniform(0, np.pi, (nx, ny, nz)),
         "fintra2": 0.7, "kappa21": 16, "kappa22": 4, "th2": th2, "ph2": ph2,
         "psi2": rng.uniform(0, np.pi, (nx, ny, nz))}
params = ",".join(f"{k}={save(os.path.join(d, 'true_' + k + '.nii.gz'), np.broadcast_to(val, (nx, ny, nz)), aff)}"
                  for k, val in truth.items())
bvals, bvecs = scheme(d, "9x0,30x711,60x2855")
data = os.path.join(d, "dwi.nii.gz")
dimoc("simulate", "noddi_2_binghams", "--bvals", bvals, "--bvecs", bvecs, "--params", params,
      "--noise", "rician", "--snr", 30, "--seed", 4, "--out", data)
inside = np.ones((nx, ny, nz), bool)
inside[0, 0, 0] = inside[5, 4, 1] = inside[2, 0, 1] = inside[3, 3, 0] = False
mask = save(os.path.join(d, "mask.nii.gz"), inside.astype(float), aff)

VECTORS = {"dyads1", "dyads2", "fanning", "fanning1", "fanning2", "V1", "V2", "V3"}
EXPECTED = {
    "noddi_watson": ("fiso fintra kappa OD S0 dyads1 BIC AIC", "fiso fintra OD dyads1"),
    "noddi_bingham": ("fiso fintra kappa1 kappa2 ODIp ODIs ODItot DA S0 dyads1 fanning BIC AIC",
                      "fiso fintra ODItot DA dyads1 fanning"),
    "ball_1_racket": ("fiso d kappa1 kappa2 ODItot DA S0 dyads1 fanning BIC AIC",
                      "fiso d ODItot DA dyads1 fanning"),
    "noddi_2_binghams": ("fiso ffan2 fintra1 fintra2 kappa11 kappa12 kappa21 kappa22 ODItot1 DA1 "
                         "ODItot2 DA2 S0 dyads1 dyads2 fanning1 fanning2 BIC AIC",
                         "fiso ffan2 ODItot1 ODItot2 dyads1 dyads2"),
}


def read_back(out):
    """Problems with the NIfTI files under out, and how many were read."""
    problems, count = [], 0
    for path in sorted(glob.glob(os.path.join(out, "**", "*.nii.gz"), recursive=True)):
        name = os.path.basename(path)[:-7]
        img = nib.load(path)
        arr = np.asarray(img.dataobj, dtype=np.float64)
        count += 1
        rel = os.path.relpath(path, out)
        want = (nx, ny, nz, 3) if name in VECTORS else (nx, ny, nz)
        if name.endswith("_samples") or name == "tensor":
            want = arr.shape if arr.shape[:3] == (nx, ny, nz) else (nx, ny, nz)
        if arr.shape != want:
            problems.append(f"{rel}: shape {arr.shape}, not {want}")
        elif not np.all(np.isfinite(arr[inside])):
            problems.append(f"{rel}: not finite inside the mask")
        elif not np.allclose(img.affine, aff):
            problems.append(f"{rel}: affine differs from the data's")
    return problems, count


for name, (maps, pngs) in EXPECTED.items():
    out = os.path.join(d, name)
    rc, _, err = dimoc("pipeline", name, "--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs,
                       "--out", out, "--ic", "--quiet", *extra,
                       expect_ok=False)
    check(f"{name}-runs", rc == 0, err.strip()[-300:])
    if rc != 0:
        continue
    top = {os.path.basename(p)[:-7] for p in glob.glob(os.path.join(out, "*.nii.gz"))}
    check(f"{name}-outputs", top == set(maps.split()),
          f"missing {sorted(set(maps.split()) - top)}, unexpected {sorted(top - set(maps.split()))}")
    bad = [p for p in pngs.split() if not open(os.path.join(out, p + ".png"), "rb").read(8).startswith(b"\x89PNG")]
    check(f"{name}-pngs", not bad, f"not PNG: {bad}")
    problems, count = read_back(out)
    check(f"{name}-read-back", not problems, "; ".join(problems[:3]) or f"{count} NIfTI files")
    status = load(os.path.join(out, "dimoc", "final", "status.nii.gz"))
    # 1 fitted, 2 LM at its iteration limit (a few of noddi_2_binghams' 15-parameter fits), 6
    # at a bound (where x < 3 the phantom has one population, ffan2 = 0; in the crossings the
    # fitted single racket or Watson may end with a fraction or kappa at a bound)
    check(f"{name}-status", np.all(np.isin(status[inside], (1, 2, 6))) and np.all(status[~inside] == 0),
          f"status values inside {sorted(set(status[inside].tolist()))}")

# noddi_2_binghams finds both orientations of the crossings.
out = os.path.join(d, "noddi_2_binghams")
if os.path.exists(os.path.join(out, "dyads2.nii.gz")):
    d1, d2 = load(os.path.join(out, "dyads1.nii.gz")), load(os.path.join(out, "dyads2.nii.gz"))
    sel = cross & inside
    d1, d2, uu, xx = d1[sel], d2[sel], u[sel], x[sel]
    err = np.maximum(np.minimum(angle_deg(d1, uu), angle_deg(d1, xx)), np.minimum(angle_deg(d2, uu), angle_deg(d2, xx)))
    check("noddi_2_binghams-crossings", np.median(err) < 10,
          f"median of the larger of the two angular errors {np.median(err):.1f} deg")
    # BIC against the one-population fit the pipeline made on the way (OUTDIR/noddi_bingham).
    two = load(os.path.join(out, "BIC.nii.gz")) < load(os.path.join(out, "noddi_bingham", "BIC.nii.gz"))
    won, lost = np.mean(two[cross & inside]), np.mean(two[~cross & inside])
    check("noddi_2_binghams-bic", won >= 0.75 and lost <= 0.25,
          f"lower BIC than noddi_bingham in {100 * won:.0f}% of the crossings, {100 * lost:.0f}% of the rest")

# --mcmc: the last stage samples (short chains here); its posterior sd maps appear.
out = os.path.join(d, "watson_mcmc")
rc, _, err = dimoc("pipeline", "noddi_watson", "--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs,
                   "--out", out, "--mcmc", "--burnin", 200,
                   "--jumps", 200, "--quiet", *extra, expect_ok=False)
std = os.path.join(out, "dimoc", "final", "fintra_sd.nii.gz")
check("noddi_watson-mcmc", rc == 0 and os.path.exists(std) and np.all(load(std)[inside] > 0),
      err.strip()[-300:] if rc else f"fintra_sd {'present' if os.path.exists(std) else 'missing'}")
if rc == 0:
    problems, count = read_back(out)
    check("noddi_watson-mcmc-read-back", not problems, "; ".join(problems[:3]) or f"{count} NIfTI files")

rc, _, err = dimoc("pipeline", "noddi_bingham", "--data", data, "--mask", mask, expect_ok=False)
check("required-options", rc != 0 and "--out is required" in err, err.strip())
finish()
