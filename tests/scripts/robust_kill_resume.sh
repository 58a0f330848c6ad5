#!/usr/bin/env bash
# robust_kill_resume — kill -9 a training run at random moments, several times, resuming from its
# checkpoint each time; then let it finish. Checks:
#   - no resume ever meets a corrupt checkpoint (each resumed run loads it, or is killed before it
#     got that far; a load error fails the test), and no run fails in any other way;
#   - the step it resumes from never goes backwards;
#   - the final model equals the uninterrupted run's: test accuracy within 0.001 (2 of 2000 test
#     images) and the last step's training loss within 1e-5.
# Why so tight: with one CPU worker the task order, hence every floating-point sum, is the same in
# every run (two uninterrupted runs give identical bits), and the data order, the learning-rate
# schedule, the momentum and the batch-norm statistics all come back from the checkpoint, so a
# correct resume reproduces the uninterrupted run exactly; the tolerances only absorb printing.
# (With several workers the REDUX order varies and two uninterrupted runs already differ by up to
# ~0.002 in accuracy and ~2% in the last loss: docs/ROBUSTNESS.md.)
# DNN_KILL_SEED=N replays the same kill times; DNN_KILLS=N sets how many kills (default 8).
source "$(dirname "$0")/lib.sh"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
export STARPU_NCPU=1 STARPU_NCUDA=0 STARPU_SCHED=lws
A="$STARPU_ANP"
SEED="${DNN_KILL_SEED:-$(( $(date +%s) % 32768 ))}"
KILLS="${DNN_KILLS:-8}"
RANDOM="$SEED"
echo "kill seed: $SEED (DNN_KILL_SEED=$SEED replays these kill times)"
ARGS=(train --net lenet5 --limit-train 9600 --limit-test 2000 --epochs 3)

"$A" "${ARGS[@]}" --quiet >"$TMP/ref.out" 2>"$TMP/ref.err" || { cat "$TMP/ref.err" >&2; fail "reference run failed"; finish; }
REF="$(tail -1 "$TMP/ref.out")"
echo "uninterrupted: $REF"
# Kill times scale with how long the whole run takes on this machine now (idle or loaded), so that
# several kills land before a run can finish: up to a quarter of the uninterrupted wall time.
SPAN="$(result_field "$REF" wall_s)"

CK="$TMP/run.ckpt"
ARGS+=(--checkpoint "$CK" --checkpoint-every 2)
last_step=-1
resumes=0
kills=0
for i in $(seq 1 "$KILLS"); do
  extra=()
  [ -f "$CK" ] && extra=(--resume "$CK")
  "$A" "${ARGS[@]}" "${extra[@]}" >"$TMP/out.$i" 2>"$TMP/err.$i" &
  pid=$!
  if [ "$i" = 1 ]; then
    # The first kill lands in start-up (StarPU, data loading, the resume itself).
    delay="$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.2 + 1.3 * r / 32767 }')"
  else
    # The others once training runs (its "train: net ..." line): steps, checkpoint writes,
    # end-of-epoch evaluations.
    for _ in $(seq 200); do grep -q '^train: net' "$TMP/err.$i" 2>/dev/null && break; sleep 0.05; done
    delay="$(awk -v r="$RANDOM" -v span="$SPAN" 'BEGIN { printf "%.2f", 0.2 + 0.25 * span * r / 32767 }')"
  fi
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rc=$?
  resumed="$(sed -n 's/^resumed from .*: epoch [0-9]*, step \([0-9]*\)$/\1/p' "$TMP/err.$i")"
  echo "run $i: killed ${delay}s after $([ "$i" = 1 ] && echo start || echo 'training began') (exit $rc)${resumed:+, had resumed from step $resumed}"
  if [ "$rc" = 0 ]; then
    echo "run $i finished before the kill"
    [ -n "$resumed" ] && resumes=$((resumes + 1))
    FINAL="$(tail -1 "$TMP/out.$i")"
    break
  fi
  [ "$rc" = 137 ] || { cat "$TMP/err.$i" >&2; fail "run $i exited $rc before the kill"; finish; }
  kills=$((kills + 1))
  if grep -q 'error' "$TMP/err.$i"; then cat "$TMP/err.$i" >&2; fail "run $i reported an error"; fi
  if [ -n "$resumed" ]; then
    resumes=$((resumes + 1))
    [ "$resumed" -ge "$last_step" ] || fail "run $i resumed from step $resumed, before step $last_step"
    last_step="$resumed"
  fi
done

if [ -z "${FINAL:-}" ]; then # the last run was killed: resume once more and let it finish
  extra=()
  [ -f "$CK" ] && extra=(--resume "$CK")
  "$A" "${ARGS[@]}" "${extra[@]}" >"$TMP/final.out" 2>"$TMP/final.err" \
    || { cat "$TMP/final.err" >&2; fail "the final resumed run failed"; finish; }
  FINAL="$(tail -1 "$TMP/final.out")"
  resumed="$(sed -n 's/^resumed from .*: epoch [0-9]*, step \([0-9]*\)$/\1/p' "$TMP/final.err")"
  [ -n "$resumed" ] && { resumes=$((resumes + 1)); [ "$resumed" -ge "$last_step" ] || fail "final run resumed from step $resumed, before $last_step"; }
fi
echo "after $kills kills and $resumes resumes (last from step ${resumed:-none}): $FINAL"
leftover="$(find "$TMP" -name 'run.ckpt.tmp.*' | wc -l)"
echo "temporary files left by kills during a checkpoint write: $leftover"

ra="$(result_field "$REF" test_accuracy)"; fa="$(result_field "$FINAL" test_accuracy)"
rl="$(result_field "$REF" train_loss)"; fl="$(result_field "$FINAL" train_loss)"
if [ "$(result_field "$FINAL" steps)" = "$resumed" ] && [ "$fl" = nan ]; then
  # A kill landed after the last checkpoint (the finished model) was written: the resumed run has
  # nothing left to train; it says so and evaluates the checkpoint (test_accuracy is compared),
  # but the last step's training loss is gone with the killed run.
  echo "the checkpoint already held the finished run (step $resumed): compared by test accuracy only"
  grep -q 'nothing left to train' "$TMP"/*.err 2>/dev/null || fail "the finished resume did not say so"
  fl="$rl"
fi
fcmp "($fa - $ra) <= 0.001 && ($ra - $fa) <= 0.001" || fail "test_accuracy $fa vs uninterrupted $ra"
fcmp "($fl - $rl) <= 1e-5 && ($rl - $fl) <= 1e-5" || fail "train_loss $fl vs uninterrupted $rl"
[ "$kills" -ge 3 ] || fail "only $kills kills landed (runs too short for the kill times?)"
[ "$resumes" -ge 3 ] || fail "only $resumes resumes from a checkpoint (test too weak)"
finish
