#!/usr/bin/env bash
# sim_gpt — language models in simulation.
# GPU memory: a training configuration that does not fit a GPU's memory is refused before it
# runs, with one line naming the largest batch that fits, and that batch runs (runtime/preflight.c,
# dnn_preflight_gpu_memory; docs/transformers.md, "Simulation"). GPT-2 XL (1.56 G parameters,
# context 1024) on one simulated GPU-only node of one GPU (--ncpu 0, so nothing is calibrated), one
# chunk (10.4 GiB of activations per sample; 23 GiB of parameters, gradient, AdamW state and workspace):
#  1. an H200 (141 GB; StarPU lets the run use 90% of it): --batch 64 is refused (exit 1, one line
#     "not enough GPU memory ... the largest that fits: --batch N"); --batch N runs (one step) and
#     prints what each device needs, within the device; N + 1 is refused. Measured: N = 9.
#  2. an 80 GB device (STARPU_LIMIT_CUDA_MEM=76293 MiB, the H100's 80 GB): the same, with a smaller
#     N than the H200's. Measured: N = 4.
#  3. the message's figures are the line printed before an accepted run: the per-token activation
#     bytes of the refused and the accepted runs are the same.
# CPU calibration of a token net:
#  4. gpt-nano (embed, layernorm, attention, gelu, lm_head, the per-token loss) with AdamW on one
#     CPU-only node: simulate.sh calibrates its CPU codelets (AdamW's update included: its
#     --optimizer is passed to the calibration) and simulates it, models_cpu=calibrated, with
#     tokens/s = images/s x 128.
# Skipped (77) only where SimGrid is absent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="${DNN_SOURCE_DIR:?}"
command -v smpicc >/dev/null && [ -f /usr/include/smpi/smpi.h ] || { echo "SKIP: SimGrid (smpicc) is absent"; exit 77; }
export ANP_REAL_BUILD="$(cd "$(dirname "$STARPU_ANP")/.." && pwd)"
export ANP_SIM_CALIB_DIR="$TMP/calib"
sim() { # BATCH: runs gpt2-xl on one H200 node; stdout and stderr into $TMP/out, returns simulate.sh's status
  bash "$ROOT/scripts/simulate.sh" --quiet --csv "$TMP/s.csv" --net gpt2-xl --batch "$1" --chunks 1 --nodes 1 \
    --cores 4 --ncpu 0 --gpus 1 --gpu h200 --steps 1 --warmup 0 -- --optimizer adamw --lr 6e-4 >"$TMP/out" 2>&1
}
per_token() { sed -n 's/.* x \([0-9.]*\) KiB per token.*/\1/p' "$TMP/out" | head -1; }
check_device() { # WHAT: refusal at 64, N accepted, N + 1 refused
  local what="$1" rc=0 n line kib1 kib2
  sim 64 || rc=$?
  [ "$rc" = 1 ] || { cat "$TMP/out" >&2; fail "$what: --batch 64 exited $rc, want 1 (refused)"; return; }
  line="$(grep -m1 'not enough GPU memory' "$TMP/out" || true)"
  [ -n "$line" ] || { cat "$TMP/out" >&2; fail "$what: --batch 64 was not refused for GPU memory"; return; }
  echo "$what, --batch 64: $line"
  n="$(sed -n 's/.*the largest that fits: --batch \([0-9]*\) .*/\1/p' <<<"$line")"
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { fail "$what: the refusal names no batch: $line"; return; }
  [ "$n" -lt 64 ] || fail "$what: the named batch $n is not below the refused 64"
  kib1="$(per_token)"
  rc=0; sim "$n" || rc=$?
  [ "$rc" = 0 ] || { cat "$TMP/out" >&2; fail "$what: --batch $n (the named one) exited $rc, want 0"; return; }
  result_field "$(grep '^result:' "$TMP/out")" tokens_per_s >/dev/null
  line="$(grep -m1 '^GPU memory per device: ' "$TMP/out" || true)"
  echo "$what, --batch $n: $line"
  local need have
  need="$(sed -n 's/^GPU memory per device: \([0-9.]*\) GiB of \([0-9.]*\) GiB.*/\1/p' <<<"$line")"
  have="$(sed -n 's/^GPU memory per device: \([0-9.]*\) GiB of \([0-9.]*\) GiB.*/\2/p' <<<"$line")"
  [ -n "$need" ] && fcmp "$need <= $have" || fail "$what: --batch $n runs but needs more than the device: $line"
  kib2="$(per_token)"
  [ -n "$kib1" ] && [ "$kib1" = "$kib2" ] || fail "$what: activation KiB per token differ: refused $kib1, accepted $kib2"
  rc=0; sim $((n + 1)) || rc=$?
  [ "$rc" = 1 ] && grep -q 'not enough GPU memory' "$TMP/out" \
    || fail "$what: --batch $((n + 1)) (one more sample) exited $rc, want 1 (refused)"
  N_LAST="$n"
}
N_LAST=""
check_device "H200 (141 GB)"
N141="$N_LAST"
STARPU_LIMIT_CUDA_MEM=76293 check_device "80 GB (STARPU_LIMIT_CUDA_MEM=76293)"
N80="$N_LAST"
[ -n "$N141" ] && [ -n "$N80" ] && [ "$N80" -lt "$N141" ] || fail "80 GB names batch ${N80:-none}, not below 141 GB's ${N141:-none}"
# 4.
rc=0
bash "$ROOT/scripts/simulate.sh" --quiet --csv "$TMP/c.csv" --net gpt-nano --batch 8 --chunks 2 --nodes 1 --cores 1 \
  --ncpu 1 --steps 3 --warmup 1 -- --optimizer adamw --lr 1e-3 >"$TMP/out" 2>&1 || rc=$?
LINE="$(grep '^result:' "$TMP/out" || true)"
if [ "$rc" != 0 ] || [ -z "$LINE" ]; then
  cat "$TMP/out" >&2; fail "gpt-nano on a CPU node (calibrated) exited $rc"
else
  TPS="$(result_field "$LINE" tokens_per_s)"; IPS="$(result_field "$LINE" images_per_s)"
  echo "gpt-nano, 1 CPU worker, calibrated: $TPS tokens/s"
  [ "$(result_field "$LINE" models_cpu)" = calibrated ] || fail "gpt-nano: models_cpu is not 'calibrated': $LINE"
  [ "$(result_field "$LINE" optimizer)" = adamw ] || fail "gpt-nano: the simulated run is not AdamW's: $LINE"
  fcmp "$TPS > 0 && $TPS > 127 * $IPS && $TPS < 129 * $IPS" || fail "gpt-nano: tokens/s $TPS is not 128 x images/s $IPS"
fi
finish
