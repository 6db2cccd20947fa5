"""dimoc warm for the engines' GPU programs (make test-gpu): in a fresh cache, `dimoc warm track
csd commit` compiles every program it names -- the tracker on samples, the FOD tracker for each
algorithm with and without ACT in both precisions and its track-density mapping, CSD's solver
single-shell in both precisions and multi-tissue with 2 and 3 tissues, COMMIT's solver for
--measurements volumes -- one line each; a second warm finds them all in the cache.  Then runs
with that cache on the GPU (iFOD2 in float with --tdi, SD_STREAM in double, CSD multi-tissue on 3
shells, COMMIT) add no program to it: each found the one the warm made.  The same COMMIT run in
an empty cache does compile one, so the check can fail."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
import commitpeer as cp  # noqa: E402
import fodsim as fs  # noqa: E402
import nibabel as nib  # noqa: E402
from dmtest import cached_files, check, finish, workdir  # noqa: E402
from dmtest import dimoc_in_cache as run  # noqa: E402

D = workdir("warm_engines_gpu")


def programs(cache):
    return cached_files(cache, ".cubin")


os.makedirs(f"{D}/fod", exist_ok=True)
fod = fs.phantom(f"{D}/fod")
c = cp.phantom(f"{D}/commit-phantom", noise=0.02)
nvol = nib.load(c["dwi"]).shape[3]

cache = f"{D}/cache"
p = run(cache, "warm", "track", "csd", "commit", "--measurements", nvol)
lines = p.stdout.splitlines()
# the tracker on samples, 12 FOD trackers + the track-density mapping, 4 CSD solvers, 1 COMMIT
check("warm-compiles-every-engine-program", p.returncode == 0 and len(lines) == 19
      and all("compiled in" in ln for ln in lines) and len(programs(cache)) == 19,
      p.stdout + p.stderr + str(programs(cache)))
p = run(cache, "warm", "track", "csd", "commit", "--measurements", nvol)
check("warm-again-finds-them", p.returncode == 0 and p.stdout.count("in the cache") == 19,
      p.stdout + p.stderr)
before = programs(cache)

runs = {
    "track-ifod2-float": ["track", "--fod", fod["fod"], "--seed", fod["wm"], "--select", 500,
                          "--algorithm", "ifod2", "--precision", "float", "--tdi", "tdi.nii.gz"],
    "track-sd_stream-double": ["track", "--fod", fod["fod"], "--seed", fod["wm"], "--select", 500,
                               "--algorithm", "sd_stream", "--precision", "double"],
    "csd-msmt": ["csd", "--data", c["dwi"], "--bvals", c["bvals_file"], "--bvecs", c["bvecs_file"],
                 "--mask", c["wm"]],
    "commit": ["commit", "--tractogram", c["tck"], "--data", c["dwi"], "--mask", c["wm"],
               "--bvals", c["bvals_file"], "--bvecs", c["bvecs_file"], "--peaks", c["peaks"]],
}
for name, args in runs.items():
    out = f"{D}/{name}"
    p = run(cache, *args, "--out", out, "--device", "gpu")
    prov = json.load(open(f"{out}/provenance.json")) if p.returncode == 0 else {}
    device = str(prov.get("results", {}).get("device", ""))
    check(f"{name}-after-warm-compiles-nothing", p.returncode == 0 and "sm_" in device
          and programs(cache) == before,
          f"{p.stderr.strip()[-300:]} device {device!r}; "
          f"new: {sorted(set(programs(cache)) - set(before))}")

empty = f"{D}/cache-empty"
p = run(empty, *runs["commit"], "--out", f"{D}/commit-cold", "--device", "gpu")
check("commit-without-warm-compiles-its-program", p.returncode == 0 and len(programs(empty)) == 1,
      p.stderr.strip()[-300:] + str(programs(empty)))
finish()
