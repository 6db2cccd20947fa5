#!/usr/bin/env bash
# Device session for issue 16 (start-up): the cold NVRTC compile and the fit time of this
# tree's templates, against a baseline tree in .dbg/base when there is one (the same program with
# earlier templates: `git archive REV templates models | tar -x -C .dbg/base` and bin/dimoc copied
# there), on one GPU, for ball & 2 sticks (LM+MCMC) and NODDI-Watson (LM; a grid), 200,000 voxels
# each; then the same fits again with the cache warm.
set -u
export CUDA_CACHE_DISABLE=1  # the driver's cache would make every compile after the first warm
w=/tmp/dc4; mkdir -p $w
trees=new
[ -d .dbg/base ] && cp -r .dbg/base /tmp/base && trees="base new"
D=bin/dimoc
$D scheme --shells 5x0,50x1000,50x2000 --bvals $w/bvals --bvecs $w/bvecs
$D simulate ball_2_sticks --bvals $w/bvals --bvecs $w/bvecs --voxels 200000 --noise rician --snr 30 \
    --params S0=1000,d=1.5e-3,f1=0.4,th1=0.5,ph1=1,f2=0.2,th2=1.4,ph2=2.5 --seed 1 --out $w/b2s.nii.gz
$D simulate noddi_watson --bvals $w/bvals --bvecs $w/bvecs --voxels 200000 --noise rician --snr 30 \
    --params S0=1000,fintra=0.5,fiso=0.1,kappa=4,th=0.5,ph=1 --seed 1 --out $w/nw.nii.gz
row() { # label dimoc model data nvrtc-options method... (KEEP_CACHE=1: the cache left warm)
    local label=$1 bin=$2 model=$3 data=$4 opt=$5; shift 5
    [ "${KEEP_CACHE:-0}" = 1 ] || rm -rf $w/cache
    rm -rf $w/o
    local t0=$(date +%s.%N)
    XDG_CACHE_HOME=$w/cache DIMOC_NVRTC_OPTIONS="$opt" $bin fit $model --data $data --bvals $w/bvals \
        --bvecs $w/bvecs --device gpu --out $w/o --quiet "$@" >$w/log 2>&1 || tail -2 $w/log
    local t1=$(date +%s.%N)
    python3 - "$label" "$w/o/provenance.json" "$t0" "$t1" <<'PY'
import json, sys
try:
    t = json.load(open(sys.argv[2]))["timings_seconds"]
    print(f"{sys.argv[1]:<30} " + "  ".join(f"{k} {t[k]:6.2f}" for k in
          ("compile", "load", "fit", "write") if k in t) + f"  whole {float(sys.argv[4]) - float(sys.argv[3]):6.2f}")
except Exception as e:
    print(f"{sys.argv[1]:<30} failed: {e}")
PY
}
for tree in $trees; do
    bin=$D; [ $tree = base ] && bin=/tmp/base/bin/dimoc
    row "$tree b2s lm,mcmc" $bin ball_2_sticks $w/b2s.nii.gz "" --method lm,mcmc
    row "$tree nw lm" $bin noddi_watson $w/nw.nii.gz "" --method lm
done
row "new b2s lm,mcmc only-6" $D ball_2_sticks $w/b2s.nii.gz "-DDM_COMPILED_METHODS=6" --method lm,mcmc
row "new nw lm only-2" $D noddi_watson $w/nw.nii.gz "-DDM_COMPILED_METHODS=2" --method lm
row "new nw grid only-1" $D noddi_watson $w/nw.nii.gz "-DDM_COMPILED_METHODS=1" --method grid \
    --grid fiso=0,0.1,0.2,0.35,0.6,1 --grid fintra=0.1:0.1:0.9 --grid kappa=0.5,1,2,4,8,16,32
[ -d /tmp/base ] && row "base nw grid" /tmp/base/bin/dimoc noddi_watson $w/nw.nii.gz "" --method grid \
    --grid fiso=0,0.1,0.2,0.35,0.6,1 --grid fintra=0.1:0.1:0.9 --grid kappa=0.5,1,2,4,8,16,32
# warm: the cache filled by a first run, then timed
export KEEP_CACHE=1
row "new b2s lm,mcmc (fill)" $D ball_2_sticks $w/b2s.nii.gz "" --method lm,mcmc >/dev/null
row "new b2s lm,mcmc warm" $D ball_2_sticks $w/b2s.nii.gz "" --method lm,mcmc
row "new nw lm (fill)" $D noddi_watson $w/nw.nii.gz "" --method lm >/dev/null
row "new nw lm warm" $D noddi_watson $w/nw.nii.gz "" --method lm
