#!/usr/bin/env bash
# mpi_critpath — DNN_BREAKDOWN=1's critical path (runtime/critpath.h) on real runs: lenet5 bench in
# one process and over 2 ranks. Every bd_cp_* field is there; the chain's parts (compute,
# all-reduce, update, comm, reduce, wait, sched, transfer, submit: shares of the span) add up to 1 and each lies in
# [0, 1]; the ideal (the longest path by execution times) is no longer than the span, which the
# observed chain covers; queued is part of the chain's execution; the loss is the run's without
# the breakdown (the record only reads). Over 2 ranks: every rank's fields reach rank 0's line, and
# the chain shows exposed communication somewhere (a rank's update waits for data another rank
# sends). The chain on a tiny hand-built DAG is checked exactly by tests/unit_critpath.c.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export STARPU_NCPU=1
PARTS=(cp_compute cp_allreduce cp_update cp_comm cp_reduce cp_wait cp_sched cp_transfer cp_submit)
BENCH=(bench --net lenet5 --batch 64 --chunks 2 --steps 4 --warmup 1 --quiet)
# check LABEL LINE: the critical-path fields of a result line.
check() {
  local label="$1" line="$2" f v sum
  for f in cp_span_s "${PARTS[@]}" cp_queued cp_ideal; do
    v="$(result_field "$line" "bd_$f")"
    [ -n "$v" ] || { fail "$label: no bd_$f: $line"; return; }
    [ "$f" = cp_span_s ] || fcmp "$v >= 0 && $v <= 1.0005" || fail "$label: bd_$f=$v is not a share in [0, 1]"
  done
  fcmp "$(result_field "$line" bd_cp_span_s) > 0" || fail "$label: an empty span: $line"
  sum="$(for f in "${PARTS[@]}"; do result_field "$line" "bd_$f"; done | awk '{s += $1} END {print s + 0}')"
  fcmp "$sum > 0.995 && $sum < 1.005" || fail "$label: the chain's parts add up to $sum, not 1 (the span)"
  fcmp "$(result_field "$line" bd_cp_ideal) <= 1.0005" || fail "$label: the ideal is longer than the span: $line"
  fcmp "$(result_field "$line" bd_cp_ideal) > 0" || fail "$label: no ideal path: $line"
  fcmp "$(result_field "$line" bd_cp_queued) <= $(result_field "$line" bd_cp_compute) + $(result_field "$line" bd_cp_allreduce) + $(result_field "$line" bd_cp_update) + 0.0015" \
    || fail "$label: queued exceeds the chain's execution: $line"
  fcmp "$(result_field "$line" bd_cp_compute) > 0" || fail "$label: no compute on the chain: $line"
  echo "$label: $(grep -o 'bd_cp_[a-z_]*=[0-9.]*' <<<"$line" | tr '\n' ' ')"
}
REF="$("$STARPU_ANP" "${BENCH[@]}" | tail -1)" || fail "bench without the breakdown failed"
[ -z "$(result_field "$REF" bd_cp_span_s)" ] || fail "bd_cp_* without DNN_BREAKDOWN: $REF"
ONE="$(DNN_BREAKDOWN=1 "$STARPU_ANP" "${BENCH[@]}" | tail -1)" || fail "bench with DNN_BREAKDOWN=1 failed"
check "1 process" "$ONE"
[ "$(result_field "$ONE" train_loss)" = "$(result_field "$REF" train_loss)" ] || fail "DNN_BREAKDOWN=1 changes the loss: $ONE"
if command -v mpirun >/dev/null; then
  TWO="$(DNN_BREAKDOWN=1 timeout 300 "${ANP_MPIRUN[@]}" -np 2 -x DNN_BREAKDOWN -x STARPU_NCPU "$STARPU_ANP" "${BENCH[@]}" \
    --allreduce tree 2>"$TMP/err" | tail -1)" || { cat "$TMP/err" >&2; fail "2 ranks with DNN_BREAKDOWN=1 failed"; }
  check "2 ranks" "$TWO"
  [ "$(result_field "$TWO" bd_rank_cp_comm | tr '/' '\n' | wc -l)" = 2 ] || fail "bd_rank_cp_comm does not list 2 ranks: $TWO"
  fcmp "$(result_field "$TWO" bd_cp_comm) > 0" || fail "2 ranks: no exposed communication on either rank's chain: $TWO"
else
  echo "no mpirun: the 2-rank half is skipped"
fi
finish
