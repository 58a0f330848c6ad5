#!/usr/bin/env bash
# mpi_optim — LARS and AdamW over 2 ranks, sync (graph/dist.c applies the same update codelet
# on every rank after the all-reduce), tree and ring, equal the single-process run: train_loss
# within TOL relative after 20 steps (with warm-up and the scaling rule), as mpi_sync checks for
# SGD. TOL as mpi_sync's (5e-6): the all-reduce adds in another order than one process (float
# reassociation); LARS's norms see the same summed gradient on every rank. async refuses them.
source "$(dirname "$0")/lib.sh"
set -euo pipefail
need_fashion_mnist
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1
TOL=5e-6
for opt in lars:0.25 adamw:0.0005; do
  set -- "${opt%%:*}" "${opt##*:}"
  COMMON=(train --net lenet5 --max-steps 20 --limit-train 3200 --limit-test 500 --quiet --batch 128
          --optimizer "$1" --lr "$2" --lr-ref-batch 64 --warmup-epochs 0.2)
  REF_LINE="$("$STARPU_ANP" "${COMMON[@]}" | tail -1)" || { fail "$1: single-process run failed"; continue; }
  REF="$(result_field "$REF_LINE" train_loss)"
  echo "$1, 1 process: train_loss=$REF"
  for ar in tree ring; do
    LINE="$(timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$STARPU_ANP" "${COMMON[@]}" --allreduce $ar 2>"$TMP/err" | tail -1)" \
      || { cat "$TMP/err" >&2; fail "$1: mpirun -np 2 ($ar) failed"; continue; }
    L="$(result_field "$LINE" train_loss)"
    echo "$1, 2 ranks, $ar: train_loss=$L"
    [ "$(result_field "$LINE" optimizer)" = "$1" ] || fail "$1 ($ar): result line says optimizer=$(result_field "$LINE" optimizer)"
    fcmp "($L - $REF) <= $TOL * $REF && ($REF - $L) <= $TOL * $REF" || fail "$1, 2 ranks ($ar): train_loss $L vs $REF (tolerance $TOL relative)"
  done
done
expect_rc 2 "$STARPU_ANP" train --optimizer lars --mode async
finish
