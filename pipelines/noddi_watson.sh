#!/usr/bin/env bash
# NODDI-Watson with dimoc, the cascade of the NODDI toolbox (thesis section 5.5.1).
#
# usage: dimoc pipeline noddi_watson --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--mcmc | --fast] [fit options]
# options:
#   --mcmc                MCMC after the last stage's LM (--method lm,mcmc): posterior means and _sd maps
#   --fast                AMICO's route instead of stages 2-4: the dictionary fit (--method dictionary)
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type
#
#   1. the orientation: th, ph of the principal axis of a tensor fit of the voxel's signal
#      (the model's `init from theta(1)` and `phi(1)`: dimoc dti's linear fit, made in the
#      first stage's process, where the data are read once, instead of a separate command);
#   2. a grid search over fiso, fintra and kappa, the orientation held, S0 the mean b=0 signal;
#   3. Levenberg-Marquardt on the fractions fiso and fintra only;
#   4. Levenberg-Marquardt on all the parameters (then MCMC with --mcmc).
# With --fast, stages 2-4 are one dictionary fit (docs/fitting.md), AMICO's NODDI on the CPU:
# atoms over AMICO's grid of 12 orientation dispersions (as kappa) and 12 fintra values, fiso
# and S0 solved for linearly, the orientation held from the tensor.
# Each stage starts from the previous one's maps (stages 2-4 are one `dimoc fit ... --then`:
# the maps of separate commands with --init-from); the intermediate maps are written as
# float64 so that values at a bound (kappa near 64) stay inside it.  dimoc's outputs stay in
# OUTDIR/dimoc/STAGE/; OUTDIR gets the final fiso, fintra, kappa, OD (orientation
# dispersion index), dyads1 (the mean orientation) and S0 as hard links (copies where links
# are impossible), BIC and AIC when --ic is among the fit options, and quick-look PNGs.
set -euo pipefail
last=(--method lm)
fast=0
own_flag() { # this pipeline's own flags (lib/flags.bash)
    case $1 in
    --mcmc) last=(--method lm,mcmc); mcmc=1; taken=1 ;;
    --fast) fast=1; taken=1 ;;
    esac
}
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
pipeline_stages noddi_watson

if [ "$fast" = 1 ]; then
    if [ "${mcmc:-0}" = 1 ]; then
        echo "noddi_watson.sh: --fast and --mcmc exclude each other" >&2
        exit 2
    fi
    # AMICO's grid: OD 0.03, 0.06, 0.09..0.99 (kappa = 1/tan(OD pi/2)), fintra 0.1..0.99.
    kappas=0.0157093,0.174528,0.342377,0.529473,0.750821,1.03192,1.42286,2.04125,3.25055
    kappas=$kappas,7.02637,10.5789,21.2049
    fit final --method dictionary --fixed th,ph \
        --grid kappa=$kappas --grid fintra=0.1:0.0809090909:0.99
else
    # 1-4. The tensor's orientation, the grid, the fractions, everything: one `dimoc fit`
    # (lib/flags.bash).
    cascade grid --method grid --fixed th,ph --out-type float64 \
        --grid fiso=0,0.1,0.2,0.35,0.6,1 --grid fintra=0.1:0.1:0.9 --grid kappa=0.5,1,2,4,8,16,32 \
        --then fractions --method lm --fixed S0,kappa,th,ph --out-type float64 \
        --then final "${last[@]}"
fi

finish() { # the links and pictures, after every stage (lib/flags.bash)
    final=$stages/final
    link_maps "$final" "$out" fiso fintra kappa OD dyads1 S0 BIC AIC
    for m in fiso fintra OD; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    picture --rgb-from "$out/dyads1$ext" --weight "$out/fintra$ext" \
        -o "$out/dyads1.png"
    wait_background
    echo "noddi_watson.sh: maps and PNGs in $out, every stage in $stages"
}
pipeline_finish finish
