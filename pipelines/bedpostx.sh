#!/usr/bin/env bash
# bedpostx with dimoc: ball & sticks by MCMC with ARD on the extra fibres, the results under
# FSL's bedpostx file names, for probtrackx, FSLeyes and scripts written for FSL.
#
# usage: dimoc pipeline bedpostx --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--nfibres N] [--model 1|2] [--burnin N] [--jumps N] [--sample-every N] [--precision P] [fit options]
# options:
#   --nfibres N           fibres per voxel: 1, 2 or 3 (bedpostx -n) [default: 3]
#   --model 1|2           1: sticks, 2: sticks with a gamma distribution of diffusivities (bedpostx -model) [default: 2]
#   --burnin N            MCMC sweeps discarded, over the whole cascade (bedpostx -b) [default: 1000]
#   --jumps N             MCMC sweeps sampled in the last stage (bedpostx -j) [default: 1250]
#   --sample-every N      keep one sample every N sweeps (bedpostx -s) [default: 25]
#   --precision P         float, double or auto: float for the MCMC stages on a GPU, double otherwise [default: auto]
# fit options: every 'dimoc fit' option but --method --init --init-from --save-samples --samples-of
#
# FSL's bedpostx defaults: 3 fibres, model 2, burn-in 1000, 1250 jumps, a sample every 25, and
# what xfibres leaves at its own defaults: the proposal widths adapted every 40 sweeps (dimoc
# fit's --update-every 40), Gaussian noise (--noise gaussian), ARD weight 1 on every fibre but
# the first from the first sweep.  A sweep ("jump") proposes every parameter once, as in xfibres.
#
# The cascade (MODEL_N = ball_N_sticks, or ball_N_sticks_gamma with --model 2):
#   1. MODEL_1 by Levenberg-Marquardt (then MCMC with --nfibres 1);
#   2. one more stick per stage by MCMC, from the previous stage's posterior means
#      (--init-from), the new stick starting at f = 0.01 as FSL's xfibres starts its extra
#      fibres.  There is no LM before these MCMC stages on purpose: LM lets the new stick fit
#      the noise of a one-fibre voxel (often as a near-copy of the first stick, sharing its
#      fraction), and a one-parameter-at-a-time sampler then needs far more jumps than usual
#      for ARD to shrink it (measured in tests/py/test_bedpostx.py).
# xfibres runs one chain per voxel, --burnin sweeps then --jumps; here the burn-in is shared
# out over the MCMC stages (3 fibres: 500 sweeps of MODEL_2, whose last state starts MODEL_3,
# and 500 of MODEL_3), and the last stage samples --jumps sweeps.  One chain of MODEL_3 straight
# from MODEL_1's fit splits the second fibre of a 60-degree crossing between sticks 2 and 3
# far more often (docs/pipelines.md).
# The last stage keeps the samples FSL keeps: th, ph and f of each fibre.  dimoc's own outputs
# stay in OUTDIR/dimoc/MODEL/; OUTDIR gets FSL's names as hard links to them (copies where links
# are impossible).
#
# Differences from FSL's files: the fibres are not re-sorted by mean fraction (FSL puts the
# largest first; here fibre 1 is the stick the cascade started from, the larger one in nearly
# every one-fibre voxel, either one where fractions are equal); th samples lie in [0, pi] and ph
# samples in [0, 2 pi) (FSL stores its unbounded random walk), and mean_th/mean_ph are
# circular means (FSL: the plain mean of the samples).  Every other file has FSL's meaning.
set -euo pipefail
nfibres=3 model=2 burnin=1000 jumps=1250 every=25 precision=auto
own_flag() { # this pipeline's own flags (lib/flags.bash)
    case $1 in
    --precision) precision=$2; taken=2 ;;
    --nfibres) nfibres=$2; taken=2 ;;
    --model) model=$2; taken=2 ;;
    --burnin) burnin=$2; taken=2 ;;
    --jumps) jumps=$2; taken=2 ;;
    --sample-every) every=$2; taken=2 ;;
    esac
}
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
refuse() { echo "dimoc: error: pipeline bedpostx: $1" >&2; exit 2; }
case "$nfibres" in 1|2|3) ;; *) refuse "--nfibres must be 1, 2 or 3, not '$nfibres'" ;; esac
case "$precision" in float|double|auto) ;; *) refuse "--precision must be float, double or auto, not '$precision'" ;; esac
case "$model" in
1) models=(ball_1_stick ball_2_sticks ball_3_sticks) ;;
2) models=(ball_1_stick_gamma ball_2_sticks_gamma ball_3_sticks_gamma) ;;
3) refuse "--model 3 (FSL's zeppelins) is not available: dimoc has no ball & zeppelins model; use --model 1 or 2" ;;
*) refuse "--model must be 1 or 2, not '$model'" ;;
esac
for v in "--burnin $burnin" "--jumps $jumps" "--sample-every $every"; do
    [[ ${v#* } =~ ^[0-9]+$ ]] || refuse "${v% *} must be a whole number, not '${v#* }'"
done
fitdir=$out/dimoc
mkdir -p "$fitdir"
# auto: the chains in float on a GPU (8 times faster there, their Monte Carlo error far above
# float's rounding; FSL's bedpostx_gpu keeps its parameters in float), in double on the CPU,
# where float is no faster.
common=(--data "$data" --mask "$mask" "${gradopts[@]}" "${fmtopts[@]}" --precision "$precision")

# The burn-in shared out over the MCMC stages (one with 1 or 2 fibres, two with 3); a stage
# before the last samples once, its last state starting the next.
nmcmc=$((nfibres > 1 ? nfibres - 1 : 1))
share=$((burnin / nmcmc))
prev=""
for ((n = 1; n <= nfibres; n++)); do
    name=${models[n - 1]}
    if [ "$n" -eq 1 ]; then
        stage=(--method lm)
        [ "$nfibres" -eq 1 ] && stage=(--method lm,mcmc)
    else
        stage=(--method mcmc --init-from "$fitdir/$prev" --init "f$n=0.01")
    fi
    if [ "$n" -eq "$nfibres" ]; then
        # the samples FSL keeps: th, ph and f of each fibre
        kept=$(for ((k = 1; k <= n; k++)); do printf 'th%d,ph%d,f%d,' "$k" "$k" "$k"; done)
        stage+=(--burnin $((burnin - (nmcmc - 1) * share)) --jumps "$jumps" --sample-every "$every"
            --samples-of "${kept%,}")
    elif [ "$n" -gt 1 ]; then
        stage+=(--burnin "$share" --jumps "$every" --sample-every "$every")
    fi
    echo "bedpostx.sh: $name ${stage[*]}"
    $dimoc fit "$name" "${common[@]}" "${stage[@]}" --out "$fitdir/$name" "${fitopts[@]}"
    prev=$name
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
    [ "$model" -eq 1 ] || link "$fit/d_std$ext" "$out/mean_d_stdsamples$ext"
    link "$fit/S0$ext" "$out/mean_S0samples$ext"
    case "$mask" in
    *.nii.gz) cp -f "$mask" "$out/nodif_brain_mask.nii.gz" ;;
    *) cp -f "$mask" "$out/nodif_brain_mask.${mask##*.}" ;;
    esac
    if [ -n "$bvals" ]; then # FSL's files; a --grad or a .mif's table stays with the data
        cp -f "$bvals" "$out/bvals"
        cp -f "$bvecs" "$out/bvecs"
    fi
    echo "bedpostx.sh: $nfibres fibre(s), model $model; FSL's names in $out, dimoc's outputs in $fitdir"
}
pipeline_finish finish
