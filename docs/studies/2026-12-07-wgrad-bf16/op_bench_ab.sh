#!/usr/bin/env bash
# op_bench_ab.sh — the conv weight-gradient rows of several dnn_op_bench binaries and settings, side by side:
# each round runs every LABEL=BINARY:ALGO:PRECISION once, in rotated order (A B C, B C A, ...), at the
# measured priority (scripts/measure_prio.sh), and keeps the bwd_filter rows, one CSV line each:
#   round,label,shape,phase,ms,load1
#
#   docs/studies/2026-12-07-wgrad-bf16/op_bench_ab.sh ROUNDS OUT.csv LABEL=BIN:ALGO:PREC ...
#   e.g. ... 5 out.csv base=/tmp/base/dnn_op_bench:auto:bf16 new=build/bench/dnn_op_bench:auto:bf16 \
#            fp32=build/bench/dnn_op_bench:auto:fp32
# (ALGO: dnn_op_bench --conv-algo's names; 64 images, one core, thread CPU time, best of 5.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
[ $# -ge 3 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rounds=$1 out=$2
shift 2
specs=("$@")
echo "round,label,shape,phase,ms,load1" >"$out"
n=${#specs[@]}
for ((r = 1; r <= rounds; r++)); do
	for ((i = 0; i < n; i++)); do
		spec=${specs[$(((i + r - 1) % n))]}
		label=${spec%%=*} rest=${spec#*=}
		IFS=: read -r bin algo prec <<<"$rest"
		load=$(cut -d' ' -f1 /proc/loadavg)
		OMP_NUM_THREADS=1 setsid -w bash "$ROOT/scripts/measure_prio.sh" env -u OPENBLAS_CORETYPE timeout 300 \
			"$bin" --op conv2d --batch 64 --reps 5 --clock cpu --conv-algo "$algo" --precision "$prec" |
			awk -F'|' -v r="$r" -v l="$label" -v ld="$load" '$4 ~ /bwd_filter/ {
				gsub(/^ +| +$/, "", $3); gsub(/,/, "", $3); gsub(/^ +| +$/, "", $4); gsub(/ /, "", $5)
				printf "%s,%s,%s,%s,%s,%s\n", r, l, $3, $4, $5, ld }' >>"$out"
	done
done
