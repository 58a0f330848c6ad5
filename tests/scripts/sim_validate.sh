#!/usr/bin/env bash
# sim_validate — the simulation tracks reality (within the simulator's stated tolerance, one small case): lenet5,
# batch 64, one CPU worker, one process. bench/sim_validate.sh calibrates this machine's CPU
# models afresh on the case's shapes, runs the real binary 3 times (median images/s) and
# simulates the same configuration (StarPU + SimGrid, scripts/simulate.sh); the simulated
# images/s must be within +-15% of the measured. Also: the simulated result line says what it is
# (simulated=1, the platform, models_cpu=calibrated), and a shape without a calibrated model
# stops the run with one line naming it (it is never simulated on a guess).
# Load (CI is a shared machine): the simulation models a machine that runs nothing else, so
# bench/sim_validate.sh runs the measured runs at nice -15 where the system allows it, and its
# models hold only the measured runs' own task times (not those of a calibration run made
# earlier, under other load), and it pools the measured runs (harmonic mean) as the models pool
# their tasks; a comparison outside the bound is made again (below). With a busy loop on each
# of 2 cores: ratio 1.22 before; 1.000, 1.008, 1.033 after (tests/stress/timing_tests.sh).
# Skipped (77) only where SimGrid is absent; scripts/bootstrap.sh --sim (scripts/test.sh) installs it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="${DNN_SOURCE_DIR:?}"
command -v smpicc >/dev/null && [ -f /usr/include/smpi/smpi.h ] || { echo "SKIP: SimGrid (smpicc) is absent"; exit 77; }
export ANP_REAL_BUILD="$(cd "$(dirname "$STARPU_ANP")/.." && pwd)"
TOL=0.15
# 1. measured vs simulated. The ratio is a measurement on a machine whose other load comes and
#    goes (once, at a load average of 8 on the 2 cores, 1.41 even at nice -15): a comparison
#    outside the bound is made again, afresh (calibration, 3 measured runs, simulation), up to
#    TRIES (3) in all, and one within the bound passes. A simulation that is wrong fails every
#    time (tests/stress/timing_tests.sh: one that models 2 workers where 1 ran, 1.44-1.67).
TRIES=3 ok=0 seen=""
for try in $(seq 1 "$TRIES"); do
  bash "$ROOT/bench/sim_validate.sh" --cases lenet5:1:1:sync --reps 3 --steps 30 --csv "$TMP/v.csv" >"$TMP/v.out" 2>"$TMP/v.err" \
    || { cat "$TMP/v.err" >&2; fail "bench/sim_validate.sh failed"; finish; }
  cat "$TMP/v.out"
  IFS=, read -r _ _ _ _ _ _ real _ sim ratio _ < <(tail -1 "$TMP/v.csv")
  echo "comparison $try: real $real img/s, simulated $sim img/s, ratio $ratio ($(grep -m1 'measured runs at' "$TMP/v.err" | sed 's/^sim_validate.sh: //'))"
  fcmp "$real > 0 && $sim > 0" || { fail "no throughput measured (real '$real', simulated '$sim')"; break; }
  seen="$seen${seen:+, }$ratio"
  if fcmp "$ratio >= 1 - $TOL && $ratio <= 1 + $TOL"; then ok=1; break; fi
done
[ "$ok" = 1 ] || fail "simulated/measured outside 1 +- $TOL in all $TRIES comparisons ($seen)"
# 2. the simulated result line
LINE="$(bash "$ROOT/scripts/simulate.sh" --quiet --net lenet5 --batch 64 --chunks 2 --cores 1 --ncpu 1 --steps 10 --csv "$TMP/s.csv" 2>"$TMP/s.err" | grep '^result:')" \
  || { cat "$TMP/s.err" >&2; fail "scripts/simulate.sh failed"; }
[ "$(result_field "$LINE" simulated)" = 1 ] || fail "no simulated=1 in: $LINE"
[ -n "$(result_field "$LINE" platform)" ] || fail "no platform= in: $LINE"
[ "$(result_field "$LINE" models_cpu)" = calibrated ] || fail "no models_cpu=calibrated in: $LINE"
[ -z "$(result_field "$LINE" train_loss)" ] || fail "a simulated run reports a loss it did not compute: $LINE"
[ "$(tail -1 "$TMP/s.csv" | cut -d, -f21)" = calibrated ] || fail "the CSV row does not say the CPU models were calibrated"
# 3. no calibrated model for a shape: one line naming it, exit 1
CMD="$(bash "$ROOT/scripts/simulate.sh" --quiet --net lenet5 --batch 64 --chunks 2 --cores 1 --ncpu 1 --steps 2 --csv "$TMP/s.csv" 2>/dev/null | sed -n 's/^+ //p')"
mkdir -p "$TMP/empty"
CMD="$(sed "s|ANP_SIM_CPU_MODELS=[^ ]*|ANP_SIM_CPU_MODELS=$TMP/empty|" <<<"$CMD")"
RC=0; OUT="$(eval "$CMD" 2>&1)" || RC=$?
# the error names the codelet and the model file it looked for
echo "$OUT" | grep -q "no calibrated CPU model for dnn_cl_[a-z0-9_]* at this shape (footprint [0-9a-f]*" \
  || fail "an uncalibrated shape did not stop the run with a one-line reason: $(echo "$OUT" | grep -v '^\[' | tail -3)"
[ "$(echo "$OUT" | grep -c '^error: .*no calibrated CPU model')" -ge 1 ] || fail "no 'error:' line for the missing model"
echo "$OUT" | grep -q "in $TMP/empty/codelets/45/dnn_cl_" || fail "the error does not name the model file it looked for"
echo "$OUT" | grep -q '^result:' && fail "a run with a missing model still printed a result line"
[ "$RC" = 1 ] || fail "a run stopped by a missing model exited $RC, want 1"
echo "missing-model run: exit $RC: $(echo "$OUT" | grep -m1 '^error:')"
# 5. calibrated GPU models are used when given (--cuda-models/--cuda-host): a "GPU" whose history
#    files are this CPU's calibration relabelled as CUDA device 0 must run the CPU's rate (one CPU
#    worker vs one CUDA worker, lenet5), and say models_cuda=calibrated. Within -10%/+5%: the GPU
#    run also pays the host<->GPU copies of the PCIe model and, since third_party/
#    starpu-simgrid-time-redux.patch (2026-12-06), StarPU's STARPU_REDUX reduction of the gradients'
#    worker copies into their home copy in host memory, which a CPU worker's copy, already there,
#    mostly skips. Those costs are per step and do not scale with the calibrated kernels, so the
#    GPU/CPU ratio falls as this machine's calibrated kernels get faster: at batch 64 it was 94%
#    with the kernels of 2026-12-06 and 0.78-0.96 with those of 2026-12-07 (the same calibration
#    with every time halved, as measured, doubled). At batch 256 the compute dominates: 0.978,
#    0.993, 0.999 over the same three calibrations; hence batch 256 here.
CAL="$(bash "$ROOT/scripts/simulate.sh" --quiet --net lenet5 --batch 256 --chunks 2 --cores 1 --ncpu 1 --steps 2 --csv "$TMP/s.csv" 2>/dev/null | sed -n 's/^+ .*ANP_SIM_CPU_MODELS=\([^: ]*\).*/\1/p')"
mkdir -p "$TMP/gpu/codelets/45"
for f in "$CAL"/codelets/45/*; do
  b="$(basename "$f")"; b="${b%.*}"
  awk 'prev ~ /# device type/ {print "1"; prev = $0; next} {print; prev = $0}' "$f" >"$TMP/gpu/codelets/45/$b.fakegpu"
done
CPU1="$(result_field "$(bash "$ROOT/scripts/simulate.sh" --quiet --net lenet5 --batch 256 --chunks 2 --cores 1 --ncpu 1 --steps 20 --csv "$TMP/s.csv" 2>/dev/null | grep '^result:')" images_per_s)"
GL="$(bash "$ROOT/scripts/simulate.sh" --quiet --net lenet5 --batch 256 --chunks 2 --cores 2 --ncpu 0 --gpus 1 --cuda-models "$TMP/gpu" --cuda-host fakegpu --steps 20 --csv "$TMP/s.csv" 2>"$TMP/g.err" | grep '^result:')" \
  || { cat "$TMP/g.err" >&2; fail "the run with calibrated CUDA models failed"; }
G1="$(result_field "$GL" images_per_s)"
echo "CPU worker $CPU1 img/s, CUDA worker timed by the same history $G1 img/s"
[ "$(result_field "$GL" models_cuda)" = calibrated ] || fail "no models_cuda=calibrated in: $GL"
# GPU-only nodes (--ncpu 0) look up no CPU model, and say so
[ "$(result_field "$GL" models_cpu)" = none ] || fail "a GPU-only run does not say models_cpu=none: $GL"
[ "$(tail -1 "$TMP/s.csv" | cut -d, -f21)" = none ] || fail "the GPU-only CSV row does not say the CPU models were not used"
fcmp "${CPU1:-0} > 0 && ${G1:-0} >= 0.90 * $CPU1 && ${G1:-0} <= 1.05 * $CPU1" || fail "calibrated CUDA models not used: $G1 vs $CPU1"
# 4. usage errors: exit 2 and one line naming the option
for bad in "--net nosuch" "--nodes 0" "--gpu v99" "--network 5g" "--batch 63 --chunks 2" "--cuda-host x" "--cuda-models /nonexistent --cuda-host x" "--batch-per-node 0" "--batch-per-node 63 --chunks 2"; do
  # shellcheck disable=SC2086
  expect_rc 2 bash "$ROOT/scripts/simulate.sh" --quiet --csv "$TMP/s.csv" $bad || continue
  echo "$ERR" | grep -q "simulate.sh: \|error: " || fail "simulate.sh $bad: no one-line reason: $ERR"
done
finish
