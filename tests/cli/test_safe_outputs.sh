#!/usr/bin/env bash
# Bad inputs: map tools given maps of other grids or shapes (clear
# one-line errors, no out-of-bounds read), and output folders that must not be replaced or
# half-written (an existing folder of other files, a file in the way, a failed run).
. "$(dirname "$0")/../lib.sh"
D=$DIMOC
cd "$T"
$D phantom --out truth >/dev/null && $D phantom --out small --size 3 >/dev/null || fail phantom
$D scheme --shells 3x0,20x1000,20x2000 --bvals bvals --bvecs bvecs || fail scheme
p=S0=truth/S0.nii.gz,d=truth/d.nii.gz,f1=truth/f1.nii.gz,th1=truth/th1.nii.gz,ph1=truth/ph1.nii.gz
p=$p,f2=truth/f2.nii.gz,th2=truth/th2.nii.gz,ph2=truth/ph2.nii.gz
$D simulate ball_2_sticks --bvals bvals --bvecs bvecs --params "$p" --out sim.nii.gz || fail simulate
$D fit ball_2_sticks --data sim.nii.gz --bvals bvals --bvecs bvecs --out fit --quiet || fail fit

# compare: truth and fit on different grids; a scalar map as an axis; a 3-volume map as a scalar.
expect_error compare-grid-differs "grid 12x3x2 differs" $D compare --truth small --fit fit --params d
expect_error compare-axes-scalar "--axes compares direction maps of 3 volumes" \
    $D compare --truth truth --fit fit --axes d
expect_error compare-axes-two-scalars "--axes compares direction maps" \
    $D compare --truth truth --fit fit --axes dyads1,f1
expect_error compare-params-vector "--params compares scalar maps" \
    $D compare --truth truth --fit fit --params dyads1
expect_error compare-axes-grid "differs" $D compare --truth small --fit fit --axes dyads1
expect_error compare-regions-grid "differs" \
    $D compare --truth truth --fit fit --params d --regions small/regions.nii.gz
# Region labels that are not small integers (NaN, negative, huge) are ignored, not cast.
"${PYTHON:-python3}" - <<'PY'
import nibabel as nib, numpy as np
img = nib.load("truth/regions.nii.gz")
r = np.asarray(img.dataobj, dtype=np.float32).copy()
r.flat[0], r.flat[1], r.flat[2] = np.nan, -5, 1e30
nib.save(nib.Nifti1Image(r, img.affine), "odd_regions.nii.gz")
nib.save(nib.Nifti1Image(np.zeros_like(r), img.affine), "empty_mask.nii.gz")
PY
expect_ok compare-odd-labels $D compare --truth truth --fit fit --params d --regions odd_regions.nii.gz
# select and angles: maps of other grids, a scalar map as directions.
expect_error select-grid "differs" $D select fit/d.nii.gz small/d.nii.gz --out best.nii.gz
expect_error angles-scalar "a direction map has 3" $D angles truth/d.nii.gz --out ang
expect_error angles-fanning-grid "differs" $D angles truth/dyads1.nii.gz --fanning small/dyads2.nii.gz --out ang
[ ! -e ang ] && [ ! -e best.nii.gz ] && pass no-output-after-errors || fail no-output-after-errors

# Output folders: one holding files dimoc did not write is never replaced; a file in the way.
mkdir -p mine && echo keep >mine/notes.txt
expect_error out-foreign-folder "holds files that dimoc did not write" \
    $D dti --data sim.nii.gz --bvals bvals --bvecs bvecs --out mine
[ "$(cat mine/notes.txt)" = keep ] && pass out-foreign-kept || fail out-foreign-kept
touch afile
expect_error out-is-file "a file of that name exists" $D phantom --out afile
# A run that fails part way leaves an earlier folder as it was and nothing temporary.
$D dti --data sim.nii.gz --bvals bvals --bvecs bvecs --out dti >/dev/null || fail dti
before=$(cd dti && sha256sum * | sha256sum)
expect_error out-failed-run "selects no voxel" \
    $D dti --data sim.nii.gz --bvals bvals --bvecs bvecs --mask empty_mask.nii.gz --out dti
after=$(cd dti && sha256sum * | sha256sum)
[ "$before" = "$after" ] && [ -z "$(ls -A | grep '\.tmp\.')" ] && pass out-failed-run-intact \
    || fail out-failed-run-intact "$(ls -A)"
# Merge mode: two angles runs with different suffixes share a folder, each with provenance.
$D angles truth/dyads1.nii.gz --suffix 1 --out axes && $D angles truth/dyads2.nii.gz --suffix 2 --out axes
[ -f axes/th1.nii.gz ] && [ -f axes/th2.nii.gz ] && [ -f axes/provenance1.json ] && \
    [ -f axes/provenance2.json ] && pass angles-merge || fail angles-merge "$(ls axes)"
# Every writing command leaves a provenance record.
for f in truth/provenance.json fit/provenance.json dti/provenance.json sim.provenance.json; do
    [ -s "$f" ] && pass "provenance $f" || fail "provenance $f"
done
# Redirected output still says what ran: a start line and a summary line.
$D fit ball_2_sticks --data sim.nii.gz --bvals bvals --bvecs bvecs --out fit2 2>fit2.err >/dev/null
grep -q '^fit: 288 voxels$' fit2.err && grep -q '^fit: 288 voxels in .*fitted' fit2.err \
    && pass progress-redirected || fail progress-redirected "$(cat fit2.err)"
