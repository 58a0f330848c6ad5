#!/usr/bin/env bash
# train_bf16_act_conv — bf16 activation storage on the conv nets (--precision bf16; graph/model.h y_bf16,
# DNN_BF16_ACTIVATIONS): which outputs the plan stores in bf16, and that storing them keeps the same
# command's bits.
#   - resnet8 and resnet20, 2 steps: the result line's bf16_activations=K/N has the K derived here from
#     the net file: the relus and the convs whose every reader takes bf16 (a conv, a two-input add or a
#     batchnorm: graph/ops/conv.c, add.c, batchnorm.c bf16_in), at DNN_FUSE=0 (every relu its own task), 1
#     (the default: a batchnorm+relu's fused task writes the relu's output) and at DNN_FUSE=3 (minus what
#     level 3 never stores: for relu(batchnorm(conv A)) read by one conv B alone, A read by its batchnorm
#     alone (graph/fuse.c dnn_graph_bn_conv), the relu, A's output (its task takes the statistics of its fp32
#     output) and B's (its task applies the batchnorm and writes fp32)); resnet20 on synthetic data (CIFAR's
#     3x32x32); DNN_BF16_ACTIVATIONS=0 gives 0/N with the same N; --precision fp32 prints no bf16_activations.
#   - same command, same bits: resnet8 in 4 chunks, STEPS steps, storage on, STARPU_NCPU=1 (eager) and 2
#     (random): byte-identical checkpoints, with local and with --batchnorm global statistics (whose tasks
#     read the relu mask from bf16 too); storage off ends elsewhere (the storage did run); negative
#     control: DNN_TEST_SUM_ORDER=reverse (another fixed order of the chunk sums) must give other bytes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
need_bf16_cpu
export STARPU_NCUDA=0
A="$STARPU_ANP"
NETS="${DNN_SOURCE_DIR:-$(dirname "$0")/../..}/graph/nets"

# expect_k NET LEVEL -> the relus and convs stored in bf16 at fusion level LEVEL (0, 1 or 3), from the net file.
expect_k() {
  awk -v level="$2" '
    !/^[a-z]/ || $1 == "input" { if ($1 == "input") { op[$2] = "input" } next }
    { op[$2] = $1; ins[$2] = $3; n = split($3, in_, ","); nin[$2] = n; order[++nn] = $2
      for (k = 1; k <= n; k++) { nread[in_[k]]++; reader[in_[k], nread[in_[k]]] = $2 } }
    END {
      # level 3: relu(batchnorm(conv A)) read by one conv B alone, A read by its batchnorm alone (unless A has a
      # bias): B applies the batchnorm and relu itself; none of A, the batchnorm, the relu, B is stored in bf16
      for (j = 1; level >= 3 && j < nn + 1; j++) {
        r = order[j]; b = ins[r]; a = ins[b]
        if (op[r] == "relu" && op[b] == "batchnorm" && nread[b] == 1 && op[a] == "conv" && nread[a] == 1 &&
            nread[r] == 1 && op[reader[r, 1]] == "conv")
          l3[r] = l3[a] = l3[b] = l3[reader[r, 1]] = 1
      }
      K = 0
      for (j = 1; j <= nn; j++) {
        r = order[j]
        if ((op[r] != "relu" && op[r] != "conv") || nread[r] == 0 || l3[r]) continue
        ok = 1
        for (k = 1; k <= nread[r]; k++) {
          q = reader[r, k]
          ok = ok && (op[q] == "conv" || (op[q] == "add" && nin[q] == 2) || (op[q] == "batchnorm" && !l3[q]))
        }
        K += ok
      }
      print K
    }' "$NETS/$1.net"
}

RUN=(train --batch 16 --limit-train 32 --max-steps 2 --no-eval --chunks 2 --seed 1 --quiet)
for net in resnet8 resnet20; do
  DATA=(); [ "$net" = resnet20 ] && DATA=(--data synthetic) # CIFAR's 3x32x32
  grep -q "bias=1" "$NETS/$net.net" && fail "$net: a conv with a bias: expect_k's level-3 rule does not cover it"
  for level in 0 1 3; do
    want="$(expect_k "$net" "$level")"
    line="$(DNN_FUSE=$level "$A" "${RUN[@]}" "${DATA[@]}" --net "$net" --precision bf16 2>"$TMP/err" | tail -1)" \
      || { fail "$net DNN_FUSE=$level: exit $?: $(tail -2 "$TMP/err")"; continue; }
    got="$(result_field "$line" bf16_activations)"
    echo "$net DNN_FUSE=$level: bf16_activations=$got, expected K=$want from the net file"
    [ "${got%/*}" = "$want" ] || fail "$net DNN_FUSE=$level: bf16_activations=$got, want $want/N"
    line="$(DNN_FUSE=$level DNN_BF16_ACTIVATIONS=0 "$A" "${RUN[@]}" "${DATA[@]}" --net "$net" --precision bf16 2>/dev/null | tail -1)" \
      || fail "$net DNN_BF16_ACTIVATIONS=0: exit $?"
    off="$(result_field "$line" bf16_activations)"
    [ "$off" = "0/${got#*/}" ] || fail "$net DNN_FUSE=$level DNN_BF16_ACTIVATIONS=0: bf16_activations=$off, want 0/${got#*/}"
  done
  line="$("$A" "${RUN[@]}" "${DATA[@]}" --net "$net" --precision fp32 2>/dev/null | tail -1)" || fail "$net fp32: exit $?"
  [ -z "$(result_field "$line" bf16_activations)" ] || fail "$net fp32: prints bf16_activations"
done

# Same command, same bits, with the storage on.
STEPS=20
SAME=(train --net resnet8 --precision bf16 --max-steps "$STEPS" --limit-train 640 --batch 32 --no-eval --chunks 4
  --seed 3 --quiet)
# run TAG VAR=VALUE... [-- ARGS...]: one run, its checkpoint in $TMP/TAG.ckpt; prints its train_loss
run() {
  local tag="$1" line rc=0 envs=() extra=(); shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; extra=("$@"); }
  line="$(env "${envs[@]}" "$A" "${SAME[@]}" "${extra[@]}" --checkpoint "$TMP/$tag.ckpt" 2>"$TMP/$tag.err" | tail -1)" || rc=$?
  if [ "$rc" != 0 ] || [ ! -s "$TMP/$tag.ckpt" ]; then fail "$tag: exit $rc: $(tail -2 "$TMP/$tag.err")"; return 1; fi
  echo "$tag: train_loss=$(result_field "$line" train_loss) bf16_activations=$(result_field "$line" bf16_activations)"
}
if run on_1 STARPU_SCHED=eager STARPU_NCPU=1 && run on_2 STARPU_SCHED=random STARPU_NCPU=2; then
  cmp -s "$TMP/on_1.ckpt" "$TMP/on_2.ckpt" && echo "  storage on: 1 and 2 workers byte-identical" \
    || fail "storage on: STARPU_NCPU=1 and 2 give other checkpoints"
  if run off_2 STARPU_SCHED=random STARPU_NCPU=2 DNN_BF16_ACTIVATIONS=0; then
    ! cmp -s "$TMP/on_2.ckpt" "$TMP/off_2.ckpt" || fail "storage on and off give the same bytes: did it run?"
  fi
  if run reverse STARPU_SCHED=random STARPU_NCPU=2 DNN_TEST_SUM_ORDER=reverse; then
    ! cmp -s "$TMP/on_2.ckpt" "$TMP/reverse.ckpt" \
      || fail "negative control: DNN_TEST_SUM_ORDER=reverse gives the same checkpoint: the test cannot see an order"
  fi
fi
if run global_1 STARPU_SCHED=eager STARPU_NCPU=1 -- --batchnorm global &&
   run global_2 STARPU_SCHED=random STARPU_NCPU=2 -- --batchnorm global; then
  cmp -s "$TMP/global_1.ckpt" "$TMP/global_2.ckpt" && echo "  storage on, --batchnorm global: 1 and 2 workers byte-identical" \
    || fail "storage on, --batchnorm global: STARPU_NCPU=1 and 2 give other checkpoints"
fi
finish
