#!/usr/bin/env bash
# Every GPU test and every benchmark table of dimoc, from a clone, on a machine with an NVIDIA GPU
# and driver: builds bin/dimoc, runs `make test-gpu` (tests/run.sh --gpu), then each bench/
# program that prints a GPU table, one log per step in the logs folder, and ends with a summary.
#
#   scripts/gpu-check.sh [--logs DIR] [--only PARTS] [--quick] [--tests PATTERN] [--work DIR]
#                        [--without-peers] [--no-build]
#
#   --logs DIR        where the logs go (default gpu-check-logs/ in the clone): build.log,
#                     env.txt (commit, GPUs, cores, peers found), tests.log, bench-NAME.log,
#                     summary.txt
#   --only PARTS      a comma list of: tests, fit, pipeline, track, csd, commit, part (default:
#                     all).  fit: bench/bench_fit.py (ball & 2 sticks LM+MCMC, GPU against the
#                     CPU backend); pipeline: bench_pipeline.py (NODDI-Watson cascade); track:
#                     bench_track.py (probabilistic tracking, and the FOD case against MRtrix's
#                     tckgen); csd: bench_csd.py (against MRtrix's dwi2fod); commit:
#                     bench_commit.py (against dmri-commit); part: bench_part.py (--part K/N and
#                     dimoc merge against one run)
#   --quick           smaller cases where a bench has size options (minutes, not the tables of
#                     docs/performance.md)
#   --tests PATTERN   only the GPU tests whose file name contains PATTERN
#   --work DIR        the benches' data and outputs under DIR/NAME (default: each bench's own)
#   --without-peers   run csd and commit without their peer columns when the peer is missing
#                     (default: skip that bench, with the reason)
#   --no-build        use bin/dimoc as it is
#
# A bench whose peer is missing is skipped with a one-line reason: MRtrix 3 (dwi2fod for csd,
# tckgen for track's FOD case; Debian's mrtrix3, on PATH) and dmri-commit for commit (importable
# by $PYTHON; scripts/install-deps.sh installs both).
#
# Environment:
#   CUDA_HOME      the CUDA toolkit, where dimoc finds NVRTC (default /usr/local/cuda)
#   PYTHON         the interpreter of the tests and benches (default /usr/bin/python3); it needs
#                  numpy, scipy and nibabel (scripts/install-deps.sh, or DIMOC_WHEELS)
#   DIMOC_WHEELS   optional, for a machine without a package index: a folder of .whl files
#                  (nibabel, say) installed first with `pip install --no-index --no-deps` into a
#                  private folder, DIMOC_SITE (default ${TMPDIR:-/tmp}/dimoc-site-UID), which
#                  is put first on PYTHONPATH; nothing is installed into the system
#
# Exit status: 0 when every test passed and every bench that ran finished (skipped ones
# included); 1 when a GPU test or a bench failed; 2 on a usage or setup error (no GPU, a Python
# without numpy, scipy or nibabel, the build).
set -u
set -o pipefail

usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }
die() { echo "gpu-check: $*" >&2; exit 2; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
logs=$ROOT/gpu-check-logs
only=tests,fit,pipeline,track,csd,commit,part
quick=0 build=1 without_peers=0 pattern="" work=""
while [ $# -gt 0 ]; do
    case "$1" in
    --logs) [ $# -ge 2 ] || die "--logs needs a folder"; logs=$2; shift ;;
    --only) [ $# -ge 2 ] || die "--only needs a list"; only=$2; shift ;;
    --tests) [ $# -ge 2 ] || die "--tests needs a pattern"; pattern=$2; shift ;;
    --work) [ $# -ge 2 ] || die "--work needs a folder"; work=$2; shift ;;
    --quick) quick=1 ;;
    --without-peers) without_peers=1 ;;
    --no-build) build=0 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see scripts/gpu-check.sh --help)" ;;
    esac
    shift
done
for p in ${only//,/ }; do
    case "$p" in tests | fit | pipeline | track | csd | commit | part) ;;
    *) die "--only: unknown part '$p' (tests, fit, pipeline, track, csd, commit, part)" ;;
    esac
done
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
# Folders given relative to where the script was started from, before moving to the clone.
case "$logs" in /*) ;; *) logs=$PWD/$logs ;; esac
case "$work" in /* | "") ;; *) work=$PWD/$work ;; esac
cd "$ROOT" || die "cannot enter $ROOT"

export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -z "${PYTHON:-}" ]; then
    PYTHON=/usr/bin/python3
    [ -x "$PYTHON" ] || PYTHON=$(command -v python3) || die "no python3 found (set PYTHON)"
fi
export PYTHON PYTHONUNBUFFERED=1

# Optional: Python packages from a folder of wheels, into a private folder first on PYTHONPATH.
if [ -n "${DIMOC_WHEELS:-}" ]; then
    site=${DIMOC_SITE:-${TMPDIR:-/tmp}/dimoc-site-$(id -u)}
    ls "$DIMOC_WHEELS"/*.whl >/dev/null 2>&1 || die "DIMOC_WHEELS=$DIMOC_WHEELS holds no .whl file"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" \
        "$DIMOC_WHEELS"/*.whl || die "pip could not install the wheels of $DIMOC_WHEELS"
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi

# The GPU and the toolkit.
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>&1) || die "nvidia-smi -L failed: no usable NVIDIA GPU or driver ($gpus)"
elif ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    gpus="(nvidia-smi not found; the driver's libcuda.so.1 is installed)"
else
    die "no NVIDIA driver here (neither nvidia-smi nor libcuda.so.1)"
fi
echo "$gpus"
if ! ls "$CUDA_HOME"/lib64/libnvrtc.so* >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q libnvrtc; then
    echo "gpu-check: warning: no libnvrtc in $CUDA_HOME/lib64 or the loader's paths: dimoc cannot" \
        "compile for the GPU (set CUDA_HOME to the CUDA toolkit)" >&2
fi
pyerr=$("$PYTHON" -c 'import numpy, scipy, nibabel' 2>&1) ||
    die "$PYTHON cannot import numpy, scipy and nibabel, which the tests and benches need" \
        "(${pyerr##*$'\n'}): scripts/install-deps.sh installs them, or set DIMOC_WHEELS"

mkdir -p "$logs" || die "cannot make $logs"
if [ $build = 1 ]; then
    echo "== build: make -j$(nproc)"
    make -j"$(nproc)" >"$logs/build.log" 2>&1 || {
        tail -n 20 "$logs/build.log" >&2
        die "the build failed (log: $logs/build.log; missing packages: make deps)"
    }
fi
[ -x bin/dimoc ] || die "no bin/dimoc (run without --no-build)"

# Peers.
have_tckgen=0 have_dwi2fod=0 have_commit=0
command -v tckgen >/dev/null 2>&1 && have_tckgen=1
command -v dwi2fod >/dev/null 2>&1 && have_dwi2fod=1
"$PYTHON" -c 'import commit, amico' >/dev/null 2>&1 && have_commit=1
{
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo ' (with local changes)')"
    echo "gpus: $gpus"
    echo "host: $(nproc) cores, $(uname -sr)"
    echo "CUDA_HOME: $CUDA_HOME"
    echo "python: $PYTHON ($("$PYTHON" --version 2>&1))"
    echo "tckgen: $([ $have_tckgen = 1 ] && command -v tckgen || echo missing)"
    echo "dwi2fod: $([ $have_dwi2fod = 1 ] && command -v dwi2fod || echo missing)"
    echo "dmri-commit: $([ $have_commit = 1 ] && echo importable || echo missing)"
} >"$logs/env.txt"

summary=() status=0
note() { summary+=("$(printf '%-13s %s' "$1" "$2")"); }

# The GPU tests.
if want tests; then
    # tests/run.sh --gpu is what `make test-gpu` runs, without make's look at the build (the
    # build step above made it, or --no-build takes bin/dimoc as it is)
    echo "== tests: tests/run.sh --gpu${pattern:+ (only $pattern)}"
    t0=$SECONDS
    bash tests/run.sh --gpu ${pattern:+"$pattern"} 2>&1 | tee "$logs/tests.log"
    line=$(grep -oE '^[0-9]+ passed, [0-9]+ failed' "$logs/tests.log" | tail -n 1)
    if [ -z "$line" ]; then
        note tests "no summary line: the test run stopped early (tests.log)"; status=1
    else
        nfail=${line#*, }; nfail=${nfail%% *}
        [ "$nfail" -eq 0 ] || status=1
        note tests "$line ($((SECONDS - t0)) s)"
    fi
fi

# bench NAME LOG -- command...: runs one bench into its log and notes how it ended.
bench() {
    local name=$1 log=$logs/$2
    shift 3
    echo "== $name: $*"
    local t0=$SECONDS
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        note "$name" "ran ($((SECONDS - t0)) s, $(basename "$log"))"
    else
        note "$name" "FAILED (exit $rc, $(basename "$log"))"; status=1
    fi
}
skip() { echo "== $1: skipped: $2"; note "$1" "skipped: $2"; }
wk() { WK=(); [ -z "$work" ] || WK=(--work "$work/$1"); }  # a bench's --work, in WK

if want fit; then
    wk fit
    size=(); [ $quick = 1 ] && size=(--voxels 20000 --cpu-voxels 1000)
    bench fit bench-fit.log -- "$PYTHON" bench/bench_fit.py "${size[@]}" "${WK[@]}"
fi
if want pipeline; then
    wk pipeline
    size=(); [ $quick = 1 ] && size=(--voxels 20000 --cpu-voxels 500)
    bench pipeline bench-pipeline.log -- "$PYTHON" bench/bench_pipeline.py "${size[@]}" "${WK[@]}"
fi
if want track; then
    wk track
    size=(); [ $quick = 1 ] && size=(--seeds 10000 --m1-seeds 2000 --cpu1-seeds 100 --cpu-seeds 1000)
    bench track bench-track.log -- "$PYTHON" bench/bench_track.py --cases whole,connectome \
        "${size[@]}" "${WK[@]}"
    if [ $have_tckgen = 1 ]; then
        size=()
        [ $quick = 1 ] && size=(--fod-select 100000 --fod-select-ifod1 20000 --fod-cpu-select 2000
            --tckgen1-select 200)
        bench track-fod bench-track-fod.log -- "$PYTHON" bench/bench_track.py --cases fod \
            "${size[@]}" "${WK[@]}"
    else
        skip track-fod "MRtrix's tckgen not found on PATH (Debian: mrtrix3)"
    fi
fi
if want csd; then
    wk csd
    size=(); [ $quick = 1 ] && size=(--quick)
    peer=()
    if [ $have_dwi2fod = 0 ] && [ $without_peers = 1 ]; then peer=(--no-peer); fi
    if [ $have_dwi2fod = 1 ] || [ $without_peers = 1 ]; then
        bench csd bench-csd.log -- "$PYTHON" bench/bench_csd.py "${size[@]}" "${peer[@]}" "${WK[@]}"
        [ $have_dwi2fod = 1 ] || note "" "(csd without its peer: MRtrix's dwi2fod not found)"
    else
        skip csd "MRtrix's dwi2fod not found on PATH (Debian: mrtrix3)"
    fi
fi
if want commit; then
    wk commit
    size=(); [ $quick = 1 ] && size=(--small)
    peer=()
    if [ $have_commit = 0 ] && [ $without_peers = 1 ]; then peer=(--skip-commit); fi
    if [ $have_commit = 1 ] || [ $without_peers = 1 ]; then
        bench commit bench-commit.log -- "$PYTHON" bench/bench_commit.py --devices cpu,gpu \
            "${size[@]}" "${peer[@]}" "${WK[@]}"
        [ $have_commit = 1 ] || note "" "(commit without its peer: dmri-commit not importable)"
    else
        skip commit "dmri-commit not importable by $PYTHON (scripts/install-deps.sh)"
    fi
fi
if want part; then
    wk part
    size=(); [ $quick = 1 ] && size=(--grid "52,52,36")
    bench part bench-part.log -- "$PYTHON" bench/bench_part.py "${size[@]}" "${WK[@]}"
fi

{
    echo
    echo "== gpu-check summary (logs: $logs)"
    for s in "${summary[@]}"; do echo "$s"; done
} | tee "$logs/summary.txt"
exit $status
