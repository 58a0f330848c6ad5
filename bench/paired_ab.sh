#!/usr/bin/env bash
# paired_ab.sh — two starpu_anp builds side by side on a shared machine: for each round and each
# NET:BATCH, run A then B (B then A in even rounds), and print per run the images/s and the CPU
# time per step, which other processes on the cores inflate much less than the wall clock.
#
#   bench/paired_ab.sh [--rounds R] [--steps S] A_BINARY B_BINARY NET:BATCH...
#   e.g. bench/paired_ab.sh --rounds 3 /tmp/main/starpu_anp build/apps/starpu_anp resnet8:64 resnet20:256
#
# Options:
#   --rounds R   rounds [3]
#   --steps S    timed steps per run, after 3 warm-up steps [14]; below about 10 the start-up's
#                own spread swamps the difference of the two runs' CPU times
#
# Each measurement is two runs of `STARPU_NCPU=2 BIN bench --net NET --batch B --warmup 3`, with
# --steps S and --steps 2, under `perf stat -e task-clock`:
#   cpu_ms_per_step = (CPU time of the S-step run - CPU time of the 2-step run) / (S - 2)
# (start-up and warm-up cancel); images_per_s is the S-step run's own figure.
# Output, one line per run: round net batch A|B images_per_s cpu_ms_per_step load1
# (load1: /proc/loadavg's 1-minute load average when the run started). Needs perf.
# docs/benchmarks.md ("Intel Xeon ... before and after") has a table made from it.
set -euo pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
rounds=3
steps=14
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
	--steps) steps=${2:?--steps needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	--*) echo "error: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	*) break ;;
	esac
done
if [ $# -lt 3 ]; then
	echo "error: expected A_BINARY B_BINARY NET:BATCH..." >&2
	usage >&2
	exit 2
fi
A=$1 B=$2
shift 2
for bin in "$A" "$B"; do
	[ -x "$bin" ] || { echo "error: $bin: not an executable" >&2; exit 2; }
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "error: --rounds: expected a positive integer, got '$rounds'" >&2; exit 2; }
[[ "$steps" =~ ^[0-9]+$ && "$steps" -ge 3 ]] || { echo "error: --steps: expected an integer >= 3, got '$steps'" >&2; exit 2; }
command -v perf >/dev/null || { echo "error: perf not found (linux-perf)" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# cpu_run BIN NET BATCH STEPS: sets $ips (images/s) and $cpu_ms (the run's CPU time, ms)
cpu_run() {
	local out
	out=$(STARPU_NCPU=2 perf stat -x, -e task-clock -o "$tmp" "$1" bench --net "$2" --batch "$3" --steps "$4" --warmup 3 2>&1) || {
		echo "error: $1 bench --net $2 --batch $3 failed: $(echo "$out" | tail -1)" >&2
		exit 1
	}
	cpu_ms=$(grep task-clock "$tmp" | cut -d, -f1)
	ips=$(echo "$out" | grep -o 'images_per_s=[0-9.]*' | cut -d= -f2)
}

for r in $(seq 1 "$rounds"); do
	for nb in "$@"; do
		net=${nb%:*} batch=${nb#*:}
		if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
		for who in $order; do
			if [ "$who" = A ]; then bin=$A; else bin=$B; fi
			load=$(cut -d' ' -f1 /proc/loadavg)
			cpu_run "$bin" "$net" "$batch" 2
			t0=$cpu_ms
			cpu_run "$bin" "$net" "$batch" "$steps"
			t1=$cpu_ms
			echo "$r $net $batch $who $ips $(echo "($t1 - $t0) / ($steps - 2)" | bc -l | xargs printf %.1f) $load"
		done
	done
done
