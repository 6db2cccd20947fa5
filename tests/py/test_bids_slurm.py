"""`dimoc bids ... participant --slurm` on a real one-node SLURM cluster (slurmcluster.py).

A synthetic study of four units (sub-01, sub-02, sub-03's ses-1 and ses-2; 12x12x6 NODDI-Watson
signals of a small ellipsoidal "head", b = 0, 1000, 2000, Rician noise, by `dimoc simulate`;
sub-02's mask in derivatives/) runs through noddi_dti twice: once in one local process, once as
one job array with --slurm-batch 2 (two tasks of two units, both at once on the node: sub-01 and
sub-02 in one `dimoc bids` with both labels, sub-03's two sessions in another).  Checked: the
array's script (two tasks, one `dimoc bids` each) and its tasks (each log: one process that did
its two units), the same derivative files on both sides, every NIfTI image of the
derivatives (the maps, the masks) byte-identical (cmp) to the local run's and every qc.json's
counts and medians equal; a second submission finds every unit complete and submits nothing.
The test skips, saying why, only when the cluster cannot start (not root, the packages
missing)."""
import filecmp
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import nibabel as nib
import numpy as np

from dmtest import DIMOC, check, dimoc, finish, workdir
from slurmcluster import start_cluster, started, still_running, stop_all

SHAPE = (12, 12, 6)
AFF = np.diag([2.0, 2.0, 2.0, 1.0])


def make_study(w):
    x, y, z = np.meshgrid(*[np.arange(n) for n in SHAPE], indexing="ij")
    r = np.sqrt(((x - 5.5) / 5) ** 2 + ((y - 5.5) / 5) ** 2 + ((z - 2.5) / 2.6) ** 2)
    sim = os.path.join(w, "sim")
    os.makedirs(sim)
    bvals, bvecs = os.path.join(sim, "bvals"), os.path.join(sim, "bvecs")
    dimoc("scheme", "--shells", "3x0,20x1000,20x2000", "--bvals", bvals, "--bvecs", bvecs)
    maps = dict(S0=np.where(r < 1, 1000.0, 0.0), fiso=np.where(r > 0.8, 0.9, np.where(r < 0.45, 0.05, 0.3)),
                fintra=np.where(r < 0.45, 0.7, 0.3), kappa=np.where(r < 0.45, 16.0, 1.0),
                th=np.full(SHAPE, np.pi / 2), ph=y / 12.0 * np.pi)
    params = []
    for name, a in maps.items():
        p = os.path.join(sim, name + ".nii.gz")
        nib.save(nib.Nifti1Image(a.astype(np.float32), AFF), p)
        params.append(f"{name}={p}")
    ds = os.path.join(w, "ds")
    os.makedirs(ds)
    json.dump({"Name": "synthetic", "BIDSVersion": "1.9.0"}, open(os.path.join(ds, "dataset_description.json"), "w"))
    for seed, (folder, prefix) in enumerate([("sub-01/dwi", "sub-01"), ("sub-02/dwi", "sub-02"),
                                             ("sub-03/ses-1/dwi", "sub-03_ses-1"), ("sub-03/ses-2/dwi", "sub-03_ses-2")],
                                            1):
        d = os.path.join(ds, folder)
        os.makedirs(d)
        dimoc("simulate", "noddi_watson", "--bvals", bvals, "--bvecs", bvecs, "--params", ",".join(params),
              "--noise", "rician", "--snr", 30, "--seed", seed, "--out", os.path.join(d, prefix + "_dwi.nii.gz"))
        for f in glob.glob(os.path.join(d, "*.provenance.json")):
            os.remove(f)
        shutil.copy(bvals, os.path.join(d, prefix + "_dwi.bval"))
        shutil.copy(bvecs, os.path.join(d, prefix + "_dwi.bvec"))
    m = os.path.join(ds, "derivatives/masks/sub-02/dwi/sub-02_desc-brain_mask.nii.gz")
    os.makedirs(os.path.dirname(m))
    nib.save(nib.Nifti1Image((r < 0.9).astype(np.uint8), AFF), m)
    return ds


def bids(*args):
    p = subprocess.run([DIMOC, "bids", *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def derivatives(out):
    """Every file of the derivatives (relative paths), without the pipelines' own folders, the
    logs and the SLURM folder."""
    got = set()
    for d, _, names in os.walk(out):
        rel = os.path.relpath(d, out)
        parts = rel.split(os.sep)
        if "dimoc" in parts or parts[0] in (".slurm", "logs"):
            continue
        got |= {os.path.normpath(os.path.join(rel, n)) for n in names}
    return got


def qc_figures(path):
    q = json.load(open(path))
    return {k: q[k] for k in ("subject", "session", "run_prefix", "pipeline", "voxels_in_mask", "fitted",
                              "flagged", "residual_median", "medians")}


def run_tests(w):
    ds = make_study(w)
    local, sout = os.path.join(w, "local"), os.path.join(w, "slurm-out")
    rc, so, se = bids(ds, local, "participant", "--pipeline", "noddi_dti", "--device", "cpu")
    check("bids-slurm-local-run", rc == 0 and so.count(": done") == 4, f"rc {rc}: {se.strip()[-400:]}")

    rc, so, se = bids(ds, sout, "participant", "--pipeline", "noddi_dti", "--device", "cpu", "--slurm",
                      "--slurm-batch", "2")
    script = os.path.join(sout, ".slurm", "participant.sbatch")
    text = open(script).read() if os.path.exists(script) else ""
    check("bids-slurm-submitted", rc == 0 and "job" in so and "2 tasks for 4 units" in so
          and "#SBATCH --array=1-2" in text and text.count(" participant --pipeline noddi_dti ") == 2
          and "--participant-label 01 02 || rc" in text and "--participant-label 03 || rc" in text,
          f"rc {rc}: {(so + se).strip()[-400:]} | {text[-600:]}")
    if rc != 0:
        return

    # The tasks: done when the queue is empty (at most 3 minutes).
    t0 = time.time()
    while time.time() - t0 < 180:
        q = subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip()
        if q == "":
            break
        time.sleep(1)
    logs = sorted(glob.glob(os.path.join(sout, ".slurm", "logs", "participant_*.log")))
    texts = [open(f).read() for f in logs]
    check("bids-slurm-tasks", q == "" and len(logs) == 2 and all(t.count(": done") == 2 for t in texts)
          and all(t.count("participant level: 2 units done, 0 complete already, 0 failed") == 1 for t in texts),
          f"{time.time() - t0:.0f} s, queue '{q}', logs {[os.path.basename(f) for f in logs]}: "
          + " | ".join(t.strip().replace("\n", "; ")[-300:] for t in texts))

    a, b = derivatives(local), derivatives(sout)
    check("bids-slurm-same-files", a == b and len(a) > 40,
          f"{len(a)} local, {len(b)} slurm; only local {sorted(a - b)[:4]}, only slurm {sorted(b - a)[:4]}")
    images = sorted(f for f in a & b if f.endswith(".nii.gz"))
    differ = [f for f in images if not filecmp.cmp(os.path.join(local, f), os.path.join(sout, f), shallow=False)]
    maps = [f for f in images if "_dwimap." in f]
    check("bids-slurm-maps-byte-identical", len(maps) >= 4 * 8 and len(images) == len(maps) + 4 and not differ,
          f"{len(maps)} maps, {len(images) - len(maps)} masks; different: {differ[:4]}")
    qcs = sorted(f for f in a & b if f.endswith("_qc.json"))
    unequal = [f for f in qcs if qc_figures(os.path.join(local, f)) != qc_figures(os.path.join(sout, f))]
    check("bids-slurm-qc-equal", len(qcs) == 4 and not unequal, f"{len(qcs)} qc files; unequal: {unequal}")

    rc, so, se = bids(ds, sout, "participant", "--pipeline", "noddi_dti", "--device", "cpu", "--slurm",
                      "--slurm-batch", "2")
    q = subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip()
    check("bids-slurm-nothing-left", rc == 0 and "every unit is complete" in so and q == "",
          f"rc {rc}: {(so + se).strip()}; queue '{q}'")


signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below still runs
w = workdir("bids_slurm")
root = tempfile.mkdtemp(prefix="dimoc-slurm-")  # short: the sockets' paths are limited
os.chmod(root, 0o755)  # munged wants its socket's folders open to all
try:
    why = start_cluster(root)
    if why:
        stop_all(root)
        print(f"SKIP test_bids_slurm: {why}")
        sys.exit(0)
    run_tests(w)
finally:
    stop_all(root)
    alive = still_running(root)
    if started:
        check("bids-slurm-daemons-stopped", not alive, ", ".join(alive))
    shutil.rmtree(root, ignore_errors=True)
finish()
