#!/usr/bin/env bash
# mpi_time_to_accuracy — scripts/time_to_accuracy.sh on a tiny configuration:
# lenet5, 1 epoch of 2,048 training samples, N = 1 and 2 nodes of 2 GPUs x 16 samples, sync and
# async, K80 over FDR. Asserts real results:
#  1. the table has one row per (mode, N) and epoch, each run trained the exact configuration
#     (global batch N*G*b; sync: one process in N*G chunks; async: N mpirun ranks of G chunks);
#  2. hours = steps x the simulated step time / 3600, the step time being the simulation's own
#     global batch / images_per_s, and steps = the training run's steps;
#  3. the accuracy in the table is the training run's own figure (its result line), and the
#     async curve is the true N-rank trajectory: the same mpirun run made by hand gives the same
#     accuracy within 0.005 (async pushes commute, so float reassociation may move it slightly);
#  4. a rerun, with the app copied to another directory, reuses the runs and the cached step
#     times (no training, no simulation); with
#     --reuse-only a node count not yet run is left out of the table, not trained;
#  5. usage errors exit 2 with one line.
# Skipped (77) only where SimGrid is absent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="${DNN_SOURCE_DIR:?}"
command -v smpicc >/dev/null && [ -f /usr/include/smpi/smpi.h ] || { echo "SKIP: SimGrid (smpicc) is absent"; exit 77; }
export ANP_REAL_BUILD="$(cd "$(dirname "$STARPU_ANP")/.." && pwd)"
TTA=(bash "$ROOT/scripts/time_to_accuracy.sh")
OUT="$TMP/out" CACHEF="$TMP/steptime.csv"
ARGS=(--net lenet5 --nodes 1,2 --mode sync,async --gpus-per-node 2 --batch-per-gpu 16 --targets 0.3,0.99
      --out "$OUT" --sim-cache "$CACHEF" -- --limit-train 2048 --limit-test 1000)
"${TTA[@]}" "${ARGS[@]}" >"$TMP/sum1" 2>"$TMP/err1" || { cat "$TMP/err1" >&2; fail "time_to_accuracy.sh failed"; finish; }
cat "$TMP/sum1"
T="$OUT/tta.csv"
[ "$(head -1 "$T")" = "net,mode,nodes,gpus_per_node,batch_per_gpu,global_batch,chunks,epoch,step,test_accuracy,step_s,hours" ] \
  || fail "tta.csv header: $(head -1 "$T")"
# 1.
[ "$(wc -l <"$T")" = 5 ] || fail "tta.csv has $(($(wc -l <"$T") - 1)) rows, want 4 (sync and async at N=1,2, 1 epoch)"
row() { awk -F, -v m="$1" -v n="$2" '$2 == m && $3 == n' "$T"; }
for mn in "sync 1 32 2" "sync 2 64 4" "async 1 32 2" "async 2 64 2x2"; do
  set -- $mn
  r="$(row "$1" "$2")"
  [ -n "$r" ] || { fail "no row for $1 N=$2"; continue; }
  [ "$(cut -d, -f6 <<<"$r")" = "$3" ] && [ "$(cut -d, -f7 <<<"$r")" = "$4" ] \
    || fail "$1 N=$2: batch/chunks $(cut -d, -f6,7 <<<"$r"), want $3/$4"
done
grep -q -- "--batch 64 .*--chunks 4 " "$OUT/runs/sync-n2/cmd.txt" && ! grep -q mpirun "$OUT/runs/sync-n2/cmd.txt" \
  || fail "sync N=2 did not train 64 samples in 4 chunks in one process: $(cat "$OUT/runs/sync-n2/cmd.txt")"
grep -q -- "-np 2 .*--batch 64 .*--chunks 2 --mode async --staleness 4" "$OUT/runs/async-n2/cmd.txt" \
  || fail "async N=2 did not train 2 ranks x 2 chunks: $(cat "$OUT/runs/async-n2/cmd.txt")"
# 2. and 3.
for mn in "sync 1 sync-n1" "sync 2 sync-n2" "async 2 async-n2"; do
  set -- $mn
  r="$(row "$1" "$2")" res="$(cat "$OUT/runs/$3/result.txt")"
  step_s="$(cut -d, -f11 <<<"$r")" hours="$(cut -d, -f12 <<<"$r")" steps="$(cut -d, -f9 <<<"$r")"
  [ "$steps" = "$(result_field "$res" steps)" ] || fail "$1 N=$2: table steps $steps, the run's $(result_field "$res" steps)"
  [ "$steps" = $((2048 / (32 * $2))) ] || fail "$1 N=$2: $steps steps, want 2048 / global batch = $((2048 / (32 * $2)))"
  fcmp "$hours > 0 && ($hours - $steps * $step_s / 3600)^2 < (1e-5 * $hours)^2" || fail "$1 N=$2: hours $hours != $steps x $step_s / 3600"
  ips="$(awk -F, -v n="$2" -v m="$([ "$2" = 1 ] && echo sync || echo "$1")" '$2 == n && $14 == m { v = $18 } END { print v }' "$OUT/sim.csv")"
  fcmp "($step_s - 32 * $2 / $ips)^2 < (1e-5 * $step_s)^2" || fail "$1 N=$2: step $step_s s != global batch / simulated images/s ($ips)"
  [ "$(cut -d, -f10 <<<"$r")" = "$(result_field "$res" test_accuracy)" ] \
    || fail "$1 N=$2: table accuracy $(cut -d, -f10 <<<"$r") != the run's test_accuracy $(result_field "$res" test_accuracy)"
done
[ "$(row async 1 | cut -d, -f10)" = "$(row sync 1 | cut -d, -f10)" ] || fail "async N=1 is not the one-rank (sync) run"
fcmp "$(row sync 2 | cut -d, -f11) > $(row sync 1 | cut -d, -f11)" || fail "a step of 2 nodes (twice the samples) is not slower than one node's"
mine="$(timeout 300 "${ANP_MPIRUN[@]}" -np 2 -x STARPU_NCPU=1 "$STARPU_ANP" train --net lenet5 --batch 64 --chunks 2 \
  --lr 0.05 --mode async --staleness 4 --limit-train 2048 --limit-test 1000 2>/dev/null | anp_result_line)" || fail "the hand-made async run failed"
a_tool="$(row async 2 | cut -d, -f10)" a_mine="$(result_field "$mine" test_accuracy)"
echo "async N=2: the tool's accuracy $a_tool, a hand-made 2-rank run's $a_mine"
fcmp "($a_tool - $a_mine)^2 <= 0.005^2" || fail "async N=2: the tool's accuracy $a_tool vs the 2-rank run's $a_mine (tolerance 0.005)"
grep -Eq '^sync N=1 .* 1 ep / [0-9.e-]+ h +not reached' "$TMP/sum1" || fail "the summary does not give epochs and hours to 0.3 and 'not reached' for 0.99 at sync N=1"
[ -s "$OUT/tta.png" ] || fail "no plot"
# 4.
# ... with the app copied elsewhere: where the binary lies is not part of a run's command
mkdir -p "$TMP/elsewhere" && cp "$STARPU_ANP" "$TMP/elsewhere/starpu_anp"
STARPU_ANP="$TMP/elsewhere/starpu_anp" "${TTA[@]}" "${ARGS[@]}" >"$TMP/sum2" 2>"$TMP/err2" || fail "the rerun failed: $(tail -1 "$TMP/err2")"
! grep -Eq 'training global batch|simulating' "$TMP/err2" || fail "the rerun trained or simulated again: $(grep -E 'training|simulating' "$TMP/err2" | head -1)"
cmp -s "$TMP/sum1" "$TMP/sum2" || fail "the rerun's summary differs"
# the cached step times carry the simulator's version: the same cache with another version in
# its keys gives no step time (--reuse-only: it would simulate again, not reuse)
sed 's/|sim-[^|,]*,/|sim-older,/' "$CACHEF" >"$TMP/older.csv"
grep -q '|sim-older,' "$TMP/older.csv" || fail "the step-time cache's keys do not name the simulator's version: $(head -2 "$CACHEF")"
R=(); for a in "${ARGS[@]}"; do [ "$a" = "$CACHEF" ] && a="$TMP/older.csv"; R+=("$a"); done
"${TTA[@]}" --reuse-only "${R[@]}" >/dev/null 2>"$TMP/err4" || true
grep -q 'sync N=1: no cached step time' "$TMP/err4" \
  || fail "a step time of another simulator version was reused: $(grep 'N=1' "$TMP/err4" | head -1)"
# --reuse-only with one more N: the table keeps what was run, N=4 is left out, not trained
R=("${ARGS[@]}"); R[3]=1,2,4
"${TTA[@]}" --reuse-only "${R[@]}" >"$TMP/sum3" 2>"$TMP/err3" || fail "--reuse-only failed: $(tail -1 "$TMP/err3")"
grep -q 'sync N=4: .*left out' "$TMP/err3" && [ "$(wc -l <"$T")" = 5 ] && ! grep -q 'training global batch' "$TMP/err3" \
  || fail "--reuse-only did not leave N=4 out: $(grep N=4 "$TMP/err3" | head -1); $(wc -l <"$T") lines"
# A training that fails (an option train refuses) exits 1, leaves the last table as it was and no
# half-written tta.csv.tmp.
cp "$T" "$TMP/tta-before.csv"
if expect_rc 1 "${TTA[@]}" "${ARGS[@]}" --no-such-train-option; then
  [ ! -e "$T.tmp" ] || fail "a failed run left $T.tmp behind"
  cmp -s "$T" "$TMP/tta-before.csv" || fail "a failed run changed $T"
fi
# 5.
for bad in "--nodes 0" "--mode foo" "--targets 1.5" "--mode async --optimizer lars" "--bogus" "--net nosuchnet"; do
  # shellcheck disable=SC2086
  if expect_rc 2 "${TTA[@]}" $bad --out "$TMP/bad" --sim-cache "$CACHEF"; then
    [ "$(grep -vc '^(see ' <<<"$ERR")" = 1 ] || fail "'$bad': not a one-line usage error: $ERR"
  fi
done
finish
