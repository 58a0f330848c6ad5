#!/usr/bin/env bash
# train_text — a language model end to end on a small text (docs/transformers.md "Data",
# "Commands"): a one-block GPT (embed, layernorm, attention, gelu MLP, lm_head tied to the
# embedding) at T = 16 on 35 KB of sentences drawn from 17 words; a net of dense layers only
# (the ids go into the first dense as floats) for the checks that need another vocabulary:
#   1. train (300 steps): the loss falls (the last steps' mean < half the first step's), the
#      validation loss falls from evaluation to evaluation and ends below 2 bits per byte (8 is a
#      uniform guess; the run reaches about 1.2); the metrics CSV keeps its columns and
#      adds tokens_per_s, bits_per_byte after them; --eval-every writes test_step rows, each of the parameters
#      after exactly its step (= a shorter run's final validation loss); the result line's
#      test_bits_per_byte is test_loss / ln 2, its tokens_per_s images_per_s x T;
#   2. train -> --stop-after-steps -> --resume ends byte-identical to the uninterrupted run (the
#      window order is the seeded per-epoch permutation: the same after a resume);
#   3. eval of the checkpoint on the same windows (--val-batches) gives the training run's last
#      validation loss;
#   4. generate: greedy (temperature 0) twice gives the same bytes, the prompt then --tokens
#      bytes; a seeded sampling run repeats itself; sampling among the top 1 is greedy; most of
#      what it writes are words of the text; its argument errors exit 2 with one line;
#      a checkpoint that is no language model, or not a byte-level one (vocabulary 300, from an
#      llm.c token file), is refused (2) naming the reason;
#   5. data errors: --text on an image net, --data on a language model, --val-tokens alone,
#      --text with --tokens (2); invalid UTF-8 and a token >= the vocabulary (1, one line naming
#      the file and the position); no corpus and no --text (2, naming --text FILE);
#   6. predict refuses a language model (exit 2: use generate); --eval-every on an image net adds
#      a test_step row and keeps the images' CSV columns; 2 ranks (mpirun) give the 1-process loss;
#   7. bench on a language model (synthetic tokens) reports tokens_per_s.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export STARPU_NCPU=1 STARPU_NCUDA=0
A="$STARPU_ANP"

text_corpus "$TMP/t.txt" # lib.sh
cat >"$TMP/tiny.net" <<'EOF'
input idx tokens 16
dense h idx out=32
relu r h
dense head r out=256
softmax_xent loss head
EOF
gpt_block_net "$TMP/gpt.net" 32 2
NET=(--net "$TMP/gpt.net" --text "$TMP/t.txt" --batch 16 --optimizer adamw --lr 0.01 --weight-decay 0 --warmup-steps 20
     --seed 5 --quiet)

# ---- 0. a language model without --optimizer gets the language-model recipe, each part only
#         where its option is not given; with --optimizer, nothing of it
LM=(--net "$TMP/gpt.net" --text "$TMP/t.txt" --batch 16 --seed 5 --quiet --max-steps 2 --no-eval)
R0="$("$A" train "${LM[@]}" 2>/dev/null | tail -1)"
for kv in optimizer=adamw lr_peak=0.001 warmup_steps=100 clip_grad_norm=1; do
  [[ " $R0 " == *" $kv "* ]] || fail "language-model recipe: no $kv in: $R0"
done
R1="$("$A" train "${LM[@]}" --lr 0.01 --clip-grad-norm 0 --warmup-steps 5 2>/dev/null | tail -1)"
for kv in optimizer=adamw lr_peak=0.01 warmup_steps=5; do
  [[ " $R1 " == *" $kv "* ]] || fail "language-model recipe with options: no $kv in: $R1"
done
[[ "$R1" != *clip_grad_norm=1* ]] || fail "--clip-grad-norm 0 overridden: $R1"
R2="$("$A" train "${LM[@]}" --optimizer sgd 2>/dev/null | tail -1)"
[[ " $R2 " == *" optimizer=sgd lr_peak=0.05 warmup_steps=0 "* ]] || fail "--optimizer sgd on a language model: $R2"

# ---- 1. train
RC=0; OUT="$("$A" train "${NET[@]}" --max-steps 300 --eval-every 100 --metrics "$TMP/m.csv" \
  --checkpoint "$TMP/a.ckpt" 2>"$TMP/err")" || RC=$?
[ "$RC" = 0 ] || fail "train exited $RC: $(tail -3 "$TMP/err")"
LINE="$(tail -1 <<<"$OUT")"
head -1 "$TMP/m.csv" | grep -qx 'kind,epoch,step,loss,accuracy,images_per_s,wall_s,grad_norm,tokens_per_s,bits_per_byte' \
  || fail "metrics header: $(head -1 "$TMP/m.csv")"
FIRST="$(awk -F, '$1 == "train_step" { print $4; exit }' "$TMP/m.csv")"
LAST="$(awk -F, '$1 == "train_step" { a[n++] = $4 } END { for (i = n - 10; i < n; i++) s += a[i]; print s / 10 }' "$TMP/m.csv")"
fcmp "$LAST < 0.5 * $FIRST" || fail "the loss did not fall: first step $FIRST, mean of the last 10 $LAST"
[ "$(grep -c '^test_step,' "$TMP/m.csv")" = 2 ] || fail "want 2 test_step rows (steps 100, 200): $(grep '^test_step' "$TMP/m.csv")"
awk -F, 'NR > 1 && NF != 10 { bad = 1 } END { exit bad }' "$TMP/m.csv" || fail "a metrics row without 10 fields"
VL="$(result_field "$LINE" test_loss)"; BPB="$(result_field "$LINE" test_bits_per_byte)"
V100="$(awk -F, '$1 == "test_step" && $3 == 100 { print $4 }' "$TMP/m.csv")"
V200="$(awk -F, '$1 == "test_step" && $3 == 200 { print $4 }' "$TMP/m.csv")"
fcmp "$VL < $V200 && $V200 < $V100" || fail "validation loss not falling: $V100 (100), $V200 (200), $VL (300)"
fcmp "$VL / log(2) < 2" || fail "validation loss $VL: $(awk "BEGIN { print $VL / log(2) }") bits per byte, not below 2"
fcmp "($BPB - $VL / log(2)) ^ 2 < 1e-6" || fail "test_bits_per_byte $BPB != test_loss $VL / ln 2"
IPS="$(result_field "$LINE" images_per_s)"; TPS="$(result_field "$LINE" tokens_per_s)"
fcmp "($TPS - 16 * $IPS) ^ 2 < (0.01 * $TPS + 1) ^ 2" || fail "tokens_per_s $TPS != 16 x images_per_s $IPS"
[ "$(result_field "$LINE" context)" = 16 ] || fail "context: $LINE"
echo "train: first loss $FIRST, last $LAST, val $V100, $V200, $VL ($BPB bits/byte), $TPS tokens/s"
# --eval-every evaluates the parameters after exactly that step: with a constant rate, the row of
# step 20 of a 40-step run is the end-of-run validation loss of a 20-step run
"$A" train "${NET[@]}" --lr-schedule constant --max-steps 40 --eval-every 20 --metrics "$TMP/e40.csv" >/dev/null 2>&1 \
  || fail "40 steps"
E20="$("$A" train "${NET[@]}" --lr-schedule constant --max-steps 20 2>/dev/null | tail -1)"
R20="$(awk -F, '$1 == "test_step" && $3 == 20 { print $4 }' "$TMP/e40.csv")"
[ -n "$R20" ] && fcmp "$R20 == $(result_field "$E20" test_loss)" \
  || fail "--eval-every 20's loss $R20 != the 20-step run's $(result_field "$E20" test_loss)"

# ---- 2. stop and resume: byte-identical
RC=0; "$A" train "${NET[@]}" --max-steps 300 --eval-every 100 --checkpoint "$TMP/b.ckpt" --stop-after-steps 150 \
  >/dev/null 2>"$TMP/err" || RC=$?
[ "$RC" = 3 ] || fail "stop-after-steps exited $RC (want 3): $(tail -2 "$TMP/err")"
RC=0; "$A" train "${NET[@]}" --max-steps 300 --eval-every 100 --checkpoint "$TMP/b.ckpt" --resume "$TMP/b.ckpt" \
  >/dev/null 2>"$TMP/err" || RC=$?
[ "$RC" = 0 ] || fail "resume exited $RC: $(tail -2 "$TMP/err")"
cmp -s "$TMP/a.ckpt" "$TMP/b.ckpt" || fail "train -> stop -> resume differs from the uninterrupted run"

# ---- 3. eval on the training run's validation windows
RC=0; EL="$("$A" eval --checkpoint "$TMP/a.ckpt" --text "$TMP/t.txt" --batch 16 --val-batches 20 --quiet 2>"$TMP/err" \
  | tail -1)" || RC=$?
[ "$RC" = 0 ] || fail "eval exited $RC: $(tail -2 "$TMP/err")"
[ "$(result_field "$EL" test_loss)" = "$VL" ] || fail "eval's test_loss $(result_field "$EL" test_loss) != train's $VL"
[ -n "$(result_field "$EL" test_bits_per_byte)" ] || fail "eval: no test_bits_per_byte: $EL"

# ---- 4. generate
G=(generate --checkpoint "$TMP/a.ckpt" --prompt "the lord" --tokens 50 --quiet)
# words FILE: the share of the blank-separated words after the prompt that are the text's words
W=" the lord and god said unto them of israel in that day there was light upon earth "
words() { tail -c +9 "$1" | tr '\n.' '  ' | awk -v w="$W" '{ for (i = 1; i <= NF; i++) { n++; k += index(w, " " $i " ") > 0 } }
  END { print n ? k / n : 0 }'; }
"$A" "${G[@]}" --temperature 0 >"$TMP/g1" 2>"$TMP/err" || fail "generate: $(tail -2 "$TMP/err")"
"$A" "${G[@]}" --temperature 0 --seed 99 >"$TMP/g2" 2>/dev/null || fail "generate (2)"
cmp -s "$TMP/g1" "$TMP/g2" || fail "greedy generation differs between runs: '$(cat "$TMP/g1")' vs '$(cat "$TMP/g2")'"
[ "$(wc -c <"$TMP/g1")" = 58 ] || fail "greedy output is $(wc -c <"$TMP/g1") bytes, want 8 + 50"
[ "$(head -c 8 "$TMP/g1")" = "the lord" ] || fail "the output does not start with the prompt"
"$A" "${G[@]}" --temperature 1 --top-k 5 --seed 3 >"$TMP/s1" 2>/dev/null || fail "generate sampling"
"$A" "${G[@]}" --temperature 1 --top-k 5 --seed 3 >"$TMP/s2" 2>/dev/null || fail "generate sampling (2)"
cmp -s "$TMP/s1" "$TMP/s2" || fail "seeded sampling differs between runs"
"$A" "${G[@]}" --temperature 1.5 --top-k 1 --seed 7 >"$TMP/k1" 2>/dev/null || fail "generate top-k 1"
cmp -s "$TMP/g1" "$TMP/k1" || fail "sampling among the top 1 is not the greedy text: '$(cat "$TMP/k1")'"
echo "greedy: $(tr '\n' '|' <"$TMP/g1")"
echo "sampled: $(tr '\n' '|' <"$TMP/s1")"
fcmp "$(words "$TMP/g1") >= 0.5 && $(words "$TMP/s1") >= 0.5" \
  || fail "generated text is not mostly the text's words: greedy $(words "$TMP/g1"), sampled $(words "$TMP/s1")"
one_line() { [ "$(printf '%s' "$ERR" | wc -l)" = 0 ] && [ -n "$ERR" ] || fail "$1: not one line: $ERR"; }
for bad in "--temperature -1" "--top-k x" "--tokens 0" "--prompt=" "--data x" "--batch 2" "extra"; do
  # shellcheck disable=SC2086
  expect_rc 2 "$A" generate --checkpoint "$TMP/a.ckpt" $bad || fail "generate $bad: want exit 2 ($ERR)"
  one_line "generate $bad"
done
expect_rc 2 "$A" generate --prompt x || fail "generate without --checkpoint"
[[ "$ERR" == *"--checkpoint FILE is required"* ]] || fail "generate without --checkpoint: $ERR"
"$A" train --net lenet5 --data synthetic --max-steps 1 --no-eval --checkpoint "$TMP/l.ckpt" --quiet >/dev/null 2>&1 \
  || fail "lenet5 checkpoint"
expect_rc 2 "$A" generate --checkpoint "$TMP/l.ckpt" || fail "generate on lenet5"
[[ "$ERR" == *"no language model"* ]] || fail "generate on lenet5: $ERR"
# vocabulary 300 from an llm.c token file (header: magic, version 1, count; uint16 tokens)
python3 - "$TMP/v300.bin" <<'EOF'
import struct, sys
n = 5000
toks = [(i * 7919) % 300 for i in range(n)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *toks))
EOF
sed 's/out=256/out=300/' "$TMP/tiny.net" >"$TMP/v300.net"
"$A" train --net "$TMP/v300.net" --tokens "$TMP/v300.bin" --batch 8 --max-steps 2 --optimizer adamw --lr 0.01 \
  --checkpoint "$TMP/v300.ckpt" --quiet >"$TMP/v300.out" 2>"$TMP/err" || fail "llm.c train: $(tail -2 "$TMP/err")"
[ -n "$(result_field "$(tail -1 "$TMP/v300.out")" test_bits_per_token)" ] || fail "llm.c: no bits_per_token: $(tail -1 "$TMP/v300.out")"
expect_rc 2 "$A" generate --checkpoint "$TMP/v300.ckpt" || fail "generate on vocabulary 300"
[[ "$ERR" == *"vocabulary of 300"* ]] || fail "generate on vocabulary 300: $ERR"

# ---- 5. data errors
expect_rc 2 "$A" train --net lenet5 --text "$TMP/t.txt" && [[ "$ERR" == *"no language model"* ]] || fail "--text on lenet5: $ERR"
expect_rc 2 "$A" train --net "$TMP/tiny.net" --data fashion-mnist && [[ "$ERR" == *"--text"* ]] || fail "--data on an LM: $ERR"
expect_rc 2 "$A" train --net "$TMP/tiny.net" --val-tokens "$TMP/v300.bin" || fail "--val-tokens alone: $ERR"
expect_rc 2 "$A" train --net "$TMP/tiny.net" --text "$TMP/t.txt" --tokens "$TMP/v300.bin" || fail "--text with --tokens"
printf 'abc\xff\xfedef and more text to make it long enough for windows of sixteen bytes' >"$TMP/bad.txt"
expect_rc 1 "$A" train --net "$TMP/tiny.net" --text "$TMP/bad.txt" --quiet || fail "invalid UTF-8: $ERR"
[[ "$ERR" == *"bad.txt"*"offset 3"* ]] && one_line "invalid UTF-8" || fail "invalid UTF-8: $ERR"
expect_rc 1 "$A" train --net "$TMP/tiny.net" --tokens "$TMP/v300.bin" --quiet --max-steps 1 --batch 8 \
  --optimizer adamw --lr 0.01 || fail "token >= vocab: $ERR"
[[ "$ERR" == *"v300.bin"*"position 5 is 295"*"256"* ]] && one_line "token >= vocab" || fail "token >= vocab: $ERR"
STARPU_ANP_CACHE="$TMP/nocache" expect_rc 2 "$A" train --net "$TMP/tiny.net" || fail "no corpus: $ERR"
[[ "$ERR" == *"nocache/corpus/kjv.txt"*"--text FILE"* ]] || fail "no corpus: $ERR"
STARPU_ANP_CACHE="$TMP/nocache" "$A" train --net "$TMP/gpt.net" --summary >/dev/null 2>&1 || fail "--summary needs no corpus"
# --summary's memory line: its parts add up to its total, and gpt-nano's parameters are 842,496 x 4 B
MEM="$("$A" train --net gpt-nano --batch 8 --chunks 2 --summary 2>/dev/null | grep '^training memory')"
python3 - "$MEM" <<'PY' || fail "--summary memory line: $MEM"
import re, sys
line = sys.argv[1]
nums = [float(x) for x in re.findall(r'(?:MB =|\+) [a-z ]*?([0-9]+\.[0-9])', line)]
total = float(re.search(r': ([0-9.]+) MB =', line).group(1))
params = float(re.search(r'parameters ([0-9.]+)', line).group(1))
assert '--batch 8, --chunks 2' in line and 'adamw' in line, line
assert abs(params - 842496 * 4 / 1e6) < 0.06, params
assert abs(sum(nums) - total) < 0.3, (nums, total)
PY

expect_rc 2 "$A" predict --checkpoint "$TMP/a.ckpt" "$TMP/t.txt" && [[ "$ERR" == *"use generate"* ]] \
  || fail "predict on a language model: $ERR"
# --eval-every on an image net too: one test_step row (step 2; step 4 ends the run), the CSV unchanged
"$A" train --net lenet5 --data synthetic --limit-test 64 --max-steps 4 --eval-every 2 --metrics "$TMP/l.csv" --quiet \
  >/dev/null 2>&1 || fail "lenet5 --eval-every"
[ "$(grep -c '^test_step,1,2,' "$TMP/l.csv")" = 1 ] && head -1 "$TMP/l.csv" | grep -qx 'kind,epoch,step,loss,accuracy,images_per_s,wall_s,grad_norm' \
  || fail "lenet5 --eval-every: $(cat "$TMP/l.csv")"

# ---- 6. two ranks train as one process (sync: the same global batch)
if command -v mpirun >/dev/null; then
  L1="$("$A" train "${NET[@]}" --max-steps 20 2>/dev/null | tail -1)"
  L2="$(timeout 300 "${ANP_MPIRUN[@]}" -np 2 "$A" train "${NET[@]}" --max-steps 20 2>/dev/null | tail -1)"
  T1="$(result_field "$L1" train_loss)" T2="$(result_field "$L2" train_loss)"
  fcmp "($T1 - $T2) ^ 2 < (1e-4 * $T1) ^ 2" || fail "2 ranks: train_loss $T2, 1 process: $T1"
  [ "$(result_field "$L2" ranks)" = 2 ] || fail "2 ranks: $L2"
else
  echo "note: no mpirun, the 2-rank run is not part of this run"
fi

# ---- 7. bench
BL="$("$A" bench --net "$TMP/gpt.net" --batch 8 --steps 3 --warmup 1 --quiet 2>"$TMP/err" | tail -1)" \
  || fail "bench: $(tail -2 "$TMP/err")"
fcmp "$(result_field "$BL" tokens_per_s) > 0" || fail "bench: tokens_per_s: $BL"
finish
