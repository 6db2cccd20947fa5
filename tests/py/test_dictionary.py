"""The dictionary fit (`--method dictionary`, templates/fit/dictionary.h) and the NODDI-Watson
pipeline's --fast route that uses it.

1. Exact recovery: ball & 1 stick simulated without noise with d on the grid (0.0017 among five
   values), f1 varied, the orientation held from the true angles, plain NNLS
   (--dictionary-penalty 0,0): S0, f1 and d come back to round-off of the tabulated dictionary.
2. NODDI-Watson, 400 voxels at SNR 25 (Rician), fintra, fiso, kappa and orientations varied:
   `dimoc pipeline noddi_watson --fast` against the truth within stated bounds, and against
   AMICO's NODDI (dmri-amico, installed for this python) on the same data: dimoc's mean absolute
   errors of fintra, fiso and OD at most AMICO's x 1.05 + 0.003.
3. `dictionary,lm` at least as accurate as `lm` from the model's default start (same held
   orientation), on the same data.
4. Errors, one line each: no --grid; a model without a volume fraction; a [0, 1] parameter the
   signal is not affine in (NODDI's fintra without a grid); dictionary with grid.
On the GPU twin (DIMOC_FIT_DEVICE=gpu) every fit gets --device gpu: the dictionary runs on the
CPU with a one-line warning, and the results are the same."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

import peercache
from dmtest import check, dimoc, finish, load, save, scheme, workdir

d = workdir("dictionary")
rng = np.random.default_rng(16)
on_gpu = os.environ.get("DIMOC_FIT_DEVICE") == "gpu"


def unit_rows(n):
    v = rng.normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v[v[:, 2] < 0] *= -1
    return np.arccos(v[:, 2]), np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)


def maps(prefix, values, n):
    paths = {}
    for k, val in values.items():
        paths[k] = save(os.path.join(d, f"{prefix}{k}.nii.gz"), np.reshape(val, (n, 1, 1)))
    return paths


def od(kappa):
    return 2 / np.pi * np.arctan(1 / kappa)


# --- 1. exact recovery: ball & 1 stick ---------------------------------------------------------
n = 60
bvals, bvecs = scheme(d, "4x0,30x1000,30x2500")
th, ph = unit_rows(n)
f1 = rng.uniform(0.1, 0.9, n)
truth = os.path.join(d, "truth1")
os.makedirs(truth)
m = maps("truth1/", {"f1": f1, "th1": th, "ph1": ph}, n)
f1 = load(m["f1"]).ravel()  # as stored (float32)
mask = save(os.path.join(d, "mask1.nii.gz"), np.ones((n, 1, 1)))
dwi1 = os.path.join(d, "bs.nii.gz")
dimoc("simulate", "ball_1_stick", "--bvals", bvals, "--bvecs", bvecs, "--params",
      f"S0=800,d=0.0017,f1={m['f1']},th1={m['th1']},ph1={m['ph1']}", "--out", dwi1)
common1 = ["--data", dwi1, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs]
rc, _, err = dimoc("fit", "ball_1_stick", *common1, "--method", "dictionary", "--init-from", truth,
                   "--fixed", "th1,ph1", "--grid", "d=0.0011,0.0014,0.0017,0.002,0.0023",
                   "--dictionary-penalty", "0,0",
                   "--out", os.path.join(d, "bs_fit"))
if on_gpu:
    check("gpu-runs-on-cpu", "--method dictionary ran on the CPU" in err, err.strip())
fit = {k: load(os.path.join(d, "bs_fit", f"{k}.nii.gz")).ravel() for k in ("S0", "d", "f1")}
status = load(os.path.join(d, "bs_fit", "status.nii.gz")).ravel()
check("exact-fractions", np.max(np.abs(fit["f1"] - f1)) < 1e-4 and np.all(status == 1),
      f"largest |f1 error| {np.max(np.abs(fit['f1'] - f1)):.2e}, statuses {np.unique(status)}")
check("exact-scale-and-grid", np.max(np.abs(fit["S0"] / 800 - 1)) < 1e-4
      and np.max(np.abs(fit["d"] - 0.0017)) < 1e-7,
      f"largest S0 error {np.max(np.abs(fit['S0'] / 800 - 1)):.2e} (relative), "
      f"d error {np.max(np.abs(fit['d'] - 0.0017)):.2e}")
with open(os.path.join(d, "bs_fit", "provenance.json")) as f:
    prov = f.read()
check("tabulated", "tabulated on 3 shells" in prov, "the ball and stick are symmetric about v")

# --- 2. NODDI-Watson --fast against the truth and AMICO --------------------------------------
n = 400
bvals, bvecs = scheme(d, "6x0,30x1000,60x2000")
th, ph = unit_rows(n)
t = {"S0": np.full(n, 1000.0), "fintra": rng.uniform(0.2, 0.9, n), "fiso": rng.uniform(0, 0.4, n),
     "kappa": np.exp(rng.uniform(np.log(0.5), np.log(30), n)), "th": th, "ph": ph}
m = maps("nw_", t, n)
t = {k: load(p).ravel() for k, p in m.items()}
t["OD"] = od(t["kappa"])
mask = save(os.path.join(d, "mask.nii.gz"), np.ones((n, 1, 1)))
dwi = os.path.join(d, "nw.nii.gz")
dimoc("simulate", "noddi_watson", "--bvals", bvals, "--bvecs", bvecs, "--params",
      ",".join(f"{k}={p}" for k, p in m.items()), "--noise", "rician", "--snr", "25", "--out", dwi)
common = ["--data", dwi, "--mask", mask, "--bvals", bvals, "--bvecs", bvecs]
extra = ["--device", "gpu"] if on_gpu else []
dimoc("pipeline", "noddi_watson", "--fast", "--threads", "2", *common, "--out",
      os.path.join(d, "fast"), *extra)


def errors(folder):
    est = {k: load(os.path.join(folder, f"{k}.nii.gz")).ravel() for k in ("fintra", "fiso", "OD")}
    return {k: float(np.mean(np.abs(est[k] - t[k]))) for k in est}


fast = errors(os.path.join(d, "fast"))
check("fast-against-truth", fast["fintra"] < 0.07 and fast["fiso"] < 0.07 and fast["OD"] < 0.04,
      ", ".join(f"MAE {k} {v:.4f}" for k, v in fast.items()))

# AMICO is a CPU program and the device has none: its comparison is the CPU suite's
if not on_gpu:
    runner = textwrap.dedent("""
    import sys
    import amico
    bvals, bvecs, dwi, mask, out = sys.argv[1:]
    amico.util.set_verbose(1)
    amico.core.setup()
    amico.util.fsl2scheme(bvals, bvecs, out + "/s.scheme")
    ae = amico.Evaluation(study_path=out, subject=".", output_path=out + "/maps")
    ae.set_config("nthreads", 2)
    ae.load_data(dwi, out + "/s.scheme", mask_filename=mask, b0_thr=0)
    ae.set_model("NODDI")
    ae.generate_kernels(regenerate=True)
    ae.load_kernels()
    ae.fit()
    ae.save_results()
    """)

    def amico_run(folder):  # AMICO's maps (not its kernels) kept in the peers' cache
        work = os.path.join(d, "amico")
        os.makedirs(work)
        r = subprocess.run([sys.executable, "-c", runner, bvals, bvecs, dwi, mask, work],
                           capture_output=True, text=True, cwd=tempfile.gettempdir())
        if r.returncode == 0:
            for v in ("NDI", "FWF", "ODI"):
                shutil.copyfile(os.path.join(work, "maps", f"fit_{v}.nii.gz"),
                                os.path.join(folder, f"fit_{v}.nii.gz"))
        return {"returncode": r.returncode, "stderr": r.stderr[-2000:]}

    amico_out, meta = peercache.cached_folder(
        "amico", peercache.python_versions("dmri-amico", "dmri-dicelib"), {"runner": runner},
        amico_run, [bvals, bvecs, dwi, mask])
    p = subprocess.CompletedProcess([], meta["returncode"], "", meta["stderr"])
    if p.returncode != 0:
        check("amico-runs", False, p.stderr.strip()[-500:])
    else:
        a = {"fintra": "NDI", "fiso": "FWF", "OD": "ODI"}
        am = {k: float(np.mean(np.abs(
            load(os.path.join(amico_out, f"fit_{v}.nii.gz")).ravel() - t[k])))
            for k, v in a.items()}
        check("fast-as-accurate-as-amico", all(fast[k] <= am[k] * 1.05 + 0.003 for k in a),
              "dimoc " + ", ".join(f"{k} {fast[k]:.4f}" for k in a) + "; AMICO "
              + ", ".join(f"{k} {am[k]:.4f}" for k in a))

# --- 3. dictionary,lm against lm from the default start ---------------------------------------
# the orientation held at the model's tensor start (`init from theta(1)`), as --fast holds it
kappas = ("0.0157093,0.174528,0.342377,0.529473,0.750821,1.03192,1.42286,2.04125,3.25055,"
          "7.02637,10.5789,21.2049")
dimoc("fit", "noddi_watson", *common, "--method", "lm", "--fixed", "th,ph",
      "--threads", "2", "--out", os.path.join(d, "lm"))
dimoc("fit", "noddi_watson", *common, "--method", "dictionary,lm", "--fixed",
      "th,ph", "--grid", f"kappa={kappas}", "--grid", "fintra=0.1:0.08:0.99", "--threads", "2",
      "--out", os.path.join(d, "dict_lm"))
lm, dict_lm = errors(os.path.join(d, "lm")), errors(os.path.join(d, "dict_lm"))
check("dictionary-lm-at-least-lm", all(dict_lm[k] <= lm[k] * 1.02 + 0.001 for k in lm),
      "dictionary,lm " + ", ".join(f"{k} {v:.4f}" for k, v in dict_lm.items()) + "; lm "
      + ", ".join(f"{k} {v:.4f}" for k, v in lm.items()))

# --- 4. errors ---------------------------------------------------------------------------------
out = os.path.join(d, "err")
rc, _, err = dimoc("fit", "noddi_watson", *common, "--method", "dictionary", "--out", out,
                   expect_ok=False)
check("error-no-grid", rc != 0 and "--method dictionary needs --grid" in err
      and len(err.strip().splitlines()) == 1, err.strip())
rc, _, err = dimoc("fit", "noddi_watson", *common, "--method", "dictionary", "--grid",
                   f"kappa={kappas}", "--fixed", "th,ph", "--out", out,
                   expect_ok=False)
check("error-not-affine", rc != 0 and "not affine in 'fintra'" in err
      and len(err.strip().splitlines()) == 1, err.strip())
stick = os.path.join(d, "stick.model")
with open(stick, "w") as f:
    f.write('model stick_only "one stick"\nmeasure g[3] = bvecs\nmeasure b = bvals\n'
            "param S0 in (0, inf) init b0\nparam d in (0, 0.01) init 0.001\n"
            "param th in [0, pi] init from theta(1) periodic\n"
            "param ph in [0, 2*pi] init from phi(1) periodic\n"
            "signal S0 * exp(-b * d * dot(g, dir(th, ph))^2)\n")
rc, _, err = dimoc("fit", stick, *common, "--method", "dictionary", "--grid", "d=0.001,0.002",
                   "--out", out, expect_ok=False)
check("error-no-fraction", rc != 0 and "has no volume fraction" in err
      and len(err.strip().splitlines()) == 1, err.strip())
rc, _, err = dimoc("fit", "noddi_watson", *common, "--method", "grid,dictionary", "--grid",
                   f"kappa={kappas}", "--out", out, expect_ok=False)
check("error-grid-and-dictionary", rc != 0 and "dictionary and grid" in err, err.strip())
finish()
