"""Model selection by BIC: `dimoc select` on maps with a known answer, and the
pipelines/model_selection.sh pipeline on a phantom of one-fibre and crossing voxels, where ball &
one stick should win in the first and ball & two sticks in the second."""
import os

import numpy as np

from dmtest import check, dimoc, finish, load, one_and_two_fibres, save, workdir

d = workdir("model_selection")

# dimoc select: per voxel the 1-based number of the lowest map; ties to the earlier map;
# voxels outside the mask (or, without a mask, where a map is zero or NaN) are 0.
a = np.array([[[1.0], [5.0], [3.0], [2.0]]])
b = np.array([[[2.0], [4.0], [3.0], [np.nan]]])
c = np.array([[[3.0], [6.0], [1.0], [0.5]]])
paths = [save(os.path.join(d, f"{n}.nii.gz"), m) for n, m in zip("abc", (a, b, c))]
best = os.path.join(d, "best.nii.gz")
rc, out, err = dimoc("select", *paths, "--names", "A,B,C", "--out", best, expect_ok=False)
labels = load(best).ravel() if rc == 0 else None
check("select-labels", rc == 0 and list(labels) == [1, 2, 3, 0], f"{labels} {err.strip()}")
rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
check("select-table", rows.get("A", [0, 0])[1] == "1" and rows.get("C", [0, 0, ""])[2] == "33.3%",
      out.replace("\n", " | "))
mask = save(os.path.join(d, "mask.nii.gz"), np.array([[[1.0], [1.0], [0.0], [0.0]]]))
dimoc("select", *paths, "--mask", mask, "--out", best)
check("select-mask", list(load(best).ravel()) == [1, 2, 0, 0], str(load(best).ravel()))
other = save(os.path.join(d, "other.nii.gz"), np.ones((2, 2, 1)))
for args, frag in [((paths[0],), "give 2 to 15 maps"),
                   ((paths[0], other), "other.nii.gz"),
                   ((*paths, "--names", "A,B"), "2 names for 3 maps")]:
    rc, _, err = dimoc("select", *args, "--out", best, expect_ok=False)
    check(f"select-error-{frag.split()[0].split('.')[0]}", rc != 0 and frag in err, err.strip())

# The pipeline: 40 one-fibre voxels (f1 = 0.6) and 40 crossings at 90 degrees (f1 = f2 = 0.3).
n = 40
data, bvals, bvecs = one_and_two_fibres(d, n, "6x0,64x1000,64x2000")
pmask = save(os.path.join(d, "pmask.nii.gz"), np.ones((2, n, 1)))
extra = ["--device", os.environ["DIMOC_FIT_DEVICE"]] if os.environ.get("DIMOC_FIT_DEVICE") else []
outdir = os.path.join(d, "sel")
rc, out, err = dimoc("pipeline", "model_selection", "--data", data, "--mask", pmask, "--bvals", bvals,
                     "--bvecs", bvecs, "--out", outdir, "--models", "ball_1_stick,ball_2_sticks", "--quiet",
                     *extra, expect_ok=False)
check("pipeline-runs", rc == 0, err.strip()[-300:])
if rc == 0:
    best = load(os.path.join(outdir, "best_BIC.nii.gz"))
    one = np.mean(best[0] == 1)
    two = np.mean(best[1] == 2)
    check("one-fibre-voxels-choose-one-stick", one >= 0.8, f"ball_1_stick lowest in {100 * one:.0f}%")
    check("crossings-choose-two-sticks", two >= 0.95, f"ball_2_sticks lowest in {100 * two:.0f}%")
    pct = {line.split()[0]: float(line.split()[2].rstrip("%")) for line in out.splitlines()
           if line.startswith("ball_")}
    expect = 100 * np.mean(best == 2)
    check("printed-percentages", abs(pct.get("ball_2_sticks", -1) - expect) < 0.06
          and abs(sum(pct.values()) - 100) < 0.2, f"{pct}, map says {expect:.1f}% ball_2_sticks")
    check("table-file", open(os.path.join(outdir, "best_BIC.txt")).read().strip() in out, "best_BIC.txt")
finish()
