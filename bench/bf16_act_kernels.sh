#!/usr/bin/env bash
# bf16_act_kernels.sh — where the bf16 activation storage moves time, kernel by kernel: gpt-nano
# (or NET) training steps with --precision bf16, DNN_BF16_ACTIVATIONS=1 (storage on) and 0 (off),
# interleaved rounds (on off, off on, ...), each setting calibrating its own StarPU history models
# (STARPU_HOME per setting, STARPU_CALIBRATE=1), so each codelet's mean time per shape (footprint)
# is averaged over every round's executions. Prints per codelet the sum over its shapes of
# mean x executions (the two settings' mean count), on and off, and their ratio (a shape that
# only one setting has, e.g. a bf16 output's own footprint, is left out of the sums); per shape rows in OUT/kernels.csv
# (docs/studies/2026-12-07-act-bf16-gpt.md). Times include the machine's load: give it (uptime).
#
# Usage: bench/bf16_act_kernels.sh [--rounds N] [--threads N] [--gpt NET:T:B] [--build DIR] [--out DIR]
#   defaults: 3 rounds, 1 worker, gpt-nano:128:16, build/, out/bf16-act-kernels-<date>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh"
anp_measure_prio "$ROOT"
ROUNDS=3; NT=1; G=gpt-nano:128:16; BUILD="$ROOT/build"; OUT="$ROOT/out/bf16-act-kernels-$(date +%Y%m%d-%H%M%S)"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --threads) NT="$2"; shift ;;
    --gpt) G="$2"; shift ;;
    --build) BUILD="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bf16_act_kernels.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
IFS=: read -r NET T B <<<"$G"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$NT" =~ ^[1-9][0-9]*$ && "$T" =~ ^[1-9][0-9]*$ && "$B" =~ ^[1-9][0-9]*$ ]] \
  || { echo "bf16_act_kernels.sh: --rounds, --threads and --gpt NET:T:B need positive integers" >&2; exit 2; }
APP="$BUILD/apps/starpu_anp"
[ -x "$APP" ] || { echo "bf16_act_kernels.sh: no $APP (build first, or --build DIR)" >&2; exit 1; }
command -v starpu_perfmodel_display >/dev/null || { echo "bf16_act_kernels.sh: no starpu_perfmodel_display (source scripts/env.sh)" >&2; exit 1; }
NETFILE="$ROOT/graph/nets/$NET.net"
[ -f "$NETFILE" ] || { echo "bf16_act_kernels.sh: no net file $NETFILE" >&2; exit 2; }
mkdir -p "$OUT/home1" "$OUT/home0"
sed -E "s/^(input [^ ]+ tokens) [0-9]+/\1 $T/" "$NETFILE" >"$OUT/$NET.net"
echo "measured runs: $ANP_PRIO_SAID" >"$OUT/log.txt"
for r in $(seq 1 "$ROUNDS"); do
  order="1 0"; [ $((r % 2)) = 1 ] || order="0 1"
  for v in $order; do
    line="$(DNN_BF16_ACTIVATIONS=$v STARPU_HOME="$OUT/home$v" STARPU_CALIBRATE=1 STARPU_NCPU="$NT" STARPU_NCUDA=0 \
            "${ANP_PRIO[@]}" timeout 600 "$APP" bench --net "$OUT/$NET.net" --batch "$B" --steps 12 --warmup 2 \
            --optimizer adamw --lr 6e-4 --weight-decay 0.1 --precision bf16 --quiet 2>>"$OUT/log.txt" | tail -1 || true)"
    echo "round $r storage=$v load $(cut -d' ' -f1 /proc/loadavg): $line" >>"$OUT/log.txt"
    printf '  round %s storage %s: %s tokens/s (load %s)\n' "$r" "$v" "$(anp_result_field "$line" tokens_per_s)" \
      "$(cut -d' ' -f1 /proc/loadavg)" >&2
  done
done
echo "codelet,footprint,bytes,mean_us_on,n_on,mean_us_off,n_off" >"$OUT/kernels.csv"
for v in 1 0; do
  for f in "$OUT/home$v"/.starpu/sampling/codelets/*/*; do
    [ -f "$f" ] || continue
    sym="$(basename "$f")"; sym="${sym%%.*}"
    STARPU_HOME="$OUT/home$v" starpu_perfmodel_display -s "$sym" 2>/dev/null \
      | awk -v s="$sym" -v v="$v" '/^#/ || NF < 6 { next } { print s "," $1 "," $2 "," $4 "," $6 "," v }'
  done
done | awk -F, '{ k = $1 "," $2 "," $3; if ($6 == 1) { on[k] = $4; non[k] = $5 } else { off[k] = $4; noff[k] = $5 } seen[k] = 1 }
  END { for (k in seen) printf "%s,%s,%s,%s,%s\n", k, on[k], non[k], off[k], noff[k] }' | sort >>"$OUT/kernels.csv"
# per codelet: sum over shapes of mean x n (the executions recorded), on and off
# (weighted alike: the mean of the two counts, so that a ratio compares the same executions)
awk -F, 'NR > 1 && $4 != "" && $6 != "" { c = $1; sub(/^dnn_cl_/, "", c); w = ($5 + $7) / 2
    on[c] += $4 * w; off[c] += $6 * w; ton += $4 * w; toff += $6 * w }
  END { printf "%-26s %12s %12s %8s %8s\n", "codelet", "on ms", "off ms", "on/off", "on share"
    for (c in on) printf "%-26s %12.1f %12.1f %8.3f %8.3f\n", c, on[c] / 1e3, off[c] / 1e3, off[c] ? on[c] / off[c] : 0, on[c] / ton
    printf "%-26s %12.1f %12.1f %8.3f\n", "all", ton / 1e3, toff / 1e3, ton / toff }' "$OUT/kernels.csv" \
  | { read -r h; echo "$h"; sort -k2,2 -g -r; } | tee "$OUT/summary.txt"
