#!/usr/bin/env bash
# train_accuracy — lenet5 on Fashion-MNIST for 1 epoch reaches test_accuracy >= 0.85; the
# checkpoint it writes, loaded by eval, gives the same test accuracy (round trip); the metrics
# CSV has its header and one row per step and per epoch.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
OUT="$("$STARPU_ANP" train --net lenet5 --epochs 1 --checkpoint "$TMP/lenet5.ckpt" --metrics "$TMP/m.csv" 2>"$TMP/err")" \
  || { cat "$TMP/err" >&2; fail "train failed"; finish; }
LINE="$(printf '%s\n' "$OUT" | tail -1)"
echo "$LINE"
[[ "$LINE" == result:* ]] || fail "last stdout line is not the result line: $LINE"
ACC="$(result_field "$LINE" test_accuracy)"
fcmp "$ACC >= 0.85" || fail "test_accuracy $ACC < 0.85"
[ -s "$TMP/lenet5.ckpt" ] || fail "no checkpoint written"
ls "$TMP"/*.tmp.* >/dev/null 2>&1 && fail "temporary checkpoint files left behind"
head -1 "$TMP/m.csv" | grep -q '^kind,epoch,step,loss,accuracy,images_per_s,wall_s,grad_norm$' || fail "metrics header: $(head -1 "$TMP/m.csv")"
[ "$(grep -c '^train_step,' "$TMP/m.csv")" = 937 ] || fail "metrics: $(grep -c '^train_step,' "$TMP/m.csv") step rows, want 937"
grep -q '^test_epoch,1,' "$TMP/m.csv" || fail "metrics: no test_epoch row"

EVAL="$("$STARPU_ANP" eval --net lenet5 --checkpoint "$TMP/lenet5.ckpt" 2>"$TMP/err2" | tail -1)" \
  || { cat "$TMP/err2" >&2; fail "eval failed"; }
echo "$EVAL"
EACC="$(result_field "$EVAL" test_accuracy)"
[ "$EACC" = "$ACC" ] || fail "eval test_accuracy $EACC != train's $ACC"
# The checkpoint carries its net: eval needs no --net, and another --net is a usage error that
# names the checkpoint and the first node that differs.
EVAL2="$("$STARPU_ANP" eval --checkpoint "$TMP/lenet5.ckpt" 2>"$TMP/err3" | tail -1)" || { cat "$TMP/err3" >&2; fail "eval without --net failed"; }
[ "$(result_field "$EVAL2" test_accuracy)" = "$ACC" ] && [ "$(result_field "$EVAL2" net)" = lenet5 ] \
  || fail "eval without --net: $EVAL2"
expect_rc 2 "$STARPU_ANP" eval --net resnet8 --checkpoint "$TMP/lenet5.ckpt" && [[ "$ERR" == *"lenet5.ckpt"* && "$ERR" == *"node 2"* ]] \
  || fail "wrong-net checkpoint: $ERR"
finish
