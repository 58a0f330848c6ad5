# lib.sh — what the project's shell scripts share (sourced: scripts/, bench/, traces/, tests/).
#
# The result line (README, "Usage"): the LAST stdout line of every command is
#   result: key=value key=value ...
# one space between fields, each key once, no blank inside a value. Fields are read generically
# (any key=value, so a field added to the line needs no change here). Where a log holds several
# result lines (a rank's or a retried run's), the last one is the run's.
#   anp_result_line [FILE...]   the last `result: ` line of FILE(s) or stdin (nothing, exit 1,
#                               when there is none)
#   anp_result_field LINE KEY   the value of KEY in LINE; nothing when KEY is absent; a KEY that
#                               appears more than once breaks the contract: one line on stderr,
#                               exit 2 (reading either copy would hide the bug)
# mpirun: ANP_MPIRUN holds the flags every run on this machine needs (root in containers, more
# ranks than cores on a small machine):  timeout 300 "${ANP_MPIRUN[@]}" -np 2 "$STARPU_ANP" train ...
[ -n "${_ANP_LIB_SH:-}" ] && return 0
_ANP_LIB_SH=1

# anp_measure_prio ROOT: sets ANP_PRIO (a command prefix) and ANP_PRIO_SAID for runs that are timed
# and compared. A run at high priority gets the cores whenever it wants them on a shared machine:
# nice -15 where allowed (root or CAP_SYS_NICE; ANP_MEASURE_NICE=0 turns it off), and where the
# kernel groups the CPU by session (autogroups: nice alone acts only inside one's own session; a
# busy loop at nice -15 beside other sessions' builds got 24% of a core) a session of its own
# whose autogroup is at nice -15 (scripts/measure_prio.sh: 92% of a core there).
anp_measure_prio() {
  ANP_PRIO=() ANP_PRIO_SAID="the default priority (nice -15 not allowed here, or ANP_MEASURE_NICE=0)"
  if [ "${ANP_MEASURE_NICE:-1}" != 0 ] && nice -n -15 true 2>/dev/null; then
    ANP_PRIO=(nice -n -15) ANP_PRIO_SAID="priority nice -15"
    if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ] && command -v setsid >/dev/null; then
      ANP_PRIO=(setsid -w bash "$1/scripts/measure_prio.sh")
      ANP_PRIO_SAID="priority nice -15 in a session whose autogroup is at nice -15"
    fi
  fi
}

anp_result_line() {
  awk '/^result: / { last = $0; found = 1 } END { if (found) print last; else exit 1 }' "$@"
}

anp_result_field() {
  printf '%s\n' "$1" | awk -v k="$2" '
    { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { v = substr($i, length(k) + 2); n++ } }
    END {
      if (n > 1) { printf "result line: key %s appears %d times (the contract is one): %s\n", k, n, $0 > "/dev/stderr"; exit 2 }
      if (n == 1) print v
    }'
}

ANP_MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

# The network-namespace benches (bench/allreduce_bench.sh, bench/net_sim_validate.sh) run one
# command measured over tests/net/cluster.sh hosts and simulated on sim/platform.py --network
# netns, one StarPU CPU worker per rank (dmda); the measured runs calibrate StarPU's CPU models,
# the simulation times every task with them. What they share:
#   anp_netbench_setup NAME NET_ID   with ROOT the checkout: REAL_APP and SIM_APP (the builds
#       ANP_REAL_BUILD [ROOT/build], ANP_SIM_BUILD [ROOT/build-sim]; one line and exit 1 when one is
#       missing), env.sh --sim, SMPIRUN, ANP_NET_CLUSTER (cluster.sh), ANP_NET_ID (exported;
#       NET_ID unless set: each bench has its own, so two never share a cluster), TMP (a fresh
#       /tmp/anp-NAME-XXXXXX), the measured runs' priority (anp_measure_prio: ANP_PRIO, ANP_PRIO_SAID,
#       and ANP_RANK_PRIO, the ranks' own); on exit the cluster goes down (unless SIMONLY=1) and TMP goes
#   anp_netbench_platform PDIR N RATE [ARGS...]   sim/platform.py's N-host netns platform at RATE
#       (ARGS: more of its options) into PDIR; prints the platform's name
#   anp_netbench_measure LABEL CAL LIMIT ARGS...   REAL_APP ARGS over the cluster (timeout LIMIT s),
#       each rank calibrating into CAL/r<rank>; prints the run's result line, or "measured run
#       failed: LABEL: <its first error>" on stderr and status 1
#   anp_netbench_simulate LABEL CAL PDIR PNAME N RATE LIMIT ARGS...   SIM_APP ARGS on N hosts of
#       that platform, the tasks timed by the models CAL holds; prints the result line, or
#       "simulated run failed: LABEL: ..." and status 1. When the platform shares C cores
#       (PDIR/cpu.share "C O R Q": ANP_NETBENCH_CORES=C, --netns-cores), processor sharing: a
#       first run (DNN_BREAKDOWN=1, ANP_SIM_CPU_SHARE=1:R:Q: every CPU task at its CPU time, the
#       calibration's sharing taken out) gives the workers' busy share b and the span T; the N
#       ranks want N b (1 + O) T of CPU, O the other threads' per unit of the workers', so the span
#       is at least T_min = N b (1 + O) T / C; if T < T_min the run is made again with every CPU
#       task stretched by F = T_min / T (ANP_SIM_CPU_SHARE=F:R:Q), and once more by T_min / T2 if
#       that span T2 still falls 3 % short. The line gains sim_cpu_share=F (1: no stretch; a command
#       without DNN_BREAKDOWN's fields, bench --allreduce-bytes, keeps the first run).
ANP_NETBENCH_HOST=anpnetbench # STARPU_HOSTNAME of the measured runs: their models' file suffix

anp_netbench_setup() {
  local name="$1" a
  REAL_APP="${ANP_REAL_BUILD:-${ROOT:?}/build}/apps/starpu_anp"
  SIM_APP="${ANP_SIM_BUILD:-$ROOT/build-sim}/apps/starpu_anp"
  for a in "$REAL_APP" "$SIM_APP"; do
    [ -x "$a" ] || { echo "$name.sh: $a is missing (scripts/simulate.sh --calibrate-only builds build/ and build-sim/)" >&2; exit 1; }
  done
  # shellcheck source=env.sh
  source "$ROOT/scripts/env.sh" --sim --quiet >/dev/null
  SMPIRUN="${STARPU_SIM_PREFIX:?}/bin/starpu_smpirun"
  ANP_NET_CLUSTER="$ROOT/tests/net/cluster.sh"
  export ANP_NET_ID="${ANP_NET_ID:-$2}"
  TMP="$(mktemp -d "/tmp/anp-$name-XXXXXX")"
  trap '[ "${SIMONLY:-0}" = 1 ] || bash "$ANP_NET_CLUSTER" down >/dev/null 2>&1; rm -rf "$TMP"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # The measured runs' priority. mpirun runs under ANP_PRIO (a session of its own at nice -15), but the
  # ranks land in other sessions (Open MPI's daemons, started through tests/net/agent.sh, open their own:
  # seen here, each rank's autogroup at nice 0 under a launcher at -15), where nice alone acts only
  # against the session's own processes; so each rank also runs through measure_prio.sh, which sets
  # its session's autogroup to -15 (a daemon's session, or ANP_PRIO's: never the caller's).
  anp_measure_prio "$ROOT"
  ANP_RANK_PRIO=""
  [ "${#ANP_PRIO[@]}" = 0 ] || ANP_RANK_PRIO="bash $(printf '%q' "$ROOT/scripts/measure_prio.sh")"
}

anp_netbench_platform() {
  local pdir="$1" n="$2" rate="$3" cores=(); shift 3
  # ANP_NETBENCH_CORES=C: the measured hosts shared C cores (docs/NETWORK.md "Ranks sharing cores")
  [ -z "${ANP_NETBENCH_CORES:-}" ] || cores=(--netns-cores "$ANP_NETBENCH_CORES")
  python3 "$ROOT/sim/platform.py" --out "$pdir" --nodes "$n" --cores 1 --network netns --rate "$rate" "${cores[@]}" "$@"
}

anp_netbench_measure() {
  local label="$1" cal="$2" limit="$3" line extra=(); shift 3
  # The progress thread's back-off (third_party/starpu-mpi-backoff.patch), when the caller sets it.
  # ...and the idle workers' (third_party/starpu-worker-backoff.patch).
  local v; for v in STARPU_MPI_BACKOFF_MAX STARPU_MPI_BACKOFF_SPIN STARPU_WORKER_BACKOFF_MAX STARPU_WORKER_BACKOFF_SPIN; do
    [ -z "${!v:-}" ] || extra+=(-x "$v=${!v}")
  done
  # Each rank calibrates into its own STARPU_HOME (CAL/r<rank>): one file per rank, not one file
  # that the ranks' shutdowns overwrite in turn.
  line="$("${ANP_PRIO[@]}" timeout -k 5 "$limit" bash "$ANP_NET_CLUSTER" mpirun --bind-to none "${extra[@]}" -x STARPU_NCPU=1 -x STARPU_NCUDA=0 -x STARPU_SCHED=dmda \
    -x STARPU_CALIBRATE=1 -x STARPU_HISTORY_MAX_ERROR=100000 -x STARPU_HOSTNAME="$ANP_NETBENCH_HOST" -x STARPU_SILENT=1 -x ANP_CAL="$cal" \
    sh -c 'STARPU_HOME="$ANP_CAL/r$OMPI_COMM_WORLD_RANK" exec '"$ANP_RANK_PRIO"' "$@"' sh "$REAL_APP" "$@" 2>"$TMP/err" | anp_result_line)" \
    || { echo "measured run failed: $label: $(grep -m1 error "$TMP/err" || tail -1 "$TMP/err")" >&2; return 1; }
  printf '%s\n' "$line"
}

anp_netbench_simulate() {
  local label="$1" cal="$2" pdir="$3" pname="$4" n="$5" rate="$6" limit="$7" models="" k line cfg=(); shift 7
  for k in $(seq 0 $((n - 1))); do models+="${models:+:}$cal/r$k/.starpu/sampling"; done
  read -rd '' -a cfg <"$pdir/smpi.cfg" || true # its options, split on blanks and newlines
  # one simulated run with every CPU task stretched by $1 (DNN_BREAKDOWN=$2)
  _anp_sim1() {
    env STARPU_PERF_MODEL_DIR="$pdir/sampling" STARPU_HOSTNAME="$pname" STARPU_SCHED=dmda STARPU_NCPU=1 STARPU_NCUDA=0 \
      ANP_SIM_CPU_MODELS="$models" ANP_SIM_CPU_HOST="$ANP_NETBENCH_HOST" ANP_SIM_PLATFORM="$pname-x$n-netns-$rate" \
      ANP_SIM_MODELS="cpu=calibrated${3:-}" ANP_SIM_CPU_SHARE="$1" DNN_BREAKDOWN="$2" STARPU_SILENT=1 timeout "$limit" \
      "$SMPIRUN" -platform "$pdir/cluster.xml" -hostfile "$pdir/hostfile" -np "$n" "${cfg[@]}" "$SIM_APP" "${@:4}" \
      2>"$TMP/simerr" | anp_result_line
  }
  _anp_simfail() { echo "simulated run failed: $1: $(grep -m1 -E '^error|simulation:' "$TMP/simerr" || tail -1 "$TMP/simerr")" >&2; }
  # ANP_NETBENCH_NOSHARE=1: the cores' per-message wait only, no processor sharing (a diagnostic)
  if [ ! -s "$pdir/cpu.share" ] || [ "${ANP_NETBENCH_NOSHARE:-0}" = 1 ]; then
    line="$(_anp_sim1 1 0 "" "$@")" || { _anp_simfail "$label"; return 1; }
    printf '%s sim_cpu_share=1\n' "$line"
    return 0
  fi
  local c o r q span idle tmin f=1 k2
  read -r c o r q <"$pdir/cpu.share"
  line="$(_anp_sim1 "1:$r:$q" 1 "" "$@")" || { _anp_simfail "$label"; return 1; }
  span="$(anp_result_field "$line" bd_cp_span_s)" idle="$(anp_result_field "$line" bd_idle)"
  # bench --allreduce-bytes has no breakdown: its workers idle between a few vector sums, far from
  # wanting the cores, so its tasks keep their CPU time (the sharing is then the messages' wait)
  if [ -z "$span" ] || [ -z "$idle" ]; then printf '%s sim_cpu_share=1\n' "$line"; return 0; fi
  tmin="$(awk -v n="$n" -v b="$idle" -v o="$o" -v t="$span" -v c="$c" 'BEGIN { printf "%.6f", n * (1 - b) * (1 + o) * t / c }')"
  for k2 in 1 2; do
    awk -v t="$span" -v m="$tmin" -v k="$k2" 'BEGIN { exit !(t < m * (k == 1 ? 1 : 0.97)) }' || break
    f="$(awk -v f="$f" -v t="$span" -v m="$tmin" 'BEGIN { printf "%.4f", f * m / t }')"
    line="$(_anp_sim1 "$f:$r:$q" 1 ",share$f" "$@")" || { _anp_simfail "$label"; return 1; }
    span="$(anp_result_field "$line" bd_cp_span_s)"
  done
  printf '%s sim_cpu_share=%s\n' "$line" "$f"
}
