#!/usr/bin/env bash
# scaling.sh A_BIN B_BIN [ROUNDS] [NET:BATCH] — images/s of two starpu_anp builds at 1 and 2 CPU workers, interleaved
# (A then B, B then A in even rounds), one line per run: round build ncpu images_per_s load1. Run it as
#   setsid -w bash scripts/measure_prio.sh env -u OPENBLAS_CORETYPE bash docs/studies/2026-12-07-resnet8-fp32b/scaling.sh OLD NEW 3
set -euo pipefail
A=$1 B=$2 R=${3:-3} NB=${4:-resnet8:64}
NET=${NB%%:*} BATCH=${NB##*:}
for r in $(seq 1 "$R"); do
	order="A B"; [ $((r % 2)) -eq 0 ] && order="B A"
	for ab in $order; do
		bin=$A; [ "$ab" = B ] && bin=$B
		for n in 1 2; do
			load=$(cut -d' ' -f1 /proc/loadavg)
			ips=$(STARPU_NCPU=$n timeout 300 "$bin" bench --net "$NET" --batch "$BATCH" --steps 20 --warmup 3 2>/dev/null |
				sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p')
			echo "$r $ab $n ${ips:-NA} $load"
		done
	done
done
