#!/usr/bin/env bash
# large_batch.sh — test accuracy against global batch for three recipes (issue 28 part 2):
#   sgd    plain SGD, --lr 0.05 at every batch, cosine, no warm-up;
#   scaled SGD with the linear scaling rule (--lr 0.05 for batch 64: --lr-ref-batch 64) and a
#          --warmup-epochs W linear warm-up;
#   lars   LARS (eta 0.001) --lr 0.25 for batch 64, scaled the same way, same warm-up;
# and, with RECIPES naming them, the same two referred to batch 256 instead (Goyal et al.'s
# 0.1 per 256 for SGD): scaled256 (--lr 0.1 --lr-ref-batch 256), lars256 (--lr 1 per 256).
# lenet5 on Fashion-MNIST, EPOCHS epochs each, one run per (recipe, batch), largest batch first
# (they are the fastest). Each run writes --metrics OUT/<recipe>-<batch>.csv; OUT/summary.csv
# gets recipe,batch,lr_peak,warmup_steps,test_accuracy,wall_s; then OUT/large_batch.png
# (gnuplot). Stops launching runs after DEADLINE (epoch seconds, default: none).
# Usage: bench/large_batch.sh [OUT] (env: EPOCHS [3], BATCHES ["4096 1024 256 64"], WARMUP [1],
# RECIPES ["sgd scaled lars"],
# DEADLINE, STARPU_ANP [build/apps/starpu_anp]).
set -u
OUT="${1:-docs/figures/large_batch}"
EPOCHS="${EPOCHS:-3}" WARMUP="${WARMUP:-1}" BATCHES="${BATCHES:-4096 1024 256 64}"
APP="${STARPU_ANP:-build/apps/starpu_anp}"
mkdir -p "$OUT"
[ -f "$OUT/summary.csv" ] || echo "recipe,batch,epochs,lr_peak,warmup_steps,test_accuracy,wall_s" >"$OUT/summary.csv"
for b in $BATCHES; do
  for r in ${RECIPES:-sgd scaled lars}; do
    if [ -n "${DEADLINE:-}" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then echo "deadline: stop before $r $b"; break 2; fi
    grep -q "^$r,$b,$EPOCHS," "$OUT/summary.csv" && continue
    case $r in
      sgd) extra=(--lr 0.05) ;;
      scaled) extra=(--lr 0.05 --lr-ref-batch 64 --warmup-epochs "$WARMUP") ;;
      lars) extra=(--optimizer lars --lr 0.25 --lr-ref-batch 64 --warmup-epochs "$WARMUP") ;;
      scaled256) extra=(--lr 0.1 --lr-ref-batch 256 --warmup-epochs "$WARMUP") ;;
      lars256) extra=(--optimizer lars --lr 1 --lr-ref-batch 256 --warmup-epochs "$WARMUP") ;;
    esac
    line="$(timeout 900 "$APP" train --net lenet5 --data fashion-mnist --batch "$b" --epochs "$EPOCHS" "${extra[@]}" \
            --metrics "$OUT/$r-$b.csv" --quiet 2>"$OUT/$r-$b.err" | tail -1)"
    f() { printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
    acc="$(f test_accuracy)"
    [ -n "$acc" ] || { echo "$r $b: no result (see $OUT/$r-$b.err)"; continue; }
    [ -s "$OUT/$r-$b.err" ] || rm -f "$OUT/$r-$b.err"
    echo "$r,$b,$EPOCHS,$(f lr_peak),$(f warmup_steps),$acc,$(f wall_s)" | tee -a "$OUT/summary.csv"
  done
done
gnuplot <<GP
set terminal pngcairo size 800,500
set output "$OUT/large_batch.png"
set datafile separator ","
set logscale x 2
set xlabel "global batch"
set ylabel "test accuracy after $EPOCHS epochs"
set title "lenet5, Fashion-MNIST, $EPOCHS epochs, warm-up $WARMUP (partial budget: the issue asks 20)"
set key bottom left
set xtics (64, 256, 1024, 4096)
set xrange [48:5600]
set yrange [0:1]
plot for [r in "sgd scaled lars scaled256 lars256"] "< grep '^".r.",' $OUT/summary.csv | sort -t, -k2 -n" using 2:6 with linespoints title r
GP
