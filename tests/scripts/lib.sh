# lib.sh — helpers for the script tests (sourced).
set -u
FAILS=0
TMP="$(mktemp -d "${DNN_BUILD_DIR:-/tmp}/scripttest.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
# result_field LINE KEY -> value of key=value in a result line
result_field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# expect_rc WANT CMD... : run, capture stderr in $ERR, compare exit status
expect_rc() {
  local want="$1"; shift
  ERR="$("$@" 2>&1 >/dev/null)"; local rc=$?
  if [ "$rc" != "$want" ]; then fail "'$*' exited $rc, want $want; stderr: $ERR"; return 1; fi
  return 0
}
# float comparison through awk: fcmp "A < B"
fcmp() { awk "BEGIN { exit !($1) }"; }
finish() {
  if [ "$FAILS" -gt 0 ]; then echo "$FAILS check(s) failed" >&2; exit 1; fi
  echo "all checks passed"; exit 0
}
