#!/usr/bin/env bash
# The demo behind `make demo`: a ball & two sticks phantom (one fibre, crossings at 90 and 60
# degrees, free water) under a UK-Biobank-like protocol, fitted with LM then MCMC, and the
# estimates compared with the truth.  Every step is a plain dimoc command you can copy.
set -euo pipefail
cd "$(dirname "$0")/.."
dimoc=bin/dimoc
D=${DEMO_DIR:-demo-out}
T=$D/truth
rm -rf "$D"
mkdir -p "$D"
start=$SECONDS

$dimoc scheme --shells 5x0,50x1000,50x2000 --bvals "$D/bvals" --bvecs "$D/bvecs"
$dimoc phantom --out "$T" --size 6
params=""
for p in S0 d f1 th1 ph1 f2 th2 ph2; do params="$params${params:+,}$p=$T/$p.nii.gz"; done
$dimoc simulate ball_2_sticks --bvals "$D/bvals" --bvecs "$D/bvecs" --params "$params" \
    --noise rician --snr 30 --seed 7 --out "$D/dwi.nii.gz"
# A short cascade, as bedpostx does: one fibre first, then two fibres starting from it, so
# that the second stick grows only where the data ask for it (ARD keeps it small elsewhere).
$dimoc fit ball_1_stick --data "$D/dwi.nii.gz" --mask "$T/mask.nii.gz" \
    --bvals "$D/bvals" --bvecs "$D/bvecs" --method lm --out "$D/fit1"
$dimoc fit ball_2_sticks --data "$D/dwi.nii.gz" --mask "$T/mask.nii.gz" \
    --bvals "$D/bvals" --bvecs "$D/bvecs" --init-from "$D/fit1" --method lm,mcmc --out "$D/fit"

echo
echo "ball_2_sticks (from ball_1_stick), LM then MCMC, SNR 30 (Rician), 5 b=0 + 50 b=1000 + 50 b=2000:"
$dimoc compare --truth "$T" --fit "$D/fit" --params f1,f2,d --axes dyads1,dyads2 \
    --regions "$T/regions.nii.gz" --region-names "one fibre,cross 90,cross 60,free water"
# Quick looks at the main outputs.
for m in f1 f2 d; do $dimoc view "$D/fit/$m.nii.gz" -o "$D/fit/$m.png"; done
$dimoc view --rgb-from "$D/fit/dyads1.nii.gz" --weight "$D/fit/f1.nii.gz" -o "$D/fit/dyads1.png"
$dimoc view --rgb-from "$D/fit/dyads2.nii.gz" --weight "$D/fit/f2.nii.gz" -o "$D/fit/dyads2.png"

# The same data by constrained spherical deconvolution, as MRtrix users would: responses
# estimated from the data (dhollander: b = 0 and two shells), multi-tissue CSD, the FODs' two
# largest peaks as FSL-frame dyads, compared with the truth like the fit's.
$dimoc csd --data "$D/dwi.nii.gz" --mask "$T/mask.nii.gz" --bvals "$D/bvals" --bvecs "$D/bvecs" \
    --out "$D/csd"
$dimoc peaks "$D/csd/wm_fod.nii.gz" --mask "$T/mask.nii.gz" --num 2 --out "$D/peaks"
echo
echo "CSD (dhollander responses, WM/GM/CSF), the FOD's two largest peaks:"
$dimoc compare --truth "$T" --fit "$D/peaks" --status "$D/csd/status.nii.gz" --axes dyads1,dyads2 \
    --regions "$T/regions.nii.gz" --region-names "one fibre,cross 90,cross 60,free water"
$dimoc view "$D/csd/wm_fod.nii.gz" -o "$D/csd/fod.png"

echo
echo "pictures: $D/fit/{f1,f2,d,dyads1,dyads2}.png, $D/csd/fod.png"
echo "demo finished in $((SECONDS - start)) s; maps in $D/fit (status.nii.gz, provenance.json)"
