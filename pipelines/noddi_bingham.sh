#!/usr/bin/env bash
# NODDI-Bingham with dimoc (thesis section 5.5.2), started from NODDI-Watson.
#
# usage: dimoc pipeline noddi_bingham --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--mcmc] [fit options]
# options:
#   --mcmc                MCMC after the last stage's LM (--method lm,mcmc): posterior means and _sd maps
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type
#
#   1. the NODDI-Watson pipeline (noddi_watson.sh) into OUTDIR/noddi_watson: S0, the
#      fractions and the orientation th, ph start the Bingham fit; beside it, a tensor fit
#      (dimoc dti, dimoc angles --fanning): its second eigenvector, perpendicular to the
#      orientation, starts the fanning direction (psi);
#   2. a grid search over kappa1 >= kappa2, everything else held (kappa2's values lie just
#      below kappa1's: a start on kappa2 = kappa1 sits on the constraint, where LM's steps that
#      break it are refused and it may never leave; and kappa1's least is 1.2, for LM moves a
#      start closer to a bound than about 1.02 out to there, which put kappa1 = 1 and kappa2 =
#      0.5 or 0.9 on one start, on the constraint, where a tenth of the voxels stayed);
#   3. Levenberg-Marquardt on the dispersion (kappa1, kappa2, psi), the rest held;
#   4. Levenberg-Marquardt on all the parameters (then MCMC with --mcmc).
# dimoc's outputs stay in OUTDIR/dimoc/STAGE/; OUTDIR gets the final fiso, fintra, kappa1,
# kappa2, ODIp, ODIs, ODItot, DA, dyads1 (the mean orientation), fanning (the fanning
# direction) and S0 as hard links (copies where links are impossible), BIC and AIC when --ic
# is among the fit options, and quick-look PNGs.
set -euo pipefail
own_flag() { mcmc_flag "$1"; } # this pipeline's own flag, --mcmc (lib/flags.bash)
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
here=$(dirname "$0")
pipeline_stages noddi_bingham

# 1. NODDI-Watson (without MCMC: it only starts this fit) and the tensor's axes beside it.
fanning_start() {
    $dimoc dti "${common[@]}" --out "$stages/dti" >/dev/null
    $dimoc angles "$stages/dti/V1$ext" --fanning "$stages/dti/V2$ext" --out "$stages/angles" "${fmtopts[@]}"
}
in_background fanning_start
if ! DIMOC=$dimoc bash "$here/noddi_watson.sh" "${common[@]}" --out "$out/noddi_watson" \
    "${fitopts[@]}"; then
    wait_background || true # nothing left writing into OUTDIR
    exit 1
fi
wait_background
watson=$out/noddi_watson/dimoc
# 2-4. The grid over the concentrations, the dispersion, everything.
cascade grid --method grid --init-from "$watson/final" --init psi="$stages/angles/psi$ext" \
    --fixed S0,fintra,fiso,th,ph,psi --out-type float64 \
    --grid kappa1=1.2,2,4,8,16,32,63 --grid kappa2=0.5,0.9,1.8,3.6,7,14,28,56 \
    --then dispersion --method lm --fixed S0,fintra,fiso,th,ph --out-type float64 \
    --then final "${last[@]}"

finish() { # the links and pictures, after every stage (lib/flags.bash)
    final=$stages/final
    link_maps "$final" "$out" fiso fintra kappa1 kappa2 ODIp ODIs ODItot DA dyads1 fanning S0 \
        BIC AIC
    for m in fiso fintra ODItot DA; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    picture --rgb-from "$out/dyads1$ext" --weight "$out/fintra$ext" \
        -o "$out/dyads1.png"
    picture --rgb-from "$out/fanning$ext" --weight "$out/DA$ext" \
        -o "$out/fanning.png"
    wait_background
    echo "noddi_bingham.sh: maps and PNGs in $out, NODDI-Watson in $out/noddi_watson, every stage in $stages"
}
pipeline_finish finish
