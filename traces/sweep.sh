#!/usr/bin/env bash
# sweep.sh — throughput of `starpu_anp bench` over a grid of StarPU schedulers x worker counts
# (x CUDA workers x MPI ranks x --mode), each configuration run several times.
#
#   traces/sweep.sh --out DIR [options]        (or: starpu_anp sweep --out DIR [options])
#
# Writes DIR/sweep.csv (one row per run), DIR/summary.csv (median and spread per configuration,
# speedup and efficiency against the fewest-worker configuration of the same scheduler),
# DIR/throughput.png and DIR/speedup.png, and DIR/logs/ (each run's output). See docs/traces.md.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: sweep.sh [options]

  --out DIR          output directory [sweep-<date>-<time>]
  --scheds LIST      STARPU_SCHED policies, space/comma separated, or 'all' (every policy
                     starpu_sched_display lists; failing ones are recorded as failed)
                     [eager lws ws dmda dmdas]
  --ncpu LIST        STARPU_NCPU values [1 2 4 ... up to the core count]
  --ncuda LIST       STARPU_NCUDA values [0, and 1..GPUs when nvidia-smi sees GPUs]
  --ranks LIST       MPI ranks; R > 1 runs 'mpirun -np R $MPIRUN_ARGS' [1]
  --modes LIST       --mode values for R > 1 (sync, async) [sync]
  --net NAME         net [lenet5]
  --batch B          global batch [64]
  --chunks K         chunks per batch [the app's default: 2 x workers]
  --steps N          timed steps per run [20]
  --warmup N         untimed steps at the start of every run [3]
  --reps N           measured runs per configuration [3]
  --discard N        runs per configuration run first and thrown away (warm caches, calibrate
                     the dmda-family history models) [1]
  --timeout S        seconds per run before it is killed and recorded as timeout [600]
  --bench-args STR   extra arguments for 'starpu_anp bench'
  -h, --help         this help

Environment: STARPU_ANP (the app; default: the build next to this script), MPIRUN_ARGS,
and every other STARPU_* variable (STARPU_HOME holds the perf models).
EOF
}

die() { echo "sweep.sh: $*" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../scripts/lib.sh
source "$here/../scripts/lib.sh" # the result line

OUT="" SCHEDS="eager lws ws dmda dmdas" NCPU="" NCUDA="" RANKS="1" MODES="sync"
NET=lenet5 BATCH=64 CHUNKS="" STEPS=20 WARMUP=3 REPS=3 DISCARD=1 TIMEOUT=600 BENCH_ARGS=""
while [ $# -gt 0 ]; do
  opt="$1"
  case "$opt" in
    -h|--help) usage; exit 0 ;;
    --out|--scheds|--ncpu|--ncuda|--ranks|--modes|--net|--batch|--chunks|--steps|--warmup|--reps|--discard|--timeout|--bench-args)
      [ $# -ge 2 ] || die "option $opt needs a value"
      v="$2"; shift 2
      case "$opt" in
        --out) OUT="$v" ;; --scheds) SCHEDS="$v" ;; --ncpu) NCPU="$v" ;; --ncuda) NCUDA="$v" ;;
        --ranks) RANKS="$v" ;; --modes) MODES="$v" ;; --net) NET="$v" ;; --batch) BATCH="$v" ;;
        --chunks) CHUNKS="$v" ;; --steps) STEPS="$v" ;; --warmup) WARMUP="$v" ;; --reps) REPS="$v" ;;
        --discard) DISCARD="$v" ;; --timeout) TIMEOUT="$v" ;; --bench-args) BENCH_ARGS="$v" ;;
      esac ;;
    *) die "unknown option '$opt' (see --help)" ;;
  esac
done

isint() { [[ "$1" =~ ^[0-9]+$ ]]; }
list() { printf '%s\n' "$1" | tr ',' ' '; }
for n in $BATCH $STEPS $WARMUP $REPS $DISCARD $TIMEOUT ${CHUNKS:+$CHUNKS}; do
  isint "$n" || die "'$n' is not a non-negative integer"
done
[ "$REPS" -ge 1 ] || die "--reps must be at least 1"

# The app.
APP="${STARPU_ANP:-}"
if [ -z "$APP" ]; then
  for c in "$here/../build/apps/starpu_anp" "$here"/../build*/apps/starpu_anp; do
    [ -x "$c" ] && { APP="$c"; break; }
  done
fi
[ -n "$APP" ] && [ -x "$APP" ] || die "no starpu_anp found: set STARPU_ANP"

# Defaults that depend on the machine.
NCORES="$(nproc 2>/dev/null || echo 1)"
if [ -z "$NCPU" ]; then
  NCPU="" n=1
  while [ "$n" -lt "$NCORES" ]; do NCPU="$NCPU $n"; n=$((n * 2)); done
  NCPU="$NCPU $NCORES"
fi
if [ -z "$NCUDA" ]; then
  NGPU=0
  command -v nvidia-smi >/dev/null 2>&1 && NGPU="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
  NCUDA="0"; for ((g = 1; g <= NGPU; g++)); do NCUDA="$NCUDA $g"; done
fi
if [ "$SCHEDS" = all ]; then
  tool="$(command -v starpu_sched_display || true)"
  [ -z "$tool" ] && [ -n "${STARPU_PREFIX:-}" ] && tool="$STARPU_PREFIX/bin/starpu_sched_display"
  [ -x "$tool" ] || die "--scheds all needs starpu_sched_display (source scripts/env.sh)"
  SCHEDS="$("$tool" 2>/dev/null | grep -v '^graph_test$' | tr '\n' ' ')"
fi
for v in $(list "$NCPU") $(list "$NCUDA") $(list "$RANKS"); do isint "$v" || die "'$v' is not an integer"; done
for m in $(list "$MODES"); do [ "$m" = sync ] || [ "$m" = async ] || die "--modes: '$m' is not sync or async"; done

[ -n "$OUT" ] || OUT="sweep-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT/logs" || die "cannot create $OUT"
RAW="$OUT/sweep.csv"

# The grid, one configuration per line: sched ncpu ncuda ranks mode
CONFIGS=()
for s in $(list "$SCHEDS"); do
  for r in $(list "$RANKS"); do
    modes="$(list "$MODES")"
    [ "$r" -le 1 ] && modes=sync  # one rank: no MPI, --mode does not apply
    for m in $modes; do
      for g in $(list "$NCUDA"); do
        for c in $(list "$NCPU"); do
          [ $((c + g)) -ge 1 ] || continue
          CONFIGS+=("$s $c $g $r $m")
        done
      done
    done
  done
done
[ ${#CONFIGS[@]} -gt 0 ] || die "empty grid"

# run_one CONFIG REP -> appends a CSV row (REP "d<N>" for discarded runs, which are not recorded)
run_one() {
  local s c g r m rep="$2" log line ips wall chunks status cmd load
  read -r s c g r m <<<"$1"
  log="$OUT/logs/${s}_cpu${c}_cuda${g}_r${r}_${m}_${rep}.log"
  cmd=("$APP" bench --net "$NET" --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --quiet)
  [ -n "$CHUNKS" ] && cmd+=(--chunks "$CHUNKS")
  # shellcheck disable=SC2206
  [ -n "$BENCH_ARGS" ] && cmd+=($BENCH_ARGS)
  if [ "$r" -gt 1 ]; then
    # shellcheck disable=SC2206
    cmd=(mpirun -np "$r" ${MPIRUN_ARGS:-} -x STARPU_SCHED -x STARPU_NCPU -x STARPU_NCUDA "${cmd[@]}" --mode "$m")
  fi
  load="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)"  # other jobs on the machine skew the numbers
  local rc=0
  STARPU_SCHED="$s" STARPU_NCPU="$c" STARPU_NCUDA="$g" timeout -k 10 "$TIMEOUT" "${cmd[@]}" >"$log" 2>&1 || rc=$?
  line="$(anp_result_line "$log" || true)"
  field() { anp_result_field "$line" "$1" || true; } # a broken line: the run counts as failed
  ips="$(field images_per_s)" wall="$(field wall_s)" chunks="$(field chunks)"
  status=ok
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=timeout
  elif [ $rc -ne 0 ] || [ -z "$ips" ]; then status=failed
  elif [ "$(field sched)" != "$s" ]; then status="sched_mismatch"; fi
  [ "$status" = ok ] || ips="" wall=""
  case "$rep" in d*) ;; *)
    # speedup and efficiency are filled in by sweep_report.py
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,,,%s,%s\n' "$s" "$c" "$g" "$r" "$m" "$NET" "$BATCH" \
      "${chunks:-${CHUNKS:-}}" "$STEPS" "$rep" "$ips" "$wall" "$load" "$status" >>"$RAW.tmp" ;;
  esac
  printf '%s\n' "$status${ips:+ $ips img/s}"
}

echo "sweep: ${#CONFIGS[@]} configurations x ($DISCARD discarded + $REPS measured) runs of $NET," \
  "batch $BATCH, $STEPS steps (+$WARMUP warm-up) -> $OUT" >&2
echo "scheduler,ncpu,ncuda,ranks,mode,net,batch,chunks,steps,rep,images_per_s,wall_s,speedup,efficiency,load1,status" >"$RAW.tmp"
total=$(( ${#CONFIGS[@]} * (DISCARD + REPS) )) k=0
# Discarded runs first (they also calibrate the perf models), then the measured repetitions
# interleaved across configurations, so slow drifts of a noisy machine hit every configuration alike.
for ((d = 1; d <= DISCARD; d++)); do
  for cfg in "${CONFIGS[@]}"; do
    k=$((k + 1)); printf '[%d/%d] %s discard %d: ' "$k" "$total" "$cfg" "$d" >&2
    run_one "$cfg" "d$d" >&2
  done
done
for ((rep = 1; rep <= REPS; rep++)); do
  for cfg in "${CONFIGS[@]}"; do
    k=$((k + 1)); printf '[%d/%d] %s rep %d: ' "$k" "$total" "$cfg" "$rep" >&2
    run_one "$cfg" "$rep" >&2
  done
done
mv "$RAW.tmp" "$RAW"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
rc=0; "$PY" "$here/sweep_report.py" "$OUT" || rc=$?
grep -q ',ok$' "$RAW" || { echo "sweep.sh: every run failed (see $OUT/logs)" >&2; exit 1; }
exit $rc
