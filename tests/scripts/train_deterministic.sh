#!/usr/bin/env bash
# train_deterministic — the same command gives the same bits whatever the scheduler, the worker
# count or --pin-chunks (--deterministic on, the default: every sum over chunks is added in an
# order fixed by chunk index, graph/chunksum.h). lenet5 and resnet8, STEPS steps (200) in K = 4
# chunks, under STARPU_SCHED eager, lws, dmda and random with STARPU_NCPU=1 and 2: the final
# checkpoints are byte-identical (cmp). Also resnet8 with --batchnorm global (its statistics are
# sums over chunks too) under eager/1 and random/2, and each net pinned (--pin-chunks, dmda/2).
# Negative control: DNN_TEST_SUM_ORDER=reverse sums the same partials in another fixed order; its
# checkpoint must differ, or this test could not see an order change at all. Reported, not
# asserted: whether two --deterministic off runs (StarPU's REDUX, 2 workers) differ. And a LARS
# run resumed mid-epoch on 2 workers ends byte-identical to the uninterrupted one.
# The chunk count is fixed (--chunks 4): K is part of what defines the run (K = 1 and K = 4 are
# other float sums), while the default K follows the worker count.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
export STARPU_NCUDA=0
STEPS=200
COMMON=(train --max-steps "$STEPS" --limit-train 3200 --no-eval --chunks 4 --seed 3 --quiet)

# run TAG [VAR=VALUE...] -- ARGS...: one training run, its checkpoint in $TMP/TAG.ckpt; prints
# its train_loss.
run() {
  local tag="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local line rc=0
  line="$(env "${envs[@]}" "$STARPU_ANP" "${COMMON[@]}" --checkpoint "$TMP/$tag.ckpt" "$@" 2>"$TMP/$tag.err" | tail -1)" || rc=$?
  if [ "$rc" != 0 ] || [ ! -s "$TMP/$tag.ckpt" ]; then
    cat "$TMP/$tag.err" >&2; fail "$tag: run failed (exit $rc)"; return 1
  fi
  result_field "$line" train_loss
}

# same REF TAG: TAG's checkpoint is byte-identical to REF's.
same() {
  if cmp -s "$TMP/$1.ckpt" "$TMP/$2.ckpt"; then echo "  $2: identical to $1"
  else fail "$2: checkpoint differs from $1's"; fi
}

for net in lenet5 resnet8; do
  ref=""
  for sched in eager lws dmda random; do
    for ncpu in 1 2; do
      tag="${net}_${sched}_${ncpu}"
      loss="$(run "$tag" STARPU_SCHED=$sched STARPU_NCPU=$ncpu -- --net "$net")" || continue
      echo "$net sched=$sched ncpu=$ncpu train_loss=$loss"
      if [ -z "$ref" ]; then ref="$tag"; else same "$ref" "$tag"; fi
    done
  done
  [ -n "$ref" ] || continue
  if run "${net}_pin" STARPU_SCHED=dmda STARPU_NCPU=2 -- --net "$net" --pin-chunks >/dev/null; then
    same "$ref" "${net}_pin"
  fi
  # The negative control: another fixed order must give other bytes.
  if run "${net}_reverse" STARPU_SCHED=lws STARPU_NCPU=2 DNN_TEST_SUM_ORDER=reverse -- --net "$net" >/dev/null; then
    if cmp -s "$TMP/$ref.ckpt" "$TMP/${net}_reverse.ckpt"; then
      fail "${net}: DNN_TEST_SUM_ORDER=reverse gives the same checkpoint: the test cannot see the summation order"
    else echo "  ${net}_reverse: differs from $ref (the negative control sees the order)"; fi
  fi
  # --deterministic off (REDUX, 2 workers): reported only, it may or may not differ.
  if run "${net}_off1" STARPU_SCHED=lws STARPU_NCPU=2 -- --net "$net" --deterministic off >/dev/null &&
     run "${net}_off2" STARPU_SCHED=lws STARPU_NCPU=2 -- --net "$net" --deterministic off >/dev/null; then
    if cmp -s "$TMP/${net}_off1.ckpt" "$TMP/${net}_off2.ckpt"; then echo "  ${net} --deterministic off: two runs identical (this time)"
    else echo "  ${net} --deterministic off: two runs differ (StarPU's REDUX order)"; fi
  fi
done

# Batch norm over the global batch: its statistics are sums over chunks as well.
if run bn_eager_1 STARPU_SCHED=eager STARPU_NCPU=1 -- --net resnet8 --batchnorm global >/dev/null &&
   run bn_random_2 STARPU_SCHED=random STARPU_NCPU=2 -- --net resnet8 --batchnorm global >/dev/null; then
  same bn_eager_1 bn_random_2
fi

# A resume mid-epoch on 2 workers ends on the uninterrupted run's bytes (constant rate: --max-steps
# sets the run's length, and with it a cosine schedule's).
RES=(--net lenet5 --epochs 3 --lr-schedule constant --optimizer lars --lr 1)
if run resume_half STARPU_SCHED=lws STARPU_NCPU=2 -- "${RES[@]}" --max-steps 70 >/dev/null &&
   run resume_rest STARPU_SCHED=lws STARPU_NCPU=2 -- "${RES[@]}" --max-steps 120 --resume "$TMP/resume_half.ckpt" >/dev/null &&
   run resume_whole STARPU_SCHED=dmda STARPU_NCPU=2 -- "${RES[@]}" --max-steps 120 >/dev/null; then
  same resume_whole resume_rest
fi

# The option: a bad word is a usage error; the result line says which mode ran.
expect_rc 2 "$STARPU_ANP" train --net lenet5 --deterministic maybe
LINE="$(STARPU_NCPU=1 "$STARPU_ANP" "${COMMON[@]}" --net lenet5 --max-steps 2 --deterministic off 2>/dev/null | tail -1)" || fail "a --deterministic off run failed"
[ "$(result_field "$LINE" deterministic)" = off ] || fail "--deterministic off: the result line says deterministic=$(result_field "$LINE" deterministic)"
finish
