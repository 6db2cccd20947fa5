# `make install PREFIX=..` gives a program that finds its models and templates beside itself.
source "$(dirname "$0")/../lib.sh"
prefix="$T/prefix"
if make -s -C "$ROOT" install PREFIX="$prefix" >"$T/install.log" 2>&1; then pass install; else fail install "$(tail -3 "$T/install.log")"; fi
inst="$prefix/bin/dimoc"
cd "$T"
# No hint from the source tree: the installed program must find its own share/dimoc.
unset DIMOC_DATA_DIR
out=$("$inst" info 2>&1)
case "$out" in *ball_2_sticks*exp_decay*|*exp_decay*ball_2_sticks*) pass installed-info-lists-models ;; *) fail installed-info-lists-models "$out" ;; esac
"$inst" scheme --shells 2x0,12x1000 --bvals bvals --bvecs bvecs >/dev/null 2>&1
"$inst" simulate ball_1_stick --bvals bvals --bvecs bvecs --voxels 3 \
    --params S0=1000,d=1.5e-3,f1=0.5,th1=1,ph1=2 --out sim.nii.gz >/dev/null 2>&1
if XDG_CACHE_HOME="$T/cache" "$inst" fit ball_1_stick --data sim.nii.gz --bvals bvals --bvecs bvecs \
        --out fit --quiet 2>"$T/fit.log" && [ -s fit/f1.nii.gz ]; then
    pass installed-fit-runs
else
    fail installed-fit-runs "$(cat "$T/fit.log")"
fi
[ -f "$prefix/share/dimoc/templates/fit/lm.h" ] \
    && [ -f "$prefix/share/dimoc/templates/fodtrack/gpu_fodtrack.cu" ] \
    && [ -f "$prefix/share/doc/dimoc/model-language.md" ] \
    && pass installed-files || fail installed-files "templates or docs missing"
case "$("$inst" help pipeline 2>&1)" in *bedpostx*model_selection*) pass installed-pipelines ;;
    *) fail installed-pipelines "$("$inst" help pipeline 2>&1 | tail -3)" ;; esac
# WARM=1: the installed program compiles every shipped model's fitters into the installer's cache
# (the test run's shared one: what is there already is kept, the rest compiled), both precisions.
wprefix="$T/prefix-warm"
cache=${XDG_CACHE_HOME:-$T/cache-install}
if XDG_CACHE_HOME="$cache" make -s -C "$ROOT" install PREFIX="$wprefix" WARM=1 \
        >"$T/install-warm.log" 2>&1; then
    lacking=""
    for m in "$ROOT"/models/*.model; do
        m=$(basename "$m" .model)
        for r in float double; do
            ls "$cache/dimoc/$m-$r-"*.so >/dev/null 2>&1 || lacking+=" $m-$r"
        done
    done
    [ -z "$lacking" ] && pass install-warm || fail install-warm "no fitter for$lacking"
else
    fail install-warm "$(tail -3 "$T/install-warm.log")"
fi

