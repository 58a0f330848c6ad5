# testlib.sh — helpers for the tests/scripts/net_*.sh tests (sourced after tests/scripts/lib.sh).
# Each test sets NET_ID (its own subnet and names, so tests run concurrently) before sourcing.
NETC="${DNN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}/tests/net/cluster.sh"
export ANP_NET_ID="$NET_ID"
# Down on every exit (also a failed check, Ctrl-C, SIGTERM from ctest's timeout).
trap 'bash "$NETC" down; rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
# net_up N: a cluster of N hosts (skips the test, exit 77, when namespaces cannot be made).
net_up() {
  local out rc
  rc=0; out="$(bash "$NETC" up "$1" 2>&1)" || rc=$?
  [ "$rc" = 77 ] && { printf '%s\n' "$out" | head -1; exit 77; }
  [ "$rc" = 0 ] || { echo "$out" >&2; fail "cluster.sh up $1 failed"; finish; }
}
# net_mpirun SECONDS ARGS...: mpirun over the hosts, bounded (SIGKILL 5 s after the limit).
net_mpirun() { local t="$1"; shift; timeout -k 5 "$t" bash "$NETC" mpirun --bind-to none -x STARPU_NCPU=1 "$@"; }
# host_ns I / host_ip I
host_ns() { awk -v i="$1" 'NR == i {print $2}' "/tmp/anpnet$NET_ID/hosts"; }
host_ip() { awk -v i="$1" 'NR == i {print $1}' "/tmp/anpnet$NET_ID/hosts"; }
# tx_bytes I: bytes sent so far on host I's link
tx_bytes() { ip netns exec "$(host_ns "$1")" cat /sys/class/net/anp0/statistics/tx_bytes; }
# the pid of the training process on host I (one rank per host)
rank_pid() { ip netns pids "$(host_ns "$1")" | while read -r p; do
  [ "$(cat /proc/"$p"/comm 2>/dev/null)" = starpu_anp ] && echo "$p" || true; done | head -1 || true; }
