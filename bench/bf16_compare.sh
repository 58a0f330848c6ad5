#!/usr/bin/env bash
# bf16_compare.sh — gpt-nano training steps in fp32 and bf16, starpu-anp against PyTorch, side by
# side on this machine (docs/studies/2026-12-07-bf16.md): in each round, in alternating order,
#   starpu_anp bench --precision fp32 | bf16   (STARPU_NCPU=N)
#   bench/gpt_torch_step.py --autocast off | bf16   (N threads; bf16 = torch.autocast("cpu", dtype=torch.bfloat16))
# every step forward, per-token loss, backward, AdamW (lr 6e-4, weight decay 0.1), as
# compare_frameworks.sh --gpt. Prints the median tokens/s of each and the ratios bf16/fp32 (ours)
# and ours-bf16/PyTorch-autocast; raw rows in OUT/runs.csv with the load average of each run.
#
# With --image NET:B an image net instead (resnet20, lenet5, ...: docs/studies/2026-12-07-conv-bf16.md):
#   starpu_anp bench --net NET --batch B --steps 8 --precision fp32 | bf16 (sgd, its defaults)
#   bench/pytorch_nets.py --net NET --batch B --steps 8 --autocast off | bf16
# and images/s in place of tokens/s.
#
# With --storage-ab: the bf16 activation storage's A/B instead of PyTorch (docs/studies/
# 2026-12-07-act-bf16-gpt.md): starpu_anp fp32, bf16 (storage on, the default) and bf16 with
# DNN_BF16_ACTIVATIONS=0 (every activation fp32), "bf16-act0" in the rows.
#
# Usage: bench/bf16_compare.sh [--rounds N] [--gpt NET:T:B | --image NET:B] [--threads N] [--storage-ab]
#                              [--build DIR] [--out DIR]
#   defaults: 5 rounds, gpt-nano:128:16, 1 thread/worker, build/, out/bf16-compare-<date>
# Its measured runs take a high priority where allowed (scripts/lib.sh anp_measure_prio: nice -15, in
# a session of their own where the kernel has autogroups); give the load with the figures.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh" # the measured runs' priority
anp_measure_prio "$ROOT"
ROUNDS=5; G=gpt-nano:128:16; IMG=""; NT=1; AB=0; BUILD="$ROOT/build"; OUT="$ROOT/out/bf16-compare-$(date +%Y%m%d-%H%M%S)"
PY="${ANCHORS_PY:-$HOME/.cache/starpu-anp/anchors-venv/bin/python}"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --gpt) G="$2"; shift ;;
    --image) IMG="$2"; shift ;;
    --threads) NT="$2"; shift ;;
    --build) BUILD="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --storage-ab) AB=1 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bf16_compare.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
IFS=: read -r NET T B <<<"$G"
UNIT=tokens_per_s
if [ -n "$IMG" ]; then
  IFS=: read -r NET B <<<"$IMG"; T=1; UNIT=images_per_s
fi
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$NT" =~ ^[1-9][0-9]*$ && "$T" =~ ^[1-9][0-9]*$ && "$B" =~ ^[1-9][0-9]*$ ]] \
  || { echo "bf16_compare.sh: --rounds, --threads and --gpt NET:T:B need positive integers" >&2; exit 2; }
APP="$BUILD/apps/starpu_anp"
[ -x "$APP" ] || { echo "bf16_compare.sh: no $APP (build first, or --build DIR)" >&2; exit 1; }
[ "$AB" = 1 ] || [ -x "$PY" ] || { echo "bf16_compare.sh: no python at $PY (scripts/bootstrap.sh --with-anchors, or ANCHORS_PY)" >&2; exit 1; }
mkdir -p "$OUT"
CSV="$OUT/runs.csv"; LOG="$OUT/log.txt"
echo "round,framework,precision,net,context,batch,threads,$UNIT,load1,cpu_s" >"$CSV"
echo "measured runs: $ANP_PRIO_SAID" >>"$LOG"
NETFILE="$ROOT/graph/nets/$NET.net"
[ -f "$NETFILE" ] || { echo "bf16_compare.sh: no net file $NETFILE" >&2; exit 2; }
if [ -z "$IMG" ]; then
sed -E "s/^(input [^ ]+ tokens) [0-9]+/\1 $T/" "$NETFILE" >"$OUT/$NET.net"
read -r V D L H <<<"$(awk '/^embed /{for(i=1;i<=NF;i++){if($i~/^vocab=/)v=substr($i,7);if($i~/^dim=/)d=substr($i,5)}}
  /^attention /{for(i=1;i<=NF;i++)if($i~/^heads=/)h=substr($i,7);n++} END{print v, d, n, h}' "$NETFILE")"
fi

# cpu_s: the run's user + system CPU seconds (/usr/bin/time), start-up included: on a loaded
# machine, where wall-clock tokens/s swing with the other processes, the CPU time of the same work
# moves less (but the frameworks' start-ups differ: compare it within one framework only).
run() { # round framework precision (bf16-act0: bf16 with DNN_BF16_ACTIVATIONS=0)
  local line tps prec="${3%-act0}" act=1
  [ "$3" = "$prec" ] || act=0
  if [ -n "$IMG" ] && [ "$2" = starpu-anp ]; then
    line="$(DNN_BF16_ACTIVATIONS=$act STARPU_NCPU="$NT" STARPU_NCUDA=0 "${ANP_PRIO[@]}" timeout 600 /usr/bin/time -f "cpu_s %U %S" -o "$OUT/time" "$APP" bench --net "$NET" --batch "$B" --steps 8 \
              --warmup 2 --precision "$prec" --quiet 2>>"$LOG" | tail -1 || true)"
  elif [ -n "$IMG" ]; then
    line="$(OMP_NUM_THREADS="$NT" "${ANP_PRIO[@]}" timeout 600 /usr/bin/time -f "cpu_s %U %S" -o "$OUT/time" "$PY" "$ROOT/bench/pytorch_nets.py" --net "$NET" --batch "$B" \
              --threads "$NT" --steps 8 --warmup 2 --autocast "$([ "$3" = bf16 ] && echo bf16 || echo off)" 2>>"$LOG" | tail -1 || true)"
  elif [ "$2" = starpu-anp ]; then
    line="$(DNN_BF16_ACTIVATIONS=$act STARPU_NCPU="$NT" STARPU_NCUDA=0 "${ANP_PRIO[@]}" timeout 600 /usr/bin/time -f "cpu_s %U %S" -o "$OUT/time" "$APP" bench --net "$OUT/$NET.net" --batch "$B" --steps 12 \
              --warmup 2 --optimizer adamw --lr 6e-4 --weight-decay 0.1 --precision "$prec" --quiet 2>>"$LOG" | tail -1 || true)"
  else
    line="$(OMP_NUM_THREADS="$NT" "${ANP_PRIO[@]}" timeout 600 /usr/bin/time -f "cpu_s %U %S" -o "$OUT/time" "$PY" "$ROOT/bench/gpt_torch_step.py" --net "$NET" --vocab "$V" --context "$T" \
              --d "$D" --layers "$L" --heads "$H" --batch "$B" --threads "$NT" --steps 12 --warmup 2 \
              --autocast "$([ "$3" = bf16 ] && echo bf16 || echo off)" 2>>"$LOG" | tail -1 || true)"
  fi
  echo "$2 $3: $line" >>"$LOG"
  tps="$(tr ' ' '\n' <<<"$line" | awk -F= -v u="$UNIT" '$1 == u { print $2 }')"
  echo "$1,$2,$3,$NET,$T,$B,$NT,${tps:-},$(cut -d' ' -f1 /proc/loadavg),$(awk '$1 == "cpu_s" { print $2 + $3 }' "$OUT/time")" >>"$CSV"
  printf '  round %s %-10s %-4s %10s %s (load %s)\n' "$1" "$2" "$3" "${tps:-?}" "$UNIT" "$(cut -d' ' -f1 /proc/loadavg)" >&2
}
CONFIGS=("starpu-anp fp32" "starpu-anp bf16" "pytorch fp32" "pytorch bf16")
[ "$AB" = 0 ] || CONFIGS=("starpu-anp fp32" "starpu-anp bf16" "starpu-anp bf16-act0")
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!CONFIGS[@]}"; do
    if [ $((r % 2)) = 1 ]; then c="${CONFIGS[$i]}"; else c="${CONFIGS[$(( ${#CONFIGS[@]} - 1 - i ))]}"; fi
    # shellcheck disable=SC2086
    run "$r" $c
  done
done
awk -F, -v u="${UNIT%_per_s}/s" 'NR > 1 && $8 != "" { k = $2 " " $3; v[k, ++n[k]] = $8; c[k, n[k]] = $10; l[k] = l[k] " " $9 }
  function med(arr, k,   i, j, t, m, a) { m = n[k]; for (i = 1; i <= m; i++) a[i] = arr[k, i];
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  END { for (k in n) { m[k] = med(v, k); cs[k] = med(c, k)
      printf "%-18s median %10.1f %s, %6.2f CPU s per run, over %d runs; loads:%s\n", k, m[k], u, cs[k], n[k], l[k] }
    if (m["starpu-anp fp32"] > 0) printf "ours bf16 / ours fp32:            %.2fx (target >= 1.8); by CPU time %.2fx\n", m["starpu-anp bf16"] / m["starpu-anp fp32"], cs["starpu-anp fp32"] / cs["starpu-anp bf16"]
    if (m["starpu-anp bf16-act0"] > 0) printf "bf16 storage on / off (DNN_BF16_ACTIVATIONS=1/0): %.2fx; by CPU time %.2fx\n", m["starpu-anp bf16"] / m["starpu-anp bf16-act0"], cs["starpu-anp bf16-act0"] / cs["starpu-anp bf16"]
    if (m["starpu-anp bf16-act0"] > 0) printf "ours bf16 storage off / ours fp32: %.2fx\n", m["starpu-anp bf16-act0"] / m["starpu-anp fp32"]
    if (m["pytorch bf16"] > 0) printf "ours bf16 / PyTorch autocast bf16: %.2fx (target >= 1.5)\n", m["starpu-anp bf16"] / m["pytorch bf16"]
    if (m["pytorch fp32"] > 0) printf "ours fp32 / PyTorch fp32:          %.2fx\n", m["starpu-anp fp32"] / m["pytorch fp32"] }' "$CSV" \
  | tee "$OUT/summary.txt"
