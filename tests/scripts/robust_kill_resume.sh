#!/usr/bin/env bash
# robust_kill_resume — kill -9 a training run at set points of its progress, several times, resuming
# from its checkpoint each time; then let it finish. Checks:
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
# Kill points by progress, not by the clock (the machine may be loaded and slow): run 1 is killed
# in start-up (0.5 s after its launch, before or while it loads); each later run is killed as
# soon as it has written its Nth checkpoint of this run (N from WRITES, in turn; a checkpoint is
# written every 2 steps), so every kill after the first lands mid-training, right after a
# checkpoint was renamed into place, however fast or slow the machine is. Runs 3 and later resume
# from the checkpoint, so the kill and resume counts asserted below do not depend on timing. The
# writes add up to ~110 of the 450 steps: the last, resumed run finishes the rest.
# DNN_KILL_WRITES="N..." replaces WRITES (at least 4 values keep >= 3 resumes).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
export STARPU_NCPU=1 STARPU_NCUDA=0 STARPU_SCHED=lws
A="$STARPU_ANP"
read -ra WRITES <<<"${DNN_KILL_WRITES:-3 9 1 15 5 20 2}"
KILLS=$((1 + ${#WRITES[@]}))
ARGS=(train --net lenet5 --limit-train 9600 --limit-test 2000 --epochs 3)

rc=0; "$A" "${ARGS[@]}" --quiet >"$TMP/ref.out" 2>"$TMP/ref.err" || rc=$?
[ "$rc" = 0 ] || { cat "$TMP/ref.err" >&2; fail "reference run failed"; finish; }
REF="$(tail -1 "$TMP/ref.out")"
echo "uninterrupted: $REF"

CK="$TMP/run.ckpt"
ARGS+=(--checkpoint "$CK" --checkpoint-every 2)
# ckpt_id: the checkpoint file's identity (inode and modification time in ns): each write is a
# new file renamed over the old one, so the identity changes with every write.
ckpt_id() { stat -c '%i %y' "$CK" 2>/dev/null || echo none; }
# wait_writes PID N: returns once the process PID has written N checkpoints (0), or when it ended
# first (1). Polls every 20 ms; a write missed between two polls only makes the kill later.
wait_writes() {
  local pid="$1" want="$2" seen=0 last cur
  last="$(ckpt_id)"
  while kill -0 "$pid" 2>/dev/null; do
    cur="$(ckpt_id)"
    if [ "$cur" != "$last" ]; then seen=$((seen + 1)); last="$cur"; fi
    [ "$seen" -lt "$want" ] || return 0
    sleep 0.02
  done
  return 1
}
last_step=-1
resumes=0
kills=0
for i in $(seq 1 "$KILLS"); do
  extra=()
  [ ! -f "$CK" ] || extra=(--resume "$CK")
  "$A" "${ARGS[@]}" "${extra[@]}" >"$TMP/out.$i" 2>"$TMP/err.$i" &
  pid=$!
  if [ "$i" = 1 ]; then
    sleep 0.5
    what="0.5 s after start"
  else
    n="${WRITES[$((i - 2))]}"
    wait_writes "$pid" "$n" || true
    what="after its checkpoint write number $n"
  fi
  kill -9 "$pid" 2>/dev/null || true
  rc=0; wait "$pid" 2>/dev/null || rc=$?
  resumed="$(sed -n 's/^resumed from .*: epoch [0-9]*, step \([0-9]*\)$/\1/p' "$TMP/err.$i")"
  echo "run $i: killed $what (exit $rc)${resumed:+, had resumed from step $resumed}"
  if [ "$rc" = 0 ]; then
    echo "run $i finished before the kill"
    [ -z "$resumed" ] || resumes=$((resumes + 1))
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
if [ "$(result_field "$FINAL" steps)" = "$resumed" ] && [ -z "$fl" ]; then
  # A kill landed after the last checkpoint (the finished model) was written: the resumed run has
  # nothing to do; it says so, prints no training loss (not nan) and evaluates the checkpoint
  # (test_accuracy is compared), but the last step's training loss is gone with the killed run.
  echo "the checkpoint already held the finished run (step $resumed): compared by test accuracy only"
  # (the run that said it: a loop run's stderr is err.N, the extra final run's final.err)
  grep -q 'nothing to do: the checkpoint is at the end of the run' "$TMP"/err.* "$TMP"/*.err 2>/dev/null \
    || fail "the finished resume did not say so"
  fl="$rl"
fi
case "$FINAL" in *=nan*) fail "the final result line holds a nan: $FINAL" ;; esac
fcmp "($fa - $ra) <= 0.001 && ($ra - $fa) <= 0.001" || fail "test_accuracy $fa vs uninterrupted $ra"
fcmp "($fl - $rl) <= 1e-5 && ($rl - $fl) <= 1e-5" || fail "train_loss $fl vs uninterrupted $rl"
[ "$kills" -ge 3 ] || fail "only $kills kills landed (runs too short for the kill times?)"
[ "$resumes" -ge 3 ] || fail "only $resumes resumes from a checkpoint (test too weak)"
finish
