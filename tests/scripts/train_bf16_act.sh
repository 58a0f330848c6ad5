#!/usr/bin/env bash
# train_bf16_act — bf16 activation storage on the transformer path (--precision bf16, graph/model.h
# y_bf16; docs/studies/2026-12-07-act-bf16-gpt.md):
#   1. gpt-nano's result line says bf16_activations=K/N with K and N derived from its net file: K the
#      layernorm, gelu, attention and dense nodes (the ops that write bf16) whose every reader is a
#      dense, an attention or an lm_head's first input (the ops that read it), N the nodes with an
#      output (all but the input and the loss); DNN_BF16_ACTIVATIONS=0 gives 0/N, and an fp32 run
#      has no bf16_activations field;
#   2. exactness: a token net without attention (embed, layernorm, a gelu MLP, lm_head) trains with
#      storage on to the same checkpoint bytes as with it off (each bf16 value stored is the one the
#      reading GEMM rounded the fp32 value to before), while K > 0; the negative control: the one-
#      block GPT (attention's backward reads its stored y for D_t) must differ between on and off;
#   3. same command, same bits: gpt-nano with storage on, 2 chunks on 1 worker (lws) and on 2
#      workers (dmda) write byte-identical checkpoints.
# (Accuracy in bf16 with the storage on: train_bf16's 3-seed rule, which runs with it, the default.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export STARPU_NCPU=1 STARPU_NCUDA=0
unset DNN_BF16_ACTIVATIONS
A="$STARPU_ANP"
need_bf16_cpu
NANO="${DNN_SOURCE_DIR:?}/graph/nets/gpt-nano.net"
text_corpus "$TMP/t.txt"
COMMON=(--text "$TMP/t.txt" --optimizer adamw --lr 0.01 --weight-decay 0 --val-batches 1 --quiet)

# ---- 1: K/N from the net file
read -r K N <<<"$(awk '!/^#/ && NF >= 3 { n++; op[n] = $1; name[n] = $2; ins[n] = $3 }
  END { for (i = 1; i <= n; i++) idx[name[i]] = i
    for (i = 1; i <= n; i++) { m = split(ins[i], a, ","); for (j = 1; j <= m; j++) { w = idx[a[j]]
        ok = op[i] == "dense" || op[i] == "attention" || (op[i] == "lm_head" && j == 1); if (!ok) bad[w] = 1; readers[w]++ } }
    for (i = 1; i <= n; i++) if (op[i] ~ /^(layernorm|gelu|attention|dense)$/ && readers[i] && !bad[i]) k++
    print k + 0, n - 2 }' "$NANO")"
echo "gpt-nano from its net file: $K of $N activations in bf16"
[ "$K" -gt 0 ] || fail "the net file gives no bf16 activation: the derivation is wrong"
nano() { "$A" train --net "$NANO" "${COMMON[@]}" --batch 4 --max-steps 2 "$@" 2>"$TMP/err" | tail -1; }
for v in 1 0; do
  R="$(DNN_BF16_ACTIVATIONS=$v nano --precision bf16)" || fail "gpt-nano bf16, DNN_BF16_ACTIVATIONS=$v: $(tail -2 "$TMP/err")"
  want="$K/$N"; [ "$v" = 1 ] || want="0/$N"
  got="$(result_field "$R" bf16_activations)"
  [ "$got" = "$want" ] || fail "gpt-nano DNN_BF16_ACTIVATIONS=$v: bf16_activations=$got, want $want"
done
R="$(nano --precision fp32)" || fail "gpt-nano fp32: $(tail -2 "$TMP/err")"
[ -z "$(result_field "$R" bf16_activations)" ] || fail "fp32 run has bf16_activations=$(result_field "$R" bf16_activations)"

# ---- 2: storage on = off, bit for bit, without attention; with attention they differ
cat >"$TMP/mlp.net" <<NET
input idx tokens 16
embed tok idx vocab=256 dim=32
layernorm ln1 tok
dense fc ln1 out=128
gelu g fc
dense mlp g out=32
add r tok,mlp
layernorm lnf r
lm_head head lnf,tok
softmax_xent loss head
NET
gpt_block_net "$TMP/gpt.net" 32 4
for net in mlp gpt; do
  for v in 1 0; do
    R="$(DNN_BF16_ACTIVATIONS=$v "$A" train --net "$TMP/$net.net" "${COMMON[@]}" --batch 8 --max-steps 15 --seed 3 \
         --precision bf16 --checkpoint "$TMP/$net$v.ckpt" 2>"$TMP/err" | tail -1)" \
      || fail "$net, DNN_BF16_ACTIVATIONS=$v: $(tail -2 "$TMP/err")"
    [ "$v" = 0 ] || echo "$net: bf16_activations=$(result_field "$R" bf16_activations)"
  done
done
[ "$(result_field "$(DNN_BF16_ACTIVATIONS=1 "$A" train --net "$TMP/mlp.net" "${COMMON[@]}" --batch 8 --max-steps 1 \
  --precision bf16 2>/dev/null | tail -1)" bf16_activations)" = 3/8 ] || fail "mlp net: want bf16_activations=3/8 (ln1, g, lnf)"
cmp -s "$TMP/mlp1.ckpt" "$TMP/mlp0.ckpt" || fail "mlp net: storage on and off wrote different checkpoints (want the same bits)"
cmp -s "$TMP/gpt1.ckpt" "$TMP/gpt0.ckpt" \
  && fail "negative control: the GPT block with storage on and off wrote the same checkpoint (attention's D_t reads the bf16 y: the comparison cannot tell)"

# ---- 3: same bits on 1 and 2 workers, storage on
nano --precision bf16 --chunks 2 --seed 2 --checkpoint "$TMP/w1.ckpt" >/dev/null || fail "gpt-nano 2 chunks, 1 worker"
STARPU_NCPU=2 STARPU_SCHED=dmda nano --precision bf16 --chunks 2 --seed 2 --checkpoint "$TMP/w2.ckpt" >/dev/null \
  || fail "gpt-nano 2 chunks, 2 workers"
cmp -s "$TMP/w1.ckpt" "$TMP/w2.ckpt" || fail "gpt-nano bf16 storage on: 2 chunks on 1 worker (lws) and 2 workers (dmda) differ"
finish
