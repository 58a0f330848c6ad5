#!/usr/bin/env bash
# run_all.sh — the study's step measurements, given three starpu_anp builds: OLD (main before this work), NOROLE (the
# new transforms with the former ONEDNN_CONV_RULE: this branch at 365befe) and NEW (this branch), written into OUT:
#   step_resnet20_b64.csv, step_resnet8_b64.csv   OLD vs NEW, the winoin study's step_ab.sh (1 and 2 workers)
#   rule_resnet20_b64.csv, rule_resnet8_b64.csv   NOROLE vs NEW: the rule change alone
#   fp32_bf16_{old,new}_resnet20_b64.csv          fp32_bf16.sh on OLD and on NEW
#   profile_new.txt                               perf report of NEW's bf16 resnet20 b64 step, one worker
#
#   docs/studies/2026-12-07-winotrans-bf16/run_all.sh OLD NOROLE NEW OUT [ROUNDS]   (6)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
[ $# -ge 4 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
old=$1 norule=$2 new=$3 out=$4 rounds=${5:-6}
S="$ROOT/docs/studies/2026-12-07-winoin-bf16/step_ab.sh" H="$ROOT/docs/studies/2026-12-07-winotrans-bf16"
mkdir -p "$out"
echo "start: $(uptime)"
bash "$S" "$rounds" "$out/step_resnet20_b64.csv" "$old" "$new" resnet20 64
bash "$S" "$rounds" "$out/step_resnet8_b64.csv" "$old" "$new" resnet8 64
bash "$S" "$rounds" "$out/rule_resnet20_b64.csv" "$norule" "$new" resnet20 64
bash "$S" "$rounds" "$out/rule_resnet8_b64.csv" "$norule" "$new" resnet8 64
bash "$H/fp32_bf16.sh" "$rounds" "$out/fp32_bf16_new_resnet20_b64.csv" "$new" resnet20 64
bash "$H/fp32_bf16.sh" "$rounds" "$out/fp32_bf16_old_resnet20_b64.csv" "$old" resnet20 64
tmp=$(mktemp -d)
STARPU_SILENT=1 STARPU_NCPU=1 STARPU_NCUDA=0 timeout 300 perf record -q -o "$tmp/perf.data" -F 4000 -- env -u OPENBLAS_CORETYPE \
	"$new" bench --net resnet20 --batch 64 --chunks 2 --steps 40 --warmup 3 --precision bf16 >/dev/null 2>&1
perf report -i "$tmp/perf.data" --no-children --sort sym 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 >"$out/profile_new.txt"
rm -rf "$tmp"
echo "end: $(uptime)"
