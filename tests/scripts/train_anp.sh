#!/usr/bin/env bash
# train_anp — the ANP app on an image folder written by tests/anpgen (9 classes: 3 colours x 3
# shapes, PNG and JPEG of different sizes, DIR/train + DIR/val, plus 4 corrupt files):
#   - a small CNN at 32x32 reaches top-1 >= 0.9 on val/ in 12 epochs; top-5 and adjective/noun
#     accuracy are in the result line and the JSON report; the 4 corrupt files are skipped and counted;
#   - eval of the checkpoint gives the same accuracy; a folder with other classes is refused;
#   - predict names the right class of training images (and exits 1 on an unreadable one);
#   - a flat folder (no val/) is split by --val-fraction, the same way in train and eval;
#   - usage errors of the new options exit 2.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
GEN="$DNN_BUILD_DIR/tests/anpgen"
NET="$DNN_SOURCE_DIR/tests/data/anp_small.net"
[ -x "$GEN" ] || { echo "SKIP: $GEN not built"; exit 77; }
export STARPU_NCPU="${STARPU_NCPU:-2}"

CORRUPT="$("$GEN" "$TMP/set" --per-class 48 --val-per-class 12 --corrupt | sed -n 's/^corrupt=//p')"
[ "$CORRUPT" = 4 ] || fail "anpgen wrote '$CORRUPT' corrupt files"
COMMON=(--net "$NET" --data "$TMP/set")
OUT="$("$STARPU_ANP" train "${COMMON[@]}" --epochs 12 --batch 16 --lr 0.03 --checkpoint "$TMP/anp.ckpt" \
        --report "$TMP/report.json" 2>"$TMP/err")" || { cat "$TMP/err" >&2; fail "train failed"; finish; }
LINE="$(printf '%s\n' "$OUT" | tail -1)"
echo "$LINE"
[[ "$LINE" == result:* ]] || fail "last line is not the result line: $LINE"
TOP1="$(result_field "$LINE" test_accuracy)"
TOP5="$(result_field "$LINE" top5_accuracy)"
ADJ="$(result_field "$LINE" adjective_accuracy)"
NOUN="$(result_field "$LINE" noun_accuracy)"
fcmp "$TOP1 >= 0.9" || fail "top-1 $TOP1 < 0.9"
fcmp "$TOP5 >= $TOP1 && $ADJ >= $TOP1 && $NOUN >= $TOP1" || fail "top5 $TOP5 / adjective $ADJ / noun $NOUN below top-1 $TOP1"
[ "$(result_field "$LINE" skipped_images)" = 4 ] || fail "skipped_images=$(result_field "$LINE" skipped_images), want 4"
[ -n "$(result_field "$LINE" confused)" ] || fail "no confused= field"
[ "$(grep -c 'warning: skipping unreadable image' "$TMP/err")" = 4 ] || fail "want 4 warnings: $(grep warning "$TMP/err")"
# 9 x 48 images + the 3 corrupt files that are not empty (listed, then skipped when decoded)
grep -q '435 training images in 9 classes' "$TMP/err" || fail "training set size: $(grep images "$TMP/err")"
[ -s "$TMP/report.json" ] || fail "no report"
if command -v python3 >/dev/null; then
  python3 - "$TMP/report.json" "$TOP1" <<'EOF' || fail "report.json: see above"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["classes"] == 9 and len(r["class_names"]) == 9, r["class_names"]
assert r["class_names"][0] == "blue_circle", r["class_names"]
assert r["skipped_images"] == 4 and len(r["skipped_files"]) == 4, r["skipped_files"]
assert abs(r["top1_accuracy"] - float(sys.argv[2])) < 1e-3, r["top1_accuracy"]
for k in ("top5_accuracy", "adjective_accuracy", "noun_accuracy", "most_confused", "images_per_s"):
    assert k in r, k
assert r["evaluated"] == 108 and r["input"] == [3, 32, 32], (r["evaluated"], r["input"])
EOF
fi

# eval: the same accuracy from the checkpoint; another class list is refused
EVAL="$("$STARPU_ANP" eval "${COMMON[@]}" --checkpoint "$TMP/anp.ckpt" 2>"$TMP/err2" | tail -1)" \
  || { cat "$TMP/err2" >&2; fail "eval failed"; }
echo "$EVAL"
[ "$(result_field "$EVAL" test_accuracy)" = "$TOP1" ] || fail "eval accuracy $(result_field "$EVAL" test_accuracy) != $TOP1"
[ "$(result_field "$EVAL" samples)" = 108 ] || fail "eval samples $(result_field "$EVAL" samples)"
"$GEN" "$TMP/other" --per-class 2 --adjectives 4 >/dev/null
expect_rc 1 "$STARPU_ANP" eval --net "$NET" --data "$TMP/other" --val-fraction 0.5 --checkpoint "$TMP/anp.ckpt" && [[ "$ERR" == *anp.ckpt* ]] \
  || fail "checkpoint of 9 classes on a 12-class folder: $ERR"
mkdir -p "$TMP/renamed/train" && cp -r "$TMP/set/val" "$TMP/renamed/val" && cp -r "$TMP/set/train/"* "$TMP/renamed/train/"
mv "$TMP/renamed/train/red_circle" "$TMP/renamed/train/pink_circle"; rm -rf "$TMP/renamed/val/red_circle"
expect_rc 1 "$STARPU_ANP" eval --net "$NET" --data "$TMP/renamed" --checkpoint "$TMP/anp.ckpt" && [[ "$ERR" == *pink_circle* ]] \
  || fail "renamed class: $ERR"

# predict: the right class for training images (2 per class), probabilities in (0, 1]
IMGS=()
for d in "$TMP"/set/train/*_*/; do IMGS+=("$(ls "$d"*.png | head -1)" "$(ls "$d"*.jpg | head -1)"); done
PRED="$("$STARPU_ANP" predict --net "$NET" --checkpoint "$TMP/anp.ckpt" "${IMGS[@]}" 2>"$TMP/err3")" \
  || { cat "$TMP/err3" >&2; fail "predict failed"; }
RIGHT=0
while read -r path best _; do
  want="$(basename "$(dirname "$path")")"
  [ "${best%%=*}" = "$want" ] && RIGHT=$((RIGHT + 1))
  p="${best#*=}"; fcmp "$p > 0 && $p <= 1" || fail "probability $p"
done < <(printf '%s\n' "$PRED" | grep -v '^result:')
echo "predict: $RIGHT of ${#IMGS[@]} right; $(printf '%s\n' "$PRED" | head -1)"
[ "$RIGHT" -ge $(( ${#IMGS[@]} - 1 )) ] || fail "predict: only $RIGHT of ${#IMGS[@]} right"
[ "$(printf '%s\n' "$PRED" | head -1 | wc -w)" = 6 ] || fail "predict line is not 'IMAGE: 5 x class=p'"
expect_rc 1 "$STARPU_ANP" predict --net "$NET" --checkpoint "$TMP/anp.ckpt" "${IMGS[0]}" "$TMP/set/train/red_circle/garbage.jpg" \
  || fail "predict on an unreadable image"
# The checkpoint carries its net (with the class count): --net and --input may be left out, and
# an --input that is not the checkpoint's is a usage error naming it.
PRED2="$("$STARPU_ANP" predict --checkpoint "$TMP/anp.ckpt" "${IMGS[@]}" 2>"$TMP/err3b")" \
  || { cat "$TMP/err3b" >&2; fail "predict without --net failed"; }
[ "$(printf '%s\n' "$PRED2" | grep -v '^result:')" = "$(printf '%s\n' "$PRED" | grep -v '^result:')" ] \
  || fail "predict without --net differs from predict with it"
EVAL2="$("$STARPU_ANP" eval --data "$TMP/set" --checkpoint "$TMP/anp.ckpt" 2>/dev/null | tail -1)"
[ "$(result_field "$EVAL2" test_accuracy)" = "$TOP1" ] || fail "eval without --net: $EVAL2"
expect_rc 2 "$STARPU_ANP" predict --net "$NET" --input 40 --checkpoint "$TMP/anp.ckpt" "${IMGS[0]}" && [[ "$ERR" == *--input* ]] \
  || fail "predict with another --input: $ERR"
expect_rc 2 "$STARPU_ANP" predict --input 40 --checkpoint "$TMP/anp.ckpt" "${IMGS[0]}" && [[ "$ERR" == *--input* ]] \
  || fail "predict with another --input (no --net): $ERR"
expect_rc 2 "$STARPU_ANP" eval --net lenet5 --data "$TMP/set" --checkpoint "$TMP/anp.ckpt" && [[ "$ERR" == *lenet5* ]] \
  || fail "eval with another --net: $ERR"

# a flat folder: --val-fraction split, the same in train and eval; --input resizes the net
"$GEN" "$TMP/flat" --per-class 8 --seed 5 >/dev/null
L2="$("$STARPU_ANP" train --net "$NET" --data "$TMP/flat" --val-fraction 0.25 --input 24 --epochs 1 --batch 8 \
       --checkpoint "$TMP/flat.ckpt" 2>"$TMP/err4" | tail -1)" || { cat "$TMP/err4" >&2; fail "flat train failed"; }
grep -q '54 training images in 9 classes' "$TMP/err4" && grep -q '18 validation images' "$TMP/err4" \
  || fail "flat split: $(grep images "$TMP/err4")"
E2="$("$STARPU_ANP" eval --net "$NET" --data "$TMP/flat" --val-fraction 0.25 --input 24 --checkpoint "$TMP/flat.ckpt" 2>/dev/null | tail -1)"
[ "$(result_field "$E2" samples)" = 18 ] && [ "$(result_field "$E2" test_accuracy)" = "$(result_field "$L2" test_accuracy)" ] \
  || fail "flat eval: $E2 vs $L2"

# usage errors
expect_rc 2 "$STARPU_ANP" train --val-fraction 2
expect_rc 2 "$STARPU_ANP" train --input 0
expect_rc 2 "$STARPU_ANP" predict "${IMGS[0]}"
expect_rc 2 "$STARPU_ANP" predict --checkpoint "$TMP/anp.ckpt"
expect_rc 2 "$STARPU_ANP" predict --checkpoint "$TMP/anp.ckpt" --data "$TMP/set" "${IMGS[0]}"
expect_rc 2 "$STARPU_ANP" bench --report "$TMP/r.json"
finish
