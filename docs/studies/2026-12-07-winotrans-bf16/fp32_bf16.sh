#!/usr/bin/env bash
# fp32_bf16.sh — one starpu_anp build's training step in fp32 and in bf16 side by side (the bf16/fp32 ratio of the
# issue's target), ROUNDS rounds in alternating order, one and two workers, at the measured priority:
#   STARPU_NCPU=W BIN bench --net NET --batch B --chunks 2 --steps 10 --warmup 3 --precision P
# One CSV line per run: round,precision,workers,images_per_s,load1.
#
#   docs/studies/2026-12-07-winotrans-bf16/fp32_bf16.sh ROUNDS OUT.csv BIN [NET [BATCH]]   (resnet20, 64)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
[ $# -ge 3 ] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rounds=$1 out=$2 bin=$3 net=${4:-resnet20} batch=${5:-64}
echo "round,precision,workers,images_per_s,load1" >"$out"
for ((r = 1; r <= rounds; r++)); do
	order="fp32 bf16"
	[ $((r % 2)) = 0 ] && order="bf16 fp32"
	for p in $order; do
		for w in 1 2; do
			load=$(cut -d' ' -f1 /proc/loadavg)
			o=$(STARPU_SILENT=1 STARPU_NCPU=$w STARPU_NCUDA=0 setsid -w bash "$ROOT/scripts/measure_prio.sh" \
				env -u OPENBLAS_CORETYPE timeout 300 "$bin" bench --net "$net" --batch "$batch" --chunks 2 \
				--steps 10 --warmup 3 --precision "$p" 2>&1) || { echo "fp32_bf16.sh: $p $w workers failed" >&2; exit 1; }
			echo "$r,$p,$w,$(grep -o 'images_per_s=[0-9.]*' <<<"$o" | tail -1 | cut -d= -f2),$load" >>"$out"
		done
	done
done
