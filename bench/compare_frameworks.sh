#!/usr/bin/env bash
# compare_frameworks.sh — starpu-anp vs current PyTorch and TensorFlow/Keras (CPU), side by side,
# on this machine.
#
# For every net (lenet5 resnet8 resnet20) and batch (64 256), in each of --rounds rounds, it runs
#   starpu_anp bench (all cores, STARPU_NCPU = cores), PyTorch with 1 and 2 threads
#   (bench/pytorch_nets.py, torch.set_num_threads) and TensorFlow/Keras with 1 and 2 threads
#   (bench/tf_nets.py, tf.config.threading intra- and inter-op threads), alternating the order
#   (forward in odd rounds, reversed in even ones), then the 1->2 worker scaling runs
#   (STARPU_NCPU=1 and 2) of the --scaling nets at batch 64.
# Every run is a training step: forward, loss, backward, SGD (momentum, weight decay) update.
# It prints a table of median images/s, the ratio starpu-anp / the best of the other four
# configurations, achieved GFLOP/s against the single-core sgemm rate measured in the same run,
# and the scaling. Raw results: OUT/runs.csv; tables: OUT/report.md; versions: OUT/machine.txt.
#
# Usage: bench/compare_frameworks.sh [options]
#   --rounds N        rounds, interleaved in time: every configuration runs once per round, in
#                     alternating order (default 3: about 15 minutes on the 2-core development VM);
#                     a table of record wants at least 5 on a quiet machine (--reps: old name)
#   --nets "A B"      nets (default "lenet5 resnet8 resnet20")
#   --batches "A B"   batch sizes (default "64 256")
#   --frameworks "A"  the others, any of "pytorch tensorflow" (default both)
#   --scaling "A B"   nets whose STARPU_NCPU=1 vs 2 speedup is measured (default resnet20; "" = none)
#   --steps-scale X   multiply the timed steps per run by X (default 1)
#   --others-max-s S  stop a PyTorch/TensorFlow run's timing after S seconds (default 10; 0 = never):
#                     2 threads can crawl on a busy 2-core machine (--torch-max-s: old name)
#   --build DIR       build directory (default build-bench); it is configured and built if needed
#   --no-build        use DIR as it is
#   --out DIR         results directory (default out/compare-<date>, git-ignored)
#   -h, --help
# Environment: STARPU_SCHED etc. are passed through to starpu_anp (default scheduler: lws).
# PyTorch and TensorFlow are current releases from the Python package index in a venv outside the
# checkout, ~/.cache/starpu-anp/anchors-venv: scripts/bootstrap.sh --with-anchors (run here)
# creates it once; ANCHORS_PY=/path/to/python overrides it (a python that imports both).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh" # the result line
REPS=3
NETS="lenet5 resnet8 resnet20"
BATCHES="64 256"
SCALING="resnet20"
SCALE=1
OTHERS_MAX_S=10
FRAMEWORKS="pytorch tensorflow"
BUILD="$ROOT/build-bench"
DO_BUILD=1
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds|--reps) REPS="$2"; shift ;;
    --nets) NETS="$2"; shift ;;
    --batches) BATCHES="$2"; shift ;;
    --scaling) SCALING="$2"; shift ;;
    --steps-scale) SCALE="$2"; shift ;;
    --others-max-s|--torch-max-s) OTHERS_MAX_S="$2"; shift ;;
    --frameworks) FRAMEWORKS="$2"; shift ;;
    --build) BUILD="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift ;;
    --no-build) DO_BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "compare_frameworks.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "compare_frameworks.sh: --rounds needs a positive integer" >&2; exit 2; }
for f in $FRAMEWORKS; do
  case "$f" in pytorch|tensorflow) ;; *) echo "compare_frameworks.sh: --frameworks: unknown '$f'" >&2; exit 2 ;; esac
done
export TF_CPP_MIN_LOG_LEVEL=2

# ---------------------------------------------------------------- dependencies and build
# env.sh runs bootstrap (Debian packages, the anchors venv, StarPU 1.4) and exports the StarPU
# prefix and the venv's python (STARPU_ANP_ANCHORS_PY).
if [ -n "${ANCHORS_PY:-}" ]; then
  # shellcheck source=../scripts/env.sh
  source "$ROOT/scripts/env.sh" --quiet
  PY="$ANCHORS_PY"
else
  # shellcheck source=../scripts/env.sh
  source "$ROOT/scripts/env.sh" --with-anchors --quiet
  PY="${STARPU_ANP_ANCHORS_PY:?bootstrap did not report the anchors venv}"
fi
[ -x "$PY" ] || { echo "compare_frameworks.sh: no python at $PY" >&2; exit 1; }
if [ "$DO_BUILD" = 1 ]; then
  echo "building starpu_anp in $BUILD ..." >&2
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$BUILD.cmake.log" 2>&1 ||
    { tail -20 "$BUILD.cmake.log" >&2; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target starpu_anp dnn_op_bench >>"$BUILD.cmake.log" 2>&1 ||
    { tail -20 "$BUILD.cmake.log" >&2; exit 1; }
fi
APP="$BUILD/apps/starpu_anp"
OPB="$BUILD/bench/dnn_op_bench"
[ -x "$APP" ] || { echo "compare_frameworks.sh: no $APP (drop --no-build)" >&2; exit 1; }

OUT="${OUT:-$ROOT/out/compare-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
CSV="$OUT/runs.csv"
LOG="$OUT/runs.log"
: >"$LOG"
NCORES="$(nproc)"

# ---------------------------------------------------------------- machine
{
  echo "date: $(date -Is)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $NCORES cores (lscpu: family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p'); avx512f: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no))"
  echo "kernel: $(uname -r)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-<unset>}"
  echo "STARPU_SCHED: ${STARPU_SCHED:-<unset> (lws)}"
  echo "python: $("$PY" -c 'import sys; print(sys.version.split()[0])') ($PY)"
  echo "torch: $("$PY" -c 'import torch; print(torch.__version__, "(MKL)" if torch.backends.mkl.is_available() else "", "(oneDNN)" if torch.backends.mkldnn.is_available() else "", "cpu:", torch.backends.cpu.get_cpu_capability())')"
  echo "tensorflow: $("$PY" -c 'import tensorflow as tf, keras; print(tf.__version__, "keras", keras.__version__)' 2>/dev/null)"
  echo "numpy: $("$PY" -c 'import numpy; print(numpy.__version__)')"
  echo "starpu-anp: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ local changes)')"
} | tee "$OUT/machine.txt" >&2

# ---------------------------------------------------------------- parameter counts
echo "parameter counts (starpu_anp nets vs PyTorch vs TensorFlow):" >&2
"$APP" nets >"$OUT/nets_starpu.txt"
"$PY" "$ROOT/bench/pytorch_nets.py" --params >"$OUT/nets_torch.txt"
"$PY" "$ROOT/bench/tf_nets.py" --params >"$OUT/nets_tf.txt" 2>>"$LOG"
bad=0
for n in $NETS; do
  a="$(awk -v n="$n" '$1 == n { print $4 }' "$OUT/nets_starpu.txt")"
  b="$(awk -v n="$n" '$1 == n { print $2 }' "$OUT/nets_torch.txt")"
  c="$(awk -v n="$n" '$1 == n { print $2 }' "$OUT/nets_tf.txt")"
  if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then ok=ok; else ok=MISMATCH; bad=1; fi
  printf '  %-9s starpu-anp %9s  pytorch %9s  tensorflow %9s  %s\n' "$n" "${a:-?}" "${b:-?}" "${c:-?}" "$ok" \
    | tee -a "$OUT/machine.txt" >&2
done
[ "$bad" = 0 ] || { echo "compare_frameworks.sh: parameter counts differ; the nets are not the same" >&2; exit 1; }

# ---------------------------------------------------------------- runs
# Timed steps per run (x --steps-scale): a few seconds each on the development VM. starpu-anp
# keeps --window steps in flight, so too few timed steps would include the pipeline's fill and
# drain: at least 4 (2 timed steps at batch 256 read about 20% low).
steps_for() { # net batch
  local s
  case "$1:$2" in
    lenet5:64) s=100 ;; lenet5:256) s=40 ;;
    resnet8:64) s=15 ;; resnet8:256) s=6 ;;
    resnet20:64) s=8 ;; resnet20:256) s=4 ;;
    *:64) s=8 ;; *) s=4 ;;
  esac
  awk -v s="$s" -v k="$SCALE" 'BEGIN { v = int(s * k + 0.5); print (v < 2 ? 2 : v) }'
}
warmup_for() { case "$1" in lenet5) echo 5 ;; *) echo 1 ;; esac; }

# kind: "compare" for the side-by-side runs, "scaling" for starpu-anp's 1 -> 2 worker runs;
# compare_report.py pools each kind apart.
echo "round,framework,net,batch,workers,images_per_s,gflops,wall_s,load1,kind" >"$CSV"
field() { anp_result_field "$(cat)" "$1"; } # LINE on stdin

run_starpu() { # round net batch ncpu kind
  local st wu line
  st="$(steps_for "$2" "$3")"; wu="$(warmup_for "$2")"
  line="$(STARPU_NCPU="$4" "$APP" bench --net "$2" --batch "$3" --steps "$st" --warmup "$wu" --quiet 2>>"$LOG" | anp_result_line || true)"
  echo "starpu NCPU=$4 $line" >>"$LOG"
  echo "$1,starpu-anp,$2,$3,$4,$(echo "$line" | field images_per_s),$(echo "$line" | field gflops),$(echo "$line" | field wall_s),$(cut -d' ' -f1 /proc/loadavg),$5" >>"$CSV"
  printf '  %-10s %-8s b%-4s %d worker(s): %8s img/s\n' starpu-anp "$2" "$3" "$4" "$(echo "$line" | field images_per_s)" >&2
}
run_other() { # framework round net batch threads
  local st wu line script
  case "$1" in pytorch) script=pytorch_nets.py ;; tensorflow) script=tf_nets.py ;; esac
  st="$(steps_for "$3" "$4")"; wu="$(warmup_for "$3")"
  # TensorFlow's first call traces the graph: it is never timed (tf_nets.py adds it to warm-up 1).
  line="$(OMP_NUM_THREADS="$5" "$PY" "$ROOT/bench/$script" --net "$3" --batch "$4" --threads "$5" \
            --steps "$st" --warmup "$wu" --max-seconds "$OTHERS_MAX_S" 2>>"$LOG" | anp_result_line || true)"
  echo "$1 threads=$5 $line" >>"$LOG"
  echo "$2,$1,$3,$4,$5,$(echo "$line" | field images_per_s),,$(echo "$line" | field wall_s),$(cut -d' ' -f1 /proc/loadavg),compare" >>"$CSV"
  printf '  %-10s %-8s b%-4s %d thread(s): %8s img/s\n' "$1" "$3" "$4" "$5" "$(echo "$line" | field images_per_s)" >&2
}
# The others of one (net, batch), in order: pytorch 1, pytorch 2, tensorflow 1, tensorflow 2.
OTHERS=()
for f in $FRAMEWORKS; do OTHERS+=("$f 1" "$f 2"); done
run_others() { # round net batch forward|reverse
  local i ft
  for i in "${!OTHERS[@]}"; do
    [ "$4" = forward ] && ft="${OTHERS[$i]}" || ft="${OTHERS[$(( ${#OTHERS[@]} - 1 - i ))]}"
    # shellcheck disable=SC2086
    run_other ${ft% *} "$1" "$2" "$3" ${ft#* }
  done
}

T0=$(date +%s)
for r in $(seq 1 "$REPS"); do
  echo "round $r/$REPS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  for n in $NETS; do
    for b in $BATCHES; do
      if [ $((r % 2)) = 1 ]; then
        run_starpu "$r" "$n" "$b" "$NCORES" compare; run_others "$r" "$n" "$b" forward
      else
        run_others "$r" "$n" "$b" reverse; run_starpu "$r" "$n" "$b" "$NCORES" compare
      fi
    done
  done
  for n in $SCALING; do
    if [ $((r % 2)) = 1 ]; then run_starpu "$r" "$n" 64 1 scaling; run_starpu "$r" "$n" 64 2 scaling
    else run_starpu "$r" "$n" 64 2 scaling; run_starpu "$r" "$n" 64 1 scaling; fi
  done
done
echo "runs took $(( $(date +%s) - T0 )) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2

# ---------------------------------------------------------------- sgemm ceiling, then the report
SGEMM=""
if [ -x "$OPB" ]; then
  "$OPB" --op dense --clock cpu --reps 20 >"$OUT/op_bench_dense.md" 2>&1 || true
  SGEMM="$(sed -n 's/^single-core sgemm[^:]*: \([0-9.]*\) GFLOP.*/\1/p' "$OUT/op_bench_dense.md" | head -1)"
fi
/usr/bin/python3 "$ROOT/bench/compare_report.py" --csv "$CSV" --machine "$OUT/machine.txt" --cores "$NCORES" \
  ${SGEMM:+--sgemm "$SGEMM"} | tee "$OUT/report.md"
echo "raw runs: $CSV; report: $OUT/report.md" >&2
