#!/usr/bin/env bash
# bf16_act_kernels.sh — where the bf16 activation storage moves time, kernel by kernel: gpt-nano
# (or NET) training steps with --precision bf16, DNN_BF16_ACTIVATIONS=1 (storage on) and 0 (off),
# interleaved rounds (on off, off on, ...), each setting calibrating its own StarPU history models
# (STARPU_HOME per setting, STARPU_CALIBRATE=1), so each codelet's mean time per shape (footprint)
# is averaged over every round's executions. Prints per codelet the sum over its shapes of
# mean x executions, on and off, their ratio and the executions counted; per shape rows in
# OUT/kernels.csv
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
echo "storage,codelet,footprint,bytes,flops,mean_us,n" >"$OUT/kernels.csv"
for v in 1 0; do
  for f in "$OUT/home$v"/.starpu/sampling/codelets/*/*; do
    [ -f "$f" ] || continue
    sym="$(basename "$f")"; sym="${sym%%.*}"
    STARPU_HOME="$OUT/home$v" starpu_perfmodel_display -s "$sym" 2>/dev/null \
      | awk -v s="${sym#dnn_cl_}" -v v="$v" '/^#/ || NF < 6 { next } { print v "," s "," $1 "," $2 "," $3 "," $4 "," $6 }'
  done
done >>"$OUT/kernels.csv"
# per codelet: its time per execution (the sum over its shapes of mean x n, over the n), on and off,
# and their ratio; "on ms", "off ms" weigh both by the same count, the mean of the two n (StarPU
# records a varying share of the executions, and the footprints differ between the settings, as
# the arguments carry the storage flags), so the columns and the total compare the same work
awk -F, 'NR > 1 { t[$1, $2] += $6 * $7; n[$1, $2] += $7; c[$2] = 1 }
  END { for (k in c) if (n[1, k] && n[0, k]) { w = (n[1, k] + n[0, k]) / 2; on[k] = t[1, k] / n[1, k] * w
        off[k] = t[0, k] / n[0, k] * w; ton += on[k]; toff += off[k] }
    printf "%-24s %10s %10s %8s %8s %7s %7s\n", "codelet", "on ms", "off ms", "on/off", "on share", "n on", "n off"
    for (k in on) printf "%-24s %10.1f %10.1f %8.3f %8.3f %7d %7d\n", k, on[k] / 1e3, off[k] / 1e3, on[k] / off[k],
      on[k] / ton, n[1, k], n[0, k]
    printf "%-24s %10.1f %10.1f %8.3f\n", "all", ton / 1e3, toff / 1e3, ton / toff }' "$OUT/kernels.csv" \
  | { read -r h; echo "$h"; sort -k2,2 -g -r; } | tee "$OUT/summary.txt"
