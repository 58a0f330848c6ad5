#!/usr/bin/env bash
# compare_pytorch.sh — starpu-anp vs PyTorch (CPU), side by side, on this machine.
#
# For every net (lenet5 resnet8 resnet20) and batch (64 256), in each of --reps rounds, it runs
#   starpu_anp bench (all cores, STARPU_NCPU = cores), then PyTorch with 1 thread and with
#   2 threads (bench/pytorch_nets.py, torch.set_num_threads), alternating which goes first
#   from round to round, and the 1->2 worker scaling runs (STARPU_NCPU=1 and 2) of the
#   --scaling nets at batch 64.
# It prints a table of median images/s, the ratio starpu-anp / PyTorch's better thread count,
# achieved GFLOP/s against the single-core sgemm rate measured in the same run, and the
# scaling. Raw results: OUT/runs.csv; tables: OUT/report.md.
#
# Usage: bench/compare_pytorch.sh [options]
#   --reps N          rounds (default 3: about 10 minutes on the 2-core development VM)
#   --nets "A B"      nets (default "lenet5 resnet8 resnet20")
#   --batches "A B"   batch sizes (default "64 256")
#   --scaling "A B"   nets whose STARPU_NCPU=1 vs 2 speedup is measured (default resnet20; "" = none)
#   --steps-scale X   multiply the timed steps per run by X (default 1)
#   --torch-max-s S   stop a PyTorch run's timing after S seconds (default 10; 0 = never): 2 threads
#                     can crawl on a busy 2-core machine
#   --build DIR       build directory (default build-bench); it is configured and built if needed
#   --no-build        use DIR as it is
#   --out DIR         results directory (default out/compare-<date>, git-ignored)
#   -h, --help
# Environment: STARPU_SCHED etc. are passed through to starpu_anp (default scheduler: lws).
# PyTorch is Debian's python3-torch under /usr/bin/python3; scripts/bootstrap.sh --with-torch
# installs it (this is the only script that asks for it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS=3
NETS="lenet5 resnet8 resnet20"
BATCHES="64 256"
SCALING="resnet20"
SCALE=1
TORCH_MAX_S=10
BUILD="$ROOT/build-bench"
DO_BUILD=1
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS="$2"; shift ;;
    --nets) NETS="$2"; shift ;;
    --batches) BATCHES="$2"; shift ;;
    --scaling) SCALING="$2"; shift ;;
    --steps-scale) SCALE="$2"; shift ;;
    --torch-max-s) TORCH_MAX_S="$2"; shift ;;
    --build) BUILD="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift ;;
    --no-build) DO_BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "compare_pytorch.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "compare_pytorch.sh: --reps needs a positive integer" >&2; exit 2; }
PY=/usr/bin/python3

# ---------------------------------------------------------------- dependencies and build
# env.sh runs bootstrap (Debian packages incl. python3-torch, StarPU 1.4) and exports its prefix.
# shellcheck source=../scripts/env.sh
source "$ROOT/scripts/env.sh" --with-torch --quiet
"$PY" -c "import torch" 2>/dev/null || { echo "compare_pytorch.sh: $PY cannot import torch" >&2; exit 1; }
if [ "$DO_BUILD" = 1 ]; then
  echo "building starpu_anp in $BUILD ..." >&2
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$BUILD.cmake.log" 2>&1 ||
    { tail -20 "$BUILD.cmake.log" >&2; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target starpu_anp dnn_op_bench >>"$BUILD.cmake.log" 2>&1 ||
    { tail -20 "$BUILD.cmake.log" >&2; exit 1; }
fi
APP="$BUILD/apps/starpu_anp"
OPB="$BUILD/bench/dnn_op_bench"
[ -x "$APP" ] || { echo "compare_pytorch.sh: no $APP (drop --no-build)" >&2; exit 1; }

OUT="${OUT:-$ROOT/out/compare-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
CSV="$OUT/runs.csv"
LOG="$OUT/runs.log"
: >"$LOG"
NCORES="$(nproc)"

# ---------------------------------------------------------------- machine
{
  echo "date: $(date -Is)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $NCORES cores"
  echo "kernel: $(uname -r)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-<unset>}"
  echo "STARPU_SCHED: ${STARPU_SCHED:-<unset> (lws)}"
  echo "torch: $("$PY" -c 'import torch; print(torch.__version__, "mkldnn" if torch.backends.mkldnn.is_available() else "")')"
  echo "starpu-anp: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ local changes)')"
} | tee "$OUT/machine.txt" >&2

# ---------------------------------------------------------------- parameter counts
echo "parameter counts (starpu_anp nets vs PyTorch):" >&2
"$APP" nets >"$OUT/nets_starpu.txt"
"$PY" "$ROOT/bench/pytorch_nets.py" --params >"$OUT/nets_torch.txt"
bad=0
for n in $NETS; do
  a="$(awk -v n="$n" '$1 == n { print $4 }' "$OUT/nets_starpu.txt")"
  b="$(awk -v n="$n" '$1 == n { print $2 }' "$OUT/nets_torch.txt")"
  if [ -n "$a" ] && [ "$a" = "$b" ]; then ok=ok; else ok=MISMATCH; bad=1; fi
  printf '  %-9s starpu-anp %9s  pytorch %9s  %s\n' "$n" "${a:-?}" "${b:-?}" "$ok" | tee -a "$OUT/machine.txt" >&2
done
[ "$bad" = 0 ] || { echo "compare_pytorch.sh: parameter counts differ; the nets are not the same" >&2; exit 1; }

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

echo "round,framework,net,batch,workers,images_per_s,gflops,wall_s,load1" >"$CSV"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | tail -1; }

run_starpu() { # round net batch ncpu
  local st wu line
  st="$(steps_for "$2" "$3")"; wu="$(warmup_for "$2")"
  line="$(STARPU_NCPU="$4" "$APP" bench --net "$2" --batch "$3" --steps "$st" --warmup "$wu" --quiet 2>>"$LOG" | tail -1)"
  echo "starpu NCPU=$4 $line" >>"$LOG"
  echo "$1,starpu-anp,$2,$3,$4,$(echo "$line" | field images_per_s),$(echo "$line" | field gflops),$(echo "$line" | field wall_s),$(cut -d' ' -f1 /proc/loadavg)" >>"$CSV"
  printf '  %-10s %-8s b%-4s %d worker(s): %8s img/s\n' starpu-anp "$2" "$3" "$4" "$(echo "$line" | field images_per_s)" >&2
}
run_torch() { # round net batch threads
  local st wu line
  st="$(steps_for "$2" "$3")"; wu="$(warmup_for "$2")"
  line="$(OMP_NUM_THREADS="$4" "$PY" "$ROOT/bench/pytorch_nets.py" --net "$2" --batch "$3" --threads "$4" \
            --steps "$st" --warmup "$wu" --max-seconds "$TORCH_MAX_S" 2>>"$LOG" | tail -1)"
  echo "torch threads=$4 $line" >>"$LOG"
  echo "$1,pytorch,$2,$3,$4,$(echo "$line" | field images_per_s),,$(echo "$line" | field wall_s),$(cut -d' ' -f1 /proc/loadavg)" >>"$CSV"
  printf '  %-10s %-8s b%-4s %d thread(s): %8s img/s\n' pytorch "$2" "$3" "$4" "$(echo "$line" | field images_per_s)" >&2
}

T0=$(date +%s)
for r in $(seq 1 "$REPS"); do
  echo "round $r/$REPS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  for n in $NETS; do
    for b in $BATCHES; do
      if [ $((r % 2)) = 1 ]; then
        run_starpu "$r" "$n" "$b" "$NCORES"; run_torch "$r" "$n" "$b" 1; run_torch "$r" "$n" "$b" 2
      else
        run_torch "$r" "$n" "$b" 2; run_torch "$r" "$n" "$b" 1; run_starpu "$r" "$n" "$b" "$NCORES"
      fi
    done
  done
  for n in $SCALING; do
    if [ $((r % 2)) = 1 ]; then run_starpu "$r" "$n" 64 1; run_starpu "$r" "$n" 64 2
    else run_starpu "$r" "$n" 64 2; run_starpu "$r" "$n" 64 1; fi
  done
done
echo "runs took $(( $(date +%s) - T0 )) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2

# ---------------------------------------------------------------- sgemm ceiling, then the report
SGEMM=""
if [ -x "$OPB" ]; then
  "$OPB" --op dense --clock cpu --reps 20 >"$OUT/op_bench_dense.md" 2>&1 || true
  SGEMM="$(sed -n 's/^single-core sgemm[^:]*: \([0-9.]*\) GFLOP.*/\1/p' "$OUT/op_bench_dense.md" | head -1)"
fi
"$PY" "$ROOT/bench/compare_report.py" --csv "$CSV" --machine "$OUT/machine.txt" --cores "$NCORES" \
  ${SGEMM:+--sgemm "$SGEMM"} | tee "$OUT/report.md"
echo "raw runs: $CSV; report: $OUT/report.md" >&2
