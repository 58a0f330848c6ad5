#!/usr/bin/env bash
# train_pin_chunks — --pin-chunks (all of chunk c's tasks on one worker) changes where tasks run,
# not what they compute: 20 steps of lenet5 on 2 CPU workers give the unpinned train_loss within
# TOL relative, and the result line says pin_chunks=1 (0 without). TOL: the per-chunk gradients
# are the same; only the order the chunks' contributions are summed in may change (float
# reassociation): measured 2.242491 unpinned vs 2.242490 pinned (4.5e-7), the print quantum.
# 5e-6 is ~10x that, as in mpi_sync. Also: eval refuses the option (exit 2, one line naming it).
# Where the tasks ran (the option's whole point): a traced pinned run (--trace: StarPU's
# tasks.rec), 3 chunks on 2 CPU workers, no evaluation; chunk_workers.py groups the tasks by the
# chunk data they touch and checks that every chunk's load, forward and backward tasks ran on one
# worker and that chunk c ran on worker c * 2 / 3 (chunks 0 and 1 together, 2 on the other). An
# unpinned run under lws fails that (measured: each chunk's 640 tasks split ~45/55 over the two
# workers, and every chunk's loads on both).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
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
rc=0
"$STARPU_ANP" train --net lenet5 --max-steps 20 --limit-train 3200 --no-eval --lr-schedule constant --chunks 3 \
  --quiet --pin-chunks --trace "$TMP/tr" --checkpoint "$TMP/pin.ckpt" >"$TMP/tr.out" 2>"$TMP/tr.err" || rc=$?
if [ "$rc" != 0 ]; then cat "$TMP/tr.err" >&2; fail "the traced pinned run exited $rc"
else
  python3 "$(dirname "$0")/chunk_workers.py" "$TMP/tr/tasks.rec" 3 2 || fail "pinned chunks did not run where --pin-chunks puts them"
fi
# eval has no chunks to pin: a usage error, exit 2, with one line that names the option and the
# command. With a checkpoint that exists (the traced run's): a missing one is refused with exit 2
# too, before the option is looked at, which a check of the status alone let pass.
[ -f "$TMP/pin.ckpt" ] || fail "the traced pinned run wrote no checkpoint"
if expect_rc 2 "$STARPU_ANP" eval --checkpoint "$TMP/pin.ckpt" --pin-chunks; then
  [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] && [[ "$ERR" == *"option --pin-chunks does not apply to 'eval'"* ]] \
    || fail "eval --pin-chunks: '$ERR', want one line naming --pin-chunks"
fi
finish
