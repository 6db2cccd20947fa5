"""dimoc.commit (python/dimoc/_commit.py over the C API's dimoc_commit) against `dimoc commit`
on the same inputs (commitpeer's phantom: three bundles and false streamlines on an oblique
grid, Rician noise), imported from the source tree (python/, build/'s library):

- the weights print as the command's streamline_weights.txt ("%.5e" each, every line the
  same) and every map is the command's file, float32 byte for byte: stick-zeppelin-ball with a
  mask; with --peaks and a blur applied to some streamlines; clustering with the lasso and its
  per-streamline weights; the group lasso with the ISO lasso, its weights image and --debias;
  --iso-mask with a confidence map rescaled and negative ISO allowed; volume-fractions with
  COMMIT's lesion model; cylinder-zeppelin-ball with each volume's pulses; the streamlines as
  nibabel's tractogram file, its path, an ArraySequence and a list, the data as a path, an image and an
  array with its affine, the table as bvals/bvecs and as a DIPY GradientTable;
- every wrong argument is a ValueError naming it before any work (no progress callback), and
  streamlines outside the data's grid, which the command refuses, are one too;
- a cancel from another thread stops a long fit within a second (dimoc.Cancelled), and the
  next fit gives the command's weights."""
import os
import threading
import time

import nibabel as nib
import numpy as np

import commitpeer as cp
from dmtest import check, check_refused_call, dimoc, finish, source_dimoc, workdir

dm = source_dimoc()

d = workdir("python_commit")
os.chdir(d)
p = cp.phantom(d, n_true=60, n_false=15, noise=0.02)
aff = p["affine"]
n = len(p["streamlines"])
rng = np.random.default_rng(2)
groups = rng.integers(0, 4, n)
blur_apply = rng.integers(0, 2, n)
lw = rng.uniform(0.5, 2, n).astype(np.float32)
np.savetxt("groups.txt", groups, fmt="%d")
np.savetxt("blur_apply.txt", blur_apply, fmt="%d")
np.savetxt("lw.txt", lw, fmt="%.9g")
shape = nib.load(p["wm"]).shape
iso = np.zeros(shape, np.uint8)
iso[shape[0] // 2:] = 1
nib.save(nib.Nifti1Image(iso, aff), "iso.nii.gz")
isow = rng.uniform(0.5, 1.5, shape).astype(np.float32)
nib.save(nib.Nifti1Image(isow, aff), "isow.nii.gz")
conf = rng.uniform(0.2, 1.0, shape).astype(np.float32)
nib.save(nib.Nifti1Image(conf, aff), "conf.nii.gz")
b, g = np.loadtxt(p["bvals_file"]), np.loadtxt(p["bvecs_file"])
cp.write_scheme_st("dwi.scheme", b, cp.fsl_to_voxel(aff, g.T), 0.03, 0.01)
sch = np.loadtxt("dwi.scheme", skiprows=1)
pulses = {"G": sch[:, 3], "Delta": sch[:, 4], "delta": sch[:, 5]}
dwi = nib.load(p["dwi"])
data = np.asanyarray(dwi.dataobj)
tck = nib.streamlines.load(p["tck"])
wm = np.asanyarray(nib.load(p["wm"]).dataobj)
common = ["--tractogram", p["tck"], "--data", p["dwi"], "--bvals", p["bvals_file"], "--bvecs",
          p["bvecs_file"], "--mask", p["wm"], "--threads", 2, "--device", "cpu"]
calls = []


def progress(stage, fraction):
    calls.append((stage, fraction))


def same_as_command(label, r, out):
    """The weights as the command prints them, every map byte for byte, no map more or less."""
    text = "".join("%.5e\n" % x for x in r["weights"])
    files = sorted(f[:-7] for f in os.listdir(out) if f.endswith(".nii.gz"))
    maps = sorted(k for k in r if r.kind(k) == "map")
    bad = [f for f in files if r.get(f) is None or r[f].dtype != np.float32 or
           r[f].tobytes(order="F") != np.asanyarray(nib.load(f"{out}/{f}.nii.gz").dataobj)
           .tobytes(order="F")]
    check(label, text == open(f"{out}/streamline_weights.txt").read() and files == maps
          and not bad and r["weights"].size == n,
          f"maps {maps} vs files {files}; differing {bad}; weights "
          f"{'same' if text == open(f'{out}/streamline_weights.txt').read() else 'differ'}")


def commit(*args, **kw):
    kw.setdefault("threads", 2)
    kw.setdefault("device", "cpu")
    kw.setdefault("progress", progress)
    return dm.commit(*args, **kw)


runs = [
    ("plain", [], dict(), dict()),
    ("peaks-blur", ["--peaks", p["peaks"], "--blur-core-extent", 0.5, "--blur-gauss-extent", 0.5,
                    "--blur-apply-to", "blur_apply.txt"],
     dict(peaks=p["peaks"], blur_core_extent=0.5, blur_gauss_extent=0.5,
          blur_apply_to=blur_apply), dict()),
    ("clusters-lasso", ["--blur-clust-thr", 1.5, "--lambda", 0.05, "--lambda-weights", "lw.txt"],
     dict(blur_clust_thr=1.5, lambda_=0.05, lambda_weights=lw), dict()),
    ("group-iso-debias", ["--lambda-group", 0.1, "--groups", "groups.txt", "--lambda-iso", 0.05,
                          "--lambda-iso-weights", "isow.nii.gz", "--debias"],
     dict(lambda_group=0.1, groups=groups, lambda_iso=0.05, lambda_iso_weights=isow,
          debias=True), dict()),
    ("iso-confidence", ["--iso-mask", "iso.nii.gz", "--confidence-map", "conf.nii.gz",
                        "--confidence-map-rescale", "--allow-negative", "iso"],
     dict(iso_mask="iso.nii.gz", confidence_map=conf, confidence_map_rescale=True,
          allow_negative=["iso"]), dict()),
    ("cylinders", ["--model", "cylinder-zeppelin-ball", "--scheme", "dwi.scheme", "--radii",
                   "1,2,4", "--peaks", p["peaks"], "--d-perp", "0.51e-3"],
     dict(model="cylinder-zeppelin-ball", scheme=pulses, radii=[1, 2, 4], peaks=p["peaks"],
          d_perp=0.51e-3), dict()),
]
for label, cli, kw, _ in runs:
    dimoc("commit", *common, *cli, "--out", f"cli_{label}")
    calls.clear()
    r = commit(tck, dwi, b, g, mask=wm, **kw)
    same_as_command(f"python-commit-{label}-equals-command", r, f"cli_{label}")
    if label == "plain":
        stages = [s for s, _ in calls]
        check("python-commit-progress-stages", stages[:1] == ["load"] and "solve" in stages and
              stages[-1] == "outputs" and all(0 <= f <= 1 for _, f in calls),
              f"{sorted(set(stages))}")
dimoc("commit", "--tractogram", p["tck"], "--data", p["ic_true"], "--mask", p["wm"], "--model",
      "volume-fractions", "--iso-mask", "iso.nii.gz", "--threads", 2, "--device", "cpu",
      "--out", "cli_lesion")
r = commit(tck, p["ic_true"], mask=p["wm"], model="volume-fractions", iso_mask=iso)
same_as_command("python-commit-lesion-equals-command", r, "cli_lesion")

# the inputs in other forms
forms = {"array-sequence": (tck.streamlines, data, dict(affine=dwi.affine, gtab=None)),
         "list-path": ([np.asarray(s) for s in tck.streamlines], p["dwi"], {}),
         "gtab": (tck, dwi, dict(gtab=type("G", (), {"bvals": b, "bvecs": g.T})())),
         "tck-path": (p["tck"], dwi, {})}
bad = []
for label, (sl, x, extra) in forms.items():
    table = {} if "gtab" in extra and extra["gtab"] is not None else dict(bvals=b, bvecs=g)
    extra = {k: v for k, v in extra.items() if v is not None}
    r = commit(sl, x, mask=p["wm"], progress=False, **table, **extra)
    if "".join("%.5e\n" % x for x in r["weights"]) != open("cli_plain/streamline_weights.txt") \
            .read():
        bad.append(label)
check("python-commit-input-forms-same", not bad, f"differing: {bad}")


# ---- wrong arguments: ValueError naming the argument, before any work ----
def refused(label, word, *args, **kw):
    kw.setdefault("progress", progress)
    check_refused_call(label, word, calls, dm.commit, *args, **kw)


g_bad = g.copy()
g_bad[:, 5] *= 0.5
b_nan = b.copy()
b_nan[3] = np.nan
refused("python-commit-refuses-3d-data", "data", tck, data[..., 0], b, g, affine=aff)
refused("python-commit-refuses-no-affine", "affine", tck, data, b, g)
refused("python-commit-refuses-bvals-count", "bvals", tck, dwi, b[:-1], g)
refused("python-commit-refuses-bvals-nan", "bvals", tck, dwi, b_nan, g)
refused("python-commit-refuses-bvecs", "bvecs", tck, dwi, b, g_bad)
refused("python-commit-refuses-mask-grid", "mask", tck, dwi, b, g, mask=wm[:-1])
refused("python-commit-refuses-peaks", "peaks", tck, dwi, b, g, peaks=np.zeros(shape + (4,)))
refused("python-commit-refuses-model", "model", tck, dwi, b, g, model="ball")
refused("python-commit-refuses-lambda", "lambda", tck, dwi, b, g, lambda_=2)
refused("python-commit-refuses-lambda-weights", "lambda_weights", tck, dwi, b, g,
        lambda_weights=lw)
refused("python-commit-refuses-groups", "groups", tck, dwi, b, g, groups=groups)
refused("python-commit-refuses-groups-count", "groups", tck, dwi, b, g, lambda_group=0.1,
        groups=groups[:-2])
refused("python-commit-refuses-scheme", "scheme", tck, dwi, b, g, scheme=pulses)
refused("python-commit-refuses-scalar-bvals", "bvals", tck, p["ic_true"], b, g,
        model="volume-fractions")
refused("python-commit-refuses-unknown", "stage", tck, dwi, b, g, stage="dictionary")
refused("python-commit-refuses-nan-point", "streamlines",
        [np.array([[0, 0, 0], [np.nan, 1, 1.0]])], dwi, b, g)
refused("python-commit-refuses-missing-file", "no such file", "nothere.tck", dwi, b, g)
open("notatck.tck", "w").write("plain text\n")
refused("python-commit-refuses-not-a-tractogram", "notatck.tck", "notatck.tck", dwi, b, g)
far = [np.asarray(s) + 500 for s in tck.streamlines]
calls.clear()
try:
    commit(far, dwi, b, g, mask=wm, progress=progress)
    check("python-commit-refuses-outside-grid", False, "accepted")
except ValueError as e:
    check("python-commit-refuses-outside-grid", "streamlines" in str(e) and "mask" in str(e), str(e))

# ---- cancel from another thread; the library usable after it ----
ev = threading.Event()
threading.Timer(0.3, ev.set).start()
t0 = time.time()
try:
    commit(tck, dwi, b, g, mask=wm, max_iter=10000000, tol=0, tol_x=0, cancel=ev, progress=False)
    check("python-commit-cancel", False, "not cancelled")
except dm.Cancelled:
    late = time.time() - t0 - 0.3
    check("python-commit-cancel", late < 1.0, f"stopped {late:.2f} s after the cancel")
same_as_command("python-commit-after-cancel-equals-command",
                commit(tck, dwi, b, g, mask=wm, progress=False), "cli_plain")
finish()
