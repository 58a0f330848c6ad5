# lib.sh — helpers for the script tests (sourced). Every test runs under set -euo pipefail: a
# command whose failure a test expects says so (`|| rc=$?`, `|| fail ...`, `|| true`).
set -euo pipefail
# shellcheck source=../../scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" # the result line, the mpirun flags
FAILS=0
TMP="$(mktemp -d "${DNN_BUILD_DIR:-/tmp}/scripttest.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
# Every result line a test reads goes to $DNN_BUILD_DIR/result_lines/<test>.txt, which
# contract_result_lines.sh checks against the key=value contract (unique keys, no spaces in a
# value) once the other script tests have run. Each test starts its own file afresh.
RESULT_LOG=""
if [ -n "${DNN_BUILD_DIR:-}" ] && mkdir -p "$DNN_BUILD_DIR/result_lines" 2>/dev/null; then
  RESULT_LOG="$DNN_BUILD_DIR/result_lines/$(basename "$0" .sh).txt"
  : >"$RESULT_LOG"
fi
# note_result LINE: record LINE when it is a result line (result_field does it for every line).
note_result() {
  [ -n "$RESULT_LOG" ] || return 0
  case "$1" in result:*) printf '%s\n' "$1" >>"$RESULT_LOG" ;; esac
  return 0
}
# result_field LINE KEY -> value of key=value in a result line (scripts/lib.sh's
# anp_result_field: nothing when KEY is absent, exit 2 when it appears twice); records LINE.
result_field() { note_result "$1"; anp_result_field "$1" "$2"; }
# expect_rc WANT CMD... : run, capture stderr in $ERR, compare exit status
expect_rc() {
  local want="$1"; shift
  local rc=0
  ERR="$("$@" 2>&1 >/dev/null)" || rc=$?
  if [ "$rc" != "$want" ]; then fail "'$*' exited $rc, want $want; stderr: $ERR"; return 1; fi
  return 0
}
# float comparison through awk: fcmp "A < B"
fcmp() { awk "BEGIN { exit !($1) }"; }
finish() {
  if [ "$FAILS" -gt 0 ]; then echo "$FAILS check(s) failed" >&2; exit 1; fi
  echo "all checks passed"; exit 0
}
