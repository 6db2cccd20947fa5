#!/usr/bin/env bash
# NODDI with two Bingham-dispersed fibre populations (thesis section 5.5.4) with dimoc,
# started from NODDI-Bingham (one population) and ball & two sticks (two orientations).
#
# usage: dimoc pipeline noddi_2_binghams --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--mcmc] [fit options]
# options:
#   --mcmc                MCMC after the last stage's LM (--method lm,mcmc): posterior means and _sd maps
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type
#
#   1. the NODDI-Bingham pipeline (noddi_bingham.sh) into OUTDIR/noddi_bingham: S0, fiso and
#      its neurite fraction start both populations, its psi the first one's;
#   2. ball & two sticks by Levenberg-Marquardt, from the tensor's V1 and V2 (dimoc angles):
#      its two sticks start the two orientations;
#   3. a grid search over ffan2 (the second population's share) and the four concentrations,
#      everything else held (the grid of each smaller concentration lies below the larger
#      one's values: a start on kappa2 = kappa1 sits on the constraint, where LM's steps that
#      break it are refused and it may never leave);
#   4. Levenberg-Marquardt with the two orientations held;
#   5. Levenberg-Marquardt on all the parameters (then MCMC with --mcmc).
# dimoc's outputs stay in OUTDIR/dimoc/STAGE/; OUTDIR gets the final fiso, ffan2, fintra1,
# fintra2, kappa11, kappa12, kappa21, kappa22, ODItot1, DA1, ODItot2, DA2, dyads1, dyads2,
# fanning1, fanning2 and S0 as hard links (copies where links are impossible), BIC and AIC
# when --ic is among the fit options, and quick-look PNGs.
set -euo pipefail
own_flag() { mcmc_flag "$1"; } # this pipeline's own flag, --mcmc (lib/flags.bash)
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
here=$(dirname "$0")
pipeline_stages noddi_2_binghams
fit() { # model, stage-name, dimoc fit arguments...
    local model=$1 name=$2; shift 2
    echo "noddi_2_binghams.sh: $name"
    $dimoc fit "$model" "${common[@]}" --out "$stages/$name" "$@" "${fitopts[@]}"
}

# 1. NODDI-Bingham (without MCMC: it only starts this fit).
DIMOC=$dimoc bash "$here/noddi_bingham.sh" "${common[@]}" --out "$out/noddi_bingham" \
    "${fitopts[@]}"
one=$out/noddi_bingham/dimoc/final
dti=$out/noddi_bingham/dimoc/dti
# 2. Two orientations: ball & two sticks from the tensor's first two axes.
$dimoc angles "$dti/V1$ext" --suffix 1 --out "$stages/axes" "${fmtopts[@]}"
$dimoc angles "$dti/V2$ext" --suffix 2 --out "$stages/axes" "${fmtopts[@]}"
fit ball_2_sticks sticks --method lm --init-from "$stages/axes" --out-type float64
# 3-5. The grid over the shares and concentrations, the fit with the orientations held, all.
cascade_fit noddi_2_binghams grid --method grid --init-from "$one" --out-type float64 \
    --init fintra1="$one/fintra$ext" --init fintra2="$one/fintra$ext" \
    --init psi1="$one/psi$ext" \
    --init th1="$stages/sticks/th1$ext" --init ph1="$stages/sticks/ph1$ext" \
    --init th2="$stages/sticks/th2$ext" --init ph2="$stages/sticks/ph2$ext" \
    --fixed S0,fiso,fintra1,fintra2,th1,ph1,psi1,th2,ph2,psi2 --grid ffan2=0.1,0.2,0.3,0.4,0.48 \
    --grid kappa11=4,16,63.9 --grid kappa12=0.9,3.6,14 --grid kappa21=4,16,63.9 \
    --grid kappa22=0.9,3.6,14 \
    --then oriented --method lm --fixed th1,ph1,th2,ph2 --out-type float64 \
    --then final "${last[@]}"

finish() { # the links and pictures, after every stage (lib/flags.bash)
    final=$stages/final
    link_maps "$final" "$out" fiso ffan2 fintra1 fintra2 kappa11 kappa12 kappa21 kappa22 ODItot1 \
        DA1 ODItot2 DA2 dyads1 dyads2 fanning1 fanning2 S0 BIC AIC
    for m in fiso ffan2 ODItot1 ODItot2; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    picture --rgb-from "$out/dyads1$ext" --weight "$out/fintra1$ext" \
        -o "$out/dyads1.png"
    picture --rgb-from "$out/dyads2$ext" --weight "$out/ffan2$ext" \
        -o "$out/dyads2.png"
    wait_background
    echo "noddi_2_binghams.sh: maps and PNGs in $out, NODDI-Bingham in $out/noddi_bingham, every stage in $stages"
}
pipeline_finish finish
