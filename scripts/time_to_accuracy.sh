#!/usr/bin/env bash
# time_to_accuracy.sh — how many hours N nodes need to reach an accuracy: real training here,
# step times from the simulator (docs/time-to-accuracy.md).
#
#   scripts/time_to_accuracy.sh [options] [-- extra train options, e.g. --limit-train 4096]
#
# For each node count N it trains, on this machine, the exact configuration of N nodes x G GPUs
# x b samples per GPU: global batch N*G*b in N*G chunks of b samples (with per-chunk batch norm a
# chunk is one GPU's batch-norm group). sync: one process (sync equals one process with the same
# global batch and chunks). async: N real ranks under mpirun (--oversubscribe, one CPU worker
# each), each with G chunks: the true mixed-asynchronous trajectory. It records the test accuracy
# after every epoch, takes the time of one step of N nodes from scripts/simulate.sh (cached), and
# writes a table and a plot of test accuracy against predicted wall-clock hours of training
# (hours = steps x simulated step time; evaluation time is not counted).
#
# What:      --net NAME       [lenet5]            --data NAME|DIR   [fashion-mnist]
#            --epochs E       [1]                 --seed S          [1]
# Recipe:    --optimizer O    sgd|lars|adamw [sgd] (async: sgd only)  --lr X [0.05]
#            --lr-schedule S  cosine|constant [cosine]   --warmup-epochs E [0]
#            --lr-ref-batch N the linear scaling rule: --lr is for a global batch of N [off]
# Cluster:   --nodes LIST     node counts N, comma list [1,2,4,8,16]
#            --gpus-per-node G [4]   --batch-per-gpu b [32]
#            --gpu KIND       k80|p100|v100|a100|h100|h200 [k80]   --network NET  fdr|edr|10gbe|1gbe|infinite [fdr]
#            --cores C        CPU cores per simulated node (GPU-only workers: --ncpu 0) [16]
# Mode:      --mode LIST      sync, async or sync,async [sync]
#            --allreduce A    sync: tree|ring|rhd, for the simulated step [tree]
#            --staleness S    async [4]           --no-lookahead  async without lookahead
# Output:    --out DIR        [tta-out]: DIR/tta.csv (one row per run and epoch), DIR/tta.png,
#                             DIR/summary.txt, DIR/runs/<mode>-n<N>/ (metrics, logs)
#            --targets A,B    accuracies: print the epochs and hours each run needs to reach them
#            --sim-steps N    timed simulated steps [10] (after 2 warm-up steps)
#            --sim-cache FILE simulated step times, reused by later runs of the same simulator version
#                             [~/.cache/starpu-anp/tta/steptime.csv]
#            --reuse-only     train and simulate nothing: tabulate the runs already in DIR/runs
#                             (same commands) and the cached step times, leaving out the others
#            -h, --help       this help
# A run whose DIR/runs/<mode>-n<N>/cmd.txt holds the same command (but for the app's directory) and finished is reused,
# so a rerun with other --targets or more node counts only does what is new.
# Environment: STARPU_ANP (the app) [build/apps/starpu_anp]; ANP_TTA_SIMULATE (the simulator
# script) [scripts/simulate.sh].
# Exit status: 0 ok, 1 a training or simulated run failed, 2 bad usage.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib.sh
source "$ROOT/scripts/lib.sh"
usage() { echo "time_to_accuracy.sh: $*" >&2; echo "(see scripts/time_to_accuracy.sh --help)" >&2; exit 2; }
say() { echo "[tta] $*" >&2; }
die() { echo "time_to_accuracy.sh: $*" >&2; exit 1; }

NET=lenet5 DATA=fashion-mnist EPOCHS=1 SEED=1
OPT=sgd LR=0.05 SCHED=cosine WARM=0 REFB=""
NODES=1,2,4,8,16 G=4 b=32 GPU=k80 NETWORK=fdr CORES=16
MODES=sync ALLREDUCE=tree STALENESS=4 LOOKAHEAD=1
OUT=tta-out TARGETS="" SIM_STEPS=10 SIM_WARMUP=2 REUSE_ONLY=0
CACHE="${STARPU_ANP_CACHE:-$HOME/.cache/starpu-anp}"
SIM_CACHE="$CACHE/tta/steptime.csv"
EXTRA=()
posint() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage "$1 '$2': expected a positive integer"; }
num() { [[ "$2" =~ ^[0-9]*[.]?[0-9]+([eE][-+]?[0-9]+)?$ ]] || usage "$1 '$2': expected a non-negative number"; }
list_of() { local opt="$1" v="$2" re="$3" x; IFS=, read -ra _l <<<"$v"; [ "${#_l[@]}" -gt 0 ] || usage "$opt: empty"
  for x in "${_l[@]}"; do [[ "$x" =~ $re ]] || usage "$opt '$x': not one of the allowed values"; done; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
    --net) [ -n "${2:-}" ] || usage "--net needs a value"; NET="$2"; shift 2 ;;
    --data) [ -n "${2:-}" ] || usage "--data needs a value"; DATA="$2"; shift 2 ;;
    --epochs) posint "$1" "${2:-}"; EPOCHS="$2"; shift 2 ;;
    --seed) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage "--seed '${2:-}': expected an integer"; SEED="$2"; shift 2 ;;
    --optimizer) [[ "${2:-}" =~ ^(sgd|lars|adamw)$ ]] || usage "--optimizer '${2:-}': expected sgd, lars or adamw"; OPT="$2"; shift 2 ;;
    --lr) num "$1" "${2:-}"; LR="$2"; shift 2 ;;
    --lr-schedule) [[ "${2:-}" =~ ^(cosine|constant)$ ]] || usage "--lr-schedule '${2:-}': expected cosine or constant"; SCHED="$2"; shift 2 ;;
    --warmup-epochs) num "$1" "${2:-}"; WARM="$2"; shift 2 ;;
    --lr-ref-batch) posint "$1" "${2:-}"; REFB="$2"; shift 2 ;;
    --nodes) list_of "$1" "${2:-}" '^[1-9][0-9]*$'; NODES="$2"; shift 2 ;;
    --gpus-per-node) posint "$1" "${2:-}"; G="$2"; shift 2 ;;
    --batch-per-gpu) posint "$1" "${2:-}"; b="$2"; shift 2 ;;
    --gpu) [[ "${2:-}" =~ ^(k80|p100|v100|a100|h100|h200)$ ]] ||
      usage "--gpu '${2:-}': expected k80, p100, v100, a100, h100 or h200"; GPU="$2"; shift 2 ;;
    --network) [[ "${2:-}" =~ ^(fdr|edr|10gbe|1gbe|infinite)$ ]] || usage "--network '${2:-}': expected fdr, edr, 10gbe, 1gbe or infinite"; NETWORK="$2"; shift 2 ;;
    --cores) posint "$1" "${2:-}"; CORES="$2"; shift 2 ;;
    --mode) list_of "$1" "${2:-}" '^(sync|async)$'; MODES="$2"; shift 2 ;;
    --allreduce) [[ "${2:-}" =~ ^(tree|ring|rhd)$ ]] || usage "--allreduce '${2:-}': expected tree, ring or rhd"; ALLREDUCE="$2"; shift 2 ;;
    --staleness) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage "--staleness '${2:-}': expected an integer"; STALENESS="$2"; shift 2 ;;
    --no-lookahead) LOOKAHEAD=0; shift ;;
    --reuse-only) REUSE_ONLY=1; shift ;;
    --out) [ -n "${2:-}" ] || usage "--out needs a directory"; OUT="$2"; shift 2 ;;
    --targets) list_of "$1" "${2:-}" '^(0?[.][0-9]+|1([.]0*)?)$'; TARGETS="$2"; shift 2 ;;
    --sim-steps) posint "$1" "${2:-}"; SIM_STEPS="$2"; shift 2 ;;
    --sim-cache) [ -n "${2:-}" ] || usage "--sim-cache needs a file"; SIM_CACHE="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) usage "unknown option '$1'" ;;
  esac
done
[[ ",$MODES," != *,async,* ]] || [ "$OPT" = sgd ] || usage "--mode async takes --optimizer sgd only (its server applies SGD changes)"
APP="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
SIMULATE="${ANP_TTA_SIMULATE:-$ROOT/scripts/simulate.sh}"
[ -x "$APP" ] || die "$APP is missing: build the project first (README, 'Build')"
# A bad net or data set is a usage error, found before anything runs.
if ! msg="$("$APP" train --net "$NET" --data "$DATA" --summary 2>&1 >/dev/null)"; then
  echo "time_to_accuracy.sh: $(printf '%s\n' "$msg" | tail -1)" >&2; exit 2
fi
mkdir -p "$OUT/runs" "$(dirname "$SIM_CACHE")"
IFS=, read -ra L_NODES <<<"$NODES"; IFS=, read -ra L_MODES <<<"$MODES"

# ---------------------------------------------------------------- the simulated step time
# The simulator's version, part of every cached step time's key, so that a step time simulated
# by older code (the flat reduction tree's, say) is never reused: the last commit of the code a
# simulated step depends on, "+dirty" while it has uncommitted changes (a dirty tree is one
# version until committed), "nogit" outside a git checkout (the key then cannot tell).
sim_version() {
  local paths=(apps codelets graph runtime util include sim third_party scripts/simulate.sh CMakeLists.txt) v
  v="$(git -C "$ROOT" log -1 --format=%h -- "${paths[@]}" 2>/dev/null || true)"
  [ -n "$v" ] || { echo nogit; return; }
  git -C "$ROOT" diff --quiet HEAD -- "${paths[@]}" 2>/dev/null || v+="+dirty"
  echo "$v"
}
SIM_VERSION="$(sim_version)"
# sim_step MODE N -> seconds per step of N nodes (global batch N*G*b), from the cache or a new
# simulation (GPU-only nodes, chunks pinned to the dies, as docs/SIMULATION.md's study 3).
sim_step() {
  local mode="$1" n="$2" key line ips
  [ "$n" -gt 1 ] || mode=sync # one node: no exchange, async is sync
  key="$NET|n$n|g$G|$GPU|$NETWORK|c$CORES|b$b|$mode|$([ "$mode" = sync ] && echo "$ALLREDUCE" || echo "s$STALENESS-la$LOOKAHEAD")|steps$SIM_STEPS+$SIM_WARMUP|sim-$SIM_VERSION"
  line="$(awk -F, -v k="$key" '$1 == k { v = $2 } END { if (v != "") print v }' "$SIM_CACHE" 2>/dev/null || true)"
  if [ -n "$line" ]; then echo "$line"; return 0; fi
  [ "$REUSE_ONLY" = 0 ] || { say "$mode N=$n: no cached step time (--reuse-only): left out"; return 0; }
  local args=(--quiet --net "$NET" --nodes "$n" --cores "$CORES" --ncpu 0 --gpus "$G" --gpu "$GPU"
              --network "$NETWORK" --batch-per-node $((G * b)) --chunks "$G" --mode "$mode" --allreduce "$ALLREDUCE"
              --staleness "$STALENESS" --steps "$SIM_STEPS" --warmup "$SIM_WARMUP" --csv "$OUT/sim.csv" -- --pin-chunks)
  [ "$LOOKAHEAD" = 1 ] || args+=(--no-lookahead)
  say "simulating one step of $n node(s) x $G $GPU ($mode, $NETWORK): bash $SIMULATE ${args[*]}"
  local cmd=(bash "$SIMULATE" "${args[@]}") log="$OUT/sim-$mode-n$n.log" rc=0
  if [ "$n" -gt 4 ]; then cmd=(flock /tmp/anp-bigsim.lock "${cmd[@]}"); fi # one big simulation at a time
  "${cmd[@]}" >"$log" 2>&1 || rc=$?
  line="$(anp_result_line "$log" || true)"
  [ "$rc" = 0 ] && [ -n "$line" ] || die "the simulation of $n node(s) failed (exit $rc): $(grep -m1 -E 'error|failed' "$log" || tail -1 "$log") (log: $log)"
  ips="$(anp_result_field "$line" images_per_s)"
  line="$(awk -v B=$((n * G * b)) -v i="$ips" 'BEGIN { printf "%.6g", B / i }')"
  echo "$key,$line,$ips,$(date -u +%FT%TZ)" >>"$SIM_CACHE"
  echo "$line"
}

# ---------------------------------------------------------------- the real training run
# A command with the app's directory left out: where the binary lies (another checkout, a copy)
# is not part of what a run trained.
app_anywhere() { sed -E 's#[^ ]*/(starpu_anp(\.[a-z]+)?)( |$)#\1\3#g' <<<"$1"; }
# train MODE N -> its directory (metrics.csv, result.txt); reused when cmd.txt is the same but
# for where the app lies.
train_run() {
  local mode="$1" n="$2" B=$((n * G * b)) dir
  [ "$n" -gt 1 ] || mode=sync # one rank: the async run is the sync run
  dir="$OUT/runs/$mode-n$n"
  local args=(train --net "$NET" --data "$DATA" --batch "$B" --epochs "$EPOCHS" --seed "$SEED"
              --optimizer "$OPT" --lr "$LR" --lr-schedule "$SCHED" --warmup-epochs "$WARM")
  [ -z "$REFB" ] || args+=(--lr-ref-batch "$REFB")
  local cmd
  if [ "$mode" = sync ]; then
    args+=(--chunks $((n * G)))
    cmd=("$APP" "${args[@]}")
  else
    args+=(--chunks "$G" --mode async --staleness "$STALENESS")
    [ "$LOOKAHEAD" = 1 ] || args+=(--no-lookahead)
    cmd=("${ANP_MPIRUN[@]}" -np "$n" -x STARPU_NCPU=1 "$APP" "${args[@]}")
  fi
  cmd+=("${EXTRA[@]}" --metrics "$dir/metrics.csv")
  if [ -s "$dir/result.txt" ] && [ "$(app_anywhere "$(cat "$dir/cmd.txt" 2>/dev/null)")" = "$(app_anywhere "${cmd[*]}")" ]; then
    say "$mode N=$n: reusing $dir (same command)"; echo "$dir"; return 0
  fi
  [ "$REUSE_ONLY" = 0 ] || { say "$mode N=$n: no finished run with this command in $dir (--reuse-only): left out"; return 0; }
  rm -rf "$dir"; mkdir -p "$dir"
  printf '%s\n' "${cmd[*]}" >"$dir/cmd.txt"
  say "$mode N=$n: training global batch $B ($([ "$mode" = sync ] && echo "1 process, $((n * G)) chunks" || echo "$n ranks x $G chunks")), $EPOCHS epoch(s): ${cmd[*]}"
  local rc=0
  "${cmd[@]}" >"$dir/train.out" 2> >(tee "$dir/train.err" | grep --line-buffered '^epoch ' | sed -u "s/^/[tta] $mode N=$n: /" >&2) || rc=$?
  wait # the stderr filter
  local line; line="$(anp_result_line "$dir/train.out" || true)"
  [ "$rc" = 0 ] && [ -n "$line" ] || die "the $mode training of N=$n failed (exit $rc): $(grep -m1 '^error' "$dir/train.err" || tail -1 "$dir/train.err") (log: $dir/train.err)"
  printf '%s\n' "$line" >"$dir/result.txt"
  echo "$dir"
}

# ---------------------------------------------------------------- the runs and the table
TABLE="$OUT/tta.csv"
echo "net,mode,nodes,gpus_per_node,batch_per_gpu,global_batch,chunks,epoch,step,test_accuracy,step_s,hours" >"$TABLE.tmp"
trap 'rm -f "$TABLE.tmp"' EXIT # a failed run leaves the last table as it was, and no half-written one
for mode in "${L_MODES[@]}"; do
  for n in "${L_NODES[@]}"; do
    step_s="$(sim_step "$mode" "$n")"
    [ -n "$step_s" ] || continue # --reuse-only, not simulated yet
    say "$mode N=$n: simulated step $step_s s (global batch $((n * G * b)))"
    dir="$(train_run "$mode" "$n")"
    [ -n "$dir" ] || continue # --reuse-only, not trained yet
    chunks=$((n * G)); [ "$mode" = sync ] || [ "$n" = 1 ] || chunks="$n x $G"
    awk -F, -v pre="$NET,$mode,$n,$G,$b,$((n * G * b)),${chunks// /}" -v s="$step_s" '
      $1 == "test_epoch" { printf "%s,%d,%d,%.4f,%s,%.6g\n", pre, $2, $3, $5, s, $3 * s / 3600 }' \
      "$dir/metrics.csv" >>"$TABLE.tmp"
    grep -q "^$NET,$mode,$n," "$TABLE.tmp" || die "$dir/metrics.csv has no test_epoch row (was --no-eval given?)"
  done
done
mv "$TABLE.tmp" "$TABLE"

# ---------------------------------------------------------------- summary
{
  printf 'time to accuracy: %s on %s, %s x b=%s per GPU, %d GPU(s) per node, %s + %s (simulated), %s epoch(s)\n' \
    "$NET" "$DATA" "N" "$b" "$G" "$GPU" "$NETWORK" "$EPOCHS"
  awk -F, -v targets="$TARGETS" '
    NR == 1 { next }
    { k = $2 " N=" $3; if (!(k in seen)) { seen[k] = 1; order[++n] = k; step[k] = $11; batch[k] = $6 }
      final[k] = $10; fh[k] = $12; fe[k] = $8
      nt = split(targets, t, ",")
      for (i = 1; i <= nt; i++) if (!((k, i) in reach) && $10 + 1e-9 >= t[i]) { reach[k, i] = sprintf("%d ep / %.3g h", $8, $12) } }
    END {
      nt = split(targets, t, ",")
      printf "%-11s %7s %9s %9s %9s", "run", "batch", "step_s", "final_acc", "hours"
      for (i = 1; i <= nt; i++) printf "  %-16s", "to " t[i]
      printf "\n"
      for (j = 1; j <= n; j++) { k = order[j]
        printf "%-11s %7d %9.4g %9.4f %9.3g", k, batch[k], step[k], final[k], fh[k]
        for (i = 1; i <= nt; i++) printf "  %-16s", ((k, i) in reach) ? reach[k, i] : "not reached"
        printf "\n" } }' "$TABLE"
} | tee "$OUT/summary.txt"

# ---------------------------------------------------------------- plot
if command -v gnuplot >/dev/null; then
  pd="$(mktemp -d /tmp/anp-tta-XXXXXX)"; trap 'rm -rf "$pd"' EXIT
  awk -F, -v d="$pd" 'NR > 1 { f = d "/" $2 "-n" sprintf("%03d", $3) ".dat"; print $12, $10 >> f }' "$TABLE"
  plot=""
  for f in "$pd"/*.dat; do
    t="$(basename "$f" .dat)"; m="${t%-n*}"; nn="$((10#${t##*-n}))"
    plot+="${plot:+, }'$f' using 1:2 with linespoints lw 2 dt $([ "$m" = sync ] && echo 1 || echo 2) title '$m N=$nn'"
  done
  if gnuplot -e "set terminal pngcairo size 900,560 font 'DejaVu Sans,10'; set output '$OUT/tta.png'; set key right bottom; set grid; set logscale x; set xlabel 'predicted wall-clock hours of training ($GPU x $G per node, $NETWORK, simulated)'; set ylabel 'test accuracy'; set title 'time to accuracy: $NET on $DATA, $b samples per GPU'; plot $plot" 2>"$pd/err"; then
    say "table $TABLE, plot $OUT/tta.png, summary $OUT/summary.txt"
  else
    say "gnuplot could not draw $OUT/tta.png: $(head -1 "$pd/err"); table $TABLE"
  fi
fi
