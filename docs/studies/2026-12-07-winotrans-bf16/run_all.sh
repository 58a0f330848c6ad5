#!/usr/bin/env bash
# run_all.sh — the study's step measurements, given two starpu_anp builds, OLD (main before this work) and NEW (this
# branch), written into OUT:
#   step_resnet20_b64.csv, step_resnet8_b64.csv   OLD vs NEW, the winoin study's step_ab.sh (1 and 2 workers)
#   fp32_bf16_new_resnet20_b64.csv                fp32_bf16.sh on NEW (the bf16/fp32 ratio)
#   profile_new.txt                               perf report of NEW's bf16 resnet20 b64 step, one worker
#
#   docs/studies/2026-12-07-winotrans-bf16/run_all.sh OLD NEW OUT [ROUNDS]   (6)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
[ $# -ge 3 ] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
old=$1 new=$2 out=$3 rounds=${4:-6}
S="$ROOT/docs/studies/2026-12-07-winoin-bf16/step_ab.sh" H="$ROOT/docs/studies/2026-12-07-winotrans-bf16"
mkdir -p "$out"
echo "start: $(uptime)"
bash "$S" "$rounds" "$out/step_resnet20_b64.csv" "$old" "$new" resnet20 64
bash "$S" "$rounds" "$out/step_resnet8_b64.csv" "$old" "$new" resnet8 64
bash "$H/fp32_bf16.sh" "$rounds" "$out/fp32_bf16_new_resnet20_b64.csv" "$new" resnet20 64
tmp=$(mktemp -d)
STARPU_SILENT=1 STARPU_NCPU=1 STARPU_NCUDA=0 timeout 300 perf record -q -o "$tmp/perf.data" -F 4000 -- env -u OPENBLAS_CORETYPE \
	"$new" bench --net resnet20 --batch 64 --chunks 2 --steps 40 --warmup 3 --precision bf16 >/dev/null 2>&1
perf report -i "$tmp/perf.data" --no-children --sort sym >"$tmp/report.txt" 2>/dev/null
grep -v '^#' "$tmp/report.txt" | grep -v '^$' | sed -n '1,40p' >"$out/profile_new.txt"
rm -rf "$tmp"
echo "end: $(uptime)"
