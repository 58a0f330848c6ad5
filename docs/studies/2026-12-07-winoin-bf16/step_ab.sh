#!/usr/bin/env bash
# step_ab.sh — a bf16 training step, two starpu_anp builds (A: before, B: after) side by side: each round runs A and
# B in rotated order, with 1 worker (DNN_BREAKDOWN=2: the critical path by codelet) and with 2 workers, at the
# measured priority (scripts/measure_prio.sh):
#   STARPU_NCPU=W DNN_BREAKDOWN=2 BIN bench --net NET --batch B --chunks 2 --steps 10 --warmup 3 --precision bf16
# One CSV line per run: round,build,workers,images_per_s,span_ms,fwd_ms,bwd_data_ms,bwd_filter_ms,load1 (the critical
# path's ms per codelet over the 10 steps); each run's whole critpath line goes to OUT.critpath.txt.
#
#   docs/studies/2026-12-07-winoin-bf16/step_ab.sh ROUNDS OUT.csv A_BIN B_BIN [NET [BATCH]]   (resnet20, 64)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
[ $# -ge 4 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rounds=$1 out=$2 A=$3 B=$4 net=${5:-resnet20} batch=${6:-64}
echo "round,build,workers,images_per_s,span_ms,fwd_ms,bwd_data_ms,bwd_filter_ms,load1" >"$out"
: >"$out.critpath.txt"
runs=(A B)
for ((r = 1; r <= rounds; r++)); do
	for ((i = 0; i < 2; i++)); do
		b=${runs[$(((i + r - 1) % 2))]}
		bin=$A
		[ "$b" = B ] && bin=$B
		for w in 1 2; do
			load=$(cut -d' ' -f1 /proc/loadavg)
			o=$(STARPU_NCPU=$w STARPU_NCUDA=0 DNN_BREAKDOWN=2 setsid -w bash "$ROOT/scripts/measure_prio.sh" \
				env -u OPENBLAS_CORETYPE timeout 300 "$bin" bench --net "$net" --batch "$batch" --chunks 2 \
				--steps 10 --warmup 3 --precision bf16 2>&1) || { echo "step_ab.sh: $b $w workers failed" >&2; exit 1; }
			ips=$(grep -o 'images_per_s=[0-9.]*' <<<"$o" | tail -1 | cut -d= -f2)
			cp=$(grep 'critpath: rank 0' <<<"$o" | head -1)
			span=$(grep -o 'span [0-9.]*' <<<"$cp" | cut -d' ' -f2)
			f() { grep -o "$1 [0-9.]*" <<<"$cp" | head -1 | cut -d' ' -f2; }
			echo "== round $r build $b $w workers, load $load: $cp" >>"$out.critpath.txt"
			echo "$r,$b,$w,$ips,$span,$(f cl_conv2d_fwd),$(f cl_conv2d_bwd_data),$(f cl_conv2d_bwd_filter),$load" >>"$out"
		done
	done
done
