#!/usr/bin/env bash
# robust_bad_checkpoint — `train --resume` and `eval --checkpoint` given a damaged or foreign
# checkpoint end with one error line naming the file and what is wrong (exit 1), or a usage error
# (exit 2) for a path that is not a file; never a crash, never a run on bad parameters.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
A="$STARPU_ANP"
export STARPU_NCPU=1
GOOD="$TMP/good.ckpt"
"$A" train --data synthetic --max-steps 2 --no-eval --checkpoint "$GOOD" --quiet >/dev/null 2>"$TMP/err" \
  || { cat "$TMP/err" >&2; fail "making the good checkpoint failed"; finish; }
size="$(stat -c %s "$GOOD")"

# name | how to make it | substring of the message
check() {
  local name="$1" want="$2" f="$TMP/$1.ckpt"
  for cmd in "train --data synthetic --max-steps 3 --no-eval --resume" "eval --data synthetic --limit 64 --checkpoint"; do
    # shellcheck disable=SC2086
    expect_rc 1 "$A" ${cmd} "$f" --quiet || continue
    echo "$name (${cmd%% *}): $ERR"
    [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "$name: not one line: $ERR"
    [[ "$ERR" == *"$f"* ]] || fail "$name: message does not name the file: $ERR"
    [[ "$ERR" == *"$want"* ]] || fail "$name: message lacks '$want': $ERR"
  done
}
cp "$GOOD" "$TMP/payload-bit.ckpt"
printf '\x55' | dd of="$TMP/payload-bit.ckpt" bs=1 seek=$((size - 100)) conv=notrunc status=none
check payload-bit "checksum mismatch"
cp "$GOOD" "$TMP/crc.ckpt"
printf '\x00\x00\x00\x00' | dd of="$TMP/crc.ckpt" bs=1 seek=$((size - 4)) conv=notrunc status=none
check crc "checksum mismatch"
head -c $((size / 2)) "$GOOD" >"$TMP/truncated.ckpt"
check truncated "truncated"
head -c 30 "$GOOD" >"$TMP/tiny.ckpt"
check tiny "too short"
: >"$TMP/empty.ckpt"
check empty "empty file"
head -c "$size" /dev/urandom >"$TMP/random.ckpt"
check random "not a checkpoint"
cp "$GOOD" "$TMP/version.ckpt"
printf '\x07' | dd of="$TMP/version.ckpt" bs=1 seek=8 conv=notrunc status=none
check version "version 7 is not supported"
cat "$GOOD" "$GOOD" >"$TMP/doubled.ckpt"
check doubled "bytes"
# A checkpoint of another net (same input and classes, one more hidden unit).
printf 'input x 1 28 28\ndense h x out=17\nrelu r h\ndense o r out=10\nsoftmax_xent loss o\n' >"$TMP/mlp17.net"
printf 'input x 1 28 28\ndense h x out=16\nrelu r h\ndense o r out=10\nsoftmax_xent loss o\n' >"$TMP/mlp16.net"
"$A" train --net "$TMP/mlp17.net" --data synthetic --max-steps 1 --no-eval --checkpoint "$TMP/other.ckpt" --quiet >/dev/null 2>"$TMP/err" \
  || { cat "$TMP/err" >&2; fail "making the other net's checkpoint failed"; }
# The checkpoint carries its net: another --net is a usage error naming the node that differs.
expect_rc 2 "$A" eval --net "$TMP/mlp16.net" --data synthetic --limit 64 --checkpoint "$TMP/other.ckpt" --quiet \
  && echo "other net: $ERR" && { [[ "$ERR" == *"other.ckpt"* && "$ERR" == *"mlp16.net"* && "$ERR" == *"out=17"* \
       && "$(printf '%s\n' "$ERR" | wc -l)" = 1 ]] || fail "other net: $ERR"; }
# A version-1 checkpoint (no net inside) of another net: its structure hash tells, the same usage
# error (exit 2) as any other net (model_ckpt.h dnn_ckpt_check_net), for eval and train --resume.
python3 "$(dirname "$0")/ckpt_v1.py" "$TMP/other.ckpt" "$TMP/other-v1.ckpt" || fail "ckpt_v1.py"
expect_rc 2 "$A" eval --net "$TMP/mlp16.net" --data synthetic --limit 64 --checkpoint "$TMP/other-v1.ckpt" --quiet \
  && echo "other net (v1): $ERR" && { [[ "$ERR" == *"other-v1.ckpt"* && "$ERR" == *"is not the net of"* ]] || fail "other net v1: $ERR"; }
expect_rc 2 "$A" train --net "$TMP/mlp16.net" --data synthetic --max-steps 2 --no-eval --resume "$TMP/other-v1.ckpt" --quiet \
  && echo "other net (v1, train): $ERR" && { [[ "$ERR" == *"other-v1.ckpt"* && "$ERR" == *"is not the net of"* ]] || fail "other net v1 train: $ERR"; }
# ... and without --net it says that --net is needed (usage error).
expect_rc 2 "$A" eval --data synthetic --limit 64 --checkpoint "$TMP/other-v1.ckpt" --quiet \
  && echo "v1 without --net: $ERR" && { [[ "$ERR" == *"other-v1.ckpt"* && "$ERR" == *"--net"* ]] || fail "v1 without --net: $ERR"; }
# Damage inside the net text (the header is CRC-checked before the net is read).
python3 - "$GOOD" "$TMP/net-bit.ckpt" <<'PYEOF' || fail "making net-bit.ckpt"
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.index(b"conv c1")
b[i + 2] ^= 0x20
open(sys.argv[2], "wb").write(b)
PYEOF
expect_rc 1 "$A" eval --data synthetic --limit 64 --checkpoint "$TMP/net-bit.ckpt" --quiet \
  && echo "net-bit: $ERR" && { [[ "$ERR" == *"net-bit.ckpt"* && "$ERR" == *"checksum mismatch"* ]] || fail "net-bit: $ERR"; }
# ... and train --resume, which compares its --net with the net text before loading, says so too,
# whether the damaged text no longer parses or reads as another net (out=6 -> out=7).
python3 - "$GOOD" "$TMP/net-digit.ckpt" <<'PYEOF' || fail "making net-digit.ckpt"
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.index(b"conv c1")
i = b.index(b"out=6", i)
b[i + 4] ^= 0x01
open(sys.argv[2], "wb").write(b)
PYEOF
for f in net-bit net-digit; do
  expect_rc 1 "$A" train --data synthetic --max-steps 3 --no-eval --resume "$TMP/$f.ckpt" --quiet \
    && echo "$f (train): $ERR" && { [[ "$ERR" == *"$f.ckpt"* && "$ERR" == *"checksum mismatch"* ]] || fail "$f (train): $ERR"; }
done
# Not a file: usage errors.
expect_rc 2 "$A" train --data synthetic --resume "$TMP" --quiet && { [[ "$ERR" == *"is a directory"* ]] || fail "directory: $ERR"; }
expect_rc 2 "$A" eval --data synthetic --checkpoint "$TMP/none.ckpt" --quiet && { [[ "$ERR" == *"none.ckpt"* ]] || fail "missing: $ERR"; }
# The good one still loads (the checks above did not break it).
expect_rc 0 "$A" eval --data synthetic --limit 64 --checkpoint "$GOOD" --quiet || fail "the good checkpoint does not load: $ERR"
# An old (version-1) checkpoint still loads, given its --net, and evaluates alike.
python3 "$(dirname "$0")/ckpt_v1.py" "$GOOD" "$TMP/good-v1.ckpt" || fail "ckpt_v1.py"
E2="$("$A" eval --data synthetic --limit 64 --checkpoint "$GOOD" --quiet 2>&1 | tail -1)"
E1="$("$A" eval --net lenet5 --data synthetic --limit 64 --checkpoint "$TMP/good-v1.ckpt" --quiet 2>&1 | tail -1)"
echo "v2: $E2"; echo "v1: $E1"
[ -n "$(result_field "$E1" test_loss)" ] && [ "$(result_field "$E1" test_loss)" = "$(result_field "$E2" test_loss)" ] \
  || fail "version-1 checkpoint with --net: '$E1' vs '$E2'"
finish
