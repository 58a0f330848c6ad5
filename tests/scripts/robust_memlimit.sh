#!/usr/bin/env bash
# robust_memlimit — a STARPU_LIMIT_CPU_MEM smaller than the run needs ends within seconds with
# exit 1 and one line saying how much memory the run needs and how much the limit allows; left
# to itself StarPU would wait forever for memory to free up (runtime/preflight.h). A limit that
# is large enough still trains.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
A="$STARPU_ANP"
export STARPU_NCPU=1 STARPU_NCUDA=0
RUN=(train --data synthetic --max-steps 3 --quiet)

for mb in 1 4; do
  rc=0; ERR="$(STARPU_LIMIT_CPU_MEM=$mb timeout 120 "$A" "${RUN[@]}" 2>&1 >/dev/null)" || rc=$?
  echo "STARPU_LIMIT_CPU_MEM=$mb: exit $rc: $ERR"
  [ "$rc" = 124 ] && { fail "STARPU_LIMIT_CPU_MEM=$mb: hung (killed after 120 s)"; continue; }
  [ "$rc" = 1 ] || fail "STARPU_LIMIT_CPU_MEM=$mb: exit $rc, want 1"
  [[ "$ERR" == *"not enough memory"* && "$ERR" == *"STARPU_LIMIT_CPU_MEM=$mb"* && "$ERR" == *MiB* ]] \
    || fail "STARPU_LIMIT_CPU_MEM=$mb: message does not say what is needed and what the limit is: $ERR"
  [ "$(printf '%s\n' "$ERR" | grep -c '^error:')" = 1 ] || fail "STARPU_LIMIT_CPU_MEM=$mb: not one error line: $ERR"
done
# eval: the same check before evaluating a checkpoint.
"$A" "${RUN[@]}" --no-eval --checkpoint "$TMP/m.ckpt" >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "training for the eval check failed"; }
rc=0; ERR="$(STARPU_LIMIT_CPU_MEM=1 timeout 120 "$A" eval --data synthetic --checkpoint "$TMP/m.ckpt" --batch 1024 --quiet 2>&1 >/dev/null)" || rc=$?
echo "eval, STARPU_LIMIT_CPU_MEM=1: exit $rc: $ERR"
[ "$rc" = 1 ] && [[ "$ERR" == *"not enough memory"* ]] || fail "eval under a 1 MB limit: exit $rc: $ERR"
# Enough memory: trains as usual (lenet5, batch 64, window 2, one worker needs about 12 MiB).
expect_rc 0 env STARPU_LIMIT_CPU_MEM=64 "$A" "${RUN[@]}" || fail "STARPU_LIMIT_CPU_MEM=64 should be enough"
finish
