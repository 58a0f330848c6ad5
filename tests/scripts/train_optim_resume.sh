#!/usr/bin/env bash
# train_optim_resume — for each optimiser (sgd, lars, adamw, lamb), a resume is bit-exact: 16 steps
# straight and 8 steps + a resume for 8 more end with byte-identical checkpoints (every
# parameter and every optimiser state tensor bit for bit: SGD's and LARS's momentum, AdamW's and
# LAMB's m and v, whose bias correction continues from the checkpoint's step count). The warm-up (1.5 epochs
# of 8 steps) spans the split; the schedule is constant after it, so that the half run's shorter
# --max-steps total does not change its rates (the cosine resume is train_anp_resume's). The
# resumed run's --metrics rows must be steps 9 to 16: a --resume that is ignored trains steps 1 to
# 16 to the same bytes (a constant rate, a fixed seed), which the comparisons alone let pass. Then:
# a checkpoint of one optimiser is refused, with one line, by a resume under another; eval reads
# any optimiser's checkpoint. One CPU worker: the task order, hence every sum, is the same.
source "$(dirname "$0")/lib.sh"
set -euo pipefail
export STARPU_NCPU=1 STARPU_NCUDA=0
ARGS=(train --net lenet5 --data synthetic --limit-train 256 --batch 32 --chunks 2 --no-eval --quiet
      --lr-schedule constant --warmup-epochs 1.5 --lr-ref-batch 16 --epochs 2)
for opt in sgd lars adamw lamb; do
  lr=0.02; [ "$opt" = lars ] && lr=1; [ "$opt" = adamw ] && lr=0.0005; [ "$opt" = lamb ] && lr=0.002
  A=("${ARGS[@]}" --optimizer "$opt" --lr "$lr")
  "$STARPU_ANP" "${A[@]}" --checkpoint "$TMP/$opt-ref.ckpt" >"$TMP/$opt-ref.out" 2>"$TMP/$opt.err" \
    || { cat "$TMP/$opt.err" >&2; fail "$opt: uninterrupted run failed"; continue; }
  "$STARPU_ANP" "${A[@]}" --max-steps 8 --checkpoint "$TMP/$opt.ckpt" >"$TMP/$opt-a.out" 2>"$TMP/$opt.err" \
    || { cat "$TMP/$opt.err" >&2; fail "$opt: first half failed"; continue; }
  "$STARPU_ANP" "${A[@]}" --resume "$TMP/$opt.ckpt" --checkpoint "$TMP/$opt.ckpt" --metrics "$TMP/$opt-b.csv" \
    >"$TMP/$opt-b.out" 2>"$TMP/$opt.err" || { cat "$TMP/$opt.err" >&2; fail "$opt: resumed run failed"; continue; }
  # The resumed run must start where the checkpoint stopped: its metrics rows are steps 9..16,
  # one each. (A --resume that is ignored trains 16 fresh steps, rows 1..16, and would reach the
  # same bytes: the comparisons below alone cannot tell.)
  STEPS="$(awk -F, '$1 == "train_step" { printf "%s%s", sep, $3; sep = " " }' "$TMP/$opt-b.csv")"
  [ "$STEPS" = "9 10 11 12 13 14 15 16" ] || fail "$opt: the resumed run trained steps '$STEPS', want 9 to 16"
  REF="$(tail -1 "$TMP/$opt-ref.out")" FINAL="$(tail -1 "$TMP/$opt-b.out")"
  echo "$opt: uninterrupted $(result_field "$REF" steps) steps, train_loss $(result_field "$REF" train_loss); resumed: $(result_field "$FINAL" train_loss)"
  [ "$(result_field "$FINAL" optimizer)" = "$opt" ] || fail "$opt: result line says optimizer=$(result_field "$FINAL" optimizer)"
  [ "$(result_field "$FINAL" warmup_steps)" = 12 ] || fail "$opt: warmup_steps=$(result_field "$FINAL" warmup_steps), want 12"
  [ "$(result_field "$FINAL" steps)" = 16 ] || fail "$opt: the resumed run ends at step $(result_field "$FINAL" steps)"
  [ "$(result_field "$FINAL" train_loss)" = "$(result_field "$REF" train_loss)" ] || fail "$opt: train_loss differs"
  cmp -s "$TMP/$opt-ref.ckpt" "$TMP/$opt.ckpt" || fail "$opt: the final checkpoints differ (not bit-identical)"
done
# lr_peak: --lr 0.02 for a batch of 16, at 32 -> 0.04
[ "$(result_field "$(tail -1 "$TMP/sgd-ref.out")" lr_peak)" = 0.04 ] || fail "sgd: lr_peak is not 0.02 x 32/16"
# Another optimiser's checkpoint: one line, exit 1. (With an --lr: adamw has no default rate.)
for pair in sgd:adamw adamw:lars lars:sgd lamb:adamw adamw:lamb; do
  set -- "${pair%%:*}" "${pair##*:}"
  [ -f "$TMP/$1.ckpt" ] || continue
  rc=0; "$STARPU_ANP" "${ARGS[@]}" --optimizer "$2" --lr 0.001 --resume "$TMP/$1.ckpt" >/dev/null 2>"$TMP/x.err" || rc=$?
  [ "$rc" = 1 ] || fail "resume of a $1 checkpoint with --optimizer $2: exit $rc, want 1"
  if [ "$(wc -l <"$TMP/x.err")" != 1 ] ||
     ! grep -q "^error: .*holds the state of --optimizer $1, this run uses --optimizer $2" "$TMP/x.err"; then
    cat "$TMP/x.err" >&2; fail "resume of a $1 checkpoint with --optimizer $2: not the one line expected"
  fi
done
for opt in lars adamw lamb; do
  [ -f "$TMP/$opt.ckpt" ] || continue
  out="$("$STARPU_ANP" eval --data synthetic --limit 64 --checkpoint "$TMP/$opt.ckpt" 2>"$TMP/e.err" | tail -1)" \
    || { cat "$TMP/e.err" >&2; fail "eval of a $opt checkpoint failed"; }
  [ -n "$(result_field "$out" test_accuracy)" ] || fail "eval of a $opt checkpoint: no test_accuracy in '$out'"
done
# async pushes SGD deltas: the other optimisers are a usage error (one line, exit 2).
rc=0; "$STARPU_ANP" "${ARGS[@]}" --optimizer adamw --mode async >/dev/null 2>"$TMP/x.err" || rc=$?
if [ "$rc" != 2 ] || [ "$(wc -l <"$TMP/x.err")" != 1 ]; then
  cat "$TMP/x.err" >&2; fail "async + adamw: exit $rc, want 2 and one line"
fi
finish
