"""`dimoc fit ... --then ...`: a cascade of fits in one process.

NODDI-Watson data (random fractions, kappa and orientations, a mask that leaves voxels out, a
zero voxel) fitted by the noddi_watson pipeline's three stages (grid, fractions LM, final LM),
once as three separate `dimoc fit` commands chained with --init-from and once as one command
with --then: every file each stage writes but provenance.json must be byte-identical (cmp),
with float64 and with float32 intermediate maps (float32 rounds the starts the next stage
reads: the cascade must round them as the written maps do), a later stage's own --init
overriding the previous stage's map.  The options a later stage may not take are refused
before any work, in one line, exit 2.  Finally `dimoc pipeline noddi_watson` (which now runs
its stages as one cascade) against its stages run as separate commands, and its stage folders
and links as before."""
import filecmp
import json
import os
import signal
import subprocess
import time

import numpy as np

from dmtest import DIMOC, check, dimoc, finish, random_directions, save, scheme, workdir

d = workdir("fit_cascade")
rng = np.random.default_rng(16)
device = ["--device", os.environ["DIMOC_FIT_DEVICE"]] if os.environ.get("DIMOC_FIT_DEVICE") else []


def run(*args):
    """dimoc without dmtest's --device at the end (it would fall in the last stage)."""
    p = subprocess.run([DIMOC] + [str(a) for a in args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


nx, ny, nz = 8, 6, 3
n = nx * ny * nz
v, th, ph = random_directions(rng, n)
truth = {"S0": np.full(n, 1000.0), "fintra": rng.uniform(0.2, 0.8, n), "fiso": rng.uniform(0, 0.3, n),
         "kappa": rng.uniform(0.5, 30, n), "th": th, "ph": ph}
aff = np.diag([2.0, 2.0, 2.0, 1.0])
params = ",".join(f"{k}={save(os.path.join(d, 'true_' + k + '.nii.gz'), x.reshape(nx, ny, nz), aff)}"
                  for k, x in truth.items())
bvals, bvecs = scheme(d, "6x0,30x700,60x2800")
data = os.path.join(d, "dwi.nii.gz")
dimoc("simulate", "noddi_watson", "--bvals", bvals, "--bvecs", bvecs, "--params", params,
      "--noise", "rician", "--snr", 25, "--seed", 3, "--out", data)
inside = np.ones((nx, ny, nz))
inside[0, 0, 0] = inside[7, 5, 2] = 0
mask = save(os.path.join(d, "mask.nii.gz"), inside, aff)
common = ["--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs, "--quiet", *device]
dimoc("dti", "--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs, "--out", f"{d}/dti")
dimoc("angles", f"{d}/dti/V1.nii.gz", "--out", f"{d}/angles")

GRID = ["--grid", "fiso=0,0.1,0.2,0.35,0.6,1", "--grid", "fintra=0.1:0.1:0.9",
        "--grid", "kappa=0.5,1,2,4,8,16,32"]


def stages(out_type, final_init):
    """The three stages' own options (the separate commands add --init-from)."""
    return [["--method", "grid", "--fixed", "th,ph", "--out-type", out_type, *GRID],
            ["--method", "lm", "--fixed", "S0,kappa,th,ph", "--out-type", out_type, "--ic"],
            ["--method", "lm", *final_init]]


def same_files(a, b):
    """Names of the files that differ between folders a and b (provenance.json aside)."""
    na, nb = sorted(os.listdir(a)), sorted(os.listdir(b))
    if na != nb:
        return [f"file lists differ: {na} vs {nb}"]
    return [f for f in na if f != "provenance.json" and not filecmp.cmp(f"{a}/{f}", f"{b}/{f}", shallow=False)]


names = ("grid", "fractions", "final")
for out_type, final_init in (("float64", []), ("float32", ["--init", "fiso=0.25"])):
    sep, cas = f"{d}/sep_{out_type}", f"{d}/cas_{out_type}"
    prev = f"{d}/angles"
    for name, opts in zip(names, stages(out_type, final_init)):
        rc, _, err = run("fit", "noddi_watson", *common, "--out", f"{sep}/{name}", "--init-from", prev, *opts)
        check(f"separate-{out_type}-{name}", rc == 0, err.strip())
        prev = f"{sep}/{name}"
    argv = ["fit", "noddi_watson", *common, "--init-from", f"{d}/angles"]
    for k, (name, opts) in enumerate(zip(names, stages(out_type, final_init))):
        argv += (["--then"] if k else []) + ["--out", f"{cas}/{name}", *opts]
    rc, _, err = run(*argv)
    check(f"cascade-{out_type}-runs", rc == 0 and err.strip() == "", err.strip())
    for name in names:
        diff = same_files(f"{sep}/{name}", f"{cas}/{name}")
        check(f"cascade-{out_type}-{name}-byte-identical", not diff, f"differ: {diff}" if diff else
              f"{len(os.listdir(f'{cas}/{name}'))} files")
    provs = [json.load(open(f"{cas}/{name}/provenance.json")) for name in names]
    seps = [json.load(open(f"{sep}/{name}/provenance.json")) for name in names]
    ok = all(p["cascade"]["stage"] == k + 1 and p["cascade"]["stages"] == 3 for k, p in enumerate(provs))
    ok &= provs[1]["cascade"]["started_from"] == f"{cas}/grid" and provs[0]["cascade"]["started_from"] == ""
    ok &= all(p["options"] == {**s["options"], "init_from": p["options"]["init_from"]} for p, s in zip(provs, seps))
    ok &= provs[2]["options"]["init_from"] == f"{cas}/fractions" and "cascade" not in seps[0]
    counts = [{k: x for k, x in p["voxels"].items() if k != "per_second"} for p in provs + seps]
    ok &= counts[:3] == counts[3:]
    check(f"cascade-{out_type}-provenance", ok, json.dumps(provs[1].get("cascade")))
# The float32 starts really differ from the float64 ones (the rounding is exercised): the final
# maps of the two cascades differ somewhere.
check("cascade-out-type-matters",
      not filecmp.cmp(f"{d}/cas_float64/final/fintra.nii.gz", f"{d}/cas_float32/final/fintra.nii.gz", shallow=False))

# --- Refusals: before any work, one line naming the option and the help, exit 2.
base = ["fit", "noddi_watson", *common, "--init-from", f"{d}/angles", "--out", f"{d}/r1", "--method", "lm", "--then",
        "--out", f"{d}/r2"]
for extra, words in ((["--data", data], "--data after --then"), (["--threads", "1"], "--threads after --then"),
                     (["--mask", mask], "--mask after --then"), (["--device", "cpu"], "--device after --then"),
                     (["--init-from", f"{d}/angles"], "--init-from after --then"),
                     (["noddi_watson"], "'noddi_watson' after --then")):
    rc, _, err = run(*base, *extra)
    lines = [x for x in err.strip().splitlines() if x]
    check(f"refuses-{extra[0].lstrip('-')}", rc == 2 and len(lines) == 1 and words in err
          and "dimoc help fit" in err and not os.path.exists(f"{d}/r1") and not os.path.exists(f"{d}/r2"),
          f"rc {rc}: {err.strip()}")
# `dimoc fit --stage-options` (what pipelines/lib/flags.bash reads) names exactly the options a
# stage after --then takes: each of them passes the check (the run then stops at the missing
# data file, exit 1), each other option of `dimoc help fit` is refused after --then (exit 2).
rc, listed, _ = run("fit", "--stage-options")
listed = {x.split()[0][2:]: len(x.split()) > 1 for x in listed.splitlines() if x.strip()}
_, helptext, _ = run("help", "fit")
options = {x[2:30].split()[0][2:]: len(x[2:30].split()) > 1  # the option's column: --NAME [ARG]
           for x in helptext.split("\noptions:\n")[1].splitlines() if x.startswith("  --")}
values = {"out": f"{d}/r3", "method": "lm", "grid": "fintra=0.5", "fixed": "fintra", "init": "fintra=0.5",
          "dictionary-penalty": "0,0", "out-type": "float32", "noise": "gaussian"}
gone = ["--data", f"{d}/no_such_data.nii.gz", "--bvals", bvals, "--bvecs", bvecs]
wrong = []
for name, valued in options.items():
    if name in ("then", "stage-options") and name not in listed:
        continue
    extra = [f"--{name}"] + ([values.get(name, "10")] if valued else [])
    rc, _, err = run("fit", "noddi_watson", *gone, "--out", f"{d}/r1", "--then", *extra)
    if (name in listed) != (rc == 1 and "after --then" not in err and "no_such_data" in err):
        wrong.append(f"--{name}: rc {rc}: {err.strip()}")
check("stage-options-are-those-taken", rc is not None and len(listed) >= 10 and set(listed) <= set(options)
      and all(listed[k] == options[k] for k in listed) and not wrong, "; ".join(wrong[:3]))
# A later stage's own mistake (a parameter the model lacks) is found before the first stage fits.
rc, _, err = run(*base, "--fixed", "nonsense")
check("refuses-later-stage-before-work", rc == 1 and "no parameter 'nonsense'" in err
      and not os.path.exists(f"{d}/r1"), f"rc {rc}: {err.strip()}")

# --- Ctrl-C in the second stage (long MCMC chains): the first stage stays written whole, the
# second and third leave nothing (no folder, no temporary one), exit status 130.
ci = f"{d}/interrupt"
p = subprocess.Popen([DIMOC, "fit", "noddi_watson", *common, "--init-from", f"{d}/angles", "--out", f"{ci}/one",
                      "--method", "lm", "--then", "--out", f"{ci}/two", "--method", "mcmc", "--burnin", "100000",
                      "--jumps", "100000", "--then", "--out", f"{ci}/three"], stderr=subprocess.PIPE, text=True)
t0 = time.time()
while not os.path.exists(f"{ci}/one/provenance.json") and time.time() - t0 < 120 and p.poll() is None:
    time.sleep(0.05)
time.sleep(0.5)
p.send_signal(signal.SIGINT)
try:  # on a loaded machine the chains' threads take seconds to see the stop
    err = p.communicate(timeout=120)[1]
except subprocess.TimeoutExpired:
    p.kill()
    err = "still running 120 s after Ctrl-C: " + p.communicate()[1]
left = sorted(os.listdir(ci)) if os.path.isdir(ci) else []
check("interrupt-second-stage", p.returncode == 130 and left == ["one"], f"rc {p.returncode}, left {left}: {err.strip()[-200:]}")
one = json.load(open(f"{ci}/one/provenance.json"))
check("interrupt-first-stage-whole", one["cascade"] == {"stage": 1, "stages": 3, "started_from": ""}
      and "status.nii.gz" in os.listdir(f"{ci}/one"))

# --- The pipeline: its cascade against its stages as separate commands (what the script ran
# before the cascade), with --ic among the user's fit options (a per-stage option, in every stage).  The
# first stage takes its orientation from the model's tensor start, as the separate grid
# command without --init-from does.
out = f"{d}/pipe"
rc, _, err = run("pipeline", "noddi_watson", "--data", data, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs,
                 "--out", out, "--ic", "--quiet", *device)
check("pipeline-runs", rc == 0, err.strip()[-300:])
old = f"{d}/pipe_separate"
prev = None
for name, opts in zip(names, stages("float64", [])):
    opts = [o for o in opts if o != "--ic"]
    start = ["--init-from", prev] if prev else []
    run("fit", "noddi_watson", *common, "--out", f"{old}/{name}", *start, *opts, "--ic")
    prev = f"{old}/{name}"
prov = json.load(open(f"{out}/dimoc/final/provenance.json"))
check("pipeline-one-cascade", prov.get("cascade", {}).get("stages") == 3 and "--then" in prov["command"]
      and prov["options"]["ic"], json.dumps(prov.get("cascade")))
for name in names:
    diff = same_files(f"{old}/{name}", f"{out}/dimoc/{name}")
    check(f"pipeline-{name}-as-separate-commands", not diff, f"differ: {diff}" if diff else "")
links = all(os.path.samefile(f"{out}/{m}.nii.gz", f"{out}/dimoc/final/{m}.nii.gz")
            for m in ("fiso", "fintra", "kappa", "OD", "dyads1", "S0", "BIC", "AIC"))
pngs = all(open(f"{out}/{m}.png", "rb").read(8).startswith(b"\x89PNG") for m in ("fiso", "fintra", "OD", "dyads1"))
check("pipeline-links-and-pngs", links and pngs and sorted(os.listdir(f"{out}/dimoc")) ==
      ["final", "fractions", "grid"], str(sorted(os.listdir(f"{out}/dimoc"))))
finish()
