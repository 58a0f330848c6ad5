#!/usr/bin/env bash
# net_grad_bf16.sh — gradients on the wire in fp32 against bf16 (--grad-precision), measured over network-namespace
# hosts (tests/net/cluster.sh: one rank per host, Open MPI over TCP only, tbf RATE on every host link both ways).
# Not a test: per round, interleaved (fp32 then bf16 each time, so the two see the same machine):
#   - the all-reduce alone: `bench --allreduce-bytes SIZE --allreduce AR` (runtime/allreduce_bench.c), allreduce_s;
#   - training throughput: `bench --net NET --allreduce AR` (bucket size: the app's auto), images_per_s, and
#     StarPU-MPI's bytes per step over all ranks (STARPU_MPI_STATS=1: the bf16 wire must halve the gradients' part).
# Each run at the priority of scripts/lib.sh anp_measure_prio; the load average (uptime) beside every row.
# Output: CSV rows on stdout (what,hosts,rate,allreduce,wire,round,value,unit,mpi_bytes_per_step,load1).
# Environment: HOSTS (2), RATE (1gbit), AR (ring), SIZE (4194304 bytes: a 1 Mi-float bucket), NET (resnet8),
# STEPS (10), ROUNDS (3), ANP_NET_ID (73). Needs root (namespaces). Run from the repository root after building.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh"
B="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
C="$ROOT/tests/net/cluster.sh"
export ANP_NET_ID="${ANP_NET_ID:-73}"
HOSTS="${HOSTS:-2}" RATE="${RATE:-1gbit}" AR="${AR:-ring}" SIZE="${SIZE:-4194304}" NET="${NET:-resnet8}"
STEPS="${STEPS:-10}" ROUNDS="${ROUNDS:-3}"
anp_measure_prio "$ROOT"
TMP="$(mktemp -d)"
trap 'bash "$C" down; rm -rf "$TMP"' EXIT
trap 'exit 130' INT
rc=0; bash "$C" up "$HOSTS" >/dev/null || rc=$?; [ "$rc" = 0 ] || exit "$rc"
bash "$C" rate "$RATE"
echo "# $(date -u +%FT%TZ) $HOSTS hosts, tbf $RATE, --allreduce $AR, runs at $ANP_PRIO_SAID" >&2
echo "what,hosts,rate,allreduce,wire,round,value,unit,mpi_bytes_per_step,load1"
# run WHAT WIRE ROUND ARGS...: one measured run, one row.
run() {
  local what="$1" wire="$2" round="$3" line key unit all steps; shift 3
  line="$(timeout -k 5 600 "${ANP_PRIO[@]}" bash "$C" mpirun --bind-to none -x STARPU_NCPU=1 -x STARPU_MPI_STATS=1 \
          "$B" bench "$@" --allreduce "$AR" --grad-precision "$wire" --quiet 2>"$TMP/err" | anp_result_line)" \
    || { echo "run failed: $what $wire round $round" >&2; tail -5 "$TMP/err" >&2; return 0; }
  [ "$(anp_result_field "$line" grad_precision)" = "$wire" ] || { echo "result line: $line" >&2; return 1; }
  if [ "$what" = allreduce ]; then key=allreduce_s unit=s; steps="$(anp_result_field "$line" reps)"
    steps=$((steps + $(anp_result_field "$line" warmup)))
  else key=images_per_s unit=images/s; steps="$(anp_result_field "$line" steps)"; fi
  all="$(sed -n 's/^\[starpu_comm_stats\]\[[0-9]*\] TOTAL:[[:space:]]*\([0-9]*\)\..*/\1/p' "$TMP/err" | awk '{s += $1} END {print s + 0}')"
  echo "$what,$HOSTS,$RATE,$AR,$wire,$round,$(anp_result_field "$line" "$key"),$unit,$(awk -v a="$all" -v s="$steps" 'BEGIN {printf "%.0f", a / s}'),$(cut -d' ' -f1 /proc/loadavg)"
}
for round in $(seq 1 "$ROUNDS"); do
  for wire in fp32 bf16; do run allreduce "$wire" "$round" --allreduce-bytes "$SIZE" --steps "$STEPS" --warmup 2; done
  for wire in fp32 bf16; do run train "$wire" "$round" --net "$NET" --steps "$STEPS"; done
done
