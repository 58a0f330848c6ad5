#!/usr/bin/env bash
# deterministic_cost.sh — what the fixed-order sums over chunks cost: `bench` images/s with
# --deterministic on against off, side by side, interleaved over rounds (off then on in odd
# rounds, on then off in even ones), for each worker count and NET:BATCH.
#
#   bench/deterministic_cost.sh [--rounds R] [--steps S] [--ncpu "1 2"] [--out DIR] [NET:BATCH...]
#   default nets: lenet5:64 resnet8:64 resnet20:64
#   bench/deterministic_cost.sh --sim [--nodes N] [--steps S] [--timeout SECONDS] [--out DIR]
#   simulated instead (scripts/simulate.sh): ResNet-50 on N [16] nodes of 4 K80 dies, 128 samples
#   and 8 chunks per node, pinned, sync tree over FDR with 4 MiB buckets, S [10] timed steps after
#   1 warm-up, --deterministic off then on (a simulation gives the same result every time: one
#   round); each run under `timeout` [900 s]; prints images/s, ms per step and on/off
#
# Writes DIR/runs.csv (round,ncpu,net,batch,mode,chunks,images_per_s,load1) and prints, per
# (ncpu, net, batch), the median images/s of each mode with min-max, and on/off of the medians.
# The chunk count is bench's default (it follows the worker count: 1 worker, 1 chunk, nothing to
# sum), as a user runs it. Exit status: 0, 1 if a run failed, 2 on a usage error.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
A="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
ROUNDS=5 STEPS="" NCPUS="1 2" OUT="$ROOT/out/deterministic_cost" SIM=0 NODES=16 TIMEOUT=900
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --ncpu) NCPUS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --sim) SIM=1; shift ;;
    --nodes) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "deterministic_cost.sh: --nodes '${2:-}': expected a positive integer" >&2; exit 2; }; NODES="$2"; shift 2 ;;
    --timeout) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "deterministic_cost.sh: --timeout '${2:-}': expected seconds" >&2; exit 2; }; TIMEOUT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "deterministic_cost.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ "$SIM" = 1 ]; then
  [ $# = 0 ] || { echo "deterministic_cost.sh: --sim takes no NET:BATCH (it simulates resnet50)" >&2; exit 2; }
  STEPS="${STEPS:-10}"
  mkdir -p "$OUT"
  CSV="$OUT/sim.csv"
  echo "deterministic_cost --sim: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; resnet50, $NODES x 4 K80, $STEPS steps" >&2
  declare -A IPS
  for mode in off on; do
    log="$OUT/sim-$NODES-$mode.log"
    rc=0
    timeout "$TIMEOUT" "$ROOT/scripts/simulate.sh" --quiet --net resnet50 --batch-per-node 128 --chunks 8 --nodes "$NODES" \
      --cores 16 --ncpu 0 --gpus 4 --gpu k80 --network fdr --mode sync --allreduce tree --steps "$STEPS" --warmup 1 \
      --csv "$CSV" -- --pin-chunks --bucket-mb 4 --deterministic "$mode" >"$log" 2>&1 || rc=$?
    [ "$rc" = 0 ] || { tail -3 "$log" >&2; echo "deterministic_cost.sh: the simulation with --deterministic $mode failed (exit $rc$([ "$rc" = 124 ] && echo ": over --timeout $TIMEOUT s, take fewer --steps"); log: $log)" >&2; exit 1; }
    grep -m1 '^+ ' "$log" >&2 || true
    IPS[$mode]="$(grep '^result:' "$log" | tail -1 | tr ' ' '\n' | sed -n 's/^images_per_s=//p')"
    echo "--deterministic $mode: ${IPS[$mode]} images/s" >&2
  done
  python3 - "$NODES" "$STEPS" "${IPS[off]}" "${IPS[on]}" <<'EOF'
import sys
n, s, off, on = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
b = 128 * n
print("| simulated | steps | off: images/s | on: images/s | off: ms/step | on: ms/step | on/off |")
print("|---|---:|---:|---:|---:|---:|---:|")
print(f"| resnet50, {n} x 4 K80, batch {b} | {s} | {off:.1f} | {on:.1f} | {1000 * b / off:.1f} | {1000 * b / on:.1f} | {on / off:.3f} |")
EOF
  exit 0
fi
STEPS="${STEPS:-20}"
[ -x "$A" ] || { echo "deterministic_cost.sh: $A is missing (scripts/test.sh or cmake --build build)" >&2; exit 1; }
CASES=("$@"); [ ${#CASES[@]} -gt 0 ] || CASES=(lenet5:64 resnet8:64 resnet20:64)
mkdir -p "$OUT"
CSV="$OUT/runs.csv"
echo "round,ncpu,net,batch,mode,chunks,images_per_s,load1" >"$CSV"
echo "deterministic_cost: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $ROUNDS rounds, $STEPS steps" >&2
for r in $(seq 1 "$ROUNDS"); do
  order="off on"; [ $((r % 2)) = 0 ] && order="on off"
  for n in $NCPUS; do
    for c in "${CASES[@]}"; do
      net="${c%%:*}" b="${c##*:}"
      for mode in $order; do
        load="$(cut -d' ' -f1 /proc/loadavg)"
        line="$(STARPU_NCPU="$n" STARPU_NCUDA=0 "$A" bench --net "$net" --batch "$b" --steps "$STEPS" --warmup 3 \
                 --deterministic "$mode" --quiet 2>/dev/null | grep '^result:')" \
          || { echo "deterministic_cost.sh: run failed: ncpu $n $net b$b --deterministic $mode" >&2; exit 1; }
        ips="$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^images_per_s=//p')"
        ch="$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^chunks=//p')"
        echo "$r,$n,$net,$b,$mode,$ch,$ips,$load" >>"$CSV"
        echo "round $r ncpu $n $net b$b $mode: $ips images/s" >&2
      done
    done
  done
done
python3 - "$CSV" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = sorted({(int(r["ncpu"]), r["net"], int(r["batch"])) for r in rows}, key=lambda k: (k[0], k[1], k[2]))
print("| workers | net | batch | chunks | off: median (min-max) | on: median (min-max) | on/off |")
print("|---:|---|---:|---:|---:|---:|---:|")
for k in keys:
    cell = {}
    for m in ("off", "on"):
        v = [float(r["images_per_s"]) for r in rows if (int(r["ncpu"]), r["net"], int(r["batch"])) == k and r["mode"] == m]
        cell[m] = (statistics.median(v), min(v), max(v), len(v))
    ch = next(r["chunks"] for r in rows if (int(r["ncpu"]), r["net"], int(r["batch"])) == k)
    f = lambda c: f"{c[0]:.0f} ({c[1]:.0f}-{c[2]:.0f}, {c[3]} runs)"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {ch} | {f(cell['off'])} | {f(cell['on'])} | {cell['on'][0] / cell['off'][0]:.3f} |")
EOF
