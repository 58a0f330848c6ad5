#!/usr/bin/env bash
# train_anp_resume — resume is exact on an image folder too: a run killed (-9) right after a
# mid-epoch --checkpoint-every checkpoint and resumed ends with the same final checkpoint (`cmp`)
# and the same train_loss / test_accuracy as an uninterrupted run. The augmentation (random crops
# and flips) is drawn from (seed, global step, sample), so the resumed steps see the same crops.
# One CPU worker: the task order, hence every sum, is the same in every run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
GEN="$DNN_BUILD_DIR/tests/anpgen"
NET="$DNN_SOURCE_DIR/tests/data/anp_small.net"
[ -x "$GEN" ] || { echo "SKIP: $GEN not built"; exit 77; }
export STARPU_NCPU=1 STARPU_NCUDA=0
"$GEN" "$TMP/set" --per-class 24 --val-per-class 6 >/dev/null || { fail "anpgen failed"; finish; }
ARGS=(train --net "$DNN_SOURCE_DIR/tests/data/anp_small.net" --data "$TMP/set" --epochs 3 --batch 16 --lr 0.03)
"$STARPU_ANP" "${ARGS[@]}" --quiet --checkpoint "$TMP/ref.ckpt" >"$TMP/ref.out" 2>"$TMP/ref.err" \
  || { cat "$TMP/ref.err" >&2; fail "uninterrupted run failed"; finish; }
REF="$(tail -1 "$TMP/ref.out")"
echo "uninterrupted: $REF"
CK="$TMP/run.ckpt"
"$STARPU_ANP" "${ARGS[@]}" --quiet --checkpoint "$CK" --checkpoint-every 5 >"$TMP/a.out" 2>"$TMP/a.err" &
pid=$!
for _ in $(seq 6000); do [ -f "$CK" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
kill -9 "$pid" 2>/dev/null
rc=0; wait "$pid" || rc=$?
[ -f "$CK" ] || { cat "$TMP/a.err" >&2; fail "no checkpoint was written (exit $rc)"; finish; }
[ "$rc" = 137 ] || fail "the run was not killed (exit $rc; too short?)"
"$STARPU_ANP" "${ARGS[@]}" --checkpoint "$CK" --resume "$CK" >"$TMP/b.out" 2>"$TMP/b.err" \
  || { cat "$TMP/b.err" >&2; fail "resumed run failed"; finish; }
FINAL="$(tail -1 "$TMP/b.out")"
from="$(sed -n 's/^resumed from .*: epoch [0-9]*, step \([0-9]*\)$/\1/p' "$TMP/b.err" | head -1)"
echo "resumed from step $from: $FINAL"
[ -n "$from" ] && [ "$from" -gt 0 ] || fail "resumed from step '$from'"
for k in steps train_loss test_accuracy test_loss top5_accuracy; do
  [ "$(result_field "$FINAL" $k)" = "$(result_field "$REF" $k)" ] \
    || fail "$k: resumed $(result_field "$FINAL" $k) vs uninterrupted $(result_field "$REF" $k)"
done
cmp -s "$TMP/ref.ckpt" "$CK" || fail "the final checkpoints differ (parameters are not bit-identical)"
finish
