#!/usr/bin/env bash
# bad_same_net — one notion of "the same net" (graph.h: the canonical net text) in every command
# that pairs a net with a checkpoint. tests/netvariants writes, from the op descriptors, one net per
# key of every op (and the input's channels) that differs from tests/data/every_op.net in that key
# alone; it fails when an op is missing from that net or a key cannot be changed, so a new op or
# key is covered or the test fails. A checkpoint of the every-op net (1 step) is then given each
# variant by train --resume, eval, predict and export, as written now (version 3) and as an
# earlier build wrote it (version 2, tests/scripts/ckpt_v1.py): each must refuse with exit 2 and
# one line naming the node and the key with both values. The unchanged net is accepted by all
# four (so the refusals are about the key), and a version-1 file, which records no float key,
# still refuses a structural change by its hash. The ops that take only sequences (attention,
# embed, lm_head)
# are in a second base, tests/data/every_seq_op.net; no command trains it yet (no token data set
# behind --data), so its checkpoint is its fresh model's (netvariants ckpt), its unchanged net is
# accepted by export, and its variants are refused by all four like the others.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
A="$STARPU_ANP"
V="$DNN_BUILD_DIR/tests/netvariants"
BASE="$DNN_SOURCE_DIR/tests/data/every_op.net"
SEQ="$DNN_SOURCE_DIR/tests/data/every_seq_op.net"
export STARPU_NCPU=1
[ -x "$V" ] || { fail "$V not built"; finish; }
mkdir -p "$TMP/v"
"$V" keys "$BASE" "$TMP/v" "$SEQ" >"$TMP/list" 2>"$TMP/err" || { cat "$TMP/list" "$TMP/err" >&2; fail "netvariants keys"; finish; }
cat "$TMP/list"
COVERED="$(sed -n 's/^covered \([0-9]*\) keys.*/\1/p' "$TMP/list")"
VARIANTS="$(grep -vc "^covered " "$TMP/list" || true)"
if [ -z "$COVERED" ] || [ "$COVERED" -eq 0 ] || [ "$COVERED" != "$VARIANTS" ]; then
  fail "netvariants covered '$COVERED' keys but wrote $VARIANTS variants"
fi

CK="$TMP/every.ckpt"
"$A" train --net "$BASE" --data synthetic --max-steps 1 --batch 8 --no-eval --checkpoint "$CK" --quiet >/dev/null 2>"$TMP/err" \
  || { cat "$TMP/err" >&2; fail "training the every-op net"; finish; }
python3 "$(dirname "$0")/ckpt_v1.py" "$CK" "$TMP/every-v2.ckpt" 2 || fail "ckpt_v1.py 2"
SEQCK="$TMP/seq.ckpt"
"$V" ckpt "$SEQ" "$SEQCK" 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "netvariants ckpt $SEQ"; finish; }
python3 "$(dirname "$0")/ckpt_v1.py" "$SEQCK" "$TMP/seq-v2.ckpt" 2 || fail "ckpt_v1.py 2 (seq)"
python3 "$(dirname "$0")/ckpt_v1.py" "$CK" "$TMP/every-v1.ckpt" 1 || fail "ckpt_v1.py 1"
printf 'P6\n8 8\n255\n' >"$TMP/img.ppm" && head -c 192 /dev/urandom >>"$TMP/img.ppm"

# run CMD NET CKPT: the command given NET and CKPT (its output and status as expect_rc sees them).
# shellcheck disable=SC2317 # called through expect_rc
run() {
  case "$1" in
    train) "$A" train --net "$2" --data synthetic --batch 8 --max-steps 2 --no-eval --resume "$3" --quiet ;;
    eval) "$A" eval --net "$2" --data synthetic --limit 16 --batch 8 --checkpoint "$3" --quiet ;;
    predict) "$A" predict --net "$2" --checkpoint "$3" "$TMP/img.ppm" ;;
    export) "$A" export --net "$2" --checkpoint "$3" --onnx "$TMP/x.onnx" ;;
  esac
}
CMDS="train eval predict export"

# The unchanged net: accepted by all four, from every version.
for ck in "$CK" "$TMP/every-v2.ckpt" "$TMP/every-v1.ckpt"; do
  for cmd in $CMDS; do
    expect_rc 0 run "$cmd" "$BASE" "$ck" || fail "$cmd refuses the checkpoint's own net ($(basename "$ck"))"
  done
done

for ck in "$SEQCK" "$TMP/seq-v2.ckpt"; do
  expect_rc 0 run export "$SEQ" "$ck" || fail "export refuses the token net's own checkpoint ($(basename "$ck"))"
done

# Every variant: refused alike, naming the node and the key.
checks=0
while read -r op key num name new old file; do
  [ "$op" = covered ] && continue
  want="node $num ($name): $key=$new in --net, $key=$old in the checkpoint"
  cks="$CK $TMP/every-v2.ckpt"
  grep -q '^input [^ ]* tokens ' "$file" && cks="$SEQCK $TMP/seq-v2.ckpt"
  for ck in $cks; do
    for cmd in $CMDS; do
      checks=$((checks + 1))
      expect_rc 2 run "$cmd" "$file" "$ck" || continue
      [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "$op.$key ($cmd): not one line: $ERR"
      [[ "$ERR" == "error: --net $file is not the net of $ck: $want"* ]] \
        || fail "$op.$key ($cmd, $(basename "$ck")): '$ERR', want '... $want'"
    done
  done
  echo "$op.$key: refused by $CMDS (versions 3 and 2): $ERR"
done <"$TMP/list"
echo "$checks refusals checked"
[ "$checks" = $((VARIANTS * 8)) ] || fail "$checks refusals checked, want $((VARIANTS * 8))"

# Version 1 records no float key: a structural change is still refused, by its hash.
for cmd in $CMDS; do
  expect_rc 2 run "$cmd" "$TMP/v/conv.out.net" "$TMP/every-v1.ckpt" \
    && { [[ "$ERR" == *"is not the net of $TMP/every-v1.ckpt: its structure hash"* ]] || fail "v1 ($cmd): $ERR"; }
done
finish
