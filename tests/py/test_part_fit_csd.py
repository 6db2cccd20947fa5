"""--part K/N and `dimoc merge` for fit and csd: a job split into N = 1, 3, 7 parts and merged
gives every output byte for byte as one process does (cmp; provenance.json aside, which lists
the parts), for every fitting method and for single- and multi-tissue CSD with estimated or given
responses.  A part killed mid-run leaves nothing that merge accepts, and merge names the
missing part; parts of different runs, duplicates and bad --part values are refused.
DIMOC_PART_DEVICE=gpu (tests/gpu/) runs the same on a GPU."""
import filecmp
import os
import signal
import subprocess
import time

import numpy as np

import csdsim as cs
from dmtest import DIMOC, check, dimoc, finish, save, workdir

D = workdir("part_fit_csd")
DEVICE = os.environ.get("DIMOC_PART_DEVICE", "cpu")
DEV = ["--device", DEVICE]


def outputs(d):
    return sorted(f for f in os.listdir(d) if f not in ("provenance.json", "parts"))


def same_as_whole(whole, merged):
    """Every file of the whole run in the merged folder, byte for byte, and no other."""
    a, b = outputs(whole), outputs(merged)
    if a != b:
        return False, f"files differ: {sorted(set(a) ^ set(b))}"
    bad = [f for f in a if not filecmp.cmp(f"{whole}/{f}", f"{merged}/{f}", shallow=False)]
    return not bad, (f"{len(a)} files identical" if not bad else f"differ: {bad[:5]}")


def split_merge(name, cmd, whole, n):
    parts = []
    for k in range(1, n + 1):
        p = f"{D}/{name}.{n}/part{k}"
        dimoc(*cmd, "--out", p, "--part", f"{k}/{n}")
        parts.append(p)
    merged = f"{D}/{name}.{n}/merged"
    dimoc("merge", *parts, "--out", merged, "--quiet")
    ok, detail = same_as_whole(whole, merged)
    check(f"{name}-{n}-parts-byte-identical", ok, detail)
    return parts


# ---- fit: ball & 2 sticks on the phantom, every method ----
dimoc("phantom", "--out", f"{D}/ph", "--size", "4")
bvals, bvecs = f"{D}/bvals", f"{D}/bvecs"
dimoc("scheme", "--shells", "4x0,30x1000,30x2000", "--bvals", bvals, "--bvecs", bvecs)
P = f"{D}/ph"
params = ",".join(f"{p}={P}/{p}.nii.gz" for p in ["S0", "d", "f1", "th1", "ph1", "f2", "th2", "ph2"])
dwi = f"{D}/dwi.nii.gz"
dimoc("simulate", "ball_2_sticks", "--bvals", bvals, "--bvecs", bvecs, "--params", params,
      "--noise", "rician", "--snr", "30", "--out", dwi)
fit = ["fit", "ball_2_sticks", "--data", dwi, "--mask", f"{P}/mask.nii.gz", "--bvals", bvals,
       "--bvecs", bvecs, "--quiet", "--threads", "2", *DEV]
methods = {
    "grid": ["--method", "grid", "--grid", "f1=0.2,0.5,0.8", "--grid", "d=0.5e-3,1e-3,2e-3"],
    "lm": ["--method", "lm", "--predicted", "--ic"],
    "mcmc": ["--method", "lm,mcmc", "--burnin", "40", "--jumps", "60", "--sample-every", "5",
             "--save-samples"],
}
for name, extra in methods.items():
    whole = f"{D}/fit-{name}-whole"
    dimoc(*fit, *extra, "--out", whole)
    for n in (1, 3, 7):
        split_merge(f"fit-{name}", fit + extra, whole, n)

# ---- csd: single-shell (tournier response estimated in every part), multi-tissue
# (dhollander), and with given responses ----
rng = np.random.default_rng(5)
SHAPE = (14, 14, 4)
cb, cg = f"{D}/csd.bvals", f"{D}/csd.bvecs"
dimoc("scheme", "--shells", "5x0,40x1000,40x2500", "--bvals", cb, "--bvecs", cg)
b, g = np.loadtxt(cb), np.loadtxt(cg)
aff = cs.oblique_affine(SHAPE)
gw = cs.fsl_to_world(aff, g)
x, y = np.meshgrid(np.arange(SHAPE[0]) - 6.5, np.arange(SHAPE[1]) - 6.5, indexing="ij")
r = np.hypot(x, y)
data = np.zeros(SHAPE + (len(b),))
for i, j, k in np.ndindex(SHAPE):
    if r[i, j] > 6.8:
        continue
    if r[i, j] < 2:
        s = np.exp(-b * cs.D_CSF)
    elif r[i, j] < 3.5:
        s = np.exp(-b * cs.D_GM)
    else:
        u = cs.random_unit(rng, 2)
        s = cs.fibre_signal(b, gw, u[0]) if rng.random() < 0.6 else 0.5 * (
            cs.fibre_signal(b, gw, u[0]) + cs.fibre_signal(b, gw, u[1]))
    data[i, j, k] = 1000 * s + rng.normal(scale=20, size=len(b))
cdwi = save(f"{D}/csd.nii.gz", data, aff)
cmask = save(f"{D}/csd_mask.nii.gz", np.repeat((r <= 6.8)[:, :, None], SHAPE[2], axis=2), aff)
single = f"{D}/single"
os.makedirs(single, exist_ok=True)
keep = [i for i in range(len(b)) if b[i] < 1500]
save(f"{single}/dwi.nii.gz", data[..., keep], aff)
np.savetxt(f"{single}/bvals", b[keep][None], fmt="%g")
np.savetxt(f"{single}/bvecs", g[:, keep], fmt="%.8f")
csd_runs = {
    "csd-single": ["csd", "--data", f"{single}/dwi.nii.gz", "--bvals", f"{single}/bvals",
                   "--bvecs", f"{single}/bvecs", "--mask", cmask, "--lmax", "6"],
    "csd-msmt": ["csd", "--data", cdwi, "--bvals", cb, "--bvecs", cg, "--mask", cmask,
                 "--lmax", "6"],
}
for name, cmd in csd_runs.items():
    whole = f"{D}/{name}-whole"
    dimoc(*cmd, *DEV, "--out", whole)
    for n in (1, 3, 7):
        split_merge(name, cmd + DEV, whole, n)
# given responses: the estimated ones of the multi-tissue run
resp = ",".join(f"{D}/csd-msmt-whole/{t}_response.txt" for t in ("wm", "gm", "csf"))
given = csd_runs["csd-msmt"] + ["--response", resp] + DEV
dimoc(*given, "--out", f"{D}/csd-given-whole")
split_merge("csd-given", given, f"{D}/csd-given-whole", 3)

# ---- a part killed mid-run leaves nothing merge accepts (on the CPU: a GPU may finish first) ----
if DEVICE == "cpu":
    slow = fit + ["--method", "lm,mcmc", "--burnin", "20000", "--jumps", "20000"]
    parts = [f"{D}/killed/part{k}" for k in (1, 2, 3)]
    for k in (1, 3):  # the others finish (a short chain: the merge stops before reading them)
        dimoc(*fit, "--method", "lm", "--out", parts[k - 1], "--part", f"{k}/3")
    proc = subprocess.Popen([DIMOC, *slow, "--out", parts[1], "--part", "2/3"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    check("killed-part-was-running", running, "the part was killed while it ran")
    check("killed-part-leaves-no-folder", not os.path.exists(parts[1]),
          "no part2 folder" if not os.path.exists(parts[1]) else str(os.listdir(parts[1])))
    rc, _, err = dimoc("merge", *parts, "--out", f"{D}/killed/merged", expect_ok=False)
    check("merge-refuses-a-killed-part", rc != 0 and "no such folder" in err
          and not os.path.exists(f"{D}/killed/merged"), err.strip())
    rc, _, err = dimoc("merge", parts[0], parts[2], "--out", f"{D}/killed/merged", expect_ok=False)
    check("merge-names-the-missing-part", rc != 0 and "part 2 of 3 is missing" in err
          and err.count("\n") == 1, err.strip())
    # a folder left by a killed part's process (its temporary) is not a part either
    os.makedirs(parts[1])
    rc, _, err = dimoc("merge", *parts, "--out", f"{D}/killed/merged", expect_ok=False)
    check("merge-refuses-a-folder-without-manifest", rc != 0 and "no part.json" in err, err.strip())

# ---- refusals ----
g3 = f"{D}/fit-lm.3"
rc, _, err = dimoc("merge", f"{g3}/part1", f"{D}/fit-grid.3/part2", f"{g3}/part3", "--out",
                   f"{D}/mixed", expect_ok=False)
check("merge-refuses-parts-of-different-runs", rc != 0 and "different runs" in err, err.strip())
rc, _, err = dimoc("merge", f"{g3}/part1", f"{g3}/part1", f"{g3}/part3", "--out", f"{D}/dup",
                   expect_ok=False)
check("merge-refuses-a-part-twice", rc != 0 and "both hold part 1 of 3" in err, err.strip())
rc, _, err = dimoc("merge", f"{g3}/part1", f"{D}/fit-lm.7/part2", "--out", f"{D}/mixn",
                   expect_ok=False)
check("merge-refuses-parts-of-other-n", rc != 0 and "is part 2 of 7" in err, err.strip())
for bad in ("0/3", "4/3", "3", "a/b", "1/0"):
    rc, _, err = dimoc(*fit, "--out", f"{D}/bad", "--part", bad, expect_ok=False)
    check(f"fit-part-{bad.replace('/', '-of-')}-refused", rc != 0 and "--part" in err
          and not os.path.exists(f"{D}/bad"), err.strip())
rc, _, err = dimoc(*csd_runs["csd-msmt"], "--normalise", "--part", "1/2", "--out", f"{D}/bad",
                   expect_ok=False)
check("csd-normalise-with-part-refused", rc != 0 and "--normalise" in err, err.strip())
finish()
