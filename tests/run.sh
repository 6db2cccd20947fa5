#!/usr/bin/env bash
# Runs tests in parallel and prints "N passed, N failed".  Each test program reports one line per
# assertion group: "PASS name" or "FAIL name: why".  A program that crashes or exits non-zero
# without reporting counts as one failure.
#   tests/run.sh              CPU tests: tests/unit/*.c, tests/cli/*.sh, tests/py/test_*.py
#   tests/run.sh --gpu        GPU tests: tests/gpu/* (at most four at once unless -j is given)
#   tests/run.sh --peers      the long comparisons with peers: tests/peers/test_*.py
#   tests/run.sh PATTERN...   only the tests whose file name contains one of the PATTERNs
#   -j N                      N tests at once (default: one per core, $TEST_JOBS)
# Each test's output is kept in tests/tmp/log.NAME and printed whole when it ends (its line,
# and for a failure its FAIL lines and the end of its log); the failures are listed again at the
# end.  Tests start longest first, by tests/durations.txt (seconds on a 2-core machine; tests
# not listed start first); `--durations` rewrites that file from this run's times.
# The C unit tests are built by the Makefile (`make tests`, into $TEST_BINDIR, default
# build/tests); `make test` builds them and runs this script.
#
# Sealed from the machine: HOME, the dimoc compile cache and every peer's configuration and
# caches (DIPY's and AMICO's ~/.dipy, MRtrix's ~/.mrtrix.conf, Cython's ~/.pyxbld, matplotlib's)
# live under tests/tmp.  The peers' reference outputs are cached by the hash of their inputs and
# the peer's version (tests/py/peercache.py) in $DIMOC_PEER_CACHE, by default the user's cache
# folder, so that a machine computes each once.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
# Nothing of the caller's settings reaches a test: dimoc's, MRtrix's and OpenMP's variables are
# dropped, but DIMOC_BIN and DIMOC_PEER_CACHE, which choose the program and the peers' cache.
for v in $(compgen -e); do
    case "$v" in
    DIMOC_BIN|DIMOC_PEER_CACHE) ;;
    DIMOC_*|MRTRIX_*|OMP_*|GOMP_*) unset "$v" ;;
    esac
done
export DIMOC="$ROOT/${DIMOC_BIN:-bin/dimoc}" ROOT DIMOC_DATA_DIR="$ROOT"
BINDIR=${TEST_BINDIR:-build/tests}
export TMPROOT="$ROOT/tests/tmp"
export DIMOC_PEER_CACHE=${DIMOC_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dimoc-test-peers}
export HOME="$TMPROOT/home"
export XDG_CACHE_HOME="$TMPROOT/cache" XDG_CONFIG_HOME="$TMPROOT/home/.config"
export MPLCONFIGDIR="$TMPROOT/home/.matplotlib" PYTHONDONTWRITEBYTECODE=1
export PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHONPATH="$ROOT/tests/py${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$TMPROOT" "$HOME" "$DIMOC_PEER_CACHE"

mode=cpu; jobs=${TEST_JOBS:-}; patterns=(); save_durations=0
while [ $# -gt 0 ]; do
    case "$1" in
    --gpu) mode=gpu ;;
    --peers) mode=peers ;;
    --durations) save_durations=1 ;;
    -j) jobs=$2; shift ;;
    -j*) jobs=${1#-j} ;;
    -*) echo "tests/run.sh: unknown option $1" >&2; exit 2 ;;
    *) patterns+=("$1") ;;
    esac
    shift
done
if [ -z "$jobs" ]; then  # GPU tests: four at once share one GPU well (its memory, its engines)
    jobs=$(nproc)
    if [ $mode = gpu ] && [ "$jobs" -gt 4 ]; then jobs=4; fi
fi
case "$jobs" in ''|*[!0-9]*|0) echo "tests/run.sh: -j needs a positive number" >&2; exit 2 ;; esac

case $mode in
gpu) files=$(ls tests/gpu/* 2>/dev/null) ;;
peers) files=$(ls tests/peers/test_*.py 2>/dev/null) ;;
*) files=$(ls tests/unit/*.c tests/cli/*.sh tests/py/test_*.py 2>/dev/null) ;;
esac
selected=()
for t in $files; do
    case "$t" in *.c|*.sh|*.py) ;; *) continue ;; esac  # tests/gpu's .cu sources are compiled by its tests
    keep=$(( ${#patterns[@]} == 0 ))
    for p in "${patterns[@]}"; do case "$t" in *"$p"*) keep=1 ;; esac; done
    [ $keep -eq 1 ] && selected+=("$t")
done

# Longest first: known durations descending, unknown tests (new ones) before them.
order=$(for t in "${selected[@]}"; do
    d=$(awk -v t="$t" '$2 == t { print $1 }' tests/durations.txt 2>/dev/null)
    echo "${d:-100000} $t"
done | sort -k1,1nr -k2 | cut -d' ' -f2)

RESULTS=$(mktemp -d "$TMPROOT/results.XXXXXX")  # this run's own: runs side by side keep apart
LOCK="$RESULTS/.lock"; : >"$LOCK"
# Each test runs in a session of its own; whatever it leaves running when it ends, or when this
# script is stopped, is ended with it.
end_sessions() {
    for f in "$RESULTS"/sid.*; do [ -e "$f" ] && pkill -KILL -s "$(cat "$f")" 2>/dev/null; done
}
stop() {
    trap - INT TERM
    { kill -KILL $(jobs -p); wait; } 2>/dev/null
    end_sessions
    rm -rf "$RESULTS"
    echo "tests/run.sh: stopped" >&2
    exit 130
}
trap stop INT TERM

# Runs one test; writes "passed failed seconds" to its result file and prints its report whole.
run_one() {
    local t=$1 name log cmd exe t0 rc p f report
    name=$(basename "$t")
    log="$TMPROOT/log.$name"
    t0=$(date +%s.%N)
    case "$t" in
    *.c)
        exe="$BINDIR/${name%.c}"
        if [ ! -x "$exe" ] || [ "$exe" -ot "$t" ]; then
            echo "FAIL $t: not built or older than its source (run 'make tests')" >"$log"
            cmd=(false)
        else
            cmd=("$exe")
        fi ;;
    *.sh) cmd=(bash "$t") ;;
    *.py) cmd=("$PYTHON" "$t") ;;
    esac
    if [ "${cmd[0]}" = false ]; then
        rc=1
    else
        # A command started with & ignores SIGINT; the tests of Ctrl-C need it as a terminal gives it.
        setsid env --default-signal=INT,QUIT "${cmd[@]}" >"$log" 2>&1 </dev/null &
        local sid=$!
        echo "$sid" >"$RESULTS/sid.$name"
        wait "$sid"; rc=$?
        pkill -KILL -s "$sid" 2>/dev/null
        rm -f "$RESULTS/sid.$name"
    fi
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $t: exited $rc" >>"$log"; f=1
    fi
    local secs
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    echo "$p $f $secs" >"$RESULTS/$name"
    report=$(printf '%-44s %4d passed %3d failed  (%ss)' "$t" "$p" "$f" "$secs")
    if [ "$f" -gt 0 ]; then
        report+=$'\n'$(grep '^FAIL ' "$log" | sed 's/^/    /')
        report+=$'\n'$(tail -n 15 "$log" | grep -v '^PASS ' | grep -v '^FAIL ' | sed 's/^/    | /')
    fi
    flock "$LOCK" printf '%s\n' "$report"
}

t_start=$SECONDS
running=0
for t in $order; do
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    run_one "$t" &
    running=$((running + 1))
done
wait

passed=0; failed=0; failures=(); durations=()
for t in "${selected[@]}"; do
    name=$(basename "$t")
    read -r p f secs <"$RESULTS/$name" 2>/dev/null || { p=0; f=1; secs=0; }
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && failures+=("$t")
    durations+=("$secs $t")
done
rm -rf "$RESULTS"
if [ $save_durations -eq 1 ]; then  # this run's times replace those of the same tests
    { printf '%s\n' "${durations[@]}"; cat tests/durations.txt 2>/dev/null; } |
        awk '!seen[$2]++' | sort -k1,1nr -k2 >tests/durations.txt.new &&
        mv tests/durations.txt.new tests/durations.txt
fi
echo
if [ ${#failures[@]} -gt 0 ]; then
    echo "Failed (logs in tests/tmp/log.NAME):"
    for t in "${failures[@]}"; do
        echo "  $t"
        grep '^FAIL ' "$TMPROOT/log.$(basename "$t")" | sed 's/^/      /'
    done
    echo
fi
echo "$passed passed, $failed failed  ($((SECONDS - t_start)) s, $jobs at once)"
[ "$failed" -eq 0 ]
