#!/usr/bin/env bash
# gpt_bf16_ab.sh — two (or more) starpu_anp builds side by side on gpt-nano training steps, with the
# per-codelet time of each run (docs/studies/2026-12-07-gpt-bf16-speed.md): in each round, every binary
# in turn (the order reversed on even rounds), each precision, one run of
#   STARPU_NCPU=1 DNN_BREAKDOWN=2 BIN bench --net gpt-nano --batch 16 --steps S --warmup 2 --optimizer adamw ...
# at the measured runs' priority (scripts/lib.sh anp_measure_prio). One CSV row per run: tokens/s, the
# 1-minute load average when it started, and the critical path's ms per codelet (one worker: every task
# is on it) for attention forward/backward and dense forward/backward data/backward weight, and the span;
# cpu_s, the run's user + system CPU seconds (/usr/bin/time, start-up included), which the other
# processes of a loaded machine move far less than the wall clock.
#
# Usage: bench/gpt_bf16_ab.sh [--rounds N] [--steps S] [--precision "bf16 fp32"] [--out CSV] BIN_A BIN_B...
#   defaults: 3 rounds, 20 steps, bf16 only, out/gpt-bf16-ab-<date>.csv; compare ratios within one run only
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh" # the measured runs' priority
anp_measure_prio "$ROOT"
ROUNDS=3; STEPS=20; PRECS=bf16; CSV="$ROOT/out/gpt-bf16-ab-$(date +%Y%m%d-%H%M%S).csv"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --steps) STEPS="$2"; shift ;;
    --precision) PRECS="$2"; shift ;;
    --out) CSV="$2"; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpt_bf16_ab.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$STEPS" =~ ^[1-9][0-9]*$ ]] || { echo "gpt_bf16_ab.sh: --rounds and --steps need positive integers" >&2; exit 2; }
[ $# -ge 1 ] || { echo "gpt_bf16_ab.sh: give at least one starpu_anp binary (--help)" >&2; exit 2; }
for b in "$@"; do [ -x "$b" ] || { echo "gpt_bf16_ab.sh: $b is not an executable" >&2; exit 2; }; done
for p in $PRECS; do [[ "$p" =~ ^(fp32|bf16)$ ]] || { echo "gpt_bf16_ab.sh: --precision takes fp32 and/or bf16, not '$p'" >&2; exit 2; }; done
mkdir -p "$(dirname "$CSV")"
echo "round,bin,precision,tokens_per_s,load1,att_fwd_ms,att_bwd_ms,dense_fwd_ms,dense_bwd_data_ms,dense_bwd_weight_ms,span_ms,cpu_s" >"$CSV"
BINS=("$@")
for r in $(seq 1 "$ROUNDS"); do
  order=("${BINS[@]}")
  if [ $((r % 2)) = 0 ]; then order=(); for ((i = ${#BINS[@]} - 1; i >= 0; i--)); do order+=("${BINS[$i]}"); done; fi
  for b in "${order[@]}"; do
    for p in $PRECS; do
      l="$(cut -d' ' -f1 /proc/loadavg)"
      tf="$(mktemp)"
      out="$(STARPU_NCPU=1 STARPU_NCUDA=0 DNN_BREAKDOWN=2 "${ANP_PRIO[@]}" timeout 600 /usr/bin/time -f "cpu_s %U %S" -o "$tf" "$b" bench --net gpt-nano --batch 16 \
               --steps "$STEPS" --warmup 2 --optimizer adamw --lr 6e-4 --weight-decay 0.1 --precision "$p" 2>&1 || true)"
      cp="$(grep '^critpath' <<<"$out" || true)"
      ms() { grep -o "$1 [0-9.]*" <<<"$cp" | head -1 | awk '{ print $2 }'; }
      tps="$(grep -o 'tokens_per_s=[0-9.]*' <<<"$out" | cut -d= -f2 || true)"
      echo "$r,$b,$p,$tps,$l,$(ms cl_attention_fwd),$(ms cl_attention_bwd),$(ms cl_dense_fwd),$(ms cl_dense_bwd_data),$(ms cl_dense_bwd_weight),$(grep -o 'span [0-9.]*' <<<"$cp" | awk '{ print $2 }'),$(awk '$1 == "cpu_s" { print $2 + $3 }' "$tf")" >>"$CSV"
      rm -f "$tf"
      printf '  round %s %s %s: %s tokens/s (load %s)\n' "$r" "$b" "$p" "${tps:-?}" "$l" >&2
    done
  done
done
echo "rows in $CSV" >&2
