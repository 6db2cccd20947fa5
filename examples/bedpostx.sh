#!/usr/bin/env bash
# bedpostx with dimoc: ball & sticks fitted by MCMC with ARD, written under FSL's file names so
# that probtrackx, FSLeyes and scripts made for FSL's bedpostx read the results as they are.
#
#   bedpostx.sh DATA MASK BVALS BVECS OUTDIR [NFIBRES] [dimoc fit options, e.g. --device gpu]
#
# NFIBRES is 1, 2 (default) or 3.  The cascade: ball & one stick by Levenberg-Marquardt, then
# one more stick per stage, each stage starting from the previous one (--init-from); the last
# stage runs LM and then MCMC and keeps the samples.  The extra sticks start small (f = 0.05,
# as FSL's xfibres starts its extra fibres) so that ARD can keep them small where the data do
# not ask for them.  dimoc's own outputs stay in OUTDIR/dimoc/; OUTDIR gets the FSL names as
# hard links (copies where links are impossible).  Every step is a plain dimoc command.
set -euo pipefail
if [ $# -lt 5 ]; then
    sed -n '4,5p' "$0" | sed 's/^# *//' >&2
    exit 2
fi
data=$1 mask=$2 bvals=$3 bvecs=$4 out=$5
shift 5
nfibres=2
case "${1:-}" in [0-9]*) nfibres=$1; shift ;; esac
case "$nfibres" in 1|2|3) ;; *) echo "bedpostx.sh: NFIBRES must be 1, 2 or 3, not '$nfibres'" >&2; exit 2 ;; esac
dimoc=${DIMOC:-dimoc}
fitdir=$out/dimoc
mkdir -p "$fitdir"
common=(--data "$data" --mask "$mask" --bvals "$bvals" --bvecs "$bvecs")

models=(ball_1_stick ball_2_sticks ball_3_sticks)
prev=""
for ((n = 1; n <= nfibres; n++)); do
    model=${models[n - 1]}
    init=()
    [ -n "$prev" ] && init=(--init-from "$fitdir/$prev" --init "f$n=0.05")
    method=lm
    [ "$n" -eq "$nfibres" ] && method=lm,mcmc
    $dimoc fit "$model" "${common[@]}" "${init[@]}" --method "$method" --save-samples \
        --out "$fitdir/$model" "$@"
    prev=$model
done

# FSL's names for the last stage's outputs.
fit=$fitdir/$prev
link() { ln -f "$1" "$2" 2>/dev/null || cp -f "$1" "$2"; }
for ((n = 1; n <= nfibres; n++)); do
    for p in th ph f; do
        link "$fit/$p${n}_samples.nii.gz" "$out/merged_$p${n}samples.nii.gz"
        link "$fit/$p$n.nii.gz" "$out/mean_$p${n}samples.nii.gz"
    done
    link "$fit/dyads$n.nii.gz" "$out/dyads$n.nii.gz"
    link "$fit/dyads${n}_dispersion.nii.gz" "$out/dyads${n}_dispersion.nii.gz"
done
link "$fit/d.nii.gz" "$out/mean_dsamples.nii.gz"
link "$fit/S0.nii.gz" "$out/mean_S0samples.nii.gz"
cp -f "$mask" "$out/nodif_brain_mask.nii.gz"
cp -f "$bvals" "$out/bvals"
cp -f "$bvecs" "$out/bvecs"
echo "bedpostx.sh: $nfibres fibre(s), FSL names in $out, dimoc's outputs in $fitdir"
