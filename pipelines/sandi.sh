#!/usr/bin/env bash
# SANDI with dimoc (models/sandi.model): soma and neurite density from multi-shell powder signals.
#
# usage: dimoc pipeline sandi --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR --scheme FILE [--mcmc] [fit options]
# options:
#   --mcmc                MCMC after the last stage's LM (--method lm,mcmc): posterior means and _sd maps;
#                         advised at SNR 50 and below, where least squares overfits SANDI's five
#                         parameters (docs/pipelines.md has the numbers)
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type;
#   the scheme, --scheme FILE (columns G in T/m, Delta and delta in s, one row per volume;
#   docs/fitting.md), is needed: it passes on to every fit.
#
# SANDI's model is isotropic (direction-averaged compartments), so the data are fitted as they
# are, every direction of a shell predicted alike: the same estimates as a fit to the shell
# means (models/sandi.model says why).
# No tensor stage: orientations do not matter, and at SANDI's b-values (up to ~10000 s/mm^2)
# the tensor's mean diffusivity is far below D_ec (0.35e-3 against 1.2e-3 mm^2/s in
# tests/py/test_sandi.py's voxels), a worse start than a grid.
#   1. a grid search over f_neurite, f_soma, R_soma, D_in and D_ec, S0 the mean b=0 signal;
#   2. Levenberg-Marquardt on all the parameters (then MCMC with --mcmc).
# dimoc's outputs stay in OUTDIR/dimoc/STAGE/; OUTDIR gets the final f_neurite, f_soma, f_ec,
# R_soma (um), D_in, D_ec and S0 as hard links, BIC and AIC when --ic is among the fit options,
# and quick-look PNGs.
set -euo pipefail
own_flag() { mcmc_flag "$1"; } # this pipeline's own flag, --mcmc (lib/flags.bash)
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
pipeline_stages sandi

cascade grid --method grid --out-type float64 --grid f_neurite=0.1:0.1:0.8 \
    --grid f_soma=0.05,0.15,0.3,0.5 --grid R_soma=2,4,6,8,10,12 --grid D_in=1e-3,1.75e-3,2.5e-3 \
    --grid D_ec=0.5e-3,1e-3,1.5e-3,2.2e-3 \
    --then final "${last[@]}"

finish() { # the links and pictures, after every stage (lib/flags.bash)
    final=$stages/final
    link_maps "$final" "$out" f_neurite f_soma f_ec R_soma D_in D_ec S0 BIC AIC
    for m in f_neurite f_soma R_soma; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    wait_background
    echo "sandi.sh: maps and PNGs in $out, every stage in $stages"
}
pipeline_finish finish
