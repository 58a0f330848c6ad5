#!/usr/bin/env bash
# timing_tests.sh — the timing-dependent script tests under load, and with their faults.
#
#   tests/stress/timing_tests.sh [--build DIR] [--no-faults] [--no-load] [TEST...]
#   (--no-load: the pass runs without the busy loops, for comparison)
#
# TEST is any of sim_validate robust_kill_resume mpi_async mpi_kill net_train_sim (default: all).
#   (a) under load: one busy loop per core (nproc of them, `while :; do :; done`) runs for the
#       whole of each test; each test must pass.
#   (b) with its fault (no load): what the test checks is broken on purpose, and the test must
#       fail:
#       sim_validate       the simulation models another machine than the one measured (a
#                          patched copy of bench/sim_validate.sh simulates 2 CPU workers on 2
#                          cores where the real runs had 1);
#       robust_kill_resume a resume that is not one: the app, through a wrapper, ignores
#                          --resume and starts over (no run resumes);
#       mpi_async          async training that learns less: the async runs stop after 40 steps
#                          (a wrapper adds --max-steps 40);
#       mpi_kill           a rank's death goes unnoticed: a wrapper runs each rank as a child and
#                          sleeps on when it dies, so mpirun sees a live rank and the job hangs;
#       net_train_sim      the simulated network is not the measured one: a patched copy of
#                          scripts/lib.sh writes every netns platform at half the goodput
#                          (it needs root for the namespaces, like the test).
# Runs each test as CTest does (tests/scripts/<name>.sh with the CTest environment), prints one
# line per run and a summary; exit 0 when every (a) run passed and every (b) run failed.
# Needs a build (default build/) and, for sim_validate, the SimGrid StarPU (scripts/env.sh --sim).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$ROOT/build" FAULTS=1 LOAD=1 TESTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$(cd "${2:?--build DIR}" && pwd)"; shift 2 ;;
    --no-faults) FAULTS=0; shift ;;
    --no-load) LOAD=0; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    sim_validate|robust_kill_resume|mpi_async|mpi_kill|net_train_sim) TESTS+=("$1"); shift ;;
    *) echo "timing_tests.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "${#TESTS[@]}" -gt 0 ] || TESTS=(sim_validate robust_kill_resume mpi_async mpi_kill net_train_sim)
APP="$BUILD/apps/starpu_anp"
[ -x "$APP" ] || { echo "timing_tests.sh: no $APP (build first)" >&2; exit 2; }
WORK="$(mktemp -d /tmp/anp-timing-XXXXXX)"
LOADERS=()
stop_load() { local p; for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null || true; done; LOADERS=(); }
end_lingering() { local p; for p in $(cat "$WORK/lingering.pids" 2>/dev/null || true); do kill "$p" 2>/dev/null || true; done; }
trap 'stop_load; end_lingering; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
start_load() {
  local i
  for i in $(seq 1 "$(nproc)"); do
    bash -c 'while :; do :; done' &
    LOADERS+=($!)
  done
}

# The CTest environment of a script test (tests/CMakeLists.txt DNN_TEST_ENV, script_tests.cmake).
PY="$(sed -n 's/^DNN_TEST_PYTHON:FILEPATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)"
test_env=(DNN_TEST_PYTHON="$PY" STARPU_HOME="$BUILD/starpu_home" STARPU_SILENT=1 DNN_TEST_DATA="$ROOT/tests/data"
          DNN_BUILD_DIR="$BUILD" DNN_SOURCE_DIR="$ROOT" STARPU_ANP="$APP")

# Fault wrappers around the app (named so that they are not taken for the app by pgrep -x).
mkdir -p "$WORK/bin"
cat >"$WORK/bin/anp-no-resume" <<EOF
#!/usr/bin/env bash
# drops --resume FILE: every run starts over
a=(); while [ \$# -gt 0 ]; do if [ "\$1" = --resume ]; then shift 2; else a+=("\$1"); shift; fi; done
exec "$APP" "\${a[@]}"
EOF
cat >"$WORK/bin/anp-async-short" <<EOF
#!/usr/bin/env bash
# async runs stop after 40 steps
case " \$* " in *" --mode async "*) exec "$APP" "\$@" --max-steps 40 ;; esac
exec "$APP" "\$@"
EOF
cat >"$WORK/bin/anp-rank-lingers" <<EOF
#!/usr/bin/env bash
# the rank runs as a child; when it dies this process stays (90 s: longer than mpi_kill waits),
# so mpirun does not learn of it; its pid is noted and ended on exit
"$APP" "\$@" || true
echo "\$\$" >>"$WORK/lingering.pids"
exec sleep 90
EOF
chmod +x "$WORK/bin"/*
# sim_validate's fault: a copy of the source tree's scripts whose bench/sim_validate.sh simulates
# 2 CPU workers (and 4 chunks) where the real runs had 1.
make_sim_fault_tree() {
  local t="$WORK/simfault"
  mkdir -p "$t/tests"
  cp -r "$ROOT/scripts" "$ROOT/bench" "$ROOT/sim" "$t/"
  cp -r "$ROOT/tests/scripts" "$t/tests/"
  sed -i 's|--cores "$w" --ncpu "$w" --mode "$mode" --steps "$STEPS"|--cores 2 --ncpu 2 --mode "$mode" --steps "$STEPS"|' \
    "$t/bench/sim_validate.sh"
  grep -q -- '--cores 2 --ncpu 2 --mode "$mode" --steps' "$t/bench/sim_validate.sh" \
    || { echo "timing_tests.sh: the sim_validate patch did not apply" >&2; exit 1; }
  echo "$t"
}

# net_train_sim's fault: a copy whose scripts/lib.sh writes the netns platform at half the goodput.
make_net_fault_tree() {
  local t="$WORK/netfault"
  mkdir -p "$t/tests"
  cp -r "$ROOT/scripts" "$ROOT/bench" "$ROOT/sim" "$t/"
  cp -r "$ROOT/tests/scripts" "$ROOT/tests/net" "$t/tests/"
  sed -i 's|--network netns --rate "$rate" "$@"|--network netns --rate "$rate" --netns-eff 0.47 "$@"|' "$t/scripts/lib.sh"
  grep -q -- '--netns-eff 0.47 "$@"' "$t/scripts/lib.sh" \
    || { echo "timing_tests.sh: the net_train_sim patch did not apply" >&2; exit 1; }
  echo "$t"
}

RESULTS=()
BAD=0
# run_one NAME KIND EXPECT [VAR=VALUE...]: runs the test; KIND load|idle|fault; EXPECT pass|fail.
run_one() {
  local name="$1" kind="$2" expect="$3"; shift 3
  local log="$WORK/$name-$kind.log" t0 rc=0 got verdict
  [ "$kind" = load ] && start_load
  t0=$(date +%s)
  env "${test_env[@]}" "$@" timeout 1500 bash "${SRC_OVERRIDE:-$ROOT}/tests/scripts/$name.sh" >"$log" 2>&1 || rc=$?
  [ "$kind" = load ] && stop_load
  got=pass; [ "$rc" = 0 ] || got=fail
  [ "$rc" != 77 ] || got=skipped
  if [ "$got" = "$expect" ]; then verdict=ok; else verdict=UNEXPECTED; BAD=$((BAD + 1)); fi
  RESULTS+=("$(printf '%-19s %-6s exit %-3s in %4s s: %-7s (want %s) %s' "$name" "$kind" "$rc" $(($(date +%s) - t0)) "$got" "$expect" "$verdict")")
  echo "${RESULTS[-1]}"
  grep -E '^(FAIL|problem|[0-9]+ check)|ratio|kills and|resumes|test_accuracy=|mpirun exited|rank processes' "$log" | head -12 | sed 's/^/    /' || true
  cp "$log" "${TIMING_LOG_DIR:-$WORK}/" 2>/dev/null || true
}

echo "timing tests: ${TESTS[*]} ($(nproc) cores; load: $([ "$LOAD" = 1 ] && echo "$(nproc) busy loops" || echo off); faults: $([ "$FAULTS" = 1 ] && echo on || echo off))"
for t in "${TESTS[@]}"; do
  if [ "$LOAD" = 1 ]; then run_one "$t" load pass; else run_one "$t" idle pass; fi
  [ "$FAULTS" = 1 ] || continue
  case "$t" in
    sim_validate) # the copy simulates with this tree's SimGrid build (no second build)
      SRC_OVERRIDE="$(make_sim_fault_tree)" run_one "$t" fault fail DNN_SOURCE_DIR="$WORK/simfault" \
        ANP_SIM_BUILD="${ANP_SIM_BUILD:-$ROOT/build-sim}" ;;
    robust_kill_resume) run_one "$t" fault fail STARPU_ANP="$WORK/bin/anp-no-resume" ;;
    mpi_async) run_one "$t" fault fail STARPU_ANP="$WORK/bin/anp-async-short" ;;
    mpi_kill) run_one "$t" fault fail STARPU_ANP="$WORK/bin/anp-rank-lingers" ;;
    net_train_sim) # the copy measures with this tree's builds
      SRC_OVERRIDE="$(make_net_fault_tree)" run_one "$t" fault fail DNN_SOURCE_DIR="$WORK/netfault" \
        ANP_SIM_BUILD="${ANP_SIM_BUILD:-$ROOT/build-sim}" ;;
  esac
done
echo "summary:"
printf '  %s\n' "${RESULTS[@]}"
[ "$BAD" = 0 ] || { echo "$BAD run(s) did not go as expected"; exit 1; }
echo "all as expected"
