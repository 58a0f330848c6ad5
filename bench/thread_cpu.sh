#!/usr/bin/env bash
# thread_cpu.sh — how much of a core each thread of each rank takes over a window: the submitting
# (main) thread, StarPU-MPI's progress thread ("MPI"), the workers ("CPU 0", "CUDA 0", ...).
#
#   bench/thread_cpu.sh [options] -- COMMAND...   run COMMAND (e.g. mpirun ... starpu_anp bench),
#                                                 sample its processes named NAME, wait for it
#   bench/thread_cpu.sh [options] --pid P [--pid P2 ...]   sample running processes
#
# Options:
#   --delay S        seconds after COMMAND starts before the window opens [8]
#   --window S       the window's length in seconds [5]
#   --name COMM      the processes to sample, by comm (/proc/PID/comm) [starpu_anp]
#   --nprocs N       wait (up to --delay + 60 s) until N processes named COMM exist [1]
#   --start-when CMD then wait (up to 120 s) until the shell command CMD succeeds, e.g. until the
#                    run has written its first metrics: --start-when 'grep -q train_epoch m.csv'
#   --stop-rank R    the "nothing to do" phase: SIGSTOP rank R (OMPI_COMM_WORLD_RANK) for the
#                    window (after --settle s), SIGCONT after; the other ranks then wait on it
#   --settle S       with --stop-rank: seconds between the SIGSTOP and the window [2]
#   --kill           end COMMAND (SIGTERM to the processes it started) after the window
#   --max-pct P      exit 1 if a thread named by --check takes more than P % of a core
#   --check REGEX    the threads (comm, extended regex) --max-pct applies to [^(MPI|starpu_anp)$]
#
# Output: one line per thread, then one line per rank and thread name (the sums), e.g.
#   thread_cpu: rank=0 pid=123 tid=130 comm="MPI" cpu_pct=38.2 runq_pct=55.0 sleeps_per_s=0
# cpu_pct: utime+stime (/proc/PID/task/TID/stat) over the window, in % of one core.
# runq_pct: the time the thread was runnable but waiting for a core (/proc/.../schedstat), in % of
# the window. sleeps_per_s: its voluntary context switches (/proc/.../status) per second.
# The machine's cores may be shared with other work: then a thread that spins gets less than a
# core, but it never sleeps (sleeps_per_s near 0) and its cpu_pct + runq_pct stays near 100; a
# thread that waits by sleeping has a low cpu_pct and many sleeps (its runq_pct can still be high
# when a spinning thread holds its core and each wake-up queues behind it).
set -euo pipefail
START_WHEN="" DELAY=8 WINDOW=5 NAME=starpu_anp NPROCS=1 STOP_RANK="" SETTLE=2 KILL=0 MAX_PCT="" CHECK='^(MPI|starpu_anp)$'
PIDS=()
usage() { sed -n '2,33p' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --delay) DELAY="$2"; shift 2 ;;
    --window) WINDOW="$2"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    --nprocs) NPROCS="$2"; shift 2 ;;
    --start-when) START_WHEN="$2"; shift 2 ;;
    --stop-rank) STOP_RANK="$2"; shift 2 ;;
    --settle) SETTLE="$2"; shift 2 ;;
    --kill) KILL=1; shift ;;
    --max-pct) MAX_PCT="$2"; shift 2 ;;
    --check) CHECK="$2"; shift 2 ;;
    --pid) PIDS+=("$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    *) echo "thread_cpu.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || [ ${#PIDS[@]} -gt 0 ] || { echo "thread_cpu.sh: give a COMMAND after -- or --pid PID" >&2; exit 2; }
[ $# -eq 0 ] || [ ${#PIDS[@]} -eq 0 ] || { echo "thread_cpu.sh: give either a COMMAND or --pid, not both" >&2; exit 2; }
HZ="$(getconf CLK_TCK)"

# descendants PID: PID and all the processes under it
descendants() {
  local p c
  for p in "$@"; do
    echo "$p"
    for c in $(cat /proc/"$p"/task/*/children 2>/dev/null || true); do descendants "$c"; done
  done
}
# rank_of PID: Open MPI's rank from the environment, or "-" outside mpirun
rank_of() {
  local r
  r="$({ tr '\0' '\n' </proc/"$1"/environ 2>/dev/null || true; } | sed -n 's/^OMPI_COMM_WORLD_RANK=//p;s/^PMIX_RANK=//p' | head -1)"
  echo "${r:--}"
}
# snapshot PID...: "pid tid ticks runq_ns voluntary_switches comm" per thread (comm last: it may
# hold spaces)
snapshot() {
  local p t st rest comm ticks rq vcs
  for p in "$@"; do
    for t in /proc/"$p"/task/*; do
      st="$(cat "$t/stat" 2>/dev/null)" || continue
      comm="${st#*(}"; comm="${comm%)*}"
      rest="${st##*) }"
      read -r -a f <<<"$rest"
      ticks=$(( f[11] + f[12] ))
      rq=0; [ -r "$t/schedstat" ] && read -r _ rq _ <"$t/schedstat"
      vcs="$(sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "$t/status" 2>/dev/null || true)"
      echo "$p ${t##*/} $ticks $rq ${vcs:-0} $comm"
    done
  done
}

CMD_PID=""
if [ $# -gt 0 ]; then
  "$@" &
  CMD_PID=$!
  sleep "$DELAY"
  deadline=$((SECONDS + 60))
  while :; do
    PIDS=()
    for p in $(descendants "$CMD_PID"); do
      if [ "$(cat /proc/"$p"/comm 2>/dev/null || true)" = "$NAME" ]; then PIDS+=("$p"); fi
    done
    [ ${#PIDS[@]} -ge "$NPROCS" ] && break
    kill -0 "$CMD_PID" 2>/dev/null || { echo "thread_cpu.sh: the command ended before $NPROCS process(es) named $NAME appeared" >&2; exit 1; }
    [ $SECONDS -lt $deadline ] || { echo "thread_cpu.sh: only ${#PIDS[@]} of $NPROCS process(es) named $NAME after $((DELAY + 60)) s" >&2; exit 1; }
    sleep 1
  done
  deadline=$((SECONDS + 120))
  while [ -n "$START_WHEN" ] && ! bash -c "$START_WHEN" 2>/dev/null; do
    kill -0 "$CMD_PID" 2>/dev/null || { echo "thread_cpu.sh: the command ended before '$START_WHEN' held" >&2; exit 1; }
    [ $SECONDS -lt $deadline ] || { echo "thread_cpu.sh: '$START_WHEN' did not hold within 120 s" >&2; exit 1; }
    sleep 0.5
  done
fi

STOPPED=""
if [ -n "$STOP_RANK" ]; then
  for p in "${PIDS[@]}"; do if [ "$(rank_of "$p")" = "$STOP_RANK" ]; then STOPPED="$p"; fi; done
  [ -n "$STOPPED" ] || { echo "thread_cpu.sh: no rank $STOP_RANK among ${PIDS[*]}" >&2; exit 1; }
  kill -STOP "$STOPPED"
  sleep "$SETTLE"
fi

declare -A RANK
for p in "${PIDS[@]}"; do RANK[$p]="$(rank_of "$p")"; done
t0="$(date +%s.%N)"; A="$(snapshot "${PIDS[@]}")"
sleep "$WINDOW"
t1="$(date +%s.%N)"; B="$(snapshot "${PIDS[@]}")"
[ -z "$STOPPED" ] || kill -CONT "$STOPPED"

ranks=""; for p in "${PIDS[@]}"; do ranks+="$p=${RANK[$p]} "; done
load="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "thread_cpu: window=${WINDOW}s cores=$(nproc) loadavg=\"$load\" stopped_rank=${STOP_RANK:--} $(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: /cpu="/;s/$/"/')"
REPORT="$(awk -v t0="$t0" -v t1="$t1" -v hz="$HZ" -v ranks="$ranks" -v stopped="${STOPPED:-0}" '
  BEGIN { n = split(ranks, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], x, "="); rk[x[1]] = x[2] } }
  function comm(line,   c) { c = line; sub(/^[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ /, "", c); return c }
  NR == FNR { split($0, f, " "); a[f[2]] = f[3]; q[f[2]] = f[4]; v[f[2]] = f[5]; next }
  {
    split($0, f, " "); pid = f[1]; tid = f[2]; c = comm($0)
    if (pid == stopped || !(tid in a)) next
    w = t1 - t0
    cpu = 100 * (f[3] - a[tid]) / hz / w
    rq = 100 * (f[4] - q[tid]) / 1e9 / w
    sl = (f[5] - v[tid]) / w
    printf "thread_cpu: rank=%s pid=%s tid=%s comm=\"%s\" cpu_pct=%.1f runq_pct=%.1f sleeps_per_s=%.0f\n", rk[pid], pid, tid, c, cpu, rq, sl
    key = rk[pid] SUBSEP c; sum[key] += cpu; sumq[key] += rq; sums[key] += sl; cnt[key]++
  }
  END {
    for (k in sum) { split(k, x, SUBSEP)
      printf "thread_cpu: total rank=%s comm=\"%s\" threads=%d cpu_pct=%.1f runq_pct=%.1f sleeps_per_s=%.0f\n", x[1], x[2], cnt[k], sum[k], sumq[k], sums[k] }
  }' <(echo "$A") <(echo "$B") | sort -k2,2 -k3,3V)"
echo "$REPORT"

rc=0
if [ -n "$MAX_PCT" ]; then
  while read -r line; do
    c="$(sed 's/.*comm="\([^"]*\)".*/\1/' <<<"$line")"
    v="$(sed 's/.*cpu_pct=\([0-9.]*\).*/\1/' <<<"$line")"
    [[ "$c" =~ $CHECK ]] || continue
    if awk -v v="$v" -v m="$MAX_PCT" 'BEGIN { exit !(v > m) }'; then
      echo "thread_cpu: OVER: $line (bound $MAX_PCT %)"; rc=1
    fi
  done < <(grep '^thread_cpu: total' <<<"$REPORT")
fi

if [ -n "$CMD_PID" ]; then
  if [ "$KILL" = 1 ]; then
    for p in $(descendants "$CMD_PID" | tac); do kill -TERM "$p" 2>/dev/null || true; done
  fi
  crc=0; wait "$CMD_PID" || crc=$?
  [ "$KILL" = 1 ] || [ $crc = 0 ] || { echo "thread_cpu.sh: the command exited with $crc" >&2; rc=1; }
fi
exit $rc
