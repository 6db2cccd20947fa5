#!/usr/bin/env bash
# Bad command lines and bad inputs: every row of the table below must stop with its exit
# status, exactly one line on stderr, "dimoc: error: ..." holding the expected fragment, and
# nothing written.  Each case runs in a fresh empty folder (its outputs are relative names in
# it), which must still be empty afterwards.  Classes: the command-line interface (options,
# pipelines, help) and protocol/geometry mistakes (b-value scale, empty weighting, counts,
# masks and seeds, files that are not what they claim), outputs never replaced unless a dimoc
# run made them, and map tools that refuse maps of another grid or shape.  (Interrupted runs:
# tests/py/test_interrupt.py; more output and memory cases: tests/cli/test_safe_outputs.sh.)
cd "$(dirname "$0")/../.."
source tests/lib.sh
PY=${PYTHON:-python3}

if [ ! -x "$DIMOC" ]; then
    fail bad-inputs "$DIMOC is not built"
    exit 0
fi

# Fixtures: a 2x2x2 image with an oblique affine, 2 b=0 + 12 b=1000 volumes (ball & one stick).
FX=$T/fixtures
mkdir -p "$FX/adir"
"$DIMOC" scheme --shells 2x0,12x1000 --bvals "$FX/bvals" --bvecs "$FX/bvecs" >/dev/null
"$DIMOC" simulate ball_1_stick --bvals "$FX/bvals" --bvecs "$FX/bvecs" --voxels 8 \
    --params S0=1000,d=1.5e-3,f1=0.5,th1=1.0,ph1=2.0 --out "$FX/flat.nii.gz" >/dev/null
FX=$FX "$PY" - <<'EOF' || fail fixtures "python could not write the fixtures"
import os
import nibabel as nib
import numpy as np
fx = os.environ["FX"]
A = np.array([[1.8, 0.1, 0, -40], [0, 2.0, 0.2, -60], [0.05, 0, 2.5, 12], [0, 0, 0, 1]])
def save(name, data, affine=A):
    nib.save(nib.Nifti1Image(np.asarray(data, np.float32), affine), f"{fx}/{name}")
y = np.asarray(nib.load(f"{fx}/flat.nii.gz").dataobj).reshape(2, 2, 2, -1)
b, g = np.loadtxt(f"{fx}/bvals"), np.loadtxt(f"{fx}/bvecs")
save("dwi.nii.gz", y)
save("dwi3d.nii.gz", y[..., 0])
save("dwi4.nii.gz", y[..., :4])
save("mask.nii.gz", np.ones((2, 2, 2)))
save("mask4d.nii.gz", np.ones((2, 2, 2, 3)))
shifted = A.copy()
shifted[:3, 3] += [5, 0, 0]
save("mask_shifted.nii.gz", np.ones((2, 2, 2)), shifted)
save("mask_other_grid.nii.gz", np.ones((3, 2, 2)))
row = lambda name, v: np.savetxt(f"{fx}/{name}", np.asarray(v, float)[None, :], fmt="%.10g")
row("bvals_ms", b / 1000)                           # ms/um^2
row("bvals_ms_nob0", np.where(b == 0, 500, b) / 1000)  # ms/um^2, no b=0 to measure decay
row("bvals_si", b * 1e6)                            # s/m^2
row("bvals_zero", 0 * b)
row("bvals4", b[:4])
np.savetxt(f"{fx}/bvecs_zero", 0 * g, fmt="%g")
g1 = g.copy()
g1[:, b == 0] = [[1], [0], [0]]
np.savetxt(f"{fx}/bvecs_nob0", g1, fmt="%.6f")
np.savetxt(f"{fx}/bvecs4", g[:, :4], fmt="%.6f")
open(f"{fx}/bvals_binary", "wb").write(open(f"{fx}/dwi.nii.gz", "rb").read()[:300])
open(f"{fx}/bvals_text_nifti.nii", "w").write("0 1000 1000\n")
# A bedpostx-like folder on the data's grid, and seeds on it placed elsewhere.
s = f"{fx}/samples"
os.makedirs(s, exist_ok=True)
save("samples/nodif_brain_mask.nii.gz", np.ones((2, 2, 2)))
for p, v in (("th", 1.0), ("ph", 0.5), ("f", 0.6)):
    save(f"samples/merged_{p}1samples.nii.gz", np.full((2, 2, 2, 4), v))
save("seed.nii.gz", np.ones((2, 2, 2)))
save("seed_shifted.nii.gz", np.ones((2, 2, 2)), shifted)
save("seed4d.nii.gz", np.ones((2, 2, 2, 2)))
# Finished maps for the map tools: a truth and a fit on the data's grid, one on another grid.
for folder in ("truth", "fitmaps", "small"):
    os.makedirs(f"{fx}/{folder}", exist_ok=True)
for folder, shape in (("truth", (2, 2, 2)), ("fitmaps", (2, 2, 2)), ("small", (3, 2, 2))):
    save(f"{folder}/status.nii.gz", np.ones(shape))
    save(f"{folder}/d.nii.gz", np.full(shape, 1e-3))
    save(f"{folder}/dyads1.nii.gz", np.tile([1.0, 0, 0], shape + (1,)))
# An output folder that no dimoc run made (never replaced), and a file where a folder goes.
os.makedirs(f"{fx}/notdimoc", exist_ok=True)
open(f"{fx}/notdimoc/thesis.tex", "w").write("keep me\n")
open(f"{fx}/afile", "w").write("a file\n")
EOF

IN="--data $FX/dwi.nii.gz --mask $FX/mask.nii.gz --bvals $FX/bvals --bvecs $FX/bvecs"
FIT="fit ball_1_stick --quiet --data $FX/dwi.nii.gz --bvals $FX/bvals --bvecs $FX/bvecs"
FITD="fit ball_1_stick --quiet --bvals $FX/bvals --bvecs $FX/bvecs"
FITB="fit ball_1_stick --quiet --data $FX/dwi.nii.gz --bvecs $FX/bvecs --out out"
DTI="dti --data $FX/dwi.nii.gz --bvals $FX/bvals --bvecs $FX/bvecs --out out"
TRACK="track --samples $FX/samples --out out -P 2"

# name | exit status | fragment of the one-line message | dimoc arguments (split on spaces)
CASES=(
    # -- the command-line interface --
    "cli-repeated-option|1|fit: --out given twice ('a', then 'b')|$FIT --out a --out b"
    "cli-repeated-flag|1|fit: --quiet given twice|$FIT --quiet --out out"
    "cli-value-swallows-option|1|fit: --out needs a value (DIR)|$FIT --out --mask $FX/mask.nii.gz"
    "cli-value-missing-at-end|1|fit: --out needs a value|$FIT --out"
    "cli-value-empty|1|fit: --out needs a value|$FIT --out="
    "cli-flag-given-a-value|1|fit: --quiet takes no value|$FIT --quiet=1 --out out"
    "cli-unknown-option|1|fit: unknown option '--bogus' (see 'dimoc help fit')|$FIT --bogus 1 --out out"
    "cli-negative-number-is-a-value|1|fit: --seed: '-1' is not an integer|$FIT --seed -1 --out out"
    "cli-bad-integer|1|(see 'dimoc help fit')|$FIT --burnin many --out out"
    "cli-fit-two-models|2|give exactly one MODEL|$FIT ball_2_sticks --out out"
    "cli-init-outside-bounds|1|--init f1=1.5: outside the bounds [0, 1] of 'f1'|$FIT --init f1=1.5 --out out"
    "cli-init-on-open-bound|1|--init d=0: outside the bounds (0, |$FIT --init d=0 --out out"
    "cli-init-unknown-parameter|1|has no parameter 'zz'|$FIT --init zz=1 --out out"
    "cli-measure-unknown|1|has no per-measurement input 'TE'|$FIT --measure TE=$FX/bvals --out out"
    "cli-measure-from-bvals|1|reads 'b' from --bvals|$FIT --measure b=$FX/bvals --out out"
    "cli-voxel-unknown|1|has no per-voxel input 'zz'|$FIT --voxel zz=1 --out out"
    "cli-dti-repeated-mask|1|dti: --mask given twice|$DTI --mask $FX/mask.nii.gz --mask $FX/mask.nii.gz"
    "cli-simulate-repeated-out|1|simulate: --out given twice|simulate ball_1_stick --bvals $FX/bvals --bvecs $FX/bvecs --params S0=1,d=1e-3,f1=0.5,th1=1,ph1=1 --out a.nii --out b.nii"
    "cli-track-value-swallows-option|1|track: --samples needs a value|track --samples --seed $FX/seed.nii.gz --out out"
    "cli-check-no-file|1|check: give a FILE.model (see 'dimoc help check')|check"
    "cli-compile-unknown-option|1|compile: unknown option '--bogus'|compile models/dti.model --bogus"
    "cli-info-two-models|1|info: one model at a time|info dti ball_1_stick"
    "cli-help-unknown-command|1|no help for unknown command 'nosuch'|help nosuch"
    "cli-unknown-command|2|unknown command 'nosuch'|nosuch --out out"
    "cli-pipeline-positional|1|unexpected argument '$FX/dwi.nii.gz'|pipeline noddi_watson $FX/dwi.nii.gz $FX/mask.nii.gz $FX/bvals $FX/bvecs out"
    "cli-pipeline-unknown-flag|1|unknown option '--bvals/dimoc'|pipeline noddi_watson $IN --out out --bvals/dimoc x"
    "cli-pipeline-demo|1|no pipeline named 'demo'|pipeline demo $IN --out out"
    "cli-pipeline-bad-name|1|'../x' is not a pipeline name|pipeline ../x $IN --out out"
    "cli-pipeline-missing-out|1|pipeline noddi_watson: --out is required|pipeline noddi_watson $IN"
    "cli-pipeline-repeated-out|1|--out given twice ('a', then 'b')|pipeline noddi_bingham $IN --out a --out b"
    "cli-pipeline-option-it-sets|1|unknown option '--method'|pipeline noddi_watson $IN --out out --method lm"
    "cli-pipeline-flag-with-value|1|--mcmc takes no value|pipeline ball_1_racket $IN --out out --mcmc=yes"
    "cli-pipeline-value-swallows-option|1|--mask needs a value|pipeline bedpostx --data $FX/dwi.nii.gz --mask --bvals $FX/bvals --bvecs $FX/bvecs --out out"
    "cli-pipeline-missing-input|1|--data $FX/nosuch.nii.gz: No such file|pipeline model_selection --data $FX/nosuch.nii.gz --mask $FX/mask.nii.gz --bvals $FX/bvals --bvecs $FX/bvecs --out out"
    "cli-pipeline-input-is-a-folder|1|--bvecs $FX/adir is a directory|pipeline noddi_2_binghams --data $FX/dwi.nii.gz --mask $FX/mask.nii.gz --bvals $FX/bvals --bvecs $FX/adir --out out"
    "cli-pipeline-bad-nfibres|2|--nfibres must be 1, 2 or 3, not '4'|pipeline bedpostx $IN --out out --nfibres 4"
    "cli-pipeline-bad-fit-option|1|unknown option '--bogus'|pipeline model_selection $IN --out out --bogus"
    "cli-help-pipeline-unknown|1|no pipeline named 'nosuch'|help pipeline nosuch"
    # -- protocol and geometry --
    "proto-bvals-ms|1|these are ms/um^2; dimoc expects s/mm^2 (multiply them by 1000)|$FITB --bvals $FX/bvals_ms"
    "proto-bvals-ms-no-b0|1|b-values up to 1 look like ms/um^2|fit ball_1_stick --data $FX/dwi.nii.gz --bvals $FX/bvals_ms_nob0 --bvecs $FX/bvecs_nob0 --out out"
    "proto-bvals-si|1|look like s/m^2; dimoc expects s/mm^2|$FITB --bvals $FX/bvals_si"
    "proto-bvals-all-zero|1|every b-value is 0 (14 volumes)|$FITB --bvals $FX/bvals_zero"
    "proto-bvecs-all-zero|1|every direction is 0 0 0|fit ball_1_stick --data $FX/dwi.nii.gz --bvals $FX/bvals --bvecs $FX/bvecs_zero --out out"
    "proto-simulate-bvals-all-zero|1|every b-value is 0|simulate ball_1_stick --bvals $FX/bvals_zero --bvecs $FX/bvecs --params S0=1,d=1e-3,f1=0.5,th1=1,ph1=1 --out s.nii.gz"
    "proto-fewer-volumes-than-parameters|1|4 volumes but model 'ball_2_sticks' has 8 free parameters|fit ball_2_sticks --data $FX/dwi4.nii.gz --bvals $FX/bvals4 --bvecs $FX/bvecs4 --out out"
    "proto-bvals-count|1|14 b-values but the data has 4 volumes|fit ball_1_stick --data $FX/dwi4.nii.gz --bvals $FX/bvals --bvecs $FX/bvecs --out out"
    "geom-data-3d|1|dwi3d.nii.gz: a 3D image (2x2x2): --data needs one volume per measurement|$FITD --data $FX/dwi3d.nii.gz --out out"
    "geom-mask-4d|1|mask4d.nii.gz: a 4D image (2x2x2x3); a mask is 3D|$FIT --mask $FX/mask4d.nii.gz --out out"
    "geom-mask-affine|1|same grid as $FX/dwi.nii.gz but another voxel-to-world affine: [1.8 0.1 0 -35;|$FIT --mask $FX/mask_shifted.nii.gz --out out"
    "geom-mask-grid|1|grid 3x2x2 differs from|$FIT --mask $FX/mask_other_grid.nii.gz --out out"
    "geom-dti-mask-affine|1|another voxel-to-world affine|$DTI --mask $FX/mask_shifted.nii.gz"
    "geom-dti-mask-4d|1|a 4D image (2x2x2x3); a mask is 3D|$DTI --mask $FX/mask4d.nii.gz"
    "geom-track-seed-affine|1|seed_shifted.nii.gz: same grid as|$TRACK --seed $FX/seed_shifted.nii.gz"
    "geom-track-seed-4d|1|a 4D image (2x2x2x2); a seed mask is 3D|$TRACK --seed $FX/seed4d.nii.gz --seedref $FX/seed.nii.gz"
    "geom-track-stop-affine|1|mask_shifted.nii.gz: same grid as the seed space|$TRACK --seed $FX/seed.nii.gz --stop $FX/mask_shifted.nii.gz"
    "file-data-is-a-folder|1|$FX/adir is a directory, not a NIfTI image|$FITD --data $FX/adir --out out"
    "file-bvals-is-a-folder|1|$FX/adir is a directory, not a text file|$FITB --bvals $FX/adir"
    "file-bvals-binary|1|bvals_binary: not a text file (binary byte 0x1f at offset 0)|$FITB --bvals $FX/bvals_binary"
    "file-text-as-nifti|1|bvals_text_nifti.nii: a text file, not a NIfTI image|$FITD --data $FX/bvals_text_nifti.nii --out out"
    "file-mask-missing|1|cannot open $FX/nosuch.nii.gz|$FIT --mask $FX/nosuch.nii.gz --out out"
    # -- outputs that must not be half-written or overwritten --
    "out-not-a-dimoc-folder|1|notdimoc|$FIT --out $FX/notdimoc"
    "out-is-a-file|1|afile|$FIT --out $FX/afile"
    "out-dti-not-a-dimoc-folder|1|notdimoc|dti --data $FX/dwi.nii.gz --bvals $FX/bvals --bvecs $FX/bvecs --out $FX/notdimoc"
    # -- memory safety: maps of another grid or shape are refused, never read out of bounds --
    "safe-compare-grid-differs|1|differs|compare --truth $FX/small --fit $FX/fitmaps --params d"
    "safe-compare-axes-scalar|1|--axes compares direction maps of 3 volumes|compare --truth $FX/truth --fit $FX/fitmaps --axes d"
    "safe-compare-params-vector|1|--params compares scalar maps|compare --truth $FX/truth --fit $FX/fitmaps --params dyads1"
    "safe-select-grid-differs|1|differs|select $FX/fitmaps/d.nii.gz $FX/small/d.nii.gz --out best.nii.gz"
)

for row in "${CASES[@]}"; do
    IFS='|' read -r name want frag cmd <<<"$row"
    w=$(mktemp -d "$T/case.XXXXXX")
    read -r -a words <<<"$cmd"
    err=$(cd "$w" && "$DIMOC" "${words[@]}" 2>&1 >/dev/null)
    rc=$?
    nlines=$(printf '%s' "$err" | grep -c '')
    left=$(ls -A "$w")
    if [ "$rc" -ne "$want" ]; then
        fail "$name" "exit status $rc, not $want; stderr: $err"
    elif [ "$nlines" -ne 1 ]; then
        fail "$name" "$nlines lines on stderr, not 1: $err"
    elif [[ "$err" != "dimoc: error: "* ]]; then
        fail "$name" "not a 'dimoc: error:' line: $err"
    elif [[ "$err" != *"$frag"* ]]; then
        fail "$name" "message lacks '$frag': $err"
    elif [ -n "$left" ]; then
        fail "$name" "left behind: $left"
    else
        pass "$name"
    fi
    rm -rf "$w"
done

# Not errors: a protocol without b=0 (its b=0 volumes made b=1000, with a direction) warns and fits;
# help exists for every command.
w=$(mktemp -d "$T/case.XXXXXX")
"$PY" -c "import numpy as np; b = np.loadtxt('$FX/bvals'); np.savetxt('$w/bvals', np.where(b == 0, 1000, b)[None], fmt='%g')"
err=$("$DIMOC" fit ball_1_stick --quiet --data "$FX/dwi.nii.gz" --bvals "$w/bvals" --bvecs "$FX/bvecs_nob0" \
    --out "$w/out" 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 0 ] && [[ "$err" == *"no b=0 volume (the smallest b-value is 1000)"* ]]; then
    pass no-b0-warns
else
    fail no-b0-warns "exit $rc: $err"
fi
rm -rf "$w"
for c in check compile info fit simulate scheme phantom compare dti angles track view select pipeline; do
    out=$("$DIMOC" help $c 2>&1)
    if [[ "$out" == "usage: dimoc $c"* ]]; then pass "help-$c"; else fail "help-$c" "$(head -2 <<<"$out")"; fi
done
for p in $(ls pipelines/*.sh | xargs -n1 basename | sed 's/\.sh$//'); do
    out=$("$DIMOC" help pipeline "$p" 2>&1)
    if [[ "$out" == "usage: dimoc pipeline $p --data "* && "$out" == *"--out DIR"* ]]; then
        pass "help-pipeline-$p"
    else
        fail "help-pipeline-$p" "$(head -2 <<<"$out")"
    fi
done
# `dimoc CMD --help` (or -h, anywhere among its options) prints `dimoc help CMD` on stdout, exit 0,
# before any of its work; a command's own help flag, where it has one, keeps its meaning.
for c in fit csd track commit dti response peaks tdi connectome merge select view; do
    want=$("$DIMOC" help $c 2>&1)
    for flag in --help -h; do
        got=$("$DIMOC" $c --out "$T/help-$c" $flag --data "$T/nosuch.nii.gz" 2>/dev/null)
        rc=$?
        if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ ! -e "$T/help-$c" ]; then
            pass "help-flag-$c$flag"
        else
            fail "help-flag-$c$flag" "exit $rc: $(head -2 <<<"$got")"
        fi
    done
done
