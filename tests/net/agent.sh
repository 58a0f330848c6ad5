#!/usr/bin/env bash
# agent.sh — Open MPI's plm_rsh_agent for tests/net/cluster.sh: called as "agent.sh HOST CMD...",
# like ssh, it runs CMD inside HOST's network namespace (HOST is a host's IP address; the map is
# /tmp/anpnet<ID>/hosts), with a UTS namespace of its own whose hostname is the namespace's
# name, so Open MPI and StarPU see one node per host. ANP_HOST=HOST is exported to the ranks
# (train --step-timeout names the host by it).
set -euo pipefail
ID="${ANP_NET_ID:-1}"
MAP="/tmp/anpnet$ID/hosts"
host="${1:?agent.sh: no host}"; shift
ns="$(awk -v h="$host" '$1 == h {print $2}' "$MAP" 2>/dev/null || true)"
[ -n "$ns" ] || { echo "agent.sh: host '$host' is not in $MAP" >&2; exit 255; }
exec ip netns exec "$ns" env ANP_HOST="$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$ns" "$@"
