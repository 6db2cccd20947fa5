#!/usr/bin/env bash
# `dimoc check` on malformed models: every row of tests/compiler/bad_cases.txt must fail with
# exit status 1 and exactly one "FILE:LINE:COL: error: ..." line holding the expected message
# fragment.  Also: several errors in one run, a warning that does not fail, clean shipped models.
cd "$(dirname "$0")/../.."
source tests/lib.sh
BAD=tests/compiler/bad

if [ ! -x "$DIMOC" ]; then
    fail check-errors "$DIMOC is not built"
    exit 0
fi

# check_case FILE LINE COL FRAGMENT
check_case() {
    local file=$BAD/$1 line=$2 col=$3 frag=$4
    local err rc nerr
    err=$("$DIMOC" check "$file" 2>&1 >/dev/null); rc=$?
    nerr=$(grep -ac ': error: ' <<<"$err")
    if [ $rc -ne 1 ]; then
        fail "check-error $1" "exit status $rc, not 1"
    elif [ "$nerr" -ne 1 ]; then
        fail "check-error $1" "$nerr errors reported, not 1: $err"
    elif ! grep -aqF "$file:$line:$col: error: " <<<"$err"; then
        fail "check-error $1" "no '$file:$line:$col: error:' in: $err"
    elif ! grep -aF "$file:$line:$col: error: " <<<"$err" | grep -aqF -- "$frag"; then
        fail "check-error $1" "message lacks '$frag': $err"
    else
        pass "check-error $1"
    fi
}

rows=0
while read -r file line col frag; do
    case "$file" in ''|'#'*) continue ;; esac
    check_case "$file" "$line" "$col" "$frag"
    rows=$((rows + 1))
done < tests/compiler/bad_cases.txt

# Every bad file is listed (a file without a row would go untested).
listed=$(grep -v '^#' tests/compiler/bad_cases.txt | awk 'NF {print $1}' | sort)
present=$(cd $BAD && ls *.model | sort)
if [ "$listed" = "$present" ] && [ "$rows" -ge 30 ]; then
    pass "bad-cases-complete ($rows rows)"
else
    fail bad-cases-complete "bad_cases.txt and $BAD differ, or fewer than 30 rows"
fi

# expect_all NAME FILE "L:C" ...: exit 1 and an error at each position, in one run.
expect_all() {
    local name=$1 file=$2; shift 2
    local err rc missing=""
    err=$("$DIMOC" check "$file" 2>&1 >/dev/null); rc=$?
    for pos in "$@"; do
        grep -qF "$file:$pos: error: " <<<"$err" || missing="$missing $pos"
    done
    if [ $rc -ne 1 ]; then fail "$name" "exit status $rc"
    elif [ -n "$missing" ]; then fail "$name" "no errors at:$missing in: $err"
    else pass "$name"; fi
}
expect_all several-semantic-errors tests/compiler/multi_errors.model 6:15 7:30 11:73 12:14
expect_all several-syntax-errors tests/compiler/multi_syntax_errors.model 4:1 5:22 7:1 8:1

# A mistake inside an imported definition: the error names the library file, line and column,
# and a note points at the call in the model.
L=tests/compiler/error_in_library.model
err=$("$DIMOC" check "$L" 2>&1 >/dev/null); rc=$?
if [ $rc -eq 1 ] && [ "$(grep -c ': error: ' <<<"$err")" -eq 1 ] \
        && grep -qF "tests/compiler/lib/broken.model:4:38: error: argument 1 of 'dot' must be a 3-vector" <<<"$err" \
        && grep -qF "$L:7:13: note: in this call of compartment 'broken'" <<<"$err"; then
    pass error-in-imported-file
else
    fail error-in-imported-file "rc=$rc: $err"
fi

# A warning alone: exit 0, the warning on stderr, the summary on stdout.
W=tests/compiler/warn_unused.model
out=$("$DIMOC" check "$W" 2>"$T/warn.err"); rc=$?
if [ $rc -eq 0 ] && grep -qF "$W:6:7: warning: parameter 'k' is not used by the signal" "$T/warn.err" \
        && ! grep -q 'error:' "$T/warn.err" && grep -q '^model warn_unused' <<<"$out"; then
    pass warning-unused-parameter
else
    fail warning-unused-parameter "rc=$rc stderr: $(cat "$T/warn.err")"
fi

# The shipped models check cleanly: exit 0, nothing on stderr, a summary naming the model.
for m in models/*.model; do
    name=$(basename "$m" .model)
    out=$("$DIMOC" check "$m" 2>"$T/$name.err"); rc=$?
    if [ $rc -eq 0 ] && [ ! -s "$T/$name.err" ] && grep -q "^model $name:" <<<"$out"; then
        pass "check-clean $name"
    else
        fail "check-clean $name" "rc=$rc stderr: $(cat "$T/$name.err")"
    fi
done

# A missing file is an error too.
expect_error check-missing-file "No such file" "$DIMOC" check "$T/nonexistent.model"
