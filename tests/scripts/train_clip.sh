#!/usr/bin/env bash
# train_clip — --clip-grad-norm X (graph/gradclip.h): its norm is a fixed-order sum, so the same
# command gives the same bits under every scheduler and worker count. lenet5, STEPS steps in
# K = 4 chunks, X = 0.1 (below every step's norm, so every step clips, which the metrics' grad_norm
# column shows: 0.18-0.54 with sgd, 0.24-3.95 with adamw here), with sgd under STARPU_SCHED eager, dmda and random on 2 workers
# and eager on 1: byte-identical checkpoints (cmp) and identical grad_norm columns; the same for
# adamw (eager/1 against random/2). A run resumed mid-way with clipping ends on the uninterrupted
# run's bytes. Negative controls: X = 0.2 (clipping some steps only) and no clipping both give other
# bytes, so the comparisons can see the coefficient. Usage: a bad value (exit 2), --mode async
# (refused, exit 2), the result line and the CSV's grad_norm column (empty without clipping).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
export STARPU_NCUDA=0
STEPS=50
X=0.1
COMMON=(train --net lenet5 --max-steps "$STEPS" --limit-train 3200 --no-eval --chunks 4 --seed 3 --quiet)

# run TAG [VAR=VALUE...] -- ARGS...: one training run, its checkpoint in $TMP/TAG.ckpt, its
# metrics in $TMP/TAG.csv and its result line in LINE (not a subshell: a FAIL counts).
run() {
  local tag="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local rc=0
  LINE="$(env "${envs[@]}" "$STARPU_ANP" "${COMMON[@]}" --checkpoint "$TMP/$tag.ckpt" --metrics "$TMP/$tag.csv" "$@" \
    2>"$TMP/$tag.err" | tail -1)" || rc=$?
  if [ "$rc" != 0 ] || [ ! -s "$TMP/$tag.ckpt" ]; then
    cat "$TMP/$tag.err" >&2; fail "$tag: run failed (exit $rc)"; return 1
  fi
  note_result "$LINE"
}
# norms TAG: the grad_norm column (8) of TAG's train_step rows, one per line.
norms() { awk -F, '$1 == "train_step" { print $8 }' "$TMP/$1.csv"; }
# same REF TAG: byte-identical checkpoints and the same grad_norm columns.
same() {
  if cmp -s "$TMP/$1.ckpt" "$TMP/$2.ckpt"; then echo "  $2: checkpoint identical to $1"
  else fail "$2: checkpoint differs from $1's"; fi
  [ "$(norms "$1")" = "$(norms "$2")" ] || fail "$2: grad_norm column differs from $1's"
}
# differs REF TAG WHY: the negative controls.
differs() {
  if cmp -s "$TMP/$1.ckpt" "$TMP/$2.ckpt"; then fail "$2: same checkpoint as $1: $3"
  else echo "  $2: differs from $1 (the comparison sees $3)"; fi
}

for opt in sgd adamw; do
  ARGS=(--optimizer "$opt" --clip-grad-norm "$X"); [ "$opt" = sgd ] || ARGS+=(--lr 0.002)
  ref=""
  if [ "$opt" = sgd ]; then CASES="eager:1 eager:2 dmda:2 random:2"; else CASES="eager:1 random:2"; fi
  for c in $CASES; do
    tag="${opt}_${c%%:*}_${c##*:}"
    run "$tag" STARPU_SCHED="${c%%:*}" STARPU_NCPU="${c##*:}" -- "${ARGS[@]}" || continue
    echo "$opt sched=${c%%:*} ncpu=${c##*:}: train_loss=$(result_field "$LINE" train_loss) grad_norm=$(result_field "$LINE" grad_norm)"
    if [ -z "$ref" ]; then
      ref="$tag"
      [ "$(result_field "$LINE" clip_grad_norm)" = "$X" ] || fail "$tag: result line says clip_grad_norm=$(result_field "$LINE" clip_grad_norm)"
      # every step clipped: each step's norm is above X, and there is one per step
      n="$(norms "$tag" | awk -v x="$X" '$1 > x { n++ } END { print n + 0 }')"
      [ "$n" = "$STEPS" ] || fail "$tag: $n of $STEPS steps have a grad_norm above $X (want all: the test must clip)"
    else same "$ref" "$tag"; fi
  done
done

# Negative controls: another X, and none, change the bytes.
if run sgd_x02 STARPU_SCHED=eager STARPU_NCPU=2 -- --clip-grad-norm 0.2; then differs sgd_eager_2 sgd_x02 "the threshold"; fi
if run sgd_none STARPU_SCHED=eager STARPU_NCPU=2 --; then
  differs sgd_eager_2 sgd_none "the clipping"
  [ -z "$(norms sgd_none | tr -d '\n')" ] || fail "without --clip-grad-norm the grad_norm column must be empty"
fi

# A resume with clipping ends on the uninterrupted run's bytes (the coefficient has no state).
RES=(--lr-schedule constant --clip-grad-norm "$X")
if run res_half STARPU_SCHED=lws STARPU_NCPU=2 -- "${RES[@]}" --max-steps 30 &&
   run res_rest STARPU_SCHED=lws STARPU_NCPU=2 -- "${RES[@]}" --resume "$TMP/res_half.ckpt" &&
   run res_whole STARPU_SCHED=random STARPU_NCPU=2 -- "${RES[@]}"; then
  if cmp -s "$TMP/res_whole.ckpt" "$TMP/res_rest.ckpt"; then echo "  resumed at step 30: identical to the uninterrupted run"
  else fail "a run resumed at step 30 with clipping differs from the uninterrupted one"; fi
fi

# Usage.
expect_rc 2 "$STARPU_ANP" train --net lenet5 --clip-grad-norm -1
expect_rc 2 "$STARPU_ANP" train --net lenet5 --clip-grad-norm abc
expect_rc 2 "$STARPU_ANP" train --net lenet5 --clip-grad-norm 1 --mode async
grep -q "clip-grad-norm" <<<"$ERR" || fail "--mode async with clipping: the error does not name the option: $ERR"
expect_rc 2 "$STARPU_ANP" eval --clip-grad-norm 1 --checkpoint "$TMP/sgd_none.ckpt"
expect_rc 2 "$STARPU_ANP" bench --allreduce-bytes 4096 --clip-grad-norm 1
finish
