# The command line every pipeline script shares (sourced, not run): `pipeline_flags "$@"` reads
# --data --mask --bvals --bvecs --grad --format --out into $data $mask $bvals $bvecs $grad
# $format $out, hands each other word to the script's own `own_flag` function (which sets
# `taken` to the number of words it used, 0 when the word is not one of its flags), and collects
# the rest in the array fitopts, the options passed on to every `dimoc fit` of the cascade.
# The gradient table is --bvals and --bvecs, or --grad, or a .mif's own dw_scheme: the array
# gradopts holds the flags that name it, fmtopts the --format that every stage writes its maps
# in, and $ext those maps' ending (.nii.gz, .nii, .mif or .mif.gz).  Without --data, --mask,
# --out and a table it prints the script's usage line and exits 2.  It also sets $dimoc, the
# program to run.
#
# A script runs its stages as `$dimoc CMD ...` and hands the plain shell work that follows
# them (links, pictures, and any dimoc command whose output the script itself reads, such as
# `$dimoc select ... | tee`) to `pipeline_finish FUNCTION`.  `dimoc pipeline NAME --slurm` runs
# the script in phases (DIMOC_PIPELINE_PHASE, set by cli/cmd_pipeline.c; the real program in
# DIMOC_PROGRAM):
#   (none)  every command runs, then FUNCTION: the script as it reads;
#   plan    `$dimoc CMD ...` runs nothing: it appends the command to the file $DIMOC_PLAN, one
#           line "stage NAME CMD OUT PRE POST" (tab-separated; OUT the value of --out, PRE and
#           POST the words before and after "--out OUT", each printf %q-quoted); a pipeline
#           that another one runs (noddi_bingham runs noddi_watson) records its FUNCTION as a
#           line "finish NAME DEPTH SCRIPT ARGS", a job of its own;
#   finish  the stages' commands are no-ops; FUNCTION runs, with the real program, in the
#           script at depth DIMOC_FINISH_DEPTH only (0: the pipeline named on the command line,
#           1: one it runs, ...).
# `dimoc bids` (runtime/study/) runs the plan's commands in its own process and sets
# DIMOC_BIDS=1 for both phases, which changes two things:
#   - a cascade is planned as ONE `dimoc fit ... --then ...` command, as the script runs it
#     (its stages share the inputs' read and each stage's maps are written while the next
#     fits), not as separate commands chained with --init-from (a job each under --slurm);
#   - `picture` draws nothing: dimoc bids draws the final maps' pictures into its own figures/
#     folder, and the pipeline's PNGs would be the same pictures drawn twice.
# dimoc bids plans a pipeline once for all its runs (the same options) and puts each run's
# paths in place of the first run's, so a script's plan must depend on its words only, not on
# what its files hold (no command whose output the script reads before pipeline_finish, no
# test of a file's contents); a plan that differs from a second run's own is planned anew for
# every run.
pipeline_flags() {
    _pipeline_args=("$@")
    _pipeline_depth=${DIMOC_PIPELINE_DEPTH:-0}
    export DIMOC_PIPELINE_DEPTH=$((_pipeline_depth + 1))
    data= mask= bvals= bvecs= grad= format= out=
    fitopts=()
    while [ $# -gt 0 ]; do
        case $1 in
        --data) data=$2; shift 2 ;;
        --mask) mask=$2; shift 2 ;;
        --bvals) bvals=$2; shift 2 ;;
        --bvecs) bvecs=$2; shift 2 ;;
        --grad) grad=$2; shift 2 ;;
        --format) format=$2; shift 2 ;;
        --format=*) format=${1#--format=}; shift ;;
        --out) out=$2; shift 2 ;;
        *)
            taken=0
            own_flag "$@"
            if [ "$taken" -gt 0 ]; then shift "$taken"; else fitopts+=("$1"); shift; fi ;;
        esac
    done
    gradopts=()
    if [ -n "$bvals" ] && [ -n "$bvecs" ]; then
        gradopts=(--bvals "$bvals" --bvecs "$bvecs")
    elif [ -n "$grad" ] && [ -z "$bvals$bvecs" ]; then
        gradopts=(--grad "$grad")
    fi
    local table=${#gradopts[@]}
    case $data in *.mif | *.mif.gz | *.MIF | *.MIF.GZ) [ -n "$bvals$bvecs" ] || table=1 ;; esac
    if [ -z "$data" ] || [ -z "$mask" ] || [ "$table" -eq 0 ] || [ -z "$out" ]; then
        sed -n 's/^# usage: //p' "$0" >&2
        exit 2
    fi
    fmtopts=() ext=.nii.gz
    if [ -n "$format" ]; then
        fmtopts=(--format "$format")
        local word
        for word in ${format//,/ }; do
            case $word in nii.gz | nii | mif | mif.gz) ext=.$word ;; esac
        done
    fi
    case ${DIMOC_PIPELINE_PHASE:-} in
    plan) dimoc=_pipeline_plan ;;
    finish) dimoc=_pipeline_skip ;;
    *) dimoc=${DIMOC:-dimoc} ;;
    esac
}

# Runs the script's closing shell work, or records it (see above).
pipeline_finish() { # function
    case ${DIMOC_PIPELINE_PHASE:-} in
    plan)
        if [ "$_pipeline_depth" -gt 0 ]; then
            local script q
            script=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
            q=$(printf ' %q' "${_pipeline_args[@]}")
            printf 'finish\t%s\t%s\t%q\t%s\n' "$(basename "$0" .sh)" "$_pipeline_depth" \
                "$script" "${q# }" >>"$DIMOC_PLAN"
        fi ;;
    finish)
        if [ "$_pipeline_depth" -eq "${DIMOC_FINISH_DEPTH:-0}" ]; then
            dimoc=$DIMOC_PROGRAM
            "$1"
        fi ;;
    *) "$1" ;;
    esac
}

_pipeline_skip() { :; }

# `$dimoc CMD ... --out OUT ...` in the plan phase: one line of the plan.
_pipeline_plan() {
    local pre=() post=() o="" seen=0 name
    while [ $# -gt 0 ]; do
        if [ $seen -eq 0 ] && [ "$1" = --out ] && [ $# -gt 1 ]; then
            o=$2; seen=1; shift 2; continue
        fi
        if [ $seen -eq 0 ] && [ "${1#--out=}" != "$1" ]; then
            o=${1#--out=}; seen=1; shift; continue
        fi
        if [ $seen -eq 0 ]; then pre+=("$1"); else post+=("$1"); fi
        shift
    done
    name=${o%/}; name=${name##*/}; name=${name%%.*}
    [ -n "$name" ] || name=${pre[0]}
    local qp qa
    qp=$(printf ' %q' "${pre[@]}"); qa=""
    [ ${#post[@]} -eq 0 ] || qa=$(printf ' %q' "${post[@]}")
    printf 'stage\t%s\t%s\t%s\t%s\t%s\n' "$(printf %s "$name" | tr -c 'A-Za-z0-9_-' _)" \
        "${pre[0]}" "$([ -n "$o" ] && printf %q "$o")" "${qp# }" "${qa# }" >>"$DIMOC_PLAN"
}

# --mcmc, the flag of a cascade whose last stage may sample: `own_flag() { mcmc_flag "$1"; }`;
# $last is that stage's --method.
last=(--method lm)
mcmc_flag() {
    if [ "$1" = --mcmc ]; then
        last=(--method lm,mcmc)
        taken=1
    fi
}

# The stages of a cascade that fits MODEL (`pipeline_stages MODEL`, after pipeline_flags): $stages
# (OUTDIR/dimoc, made), $common (the four data flags), and `fit STAGE ARGS...`, which runs
# `dimoc fit MODEL` into $stages/STAGE with ARGS and the user's fit options.
pipeline_stages() { # model
    _pipeline_model=$1
    stages=$out/dimoc
    mkdir -p "$stages"
    common=(--data "$data" --mask "$mask" "${gradopts[@]}" "${fmtopts[@]}")
}
fit() { # stage-name, dimoc fit arguments...
    local name=$1
    shift
    echo "$(basename "$0"): $name"
    $dimoc fit "$_pipeline_model" "${common[@]}" --out "$stages/$name" "$@" "${fitopts[@]}"
}

# `cascade STAGE ARGS... --then STAGE ARGS... [--then ...]`: the stages of a cascade of
# MODEL's fits (cascade_fit MODEL ...: of another model), each into $stages/STAGE, each after
# the first from the one before it, run as ONE `dimoc fit ... --then ...` (the inputs read and
# the GPU opened once; the maps are those of separate commands with --init-from, byte for
# byte).  The user's fit options go to the first stage, their per-stage ones (those `dimoc fit`
# takes after --then) to every stage.  Under --slurm (the plan phase) the stages stay separate
# commands chained with --init-from: one job each, as before.
# Under dimoc bids (DIMOC_BIDS=1) the plan keeps the cascade one command too.
cascade() { cascade_fit "$_pipeline_model" "$@"; }
cascade_fit() { # model, stage-name, arguments... [--then stage-name arguments...]...
    local model=$1 name prev="" argv=() names=() args chain whole=1
    shift
    case ${DIMOC_PIPELINE_PHASE:-} in
    plan) [ -n "${DIMOC_BIDS:-}" ] || whole=0 ;;
    finish) whole=0 ;; # nothing runs: the stages' messages only
    esac
    [ $whole -eq 0 ] || _stage_fitopts
    while [ $# -gt 0 ]; do
        name=$1
        shift
        args=()
        while [ $# -gt 0 ] && [ "$1" != --then ]; do args+=("$1"); shift; done
        [ $# -eq 0 ] || shift
        if [ $whole -eq 0 ]; then
            chain=()
            [ -z "$prev" ] || chain=(--init-from "$stages/$prev")
            echo "$(basename "$0"): $name"
            $dimoc fit "$model" "${common[@]}" --out "$stages/$name" "${args[@]}" "${chain[@]}" \
                "${fitopts[@]}"
        elif [ -z "$prev" ]; then
            argv=("${common[@]}" --out "$stages/$name" "${args[@]}" "${fitopts[@]}")
        else
            argv+=(--then --out "$stages/$name" "${args[@]}" "${_stage_opts[@]}")
        fi
        names+=("$name")
        prev=$name
    done
    if [ ${#argv[@]} -gt 0 ]; then
        echo "$(basename "$0"): ${names[*]}"
        $dimoc fit "$model" "${argv[@]}"
    fi
}
# The per-stage options among the user's fit options, into _stage_opts.  Which options those
# are, and which of them take a value, `dimoc fit --stage-options` says (one line each).
_stage_fitopts() {
    _stage_opts=()
    local valued=" " flags=" " line i=0 w program=$dimoc
    [ "${DIMOC_PIPELINE_PHASE:-}" != plan ] || program=$DIMOC_PROGRAM # $dimoc only records
    while read -r line; do
        case $line in
        *" "*) valued+="${line%% *} " ;;
        *) flags+="$line " ;;
        esac
    done < <("$program" fit --stage-options)
    while [ $i -lt ${#fitopts[@]} ]; do
        w=${fitopts[i]}
        if [[ $flags == *" $w "* || $valued == *" ${w%%=*} "* && $w == *=* ]]; then
            _stage_opts+=("$w")
        elif [[ $valued == *" $w "* ]]; then
            _stage_opts+=("$w" "${fitopts[i + 1]}")
            i=$((i + 1))
        fi
        i=$((i + 1))
    done
}

# `in_background CMD...` runs CMD in the background (the pictures of a finish function, a step
# beside a stage; in turn while a SLURM run is planned);
# `wait_background` waits for every one and fails when any failed.
_background=()
in_background() {
    if [ "${DIMOC_PIPELINE_PHASE:-}" = plan ]; then # a SLURM plan's stages keep their order
        "$@"
        return
    fi
    "$@" &
    _background+=($!)
}
wait_background() {
    local pid rc=0
    for pid in "${_background[@]}"; do wait "$pid" || rc=$?; done
    _background=()
    return $rc
}

# `picture ARGS...`: `dimoc view ARGS...` in the background (in_background), a quick-look PNG
# of the script's own; nothing under dimoc bids (DIMOC_BIDS=1), which draws its own.
picture() {
    [ -z "${DIMOC_BIDS:-}" ] || return 0
    in_background $dimoc view "$@"
}

# link FROM TO: a hard link, or a copy where links are impossible (another file system).
link() { ln -f "$1" "$2" 2>/dev/null || cp -f "$1" "$2"; }
# link_maps FROM_DIR TO_DIR NAME...: NAME$ext of FROM_DIR linked into TO_DIR, where it exists
# (one `ln` for all of them: a process each took a few ms of the pipeline's last step).
link_maps() {
    local from=$1 to=$2 m files=()
    shift 2
    for m in "$@"; do
        if [ -f "$from/$m$ext" ]; then files+=("$from/$m$ext"); fi
    done
    [ ${#files[@]} -gt 0 ] || return 0
    ln -f "${files[@]}" "$to/" 2>/dev/null || cp -f "${files[@]}" "$to/"
}
