#!/usr/bin/env bash
# mpi_idle_cpu — a rank with nothing to do gives its core back: while rank 1 of a 2-rank training
# run is stopped (SIGSTOP), rank 0 waits for it, and StarPU-MPI's progress thread ("MPI") must
# sleep, not busy-poll (third_party/starpu-mpi-backoff.patch): under 10% of a core and sleeping
# (voluntary context switches) at least 20 times a second over a 3 s window. The control run with
# STARPU_MPI_BACKOFF_MAX=0 (StarPU's own busy polling) must show the spin (under 20 sleeps a
# second), so that the window is known to catch the wait. Sleeps, not CPU share, tell the two
# apart on a loaded machine: a spinning thread gets less CPU when the cores are shared, but it
# never sleeps (measured: 0/s busy-polling, 1100-1700/s with the back-off; docs/NETWORK.md).
# The same for rank 0's idle CPU worker ("CPU 0", third_party/starpu-worker-backoff.patch): under
# 10% of a core and sleeping, against the control STARPU_WORKER_BACKOFF_MAX=0 (StarPU's spinning).
source "$(dirname "$0")/lib.sh"
set -euo pipefail
need_fashion_mnist
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
LIB="$(ldd "$STARPU_ANP" | awk '/libstarpumpi/ {print $3}')"
grep -qa STARPU_MPI_BACKOFF_MAX "$LIB" 2>/dev/null \
  || { echo "SKIP: $LIB lacks third_party/starpu-mpi-backoff.patch (a StarPU not built by scripts/bootstrap.sh)"; exit 77; }
CORE="$(ldd "$STARPU_ANP" | awk '/libstarpu-/ {print $3}')"
grep -qa STARPU_WORKER_BACKOFF_MAX "$CORE" 2>/dev/null \
  || { echo "SKIP: $CORE lacks third_party/starpu-worker-backoff.patch (a StarPU not built by scripts/bootstrap.sh)"; exit 77; }
TC="$DNN_SOURCE_DIR/bench/thread_cpu.sh"
export STARPU_NCPU=1
# thread_stats OUT COMM: "cpu_pct sleeps_per_s" of rank 0's threads named COMM in bench/thread_cpu.sh's
# output OUT, or nothing
thread_stats() { grep "^thread_cpu: total rank=0 comm=\"$2\"" <<<"$1" | sed 's/.*cpu_pct=\([0-9.]*\).*sleeps_per_s=\([0-9]*\).*/\1 \2/' || true; }
# measure NAME [mpirun args]: the MPI threads of rank 0 while rank 1 is stopped; sets CPU, SLEEPS,
# and WCPU, WSLEEPS for its worker
measure() {
  local name="$1"; shift
  local m="$TMP/$name.csv" out
  # 10 steps an epoch: the first epoch line (flushed at the epoch's end) says the ranks are training
  out="$(bash "$TC" --nprocs 2 --delay 1 --start-when "grep -q train_epoch $m" --stop-rank 1 --settle 2 --window 3 --kill -- \
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 -x STARPU_NCPU "$@" "$STARPU_ANP" train --net lenet5 \
    --limit-train 640 --epochs 100000 --no-eval --quiet --metrics "$m" 2>"$TMP/$name.err")" || true
  local line; line="$(thread_stats "$out" MPI)"
  [ -n "$line" ] || { cat "$TMP/$name.err" >&2; echo "$out" >&2; fail "$name: no MPI thread measured on rank 0"; CPU=-1 SLEEPS=-1 WCPU=-1 WSLEEPS=-1; return; }
  read -r CPU SLEEPS <<<"$line"
  echo "$name: rank 0's MPI threads while rank 1 is stopped: ${CPU}% of a core, $SLEEPS sleeps/s"
  line="$(thread_stats "$out" "CPU 0")"
  [ -n "$line" ] || { echo "$out" >&2; fail "$name: no worker thread (CPU 0) measured on rank 0"; WCPU=-1 WSLEEPS=-1; return; }
  read -r WCPU WSLEEPS <<<"$line"
  echo "$name: rank 0's worker while rank 1 is stopped: ${WCPU}% of a core, $WSLEEPS sleeps/s"
}
measure backoff
fcmp "$CPU >= 0 && $CPU <= 10" || fail "with the back-off, the progress thread took $CPU% of a core (bound 10%)"
[ "$SLEEPS" -ge 20 ] || fail "with the back-off, the progress thread slept $SLEEPS times a second (want >= 20)"
fcmp "$WCPU >= 0 && $WCPU <= 10" || fail "with the back-off, the idle worker took $WCPU% of a core (bound 10%)"
[ "$WSLEEPS" -ge 20 ] || fail "with the back-off, the idle worker slept $WSLEEPS times a second (want >= 20)"
# The control: both back-offs off in one run (StarPU's own polling and spinning)
measure busy -x STARPU_MPI_BACKOFF_MAX=0 -x STARPU_WORKER_BACKOFF_MAX=0
[ "$SLEEPS" -ge 0 ] && [ "$SLEEPS" -lt 20 ] \
  || fail "control: busy polling (STARPU_MPI_BACKOFF_MAX=0) slept $SLEEPS times a second: the window did not catch a rank waiting"
[ "$WSLEEPS" -ge 0 ] && [ "$WSLEEPS" -lt 20 ] \
  || fail "control: a spinning worker (STARPU_WORKER_BACKOFF_MAX=0) slept $WSLEEPS times a second: the window did not catch it idle"
finish
