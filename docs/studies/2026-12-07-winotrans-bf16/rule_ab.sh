#!/usr/bin/env bash
# rule_ab.sh — rule_harness (this folder) on ResNet-20's and ResNet-8's 3x3 stride-1 shapes at a task's 32 images,
# ROUNDS runs over the shapes, each at the measured priority (scripts/measure_prio.sh) with INNER rotated rounds
# inside; one CSV line per (run, shape, variant): round,shape,variant,median_ms,best_ms,load1
#
#   docs/studies/2026-12-07-winotrans-bf16/rule_ab.sh ROUNDS INNER OUT.csv [HARNESS]   (/tmp/winotrans_rule)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
[ $# -ge 3 ] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rounds=$1 inner=$2 out=$3 bin=${4:-/tmp/winotrans_rule}
shapes=("16 32 16" "32 16 32" "64 8 64" "16 28 16" "32 14 32" "64 7 64") # C H K
echo "round,shape,variant,median_ms,best_ms,load1" >"$out"
for ((r = 1; r <= rounds; r++)); do
	for sh in "${shapes[@]}"; do
		read -r c h k <<<"$sh"
		load=$(cut -d' ' -f1 /proc/loadavg)
		OMP_NUM_THREADS=1 setsid -w bash "$ROOT/scripts/measure_prio.sh" env -u OPENBLAS_CORETYPE timeout 300 \
			"$bin" "$inner" 32 "$c" "$h" "$k" | grep -v '^#' | sed "s/^/$r,/; s/\$/,$load/" >>"$out"
	done
done
