#!/usr/bin/env bash
# train_bf16_conv_out — convs that write their output in bf16 (--precision bf16; graph/ops/conv.c bf16_out,
# codelets/conv2d.h y_bf16) train end to end, on a net whose convs are read only by ops that take a bf16 input
# (a conv and a two-input add; the ResNets' convs are read by batch norm, whose bf16 input is another change):
#   conv c1 (bias) -> conv c2 -> add(c2, c1) -> relu -> avgpool -> dense
#   - the result line says bf16_activations=2/N (c1 and c2; the relu's reader, avgpool, takes fp32);
#   - each forward path, forced by DNN_CONV_ALGO (auto: the direct path on these few channels; winograd, im2col,
#     onednn), trains: 60 steps (lr 0.1) take the epoch's mean loss 0.1 below ln 10 = 2.303, a uniform guess over
#     the 10 classes (it measured 2.127 in bf16 and fp32 alike), and the same command gives the same bytes with 1
#     worker (eager) and 2 (random);
#   - negative control: DNN_BF16_ACTIVATIONS=0 (c1, c2 stored fp32) ends in other bytes (the storage did run).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
need_bf16_cpu
export STARPU_NCUDA=0
A="$STARPU_ANP"
NET="$TMP/conv_out.net"
cat > "$NET" <<'NETEOF'
input x 1 28 28
conv c1 x out=8 k=3 stride=1 pad=1 bias=1
conv c2 c1 out=8 k=3 stride=1 pad=1
add a c2,c1
relu r a
avgpool pool r
dense fc pool out=10
softmax_xent loss fc
NETEOF
RUN=(train --net "$NET" --precision bf16 --max-steps 60 --limit-train 960 --batch 16 --lr 0.1 --no-eval --chunks 4
  --seed 5 --quiet)
# run TAG VAR=VALUE...: one run, its checkpoint in $TMP/TAG.ckpt, its result line in $TMP/TAG.line
run() {
  local tag="$1" line rc=0; shift
  line="$(env "$@" "$A" "${RUN[@]}" --checkpoint "$TMP/$tag.ckpt" 2>"$TMP/$tag.err" | tail -1)" || rc=$?
  if [ "$rc" != 0 ] || [ ! -s "$TMP/$tag.ckpt" ]; then fail "$tag: exit $rc: $(tail -2 "$TMP/$tag.err")"; return 1; fi
  echo "$line" > "$TMP/$tag.line"
  echo "$tag: epoch_train_loss=$(result_field "$line" epoch_train_loss) bf16_activations=$(result_field "$line" bf16_activations)"
}
for algo in auto winograd im2col onednn; do
  run "${algo}_1" DNN_CONV_ALGO=$algo STARPU_SCHED=eager STARPU_NCPU=1 || continue
  run "${algo}_2" DNN_CONV_ALGO=$algo STARPU_SCHED=random STARPU_NCPU=2 || continue
  line="$(cat "$TMP/${algo}_1.line")"
  got="$(result_field "$line" bf16_activations)"
  [ "${got%/*}" = 2 ] || fail "$algo: bf16_activations=$got, want 2/N (c1, c2)"
  loss="$(result_field "$line" epoch_train_loss)"
  fcmp "$loss == $loss && $loss > 0 && $loss < 2.3026 - 0.1" || fail "$algo: epoch_train_loss=$loss: it did not learn"
  cmp -s "$TMP/${algo}_1.ckpt" "$TMP/${algo}_2.ckpt" && echo "  $algo: 1 and 2 workers byte-identical" \
    || fail "$algo: STARPU_NCPU=1 and 2 give other checkpoints"
done
if run off_2 DNN_BF16_ACTIVATIONS=0 STARPU_SCHED=random STARPU_NCPU=2; then
  off="$(result_field "$(cat "$TMP/off_2.line")" bf16_activations)"
  [ "${off%/*}" = 0 ] || fail "DNN_BF16_ACTIVATIONS=0: bf16_activations=$off, want 0/N"
  ! cmp -s "$TMP/auto_2.ckpt" "$TMP/off_2.ckpt" || fail "negative control: storage on and off give the same bytes"
fi
finish
