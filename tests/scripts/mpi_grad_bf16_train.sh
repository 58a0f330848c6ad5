#!/usr/bin/env bash
# mpi_grad_bf16_train — a short training run with gradients on the wire in bf16 (--grad-precision bf16) reaches
# the fp32 run's loss within run-to-run noise, with every all-reduce algorithm over 2 ranks and the longest
# rounding path (the ring) over 4, with gradient buckets once, and the same command twice gives the same bits (checkpoints compared byte
# for byte). Noise: the spread (max - min) of the fp32 train_loss over seeds 1, 2, 3 (one process, which the
# ranks' fp32 runs reproduce within 1e-6: tests/scripts/mpi_sync.sh). Measured here (lenet5, 40 steps, batch
# 96): see the echo lines. Negative control: a run that does not learn (--lr 0) must fall outside that noise.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1
COMMON=(train --net lenet5 --max-steps 40 --limit-train 6400 --no-eval --lr-schedule constant --quiet --batch 96)
loss() { # loss TAG CMD...: the run's train_loss (its result line recorded), or a FAIL
  local tag="$1" line; shift
  line="$("$@" 2>"$TMP/$tag.err" | tail -1)" || { cat "$TMP/$tag.err" >&2; fail "$tag: run failed"; return 1; }
  result_field "$line" train_loss
}
L=()
for s in 1 2 3; do L+=("$(loss "fp32 seed $s" timeout 120 "$STARPU_ANP" "${COMMON[@]}" --seed "$s")"); done
REF="${L[0]}"
NOISE="$(printf '%s\n' "${L[@]}" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print hi - lo}')"
echo "fp32, seeds 1 2 3: train_loss ${L[*]}; noise (spread) $NOISE"
fcmp "$NOISE > 0" || fail "no spread over seeds: ${L[*]}"
# near LABEL LOSS: within NOISE of REF
near() { fcmp "($2 - $REF) <= $NOISE && ($REF - $2) <= $NOISE" || fail "$1: train_loss $2, fp32 $REF, noise $NOISE"; }
LR0="$(loss "lr 0" timeout 120 "$STARPU_ANP" "${COMMON[@]}" --lr 0)"
echo "negative control, --lr 0: train_loss $LR0"
! fcmp "($LR0 - $REF) <= $NOISE && ($REF - $LR0) <= $NOISE" || fail "negative control: --lr 0 ($LR0) is within the noise of $REF"
# ranks, algorithm, gradient buckets in MiB (0.004: lenet5's small tensors in two buckets of the ring, the rest alone)
for spec in "2 tree 0" "2 ring 0" "2 rhd 0" "2 ps 0" "4 ring 0" "2 ring 0.004"; do
  read -r np ar mb <<<"$spec"
  X="$(loss "$np ranks $ar bf16 buckets $mb" timeout 300 "${ANP_MPIRUN[@]}" -np "$np" "$STARPU_ANP" "${COMMON[@]}" \
       --allreduce "$ar" --bucket-mb "$mb" --grad-precision bf16 --checkpoint "$TMP/$np.$ar.$mb.a.ckpt")" || continue
  echo "$np ranks, $ar, buckets $mb MiB, bf16 wire: train_loss $X (fp32 $REF)"
  near "$np ranks, $ar, buckets $mb, bf16" "$X"
done
# The same command twice: the same bits (4 ranks, the ring: the most roundings).
loss "4 ranks ring bf16 again" timeout 300 "${ANP_MPIRUN[@]}" -np 4 "$STARPU_ANP" "${COMMON[@]}" --allreduce ring \
  --bucket-mb 0 --grad-precision bf16 --checkpoint "$TMP/4.ring.0.b.ckpt" >/dev/null || true
cmp -s "$TMP/4.ring.0.a.ckpt" "$TMP/4.ring.0.b.ckpt" && echo "4 ranks, ring, bf16: the same checkpoint twice" \
  || fail "4 ranks, ring, bf16: two runs of the same command wrote other checkpoints"
finish
