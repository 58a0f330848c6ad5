#!/usr/bin/env bash
# large_batch.sh — test accuracy against global batch for a fixed epoch budget.
# Recipes (each a word of RECIPES; NAME@X runs NAME with peak rate X at every batch, a sweep point):
#   sgd     plain SGD, --lr 0.05 at every batch, cosine to 0, no warm-up;
#   scaled  SGD with Goyal et al.'s rule: 0.1 per 256 samples (--lr 0.1 --lr-ref-batch 256),
#           linear warm-up over WARMUP epochs (their 5), then cosine;
#   lars    LARS (eta 0.001), peak LARS_LR x sqrt(batch / 4096) (the square-root rule from the
#           rate LARS_LR chosen at 4,096: docs/large-batch.md says how), same warm-up;
#   lamb    LAMB, peak LAMB_LR x sqrt(batch / 4096), same warm-up.
# BEST RECIPE prints the X of the RECIPE@X run at 4,096 with the lowest final TRAINING loss in
# OUT/summary.csv (a sweep's choice never looks at the test set) and exits.
# NET on Fashion-MNIST, EPOCHS epochs each, one run at a time, in the order of BATCHES x RECIPES.
# Each run writes --metrics OUT/<recipe>-<batch>.csv; OUT/summary.csv gets
# net,recipe,batch,epochs,lr_peak,warmup_steps,train_loss,test_accuracy,wall_s (train_loss: the
# last epoch's mean); then OUT/accuracy_vs_batch.png and OUT/epochs.png (gnuplot).
# SEED [1] is --seed (initialisation and shuffling); give each seed its own OUT, since
# summary.csv's key (net, recipe, batch, epochs) does not hold the seed.
# COMMIT=1 commits OUT after each run. Stops launching runs after DEADLINE (epoch seconds); a run
# is stopped after TIMEOUT seconds [5400].
# Usage: bench/large_batch.sh [OUT] (env: NET [lenet5], EPOCHS [20], BATCHES
# ["8192 4096 1024 256 64"], RECIPES ["sgd scaled lars"], WARMUP [5], LARS_LR [4], LAMB_LR
# [0.01], SEED [1], DEADLINE, TIMEOUT, COMMIT, STARPU_ANP [build/apps/starpu_anp]); PLOT_ONLY=1 only plots.
set -u
OUT="${1:-docs/figures/large_batch_lenet5}"
[ "$OUT" = BEST ] && OUT="$3"
NET="${NET:-lenet5}" EPOCHS="${EPOCHS:-20}" WARMUP="${WARMUP:-5}"
BATCHES="${BATCHES:-8192 4096 1024 256 64}" RECIPES="${RECIPES:-sgd scaled lars}"
APP="${STARPU_ANP:-build/apps/starpu_anp}"
HDR="net,recipe,batch,epochs,lr_peak,warmup_steps,train_loss,test_accuracy,wall_s"

# best NAME: the NAME@X rate at 4,096 with the lowest final training loss (empty if none ran)
best() {
  awk -F, -v n="$NET" -v r="$1@" -v e="$EPOCHS" '$1==n && index($2,r)==1 && $3==4096 && $4==e && $7 ~ /^[0-9]/ \
    { if (!s || $7 < l) { l=$7; x=substr($2,length(r)+1); s=1 } } END { if (s) print x }' "$OUT/summary.csv"
}
if [ "${1:-}" = BEST ]; then best "$2"; exit 0; fi
mkdir -p "$OUT"
[ -f "$OUT/summary.csv" ] || echo "$HDR" >"$OUT/summary.csv"
sqrt_scaled() { awk -v l="$1" -v b="$2" 'BEGIN { printf "%.6g", l * sqrt(b / 4096) }'; }

run_one() { # recipe batch
  local r="$1" b="$2" name="${1%%@*}" fixed="" lr extra line acc loss rc=0
  [ "$name" != "$r" ] && fixed="${r#*@}"
  case $name in
    sgd) extra=(--lr "${fixed:-0.05}") ;;
    scaled) if [ -n "$fixed" ]; then extra=(--lr "$fixed"); else extra=(--lr 0.1 --lr-ref-batch 256); fi
            extra+=(--warmup-epochs "$WARMUP") ;;
    lars|lamb)
      if [ -n "$fixed" ]; then lr="$fixed"
      elif [ "$name" = lars ]; then lr="$(sqrt_scaled "${LARS_LR:-4}" "$b")"
      else lr="$(sqrt_scaled "${LAMB_LR:-0.01}" "$b")"
      fi
      extra=(--optimizer "$name" --lr "$lr" --warmup-epochs "$WARMUP") ;;
    *) echo "unknown recipe $r"; return ;;
  esac
  line="$(set -o pipefail; timeout "${TIMEOUT:-5400}" "$APP" train --net "$NET" --data fashion-mnist --batch "$b" --epochs "$EPOCHS" \
          --seed "${SEED:-1}" "${extra[@]}" --metrics "$OUT/$r-$b.csv" --quiet 2>"$OUT/$r-$b.err" | tail -1)" || rc=$?
  f() { printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
  acc="$(f test_accuracy)"
  [ -n "$acc" ] || { echo "$r $b: no result: exit $rc$([ "$rc" = 137 ] && echo ' (killed: out of memory?)')$([ "$rc" = 124 ] && echo " (TIMEOUT ${TIMEOUT:-5400} s)") (see $OUT/$r-$b.err)"; return; }
  [ -s "$OUT/$r-$b.err" ] || rm -f "$OUT/$r-$b.err"
  loss="$(awk -F, '$1=="train_epoch" { l=$4 } END { print l }' "$OUT/$r-$b.csv")"
  echo "$NET,$r,$b,$EPOCHS,$(f lr_peak),$(f warmup_steps),$loss,$acc,$(f wall_s)" | tee -a "$OUT/summary.csv"
  if [ -n "${COMMIT:-}" ]; then
    git add "$OUT" && git commit -q -m "large_batch: $NET $r at batch $b, $EPOCHS epochs: test accuracy $acc" -- "$OUT" \
      || echo "commit of $r $b failed"
  fi
}

if [ -z "${PLOT_ONLY:-}" ]; then
  for b in $BATCHES; do
    for r in $RECIPES; do
      if [ -n "${DEADLINE:-}" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then echo "deadline: stop before $r $b"; break 2; fi
      grep -q "^$NET,$r,$b,$EPOCHS," "$OUT/summary.csv" && continue
      run_one "$r" "$b"
    done
  done
fi

# plots: the recipes without @ (sweep points are left out)
recipes="$(awk -F, -v n="$NET" -v e="$EPOCHS" 'NR>1 && $1==n && $4==e && $2 !~ /@/ && !s[$2]++ { printf "%s ", $2 }' "$OUT/summary.csv")"
# the targets: batch 64's plain-SGD accuracy less 0.005 (for 1,024) and 0.015 (for 4,096)
base="$(awk -F, -v n="$NET" -v e="$EPOCHS" '$1==n && $2=="sgd" && $3==64 && $4==e { print $8 }' "$OUT/summary.csv")"
targets=""
[ -n "$base" ] && targets=", $base - 0.005 with lines dt 2 lc rgb 'gray40' title 'batch 64 sgd - 0.5%', $base - 0.015 with lines dt 3 lc rgb 'gray60' title 'batch 64 sgd - 1.5%'"
gnuplot <<GP
set terminal pngcairo size 1200,500
set output "$OUT/accuracy_vs_batch.png"
set datafile separator ","
set multiplot layout 1,2 title "$NET, Fashion-MNIST, $EPOCHS epochs: test accuracy against global batch"
set logscale x 2
set xlabel "global batch"
set ylabel "test accuracy after $EPOCHS epochs"
set key bottom left
set xtics (64, 256, 1024, 4096, 8192)
set xrange [48:11000]
set grid
do for [z=0:1] {
  if (z == 0) { set yrange [0:1]; set title "full range" } else { set yrange [0.78:0.93]; set title "zoom: 0.78-0.93"; set key bottom left }
  plot for [r in "$recipes"] "< awk -F, '\$1==\"$NET\" && \$2==\"".r."\" && \$4==$EPOCHS' $OUT/summary.csv | sort -t, -k3 -n" using 3:8 with linespoints title r $targets
}
unset multiplot
GP
n=0; for r in $recipes; do n=$((n + 1)); done
[ "$n" -gt 0 ] || exit 0
gnuplot <<GP
set terminal pngcairo size $((420 * n)),420
set output "$OUT/epochs.png"
set datafile separator ","
set multiplot layout 1,$n title "$NET, Fashion-MNIST: test accuracy per epoch"
set xlabel "epoch"
set ylabel "test accuracy"
set yrange [0.4:0.95]
set xrange [1:$EPOCHS]
set key bottom right
set grid
do for [r in "$recipes"] {
  set title sprintf("%s", r)
  plot for [b in "$BATCHES"] "< grep '^test_epoch,' $OUT/".r."-".b.".csv 2>/dev/null" using 2:5 with linespoints pt 7 ps 0.4 title "batch ".b
}
unset multiplot
GP
