#!/usr/bin/env bash
# bedpostx with dimoc: ball & sticks by MCMC with ARD on the extra fibres, the results under
# FSL's bedpostx file names, for probtrackx, FSLeyes and scripts written for FSL.
#
# usage: dimoc pipeline bedpostx --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--nfibres N] [fit options]
# options:
#   --nfibres N           fibres per voxel: 1, 2 or 3 [default: 2]
# fit options: every 'dimoc fit' option but --method --init --init-from --save-samples
#
# The cascade:
#   1. ball & one stick by Levenberg-Marquardt (then MCMC with --nfibres 1);
#   2. one more stick per stage by MCMC, from the previous stage's posterior means
#      (--init-from), the new stick starting at f = 0.01 as FSL's xfibres starts its extra
#      fibres.  There is no LM before these MCMC stages on purpose: LM lets the new stick fit
#      the noise of a one-fibre voxel (often as a near-copy of the first stick, sharing its
#      fraction), and a one-parameter-at-a-time sampler then needs far more jumps than usual
#      for ARD to shrink it (measured in tests/py/test_bedpostx.py).
# The last stage keeps its samples.  dimoc's own outputs stay in OUTDIR/dimoc/MODEL/; OUTDIR
# gets FSL's names as hard links to them (copies where links are impossible).
#
# Differences from FSL's files: the fibres are not re-sorted by mean fraction (FSL puts the
# largest first; here fibre 1 is the stick the cascade started from, the larger one in nearly
# every one-fibre voxel, either one where fractions are equal); th samples lie in [0, pi] and ph
# samples in [0, 2 pi) (FSL stores its unbounded random walk), and mean_th/mean_ph are
# circular means (FSL: the plain mean of the samples).  Every other file has FSL's meaning.
set -euo pipefail
nfibres=2
own_flag() { # this pipeline's own flags (lib/flags.bash)
    case $1 in
    --nfibres) nfibres=$2; taken=2 ;;
    esac
}
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
case "$nfibres" in 1|2|3) ;; *) echo "dimoc: error: pipeline bedpostx: --nfibres must be 1, 2 or 3, not '$nfibres'" >&2; exit 2 ;; esac
fitdir=$out/dimoc
mkdir -p "$fitdir"
common=(--data "$data" --mask "$mask" "${gradopts[@]}" "${fmtopts[@]}")

models=(ball_1_stick ball_2_sticks ball_3_sticks)
prev=""
for ((n = 1; n <= nfibres; n++)); do
    model=${models[n - 1]}
    if [ "$n" -eq 1 ]; then
        stage=(--method lm)
        [ "$nfibres" -eq 1 ] && stage=(--method lm,mcmc)
    else
        stage=(--method mcmc --init-from "$fitdir/$prev" --init "f$n=0.01")
    fi
    [ "$n" -eq "$nfibres" ] && stage+=(--save-samples)
    echo "bedpostx.sh: $model ${stage[*]}"
    $dimoc fit "$model" "${common[@]}" "${stage[@]}" --out "$fitdir/$model" "${fitopts[@]}"
    prev=$model
done

finish() { # the links and pictures, after every stage (lib/flags.bash)
    # FSL's names for the last stage's outputs.
    fit=$fitdir/$prev
    for ((n = 1; n <= nfibres; n++)); do
        for p in th ph f; do
            link "$fit/$p${n}_samples$ext" "$out/merged_$p${n}samples$ext"
            link "$fit/$p$n$ext" "$out/mean_$p${n}samples$ext"
        done
        link "$fit/dyads$n$ext" "$out/dyads$n$ext"
        link "$fit/dyads${n}_dispersion$ext" "$out/dyads${n}_dispersion$ext"
    done
    link "$fit/d$ext" "$out/mean_dsamples$ext"
    link "$fit/S0$ext" "$out/mean_S0samples$ext"
    case "$mask" in
    *.nii.gz) cp -f "$mask" "$out/nodif_brain_mask.nii.gz" ;;
    *) cp -f "$mask" "$out/nodif_brain_mask.${mask##*.}" ;;
    esac
    if [ -n "$bvals" ]; then # FSL's files; a --grad or a .mif's table stays with the data
        cp -f "$bvals" "$out/bvals"
        cp -f "$bvecs" "$out/bvecs"
    fi
    echo "bedpostx.sh: $nfibres fibre(s); FSL's names in $out, dimoc's outputs in $fitdir"
}
pipeline_finish finish
