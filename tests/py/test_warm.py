"""dimoc warm: the fitters compiled ahead of a fit land where the fit looks for them.  In a fresh
cache, `warm ball_1_stick --device cpu --precision double` compiles one fitter; a fit of that model
then reports no compile (provenance: compile 0 s, the fitter from the cache) and gives the same
maps as a fit in another fresh cache that compiles for itself; a second warm finds it cached; a
fit in float still compiles (only double was warmed).  Every shipped model warms without error.
A misspelt model, a bad precision and --device gpu without a GPU are refused in one line before
anything is compiled; so are the engines (track, csd, commit: GPU programs only) with --device
cpu or without a GPU, even beside a model that could be compiled.  (`make install WARM=1`:
tests/cli/test_install.sh.)"""
import filecmp
import json
import os
import subprocess

from dmtest import cached_files, check, dimoc, finish, workdir
from dmtest import dimoc_in_cache as run

D = workdir("warm")
ROOT = os.environ.get("ROOT", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def cached_fitters(cache):
    return cached_files(cache, ".so")


bvals, bvecs = f"{D}/bvals", f"{D}/bvecs"
dimoc("scheme", "--shells", "3x0,20x1000,20x2000", "--bvals", bvals, "--bvecs", bvecs)
dimoc("simulate", "ball_1_stick", "--bvals", bvals, "--bvecs", bvecs, "--voxels", 50,
      "--params", "S0=1000,d=1.5e-3,f1=0.5,th1=1,ph1=2", "--noise", "rician", "--snr", 30,
      "--out", f"{D}/sim.nii.gz")
fit = ["fit", "ball_1_stick", "--data", f"{D}/sim.nii.gz", "--bvals", bvals, "--bvecs", bvecs,
       "--device", "cpu", "--quiet"]

warm, cold = f"{D}/cache-warm", f"{D}/cache-cold"
p = run(warm, "warm", "ball_1_stick", "--device", "cpu", "--precision", "double")
check("warm-compiles", p.returncode == 0 and "compiled" in p.stdout
      and len(cached_fitters(warm)) == 1, p.stdout + p.stderr + str(cached_fitters(warm)))
p = run(warm, "warm", "ball_1_stick", "--device", "cpu", "--precision", "double")
check("warm-again-finds-it", p.returncode == 0 and "in the cache" in p.stdout, p.stdout + p.stderr)

p = run(warm, *fit, "--precision", "double", "--out", f"{D}/fit-warm")
prov = json.load(open(f"{D}/fit-warm/provenance.json")) if p.returncode == 0 else {}
comp = prov.get("timings_seconds", {}).get("compile")
check("fit-after-warm-compiles-nothing", p.returncode == 0 and comp == 0,
      f"compile {comp} s; {p.stderr.strip()}")
p = run(cold, *fit, "--precision", "double", "--out", f"{D}/fit-cold")
prov = json.load(open(f"{D}/fit-cold/provenance.json")) if p.returncode == 0 else {}
comp_cold = prov.get("timings_seconds", {}).get("compile", 0)
maps = [f for f in sorted(os.listdir(f"{D}/fit-cold")) if f.endswith(".nii.gz")]
same = maps and all(filecmp.cmp(f"{D}/fit-warm/{f}", f"{D}/fit-cold/{f}", shallow=False)
                    for f in maps)
check("warmed-fitter-gives-the-cold-fits-maps", p.returncode == 0 and comp_cold > 0 and same,
      f"{len(maps)} maps identical; the cold fit compiled for {comp_cold:.2f} s")
p = run(warm, *fit, "--precision", "float", "--out", f"{D}/fit-float")
prov = json.load(open(f"{D}/fit-float/provenance.json")) if p.returncode == 0 else {}
check("only-the-warmed-precision", p.returncode == 0
      and prov.get("timings_seconds", {}).get("compile", 0) > 0, p.stderr.strip())

# Three processes that need the same fitter at once (a job array's tasks starting together): one
# compiles it, the others wait for it and load it; the host compiler runs once, nothing is left
# behind but the fitter and its lock.
together = f"{D}/cache-together"
count = f"{D}/compiler-runs"
wrapper = f"{D}/cc-counting.sh"
with open(wrapper, "w") as w:
    w.write(f'echo run >>"{count}"\nexec cc "$@"\n')
env = dict(os.environ, XDG_CACHE_HOME=together, DIMOC_CC=f"sh {wrapper}")
procs = [subprocess.Popen([os.environ.get("DIMOC", "dimoc"), "warm", "ball_1_stick", "--device", "cpu",
                           "--precision", "float"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) for _ in range(3)]
outs = [p.communicate() for p in procs]
runs = open(count).read().count("run") if os.path.exists(count) else 0
left = sorted(os.listdir(os.path.join(together, "dimoc")))
check("concurrent-warms-compile-once", all(p.returncode == 0 for p in procs) and runs == 1
      and len(cached_fitters(together)) == 1 and all(f.endswith((".so", ".so.lock")) for f in left),
      f"compiler run {runs} times; left {left}; {[o[1].strip() for o in outs if o[1].strip()]}")

# Every shipped model, into the test run's shared cache (what other tests have compiled is found
# there, what they have not is compiled now and found by them): both precisions of each.
every = os.environ.get("XDG_CACHE_HOME") or f"{D}/cache-all"
p = run(every, "warm", "--device", "cpu", "--quiet")
shipped = sorted(m[:-6] for m in os.listdir(os.path.join(ROOT, "models")) if m.endswith(".model"))
have = cached_fitters(every)
lacking = [f"{m} {r}" for m in shipped for r in ("float", "double")
           if not any(f.startswith(f"{m}-{r}-") for f in have)]
check("warm-every-shipped-model", p.returncode == 0 and p.stdout == "" and not lacking,
      f"{len(shipped)} models; lacking {lacking}; {p.stderr.strip()}")

bad = f"{D}/cache-bad"
for args, frag in [(["ball_1_stick", "no_such_model"], "unknown model 'no_such_model'"),
                   (["--precision", "half"], "'half' is neither float nor double"),
                   (["--device", "tpu"], "'tpu'"),
                   (["--lanes", "3"], "not a power of two"),
                   (["--bogus"], "unknown option")]:
    p = run(bad, "warm", "--device", "cpu", *args) if "--device" not in args else run(bad, "warm", *args)
    check(f"warm-refuses-{frag.split()[0].strip(chr(39))}", p.returncode != 0
          and frag in p.stderr and p.stderr.count("\n") == 1 and not cached_fitters(bad),
          p.stderr.strip())
for engine in ("track", "csd", "commit"):
    p = run(bad, "warm", "ball_1_stick", engine, "--device", "cpu")
    check(f"warm-refuses-{engine}-on-cpu", p.returncode != 0
          and f"warm: {engine} has only GPU programs" in p.stderr and "--device is cpu" in p.stderr
          and p.stderr.count("\n") == 1 and not cached_fitters(bad), p.stderr.strip())
p = run(bad, "warm", "commit")
if p.returncode != 0:  # no GPU here: refused as such, nothing compiled
    check("warm-engine-without-gpu-refused", "no GPU is usable here" in p.stderr
          and p.stderr.count("\n") == 1 and not cached_fitters(bad), p.stderr.strip())
p = run(bad, "warm", "ball_1_stick", "--device", "gpu", "--precision", "float")
if p.returncode == 0:  # a GPU is here: its fitter compiled, and the host one a GPU fit loads
    check("warm-gpu-compiles-for-the-gpu", "gpu sm_" in p.stdout
          and len(cached_fitters(bad)) == 1, p.stdout.strip())
else:
    check("warm-gpu-without-gpu-refused", "no usable GPU" in p.stderr
          and p.stderr.count("\n") == 1 and not cached_fitters(bad), p.stderr.strip())
finish()
