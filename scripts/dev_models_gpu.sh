#!/usr/bin/env bash
# Device session for issue 17 (and the fitter's start-up work of issue 16): the GPU tests of
# fitting, the new models, the compartments, fractions and scheme columns, each timed.
#   scripts/dev_models_gpu.sh [PATTERN...]     one line per test; logs under $OUT
set -u
. "$(dirname "$0")/device_env.sh"
tests=${*:-"recovery_on_gpu heldout_accuracy_on_gpu gpu_parity part_fit_csd_on_gpu
    interrupt_on_gpu bessel_parity model_compartments_on_gpu fractions_on_gpu scheme_on_gpu
    models_dwi_on_gpu restricted_models_on_gpu"}
for t in $tests; do
    s=$(date +%s)
    bash tests/run.sh --gpu "$t" >"$OUT/$t.log" 2>&1
    echo "$t: $(tail -1 "$OUT/$t.log") ($(( $(date +%s) - s )) s)"
    grep "FAIL" "$OUT/$t.log" | head -5
    cp tests/tmp/log.test_"$t".* "$OUT/" 2>/dev/null # each check's line, with its figures
done
