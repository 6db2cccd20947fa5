"""--quiet, the option of every command that draws a progress line (fit, csd, track with --fod
or --samples, commit, merge): without it the command's stderr carries its progress lines (one
at the start and a summary, stderr being no terminal); with it stderr is empty, stdout says the
same, and the outputs are byte for byte those of the run without it.  The inputs: MRtrix's
dwi2fod regression data (tests/data/mrtrix_dwi2fod) and what the commands make of it."""
import os
import re

from dmtest import check, dimoc, finish, workdir

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "mrtrix_dwi2fod")
d = workdir("quiet")
inputs = ["--data", f"{DATA}/dwi.nii.gz", "--bvals", f"{DATA}/dwi.bvals", "--bvecs", f"{DATA}/dwi.bvecs"]
mask = f"{DATA}/mask.nii.gz"


def content(path):
    """A file's bytes; a .tck's after its header (whose command_history names --out and --quiet)."""
    data = open(path, "rb").read()
    return data[data.index(b"\nEND\n"):] if path.endswith(".tck") else data


def same_files(a, b, names):
    return all(content(os.path.join(a, n)) == content(os.path.join(b, n)) for n in names)


def said(text, folder):
    """stdout with the folder, the run's seconds and its rates left out."""
    text = re.sub(r"[0-9.]+ s\b", "T s", text.replace(folder, "OUT"))
    return re.sub(r"[0-9.]+ (\w+)/s\b", r"R \1/s", text)


def quiet_case(label, argv, progress_word, outputs):
    """Runs argv with --out d/label and with --out d/label_q --quiet; returns the first's folder."""
    loud, hushed = os.path.join(d, label), os.path.join(d, label + "_q")
    rc1, out1, err1 = dimoc(*argv, "--out", loud, expect_ok=False)
    rc2, out2, err2 = dimoc(*argv, "--out", hushed, "--quiet", expect_ok=False)
    drawn = [x for x in err1.splitlines() if x.startswith(progress_word)]
    ok = (rc1 == 0 and rc2 == 0 and len(drawn) >= 2 and err2 == ""
          and said(out1, loud) == said(out2, hushed) and same_files(loud, hushed, outputs))
    check(f"quiet-{label}", ok, f"rc {rc1}/{rc2}; progress lines without --quiet {len(drawn)}; "
          f"stderr with it {err2.strip()[:200]!r}; outputs {'the same' if rc1 == rc2 == 0 and same_files(loud, hushed, outputs) else 'differ'}")
    return loud


csd = quiet_case("csd", ["csd", *inputs, "--mask", mask, "--response", f"{DATA}/response.txt", "--device", "cpu"],
                 "csd:", ["wm_fod.nii.gz"])
quiet_case("fit", ["fit", "ball_1_stick", *inputs, "--mask", mask, "--device", "cpu"], "fit:", ["d.nii.gz", "f1.nii.gz"])
fod = quiet_case("track-fod", ["track", "--fod", f"{csd}/wm_fod.nii.gz", "--seed", mask, "--seeds", 2000,
                               "--cutoff", 0.02, "--device", "cpu", "--threads", 2], "track:", ["tracks.tck"])
quiet_case("commit", ["commit", "--tractogram", f"{fod}/tracks.tck", *inputs, "--device", "cpu"], "commit:",
           ["streamline_weights.txt"])
samples = os.path.join(d, "bedpostx")
dimoc("pipeline", "bedpostx", *inputs, "--mask", mask, "--nfibres", 1, "--model", 1, "--burnin", 50, "--jumps", 100,
      "--sample-every", 10, "--device", "cpu", "--out", samples, "--quiet")
quiet_case("track-samples", ["track", "--samples", samples, "--seed", mask, "--device", "cpu", "--threads", 2],
           "track:", ["waytotal"])
finish()
