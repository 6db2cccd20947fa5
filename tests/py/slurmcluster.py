"""A one-node SLURM cluster of a test's own (Debian's slurm-wlm and munge), shared by the tests
that submit real jobs (test_slurm.py, test_bids_slurm.py).

start_cluster(root) starts munged, slurmctld and slurmd with a private key, their sockets,
spool, state and logs under root, on ports nobody else uses (ProctrackType=proctrack/linuxproc),
and sets SLURM_CONF; it returns None, or why the cluster cannot start (not root, the packages
missing), which the test reports as its skip.  stop_all(root) cancels the cluster's jobs and
stops the daemons and any job step of theirs; call it in a `finally`, so that a failed check or
an interrupted test stops them too.  still_running(root) names what is left after it."""
import glob
import os
import shutil
import signal
import socket
import subprocess
import time

started = []  # (name, Popen) of the daemons this test started


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def our_stepds(root):
    """slurmstepd processes of our slurmd (they hold files under our folder open)."""
    pids = []
    for p in glob.glob("/proc/[0-9]*"):
        try:
            if open(os.path.join(p, "comm")).read().strip() != "slurmstepd":
                continue
            fds = [os.readlink(os.path.join(p, "fd", f)) for f in os.listdir(os.path.join(p, "fd"))]
        except OSError:
            continue
        if any(f.startswith(root) for f in fds):
            pids.append(int(os.path.basename(p)))
    return pids


def stop_all(root):
    """Cancels our cluster's jobs, stops the daemons we started and any job step of ours."""
    if os.environ.get("SLURM_CONF", "").startswith(root):  # our controller only
        subprocess.run(["scancel", "--full", "--user", str(os.getuid())], capture_output=True)
        subprocess.run(["scancel", "--user", str(os.getuid())], capture_output=True)
        time.sleep(1)
    for name, proc in reversed(started):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for name, proc in reversed(started):
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid in our_stepds(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def start_cluster(root):
    """Starts munged, slurmctld, slurmd under root; SLURM_CONF set.  Returns None, or why not."""
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            return f"{tool} not installed (scripts/install-deps.sh installs slurm-wlm and munge)"
    if os.getuid() != 0:
        return "slurmd must run as root here (it does in CI)"
    for d in ("run", "log", "state", "spool"):
        os.makedirs(os.path.join(root, d))
    key = os.path.join(root, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o600)
    sock = os.path.join(root, "run", "munge.socket")
    sbin = lambda t: shutil.which(t) or f"/usr/sbin/{t}"
    log = open(os.path.join(root, "log", "daemons.out"), "w")
    started.append(("munged", subprocess.Popen(
        [sbin("munged"), "-F", "--key-file", key, "--socket", sock,
         "--pid-file", os.path.join(root, "run", "munged.pid"),
         "--log-file", os.path.join(root, "log", "munged.log"),
         "--seed-file", os.path.join(root, "run", "munge.seed")], stdout=log, stderr=log)))
    for _ in range(50):
        if os.path.exists(sock) or started[-1][1].poll() is not None:
            break
        time.sleep(0.1)
    if not os.path.exists(sock):
        return "munged did not start: " + open(os.path.join(root, "log", "daemons.out")).read()[-300:]
    conf = os.path.join(root, "slurm.conf")
    cpus = os.cpu_count() or 1
    with open(conf, "w") as f:
        f.write(f"""ClusterName=dimoctest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
PlugStackConfig={root}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=localhost CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")
    open(os.path.join(root, "plugstack.conf"), "w").close()
    os.environ["SLURM_CONF"] = conf
    started.append(("slurmctld", subprocess.Popen([sbin("slurmctld"), "-D", "-i", "-f", conf],
                                                  stdout=log, stderr=log)))
    started.append(("slurmd", subprocess.Popen([sbin("slurmd"), "-D", "-N", "localhost", "-f", conf],
                                               stdout=log, stderr=log)))
    for _ in range(100):
        p = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
        if p.stdout.strip() == "idle":
            return None
        if any(proc.poll() is not None for _, proc in started):
            break
        time.sleep(0.2)
    tail = ""
    for n in ("slurmctld.log", "slurmd.log", "daemons.out"):
        path = os.path.join(root, "log", n)
        if os.path.exists(path):
            tail += f"{n}: " + " | ".join(open(path).read().strip().splitlines()[-3:]) + "; "
    return "the one-node cluster did not come up: " + tail


def still_running(root):
    """The daemons and job steps of ours still alive (after stop_all: none)."""
    return [n for n, p in started if p.poll() is None] + [f"slurmstepd {p}" for p in our_stepds(root)]
