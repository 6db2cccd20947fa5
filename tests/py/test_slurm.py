"""`dimoc pipeline NAME --slurm` on a real one-node SLURM cluster (Debian's slurm-wlm and munge).

The test starts its own munged, slurmctld and slurmd (slurmcluster.py: a private key, sockets,
spool and state under a temporary folder, ports nobody else uses) and stops them at the end,
also when a check fails or the test is interrupted; it skips, saying why, only when they cannot
start (not root, the packages missing).

On a 2 x 10 phantom the model_selection pipeline (three fits: ball & 1, 2, 3 sticks, then
`dimoc select`) runs once in one process and once as SLURM jobs with --parts 4: each fit an
array of 4 parts, a merge job after it, the finish job last.  Part 2 of the second fit fails
(a --slurm-setup file that exits 3 for it while a flag file exists): --slurm-status must name
it with its log, the merge must not run and no output folder appear; after the flag goes,
--slurm-resubmit runs part 2 and everything after it, and every NIfTI map and the table must be
byte-identical (cmp) to the single run's.  Also: --dry-run prints the scripts and submits
nothing; cluster options without --slurm, unknown options and a bad --parts are refused."""
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from dmtest import DIMOC, check, dimoc, finish, one_and_two_fibres, save, workdir
from slurmcluster import start_cluster, started, still_running, stop_all

def skip(why):
    print(f"SKIP test_slurm: {why}")
    sys.exit(0)


def status(out):
    p = subprocess.run([DIMOC, "pipeline", "--slurm-status", out], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def wait_status(out, want, timeout):
    """Polls --slurm-status until its exit status is in want; the last (status, text)."""
    t0 = time.time()
    while True:
        rc, text = status(out)
        if rc in want or time.time() - t0 > timeout:
            return rc, text
        time.sleep(1)


def phantom(d):
    n = 10
    data, bvals, bvecs = one_and_two_fibres(d, n, "6x0,32x1000,32x2000")
    mask = save(os.path.join(d, "mask.nii.gz"), np.ones((2, n, 1)))
    return ["--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs]


def run_tests(d):
    inputs = phantom(d)
    one, out = os.path.join(d, "one"), os.path.join(d, "sel")
    work = os.path.join(d, ".sel.slurm")
    dimoc("pipeline", "model_selection", *inputs, "--out", one)

    # Options: checked before any work.
    rc, _, err = dimoc("pipeline", "model_selection", *inputs, "--out", out, "--partition", "gpu",
                       expect_ok=False)
    check("slurm-option-needs-slurm", rc != 0 and "--partition is only valid with --slurm" in err,
          err.strip())
    rc, _, err = dimoc("pipeline", "model_selection", *inputs, "--out", out, "--slurm", "--bogus",
                       expect_ok=False)
    check("slurm-unknown-option", rc != 0 and "--bogus" in err and "help pipeline" in err, err.strip())
    rc, _, err = dimoc("pipeline", "model_selection", *inputs, "--out", out, "--slurm", "--parts", "0",
                       expect_ok=False)
    check("slurm-bad-parts", rc != 0 and "--parts" in err and not os.path.exists(work), err.strip())
    rc, _, err = dimoc("help", "pipeline", "model_selection")
    check("slurm-help", all(o in _ for o in ("--slurm", "--parts N", "--partition P", "--dry-run")))

    # --dry-run: the scripts, nothing submitted, nothing left.
    rc, text, err = dimoc("pipeline", "model_selection", *inputs, "--out", out, "--slurm", "--parts", "4",
                          "--dry-run", "--partition", "debug", "--cpu-partition", "cpux", "--time",
                          "10:00", "--cpus-per-task", "2")
    heads = [l for l in text.splitlines() if l.startswith("==> ")]
    q = subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip()
    check("slurm-dry-run", len(heads) == 7 and text.count("#SBATCH --array=1-4") == 3
          and text.count("#SBATCH --partition=debug") == 3 and text.count("#SBATCH --partition=cpux") == 4
          and text.count("#SBATCH --cpus-per-task=2") == 7 and "--part \"$task\"/4" in text
          and " merge " in text and q == "" and not os.path.exists(work) and not os.path.exists(out),
          f"{len(heads)} scripts, queue '{q}'")

    # The run: part 2 of the second fit fails while the flag file exists.
    flag = os.path.join(d, "fail-part-2")
    open(flag, "w").close()
    setup = os.path.join(d, "setup.sh")
    with open(setup, "w") as f:
        f.write(f'if [ "${{SLURM_ARRAY_TASK_ID:-}}" = 2 ] && [ -e {flag} ]; then\n'
                f'    case $SLURM_JOB_NAME in *-03) echo "setup: part 2 fails on purpose" >&2; exit 3 ;; esac\n'
                f'fi\n')
    t0 = time.time()
    rc, text, err = dimoc("pipeline", "model_selection", *inputs, "--out", out, "--slurm",
                          "--parts", "4", "--slurm-setup", setup, expect_ok=False)
    check("slurm-submitted", rc == 0 and "07-finish: job" in text, (text + err).strip()[-400:])
    if rc != 0:
        return
    rc, text = wait_status(out, (0, 1), 90)
    log = os.path.join(work, "slurm", "logs", "03-ball_2_sticks_2.log")
    lines = text.splitlines()
    failed_line = [l for l in lines if "part 2:" in l]
    check("slurm-status-names-failed-part",
          rc == 1 and failed_line and "exit 3" in failed_line[0] and log in failed_line[0]
          and os.path.exists(log) and "fails on purpose" in open(log).read(), text)
    merge_line = [l for l in lines if l.strip().startswith("04-ball_2_sticks-merge")]
    check("slurm-merge-did-not-run",
          merge_line and " done " not in merge_line[0] and not os.path.exists(out)
          and not os.path.exists(os.path.join(work, "ball_2_sticks"))
          and os.path.isdir(os.path.join(work, "ball_1_stick")), text)

    # Resubmit the failed part and everything after it.
    os.unlink(flag)
    rc, text, err = dimoc("pipeline", "--slurm-resubmit", out, expect_ok=False)
    check("slurm-resubmit", rc == 0 and "03-ball_2_sticks: job" in text and "(parts 2)" in text
          and "07-finish: job" in text and "01-" not in text, (text + err).strip())
    rc, text = wait_status(out, (0, 1), 120)
    resubmitted = [l for l in text.splitlines() if l.strip().startswith("03-ball_2_sticks")]
    check("slurm-complete", rc == 0 and "complete" in text and os.path.isdir(out)
          and not os.path.exists(work) and resubmitted and " jobs " in resubmitted[0],
          f"{time.time() - t0:.0f}s: {text}")
    if rc != 0:
        return
    maps = sorted(os.path.relpath(p, one) for p in glob.glob(os.path.join(one, "**", "*.nii.gz"),
                                                               recursive=True))
    diff = [m for m in maps + ["best_BIC.txt"]
            if subprocess.run(["cmp", "-s", os.path.join(one, m), os.path.join(out, m)]).returncode]
    check("slurm-byte-identical", len(maps) >= 40 and not diff,
          f"{len(maps)} maps and the table, different: {diff[:5]}")
    check("slurm-parts-cleaned", not os.path.exists(os.path.join(out, "slurm", "parts"))
          and os.path.exists(os.path.join(out, "slurm", "jobs.tsv"))
          and os.path.exists(os.path.join(out, "provenance.json")),
          str(os.listdir(os.path.join(out, "slurm"))))
    q = subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip()
    check("slurm-old-jobs-cancelled", q == "", f"still queued: {q}")
    rc, text, err = dimoc("pipeline", "--slurm-resubmit", out, expect_ok=False)
    check("slurm-resubmit-nothing", rc != 0 and "nothing to resubmit" in err, err.strip())


signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below still runs
d = workdir("slurm")
root = tempfile.mkdtemp(prefix="dimoc-slurm-")  # short: the sockets' paths are limited
os.chmod(root, 0o755)  # munged wants its socket's folders open to all
try:
    why = start_cluster(root)
    if why:
        stop_all(root)
        skip(why)
    run_tests(d)
finally:
    stop_all(root)
    alive = still_running(root)
    if started:
        check("slurm-daemons-stopped", not alive, ", ".join(alive))
    shutil.rmtree(root, ignore_errors=True)
finish()
