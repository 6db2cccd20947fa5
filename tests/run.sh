#!/usr/bin/env bash
# Runs every test and prints "N passed, N failed".  Each test program reports one line per
# assertion group: "PASS name" or "FAIL name: why".  A program that crashes or exits non-zero
# without reporting counts as one failure.
#   tests/run.sh            CPU tests: tests/unit/*.c, tests/cli/*.sh, tests/py/*.py
#   tests/run.sh --gpu      GPU tests: tests/gpu/*
#   tests/run.sh PATTERN    only the tests whose file name contains PATTERN
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export DIMOC="$ROOT/${DIMOC_BIN:-bin/dimoc}" ROOT DIMOC_DATA_DIR="$ROOT"
LIBDIR=${TEST_LIBDIR:-build}
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
        exe="$TMPROOT/$(basename "$t" .c)"
        if ! ${CC:-cc} ${TEST_CFLAGS:--O2 -g} -Wall -Wextra -Icompiler -Iruntime -Itemplates -I"$LIBDIR" -Itests/unit \
                -I/usr/include/nifti -fopenmp -o "$exe" "$t" -L"$LIBDIR" -ldimoc-runtime \
                -ldimoc-compiler -Wl,-Bstatic -lgiftiio -lexpat -lnifti2 -lznz -Wl,-Bdynamic -lz -lm -ldl \
                >"$TMPROOT/build.$(basename "$t")" 2>&1; then
            echo "FAIL $t: does not build"; cat "$TMPROOT/build.$(basename "$t")"
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
