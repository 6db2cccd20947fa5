"""Two processes that need the same GPU programs at once compile each only once (make test-gpu):
`dimoc warm csd` started twice together in one empty cache, with the CUDA driver's own cache
off, prints for each of CSD's four programs "compiled" in one process and "in the cache" in the
other (the second waited on the entry's lock and read the first's cubin), and the cache holds
four cubins.  Without the lock both compile every program (NVRTC takes 1-2 s a program, and
the two start within milliseconds), so the check can fail."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
from dmtest import DIMOC, cached_files, check, finish, workdir  # noqa: E402

D = workdir("compile_lock_gpu")
cache = f"{D}/cache"
env = dict(os.environ, XDG_CACHE_HOME=cache, CUDA_CACHE_DISABLE="1")
procs = [subprocess.Popen([DIMOC, "warm", "csd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env) for _ in range(2)]
outs = [p.communicate() for p in procs]
ok = all(p.returncode == 0 for p in procs)
lines = [ln for so, _ in outs for ln in so.splitlines()]
lines = [ln for ln in lines if " gpu sm_" in ln]


def name(ln):
    return ln.split(" gpu sm_")[0].strip()


names = sorted({name(ln) for ln in lines})
compiled = {n: sum(1 for ln in lines if name(ln) == n and "compiled in" in ln) for n in names}
cached = {n: sum(1 for ln in lines if name(ln) == n and "in the cache" in ln) for n in names}
check("compile-lock-both-succeed", ok, "".join(so + se for so, se in outs)[-600:])
check("compile-lock-each-program-compiled-once",
      len(names) == 4 and all(compiled[n] == 1 and cached[n] == 1 for n in names),
      f"compiled {compiled}, in the cache {cached}")
check("compile-lock-four-cubins", len(cached_files(cache, ".cubin")) == 4, str(cached_files(cache, "")))
finish()
