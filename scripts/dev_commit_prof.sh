#!/usr/bin/env bash
# Device session for issue 15 (the operator products' bandwidth): bench/bench_commit.py's
# whole-brain case on the GPU without the peer (the stage times after a change), then Nsight
# Compute on one `dimoc commit --device gpu` of the same case: each product kernel's time, DRAM
# bytes and its share of the peak bandwidth (where ncu is installed).
set -u
. "$(dirname "$0")/device_env.sh"
W=/tmp/bench_commit
[ "${SKIP_BENCH:-0}" = 1 ] || $PYTHON bench/bench_commit.py --devices gpu --skip-commit --work $W 2>&1 | tail -12
case=$(ls -d $W/case_* | head -1)
tck=$(ls $case/tracks_*.tck | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -n "$NCU" ] || { echo "no ncu here"; exit 0; }
rm -rf /tmp/prof_out
"$NCU" --kernel-name regex:"dm_commit_(runs|ax|aty_voxel|aty_streamline|prox)_kernel" \
    --launch-skip 10 --launch-count 10 --csv --metrics \
gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
    bin/dimoc commit --tractogram "$tck" --data $case/dwi.nii --mask $case/wm.nii.gz \
    --bvals $case/bvals --bvecs $case/bvecs --peaks $case/peaks.nii.gz --out /tmp/prof_out \
    --d-par 1.7e-3 --d-perp 0.51e-3 --d-iso 1.7e-3,3.0e-3 --ndirs 500 --device gpu >$OUT/ncu.csv 2>$OUT/ncu.err
python3 - $OUT/ncu.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; rows = rows[1:]
ki, mi, vi, ui = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("Metric Unit")
agg = collections.defaultdict(dict)
for r in rows:
    agg[(r[h.index("ID")], r[ki])][r[mi]] = (r[vi], r[ui])
for (i, k), m in sorted(agg.items(), key=lambda t: int(t[0][0])):
    print(i, k[:34], "  ".join(f"{n.split('__')[1][:22]}={v}{u}" for n, (v, u) in m.items()))
PY
tail -3 $OUT/ncu.err
