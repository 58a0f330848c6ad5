#!/usr/bin/env bash
# mpi_sync — synchronous training over 2 and 4 ranks (StarPU-MPI all-reduce) equals the
# single-process run with the same seed and global batch: train_loss within 1e-3 relative after
# 20 steps. Also: --mode/--staleness work in a single process (async with one rank = sync).
source "$(dirname "$0")/lib.sh"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1
COMMON=(train --net lenet5 --max-steps 20 --limit-train 3200 --limit-test 500 --lr-schedule constant --quiet)
REF_LINE="$("$STARPU_ANP" "${COMMON[@]}" | tail -1)" || fail "single-process run failed"
REF="$(result_field "$REF_LINE" train_loss)"
echo "1 process: train_loss=$REF"
ASYNC1="$("$STARPU_ANP" "${COMMON[@]}" --mode async --staleness 2 | tail -1)" || fail "single-process async failed"
[ "$(result_field "$ASYNC1" train_loss)" = "$REF" ] || fail "async with one process is not sync: $ASYNC1"
for np in 2 4; do
  LINE="$(timeout 300 mpirun --allow-run-as-root --oversubscribe -np $np "$STARPU_ANP" "${COMMON[@]}" 2>"$TMP/err" | tail -1)" \
    || { cat "$TMP/err" >&2; fail "mpirun -np $np failed"; continue; }
  L="$(result_field "$LINE" train_loss)"
  echo "$np ranks:   train_loss=$L ($(result_field "$LINE" images_per_s) img/s)"
  [ "$(result_field "$LINE" ranks)" = "$np" ] || fail "result line says ranks=$(result_field "$LINE" ranks)"
  [ "$(result_field "$LINE" mode)" = sync ] || fail "result line says mode=$(result_field "$LINE" mode)"
  fcmp "($L - $REF) <= 1e-3 * $REF && ($REF - $L) <= 1e-3 * $REF" || fail "$np ranks: train_loss $L vs $REF"
done
# async with staleness 0 is the synchronous update, over ranks too.
LINE="$(timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$STARPU_ANP" "${COMMON[@]}" --mode async --staleness 0 2>"$TMP/err" | tail -1)" \
  || { cat "$TMP/err" >&2; fail "async S=0 failed"; }
L="$(result_field "$LINE" train_loss)"
echo "2 ranks async S=0: train_loss=$L"
fcmp "($L - $REF) <= 1e-3 * $REF && ($REF - $L) <= 1e-3 * $REF" || fail "async S=0: train_loss $L vs $REF"
expect_rc 2 "$STARPU_ANP" train --mode bogus
expect_rc 2 "$STARPU_ANP" train --staleness -1
expect_rc 2 "$STARPU_ANP" train --staleness x
finish
