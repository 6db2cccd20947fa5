"""dimoc simulate on all cores: the image does not depend on the thread count (each voxel's noise
is keyed by its index), and its noise-free signal is the model's closed form."""
import os
import subprocess

import nibabel as nib
import numpy as np

import dmtest
from dmtest import DIMOC, check, workdir

w = workdir("simulate")
rng = np.random.default_rng(7)
shape = (13, 11, 7)
aff = np.diag([2.0, 2.0, 2.0, 1.0])
maps = {
    "S0": rng.uniform(500, 1500, shape),
    "f1": rng.uniform(0.2, 0.8, shape),
    "d": rng.uniform(1e-3, 2.5e-3, shape),
    "th1": rng.uniform(0, np.pi, shape),
    "ph1": rng.uniform(0, 2 * np.pi, shape),
}
for k, v in maps.items():
    nib.save(nib.Nifti1Image(v, aff), os.path.join(w, k + ".nii.gz"))
nb0, ndir = 3, 40
g = rng.normal(size=(ndir, 3))
g /= np.linalg.norm(g, axis=1)[:, None]
bvecs = np.vstack([np.zeros((nb0, 3)), g, g])
bvals = np.concatenate([np.zeros(nb0), np.full(ndir, 1000.0), np.full(ndir, 2500.0)])
np.savetxt(os.path.join(w, "bvals"), bvals[None], fmt="%g")
np.savetxt(os.path.join(w, "bvecs"), bvecs.T, fmt="%.8f")

params = ",".join(f"{k}={os.path.join(w, k + '.nii.gz')}" for k in maps)


def simulate(out, threads, noise):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    p = subprocess.run([DIMOC, "simulate", "ball_1_stick", "--params", params,
                        "--bvals", os.path.join(w, "bvals"), "--bvecs", os.path.join(w, "bvecs"),
                        "--noise", noise, "--snr", "20", "--seed", "3", "--out", out],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return nib.load(out).get_fdata()


one = simulate(os.path.join(w, "one.nii.gz"), 1, "rician")
two = simulate(os.path.join(w, "two.nii.gz"), 2, "rician")
five = simulate(os.path.join(w, "five.nii.gz"), 5, "rician")
check("same image on 1, 2 and 5 threads", np.array_equal(one, two) and np.array_equal(one, five),
      f"max difference {np.abs(one - two).max():.3g}, {np.abs(one - five).max():.3g}")

clean = simulate(os.path.join(w, "clean.nii.gz"), 2, "none")
# ball & stick: S0 ((1 - f) exp(-b d) + f exp(-b d (g.n)^2)), n from (th, ph)
n = np.stack([np.sin(maps["th1"]) * np.cos(maps["ph1"]), np.sin(maps["th1"]) * np.sin(maps["ph1"]),
              np.cos(maps["th1"])], axis=-1)
dot = n @ bvecs.T
bd = bvals * maps["d"][..., None]
truth = maps["S0"][..., None] * ((1 - maps["f1"][..., None]) * np.exp(-bd)
                                 + maps["f1"][..., None] * np.exp(-bd * dot ** 2))
rel = np.abs(clean - truth) / truth
check("noise-free signal is the closed form", rel.max() < 1e-6 and np.isfinite(rel).all(), f"max relative error {rel.max():.2g}")
noise = one - clean
sigma = maps["S0"] / 20
check("Rician noise about sigma = S0/SNR at b=2500",
      0.8 < np.std(noise[..., nb0 + ndir:] / sigma[..., None]) < 1.3,
      f"std/sigma {np.std(noise[..., nb0 + ndir:] / sigma[..., None]):.3f}")
raise SystemExit(1 if dmtest.failures else 0)
