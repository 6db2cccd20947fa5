# Helpers for shell tests: source this, then call pass/fail/expect_*.
set -u
T="$TMPROOT/$(basename "$0" .sh)"
rm -rf "$T"; mkdir -p "$T"
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; }
# expect_error NAME "message fragment" command...: non-zero exit and the fragment on stderr.
expect_error() {
    local name=$1 frag=$2; shift 2
    local out rc
    out=$("$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 0 ]; then fail "$name" "exit status 0"; return; fi
    case "$out" in *"$frag"*) pass "$name" ;; *) fail "$name" "stderr lacks '$frag': $out" ;; esac
}
# expect_ok NAME command...: exit status 0.
expect_ok() {
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$(echo "$out" | tail -3)"; fi
}
