# The command line every pipeline script shares (sourced, not run): `pipeline_flags "$@"` reads
# --data --mask --bvals --bvecs --out into $data $mask $bvals $bvecs $out, hands each other
# word to the script's own `own_flag` function (which sets `taken` to the number of words it
# used, 0 when the word is not one of its flags), and collects the rest in the array fitopts,
# the options passed on to every `dimoc fit` of the cascade.  Without the five inputs it
# prints the script's usage line and exits 2.  It also sets $dimoc, the program to run.
pipeline_flags() {
    data= mask= bvals= bvecs= out=
    fitopts=()
    while [ $# -gt 0 ]; do
        case $1 in
        --data) data=$2; shift 2 ;;
        --mask) mask=$2; shift 2 ;;
        --bvals) bvals=$2; shift 2 ;;
        --bvecs) bvecs=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *)
            taken=0
            own_flag "$@"
            if [ "$taken" -gt 0 ]; then shift "$taken"; else fitopts+=("$1"); shift; fi ;;
        esac
    done
    if [ -z "$data" ] || [ -z "$mask" ] || [ -z "$bvals" ] || [ -z "$bvecs" ] || [ -z "$out" ]; then
        sed -n 's/^# usage: //p' "$0" >&2
        exit 2
    fi
    dimoc=${DIMOC:-dimoc}
}
