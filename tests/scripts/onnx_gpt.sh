#!/usr/bin/env bash
# onnx_gpt — a GPT exported by `starpu_anp export` runs in onnxruntime to starpu_anp's own
# probabilities (docs/transformers.md, "ONNX"): gpt-tiny (200 AdamW steps) and gpt-nano (20), trained
# on a small text (stopped half-way and resumed: the exported checkpoint is a resumed one),
# exported, checked with onnx.checker and run in onnxruntime on every validation window of the text
# (onnx_check.py tokens); starpu_anp's side is `eval --dump-logits` on the same windows (eval mode,
# the softmax taken in float64 by the script). Every probability of every position within
# TOL = 1e-4 absolute, and every log-probability within TOL (the logits within 1e-4 up to each
# position's constant, which the softmax drops). Negative control: the logits of the half-way
# checkpoint against the final model must fail the comparison. Also: eval's loss equals the
# training run's validation loss, and --dump-logits' errors exit 2 (usage) and 1 (an unwritable
# file) with one line.
# Needs the test venv of scripts/bootstrap.sh (DNN_TEST_PYTHON): without it the test FAILS.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
A="$STARPU_ANP"
PY="${DNN_TEST_PYTHON:-}"
CHECK="$(dirname "$0")/onnx_check.py"
export STARPU_NCPU="${STARPU_NCPU:-2}"
TOL=1e-4
if [ -z "$PY" ] || ! "$PY" -c "import numpy, onnx, onnxruntime" 2>"$TMP/pyerr"; then
  fail "no Python with numpy, onnx and onnxruntime at DNN_TEST_PYTHON='$PY' ($(tail -1 "$TMP/pyerr" 2>/dev/null)); run scripts/bootstrap.sh, which makes it"
  finish
fi
# A deterministic 35 KB text (train_text.sh's): 3,455 validation bytes, 107 windows of gpt-tiny's
# 32 and 26 of gpt-nano's 128.
awk 'BEGIN { split("the lord and god said unto them of israel in that day there was light upon earth", w, " ");
  s = 12345; out = "";
  for (i = 0; i < 7000; i++) { s = (s * 1103515245 + 12345) % 2147483648; out = out w[int(s / 65536) % 17 + 1];
    out = out (s % 7 == 0 ? ".\n" : " ") }
  printf "%s", out }' >"$TMP/t.txt"

for spec in "gpt-tiny 200" "gpt-nano 20"; do
  read -r net steps <<<"$spec"
  TR=(train --net "$net" --text "$TMP/t.txt" --batch 8 --optimizer adamw --lr 0.01 --warmup-steps 5 --max-steps "$steps"
      --val-batches 0 --seed 2 --quiet --checkpoint "$TMP/$net.ckpt")
  rc=0; "$A" "${TR[@]}" --stop-after-steps $((steps / 2)) >/dev/null 2>"$TMP/err" || rc=$?
  [ "$rc" = 3 ] || { tail -3 "$TMP/err" >&2; fail "$net: train --stop-after-steps exited $rc, want 3"; continue; }
  cp "$TMP/$net.ckpt" "$TMP/$net-half.ckpt"
  LINE="$("$A" "${TR[@]}" --resume "$TMP/$net.ckpt" 2>"$TMP/err" | tail -1)" \
    || { tail -3 "$TMP/err" >&2; fail "$net: train --resume failed"; continue; }
  VL="$(result_field "$LINE" test_loss)"
  "$A" export --checkpoint "$TMP/$net.ckpt" --onnx "$TMP/$net.onnx" >"$TMP/exp" 2>"$TMP/err" \
    || { cat "$TMP/err" >&2; fail "$net: export failed"; continue; }
  note_result "$(tail -1 "$TMP/exp")"
  EL="$("$A" eval --checkpoint "$TMP/$net.ckpt" --text "$TMP/t.txt" --batch 8 --dump-logits "$TMP/$net.npy" --quiet \
    2>"$TMP/err" | tail -1)" || { cat "$TMP/err" >&2; fail "$net: eval --dump-logits failed"; continue; }
  [ "$(result_field "$EL" test_loss)" = "$VL" ] || fail "$net: eval --dump-logits' test_loss $(result_field "$EL" test_loss) != the training run's $VL"
  echo "$net: trained $((steps / 2)) + $((steps - steps / 2)) (resumed) steps, validation loss $VL; eval --dump-logits: $(result_field "$EL" samples) windows"
  "$PY" "$CHECK" tokens "$TMP/$net.onnx" "$TMP/t.txt" "$TMP/$net.npy" "$TOL" || fail "$net: onnxruntime and starpu_anp disagree"
  # the negative control: another checkpoint's logits (half-way) against this model
  "$A" eval --checkpoint "$TMP/$net-half.ckpt" --text "$TMP/t.txt" --batch 8 --dump-logits "$TMP/$net-half.npy" --quiet \
    >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "$net: eval of the half-way checkpoint failed"; continue; }
  if "$PY" "$CHECK" tokens "$TMP/$net.onnx" "$TMP/t.txt" "$TMP/$net-half.npy" "$TOL" >"$TMP/neg" 2>&1; then
    fail "$net: the half-way checkpoint's logits pass the comparison with the final model: it cannot see a difference"
  else
    echo "  negative control (the half-way checkpoint's logits): $(grep -o 'max |p[^;]*' "$TMP/neg")"
  fi
done

# --dump-logits: eval only, a path to write; a file it cannot write is a runtime error (1).
expect_rc 2 "$A" train --net gpt-tiny --text "$TMP/t.txt" --dump-logits "$TMP/x.npy" \
  && { [[ "$ERR" == *--dump-logits* ]] || fail "train --dump-logits: $ERR"; }
expect_rc 2 "$A" eval --checkpoint "$TMP/gpt-tiny.ckpt" --text "$TMP/t.txt" --dump-logits "$TMP/no/such/dir/x.npy" \
  && { [[ "$ERR" == *--dump-logits* ]] || fail "--dump-logits into a missing directory: $ERR"; }
expect_rc 2 "$A" eval --checkpoint "$TMP/gpt-tiny.ckpt" --text "$TMP/t.txt" --dump-logits "$TMP" \
  && { [[ "$ERR" == *--dump-logits*"is a directory"* ]] || fail "--dump-logits DIR: $ERR"; }
if [ -w /dev/full ]; then
  expect_rc 1 "$A" eval --checkpoint "$TMP/gpt-tiny.ckpt" --text "$TMP/t.txt" --dump-logits /dev/full --quiet \
    && { [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] && [[ "$ERR" == *"--dump-logits /dev/full"* ]] || fail "--dump-logits /dev/full: $ERR"; }
fi
finish
