#!/usr/bin/env bash
# onnx_export — `starpu_anp export` writes standard ONNX that onnxruntime runs like predict:
#   for lenet5 and resnet8 (synthetic data, 1x28x28) and resnet18 trained on an ANP image folder
#   at --input 32 (3x32x32, 9 named classes): train a few steps, export, check the model with
#   onnx.checker, run it with onnxruntime on images and compare with `starpu_anp predict` on the
#   same images: the same top-1 class, probabilities within 1e-4 (tests/scripts/onnx_check.py);
#   a version-1 checkpoint exports given --net; usage and file errors exit 2 and 1 in one line.
# Needs the test venv of scripts/bootstrap.sh (DNN_TEST_PYTHON): without it the test FAILS.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
A="$STARPU_ANP"
PY="${DNN_TEST_PYTHON:-}"
CHECK="$(dirname "$0")/onnx_check.py"
GEN="$DNN_BUILD_DIR/tests/anpgen"
export STARPU_NCPU="${STARPU_NCPU:-2}"
if [ -z "$PY" ] || ! "$PY" -c "import numpy, onnx, onnxruntime" 2>"$TMP/pyerr"; then
  fail "no Python with numpy, onnx and onnxruntime at DNN_TEST_PYTHON='$PY' ($(tail -1 "$TMP/pyerr" 2>/dev/null)); run scripts/bootstrap.sh, which makes it"
  finish
fi
[ -x "$GEN" ] || { fail "$GEN not built"; finish; }

# export_and_compare NAME CKPT C SIZE : export CKPT, predict N images, compare with onnxruntime.
export_and_compare() {
  local name="$1" ck="$2" c="$3" size="$4" dir="$TMP/img-$1"
  mkdir -p "$dir"
  "$PY" "$CHECK" images "$dir" "$c" "$size" 6 7 || { fail "$name: writing images"; return; }
  local line
  line="$("$A" export --checkpoint "$ck" --onnx "$TMP/$name.onnx" 2>"$TMP/err")" \
    || { cat "$TMP/err" >&2; fail "$name: export failed"; return; }
  echo "$line"
  line="$(printf '%s\n' "$line" | tail -1)"
  [ "$(result_field "$line" opset)" = 17 ] || fail "$name: export result line: $line"
  "$A" predict --checkpoint "$ck" "$dir"/img*.png >"$TMP/$name.pred" 2>"$TMP/err" \
    || { cat "$TMP/err" >&2; fail "$name: predict failed"; return; }
  note_result "$(tail -1 "$TMP/$name.pred")"
  "$PY" "$CHECK" compare "$TMP/$name.onnx" "$TMP/$name.pred" 1e-4 || fail "$name: onnxruntime and predict disagree"
}

# LeNet-5 and ResNet-8 (batch norm, residual adds, global pooling), 1x28x28: short side 32.
for net in lenet5 resnet8; do
  "$A" train --net "$net" --data synthetic --max-steps 4 --batch 32 --lr 0.1 --no-eval --checkpoint "$TMP/$net.ckpt" \
    --quiet >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "$net: train failed"; continue; }
  export_and_compare "$net" "$TMP/$net.ckpt" 1 32
done

# ResNet-18 on an ANP folder at --input 32 (class names from the folder): short side 37. A low
# --lr: 3 steps at 0.05 leave batch norm's running statistics far off and the softmax saturated.
"$GEN" "$TMP/set" --per-class 6 --val-per-class 2 >/dev/null || fail "anpgen"
if "$A" train --net resnet18 --input 32 --data "$TMP/set" --max-steps 3 --batch 16 --lr 0.01 --no-eval \
     --checkpoint "$TMP/r18.ckpt" --quiet >/dev/null 2>"$TMP/err"; then
  export_and_compare resnet18 "$TMP/r18.ckpt" 3 37
  "$PY" - "$TMP/resnet18.onnx" <<'EOF' || fail "resnet18: metadata"
import json, sys, onnx
m = onnx.load(sys.argv[1])
meta = {p.key: p.value for p in m.metadata_props}
names = json.loads(meta["class_names"])
assert len(names) == 9 and names[0] == "blue_circle", names
assert [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]] == [3, 32, 32]
assert "input x 3 32 32" in meta["net"] and "out=9" in meta["net"], meta["net"][:200]
print("resnet18 metadata:", names[:3], "...")
EOF
else
  cat "$TMP/err" >&2; fail "resnet18: train failed"
fi

# A version-1 checkpoint (no net inside) exports with --net, to the same outputs.
if [ -f "$TMP/lenet5.ckpt" ]; then
  python3 "$(dirname "$0")/ckpt_v1.py" "$TMP/lenet5.ckpt" "$TMP/l5v1.ckpt" || fail "ckpt_v1.py"
  expect_rc 2 "$A" export --checkpoint "$TMP/l5v1.ckpt" --onnx "$TMP/v1.onnx" && [[ "$ERR" == *--net* ]] \
    || fail "v1 without --net: $ERR"
  "$A" export --net lenet5 --checkpoint "$TMP/l5v1.ckpt" --onnx "$TMP/v1.onnx" >/dev/null 2>"$TMP/err" \
    || { cat "$TMP/err" >&2; fail "v1 export with --net failed"; }
  "$A" predict --net lenet5 --checkpoint "$TMP/l5v1.ckpt" "$TMP"/img-lenet5/img*.png >"$TMP/v1.pred" 2>"$TMP/err" \
    || { cat "$TMP/err" >&2; fail "v1 predict failed"; }
  "$PY" "$CHECK" compare "$TMP/v1.onnx" "$TMP/v1.pred" 1e-4 || fail "v1: onnxruntime and predict disagree"
  cmp -s "$TMP/v1.pred" "$TMP/lenet5.pred" || diff <(grep -v '^result' "$TMP/v1.pred") <(grep -v '^result' "$TMP/lenet5.pred") >/dev/null \
    || fail "v1 and v2 predictions differ"
fi

# Errors: usage (exit 2) and bad files (exit 1), one line each.
one_line() { [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "$1: not one line: $ERR"; }
expect_rc 2 "$A" export --onnx "$TMP/x.onnx" && [[ "$ERR" == *--checkpoint* ]] && one_line "no checkpoint" || fail "no --checkpoint: $ERR"
expect_rc 2 "$A" export --checkpoint "$TMP/lenet5.ckpt" && [[ "$ERR" == *--onnx* ]] && one_line "no onnx" || fail "no --onnx: $ERR"
expect_rc 2 "$A" export --checkpoint "$TMP/lenet5.ckpt" --onnx "$TMP/x.onnx" --batch 4 && [[ "$ERR" == *--batch* ]] \
  || fail "--batch: $ERR"
expect_rc 2 "$A" eval --onnx "$TMP/x.onnx" --checkpoint "$TMP/lenet5.ckpt" && [[ "$ERR" == *--onnx* ]] || fail "eval --onnx: $ERR"
expect_rc 2 "$A" export --checkpoint "$TMP/lenet5.ckpt" --onnx "$TMP/nodir/x.onnx" && [[ "$ERR" == *nodir* ]] \
  || fail "--onnx in a missing directory: $ERR"
expect_rc 2 "$A" export --checkpoint "$TMP/lenet5.ckpt" --onnx "$TMP/x.onnx" --net resnet8 && [[ "$ERR" == *resnet8* ]] \
  && one_line "other net" || fail "export with another --net: $ERR"
expect_rc 2 "$A" export --checkpoint "$TMP/lenet5.ckpt" --onnx "$TMP/x.onnx" --input 32 && [[ "$ERR" == *--input* ]] \
  || fail "export with another --input: $ERR"
head -c 1000 "$TMP/lenet5.ckpt" >"$TMP/cut.ckpt"
expect_rc 1 "$A" export --checkpoint "$TMP/cut.ckpt" --onnx "$TMP/x.onnx" && [[ "$ERR" == *cut.ckpt* ]] && one_line "cut" \
  || fail "truncated checkpoint: $ERR"
[ ! -e "$TMP/x.onnx" ] || fail "a failed export left $TMP/x.onnx"
"$A" export --help >"$TMP/help" 2>&1 || fail "export --help exited non-zero"
grep -q 'probabilities' "$TMP/help" || fail "export --help"
finish
