#!/usr/bin/env bash
# gpt_learning_compare.sh — the learning comparison of docs/transformers.md: gpt-nano trained by
# `starpu_anp train` and by bench/gpt_learning.py (PyTorch fp32) with one recipe (AdamW, linear
# warm-up then cosine to 0, a fixed token budget) on the default corpus, N seeds each, one run at a
# time; then bench/gpt_learning_plot.py draws both sides' validation curves in one plot and prints
# the per-seed and mean table.
#
#   bench/gpt_learning_compare.sh [--seeds "1 2 3"] [--steps 500] [--batch 16] [--lr 3e-3]
#       [--warmup-steps 25] [--weight-decay 0.1] [--eval-every 50] [--val-batches 20]
#       [--threads 1] [--timeout 900] [--text FILE] [--out DIR] [--keep] [--plot-only] [--same-init]
#
# --threads N is both STARPU_NCPU for starpu_anp and torch's threads. --text FILE trains both on
# FILE (default: starpu_anp's default corpus, $STARPU_ANP_CACHE/corpus/kjv.txt, made by
# scripts/bootstrap.sh; starpu_anp is then given no --text, as a user runs it). --keep skips a run
# whose CSV is already complete (a resumed comparison); --plot-only only redraws. Each run is under
# `timeout` [900 s] and writes its CSV as it goes: DIR/starpu-seedS.csv (--metrics) and
# DIR/torch-seedS.csv, with DIR/*.log (stderr, the result line) and DIR/runs.csv (side, seed,
# wall_s of the whole process, load average before it). Exit status: 0, 1 if a run failed, 2 on a
# usage error.
# --same-init adds, per seed, a PyTorch run from starpu_anp's initial weights (DIR/init-seedS.ckpt,
# written by one step at rate 1e-30, which leaves them as drawn: gpt_learning.py --init-checkpoint)
# with every step's loss (DIR/torch-init-seedS.csv and -steps.csv): same weights and same windows on
# both sides, so what is left of the difference is the trainers', not the draws'.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
A="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
PY="${ANCHORS_PY:-$HOME/.cache/starpu-anp/anchors-venv/bin/python}"
CACHE="${STARPU_ANP_CACHE:-$HOME/.cache/starpu-anp}"
SEEDS="1 2 3" STEPS=500 BATCH=16 LR=3e-3 WARM=25 WD=0.1 EVERY=50 VALB=20 THREADS=1 TIMEOUT=900
TEXT="" OUT="$ROOT/out/gpt_learning" KEEP=0 PLOT_ONLY=0 SAME_INIT=0
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
num() { [[ "${2:-}" =~ ^[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$ ]] || { echo "gpt_learning_compare.sh: $1 '${2:-}': expected a number" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) [[ "${2:-}" =~ ^[0-9]+( [0-9]+)*$ ]] || { echo "gpt_learning_compare.sh: --seeds '${2:-}': expected \"1 2 3\"" >&2; exit 2; }; SEEDS="$2"; shift 2 ;;
    --steps) num "$1" "${2:-}"; STEPS="$2"; shift 2 ;;
    --batch) num "$1" "${2:-}"; BATCH="$2"; shift 2 ;;
    --lr) num "$1" "${2:-}"; LR="$2"; shift 2 ;;
    --warmup-steps) num "$1" "${2:-}"; WARM="$2"; shift 2 ;;
    --weight-decay) num "$1" "${2:-}"; WD="$2"; shift 2 ;;
    --eval-every) num "$1" "${2:-}"; EVERY="$2"; shift 2 ;;
    --val-batches) num "$1" "${2:-}"; VALB="$2"; shift 2 ;;
    --threads) num "$1" "${2:-}"; THREADS="$2"; shift 2 ;;
    --timeout) num "$1" "${2:-}"; TIMEOUT="$2"; shift 2 ;;
    --text) TEXT="${2:?--text FILE}"; shift 2 ;;
    --out) OUT="${2:?--out DIR}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --plot-only) PLOT_ONLY=1; shift ;;
    --same-init) SAME_INIT=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpt_learning_compare.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
CORPUS="${TEXT:-$CACHE/corpus/kjv.txt}"
[ -r "$CORPUS" ] || { echo "gpt_learning_compare.sh: $CORPUS: missing (run scripts/bootstrap.sh, or pass --text FILE)" >&2; exit 2; }
[ -x "$PY" ] || { echo "gpt_learning_compare.sh: $PY: no anchors venv (ANCHORS_PY=python with torch)" >&2; exit 2; }
mkdir -p "$OUT"
RECIPE=(--batch "$BATCH" --lr "$LR" --warmup-steps "$WARM" --weight-decay "$WD" --eval-every "$EVERY" --val-batches "$VALB")

if [ "$PLOT_ONLY" = 0 ]; then
  [ -x "$A" ] || { echo "gpt_learning_compare.sh: $A: not built (cmake --build build, or STARPU_ANP=path)" >&2; exit 2; }
  [ -f "$OUT/runs.csv" ] || echo "side,seed,steps,threads,wall_s,load1,rc" > "$OUT/runs.csv"
  FAIL=0
  # a CSV is complete when it holds the end of the run: starpu's test_epoch row, torch's last step
  done_starpu() { grep -q '^test_epoch,' "$1" 2>/dev/null; }
  done_torch() { tail -n1 "$1" 2>/dev/null | grep -q "^$STEPS,"; }
  run() {  # side seed command...
    local side="$1" seed="$2"; shift 2
    local load1 t0 t1 rc=0
    load1=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    echo "== $side seed $seed ($(date -u +%H:%M:%S) UTC, load $load1)" >&2
    timeout "$TIMEOUT" "$@" > "$OUT/$side-seed$seed.log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    echo "$side,$seed,$STEPS,$THREADS,$(echo "$t1 - $t0" | bc),$load1,$rc" >> "$OUT/runs.csv"
    grep -E '^(result:|step +[0-9]+ +train)' "$OUT/$side-seed$seed.log" | tail -n 2 >&2 || true
    [ "$rc" = 0 ] || { echo "gpt_learning_compare.sh: $side seed $seed: exit $rc (see $OUT/$side-seed$seed.log)" >&2; FAIL=1; }
  }
  for s in $SEEDS; do
    if [ "$KEEP" = 1 ] && done_starpu "$OUT/starpu-seed$s.csv"; then echo "== starpu seed $s: kept" >&2
    else
      run starpu "$s" env -u OPENBLAS_CORETYPE STARPU_NCPU="$THREADS" "$A" train --net gpt-nano \
        ${TEXT:+--text "$TEXT"} --optimizer adamw "${RECIPE[@]}" --max-steps "$STEPS" --seed "$s" \
        --metrics "$OUT/starpu-seed$s.csv"
    fi
    if [ "$KEEP" = 1 ] && done_torch "$OUT/torch-seed$s.csv"; then echo "== torch seed $s: kept" >&2
    else
      run torch "$s" env -u OPENBLAS_CORETYPE "$PY" "$ROOT/bench/gpt_learning.py" "$CORPUS" --net gpt-nano \
        "${RECIPE[@]}" --steps "$STEPS" --seed "$s" --threads "$THREADS" --csv "$OUT/torch-seed$s.csv"
    fi
    if [ "$SAME_INIT" = 1 ] && ! { [ "$KEEP" = 1 ] && done_torch "$OUT/torch-init-seed$s.csv"; }; then
      run init "$s" env -u OPENBLAS_CORETYPE STARPU_NCPU="$THREADS" "$A" train --net gpt-nano ${TEXT:+--text "$TEXT"} \
        --optimizer adamw --batch "$BATCH" --lr 1e-30 --weight-decay "$WD" --max-steps 1 --val-batches 1 --seed "$s" \
        --checkpoint "$OUT/init-seed$s.ckpt"
      run torch-init "$s" env -u OPENBLAS_CORETYPE "$PY" "$ROOT/bench/gpt_learning.py" "$CORPUS" --net gpt-nano \
        "${RECIPE[@]}" --steps "$STEPS" --seed "$s" --threads "$THREADS" --csv "$OUT/torch-init-seed$s.csv" \
        --init-checkpoint "$OUT/init-seed$s.ckpt" --step-log "$OUT/torch-init-seed$s-steps.csv"
      rm -f "$OUT/init-seed$s.ckpt"  # 10 MB, remade in seconds
    fi
  done
fi
"$PY" "$ROOT/bench/gpt_learning_plot.py" "$OUT" --png "$OUT/curves.png"
exit "${FAIL:-0}"
