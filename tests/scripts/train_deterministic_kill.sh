#!/usr/bin/env bash
# train_deterministic_kill — a 2-worker LARS run killed with kill -9 at random points and resumed
# ends byte-identical to the uninterrupted run (cmp of the final checkpoints), 10 times. With the
# fixed-order sums over chunks (--deterministic on, the default) the bits do not depend on which
# worker ran what, so this holds with 2 workers, not only with 1.
#   Each try: a fresh run with --checkpoint-every 5 is killed (SIGKILL) once it has written its
#   Nth checkpoint, N random in 1..24 of its 40 (the seed is printed; DNN_KILL_SEED repeats it),
#   then resumed to the end.
#   Negative control: one more try whose resumed half sums the chunks in another fixed order
#   (the test-only DNN_TEST_SUM_ORDER=reverse) must end with other bytes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
export STARPU_NCPU=2 STARPU_NCUDA=0
A="$STARPU_ANP"
TRIES=10
SEED="${DNN_KILL_SEED:-$$}"; RANDOM=$SEED
echo "kill points from seed $SEED (DNN_KILL_SEED=$SEED repeats them)"
# 200 steps (6400 samples, batch 64, 2 epochs) in 4 chunks, LARS with a warm-up
ARGS=(train --net lenet5 --limit-train 6400 --limit-test 500 --batch 64 --chunks 4 --epochs 2
      --optimizer lars --lr 2 --warmup-epochs 1 --seed 11)

rc=0; timeout 300 "$A" "${ARGS[@]}" --quiet --checkpoint "$TMP/ref.ckpt" >"$TMP/ref.out" 2>"$TMP/ref.err" || rc=$?
[ "$rc" = 0 ] || { cat "$TMP/ref.err" >&2; fail "uninterrupted run exited $rc"; finish; }

ckpt_id() { stat -c '%i %y' "$1" 2>/dev/null || echo none; }
# kill_after_writes CK N ARGS...: start the run, SIGKILL it once it has written N checkpoints to
# CK; 0 if the kill landed mid-run, 1 if the run ended first.
kill_after_writes() {
  local ck="$1" want="$2" seen=0 last cur pid; shift 2
  "$A" "$@" --quiet >/dev/null 2>&1 &
  pid=$!
  last="$(ckpt_id "$ck")"
  while kill -0 "$pid" 2>/dev/null; do
    cur="$(ckpt_id "$ck")"
    if [ "$cur" != "$last" ]; then seen=$((seen + 1)); last="$cur"; fi
    if [ "$seen" -ge "$want" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; return 0; fi
    sleep 0.005
  done
  wait "$pid" 2>/dev/null || true
  return 1
}

landed=0 same=0
for t in $(seq 1 "$TRIES"); do
  CK="$TMP/t$t.ckpt"
  n=$((1 + RANDOM % 24))
  if ! kill_after_writes "$CK" "$n" "${ARGS[@]}" --checkpoint "$CK" --checkpoint-every 5; then
    echo "try $t: the run ended before its checkpoint $n (not counted)"; continue
  fi
  landed=$((landed + 1))
  [ -f "$CK" ] || { fail "try $t: killed after $n checkpoints but none is there"; continue; }
  rc=0; timeout 300 "$A" "${ARGS[@]}" --checkpoint "$CK" --resume "$CK" >"$TMP/r$t.out" 2>"$TMP/r$t.err" || rc=$?
  [ "$rc" = 0 ] || { cat "$TMP/r$t.err" >&2; fail "try $t: the resumed run exited $rc"; continue; }
  from="$(sed -n 's/^resumed from .*: epoch [0-9]*, step \([0-9]*\)$/\1/p' "$TMP/r$t.err" | head -1)"
  [ -n "$from" ] && [ "$from" -gt 0 ] && [ "$from" -lt 200 ] || fail "try $t: resumed from step '$from', want a mid-run step"
  if cmp -s "$TMP/ref.ckpt" "$CK"; then same=$((same + 1)); echo "try $t: killed after checkpoint $n, resumed from step ${from:-?}: bit-identical"
  else fail "try $t: killed after checkpoint $n, resumed from step ${from:-?}: the final checkpoint differs"; fi
done
echo "$same of $landed resumed runs bit-identical ($TRIES tries)"
[ "$landed" -ge 8 ] || fail "only $landed of $TRIES kills landed mid-run (test too weak)"

# Negative control: the resumed half in another fixed summation order must show.
CK="$TMP/nc.ckpt"
if kill_after_writes "$CK" 10 "${ARGS[@]}" --checkpoint "$CK" --checkpoint-every 5; then
  rc=0; DNN_TEST_SUM_ORDER=reverse timeout 300 "$A" "${ARGS[@]}" --checkpoint "$CK" --resume "$CK" >/dev/null 2>"$TMP/nc.err" || rc=$?
  [ "$rc" = 0 ] || { cat "$TMP/nc.err" >&2; fail "negative control: resumed run exited $rc"; }
  if cmp -s "$TMP/ref.ckpt" "$CK"; then fail "negative control: another summation order after the kill ended bit-identical (cmp cannot see it?)"
  else echo "negative control: another summation order after the kill ends with other bytes, as it must"; fi
else
  fail "negative control: the run ended before its 10th checkpoint"
fi
finish
