#!/usr/bin/env bash
# demo.sh — the main job: bootstrap, build, then train LeNet-5 on Fashion-MNIST (Debian's
# dataset-fashion-mnist) as a StarPU task graph, evaluate it after every epoch, write a
# checkpoint, metrics CSV and a loss/accuracy plot into out/demo/.
#
#   scripts/demo.sh                          lenet5, 3 epochs
#   scripts/demo.sh --net resnet8 --epochs 2 any 'starpu_anp train' options replace the defaults
#   STARPU_SCHED=dmda STARPU_NCPU=2 scripts/demo.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=env.sh
source "$ROOT/scripts/env.sh"
# shellcheck source=lib.sh
source "$ROOT/scripts/lib.sh" # the result line
echo "[demo] building in $ROOT/build"
cmake -S "$ROOT" -B "$ROOT/build" >"$ROOT/build.cmake.log" 2>&1 || { cat "$ROOT/build.cmake.log" >&2; exit 1; }
cmake --build "$ROOT/build" -j"$(nproc)" --target starpu_anp >/dev/null
OUT="$ROOT/out/demo"
mkdir -p "$OUT"
ARGS=("$@")
[ "${#ARGS[@]}" -gt 0 ] || ARGS=(--net lenet5 --epochs 3)
echo "[demo] starpu_anp train ${ARGS[*]} --metrics $OUT/metrics.csv --checkpoint $OUT/model.ckpt"
export STARPU_SILENT="${STARPU_SILENT:-1}"
"$ROOT/build/apps/starpu_anp" train "${ARGS[@]}" --metrics "$OUT/metrics.csv" --checkpoint "$OUT/model.ckpt" \
  | tee "$OUT/result.txt"
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,420 font "DejaVu Sans,10"
set output "$OUT/training.png"
set datafile separator ","
set multiplot layout 1,2 title "starpu-anp: net=$(anp_result_field "$(anp_result_line "$OUT/result.txt")" net)"
set xlabel "step"; set ylabel "loss"; set grid
plot "< grep ^train_step $OUT/metrics.csv" using 3:4 with lines lc rgb "#1f77b4" title "train loss (per step)", \
     "< grep ^test_epoch $OUT/metrics.csv" using 3:4 with linespoints lw 2 pt 7 lc rgb "#d62728" title "test loss"
set ylabel "accuracy"; set yrange [0:1]; set key bottom right
plot "< grep ^train_step $OUT/metrics.csv" using 3:5 with lines lc rgb "#1f77b4" title "train accuracy (per step)", \
     "< grep ^test_epoch $OUT/metrics.csv" using 3:5 with linespoints lw 2 pt 7 lc rgb "#d62728" title "test accuracy"
unset multiplot
GP
  echo "[demo] plot: $OUT/training.png"
fi
echo "[demo] checkpoint: $OUT/model.ckpt  (evaluate: build/apps/starpu_anp eval --checkpoint $OUT/model.ckpt; export to ONNX: build/apps/starpu_anp export --checkpoint $OUT/model.ckpt --onnx $OUT/model.onnx)"
