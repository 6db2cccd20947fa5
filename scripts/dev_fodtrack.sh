# The device session of the FOD tracking work: CPU/GPU parity in double, then timings.
# Carry: bin, .dev (fod.nii.gz, mask.nii.gz), .peer (tckgen, tckmap and their libraries).
set -u
export PATH=$PWD/.peer/mrtrix/bin:$PATH LD_LIBRARY_PATH=$PWD/.peer/libs:$PWD/.peer/mrtrix/lib
D=bin/dimoc
F=.dev/fod.nii.gz
M=.dev/mask.nii.gz
nproc
same_tck() { # the data of two .tck files (after their headers) are the same bytes
    python3 - "$1" "$2" <<'PY'
import sys, re
def data(p):
    b = open(p, 'rb').read()
    off = int(re.search(rb'file: \. (\d+)', b).group(1))
    cnt = re.search(rb'\ncount: (\d+)', b).group(1)
    return int(cnt), b[off:]
(ca, a), (cb, b) = data(sys.argv[1]), data(sys.argv[2])
print('counts', ca, cb, 'identical' if a == b else 'DIFFERENT (%d vs %d bytes)' % (len(a), len(b)))
PY
}
case "${1:-parity,time}" in *parity*)
for alg in ifod2 ifod1 sd_stream; do
    for prec in double float; do
        $D track --fod $F --seed $M --out /tmp/c_$alg --algorithm $alg --select 3000 --precision $prec --device cpu --tdi tdi.nii.gz --tdi-voxel 0.7 2>&1 | tail -1
        $D track --fod $F --seed $M --out /tmp/g_$alg --algorithm $alg --select 3000 --precision $prec --device gpu --tdi tdi.nii.gz --tdi-voxel 0.7 2>&1 | tail -1
        echo "$alg $prec:"; same_tck /tmp/c_$alg/tracks.tck /tmp/g_$alg/tracks.tck
        cmp /tmp/c_$alg/tdi.nii.gz /tmp/g_$alg/tdi.nii.gz && echo "tdi identical"
    done
done ;;
esac
case "${1:-parity,time}" in *gputest*)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
    PYTHONPATH=/tmp/site PYTHON=python3 bash tests/run.sh --gpu ${GPUTEST:-fodtrack} ;;
esac
case "${1:-parity,time}" in *one*) # the issue's case: 1M iFOD2 streamlines, the whole command
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
    PYTHONPATH=/tmp/site python3 -c "import sys; sys.path.insert(0,'bench'); import bench_track as b; b.fod_image('/tmp/fb')"
    for alg in ${ONE_ALGS:-ifod2}; do
        for out in /tmp/one /dev/shm/one; do # on disk, and on tmpfs (the disk's rate apart)
            /usr/bin/time -f "$alg ${ONE_N:-1000000} whole command, out $out: %e s" $D track --fod /tmp/fb/wm_fod.nii.gz --seed /tmp/fb/wm.nii.gz --out $out --algorithm $alg --select ${ONE_N:-1000000} --device gpu 2>&1 | tail -1
            grep -E '"seconds_[a-z_]+"' $out/provenance.json | tr -d '\n '; echo
            rm -rf $out
        done
    done ;;
esac
case "${1:-parity,time}" in *profile*)
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
    PYTHONPATH=/tmp/site python3 -c "import sys; sys.path.insert(0,'bench'); import bench_track as b; b.fod_image('/tmp/fb')"
    timeout 300 $NCU --kernel-name dm_fodtrack_kernel --launch-count 1 --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        --metrics smsp__thread_inst_executed_per_inst_executed.ratio,l1tex__t_sector_hit_rate.pct \
        $D track --fod /tmp/fb/wm_fod.nii.gz --seed /tmp/fb/wm.nii.gz --out /tmp/prof --select 50000 --device gpu 2>&1 \
        | grep -E "Registers|Achieved Occupancy|Theoretical Occupancy|Local|Duration|Throughput|Hit|ratio|Stall|Warp Cycles|Block Limit|Eligible|Issued" | head -40 ;;
esac
case "${1:-parity,time}" in *regs*)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
    PYTHONPATH=/tmp/site python3 -c "import sys; sys.path.insert(0,'bench'); import bench_track as b; b.fod_image('/tmp/fb')"
    for alg in ${REG_ALGS:-ifod2 ifod1}; do for r in ${REGS:-0 128 96 72 64}; do
        DIMOC_FT_MAXREG=$r $D track --fod /tmp/fb/wm_fod.nii.gz --seed /tmp/fb/wm.nii.gz --out /tmp/regs --algorithm $alg --select 200000 --device gpu >/dev/null 2>&1
        echo "$alg maxreg $r: $(grep -E '"seconds_(compile|tracing)"' /tmp/regs/provenance.json | tr -d '\n ')"
    done; done ;;
esac
case "${1:-parity,time}" in *bench*)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site timeout 560 python3 bench/bench_track.py --cases fod ${BENCH_ARGS:-} 2>&1 | tail -20 ;;
esac
case "${1:-parity,time}" in *time*)
for alg in ifod2 ifod1; do
    for prec in float double; do
        /usr/bin/time -f "$alg gpu $prec 200k: %e s" $D track --fod $F --seed $M --out /tmp/t_$alg --algorithm $alg --select 200000 --precision $prec --device gpu 2>&1 | tail -2
        grep -E '"seconds_(compile|track|track_kernel|write)"' /tmp/t_$alg/provenance.json | tr -d '\n'; echo
    done
    /usr/bin/time -f "$alg cpu all threads 20k: %e s" $D track --fod $F --seed $M --out /tmp/tc_$alg --algorithm $alg --select 20000 --device cpu 2>&1 | tail -1
    T=iFOD2; [ $alg = ifod1 ] && T=iFOD1
    /usr/bin/time -f "$alg tckgen all threads 20k: %e s" tckgen -quiet -force $F /tmp/tk.tck -algorithm $T -seed_image $M -select 20000 2>&1 | tail -1
done ;;
esac
