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

# net_sim_prepare NET_ID: the set-up the measured-against-simulated net tests share
# (net_allreduce_sim, net_train_sim): skips (77) without mpirun, SimGrid or namespaces (a trial
# `cluster.sh up 1`), exports ANP_NET_ID and ANP_REAL_BUILD, takes the cluster down on exit, and
# builds the simulation (build-sim/ next to the source, as scripts/simulate.sh keeps it) by a tiny
# calibration-only run of simulate.sh (it builds what is missing, incrementally). Sets ROOT.
net_sim_prepare() {
  ROOT="${DNN_SOURCE_DIR:?}"
  command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
  command -v smpicc >/dev/null && [ -f /usr/include/smpi/smpi.h ] || { echo "SKIP: SimGrid (smpicc) is absent"; exit 77; }
  export ANP_NET_ID="$1"
  trap 'bash "$ROOT/tests/net/cluster.sh" down >/dev/null 2>&1; rm -rf "$TMP"' EXIT
  local rc=0 out
  out="$(bash "$ROOT/tests/net/cluster.sh" up 1 2>&1)" || rc=$?
  [ "$rc" = 77 ] && { printf '%s\n' "$out" | head -1; exit 77; }
  [ "$rc" = 0 ] || { echo "$out" >&2; fail "cluster.sh up failed"; finish; }
  bash "$ROOT/tests/net/cluster.sh" down
  ANP_REAL_BUILD="$(cd "$(dirname "$STARPU_ANP")/.." && pwd)"; export ANP_REAL_BUILD
  ANP_SIM_CALIB_DIR="$TMP/calib" bash "$ROOT/scripts/simulate.sh" --calibrate-only --quiet --net lenet5 --batch 2 --chunks 1 \
    --cores 1 --ncpu 1 --calib-steps 1 >/dev/null 2>"$TMP/build.err" || { tail -5 "$TMP/build.err" >&2; fail "building the simulation failed"; finish; }
}
