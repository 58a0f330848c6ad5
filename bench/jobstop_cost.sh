#!/usr/bin/env bash
# jobstop_cost.sh — what the stop verdict costs under mpirun: rank 0 decides after a step whether
# the job stops (SIGTERM/SIGUSR1, --time-limit) and sends its verdict to every rank
# (runtime/jobstop.c). Every multi-rank `train` exchanges it, stop option or not, so the baseline
# is a build without the exchange: this script builds one (BASE_BUILD, the same sources configured
# with -DDNN_JOBSTOP_BENCH_NO_EXCHANGE: each rank then decides alone, which only holds while no
# stop comes; never a build to run jobs with) and runs `train` of both side by side, interleaved
# over rounds (with then without in odd rounds, without then with in even ones).
#
#   bench/jobstop_cost.sh [--rounds R] [--np N] [--out DIR] [-- extra train options]
#   defaults: 7 rounds, 2 ranks, lenet5, batch 64, 2 epochs of 25,600 samples (800 steps), no eval
#
# Writes DIR/runs.csv (round,variant,images_per_s,load1) and prints the median images/s of each
# variant with min-max and with/without of the medians. Exit status: 0, 1 if a run or the build
# failed, 2 on a usage error.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
A="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
BASE_BUILD="${BASE_BUILD:-$ROOT/build-jobstop-base}"
ROUNDS=7 NP=2 OUT="$ROOT/out/jobstop_cost" EXTRA=()
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "jobstop_cost.sh: --rounds '${2:-}': expected a positive integer" >&2; exit 2; }; ROUNDS="$2"; shift 2 ;;
    --np) [[ "${2:-}" =~ ^[2-9]$ ]] || { echo "jobstop_cost.sh: --np '${2:-}': expected 2 to 9 ranks" >&2; exit 2; }; NP="$2"; shift 2 ;;
    --out) [ -n "${2:-}" ] || { echo "jobstop_cost.sh: --out needs a directory" >&2; exit 2; }; OUT="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "jobstop_cost.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$A" ] || { echo "jobstop_cost.sh: $A is missing (cmake --build build)" >&2; exit 1; }
# shellcheck source=../scripts/env.sh
source "$ROOT/scripts/env.sh" --quiet # the StarPU prefix, for CMake
if [ ! -f "$BASE_BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BASE_BUILD" -DCMAKE_C_FLAGS=-DDNN_JOBSTOP_BENCH_NO_EXCHANGE >"$BASE_BUILD.cmake.log" 2>&1 \
    || { tail -5 "$BASE_BUILD.cmake.log" >&2; echo "jobstop_cost.sh: configuring $BASE_BUILD failed" >&2; exit 1; }
fi
cmake --build "$BASE_BUILD" -j2 --target starpu_anp >"$BASE_BUILD.build.log" 2>&1 \
  || { grep -m5 error "$BASE_BUILD.build.log" >&2; echo "jobstop_cost.sh: building $BASE_BUILD failed" >&2; exit 1; }
B="$BASE_BUILD/apps/starpu_anp"
mkdir -p "$OUT"
CSV="$OUT/runs.csv"
echo "round,variant,images_per_s,load1" >"$CSV"
ARGS=(train --net lenet5 --limit-train 25600 --no-eval --batch 64 --epochs 2 --seed 7 --quiet "${EXTRA[@]}")
echo "jobstop_cost: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $ROUNDS rounds, $NP ranks: ${ARGS[*]}" >&2
for r in $(seq 1 "$ROUNDS"); do
  order="with without"; [ $((r % 2)) = 0 ] && order="without with"
  for v in $order; do
    bin="$A"; [ "$v" = without ] && bin="$B"
    load="$(cut -d' ' -f1 /proc/loadavg)"
    line="$(STARPU_NCPU=1 STARPU_NCUDA=0 STARPU_SILENT=1 timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$NP" \
             -x STARPU_NCPU -x STARPU_NCUDA -x STARPU_SILENT "$bin" "${ARGS[@]}" 2>/dev/null | grep '^result:' | head -1)" \
      || { echo "jobstop_cost.sh: run failed: $v the exchange: $bin ${ARGS[*]}" >&2; exit 1; }
    ips="$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n 's/^images_per_s=//p')"
    echo "$r,$v,$ips,$load" >>"$CSV"
    echo "round $r, $v the exchange: $ips images/s (load $load)" >&2
  done
done
python3 - "$CSV" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cell = {}
for v in ("with", "without"):
    x = [float(r["images_per_s"]) for r in rows if r["variant"] == v]
    cell[v] = (statistics.median(x), min(x), max(x), len(x))
f = lambda c: f"{c[0]:.0f} ({c[1]:.0f}-{c[2]:.0f}, {c[3]} runs)"
pairs = {}
for r in rows:
    pairs.setdefault(r["round"], {})[r["variant"]] = float(r["images_per_s"])
ratios = sorted(p["with"] / p["without"] for p in pairs.values() if len(p) == 2)
print("| with the exchange: median (min-max) | without: median (min-max) | with/without (medians) | per round: median (min-max) |")
print("|---:|---:|---:|---:|")
print(f"| {f(cell['with'])} | {f(cell['without'])} | {cell['with'][0] / cell['without'][0]:.3f} | "
      f"{statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f}) |")
EOF
