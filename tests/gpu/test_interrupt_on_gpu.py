"""SIGINT and SIGTERM during a GPU fit, a GPU tracking run and a GPU FOD tracking run: the batch loops stop promptly,
the process exits 130/143, --out is not created and no temporary folder is left (the GPU twin
of the fit and track cases of tests/py/test_interrupt.py)."""
import glob
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import numpy as np  # noqa: E402

import fodsim  # noqa: E402
import nibabel as nib  # noqa: E402
from dmtest import DIMOC, check, dimoc, finish, save, scheme, workdir  # noqa: E402

d = workdir("interrupt_gpu")
bvals, bvecs = scheme(d, "5x0,50x1000,50x2000")
n = 300000
dimoc("simulate", "ball_2_sticks", "--bvals", bvals, "--bvecs", bvecs, "--voxels", n,
      "--params", "S0=1000,d=1.5e-3,f1=0.4,th1=0.5,ph1=1,f2=0.3,th2=1.2,ph2=2", "--noise",
      "rician", "--snr", 30, "--out", f"{d}/sim.nii.gz")


def stop_run(args, sig, started, name):
    """Starts dimoc, waits for started() (the work is under way), sends sig; (rc, seconds)."""
    p = subprocess.Popen([DIMOC] + [str(a) for a in args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    t_end = time.time() + 120
    while not started() and p.poll() is None and time.time() < t_end:
        time.sleep(0.05)
    time.sleep(0.5)
    if p.poll() is not None:
        print(f"     {name}: ended (rc {p.returncode}) before the signal")
    t0 = time.time()
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    took = time.time() - t0
    print(f"     {name}: rc {p.returncode}, {took:.2f} s to stop, stderr {err.strip()[-200:]!r}")
    return p.returncode, took


for sig, want in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
    out = f"{d}/fit_{sig.name}"
    # Under way: the fit's temporary folder exists (the GPU program is compiled before it).
    rc, took = stop_run(["fit", "ball_2_sticks", "--data", f"{d}/sim.nii.gz", "--bvals", bvals,
                         "--bvecs", bvecs, "--method", "lm,mcmc", "--device", "gpu", "--out",
                         out], sig, lambda: glob.glob(f"{d}/.fit_{sig.name}.tmp.*"),
                        f"fit-{sig.name}")
    check(f"gpu-fit-{sig.name}-stops", rc == want and took < 10 and not os.path.exists(out)
          and not glob.glob(f"{d}/.fit_{sig.name}.tmp.*"),
          f"rc {rc} (want {want}), {took:.2f} s, out exists {os.path.exists(out)}")

# Tracking: a bedpostx-like folder of one fibre along x, every voxel a seed.
tr = f"{d}/samples"
os.makedirs(tr)
shape = (40, 40, 40)
mask = np.ones(shape, np.float32)
for name, val in (("th1", np.full(shape + (50,), np.pi / 2)), ("ph1", np.zeros(shape + (50,))),
                  ("f1", np.full(shape + (50,), 0.6))):
    save(f"{tr}/merged_{name}samples.nii.gz", val)
save(f"{tr}/nodif_brain_mask.nii.gz", mask)
seed = save(f"{d}/seed.nii.gz", mask)
for sig, want in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
    out = f"{d}/track_{sig.name}"
    # The tracker writes its folder at the end: signal it 8 s in (past the NVRTC compile), while
    # it traces 64,000 seeds x 20,000 streamlines.
    t_start = time.time()
    rc, took = stop_run(["track", "--samples", tr, "--seed", seed, "--out", out, "-P", 20000,
                         "--device", "gpu", "--opd"], sig, lambda: time.time() - t_start > 8,
                        f"track-{sig.name}")
    check(f"gpu-track-{sig.name}-stops", rc == want and took < 10 and not os.path.exists(out)
          and not glob.glob(f"{d}/.track_{sig.name}.tmp.*"),
          f"rc {rc} (want {want}), {took:.2f} s, out exists {os.path.exists(out)}")

# FOD tracking (track --fod) of 10^8 streamlines on fodsim's phantom, signalled 0.5 s after its
# temporary folder appears (the kernels compiled and the batches under way): as tckgen, it
# stops and keeps what it has (a whole folder with a valid, shorter tracks.tck), status 130/143.
os.makedirs(f"{d}/fod")
fp = fodsim.phantom(f"{d}/fod")
for sig, want in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
    out = f"{d}/fodtrack_{sig.name}"
    begun = lambda: glob.glob(f"{d}/.fodtrack_{sig.name}.tmp.*")
    rc, took = stop_run(["track", "--fod", fp["fod"], "--seed", fp["wm"], "--out", out, "--select", 100000000,
                         "--device", "gpu"], sig, begun, f"fodtrack-{sig.name}")
    tck = f"{out}/tracks.tck"
    n = len(nib.streamlines.load(tck).streamlines) if os.path.exists(tck) else -1
    count = int(fodsim.tck_header(tck)["count"]) if os.path.exists(tck) else -2
    check(f"gpu-fodtrack-{sig.name}-stops-and-keeps", rc == want and took < 10 and n == count and n >= 0
          and not glob.glob(f"{d}/.fodtrack_{sig.name}.tmp.*"),
          f"rc {rc} (want {want}), {took:.2f} s, {n} streamlines, header count {count}")
finish()
