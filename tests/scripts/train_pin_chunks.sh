#!/usr/bin/env bash
# train_pin_chunks — --pin-chunks (all of chunk c's tasks on one worker) changes where tasks run,
# not what they compute: 20 steps of lenet5 on 2 CPU workers give the unpinned train_loss within
# TOL relative, and the result line says pin_chunks=1 (0 without). TOL: the per-chunk gradients
# are the same; only the order the chunks' contributions are summed in may change (float
# reassociation): measured 2.242491 unpinned vs 2.242490 pinned (4.5e-7), the print quantum.
# 5e-6 is ~10x that, as in mpi_sync. Also: eval refuses the option (exit 2).
source "$(dirname "$0")/lib.sh"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
export STARPU_NCPU=2 STARPU_NCUDA=0
TOL=5e-6
COMMON=(train --net lenet5 --max-steps 20 --limit-train 3200 --limit-test 500 --lr-schedule constant --chunks 4 --quiet)
REF="$("$STARPU_ANP" "${COMMON[@]}" | tail -1)" || fail "unpinned run failed"
PIN="$("$STARPU_ANP" "${COMMON[@]}" --pin-chunks | tail -1)" || fail "pinned run failed"
A="$(result_field "$REF" train_loss)" B="$(result_field "$PIN" train_loss)"
echo "train_loss unpinned $A, pinned $B"
[ "$(result_field "$REF" pin_chunks)" = 0 ] || fail "unpinned run does not say pin_chunks=0: $REF"
[ "$(result_field "$PIN" pin_chunks)" = 1 ] || fail "pinned run does not say pin_chunks=1: $PIN"
fcmp "$A > 0 && ($A - $B) / $A <= $TOL && ($B - $A) / $A <= $TOL" || fail "pinned train_loss $B differs from $A by more than $TOL relative"
expect_rc 2 "$STARPU_ANP" eval --checkpoint /nonexistent --pin-chunks
finish
