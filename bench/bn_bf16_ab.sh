#!/usr/bin/env bash
# bn_bf16_ab.sh — batch norm's share of a training step, fp32 and --precision bf16, for two builds side by side
# (docs/studies/2026-12-07-bnin-bf16.md): `starpu_anp bench` with DNN_BREAKDOWN=2 on one worker, whose critical-path
# line gives each codelet's compute ms over the timed steps (cl_batchnorm_fwd_train, cl_batchnorm_bwd), for each net,
# each build (A, B) and each precision, interleaved round by round (A B, then B A, ...) at measuring priority
# (scripts/lib.sh anp_measure_prio), OpenBLAS left to pick its kernels (env -u OPENBLAS_CORETYPE, as the tables of
# record). Compare ratios within a round (bench/bn_bf16_ab.py), not absolute times across runs: the machine's load
# moves them; each row carries the 1-minute load average.
#
#   bench/bn_bf16_ab.sh APP_A APP_B [OUT.csv]      environment: ROUNDS [5], STEPS [10], NETS ["resnet20:64 resnet8:64"]
# Output CSV: round,net,batch,build,precision,bn_fwd_ms,bn_bwd_ms,images_per_s,load1 (build: A or B).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/scripts/lib.sh"
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: bench/bn_bf16_ab.sh APP_A APP_B [OUT.csv]" >&2; exit 2; }
A="$1" B="$2"
for app in "$A" "$B"; do
  [ -x "$app" ] || { echo "error: $app: not an executable" >&2; exit 2; }
done
ROUNDS="${ROUNDS:-5}" STEPS="${STEPS:-10}" NETS="${NETS:-resnet20:64 resnet8:64}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS=$ROUNDS: expected a positive integer" >&2; exit 2; }
[[ "$STEPS" =~ ^[1-9][0-9]*$ ]] || { echo "error: STEPS=$STEPS: expected a positive integer" >&2; exit 2; }
export STARPU_SILENT=1 STARPU_NCPU=1 STARPU_NCUDA=0
anp_measure_prio "$ROOT"
echo "bn_bf16_ab: measured runs at $ANP_PRIO_SAID" >&2
if [ $# = 3 ]; then exec 3>"$3"; else exec 3>&1; fi
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
echo "round,net,batch,build,precision,bn_fwd_ms,bn_bwd_ms,images_per_s,load1" >&3
for r in $(seq "$ROUNDS"); do
  order="A B"
  [ $((r % 2)) = 0 ] && order="B A"
  for nb in $NETS; do
    net="${nb%%:*}" batch="${nb##*:}"
    for b in $order; do
      app="$A"
      [ "$b" = B ] && app="$B"
      for p in fp32 bf16; do
        load="$(cut -d' ' -f1 /proc/loadavg)"
        DNN_BREAKDOWN=2 timeout 600 env -u OPENBLAS_CORETYPE "${ANP_PRIO[@]}" "$app" bench --net "$net" \
          --batch "$batch" --chunks 2 --steps "$STEPS" --warmup 3 --precision "$p" --quiet >"$tmp" 2>&1 || {
          echo "error: build $b ($app) bench --net $net --precision $p failed:" >&2
          tail -3 "$tmp" >&2
          exit 1
        }
        line="$(anp_result_line "$tmp")"
        # critpath: ... cl_batchnorm_bwd 160.7 (compute 154.1 ...); the compute part of each batch norm codelet
        cp="$(grep '^critpath: ' "$tmp" | tail -1)"
        ms() { printf '%s\n' "$cp" | sed -n "s/.*$1 [0-9.]* (compute \([0-9.]*\).*/\1/p"; }
        fwd="$(ms cl_batchnorm_fwd_train)" bwd="$(ms cl_batchnorm_bwd)"
        [ -n "$fwd" ] && [ -n "$bwd" ] || {
          echo "error: no batch norm codelets in the critical path line: $cp" >&2
          exit 1
        }
        echo "$r,$net,$batch,$b,$p,$fwd,$bwd,$(anp_result_field "$line" images_per_s),$load" >&3
      done
    done
  done
done
