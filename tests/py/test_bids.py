"""`dimoc bids BIDS_DIR OUTPUT_DIR participant`: a whole synthetic study in one process.

The dataset is made here: four subjects on a 12x12x6 grid, NODDI-Watson signals of a small
ellipsoidal "head" (b = 0, 1000, 2000; Rician noise) simulated by `dimoc simulate`; sub-02 has
two sessions, sub-03 acq-/run- entities and its .bval/.bvec inherited from the dataset's top
folder (dwi.bval, dwi.bvec), sub-04 a brain mask in derivatives/.  The names follow BIDS's
dwi examples (ds114: sub-01/ses-test/dwi/sub-01_ses-test_dwi.nii.gz with .bval/.bvec).

Checked against independent runs and readers:
- every derivative's exact name; the maps byte-identical (cmp) to `dimoc pipeline noddi_dti`
  run by hand on the same subject and mask, and for csd to `dimoc response --algorithm
  dhollander` + `dimoc csd` by hand; the mask made equal to `dimoc mask`'s (nibabel);
- sidecars and dataset_description.json parsed by Python's json with their fields; qc.json's
  counts against nibabel (voxels of the mask, status == 1 in the fit's status map) and its
  medians against numpy;
- bad inputs (a missing .bvec, a .bval of the wrong length, a 3D "dwi", two runs of one name,
  a participant with no data) each one stderr line naming the file, the good units complete,
  exit status 1; a BIDS_DIR whose dataset_description.json is not JSON and an OUTPUT_DIR that
  cannot be made are refused before any work;
- a second run skips the complete units (their files' mtimes unchanged) and redoes a removed
  one; SIGTERM during a run exits 143 leaving no temporary folder and no partial unit;
  --participant-label selects; unknown options are refused; --slurm --dry-run prints the job
  array."""
import glob
import json
import os
import shutil
import signal
import subprocess
import time

import nibabel as nib
import numpy as np

from dmtest import DIMOC, check, dimoc, finish, workdir

W = workdir("bids")
SHAPE = (12, 12, 6)
AFF = np.diag([2.0, 2.0, 2.0, 1.0])
x, y, z = np.meshgrid(*[np.arange(n) for n in SHAPE], indexing="ij")
R = np.sqrt(((x - 5.5) / 5) ** 2 + ((y - 5.5) / 5) ** 2 + ((z - 2.5) / 2.6) ** 2)
SIM = os.path.join(W, "sim")
os.makedirs(SIM)
BVALS, BVECS = os.path.join(SIM, "bvals"), os.path.join(SIM, "bvecs")
dimoc("scheme", "--shells", "3x0,20x1000,20x2000", "--bvals", BVALS, "--bvecs", BVECS)
maps = dict(S0=np.where(R < 1, 1000.0, 0.0), fiso=np.where(R > 0.8, 0.9, np.where(R < 0.45, 0.05, 0.3)),
            fintra=np.where(R < 0.45, 0.7, 0.3), kappa=np.where(R < 0.45, 16.0, 1.0),
            th=np.full(SHAPE, np.pi / 2), ph=y / 12.0 * np.pi)
params = []
for name, a in maps.items():
    p = os.path.join(SIM, name + ".nii.gz")
    nib.save(nib.Nifti1Image(a.astype(np.float32), AFF), p)
    params.append(f"{name}={p}")


def simulate(path, seed):
    dimoc("simulate", "noddi_watson", "--bvals", BVALS, "--bvecs", BVECS, "--params", ",".join(params),
          "--noise", "rician", "--snr", 30, "--seed", seed, "--out", path)
    side = path.replace(".nii.gz", ".provenance.json")
    if os.path.exists(side):
        os.remove(side)


def add_run(root, folder, prefix, seed, grads=True):
    d = os.path.join(root, folder)
    os.makedirs(d, exist_ok=True)
    simulate(os.path.join(d, prefix + "_dwi.nii.gz"), seed)
    if grads:
        shutil.copy(BVALS, os.path.join(d, prefix + "_dwi.bval"))
        shutil.copy(BVECS, os.path.join(d, prefix + "_dwi.bvec"))
    json.dump({"PhaseEncodingDirection": "j-"}, open(os.path.join(d, prefix + "_dwi.json"), "w"))


DS = os.path.join(W, "ds")
os.makedirs(DS)
json.dump({"Name": "synthetic", "BIDSVersion": "1.9.0"}, open(os.path.join(DS, "dataset_description.json"), "w"))
add_run(DS, "sub-01/dwi", "sub-01", 1)
add_run(DS, "sub-02/ses-1/dwi", "sub-02_ses-1", 2)
add_run(DS, "sub-02/ses-2/dwi", "sub-02_ses-2", 3)
add_run(DS, "sub-03/dwi", "sub-03_acq-b2k_run-1", 4, grads=False)
shutil.copy(BVALS, os.path.join(DS, "dwi.bval"))
shutil.copy(BVECS, os.path.join(DS, "dwi.bvec"))
add_run(DS, "sub-04/dwi", "sub-04", 5)
DMASK = os.path.join(DS, "derivatives/masks/sub-04/dwi/sub-04_space-dwi_desc-brain_mask.nii.gz")
os.makedirs(os.path.dirname(DMASK))
nib.save(nib.Nifti1Image((R < 0.9).astype(np.uint8), AFF), DMASK)

RUNS = {  # prefix -> (unit folder, dwi path, bval, bvec)
    "sub-01": ("sub-01", "sub-01/dwi/sub-01_dwi.nii.gz", "sub-01/dwi/sub-01_dwi.bval", "sub-01/dwi/sub-01_dwi.bvec"),
    "sub-02_ses-1": ("sub-02/ses-1", "sub-02/ses-1/dwi/sub-02_ses-1_dwi.nii.gz",
                     "sub-02/ses-1/dwi/sub-02_ses-1_dwi.bval", "sub-02/ses-1/dwi/sub-02_ses-1_dwi.bvec"),
    "sub-02_ses-2": ("sub-02/ses-2", "sub-02/ses-2/dwi/sub-02_ses-2_dwi.nii.gz",
                     "sub-02/ses-2/dwi/sub-02_ses-2_dwi.bval", "sub-02/ses-2/dwi/sub-02_ses-2_dwi.bvec"),
    "sub-03_acq-b2k_run-1": ("sub-03", "sub-03/dwi/sub-03_acq-b2k_run-1_dwi.nii.gz", "dwi.bval", "dwi.bvec"),
    "sub-04": ("sub-04", "sub-04/dwi/sub-04_dwi.nii.gz", "sub-04/dwi/sub-04_dwi.bval", "sub-04/dwi/sub-04_dwi.bvec"),
}


def bids(*args):
    p = subprocess.run([DIMOC, "bids", *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def load(path):
    return np.asarray(nib.load(path).dataobj, dtype=np.float64)


def same_bytes(a, b):
    return open(a, "rb").read() == open(b, "rb").read()


# ---- noddi_dti over the whole study -----------------------------------------------------------
OUT = os.path.join(W, "out")
rc, so, se = bids(DS, OUT, "participant", "--pipeline", "noddi_dti")
check("bids-noddi-dti-runs", rc == 0 and se == "", f"rc {rc}: {se.strip()[-400:]}")

desc = json.load(open(os.path.join(OUT, "dataset_description.json")))
check("bids-dataset-description",
      desc["Name"] == "dimoc noddi_dti" and desc["BIDSVersion"] == "1.9.0" and desc["DatasetType"] == "derivative"
      and desc["GeneratedBy"][0]["Name"] == "dimoc" and desc["GeneratedBy"][0]["Version"]
      and "bids" in desc["GeneratedBy"][0]["Description"]
      and desc["SourceDatasets"][0]["URL"] == "file://" + os.path.realpath(DS), json.dumps(desc))

# The hand-made reference of sub-01: dimoc mask, then dimoc pipeline noddi_dti with that mask.
HAND = os.path.join(W, "hand")
os.makedirs(HAND)
dimoc("mask", "--data", os.path.join(DS, RUNS["sub-01"][1]), "--bvals", os.path.join(DS, RUNS["sub-01"][2]),
      "--bvecs", os.path.join(DS, RUNS["sub-01"][3]), "--out", os.path.join(HAND, "mask.nii.gz"))
dimoc("pipeline", "noddi_dti", "--data", os.path.join(DS, RUNS["sub-01"][1]), "--mask", os.path.join(HAND, "mask.nii.gz"),
      "--bvals", os.path.join(DS, RUNS["sub-01"][2]), "--bvecs", os.path.join(DS, RUNS["sub-01"][3]),
      "--out", os.path.join(HAND, "nd"))
final = os.path.join(HAND, "nd", "dimoc", "final")
MAPS = sorted(f[:-7] for f in os.listdir(final) if f.endswith(".nii.gz") and f != "status.nii.gz")


def expected_files(prefix, maps, model):
    unit = RUNS[prefix][0]
    files = {f"{unit}/dwi/{prefix}_qc.json", f"{unit}/dwi/{prefix}_space-dwi_desc-brain_mask.nii.gz",
             f"{unit}/dwi/{prefix}_space-dwi_desc-brain_mask.json",
             f"{unit.split('/')[0]}/figures/{prefix}_space-dwi_desc-brain_mask.png"}
    for m in maps:
        label = "".join(c for c in m if c.isalnum())
        base = f"{prefix}_space-dwi_model-{model}_param-{label}_dwimap"
        files |= {f"{unit}/dwi/{base}.nii.gz", f"{unit}/dwi/{base}.json", f"{unit.split('/')[0]}/figures/{base}.png"}
    return files


def listed(out):
    """Every file under out but the pipelines' own folders (dwi/dimoc/) and the description."""
    got = set()
    for d, _, names in os.walk(out):
        rel = os.path.relpath(d, out)
        if "/dimoc" in "/" + rel or rel == ".":
            continue
        got |= {os.path.join(rel, n) for n in names}
    return got


want = set()
for prefix in RUNS:
    want |= expected_files(prefix, MAPS, "noddidti")
got = listed(OUT)
check("bids-derivative-names", got == want,
      f"missing {sorted(want - got)[:4]}, unexpected {sorted(got - want)[:4]}")

ours = {m: os.path.join(OUT, f"sub-01/dwi/sub-01_space-dwi_model-noddidti_param-{m}_dwimap.nii.gz") for m in MAPS}
check("bids-maps-equal-pipeline-by-hand",
      all(same_bytes(ours[m], os.path.join(final, m + ".nii.gz")) for m in MAPS), ", ".join(MAPS))
# sub-04 comes last: its stages are the first run's plan with its own paths put in place (the
# dataset's mask for dimoc's): byte for byte those of `dimoc pipeline` by hand.
dimoc("pipeline", "noddi_dti", "--data", os.path.join(DS, RUNS["sub-04"][1]), "--mask", DMASK,
      "--bvals", os.path.join(DS, RUNS["sub-04"][2]), "--bvecs", os.path.join(DS, RUNS["sub-04"][3]),
      "--out", os.path.join(HAND, "nd04"))
final04 = os.path.join(HAND, "nd04", "dimoc", "final")
ours04 = {m: os.path.join(OUT, f"sub-04/dwi/sub-04_space-dwi_model-noddidti_param-{m}_dwimap.nii.gz") for m in MAPS}
stage_text = "".join(open(f).read() for pf in RUNS for f in
                     glob.glob(os.path.join(OUT, RUNS[pf][0], "dwi", "dimoc", pf, "dimoc", "*", "provenance.json"))
                     if not [o for o in RUNS if o != pf and o + "_" in open(f).read().replace(pf + "_", "")])
n_prov = len(glob.glob(os.path.join(OUT, "sub-*", "**", "dimoc", "*", "provenance.json"), recursive=True))
check("bids-plan-reused-paths-own",
      all(same_bytes(ours04[m], os.path.join(final04, m + ".nii.gz")) for m in MAPS)
      and n_prov == 4 * len(RUNS) and stage_text.count('"timings_seconds"') == n_prov,
      f"{n_prov} stage provenances; a run's stages must name its own files only")
mask01 = os.path.join(OUT, "sub-01/dwi/sub-01_space-dwi_desc-brain_mask.nii.gz")
check("bids-mask-equals-dimoc-mask", np.array_equal(load(mask01), load(os.path.join(HAND, "mask.nii.gz"))),
      f"{int(load(mask01).sum())} voxels")
m04 = os.path.join(OUT, "sub-04/dwi/sub-04_space-dwi_desc-brain_mask.nii.gz")
side04 = json.load(open(m04.replace(".nii.gz", ".json")))
check("bids-dataset-mask-used", same_bytes(m04, DMASK)
      and side04["Source"] == os.path.relpath(DMASK, DS)
      and json.load(open(mask01.replace(".nii.gz", ".json")))["Source"] == "dimoc mask", json.dumps(side04))

ok, why = True, ""
for prefix, (unit, dwi, bval, bvec) in RUNS.items():
    for m in MAPS:
        label = "".join(c for c in m if c.isalnum())
        s = json.load(open(os.path.join(OUT, unit, "dwi", f"{prefix}_space-dwi_model-noddidti_param-{label}_dwimap.json")))
        mask_rel = os.path.relpath(DMASK, DS) if prefix == "sub-04" else \
            f"{unit}/dwi/{prefix}_space-dwi_desc-brain_mask.nii.gz"
        good = (s["Model"] == "noddi_dti" and s["Parameter"] == m and s["Pipeline"] == "noddi_dti"
                and s["Sources"] == [dwi, bval, bvec, mask_rel] and s["dimoc"]["model"]["name"] == "noddi_dti"
                and s["dimoc"]["command"].split()[1] == "fit")
        if not good:
            ok, why = False, f"{prefix} {m}: {json.dumps({k: s[k] for k in ('Model', 'Parameter', 'Sources')})}"
check("bids-sidecars", ok, why or "Model, Parameter, Pipeline, Sources, the fit's provenance")

ok, why = True, ""
for prefix, (unit, *_rest) in RUNS.items():
    qc = json.load(open(os.path.join(OUT, unit, "dwi", f"{prefix}_qc.json")))
    mask = load(os.path.join(OUT, unit, "dwi", f"{prefix}_space-dwi_desc-brain_mask.nii.gz")) != 0
    status = load(os.path.join(OUT, unit, "dwi", "dimoc", prefix, "dimoc", "final", "status.nii.gz"))
    fitted = int(np.sum(mask & (status == 1)))
    ndi = load(os.path.join(OUT, unit, "dwi", f"{prefix}_space-dwi_model-noddidti_param-NDI_dwimap.nii.gz"))
    sub, _, ses = unit.partition("/")
    good = (qc["subject"] == sub[4:] and qc["session"] == (ses[4:] if ses else None) and qc["run_prefix"] == prefix
            and qc["pipeline"] == "noddi_dti" and qc["voxels_in_mask"] == int(mask.sum())
            and qc["fitted"] == fitted and qc["flagged"] == int(mask.sum()) - fitted
            and qc["residual_median"] is None
            and abs(qc["medians"]["noddidti_NDI"] - float(np.median(ndi[mask]))) < 1e-9
            and all(qc["seconds"][k] >= 0 for k in ("read", "stages", "fit", "write", "total")))
    # seconds.fit: the stages' fits alone, as each stage's provenance records its fit
    provs = glob.glob(os.path.join(OUT, unit, "dwi", "dimoc", prefix, "**", "provenance.json"), recursive=True)
    fits = sum(json.load(open(f)).get("timings_seconds", {}).get("fit", 0) for f in provs)
    good = good and len(provs) >= 2 and abs(qc["seconds"]["fit"] - fits) < 1e-6 \
        and qc["seconds"]["fit"] <= qc["seconds"]["stages"] <= qc["seconds"]["total"]
    if not good:
        ok, why = False, f"{prefix}: {json.dumps(qc)[:300]} (mask {int(mask.sum())}, fitted {fitted})"
check("bids-qc-counts", ok, why or "voxels_in_mask, fitted, flagged, medians against nibabel/numpy")

# ---- csd --------------------------------------------------------------------------------------
OUTC = os.path.join(W, "outc")
rc, so, se = bids(DS, OUTC, "participant", "--pipeline", "csd", "--participant-label", "01")
H = os.path.join(HAND, "csd")
dwi01 = [os.path.join(DS, p) for p in RUNS["sub-01"][1:]]
dimoc("response", "--algorithm", "dhollander", "--data", dwi01[0], "--bvals", dwi01[1], "--bvecs", dwi01[2],
      "--mask", os.path.join(HAND, "mask.nii.gz"), "--out", os.path.join(H, "response"))
r = os.path.join(H, "response")
dimoc("csd", "--data", dwi01[0], "--bvals", dwi01[1], "--bvecs", dwi01[2], "--mask", os.path.join(HAND, "mask.nii.gz"),
      "--response", f"{r}/wm_response.txt,{r}/gm_response.txt,{r}/csf_response.txt", "--out", os.path.join(H, "csd"))
pairs = [(os.path.join(OUTC, f"sub-01/dwi/sub-01_space-dwi_model-csd_param-{p}_dwimap.nii.gz"),
          os.path.join(H, "csd", f + ".nii.gz")) for p, f in (("wmfod", "wm_fod"), ("gm", "gm"), ("csf", "csf"))]
check("bids-csd-equals-by-hand", rc == 0 and all(os.path.exists(a) and same_bytes(a, b) for a, b in pairs)
      and load(pairs[0][0]).shape[3] == 45 and set(os.listdir(OUTC)) == {"dataset_description.json", "sub-01"},
      f"rc {rc}: {se.strip()[-300:]}")

# ---- resuming ---------------------------------------------------------------------------------
def mtimes(out):
    return {os.path.join(d, n): os.stat(os.path.join(d, n)).st_mtime_ns for d, _, ns in os.walk(out) for n in ns}


before = mtimes(OUT)
shutil.rmtree(os.path.join(OUT, "sub-03"))
# A killed run's leftovers: the unit's temporary folder of a process that is gone (removed when
# the unit is redone), and one of a process still alive (kept).
gone = subprocess.Popen(["true"])
gone.wait()
dead_tmp = os.path.join(OUT, f".sub-03.tmp.{gone.pid}")
live_tmp = os.path.join(OUT, f".sub-03.tmp.{os.getpid()}")
for t in (dead_tmp, live_tmp):
    os.makedirs(os.path.join(t, "dwi"))
    open(os.path.join(t, "dwi", "partial.nii.gz"), "w").write("x")
rc, so, se = bids(DS, OUT, "participant", "--pipeline", "noddi_dti")
check("bids-rerun-removes-leftovers", not os.path.exists(dead_tmp) and os.path.exists(live_tmp),
      f"dead {os.path.exists(dead_tmp)}, live {os.path.exists(live_tmp)}")
shutil.rmtree(live_tmp)
after = mtimes(OUT)
kept = {p: t for p, t in before.items() if "/sub-03/" not in p}
check("bids-rerun-skips-complete", rc == 0 and all(after.get(p) == t for p, t in kept.items())
      and so.count("complete, skipped") == 4, f"rc {rc}: {so.strip()}")
check("bids-rerun-redoes-removed", set(p for p in after if "/sub-03/" in p) == set(p for p in before if "/sub-03/" in p)
      and "sub-03: done" in so, so.strip())

# ---- another pipeline into the same folder: refused ------------------------------------------
rc, so, se = bids(DS, OUT, "participant", "--pipeline", "csd")
check("bids-other-pipeline-refused", rc == 1 and len(se.strip().splitlines()) == 1
      and "dataset_description.json" in se and "noddi_dti" in se, se.strip())

# ---- --participant-label selects --------------------------------------------------------------
OUTS = os.path.join(W, "outsel")
rc, so, se = bids(DS, OUTS, "participant", "--pipeline", "noddi_dti", "--participant-label", "sub-04", "03")
check("bids-participant-label", rc == 0 and sorted(x for x in os.listdir(OUTS) if x.startswith("sub")) == ["sub-03", "sub-04"],
      f"rc {rc}: {os.listdir(OUTS)}")

# ---- bad inputs -------------------------------------------------------------------------------
BAD = os.path.join(W, "bad")
shutil.copytree(DS, BAD)
for ext in ("bval", "bvec"):  # sub-03's table its own here: nothing to inherit at the top
    shutil.move(os.path.join(BAD, "dwi." + ext), os.path.join(BAD, f"sub-03/dwi/sub-03_acq-b2k_run-1_dwi.{ext}"))
add_run(BAD, "sub-05/dwi", "sub-05", 6)
os.remove(os.path.join(BAD, "sub-05/dwi/sub-05_dwi.bvec"))
add_run(BAD, "sub-06/dwi", "sub-06", 7)
open(os.path.join(BAD, "sub-06/dwi/sub-06_dwi.bval"), "w").write(" ".join(["1000"] * 10) + "\n")
add_run(BAD, "sub-07/dwi", "sub-07", 8)
nib.save(nib.Nifti1Image(maps["S0"].astype(np.float32), AFF), os.path.join(BAD, "sub-07/dwi/sub-07_dwi.nii.gz"))
add_run(BAD, "sub-08/dwi", "sub-08", 9)
img = nib.load(os.path.join(BAD, "sub-08/dwi/sub-08_dwi.nii.gz"))
nib.save(img, os.path.join(BAD, "sub-08/dwi/sub-08_dwi.nii"))
OUTB = os.path.join(W, "outbad")
rc, so, se = bids(BAD, OUTB, "participant", "--pipeline", "noddi_dti", "--participant-label",
                  "01", "04", "05", "06", "07", "08", "99")
lines = [l for l in se.strip().splitlines() if not l.startswith("failed: ")]
expect = {"sub-05": "sub-05_dwi.nii.gz: no .bvec", "sub-06": "sub-06_dwi.bval", "sub-07": "sub-07_dwi.nii.gz: a 3D image",
          "sub-08": "two runs of one name", "sub-99": "sub-99: no such participant"}
found = {k: [l for l in lines if l.startswith(k + ":") and v in l] for k, v in expect.items()}
check("bids-bad-inputs-named", rc == 1 and len(lines) == 5 and all(len(v) == 1 for v in found.values())
      and se.count("failed: ") == 5, f"rc {rc}: {se.strip()}")
check("bids-bad-inputs-others-finish",
      sorted(x for x in os.listdir(OUTB) if x.startswith("sub")) == ["sub-01", "sub-04"]
      and not [x for x in os.listdir(OUTB) if ".tmp." in x], str(os.listdir(OUTB)))

NOTJSON = os.path.join(W, "notjson")
shutil.copytree(DS, NOTJSON)
open(os.path.join(NOTJSON, "dataset_description.json"), "w").write("{\"Name\": \"x\",\n")
rc, so, se = bids(NOTJSON, os.path.join(W, "outnj"), "participant", "--pipeline", "noddi_dti")
check("bids-description-not-json-refused", rc == 1 and len(se.strip().splitlines()) == 1
      and "dataset_description.json: not JSON" in se and not os.path.exists(os.path.join(W, "outnj", "sub-01")), se.strip())
blocker = os.path.join(W, "a-file")
open(blocker, "w").write("x")
rc, so, se = bids(DS, os.path.join(blocker, "out"), "participant", "--pipeline", "noddi_dti")
check("bids-unwritable-output-refused", rc == 1 and len(se.strip().splitlines()) == 1 and "a-file" in se, se.strip())
rc, so, se = bids(DS, os.path.join(W, "outopt"), "participant", "--pipeline", "noddi_dti", "--nfibres", "2")
check("bids-unknown-option-refused", rc == 1 and len(se.strip().splitlines()) == 1 and "--nfibres" in se
      and not os.path.exists(os.path.join(W, "outopt")), se.strip())
rc, so, se = bids(DS, os.path.join(W, "outopt"), "participant", "--pipeline", "bedpostx", "--nfibres", "2",
                  "--slurm", "--dry-run", "--slurm-batch", "2", "--partition", "gpu")
check("bids-slurm-dry-run", rc == 0 and "#SBATCH --array=1-3" in so and "#SBATCH --partition=gpu" in so
      and so.count("participant --pipeline bedpostx --nfibres 2") == 5 and "--participant-label 02" in so and "--nfibres 2" in so
      and not os.path.exists(os.path.join(W, "outopt", ".slurm")), f"rc {rc}: {se.strip()} {so[-600:]}")

# A bad value of the pipeline's own option fails its plan whatever the run: found once, before
# any unit's work, in one line.
OUTN = os.path.join(W, "outnf")
rc, so, se = bids(DS, OUTN, "participant", "--pipeline", "bedpostx", "--nfibres", "4")
check("bids-pipeline-option-checked-once", rc == 1 and len(se.strip().splitlines()) == 1
      and "--nfibres must be 1, 2 or 3, not '4'" in se and so == ""
      and (not os.path.isdir(OUTN) or os.listdir(OUTN) == []), f"rc {rc}: {se.strip()} | {so.strip()}")

# The DWI of a unit is read once, by the read-ahead: no stage opens it (strace's record of every
# file opened, per thread).  noddi_dti has two commands that read it (dti, then the fit).
if shutil.which("strace"):
    OUTS = os.path.join(W, "outstrace")
    trace = os.path.join(W, "strace.txt")
    subprocess.run(["strace", "-f", "-e", "trace=openat", "-o", trace, DIMOC, "bids", DS, OUTS, "participant",
                    "--pipeline", "noddi_dti", "--participant-label", "01", "03", "04"], capture_output=True)
    lines = open(trace).read().splitlines()
    main = lines[0].split()[0]
    started = next((i for i, l in enumerate(lines) if "dimoc.log" in l), len(lines))
    why = []
    for pf in ("sub-01", "sub-03_acq-b2k_run-1", "sub-04"):
        dwi = os.path.realpath(os.path.join(DS, RUNS[pf][1]))
        opens = [(i, l.split()[0]) for i, l in enumerate(lines) if f'"{dwi}"' in l and "ENOENT" not in l
                 and "resumed" not in l]
        late_main = [i for i, pid in opens if i > started and pid == main]
        readers = {pid for i, pid in opens if pid != main}
        if late_main or len(readers) > 1 or (pf != "sub-01" and len(readers) != 1):
            why.append(f"{pf}: {len(late_main)} opens by the stages, read-ahead threads {len(readers)}")
    check("bids-dwi-read-once", os.path.isdir(os.path.join(OUTS, "sub-04")) and not why, "; ".join(why))

# ---- SIGTERM in the middle --------------------------------------------------------------------
OUTT = os.path.join(W, "outterm")
p = subprocess.Popen([DIMOC, "bids", DS, OUTT, "participant", "--pipeline", "noddi_dti"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
seen, t0 = False, time.time()
while time.time() - t0 < 30 and p.poll() is None:
    if os.path.isdir(OUTT) and [x for x in os.listdir(OUTT) if x.startswith(".sub-02") and ".tmp." in x]:
        seen = True
        p.send_signal(signal.SIGTERM)
        break
    time.sleep(0.002)
so, se = p.communicate()
left = os.listdir(OUTT) if os.path.isdir(OUTT) else []
complete = all(os.path.exists(os.path.join(OUTT, RUNS[pf][0], "dwi", pf + "_qc.json"))
               for pf in RUNS if os.path.isdir(os.path.join(OUTT, RUNS[pf][0])))
check("bids-sigterm", seen and p.returncode == 143 and not [x for x in left if ".tmp." in x] and complete
      and not os.path.isdir(os.path.join(OUTT, "sub-02", "ses-1")),
      f"seen {seen}, rc {p.returncode}, left {left}")

finish()
