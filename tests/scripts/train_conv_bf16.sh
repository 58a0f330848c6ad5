#!/usr/bin/env bash
# train_conv_bf16 — --precision bf16 on the conv nets (convolutions, dense layers in bf16 with fp32
# sums; batch norm, loss and the optimiser fp32): lenet5 and resnet8 train on a subset of
# Fashion-MNIST (the first 4096 (lenet5) or 3072 (resnet8) training images, one epoch at batch 32,
# accuracy on the first LIMIT_TEST test images) in bf16 to the fp32 test accuracy within run-to-run
# noise, 3 seeds each:
#     |mean bf16 - mean fp32| <= the larger of the two spreads (max - min over the seeds) + MARGIN,
# the rule of train_bf16.sh. MARGIN is one standard error of an accuracy measured on LIMIT_TEST
# images, sqrt(p (1 - p) / LIMIT_TEST) at the fp32 mean p (0.0126 at p = 0.8 on 1000 images): the
# two precisions are scored on the same images, so that is what one net's score moves by when it
# gets a few other images right, a noise that 3 seeds' spread may not show. Also: every run learns
# (accuracy above 0.5; 10 classes: 0.1 is a guess), bf16 really ran (its loss differs from the same
# seed's fp32 run), and the same bf16 command (on 256 images, 2 chunks) on 1 worker (eager) and 2 (random) gives
# the same loss bits and checkpoint bytes (negative control: DNN_CONV_ALGO=im2col's checkpoint differs).
# Negative control: the rule must tell apart a run that did train worse: lenet5 in fp32 on 2048
# images (3 seeds) against the 4096-image fp32 runs must fail it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
need_bf16_cpu
export STARPU_NCPU=1 STARPU_NCUDA=0
A="$STARPU_ANP"
LIMIT_TEST=1000
# mean_spread A B C -> "mean spread" (spread: max - min)
mean_spread() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { mx = a > b ? a : b; mx = mx > c ? mx : c
  mn = a < b ? a : b; mn = mn < c ? mn : c; print (a + b + c) / 3, mx - mn }'; }
# within WHAT MEAN_REF SPREAD_REF MEAN SPREAD: |MEAN - MEAN_REF| <= the larger spread + one standard
# error of an accuracy on LIMIT_TEST images at MEAN_REF (says what it compared)
within() {
  local noise
  noise="$(awk -v x="$3" -v y="$5" -v p="$2" -v n="$LIMIT_TEST" 'BEGIN { print (x > y ? x : y) + sqrt(p * (1 - p) / n) }')"
  echo "$1: mean fp32 $2 (spread $3), mean $4 (spread $5): |difference| allowed $noise"
  fcmp "($4 - $2) ^ 2 <= $noise ^ 2"
}

for net in lenet5 resnet8; do
  case "$net" in
  lenet5) RUN=(--net lenet5 --limit-train 4096) ;;
  resnet8) RUN=(--net resnet8 --limit-train 3072) ;;
  esac
  RUN+=(--batch 32 --lr 0.05 --epochs 1 --limit-test "$LIMIT_TEST" --quiet)
  declare -A ACC=() LOSS=()
  for p in fp32 bf16; do
    for s in 1 2 3; do
      RC=0; OUT="$("$A" train "${RUN[@]}" --seed "$s" --precision "$p" 2>"$TMP/err")" || RC=$?
      [ "$RC" = 0 ] || { fail "$net --precision $p --seed $s exited $RC: $(tail -3 "$TMP/err")"; continue; }
      LINE="$(tail -1 <<<"$OUT")"
      ACC[$p$s]="$(result_field "$LINE" test_accuracy)"
      LOSS[$p$s]="$(result_field "$LINE" test_loss)"
    done
  done
  echo "$net test accuracy: fp32 ${ACC[fp321]:-?} ${ACC[fp322]:-?} ${ACC[fp323]:-?}; bf16 ${ACC[bf161]:-?} ${ACC[bf162]:-?} ${ACC[bf163]:-?}"
  [ "${#ACC[@]}" = 6 ] || continue
  read -r MF RF <<<"$(mean_spread "${ACC[fp321]}" "${ACC[fp322]}" "${ACC[fp323]}")"
  read -r MB RB <<<"$(mean_spread "${ACC[bf161]}" "${ACC[bf162]}" "${ACC[bf163]}")"
  within "$net" "$MF" "$RF" "$MB" "$RB" || fail "$net: bf16's mean test accuracy $MB is not within the noise of fp32's $MF"
  if [ "$net" = lenet5 ]; then # the negative control
    for s in 1 2 3; do
      ACC[short$s]="$(result_field "$("$A" train "${RUN[@]}" --limit-train 2048 --seed "$s" 2>/dev/null | tail -1)" test_accuracy)"
    done
    read -r MS RS <<<"$(mean_spread "${ACC[short1]}" "${ACC[short2]}" "${ACC[short3]}")"
    ! within "negative control (2048 images)" "$MF" "$RF" "$MS" "$RS" \
      || fail "negative control: lenet5 on 2048 images ($MS) passed the rule against 4096 images ($MF)"
  fi
  for s in 1 2 3; do
    fcmp "${ACC[bf16$s]} > 0.5 && ${ACC[fp32$s]} > 0.5" || fail "$net seed $s: accuracy ${ACC[fp32$s]} (fp32), ${ACC[bf16$s]} (bf16): not learning"
    [ "${LOSS[bf16$s]}" != "${LOSS[fp32$s]}" ] || fail "$net seed $s: bf16's loss ${LOSS[bf16$s]} is fp32's bit for bit: did bf16 run?"
  done
  # The same command on 1 worker (eager) and 2 (random), the chunks fixed: the same loss and checkpoint bytes (oneDNN's
  # conv and matmul run one thread per task); the checkpoint sees the conv path: im2col's must differ.
  SAME=("${RUN[@]}" --limit-train 256 --limit-test 200 --precision bf16 --chunks 2)
  R1="$(STARPU_SCHED=eager "$A" train "${SAME[@]}" --checkpoint "$TMP/$net.1.ckpt" 2>/dev/null | tail -1)" || fail "$net: bf16 run 1"
  R2="$(STARPU_NCPU=2 STARPU_SCHED=random "$A" train "${SAME[@]}" --checkpoint "$TMP/$net.2.ckpt" 2>/dev/null | tail -1)" \
    || fail "$net: bf16 run 2"
  [ -n "$(result_field "$R1" test_loss)" ] && [ "$(result_field "$R1" test_loss)" = "$(result_field "$R2" test_loss)" ] \
    || fail "$net: bf16 twice: test_loss $(result_field "$R1" test_loss) then $(result_field "$R2" test_loss)"
  cmp -s "$TMP/$net.1.ckpt" "$TMP/$net.2.ckpt" || fail "$net: bf16 on 1 and 2 workers: the checkpoints differ"
  DNN_CONV_ALGO=im2col "$A" train "${SAME[@]}" --checkpoint "$TMP/$net.3.ckpt" >/dev/null 2>&1 || fail "$net: bf16 run 3"
  ! cmp -s "$TMP/$net.1.ckpt" "$TMP/$net.3.ckpt" || fail "$net: DNN_CONV_ALGO=im2col gives auto's checkpoint: the check sees nothing"
  unset ACC LOSS
done
finish
