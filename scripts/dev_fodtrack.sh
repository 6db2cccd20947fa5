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
