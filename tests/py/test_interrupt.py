"""Nothing half-written: SIGINT or SIGTERM at a random moment of fit, dti, csd, track (FSL's and
--fod), simulate and a pipeline ends the command promptly with exit status 130 or 143, and leaves --out as it was
(absent, or an earlier run's folder byte for byte with its own provenance.json), no temporary
folder beside it and no partial file in the fitter cache, also when the signal arrives while
the host compiler builds the fitter."""
import glob
import hashlib
import json
import os
import random
import signal
import subprocess
import time

import nibabel as nib
import numpy as np

import commitpeer
import fodsim
from dmtest import DIMOC, check, dimoc, finish, save, scheme, workdir

d = workdir("interrupt")
rng = random.Random(int(os.environ.get("DIMOC_TEST_SEED", time.time())))
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def digest(folder):
    """{relative path: sha256} of every file under folder (None when it does not exist)."""
    if not os.path.isdir(folder):
        return None
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, folder)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def leftovers(folder):
    base = os.path.basename(folder.rstrip("/"))
    return glob.glob(os.path.join(os.path.dirname(folder), f".{base}.tmp.*")) + \
        glob.glob(os.path.join(os.path.dirname(folder), f".{base}.old.*"))


def interrupt(args, sig, ready, delay, env=None, timeout=120):
    """Starts dimoc ARGS, waits until ready() (or its first stderr line when ready is None),
    sleeps delay seconds, sends sig; returns (exit status, seconds from signal to exit, stderr)."""
    p = subprocess.Popen([DIMOC] + [str(a) for a in args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env)
    t_end = time.time() + timeout
    if ready is None:
        p.stderr.readline()
    else:
        while not ready() and p.poll() is None and time.time() < t_end:
            time.sleep(0.01)
    time.sleep(delay)
    t0 = time.time()
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        return -9, timeout, err
    return p.returncode, time.time() - t0, err


def expect_stopped(name, out, before, rc, took, err, sig, may_finish=False):
    """rc is sig's status, out is as before (None: absent), nothing temporary left.  With
    may_finish, a run that ended before the signal (status 0, or the signal's status after
    the folder went in place) may instead have left its own complete folder."""
    after = digest(out)
    left = leftovers(out)
    if may_finish and after != before and after is not None and rc in (0, EXIT[sig]):
        ok = "provenance.json" in after and not left
        check(name, ok, f"finished first (rc {rc}), complete folder; left {left}")
        return
    # Killed by the signal itself (-sig) only when it came before main() installed the handler,
    # when nothing had been written yet; a shell reports both as 130 or 143.
    ok = rc in (EXIT[sig], -sig) and after == before and not left and took < 10
    check(name, ok, f"rc {rc} (want {EXIT[sig]}), {took:.1f} s to stop, out "
          f"{'unchanged' if after == before else 'CHANGED'}, leftovers {left}, "
          f"stderr {err.strip()[-200:]!r}")


# Data: 6000 voxels of ball & one stick; MCMC on them takes a minute, LM a second.
bvals, bvecs = scheme(d, "6x0,30x1000,30x2000")
data = f"{d}/sim.nii.gz"
dimoc("simulate", "ball_1_stick", "--bvals", bvals, "--bvecs", bvecs, "--voxels", 6000,
      "--params", "S0=1000,d=1.7e-3,f1=0.5,th1=1,ph1=1", "--noise", "rician", "--snr", 30,
      "--out", data)
check("simulate-provenance", json.load(open(f"{d}/sim.provenance.json"))["dimoc_command"]
      == "simulate")
fit = ["fit", "ball_1_stick", "--data", data, "--bvals", bvals, "--bvecs", bvecs]
dimoc(*fit, "--out", f"{d}/warm")  # the fitter compiled once, into the cache

# 1. A fit into a new folder: nothing at all afterwards.
for sig in (signal.SIGINT, signal.SIGTERM):
    out = f"{d}/new_{sig.name}"
    rc, took, err = interrupt(fit + ["--method", "lm,mcmc", "--out", out], sig, None,
                              rng.uniform(0.1, 1.5))
    expect_stopped(f"fit-new-{sig.name}", out, None, rc, took, err, sig)
    check(f"fit-new-{sig.name}-message", "interrupted by " + sig.name in err, err.strip()[-200:])

# 2. A re-run into a finished folder: the earlier run's files, byte for byte.
out = f"{d}/rerun"
dimoc(*fit, "--out", out, "--ic")
before = digest(out)
prov = json.load(open(f"{out}/provenance.json"))
for sig in (signal.SIGINT, signal.SIGTERM):
    rc, took, err = interrupt(fit + ["--method", "lm,mcmc", "--out", out], sig, None,
                              rng.uniform(0.1, 1.5))
    expect_stopped(f"fit-rerun-{sig.name}", out, before, rc, took, err, sig)
check("fit-rerun-own-provenance", json.load(open(f"{out}/provenance.json")) == prov)
# A finished re-run replaces the folder whole: no file of the earlier run (BIC) remains.
dimoc(*fit, "--out", out)
check("fit-rerun-replaces-whole", not os.path.exists(f"{out}/BIC.nii.gz")
      and os.path.exists(f"{out}/S0.nii.gz") and not leftovers(out))

# 3. During the host compile, in a cache of its own: the cache holds no partial file.
for sig in (signal.SIGINT, signal.SIGTERM):
    cache = f"{d}/cache_{sig.name}"
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    out = f"{d}/compile_{sig.name}"
    building = lambda: glob.glob(f"{cache}/**/*.h", recursive=True)
    rc, took, err = interrupt(fit + ["--out", out], sig, building, rng.uniform(0, 0.3), env)
    expect_stopped(f"compile-{sig.name}", out, None, rc, took, err, sig)
    files = [f for f in glob.glob(f"{cache}/**/*", recursive=True) if os.path.isfile(f)]
    # the fitter, if it was done, and the entry's empty lock (cpu_backend.c) may stay
    partial = [f for f in files if not f.endswith(".so")
               and not (f.endswith(".so.lock") and os.path.getsize(f) == 0)]
    check(f"compile-{sig.name}-cache-clean", not partial, f"partial files: {partial}")

# 4. dti of a larger image, at a random moment (it may finish first: then whole and new).
shape = (48, 48, 30)
g = np.loadtxt(bvecs)
b = np.loadtxt(bvals)
sig_img = 1000 * np.exp(-np.outer(b, np.ones(1)) * 1e-3)[:, 0]
img = np.broadcast_to(sig_img, shape + (len(b),)).astype(np.float32)
img = img * (1 + 0.01 * np.random.default_rng(1).normal(size=img.shape)).astype(np.float32)
dwi = save(f"{d}/dwi.nii.gz", img)
dti = ["dti", "--data", dwi, "--bvals", bvals, "--bvecs", bvecs]
out = f"{d}/dti"
dimoc(*dti, "--out", out)
before = digest(out)
check("dti-provenance", json.load(open(f"{out}/provenance.json"))["inputs"]["data"] == dwi)
for i, sig in enumerate((signal.SIGINT, signal.SIGTERM, signal.SIGINT)):
    rc, took, err = interrupt(dti + ["--out", out, "--save-tensor"], sig, lambda: True,
                              rng.uniform(0, 1.0))
    expect_stopped(f"dti-{i}-{sig.name}", out, before, rc, took, err, sig, may_finish=True)
    before = digest(out)

# 4b. csd of the same image (single-shell CSD of its b=2000 shell), at a random moment.
resp = f"{d}/wm_response.txt"
with open(resp, "w") as f:
    f.write("# Shells: 2000\n1000 -400 100 -20 4\n")
csd = ["csd", "--data", dwi, "--bvals", bvals, "--bvecs", bvecs, "--response", resp, "--device", "cpu"]
out = f"{d}/csd"
dimoc(*csd, "--out", out)
before = digest(out)
check("csd-provenance", json.load(open(f"{out}/provenance.json"))["dimoc_command"] == "csd")
for i, sig in enumerate((signal.SIGINT, signal.SIGTERM)):
    rc, took, err = interrupt(csd + ["--out", out], sig, lambda: True, rng.uniform(0, 1.0))
    expect_stopped(f"csd-{i}-{sig.name}", out, before, rc, took, err, sig, may_finish=True)
    before = digest(out)

# 5. track on the CPU: many streamlines.
tr = f"{d}/samples"
os.makedirs(tr, exist_ok=True)
X, Y, Z, ns = 30, 8, 8, 20
th = np.full((X, Y, Z, ns), np.pi / 2, np.float32)
for name, val in (("th1", th), ("ph1", np.zeros_like(th)), ("f1", np.full_like(th, 0.6))):
    save(f"{tr}/merged_{name}samples.nii.gz", val)
mask = np.ones((X, Y, Z), np.float32)
save(f"{tr}/nodif_brain_mask.nii.gz", mask)
seed = save(f"{d}/seed.nii.gz", mask)
for sig in (signal.SIGINT, signal.SIGTERM):
    out = f"{d}/track_{sig.name}"
    rc, took, err = interrupt(["track", "--samples", tr, "--seed", seed, "--out", out, "-P",
                               20000, "--device", "cpu", "--opd", "--save-streamlines",
                               f"{d}/t_{sig.name}.tck"], sig, None, rng.uniform(0.1, 1.0))
    expect_stopped(f"track-{sig.name}", out, None, rc, took, err, sig)
    check(f"track-{sig.name}-no-tck", not glob.glob(f"{d}/*t_{sig.name}.tck*"))

# 5b. track --fod (FOD tractography) on the CPU: a run of 10^7 streamlines, far longer than the
# test, stopped once its temporary folder exists.  As tckgen does, it keeps what it has: the
# folder goes in place whole with a shorter, valid tracks.tck (its header's count is the
# streamlines in it) and provenance.json saying "interrupted"; the status is still 130 or 143,
# and nothing temporary is left.
os.makedirs(f"{d}/fod")
fp = fodsim.phantom(f"{d}/fod")
for sig in (signal.SIGINT, signal.SIGTERM):
    out = f"{d}/fodtrack_{sig.name}"
    begun = lambda: glob.glob(f"{d}/.fodtrack_{sig.name}.tmp.*")
    rc, took, err = interrupt(["track", "--fod", fp["fod"], "--seed", fp["wm"], "--out", out, "--select",
                               10000000, "--device", "cpu", "--threads", 2], sig, begun, rng.uniform(0.2, 1.0))
    left = leftovers(out)
    tck = f"{out}/tracks.tck"
    ok = rc == EXIT[sig] and took < 10 and not left and os.path.exists(tck)
    check(f"fodtrack-{sig.name}-stops-and-keeps", ok,
          f"rc {rc} (want {EXIT[sig]}), {took:.1f} s to stop, tracks.tck {os.path.exists(tck)}, "
          f"leftovers {left}, stderr {err.strip()[-200:]!r}")
    if os.path.exists(tck):
        n = len(nib.streamlines.load(tck).streamlines)
        head = fodsim.tck_header(tck)
        prov = json.load(open(f"{out}/provenance.json"))["results"]
        # the signal may come before the first batch is whole: an empty file is valid too
        check(f"fodtrack-{sig.name}-valid-tck", int(head["count"]) == n and 0 <= n < 10000000
              and int(head["total_count"]) >= n and prov["interrupted"] == 1 and prov["streamlines"] == n,
              f"{n} streamlines read, header count {head['count']}, total_count {head['total_count']}, "
              f"provenance {prov['streamlines']} interrupted {prov['interrupted']}")
    check(f"fodtrack-{sig.name}-message", "interrupted by " + sig.name in err, err.strip()[-200:])

# 5c. commit (COMMIT's filtering) on the CPU, stopped in its solve (run to 10^7 iterations): a
# fit stopped midway is no result, so nothing is written (unlike tracking).
cp_dir = f"{d}/commit_phantom"
cpp = commitpeer.phantom(cp_dir)
cm = ["commit", "--tractogram", cpp["tck"], "--data", cpp["dwi"], "--mask", cpp["wm"], "--bvals",
      cpp["bvals_file"], "--bvecs", cpp["bvecs_file"], "--peaks", cpp["peaks"], "--tol", 0, "--tol-x", 0,
      "--max-iter", 10000000, "--device", "cpu", "--threads", 1]
for sig in (signal.SIGINT, signal.SIGTERM):
    out = f"{d}/commit_{sig.name}"
    rc, took, err = interrupt(cm + ["--out", out], sig, None, rng.uniform(0.3, 1.0))
    expect_stopped(f"commit-{sig.name}", out, None, rc, took, err, sig)

# 6. A pipeline: the signal reaches its script and the script's dimoc commands; nothing of it
# remains, and no process of it lives on.
mask_path = save(f"{d}/mask.nii.gz", np.ones((6000, 1, 1), np.float32), nib.load(data).affine)
for sig in (signal.SIGINT, signal.SIGTERM):
    out = f"{d}/pipe_{sig.name}"
    started = lambda: glob.glob(f"{d}/.pipe_{sig.name}.tmp.*/.ball_1_stick.tmp.*")
    rc, took, err = interrupt(["pipeline", "model_selection", "--data", data, "--mask", mask_path,
                               "--bvals", bvals, "--bvecs", bvecs, "--out", out,
                               "--models", "ball_1_stick,ball_2_sticks", "--method", "lm,mcmc"], sig,
                              started, rng.uniform(0.1, 0.8))
    expect_stopped(f"pipeline-{sig.name}", out, None, rc, took, err, sig)
    ps = subprocess.run(["pgrep", "-f", f"pipe_{sig.name}"], capture_output=True, text=True)
    check(f"pipeline-{sig.name}-no-process", not ps.stdout.strip(), ps.stdout)

finish()
