#!/usr/bin/env bash
# trace_mpi — `--trace DIR` under mpirun: every rank writes its FxT file, rank 0 merges them into
# one paje.trace that ViTE parses cleanly, and the summary lists the workers of both ranks and
# shows at least 25% of the gradient all-reduce tasks overlapping the backward pass (tasks tagged
# with their step).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
command -v vite >/dev/null || { echo "SKIP: ViTE (vite) not installed"; exit 77; }
export STARPU_NCPU=1 STARPU_NCUDA=0
T="$TMP/tr"
timeout 300 "${ANP_MPIRUN[@]}" -np 2 "$STARPU_ANP" bench --net lenet5 --batch 32 --steps 3 \
  --warmup 1 --quiet --trace "$T" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "traced 2-rank run failed"; finish; }
note_result "$(tail -1 "$TMP/out")"
tail -1 "$TMP/out" | grep -q '^result: .*ranks=2' || fail "no 2-rank result line: $(tail -1 "$TMP/out")"
[ "$(ls "$T"/prof_file_* 2>/dev/null | wc -l)" -ge 2 ] || fail "expected a prof file per rank: $(ls "$T")"
[ -s "$T/paje.trace" ] || fail "no merged paje.trace"
(cd "$TMP" && QT_QPA_PLATFORM=offscreen timeout 120 vite "$T/paje.trace" -e "$TMP/check.svg" >"$TMP/vite.out" 2>&1) \
  || fail "ViTE export failed: $(tail -3 "$TMP/vite.out")"
grep -q '^0 errors and 0 warnings' "$TMP/vite.out" || fail "ViTE parse problems: $(grep -i 'error\|warning' "$TMP/vite.out" | head -3)"
[ -s "$TMP/check.svg" ] || fail "empty SVG"
for w in 0_CPU0 1_CPU0; do
  grep -q "$w" "$T/summary.txt" || fail "summary lacks worker $w of both ranks"
done
OV="$(grep '^all-reduce overlap:' "$T/summary.txt")" || fail "summary has no all-reduce overlap line"
echo "$OV"
EARLY="$(sed -n 's/^all-reduce overlap: \([0-9]*\) of \([0-9]*\).*/\1/p' <<<"$OV")"
TOTAL="$(sed -n 's/^all-reduce overlap: \([0-9]*\) of \([0-9]*\).*/\2/p' <<<"$OV")"
[ "${TOTAL:-0}" -gt 0 ] || fail "no all-reduce tasks tagged with a step"
# A fraction, not "at least one": this run (lenet5, batch 32, 3 steps + 1 warm-up, 2 ranks of one
# CPU worker) measured 62, 56 and 57 of 124 all-reduce tasks (50%, 45%, 46%) started before
# their rank's backward of the same step ended, and 37-52% with a second test loading the two
# cores (the README's 85% is ResNet-8, deeper, so more backward below each layer). Bound 25%:
# two thirds of the lowest measurement, for a loaded machine, yet far above the 0 of a DAG whose reductions wait for the whole backward, and above
# what the reductions of the last layer alone (f3, 2 of lenet5's 10 tensors) could give.
[ "${EARLY:-0}" -gt 0 ] || fail "no all-reduce task started before its step's backward ended: $OV"
[ "${TOTAL:-0}" -gt 0 ] && { [ $((100 * ${EARLY:-0})) -ge $((25 * TOTAL)) ] \
  || fail "only ${EARLY:-0} of $TOTAL all-reduce tasks overlapped their step's backward (< 25%): $OV"; }
finish
