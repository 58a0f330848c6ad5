#!/usr/bin/env bash
# onnx_ops — the ONNX export of each op with an ONNX row in the op harness's table
# (tests/op_cases.c: onnx_net, onnx_py; `op_harness onnx DIR` writes them): each row's small net
# trains a few steps on synthetic 1x28x28 data, is exported, checked with onnx.checker and run by
# onnxruntime on images whose predictions starpu_anp also prints: the same top-1 class,
# probabilities within 1e-4 (tests/scripts/onnx_check.py); then the row's Python lines check the
# op's nodes (leaky_relu: the LeakyRelu nodes carry their three alphas; dropout: Identity;
# layernorm: LayerNormalization's axis and epsilon; gelu: its nodes give the tanh formula).
# The nets of onnx_export.sh (lenet5, resnet8, resnet18) cover the other ops.
# Needs the test venv of scripts/bootstrap.sh (DNN_TEST_PYTHON): without it the test FAILS.
source "$(dirname "$0")/lib.sh"
set -euo pipefail
A="$STARPU_ANP"
PY="${DNN_TEST_PYTHON:-}"
CHECK="$(dirname "$0")/onnx_check.py"
HARNESS="$DNN_BUILD_DIR/tests/op_harness"
export STARPU_NCPU="${STARPU_NCPU:-2}"
if [ -z "$PY" ] || ! "$PY" -c "import numpy, onnx, onnxruntime" 2>"$TMP/pyerr"; then
  fail "no Python with numpy, onnx and onnxruntime at DNN_TEST_PYTHON='$PY' ($(tail -1 "$TMP/pyerr" 2>/dev/null)); run scripts/bootstrap.sh, which makes it"
  finish
fi
[ -x "$HARNESS" ] || { fail "$HARNESS not built"; finish; }
mkdir -p "$TMP/rows" "$TMP/img"
ops="$("$HARNESS" onnx "$TMP/rows")" || { fail "op_harness onnx"; finish; }
[ -n "$ops" ] || { fail "no op has an ONNX row"; finish; }
"$PY" "$CHECK" images "$TMP/img" 1 32 6 11 || { fail "writing images"; finish; }
for op in $ops; do
  net="$TMP/rows/$op.net"
  "$A" train --net "$net" --data synthetic --max-steps 6 --batch 32 --lr 0.1 --no-eval \
    --checkpoint "$TMP/$op.ckpt" --quiet >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "$op: train failed"; continue; }
  line="$("$A" export --checkpoint "$TMP/$op.ckpt" --onnx "$TMP/$op.onnx" 2>"$TMP/err")" \
    || { cat "$TMP/err" >&2; fail "$op: export failed"; continue; }
  line="$(printf '%s\n' "$line" | tail -1)"
  echo "$op: $line"
  [ "$(result_field "$line" opset)" = 17 ] || fail "$op: export result line: $line"
  "$A" predict --checkpoint "$TMP/$op.ckpt" "$TMP"/img/img*.png >"$TMP/$op.pred" 2>"$TMP/err" \
    || { cat "$TMP/err" >&2; fail "$op: predict failed"; continue; }
  note_result "$(tail -1 "$TMP/$op.pred")"
  "$PY" "$CHECK" compare "$TMP/$op.onnx" "$TMP/$op.pred" 1e-4 || fail "$op: onnxruntime and predict disagree"
  "$PY" "$TMP/rows/$op.py" "$TMP/$op.onnx" || fail "$op: its ONNX nodes"
done
finish
