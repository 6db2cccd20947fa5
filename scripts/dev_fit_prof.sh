#!/usr/bin/env bash
# Device session for issue 16 (the ball & 2 sticks LM+MCMC kernel): the bench with NVRTC
# variants, the fit split into its methods, and an Nsight Compute profile of the fitting kernel
# on a smaller case with source lines (-lineinfo): instruction mix, stall reasons and the SASS
# with per-instruction counts in $OUT (read with scripts' own Python, not here).
set -u
. "$(dirname "$0")/device_env.sh"
if [ -f .peer/site.tar.xz ]; then
    mkdir -p /tmp/peer && tar -C /tmp/peer -xJf .peer/site.tar.xz && export PYTHONPATH=/tmp/peer
    [ -f .peer/dipydata.tar.gz ] && tar -C /tmp/peer -xzf .peer/dipydata.tar.gz
fi
# BASE=DIR: the same bench also from DIR (an earlier build: DIR/bin/dimoc beside its templates,
# models and bench/bench_fit.py), measured in turn with this tree's (REPEAT rounds, A B A B) on
# the same warm machine.
for round in $(seq "${REPEAT:-1}"); do
    if [ -n "${BASE:-}" ]; then
        echo "== round $round, baseline: $BASE"
        $PYTHON $BASE/bench/bench_fit.py --workloads ukb_b2s --voxels 200000 --no-cpu \
            --precisions float --lanes 2 2>&1 | sed -n 2p | tee -a $OUT/bench.txt
    fi
    echo "== round $round, this tree"
    $PYTHON bench/bench_fit.py --workloads ukb_b2s --voxels 200000 --no-cpu --precisions float \
        --lanes 2 ${VARIANTS:+--nvrtc-variants="$VARIANTS"} 2>&1 | grep "^ukb" | tee -a $OUT/bench.txt
done
W=/tmp/dimoc-bench/ukb_b2s
in=(--data $W/dwi.nii.gz --bvals $W/bvals --bvecs $W/bvecs --precision float --lanes 2 --quiet)
bin/dimoc fit ball_2_sticks "${in[@]}" --method lm --out /tmp/m_lm
bin/dimoc fit ball_2_sticks "${in[@]}" --method mcmc --init-from /tmp/m_lm --out /tmp/m_mcmc
for m in lm mcmc; do
    python3 -c "import json,sys; t=json.load(open('/tmp/m_$m/provenance.json'))['timings_seconds']; print('$m only:', t)"
done
[ -n "${TESTS:-}" ] && bash scripts/dev_models_gpu.sh $TESTS
[ "${SKIP_NCU:-0}" = 1 ] && exit 0
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -n "$NCU" ] || { echo "no ncu here"; exit 0; }
$PYTHON bench/bench_fit.py --workloads ukb_b2s --voxels 20000 --no-cpu --precisions float --lanes 2 \
    --work /tmp/small >/dev/null 2>&1
S=/tmp/small/ukb_b2s
DIMOC_NVRTC_OPTIONS=-lineinfo "$NCU" --kernel-name dm_fit_kernel --launch-count 1 \
    --section InstructionStats --section WarpStateStats --section SourceCounters \
    --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section SpeedOfLight \
    --import-source yes -f -o /tmp/fitrep bin/dimoc fit ball_2_sticks --data $S/dwi.nii.gz \
    --bvals $S/bvals --bvecs $S/bvecs --precision float --lanes 2 --quiet --method lm,mcmc \
    --out /tmp/prof_fit >$OUT/ncu.log 2>&1
tail -3 $OUT/ncu.log
"$NCU" --import /tmp/fitrep.ncu-rep --page details >$OUT/details.txt 2>&1
"$NCU" --import /tmp/fitrep.ncu-rep --page source --csv --print-source sass >$OUT/sass.csv 2>&1
"$NCU" --import /tmp/fitrep.ncu-rep --page source --csv --print-source cuda,sass >$OUT/cuda_sass.csv 2>&1
ls -la $OUT
grep -E "Duration|Registers|Achieved Occupancy|Issue Slots Busy|Executed Ipc Active|Warp Cycles Per Issued" $OUT/details.txt | head -12
