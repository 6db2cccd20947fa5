#!/usr/bin/env bash
# Runs every test and prints "N passed, N failed".  Each test program reports one line per
# assertion group: "PASS name" or "FAIL name: why".  A program that crashes or exits non-zero
# without reporting counts as one failure.
#   tests/run.sh            CPU tests: tests/unit/*.c, tests/cli/*.sh, tests/py/*.py
#   tests/run.sh --gpu      GPU tests: tests/gpu/*
#   tests/run.sh PATTERN    only the tests whose file name contains PATTERN
# The C unit tests are built by the Makefile (`make tests`, into $TEST_BINDIR, default
# build/tests); `make test` builds them and runs this script.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export DIMOC="$ROOT/${DIMOC_BIN:-bin/dimoc}" ROOT DIMOC_DATA_DIR="$ROOT"
BINDIR=${TEST_BINDIR:-build/tests}
export TMPROOT="$ROOT/tests/tmp"
export XDG_CACHE_HOME="$TMPROOT/cache"
export PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHONPATH="$ROOT/tests/py${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$TMPROOT"
gpu=0; pattern=""
for a in "$@"; do case "$a" in --gpu) gpu=1 ;; *) pattern="$a" ;; esac; done

passed=0; failed=0; failures=()
run_one() { # name, command...
    local name=$1; shift
    local log="$TMPROOT/log.$(basename "$name")"
    local t0=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local p f
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exited $rc" >>"$log"; f=1
    fi
    passed=$((passed + p)); failed=$((failed + f))
    printf '%-40s %3d passed %3d failed  (%ds)\n' "$name" "$p" "$f" $((SECONDS - t0))
    if [ "$f" -gt 0 ]; then
        grep '^FAIL ' "$log" | sed 's/^/    /'
        tail -n 15 "$log" | grep -v '^PASS ' | grep -v '^FAIL ' | sed 's/^/    | /'
        failures+=("$name")
    fi
}

if [ $gpu -eq 1 ]; then
    files=$(ls tests/gpu/* 2>/dev/null)
else
    files=$(ls tests/unit/*.c tests/cli/*.sh tests/py/test_*.py 2>/dev/null)
fi
for t in $files; do
    case "$t" in *"$pattern"*) ;; *) continue ;; esac
    case "$t" in
    *.c)
        exe="$BINDIR/$(basename "$t" .c)"
        if [ ! -x "$exe" ] || [ "$exe" -ot "$t" ]; then
            echo "FAIL $t: not built or older than its source (run 'make tests')"
            failed=$((failed + 1)); continue
        fi
        run_one "$t" "$exe" ;;
    *.sh) run_one "$t" bash "$t" ;;
    *.py) run_one "$t" "$PYTHON" "$t" ;;
    esac
done
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
