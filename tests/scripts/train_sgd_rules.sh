#!/usr/bin/env bash
# train_sgd_rules — two SGD rules that end-to-end training alone cannot show, checked through
# the CLI and checkpoints (tests/scripts/sgd_rules.py does the arithmetic):
#   1. Biases and batch-norm gamma/beta get no weight decay (graph/model.c no_decay): one step
#      from the same state with --weight-decay 0 and WD: those tensors are bit-identical, and
#      every other tensor differs by exactly lr * WD * w_before (v = m v + g + WD w, w -= lr v,
#      with the same g in both runs). lenet5 has conv and dense biases, resnet8 batch norms.
#   2. The cosine schedule (the default): step k of a run of T steps uses
#      lr_k = lr/2 (1 + cos(pi k / T)). Resuming from a checkpoint at step k with --max-steps
#      k + 1 takes exactly that one step, so the same difference measures lr_k: k = 0 (lr),
#      k = 1 of 2 (lr/2) and k = 3 of 4 (0.1464 lr); --lr-schedule constant keeps lr.
# Measured (WD 1): the effective rate and the per-tensor residual ||A - B - lr WD w|| / ||lr WD w||
# agree to <= 7.5e-7 at lr 0.05 and <= 5.3e-6 at lr_k = 0.0073 (float rounding of w -= lr v,
# relative to the decay term, grows as lr_k shrinks). Bound 1e-4 for both (19x): a missed decay, a decayed bias, or a wrong step of the
# schedule is off by >= 10% (the closest two rates tested, lr/2 and 0.146 lr, are 3x apart).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: no python3 for the checkpoint arithmetic"; exit 77; }
RULES="$(dirname "$0")/sgd_rules.py"
export STARPU_NCPU=1
LR=0.05 WD=1 TOL=1e-4
# step NET OUT ARGS...: training on synthetic data, one chunk, its checkpoint in OUT
step() {
  local net="$1" out="$2"; shift 2
  "$STARPU_ANP" train --net "$net" --data synthetic --batch 16 --chunks 1 --limit-test 32 --quiet --lr "$LR" \
    --checkpoint "$out" "$@" >/dev/null 2>"$TMP/err" || { fail "$net $*: $(tail -2 "$TMP/err")"; return 1; }
}
# rates BEFORE A B LR_K WHAT: the check, its summary printed
rates() {
  local out rc
  rc=0; out="$(python3 "$RULES" "$1" "$2" "$3" "$WD" "$4" "$TOL")" || rc=$?
  echo "$5: $(tail -1 <<<"$out")"
  [ "$rc" = 0 ] || fail "$5: $(grep FAIL <<<"$out" | head -5)"
}

# 1. no weight decay on biases and batch-norm parameters (first step, constant and cosine)
for net in lenet5 resnet8; do
  step "$net" "$TMP/$net.w0" --max-steps 1 --lr 0 --lr-schedule constant || continue # the initial state
  for sched in constant cosine; do
    step "$net" "$TMP/$net.a" --max-steps 1 --weight-decay 0 --lr-schedule "$sched" &&
      step "$net" "$TMP/$net.b" --max-steps 1 --weight-decay "$WD" --lr-schedule "$sched" &&
      rates "$TMP/$net.w0" "$TMP/$net.a" "$TMP/$net.b" "$LR" "$net, step 0 ($sched)"
  done
done

# 2. the cosine schedule at step k of T = k + 1
for k in 1 3; do
  T=$((k + 1))
  LRK="$(awk -v lr="$LR" -v k="$k" -v t="$T" 'BEGIN { printf "%.9g", 0.5 * lr * (1 + cos(3.14159265358979 * k / t)) }')"
  step lenet5 "$TMP/k$k" --max-steps "$k" --lr-schedule constant || continue
  step lenet5 "$TMP/k$k.a" --resume "$TMP/k$k" --max-steps "$T" --weight-decay 0 &&
    step lenet5 "$TMP/k$k.b" --resume "$TMP/k$k" --max-steps "$T" --weight-decay "$WD" &&
    rates "$TMP/k$k" "$TMP/k$k.a" "$TMP/k$k.b" "$LRK" "lenet5, cosine step $k of $T (lr_k $LRK)"
done
finish
