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
# bf16 (--precision bf16, opt-in): every round also runs, for each net and batch, starpu_anp bench
# --precision bf16 (STARPU_NCPU = cores), PyTorch under torch.autocast("cpu", dtype=torch.bfloat16)
# (bench/pytorch_nets.py --autocast bf16) and TensorFlow/Keras under the "mixed_bfloat16" policy
# (bench/tf_nets.py --mixed-precision bf16), each with 1 and 2 threads, beside the fp32 runs (kind
# "bf16" in runs.csv); the report's bf16 table gives starpu-anp bf16 / starpu-anp fp32 and
# starpu-anp bf16 / the best of the others' bf16 runs, over the rounds in which all of them ran.
#
# GPTs (--gpt "NET:CONTEXT:BATCH ..."): in each round, starpu_anp bench with STARPU_NCPU=1 and 2
# and PyTorch (bench/gpt_torch_step.py: the same GPT in fp32, scaled_dot_product_attention,
# fused AdamW) with 1 and 2 threads, in alternating order; every step is forward, per-token loss,
# backward and AdamW (lr 6e-4, weight decay 0.1, on both sides). NET is a built-in GPT or a .net
# file of that layout; its `input ... tokens T` line is rewritten to CONTEXT (wpe follows). Each
# run is timed under /usr/bin/time for its peak resident set. The report gives tokens/s, the ratio
# starpu-anp / PyTorch at 1 and at 2 threads and best against best, starpu-anp's 1 -> 2 worker
# scaling (from the same rounds), both sides' GFLOP/s as a share of the single-core sgemm rate at
# the net's own dense shapes (dnn_op_bench --sgemm), and both peak RSS. Without --nets, --gpt
# runs only the GPTs (and no --scaling runs).
#
# Usage: bench/compare_frameworks.sh [options]
#   --rounds N        rounds, interleaved in time: every configuration runs once per round, in
#                     alternating order (default 3: about 15 minutes on the 2-core development VM);
#                     a table of record wants at least 5 on a quiet machine (--reps: old name)
#   --nets "A B"      nets (default "lenet5 resnet8 resnet20")
#   --batches "A B"   batch sizes (default "64 256")
#   --frameworks "A"  the others, any of "pytorch tensorflow" (default both)
#   --scaling "A B"   nets whose STARPU_NCPU=1 vs 2 speedup is measured (default resnet20; "" = none)
#   --precision P     fp32 (default), or bf16: also the bf16 runs above (starpu-anp --precision bf16,
#                     PyTorch autocast bf16, Keras mixed_bfloat16) (--bf16: the same)
#   --gpt "N:T:B ..." GPT configurations NET:CONTEXT:BATCH, e.g. "gpt-nano:128:16 gpt2:256:4"
#   --run-timeout S   kill a single run after S seconds; it then has no result (default 900)
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
source "$ROOT/scripts/lib.sh" # the result line, the measured runs' priority
anp_measure_prio "$ROOT" # ANP_PRIO: every framework's measured runs get the same priority
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
GPT=""
RUN_TIMEOUT=900
PRECISION=fp32
NETS_GIVEN=0
SCALING_GIVEN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds|--reps) REPS="$2"; shift ;;
    --nets) NETS="$2"; NETS_GIVEN=1; shift ;;
    --batches) BATCHES="$2"; shift ;;
    --scaling) SCALING="$2"; SCALING_GIVEN=1; shift ;;
    --steps-scale) SCALE="$2"; shift ;;
    --others-max-s|--torch-max-s) OTHERS_MAX_S="$2"; shift ;;
    --frameworks) FRAMEWORKS="$2"; shift ;;
    --build) BUILD="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift ;;
    --no-build) DO_BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    --gpt) GPT="$2"; shift ;;
    --run-timeout) RUN_TIMEOUT="$2"; shift ;;
    --precision) PRECISION="$2"; shift ;;
    --bf16) PRECISION=bf16 ;;
    -h|--help) sed -n '2,57p' "$0"; exit 0 ;;
    *) echo "compare_frameworks.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "compare_frameworks.sh: --rounds needs a positive integer" >&2; exit 2; }
[[ "$RUN_TIMEOUT" =~ ^[1-9][0-9]*$ ]] ||
  { echo "compare_frameworks.sh: --run-timeout needs a positive integer" >&2; exit 2; }
for g in $GPT; do
  [[ "$g" =~ ^[^:]+:[1-9][0-9]*:[1-9][0-9]*$ ]] ||
    { echo "compare_frameworks.sh: --gpt: '$g' is not NET:CONTEXT:BATCH" >&2; exit 2; }
done
if [ -n "$GPT" ]; then
  [ "$NETS_GIVEN" = 1 ] || NETS=""
  [ "$SCALING_GIVEN" = 1 ] || SCALING=""
fi
case "$PRECISION" in fp32|bf16) ;; *) echo "compare_frameworks.sh: --precision: fp32 or bf16, not '$PRECISION'" >&2; exit 2 ;; esac
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
  echo "measured runs (every framework's): $ANP_PRIO_SAID"
  echo "OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-<unset>}"
  echo "STARPU_SCHED: ${STARPU_SCHED:-<unset> (lws)}"
  echo "precision: fp32$([ "$PRECISION" = bf16 ] && echo " and bf16 (starpu-anp --precision bf16, PyTorch autocast, Keras mixed_bfloat16)")"
  echo "python: $("$PY" -c 'import sys; print(sys.version.split()[0])') ($PY)"
  echo "torch: $("$PY" -c 'import torch; print(torch.__version__, "(MKL)" if torch.backends.mkl.is_available() else "", "(oneDNN)" if torch.backends.mkldnn.is_available() else "", "cpu:", torch.backends.cpu.get_cpu_capability())')"
  echo "tensorflow: $("$PY" -c 'import tensorflow as tf, keras; print(tf.__version__, "keras", keras.__version__)' 2>/dev/null)"
  echo "numpy: $("$PY" -c 'import numpy; print(numpy.__version__)')"
  echo "starpu-anp: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ local changes)')"
} | tee "$OUT/machine.txt" >&2

# ---------------------------------------------------------------- parameter counts
bad=0
if [ -n "$NETS" ]; then
echo "parameter counts (starpu_anp nets vs PyTorch vs TensorFlow):" >&2
"$APP" nets >"$OUT/nets_starpu.txt"
"$PY" "$ROOT/bench/pytorch_nets.py" --params >"$OUT/nets_torch.txt"
"$PY" "$ROOT/bench/tf_nets.py" --params >"$OUT/nets_tf.txt" 2>>"$LOG"
fi
for n in $NETS; do
  a="$(awk -v n="$n" '$1 == n { print $4 }' "$OUT/nets_starpu.txt")"
  b="$(awk -v n="$n" '$1 == n { print $2 }' "$OUT/nets_torch.txt")"
  c="$(awk -v n="$n" '$1 == n { print $2 }' "$OUT/nets_tf.txt")"
  if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then ok=ok; else ok=MISMATCH; bad=1; fi
  printf '  %-9s starpu-anp %9s  pytorch %9s  tensorflow %9s  %s\n' "$n" "${a:-?}" "${b:-?}" "${c:-?}" "$ok" \
    | tee -a "$OUT/machine.txt" >&2
done

# Each GPT configuration: its net file at CONTEXT (OUT/NET-tCONTEXT.net), its dimensions read from
# that file (embed's vocab= and dim=, one attention line per block, its heads=), and the parameter
# counts of both sides at that context. A starpu_anp that cannot read the net (an op it lacks) is
# reported and its runs have no result; PyTorch still runs.
declare -A GNET GDIMS GLABEL
for g in $GPT; do
  IFS=: read -r gn gt gb <<<"$g"
  src="$gn"; [ -f "$src" ] || src="$ROOT/graph/nets/$gn.net"
  [ -f "$src" ] || { echo "compare_frameworks.sh: --gpt: no net file for '$gn' (not $src)" >&2; exit 2; }
  base="$(basename "$gn" .net)"
  GLABEL[$g]="$base"
  GNET[$g]="$OUT/$base-t$gt.net"
  sed -E "s/^(input[[:space:]]+[^[:space:]]+[[:space:]]+tokens[[:space:]]+)[0-9]+/\1$gt/" "$src" >"${GNET[$g]}"
  dims="$(awk '
    $1 == "embed" {
      for (i = 2; i <= NF; i++) { if ($i ~ /^vocab=/) v = substr($i, 7); if ($i ~ /^dim=/) d = substr($i, 5) }
    }
    $1 == "attention" { l++; for (i = 2; i <= NF; i++) if ($i ~ /^heads=/) h = substr($i, 7) }
    END { if (v && d && l && h) print v, d, l, h }' "${GNET[$g]}")"
  if [ -z "$dims" ] || ! grep -qE '^input[[:space:]]+[^[:space:]]+[[:space:]]+tokens[[:space:]]' "${GNET[$g]}"; then
    echo "compare_frameworks.sh: --gpt: $src is not a GPT net" \
      "(an input ... tokens T line, embed vocab= dim=, attention heads=)" >&2
    exit 2
  fi
  GDIMS[$g]="$dims"
  read -r gv gd gl gh <<<"$dims"
  tb="$(case "$base" in gpt-tiny|gpt-nano|gpt2|gpt2-xl) echo "$base" ;; *) echo gpt-nano ;; esac)"
  b="$("$PY" "$ROOT/bench/gpt_torch_step.py" --net "$tb" --vocab "$gv" --context "$gt" --d "$gd" --layers "$gl" \
        --heads "$gh" --params | awk '{ print $2 }')"
  a="$("$APP" train --net "${GNET[$g]}" --batch "$gb" --summary 2>"$OUT/summary-$base-t$gt.err" |
        tee "$OUT/summary-$base-t$gt.txt" | sed -n 's/^total: [0-9]* nodes, \([0-9]*\) parameters.*/\1/p' || true)"
  if [ -z "$a" ]; then
    err="$(grep -m1 -i error "$OUT/summary-$base-t$gt.err" || tail -1 "$OUT/summary-$base-t$gt.err")"
    ok="starpu_anp cannot read it ($err): its runs will have no result"
  elif [ "$a" = "$b" ]; then ok=ok; else ok=MISMATCH; bad=1; fi
  printf '  %-9s context %5s: vocab %s d %s layers %s heads %s; starpu-anp %10s  pytorch %10s  %s\n' "$base" "$gt" \
    "$gv" "$gd" "$gl" "$gh" "${a:-?}" "${b:-?}" "$ok" | tee -a "$OUT/machine.txt" >&2
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
echo "round,framework,net,batch,workers,images_per_s,gflops,wall_s,load1,kind,context,tokens_per_s,peak_rss_mib" >"$CSV"
field() { anp_result_field "$(cat)" "$1"; } # LINE on stdin

run_starpu() { # round net batch ncpu kind (compare, scaling: fp32; bf16: --precision bf16)
  local st wu line prec=fp32
  [ "$5" = bf16 ] && prec=bf16
  st="$(steps_for "$2" "$3")"; wu="$(warmup_for "$2")"
  line="$(STARPU_NCPU="$4" "${ANP_PRIO[@]}" "$APP" bench --net "$2" --batch "$3" --steps "$st" --warmup "$wu" \
            --precision "$prec" --quiet 2>>"$LOG" | anp_result_line || true)"
  echo "starpu NCPU=$4 precision=$prec $line" >>"$LOG"
  echo "$1,starpu-anp,$2,$3,$4,$(echo "$line" | field images_per_s),$(echo "$line" | field gflops),$(echo "$line" | field wall_s),$(cut -d' ' -f1 /proc/loadavg),$5,,," >>"$CSV"
  printf '  %-10s %-8s b%-4s %d worker(s) %s: %8s img/s\n' starpu-anp "$2" "$3" "$4" "$prec" "$(echo "$line" | field images_per_s)" >&2
}
run_other() { # framework round net batch threads [kind: compare (fp32), bf16 (autocast / mixed_bfloat16)]
  local st wu line script kind="${6:-compare}" mixed=()
  case "$1" in pytorch) script=pytorch_nets.py; mixed=(--autocast bf16) ;;
               tensorflow) script=tf_nets.py; mixed=(--mixed-precision bf16) ;; esac
  [ "$kind" = bf16 ] || mixed=()
  st="$(steps_for "$3" "$4")"; wu="$(warmup_for "$3")"
  # TensorFlow's first call traces the graph: it is never timed (tf_nets.py adds it to warm-up 1).
  line="$(OMP_NUM_THREADS="$5" "${ANP_PRIO[@]}" "$PY" "$ROOT/bench/$script" --net "$3" --batch "$4" --threads "$5" \
            --steps "$st" --warmup "$wu" --max-seconds "$OTHERS_MAX_S" "${mixed[@]}" 2>>"$LOG" | anp_result_line || true)"
  echo "$1 threads=$5 kind=$kind $line" >>"$LOG"
  echo "$2,$1,$3,$4,$5,$(echo "$line" | field images_per_s),,$(echo "$line" | field wall_s),$(cut -d' ' -f1 /proc/loadavg),$kind,,," >>"$CSV"
  printf '  %-10s %-8s b%-4s %d thread(s) %s: %8s img/s\n' "$1" "$3" "$4" "$5" "$([ "$kind" = bf16 ] && echo bf16 || echo fp32)" \
    "$(echo "$line" | field images_per_s)" >&2
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
# --precision bf16: starpu-anp bf16 (all cores), then the others' bf16 runs, in order or reversed.
BF16_RUNS=("starpu-anp $NCORES" "${OTHERS[@]}")
run_bf16() { # round net batch forward|reverse
  local i ft
  [ "$PRECISION" = bf16 ] || return 0
  for i in "${!BF16_RUNS[@]}"; do
    [ "$4" = forward ] && ft="${BF16_RUNS[$i]}" || ft="${BF16_RUNS[$(( ${#BF16_RUNS[@]} - 1 - i ))]}"
    if [ "${ft% *}" = starpu-anp ]; then
      run_starpu "$1" "$2" "$3" "${ft#* }" bf16
    else
      # shellcheck disable=SC2086
      run_other ${ft% *} "$1" "$2" "$3" ${ft#* } bf16
    fi
  done
}

# GPT runs: timed steps and warm-up by size (x --steps-scale): a gpt-nano step takes a fraction
# of a second on one core, a GPT-2 124M step at batch 4 x 256 tokens tens of seconds; starpu-anp
# needs at least 4 timed steps (its --window).
gpt_steps() { # params
  local s
  if [ "$1" -lt 10000000 ]; then s=12; else s=4; fi
  awk -v s="$s" -v k="$SCALE" 'BEGIN { v = int(s * k + 0.5); print (v < 4 ? 4 : v) }'
}
gpt_warmup() { if [ "$1" -lt 10000000 ]; then echo 2; else echo 1; fi; }
# kind "gpt": starpu-anp at STARPU_NCPU=N and PyTorch at N threads, tokens/s and peak RSS.
run_gpt() { # round spec framework n
  local gt gb gv gd gl gh st wu line tf rss ips tps p tb label
  IFS=: read -r _ gt gb <<<"$2"
  read -r gv gd gl gh <<<"${GDIMS[$2]}"
  p="$("$PY" "$ROOT/bench/gpt_torch_step.py" --net gpt-nano --vocab "$gv" --context "$gt" --d "$gd" --layers "$gl" \
        --heads "$gh" --params | awk '{ print $2 }')"
  st="$(gpt_steps "$p")"; wu="$(gpt_warmup "$p")"
  label="${GLABEL[$2]}"
  tf="$(mktemp)"
  if [ "$3" = starpu-anp ]; then
    line="$(STARPU_NCPU="$4" "${ANP_PRIO[@]}" timeout "$RUN_TIMEOUT" /usr/bin/time -f %M -o "$tf" "$APP" bench --net "${GNET[$2]}" \
              --batch "$gb" --steps "$st" --warmup "$wu" --optimizer adamw --lr 6e-4 --weight-decay 0.1 --quiet \
              2>>"$LOG" | anp_result_line || true)"
  else
    tb="$(case "$label" in gpt-tiny|gpt-nano|gpt2|gpt2-xl) echo "$label" ;; *) echo gpt-nano ;; esac)"
    line="$(OMP_NUM_THREADS="$4" "${ANP_PRIO[@]}" timeout "$RUN_TIMEOUT" /usr/bin/time -f %M -o "$tf" \
              "$PY" "$ROOT/bench/gpt_torch_step.py" --net "$tb" --vocab "$gv" --context "$gt" --d "$gd" --layers "$gl" --heads "$gh" --batch "$gb" \
              --threads "$4" --steps "$st" --warmup "$wu" --max-seconds "$OTHERS_MAX_S" 2>>"$LOG" |
              anp_result_line || true)"
  fi
  # /usr/bin/time -f %M: the child's peak resident set in KiB (its last line; a failed command's
  # status line comes first)
  rss="$(tail -1 "$tf" | awk '/^[0-9]+$/ { printf "%.1f", $1 / 1024 }')"
  rm -f "$tf"
  echo "$3 gpt ${label}:$gt:$gb n=$4 peak_rss_mib=${rss:-?} $line" >>"$LOG"
  ips="$(echo "$line" | field images_per_s)"
  tps="$(echo "$line" | field tokens_per_s)"
  [ -n "$tps" ] || tps="$(awk -v i="$ips" -v t="$gt" 'BEGIN { if (i != "") printf "%.1f", i * t }')"
  echo "$1,$3,$label,$gb,$4,$ips,$(echo "$line" | field gflops),$(echo "$line" | field wall_s)," \
       "$(cut -d' ' -f1 /proc/loadavg),gpt,$gt,$tps,$rss" | tr -d ' ' >>"$CSV"
  printf '  %-10s %-8s T%-5s b%-4s %d %s: %9s tokens/s, peak RSS %s MiB\n' "$3" "$label" "$gt" "$gb" "$4" \
    "$([ "$3" = starpu-anp ] && echo 'worker(s)' || echo 'thread(s)')" "${tps:-?}" "${rss:-?}" >&2
}
GPT_RUNS=("starpu-anp 1" "starpu-anp 2" "pytorch 1" "pytorch 2")
run_gpts() { # round forward|reverse
  local g i fn
  for g in $GPT; do
    for i in "${!GPT_RUNS[@]}"; do
      [ "$2" = forward ] && fn="${GPT_RUNS[$i]}" || fn="${GPT_RUNS[$(( ${#GPT_RUNS[@]} - 1 - i ))]}"
      # shellcheck disable=SC2086
      run_gpt "$1" "$g" ${fn% *} ${fn#* }
    done
  done
}

T0=$(date +%s)
for r in $(seq 1 "$REPS"); do
  echo "round $r/$REPS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  for n in $NETS; do
    for b in $BATCHES; do
      if [ $((r % 2)) = 1 ]; then
        run_starpu "$r" "$n" "$b" "$NCORES" compare; run_others "$r" "$n" "$b" forward
        run_bf16 "$r" "$n" "$b" forward
      else
        run_bf16 "$r" "$n" "$b" reverse
        run_others "$r" "$n" "$b" reverse; run_starpu "$r" "$n" "$b" "$NCORES" compare
      fi
    done
  done
  if [ $((r % 2)) = 1 ]; then run_gpts "$r" forward; else run_gpts "$r" reverse; fi
  for n in $SCALING; do
    if [ $((r % 2)) = 1 ]; then run_starpu "$r" "$n" 64 1 scaling; run_starpu "$r" "$n" 64 2 scaling
    else run_starpu "$r" "$n" 64 2 scaling; run_starpu "$r" "$n" 64 1 scaling; fi
  done
done
echo "runs took $(( $(date +%s) - T0 )) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2

# ---------------------------------------------------------------- sgemm ceiling, then the report
SGEMM=""
if [ -x "$OPB" ] && [ -n "$NETS$SCALING" ]; then
  "$OPB" --op dense --clock cpu --reps 20 >"$OUT/op_bench_dense.md" 2>&1 || true
  SGEMM="$(sed -n 's/^single-core sgemm[^:]*: \([0-9.]*\) GFLOP.*/\1/p' "$OUT/op_bench_dense.md" | head -1)"
fi
# A GPT's ceiling: the single-core sgemm rate at its own dense shapes (rows = batch x context, the
# whole batch in one chunk as on one worker), weighted by each GEMM's share of the dense FLOPs:
# qkv rows x 3C x C, proj rows x C x C, fc rows x 4C x C, mlp rows x C x 4C per block, the head
# rows x V x C.
GSGEMM="$OUT/sgemm_gpt.csv"
echo "net,context,batch,sgemm_gflops" >"$GSGEMM"
for g in $GPT; do
  [ -x "$OPB" ] || break
  IFS=: read -r _ gt gb <<<"$g"
  read -r gv gd gl _ <<<"${GDIMS[$g]}"
  m=$((gb * gt))
  shapes="${m}x$((3 * gd))x$gd,${m}x${gd}x$gd,${m}x$((4 * gd))x$gd,${m}x${gd}x$((4 * gd)),${m}x${gv}x$gd"
  "$OPB" --sgemm "$shapes" --clock cpu --reps 10 >"$OUT/sgemm-${GLABEL[$g]}-t$gt.txt" 2>&1 || continue
  rate="$(awk -v l="$gl" -v d="$gd" -v v="$gv" '
    /^sgemm [0-9]+x[0-9]+x[0-9]+: / { r[++n] = $3 }
    END {
      if (n != 5) exit 1
      w[1] = 3 * l * d * d; w[2] = l * d * d; w[3] = 4 * l * d * d; w[4] = 4 * l * d * d; w[5] = v * d
      for (i = 1; i <= 5; i++) { f += w[i]; t += w[i] / r[i] }
      printf "%.1f", f / t
    }' "$OUT/sgemm-${GLABEL[$g]}-t$gt.txt")" || continue
  echo "${GLABEL[$g]},$gt,$gb,$rate" >>"$GSGEMM"
done
/usr/bin/python3 "$ROOT/bench/compare_report.py" --csv "$CSV" --machine "$OUT/machine.txt" --cores "$NCORES" \
  ${SGEMM:+--sgemm "$SGEMM"} --gpt-sgemm "$GSGEMM" | tee "$OUT/report.md"
echo "raw runs: $CSV; report: $OUT/report.md" >&2
