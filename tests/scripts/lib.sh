# lib.sh — helpers for the script tests (sourced). Every test runs under set -euo pipefail: a
# command whose failure a test expects says so (`|| rc=$?`, `|| fail ...`, `|| true`).
set -euo pipefail
# shellcheck source=../../scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" # the result line, the mpirun flags
FAILS=0
TMP="$(mktemp -d "${DNN_BUILD_DIR:-/tmp}/scripttest.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
# The test's prerequisites: skip (exit 77) without the Fashion-MNIST package or without AVX512_BF16.
need_fashion_mnist() {
  [ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
}
need_bf16_cpu() { grep -qw avx512_bf16 /proc/cpuinfo || { echo "no AVX512_BF16 on this CPU: skipped"; exit 77; }; }
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

# text_corpus FILE: a deterministic 40 KB text, sentences drawn from 17 words by a fixed LCG (the
# language-model tests' data: train_text.sh, train_bf16.sh).
text_corpus() {
  awk 'BEGIN { split("the lord and god said unto them of israel in that day there was light upon earth", w, " ");
    s = 12345; out = "";
    for (i = 0; i < 7000; i++) { s = (s * 1103515245 + 12345) % 2147483648; out = out w[int(s / 65536) % 17 + 1];
      out = out (s % 7 == 0 ? ".\n" : " ") }
    printf "%s", out }' >"$1"
}
# gpt_block_net FILE DIM HEADS: a one-block GPT at T = 16 (embed, layernorm, attention, a gelu MLP of
# 4 DIM, lm_head tied to the embedding), vocabulary 256.
gpt_block_net() {
  local d="$2"
  cat >"$1" <<NET
input idx tokens 16
embed tok idx vocab=256 dim=$d
layernorm ln1 tok
dense qkv ln1 out=$((3 * d))
attention att qkv heads=$3
dense proj att out=$d
add r1 tok,proj
layernorm ln2 r1
dense fc ln2 out=$((4 * d))
gelu g fc
dense mlp g out=$d
add r2 r1,mlp
layernorm lnf r2
lm_head head lnf,tok
softmax_xent loss head
NET
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

# descendants PID: PID and every process below it, one per line (parents first).
descendants() {
  local p todo=("$1")
  while [ "${#todo[@]}" -gt 0 ]; do
    p="${todo[0]}"; todo=("${todo[@]:1}")
    echo "$p"
    # shellcheck disable=SC2207
    todo+=($(pgrep -P "$p" || true))
  done
}
# wait_gone SECONDS PID...: waits until none of the PIDs runs any more (a zombie counts as gone);
# status 1 if some still run after SECONDS.
wait_gone() {
  local limit="$1" t0 p alive; shift
  t0="$(date +%s)"
  while :; do
    alive=0
    for p in "$@"; do
      [ -e "/proc/$p" ] && [ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" != Z ] && alive=1
    done
    [ "$alive" = 0 ] && return 0
    [ $(($(date +%s) - t0)) -lt "$limit" ] || return 1
    sleep 0.1
  done
}
# run_or_dump_stacks LIMIT OUT ERR CMD...: runs CMD (e.g. an mpirun of $STARPU_ANP), its stdout
# into OUT and its stderr into ERR, for at most LIMIT seconds; returns CMD's exit status. When
# it is still running at LIMIT (a hang: the runs it takes end in seconds), it prints, on this
# script's stderr, the stack of every thread of each $STARPU_ANP process CMD started (all the
# ranks: gdb -p PID -batch -ex 'thread apply all bt'; scripts/bootstrap.sh installs gdb), then
# kills CMD and its processes and returns 124, as timeout(1) does. The stacks say where a
# rank waits, which a bare timeout throws away.
run_or_dump_stacks() {
  local limit="$1" out="$2" err="$3" pid rc=0 t0 p
  shift 3
  "$@" >"$out" 2>"$err" &
  pid=$!
  t0="$(date +%s)"
  while kill -0 "$pid" 2>/dev/null && [ $(($(date +%s) - t0)) -lt "$limit" ]; do sleep 0.2; done
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" || rc=$?
    return "$rc"
  fi
  local app procs=()
  app="$(basename "${STARPU_ANP:-starpu_anp}")"
  # shellcheck disable=SC2207
  procs=($(descendants "$pid"))
  echo "HANG: '$*' still running after ${limit} s; the threads of its ${app} processes:" >&2
  for p in "${procs[@]}"; do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "${app:0:15}" ] || continue
    echo "=== pid $p, rank $(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" >&2
    if command -v gdb >/dev/null; then
      timeout 60 gdb -p "$p" -batch -ex 'set pagination off' -ex 'thread apply all bt' </dev/null 2>&1 \
        | grep -v '^\[New LWP\|^\[Thread debugging\|^Using host libthread_db' >&2 || true
    else
      echo "(gdb is not installed: scripts/bootstrap.sh installs it)" >&2
      for t in /proc/"$p"/task/*; do echo "thread ${t##*/}: $(cat "$t/comm" 2>/dev/null) in $(cat "$t/wchan" 2>/dev/null)"; done >&2
    fi
  done
  echo "=== stderr of the hung command (last 20 lines):" >&2
  tail -20 "$err" >&2
  kill -TERM "$pid" "${procs[@]}" 2>/dev/null || true
  sleep 2
  kill -KILL "$pid" "${procs[@]}" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 124
}
