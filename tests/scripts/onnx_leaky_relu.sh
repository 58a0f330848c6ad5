#!/usr/bin/env bash
# onnx_leaky_relu — the leaky_relu op exports to ONNX's LeakyRelu and onnxruntime runs it like
# `starpu_anp predict`: a small net with leaky_relu after a conv (alpha=0.1), after a batchnorm
# (the default 0.01) and after a dense layer (a 2-D value, alpha=0.2) trains a few steps on
# synthetic 1x28x28 data, is exported, checked with onnx.checker, and run by onnxruntime on images
# whose predictions starpu_anp also prints: the same top-1 class, probabilities within 1e-4
# (tests/scripts/onnx_check.py). The exported LeakyRelu nodes carry the three alphas.
# Needs the test venv of scripts/bootstrap.sh (DNN_TEST_PYTHON): without it the test FAILS.
source "$(dirname "$0")/lib.sh"
set -euo pipefail
A="$STARPU_ANP"
PY="${DNN_TEST_PYTHON:-}"
CHECK="$(dirname "$0")/onnx_check.py"
export STARPU_NCPU="${STARPU_NCPU:-2}"
if [ -z "$PY" ] || ! "$PY" -c "import numpy, onnx, onnxruntime" 2>"$TMP/pyerr"; then
  fail "no Python with numpy, onnx and onnxruntime at DNN_TEST_PYTHON='$PY' ($(tail -1 "$TMP/pyerr" 2>/dev/null)); run scripts/bootstrap.sh, which makes it"
  finish
fi
cat >"$TMP/lrelu.net" <<'NET'
input x 1 28 28
conv c1 x out=8 k=3 pad=1 bias=1
leaky_relu l1 c1 alpha=0.1
maxpool p1 l1 k=2
conv c2 p1 out=8 k=3 pad=1
batchnorm b2 c2
leaky_relu l2 b2
add a2 l2,p1
avgpool g a2
dense f1 g out=16
leaky_relu l3 f1 alpha=0.2
dense f2 l3 out=10
softmax_xent loss f2
NET
"$A" train --net "$TMP/lrelu.net" --data synthetic --max-steps 6 --batch 32 --lr 0.1 --no-eval \
  --checkpoint "$TMP/lrelu.ckpt" --quiet >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "train failed"; finish; }
line="$("$A" export --checkpoint "$TMP/lrelu.ckpt" --onnx "$TMP/lrelu.onnx" 2>"$TMP/err")" \
  || { cat "$TMP/err" >&2; fail "export failed"; finish; }
line="$(printf '%s\n' "$line" | tail -1)"
echo "$line"
[ "$(result_field "$line" opset)" = 17 ] || fail "export result line: $line"
mkdir -p "$TMP/img"
"$PY" "$CHECK" images "$TMP/img" 1 32 6 11 || fail "writing images"
"$A" predict --checkpoint "$TMP/lrelu.ckpt" "$TMP"/img/img*.png >"$TMP/pred" 2>"$TMP/err" \
  || { cat "$TMP/err" >&2; fail "predict failed"; finish; }
note_result "$(tail -1 "$TMP/pred")"
"$PY" "$CHECK" compare "$TMP/lrelu.onnx" "$TMP/pred" 1e-4 || fail "onnxruntime and predict disagree"
"$PY" - "$TMP/lrelu.onnx" <<'PYEOF' || fail "LeakyRelu nodes"
import sys, onnx
m = onnx.load(sys.argv[1])
got = {n.name: [a.f for a in n.attribute if a.name == "alpha"] for n in m.graph.node if n.op_type == "LeakyRelu"}
want = {"l1": 0.1, "l2": 0.01, "l3": 0.2}
assert sorted(got) == sorted(want), got
for k, v in want.items():
    assert len(got[k]) == 1 and abs(got[k][0] - v) < 1e-7, (k, got[k], v)
print("LeakyRelu nodes:", {k: round(v[0], 7) for k, v in got.items()})
PYEOF
finish
