#!/usr/bin/env bash
# mpi_resume — resume under mpirun (2 ranks, sync): a run stopped right after a --checkpoint-every
# checkpoint and resumed from it ends bit-identical to an uninterrupted run: the same final
# checkpoint file (parameters, momentum, batch-norm statistics: `cmp`), train_loss and
# test_accuracy. Why exact: one CPU worker per rank fixes every rank's task order; a 2-rank sum
# (0 + a + b) is the same whichever contribution comes first; the data order, the learning-rate
# schedule and the momentum come back from the checkpoint (its seed included).
# A run that hangs (a rank that does not exit) fails after LIMIT s with every thread's stack of
# both ranks (run_or_dump_stacks, lib.sh). Also: --resume with another explicit --seed is refused
# (exit 1, one line naming --seed), and every result line has unique keys and no blanks in values.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1 STARPU_NCUDA=0
MPI=("${ANP_MPIRUN[@]}" -np 2)
# A run that has not ended in LIMIT seconds hangs (each takes seconds): run_or_dump_stacks then
# prints every thread's stack of both ranks before it fails.
LIMIT="${MPI_RESUME_LIMIT:-240}"
# 2 epochs of 12800 samples: 400 steps, so that a stop requested at the first checkpoint (step
# 10) lands mid-run however fast the ranks step (with StarPU-MPI's idle back-off a 2-rank lenet5
# runs ~15k images/s here: 100 steps ended before mpirun had relayed the signal).
TOTAL_STEPS=400
BASE=(train --net lenet5 --limit-train 12800 --limit-test 500 --epochs 2)
ARGS=("${BASE[@]}" --seed 3)
# keys_ok LINE: unique keys, each field key=value with no blank inside a value
keys_ok() {
  local dup; dup="$(printf '%s\n' "${1#result: }" | tr ' ' '\n' | grep -v '=' || true)"
  [ -z "$dup" ] || { fail "result field without '=' (a value with a blank?): '$dup' in: $1"; return; }
  dup="$(printf '%s\n' "${1#result: }" | tr ' ' '\n' | cut -d= -f1 | sort | uniq -d)"
  [ -z "$dup" ] || fail "duplicate result keys '$dup' in: $1"
}

run_or_dump_stacks "$LIMIT" "$TMP/ref.out" "$TMP/ref.err" "${MPI[@]}" "$STARPU_ANP" "${ARGS[@]}" --quiet --checkpoint "$TMP/ref.ckpt" \
  || { cat "$TMP/ref.err" >&2; fail "uninterrupted run failed"; finish; }
REF="$(tail -1 "$TMP/ref.out")"
echo "uninterrupted: $REF"
keys_ok "$REF"

# Stop the run as soon as a --checkpoint-every checkpoint exists (every 10 of its $TOTAL_STEPS steps).
CK="$TMP/run.ckpt"
timeout 300 "${MPI[@]}" "$STARPU_ANP" "${ARGS[@]}" --quiet --checkpoint "$CK" --checkpoint-every 10 >"$TMP/a.out" 2>"$TMP/a.err" &
pid=$!
for _ in $(seq 6000); do [ -f "$CK" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
# The ranks themselves are stopped, as a batch system stops a job's tasks: SIGTERM to mpirun
# alone does not stop them. Open MPI 4.1's mpirun returns at once and leaves its ranks running
# (measured: they trained on for up to 1.4 s, to the end of the run in 3 of 33 tries, rewriting
# $CK as they went; 'mpirun -np 2 sleep 5' left both sleeps to finish). The resumed run's ranks
# each read $CK: one that changes between their reads starts them from different steps, and the
# job then hangs at its end (one rank waits for a step the other never runs). Then wait until
# every process of the stopped run is gone.
# shellcheck disable=SC2207
STOPPED=($(descendants "$pid")) # timeout, mpirun and the ranks
for ((i = ${#STOPPED[@]} - 1; i >= 0; i--)); do kill -TERM "${STOPPED[i]}" 2>/dev/null || true; done # ranks first
rc=0; wait "$pid" || rc=$?
wait_gone 60 "${STOPPED[@]}" || fail "the stopped run's processes still run 60 s after they were sent SIGTERM"
echo "stopped (exit $rc)"
[ -f "$CK" ] || { cat "$TMP/a.err" >&2; fail "no checkpoint was written (exit $rc)"; finish; }
[ "$rc" != 0 ] || fail "the run finished before it was stopped (test too weak: make it longer)"

run_or_dump_stacks "$LIMIT" "$TMP/b.out" "$TMP/b.err" "${MPI[@]}" "$STARPU_ANP" "${ARGS[@]}" --checkpoint "$CK" --resume "$CK" \
  || { cat "$TMP/b.err" >&2; fail "resumed run failed"; finish; }
FINAL="$(tail -1 "$TMP/b.out")"
from="$(sed -n 's/^resumed from .*: epoch [0-9]*, step \([0-9]*\)$/\1/p' "$TMP/b.err" | head -1)"
echo "resumed from step $from: $FINAL"
keys_ok "$FINAL"
[ -n "$from" ] && [ "$from" -gt 0 ] && [ "$from" -lt "$TOTAL_STEPS" ] || fail "resumed from step '$from', want a mid-run step"
for k in steps train_loss test_accuracy test_loss; do  # (epoch_train_loss: of the steps this process ran)
  [ "$(result_field "$FINAL" $k)" = "$(result_field "$REF" $k)" ] \
    || fail "$k: resumed $(result_field "$FINAL" $k) vs uninterrupted $(result_field "$REF" $k)"
done
cmp -s "$TMP/ref.ckpt" "$CK" || fail "the final checkpoints differ (parameters are not bit-identical)"

# Another explicit --seed on resume: refused, one line that names --seed.
expect_rc 1 "$STARPU_ANP" "${BASE[@]}" --quiet --seed 4 --resume "$CK"
{ [ "$(printf '%s\n' "$ERR" | grep -c error)" = 1 ] && [[ "$ERR" == *--seed* ]]; } || fail "--seed 4 on resume: '$ERR'"
# Single-process async: still key=value.
ONE="$("$STARPU_ANP" train --net lenet5 --limit-train 640 --no-eval --max-steps 3 --mode async --quiet | tail -1)"
keys_ok "$ONE"
[ "$(result_field "$ONE" mode)" = sync ] && [ "$(result_field "$ONE" requested_mode)" = async ] || fail "1-rank async: $ONE"
finish
