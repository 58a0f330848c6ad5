#!/usr/bin/env bash
# robust_nonfinite — a diverging run (--lr 100) stops with exit 1 and one message that names the
# step and a layer of the net; the checkpoint written before it stays byte-for-byte the same.
# With --checkpoint-every 1 the last checkpoint written must still load: a state whose parameters
# went NaN/Inf is never written over it. (The state of the step just before the NaN loss may still
# be finite-but-exploded: the loss only shows it one forward pass later. docs/ROBUSTNESS.md.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
A="$STARPU_ANP"
export STARPU_NCPU="${STARPU_NCPU:-2}"
CK="$TMP/run.ckpt"
LAYERS='c1|c2|f1|f2|f3' # lenet5's parametrised layers
# names_layer MSG: the message names a layer as a word of its own — "f1.weight", "(layer f1)" —
# not as letters that happen to occur elsewhere, e.g. inside the random temp directory mktemp
# gave $TMP ("scripttest.Xc1f2Q": there the name follows a letter, a digit or a '.').
names_layer() {
  [[ "$1" =~ (^|[^A-Za-z0-9_./-])($LAYERS)(\.[a-z_]+)?([^A-Za-z0-9_./-]|$) ]]
}

"$A" train --data synthetic --max-steps 4 --checkpoint "$CK" --quiet >/dev/null 2>"$TMP/err0" \
  || { cat "$TMP/err0" >&2; fail "the good run failed"; finish; }
cp "$CK" "$TMP/before.ckpt"

# 1. Only epoch-end checkpoints: the run diverges long before the epoch ends.
expect_rc 1 "$A" train --data synthetic --resume "$CK" --checkpoint "$CK" --lr 100 --lr-schedule constant --quiet
echo "diverged: $ERR"
[ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "more than one line: $ERR"
[[ "$ERR" =~ step\ [0-9]+ ]] || fail "message does not name the step: $ERR"
names_layer "$ERR" || fail "message does not name a layer: $ERR"
cmp -s "$CK" "$TMP/before.ckpt" || fail "the checkpoint changed"
ls "$TMP"/*.tmp.* >/dev/null 2>&1 && fail "temporary checkpoint files left behind"

# 2. A checkpoint every step: the last one written must hold a loadable, finite state.
for w in 1 2; do
  cp "$TMP/before.ckpt" "$CK"
  expect_rc 1 "$A" train --data synthetic --resume "$CK" --checkpoint "$CK" --checkpoint-every 1 \
    --window "$w" --lr 100 --lr-schedule constant --quiet
  echo "window $w, checkpoint every step: $ERR"
  [[ "$ERR" =~ step\ [0-9]+ ]] || fail "window $w: message does not name the step: $ERR"
  names_layer "$ERR" || fail "window $w: message does not name a layer: $ERR"
  cmp -s "$CK" "$TMP/before.ckpt" && fail "window $w: no checkpoint was written before the failure (test too weak)"
  expect_rc 0 "$A" eval --data synthetic --checkpoint "$CK" --limit 64 --quiet \
    || fail "window $w: the checkpoint left behind does not load: $ERR"
done
finish
