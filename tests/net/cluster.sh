#!/usr/bin/env bash
# cluster.sh — a test cluster of N "hosts" on this machine: N network namespaces, each with its
# own TCP/IP stack and one veth link to a bridge (in a namespace of its own), plus a link from
# the launcher's namespace (where "cluster.sh mpirun" runs mpirun) to the same bridge, so that
# mpirun reaches the hosts over TCP only; the root namespace is not touched. Private addresses only: 10.213.ID.i/24 for host i, 10.213.ID.254 for the launcher.
#
#   cluster.sh up N         create hosts 1..N (cleaning leftovers of a crashed run first)
#   cluster.sh down         remove everything (kills what still runs inside the namespaces)
#   cluster.sh run N CMD..  up N, run CMD, down (also on failure, Ctrl-C, SIGTERM); CMD's status
#   cluster.sh rate RATE    tbf RATE (e.g. 1gbit, 10gbit) on every host link, both directions
#                           (its bucket: tbf_words below; ANP_NET_BURST=SIZE sets one of yours);
#                           "off" removes it
#   cluster.sh loss PCT     nft in every host: drop PCT% of the packets in and out (0 removes)
#   cluster.sh cut I        partition host I by nft (drop everything on its link)
#   cluster.sh linkdown I   set host I's link down
#   cluster.sh hosts        print "IP NAMESPACE" per host
#   cluster.sh mpirun ARGS  mpirun over the hosts (one rank per host, TCP only: btl tcp,self,
#                           pml ob1, interfaces restricted to the cluster subnet; tests/net/agent.sh
#                           stands in for ssh and enters the host's namespace)
#                           and StarPU's workers unbound up to one host per core
#                           (STARPU_WORKERS_NOBIND, below)
#
# ANP_NET_ID (1..250, default 1) picks the subnet and the names (namespaces anpnet<ID>br,
# anpnet<ID>l, anpnet<ID>h<i>), so concurrent tests use distinct IDs. In every namespace
# net.ipv4.tcp_retries2 = ANP_NET_TCP_RETRIES (default 5: a dead peer fails a connection after
# ~13 s, not ~15 min); mpirun gets oob_tcp keepalive 5 s (ANP_NET_KEEPALIVE; 0 = off). State (hostfile, map) lives in
# /tmp/anpnet<ID>/. Exit 77 with one line when namespaces cannot be created (not root, ...).
# The hosts share this machine's cores, but each rank's StarPU sees all of them and would bind its
# first worker to core 0, every rank to the same one: mpirun passes STARPU_WORKERS_NOBIND, by
# default 1 (unbound: the kernel spreads them) when there are no more hosts than cores, else 0
# (StarPU's binding, as before: with 4 hosts on 2 cores unbinding was faster for small rhd
# all-reduces, slower for large ones, mixed for the tree); set it in cluster.sh's environment to
# choose (docs/NETWORK.md, "Every host's worker on core 0").
set -euo pipefail
ID="${ANP_NET_ID:-1}"
BURST="${ANP_NET_BURST:-}" # a tbf bucket of your own for every rate (e.g. 256kb, the old default)
case "$ID" in ''|*[!0-9]*) echo "cluster.sh: ANP_NET_ID must be 1..250, not '$ID'" >&2; exit 2 ;; esac
[ "$ID" -ge 1 ] && [ "$ID" -le 250 ] || { echo "cluster.sh: ANP_NET_ID must be 1..250, not '$ID'" >&2; exit 2; }
P="anpnet$ID"            # name prefix
NET="10.213.$ID"         # the /24
BR="${P}br"              # the bridge's namespace
LNS="${P}l"              # the launcher's namespace (mpirun runs there)
RETRIES="${ANP_NET_TCP_RETRIES:-5}" # net.ipv4.tcp_retries2 in the cluster's namespaces
STATE="/tmp/$P"
HERE="$(cd "$(dirname "$0")" && pwd)"

die() { echo "cluster.sh: $*" >&2; exit 1; }

can_netns() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root (uid $(id -u))"; return 1; }
  command -v ip >/dev/null || { echo "SKIP: iproute2 ('ip') is not installed"; return 1; }
  local probe="${P}probe" msg
  ip netns del "$probe" 2>/dev/null || true
  if ! msg="$(ip netns add "$probe" 2>&1)"; then echo "SKIP: cannot create a network namespace: $msg"; return 1; fi
  ip netns del "$probe" 2>/dev/null || true
  return 0
}

# Namespaces of this ID (hosts and bridge), also those of a crashed run.
our_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${P}(br|l|h[0-9]+)$" || true; }

down() {
  local ns pids
  for ns in $(our_netns); do
    # Whatever still runs in a host (orted, ranks of a killed job) goes with it: only the
    # processes inside our own namespaces, by pid.
    pids="$(ip netns pids "$ns" 2>/dev/null || true)"
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
  done
  for ns in $(our_netns); do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$STATE"
  # Open MPI's session directories of our hosts (/tmp/ompi.<hostname>.0: agent.sh names each
  # host after its namespace). Left by a killed job, they made later jobs of the same hosts die
  # of SIGKILL a second after launch (stale records of pids, which all namespaces share).
  rm -rf /tmp/ompi."${P}"h[0-9]*.0
  return 0
}

up() {
  local n="$1" i ns
  case "$n" in ''|*[!0-9]*) die "up: N must be a number 1..64, not '$n'" ;; esac
  [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "up: N must be 1..64, not $n"
  can_netns || exit 77
  down
  trap 'down; exit 130' INT TERM
  trap 'down' ERR
  mkdir -p "$STATE"
  ip netns add "$BR"
  ip -n "$BR" link set lo up
  ip -n "$BR" link add br0 type bridge
  ip -n "$BR" link set br0 up
  # The launcher's side: a namespace of its own too (mpirun runs there), with one veth into the
  # bridge, so that nothing of the cluster touches the root namespace.
  ip netns add "$LNS"
  ip -n "$LNS" link set lo up
  ip -n "$BR" link add launch type veth peer name anp0 netns "$LNS"
  ip -n "$BR" link set launch master br0 up
  ip -n "$LNS" addr add "$NET.254/24" dev anp0
  ip -n "$LNS" link set anp0 up
  # A peer that stops answering fails a TCP connection after ~13 s of retransmissions (5
  # retries) instead of the default ~15 min: mpirun's kill orders to a cut-off host then give
  # up in time, and so do the ranks' connections. Per namespace: the machine's own is untouched.
  ip netns exec "$LNS" sysctl -qw net.ipv4.tcp_retries2="$RETRIES"
  : >"$STATE/hostfile"; : >"$STATE/hosts"
  for i in $(seq 1 "$n"); do
    ns="${P}h$i"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2="$RETRIES"
    ip -n "$BR" link add "h$i" type veth peer name anp0 netns "$ns"
    ip -n "$BR" link set "h$i" master br0 up
    ip -n "$ns" addr add "$NET.$i/24" dev anp0
    ip -n "$ns" link set anp0 up
    echo "$NET.$i slots=1" >>"$STATE/hostfile"
    echo "$NET.$i $ns" >>"$STATE/hosts"
  done
  trap - ERR INT TERM
  # Wait (bounded) until every host reaches the launcher (the bridge ports start forwarding).
  for i in $(seq 1 "$n"); do
    local ok=0
    for _ in $(seq 1 50); do
      if { ip netns exec "${P}h$i" timeout 1 bash -c "exec 3<>/dev/tcp/$NET.254/9" 2>&1 || true; } | grep -q refused; then
        ok=1; break
      fi
      sleep 0.1
    done
    [ "$ok" = 1 ] || { [ -n "${ANP_NET_KEEP:-}" ] || down; die "host $i cannot reach the launcher ($NET.254)"; }
  done
  return 0
}

nhosts() { [ -f "$STATE/hosts" ] && wc -l <"$STATE/hosts" || echo 0; }
need_up() { [ -f "$STATE/hosts" ] || die "no cluster $ID is up (cluster.sh up N first)"; }
host_ns() {
  local i="$1"
  case "$i" in ''|*[!0-9]*) die "host index must be a number, not '$i'" ;; esac
  [ "$i" -ge 1 ] && [ "$i" -le "$(nhosts)" ] || die "no host $i (cluster has $(nhosts))"
  echo "${P}h$i"
}

# tbf_words RATE: tbf's bucket. A message that finds a full bucket leaves as much of itself as the
# bucket holds at the veth's speed (several Gbit/s), which no wire does. Up to 100 Mbit/s: an 8 KiB
# bucket (0.65 ms of 100 Mbit/s), so the link sends at its rate. Above: 256 KiB (2 ms of 1 Gbit/s):
# smaller buckets, or a peakrate bucket, cost 1 Gbit/s links up to half their rate on this 2-core
# machine once 3-4 hosts send at once (tbf's timer waits behind the ranks' threads). Measured:
# docs/NETWORK.md, "The links as a wire"; sim/platform.py's netns_burst() models the same.
tbf_words() {
  local r="$1" n unit
  n="${r%%[!0-9]*}"; unit="${r#"$n"}"
  case "$unit" in
    kbit) ;; mbit) n=$((n * 1000)) ;; gbit) n=$((n * 1000000)) ;;
    *) die "rate '$r': give a whole number of kbit, mbit or gbit (e.g. 100mbit, 1gbit, 2500mbit)" ;;
  esac
  [ -n "$n" ] && [ "$n" -gt 0 ] || die "rate '$r': not a rate (e.g. 100mbit, 1gbit)"
  if [ -n "$BURST" ]; then echo "burst $BURST"
  elif [ "$n" -le 100000 ]; then echo "burst 8kb"
  else echo "burst 256kb"; fi
}

rate() {
  need_up
  local r="$1" i ns words=""
  [ "$r" = off ] || words="$(tbf_words "$r")" || exit 2
  for i in $(seq 1 "$(nhosts)"); do
    ns="${P}h$i"
    ip -n "$ns" link set anp0 txqueuelen 1000
    tc -n "$ns" qdisc del dev anp0 root 2>/dev/null || true # none yet: nothing to remove
    tc -n "$BR" qdisc del dev "h$i" root 2>/dev/null || true
    [ "$r" = off ] && continue
    # Host -> bridge (its uplink) and bridge -> host (its downlink): RATE each way.
    # shellcheck disable=SC2086 # words: tbf's words, split on purpose
    tc -n "$ns" qdisc add dev anp0 root tbf rate "$r" $words latency 50ms || die "tc tbf $r $words on host $i failed"
    # shellcheck disable=SC2086
    tc -n "$BR" qdisc add dev "h$i" root tbf rate "$r" $words latency 50ms || die "tc tbf $r $words towards host $i failed"
  done
}

loss() {
  need_up
  local pct="$1" i ns
  command -v nft >/dev/null || die "nft is not installed (Debian package nftables)"
  for i in $(seq 1 "$(nhosts)"); do
    ns="${P}h$i"
    ip netns exec "$ns" nft delete table inet anploss 2>/dev/null || true
    [ "$pct" = 0 ] && continue
    ip netns exec "$ns" nft -f - <<NFT || die "nft loss rule on host $i failed"
table inet anploss {
  chain in  { type filter hook input priority 0; iifname "anp0" meta random < $((pct * 42949673)) counter drop; }
  chain out { type filter hook output priority 0; oifname "anp0" meta random < $((pct * 42949673)) counter drop; }
}
NFT
  done
}

cut() {
  need_up
  local ns; ns="$(host_ns "$1")" || exit 1
  command -v nft >/dev/null || die "nft is not installed (Debian package nftables)"
  ip netns exec "$ns" nft -f - <<NFT || die "nft partition of host $1 failed"
table inet anpcut {
  chain in  { type filter hook input priority -10; iifname "anp0" counter drop; }
  chain out { type filter hook output priority -10; oifname "anp0" counter drop; }
}
NFT
}

linkdown() { need_up; local ns; ns="$(host_ns "$1")" || exit 1; ip -n "$ns" link set anp0 down; }

do_mpirun() {
  need_up
  local nobind=0
  [ "$(nhosts)" -gt "$(nproc)" ] || nobind=1
  nobind="${STARPU_WORKERS_NOBIND:-$nobind}"
  case "$nobind" in 0|1) ;; *) echo "cluster.sh: STARPU_WORKERS_NOBIND must be 0 or 1, not '$nobind'" >&2; exit 2 ;; esac
  exec ip netns exec "$LNS" mpirun --allow-run-as-root --hostfile "$STATE/hostfile" -np "$(nhosts)" --map-by node --wdir "$PWD" \
    --mca plm_rsh_agent "$HERE/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
    --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24" \
    --mca oob_tcp_keepalive_time "${ANP_NET_KEEPALIVE:-5}" --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 \
    -x ANP_NET_ID="$ID" -x STARPU_WORKERS_NOBIND="$nobind" "$@"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  up) up "${1:-}" ;;
  down) down ;;
  run)
    n="${1:-}"; shift || true
    [ "$#" -gt 0 ] || die "run N CMD...: no command"
    r=0; up "$n" || r=$?; [ "$r" = 0 ] || exit "$r"
    trap 'down' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "$@"
    ;;
  rate) rate "${1:?rate RATE|off}" ;;
  loss) loss "${1:?loss PCT}" ;;
  cut) cut "${1:?cut HOST_INDEX}" ;;
  linkdown) linkdown "${1:?linkdown HOST_INDEX}" ;;
  hosts) need_up; cat "$STATE/hosts" ;;
  mpirun) do_mpirun "$@" ;;
  -h|--help|help) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' ;;
  *) echo "cluster.sh: unknown command '$cmd' (try --help)" >&2; exit 2 ;;
esac
