#!/usr/bin/env bash
# train_job_limits — a run split into jobs, as a cluster's wall-time limit forces, ends bit for
# bit where the uninterrupted run ends (cmp of the final checkpoints):
#   1. a 3-job chain under --stop-after-steps (one process), across an epoch boundary; each job
#      exits 3 ("stopped", checkpoint written) but the last, which exits 0;
#      negative control: the same chain stopped by --max-steps (which sets the run's length, so
#      the cosine schedule shrinks) must end elsewhere;
#   2. SIGTERM in the middle of a run: the step finishes, the checkpoint is written, exit 3, and
#      the resumed run ends bit-identical;
#   3. a chain of jobs under --time-limit 0.5 with 2 ranks (mpirun): every rank stops after the step
#      rank 0 picks; at least 2 jobs stop early; bit-identical at the end; and SIGUSR1 sent to
#      mpirun (which forwards it) stops both ranks the same way;
#   4. resuming a finished checkpoint: "nothing to do", exit 0, no nan in the result line;
#   5. --stop-after-steps / --time-limit without --checkpoint: exit 2, one line naming the option.
# One CPU worker per process: the order of every sum is then fixed whatever the scheduler.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
export STARPU_NCPU=1 STARPU_NCUDA=0
A="$STARPU_ANP"
# 2 epochs of 32 steps (batch 64): the chain crosses the epoch boundary mid-job
ARGS=(train --net lenet5 --limit-train 2048 --limit-test 512 --batch 64 --epochs 2 --seed 7 --quiet)
TOTAL=64

run() { # run OUTNAME ARGS... -> exit status in $RC, stdout/stderr in $TMP/OUTNAME.{out,err}
  local name="$1"; shift
  RC=0; "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || RC=$?
}
no_nan() { case "$2" in *=nan*) fail "$1: nan in the result line: $2" ;; esac; }

run ref timeout 300 "$A" "${ARGS[@]}" --checkpoint "$TMP/ref.ckpt"
[ "$RC" = 0 ] || { cat "$TMP/ref.err" >&2; fail "uninterrupted run exited $RC"; finish; }
REF="$(anp_result_line "$TMP/ref.out")"; note_result "$REF"
echo "uninterrupted: steps=$(result_field "$REF" steps) train_loss=$(result_field "$REF" train_loss)"

# ---- 1. --stop-after-steps chain: 20 + 25 (crosses step 32, the epoch's end) + the rest
CK="$TMP/chain.ckpt"
run j1 timeout 300 "$A" "${ARGS[@]}" --checkpoint "$CK" --stop-after-steps 20
[ "$RC" = 3 ] || { cat "$TMP/j1.err" >&2; fail "job 1 exited $RC, want 3 (stopped)"; }
L1="$(anp_result_line "$TMP/j1.out")"; no_nan "job 1" "$L1"
[ "$(result_field "$L1" steps)" = 20 ] || fail "job 1 ended at step $(result_field "$L1" steps), want 20"
[ "$(result_field "$L1" stopped)" = steps ] || fail "job 1's result line lacks stopped=steps: $L1"
awk -v v="$(result_field "$L1" images_per_s)" 'BEGIN { exit !(v > 0) }' \
  || fail "job 1 (stopped mid-epoch) reports images_per_s=$(result_field "$L1" images_per_s): its steps were not timed"
run j2 timeout 300 "$A" "${ARGS[@]}" --checkpoint "$CK" --resume "$CK" --stop-after-steps 25
[ "$RC" = 3 ] || { cat "$TMP/j2.err" >&2; fail "job 2 exited $RC, want 3"; }
[ "$(result_field "$(anp_result_line "$TMP/j2.out")" steps)" = 45 ] || fail "job 2 did not end at step 45"
run j3 timeout 300 "$A" "${ARGS[@]}" --checkpoint "$CK" --resume "$CK" --stop-after-steps 1000
[ "$RC" = 0 ] || { cat "$TMP/j3.err" >&2; fail "job 3 exited $RC, want 0 (the run's end)"; }
L3="$(anp_result_line "$TMP/j3.out")"; note_result "$L3"
[ "$(result_field "$L3" stopped)" = "" ] || fail "the finished job says stopped: $L3"
[ "$(result_field "$L3" train_loss)" = "$(result_field "$REF" train_loss)" ] || fail "chain train_loss differs"
cmp -s "$TMP/ref.ckpt" "$CK" && echo "stop-after-steps chain (20+25+19): bit-identical" \
  || fail "the --stop-after-steps chain's final checkpoint differs from the uninterrupted run's"

# negative control: stopping jobs with --max-steps changes the run (its schedule spans 20 steps)
NC="$TMP/nc.ckpt"
run n1 timeout 300 "$A" "${ARGS[@]}" --checkpoint "$NC" --max-steps 20
run n2 timeout 300 "$A" "${ARGS[@]}" --checkpoint "$NC" --resume "$NC"
[ "$RC" = 0 ] || { cat "$TMP/n2.err" >&2; fail "negative control: resumed run exited $RC"; }
if cmp -s "$TMP/ref.ckpt" "$NC"; then fail "negative control: a --max-steps split ended bit-identical (the cmp cannot see a changed schedule?)"
else echo "negative control: a --max-steps split ends elsewhere, as it must"; fi

# ---- 2. SIGTERM mid-run (a longer run so the signal lands mid-epoch)
LONG=(train --net lenet5 --limit-train 12800 --limit-test 512 --batch 64 --epochs 2 --seed 7 --quiet)
run lref timeout 300 "$A" "${LONG[@]}" --checkpoint "$TMP/lref.ckpt"
[ "$RC" = 0 ] || { cat "$TMP/lref.err" >&2; fail "uninterrupted long run exited $RC"; }
SK="$TMP/sig.ckpt"
touch "$TMP/sig.csv"
timeout 300 "$A" "${LONG[@]}" --checkpoint "$SK" --metrics "$TMP/sig.csv" >"$TMP/s1.out" 2>"$TMP/s1.err" &
pid=$!
for _ in $(seq 3000); do  # until 10 steps are done
  [ "$(grep -c '^train_step' "$TMP/sig.csv" 2>/dev/null || true)" -ge 10 ] && break
  kill -0 "$pid" 2>/dev/null || break; sleep 0.01
done
kill -TERM "$pid" 2>/dev/null || true
RC=0; wait "$pid" || RC=$?
[ "$RC" = 3 ] || { cat "$TMP/s1.err" >&2; fail "SIGTERM: exit $RC, want 3"; }
grep -q 'stopped (SIGTERM) after step' "$TMP/s1.err" || fail "SIGTERM: no 'stopped (SIGTERM)' line"
S1="$(anp_result_line "$TMP/s1.out")"; no_nan "SIGTERM job" "$S1"
at="$(result_field "$S1" steps)"
[ -f "$SK" ] && [ -n "$at" ] && [ "$at" -lt 400 ] || fail "SIGTERM: no checkpoint, or the run was not stopped mid-run (step '$at')"
run s2 timeout 300 "$A" "${LONG[@]}" --checkpoint "$SK" --resume "$SK"
[ "$RC" = 0 ] || { cat "$TMP/s2.err" >&2; fail "resume after SIGTERM exited $RC"; }
cmp -s "$TMP/lref.ckpt" "$SK" && echo "SIGTERM at step $at, resumed: bit-identical" \
  || fail "SIGTERM at step $at then resume: the final checkpoint differs"

# ---- 4. a finished checkpoint
run fin timeout 300 "$A" "${ARGS[@]}" --checkpoint "$CK" --resume "$CK"
[ "$RC" = 0 ] || fail "resuming a finished checkpoint exited $RC, want 0"
grep -q 'nothing to do: the checkpoint is at the end of the run' "$TMP/fin.err" || fail "finished resume: no 'nothing to do' line"
F="$(anp_result_line "$TMP/fin.out")"; note_result "$F"; no_nan "finished resume" "$F"
[ "$(result_field "$F" train_loss)" = "" ] || fail "finished resume printed a train_loss: $F"
[ "$(result_field "$F" test_accuracy)" = "$(result_field "$REF" test_accuracy)" ] || fail "finished resume: test accuracy differs"
cmp -s "$TMP/ref.ckpt" "$CK" || fail "finished resume changed the checkpoint"

# ---- 5. usage errors
for opt in "--stop-after-steps 5" "--time-limit 10"; do
  # shellcheck disable=SC2086
  expect_rc 2 "$A" "${ARGS[@]}" $opt && { [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] && [[ "$ERR" == *"${opt%% *} needs --checkpoint"* ]] \
    || fail "$opt without --checkpoint: want one line naming it, got: $ERR"; }
done
expect_rc 2 "$A" "${ARGS[@]}" --checkpoint "$TMP/x" --time-limit -1 && [[ "$ERR" == *--time-limit* ]] || fail "--time-limit -1: $ERR"

# ---- 3. 2 ranks: a --time-limit chain, and SIGUSR1 through mpirun
if command -v mpirun >/dev/null; then
  MPI=(timeout 300 "${ANP_MPIRUN[@]}" -np 2)
  # 800 steps: 2 ranks step fast (~15k images/s on 2 cores), and the chain needs several jobs
  MLONG=(train --net lenet5 --limit-train 25600 --limit-test 512 --batch 64 --epochs 2 --seed 7 --quiet)
  run mref "${MPI[@]}" "$A" "${MLONG[@]}" --checkpoint "$TMP/mref.ckpt"
  [ "$RC" = 0 ] || { cat "$TMP/mref.err" >&2; fail "2-rank uninterrupted run exited $RC"; finish; }
  TK="$TMP/time.ckpt"; stops=0; last=0; extra=()
  for job in $(seq 1 60); do
    run "t$job" "${MPI[@]}" "$A" "${MLONG[@]}" --checkpoint "$TK" "${extra[@]}" --time-limit 0.5
    L="$(anp_result_line "$TMP/t$job.out" || true)"; at="$(result_field "$L" steps)"
    [ -n "$at" ] && [ "$at" -gt "$last" ] || { cat "$TMP/t$job.err" >&2; fail "time-limit job $job made no progress (exit $RC, step '$at')"; break; }
    last="$at"; extra=(--resume "$TK")
    [ "$RC" = 0 ] && break
    [ "$RC" = 3 ] || { cat "$TMP/t$job.err" >&2; fail "time-limit job $job exited $RC"; break; }
    [ "$(result_field "$L" stopped)" = time ] || fail "job $job: stopped=$(result_field "$L" stopped), want time"
    stops=$((stops + 1))
  done
  echo "2-rank --time-limit chain: $stops early stops before the end (step $last)"
  [ "$stops" -ge 2 ] || fail "only $stops jobs stopped early under --time-limit 0.5 (test too weak: make the run longer)"
  cmp -s "$TMP/mref.ckpt" "$TK" && echo "2-rank --time-limit chain: bit-identical" \
    || fail "the 2-rank --time-limit chain's final checkpoint differs from the uninterrupted run's"

  UK="$TMP/usr1.ckpt"
  touch "$TMP/usr1.csv"
  "${MPI[@]}" "$A" "${MLONG[@]}" --checkpoint "$UK" --metrics "$TMP/usr1.csv" >"$TMP/u1.out" 2>"$TMP/u1.err" &
  pid=$!
  for _ in $(seq 3000); do
    [ "$(grep -c '^train_step' "$TMP/usr1.csv" 2>/dev/null || true)" -ge 10 ] && break
    kill -0 "$pid" 2>/dev/null || break; sleep 0.01
  done
  pkill -USR1 -P "$pid" mpirun 2>/dev/null || kill -USR1 "$pid" 2>/dev/null || true
  RC=0; wait "$pid" || RC=$?
  U1="$(anp_result_line "$TMP/u1.out" || true)"
  [ "$RC" = 3 ] && [ "$(result_field "$U1" stopped)" = SIGUSR1 ] \
    || { cat "$TMP/u1.err" >&2; fail "SIGUSR1 to mpirun: exit $RC, result '$U1' (want 3, stopped=SIGUSR1)"; }
  run u2 "${MPI[@]}" "$A" "${MLONG[@]}" --checkpoint "$UK" --resume "$UK"
  [ "$RC" = 0 ] || { cat "$TMP/u2.err" >&2; fail "2-rank resume after SIGUSR1 exited $RC"; }
  cmp -s "$TMP/mref.ckpt" "$UK" && echo "SIGUSR1 at step $(result_field "$U1" steps) (2 ranks), resumed: bit-identical" \
    || fail "SIGUSR1 (2 ranks) then resume: the final checkpoint differs"
else
  echo "no mpirun: the 2-rank part is skipped"
fi
finish
