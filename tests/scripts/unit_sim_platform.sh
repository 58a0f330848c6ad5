#!/usr/bin/env bash
# unit_sim_platform — sim/platform.py's networks and in-node links, without SimGrid (python only).
#  1. every network of `--list-networks` (but netns, which needs --rate) writes a cluster whose
#     node links carry its NETWORKS bandwidth and latency (docs/SIMULATION.md "Networks");
#  2. the names the studies use exist, with the rates of their sources: 25gbe-roce 25 Gb/s and
#     0.8 us (the Horovod paper's), hdr 200 Gb/s, ndr 400 Gb/s, edr 100 Gb/s;
#  3. --pcie-gen 3/4/5 sets the host link to 12.5/25/50 GB/s, --nvlink 1..4 the GPU pair's link to
#     20/25/300/450 GB/s and --nvlink none to the host link's rate; without them the GPU kind's;
#     --roofline takes an eff_compute above 1 (of the direct FLOP count: Winograd) up to 4;
#  4. bad input is a usage error (exit 2) naming the option: an unknown network, --pcie-gen 6,
#     --nvlink 5, --nvlink without GPUs; simulate.sh refuses an unknown --network the same way
#     before it builds or calibrates anything.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="${DNN_SOURCE_DIR:?}"
P="$ROOT/sim/platform.py"

# bw_lat NET: "bandwidth-in-bytes/s latency" of the node links of a 2-node cluster on NET
bw_lat() {
  python3 "$P" --out "$TMP/p" --nodes 2 --cores 2 --network "$1" >/dev/null
  sed -n 's/.* bw="\([0-9.]*\)Bps" lat="\([0-9.]*\)us".*/\1 \2/p' "$TMP/p/cluster.xml"
}
nets="$(python3 "$P" --list-networks)"
# NETWORKS' own figures, "NAME BYTES/S LAT_US" per line, read once
want_all="$(cd "$ROOT/sim" && python3 -c "
import importlib.util
s = importlib.util.spec_from_file_location('p', 'platform.py')
m = importlib.util.module_from_spec(s)
s.loader.exec_module(m)
for k, n in m.NETWORKS.items():
    if n['gbps'] is not None: print(f\"{k} {n['gbps'] * 1e9 / 8:.1f} {n['lat_us']}\")")"
n=0
for net in $nets; do
  [ "$net" != netns ] || continue
  got="$(bw_lat "$net")" || { fail "$net: platform.py failed"; continue; }
  want="$(awk -v n="$net" '$1 == n { print $2, $3 }' <<<"$want_all")"
  [ -n "$want" ] && [ "$got" = "$want" ] || fail "$net: cluster.xml has '$got', NETWORKS says '$want'"
  n=$((n + 1))
done
[ "$n" -ge 16 ] || fail "only $n networks listed: $nets"
for pair in "25gbe-roce:3125000000.0 0.8" "hdr:25000000000.0 0.6" "ndr:50000000000.0 0.6" "edr:12500000000.0 0.6" \
            "25gbe:3125000000.0 10.0" "400gbe-roce:50000000000.0 0.8"; do
  got="$(bw_lat "${pair%%:*}")"
  [ "$got" = "${pair#*:}" ] || fail "${pair%%:*}: '$got', want '${pair#*:}'"
done

# link SRC DST: the bandwidth (bytes/s) of a node's StarPU link SRC-DST
link() { sed -n "s/.*<link id=\"$1-$2\" bandwidth=\"\([0-9.]*\)Bps\".*/\1/p" "$TMP/p/sampling/bus/"*.platform.v4.xml; }
gen() { rm -rf "$TMP/p"; python3 "$P" --out "$TMP/p" --nodes 1 --cores 2 --gpus 2 --gpu "$@" >/dev/null; }
gen p100
[ "$(link RAM CUDA0)" = 12500000000.0 ] && [ "$(link CUDA0 CUDA1)" = 20000000000.0 ] ||
  fail "p100 defaults: host $(link RAM CUDA0), peer $(link CUDA0 CUDA1); want 12.5 and 20 GB/s"
for g in 3:12500000000.0 4:25000000000.0 5:50000000000.0; do
  gen v100 --pcie-gen "${g%%:*}"
  [ "$(link RAM CUDA0)" = "${g#*:}" ] || fail "--pcie-gen ${g%%:*}: host link $(link RAM CUDA0), want ${g#*:}"
done
for v in 1:20000000000.0 2:25000000000.0 3:300000000000.0 4:450000000000.0; do
  gen k80 --nvlink "${v%%:*}"
  [ "$(link CUDA0 CUDA1)" = "${v#*:}" ] || fail "--nvlink ${v%%:*}: peer link $(link CUDA0 CUDA1), want ${v#*:}"
done
gen h100 --pcie-gen 4 --nvlink none
[ "$(link CUDA0 CUDA1)" = 25000000000.0 ] ||
  fail "--nvlink none with --pcie-gen 4: peer $(link CUDA0 CUDA1), want 25 GB/s"
grep -q "no NVLink" "$TMP/p/platform.txt" || fail "platform.txt does not say 'no NVLink': $(cat "$TMP/p/platform.txt")"

# eff_compute above 1 (Winograd's fewer multiplies than the direct count) is accepted up to 4
gen p100 --roofline 1.53:0.7:5
grep -qx 'p100:10600.0:732.0:1.53:0.7:5.0' "$TMP/p/gpu.spec" ||
  fail "--roofline 1.53:0.7:5: gpu.spec '$(cat "$TMP/p/gpu.spec")'"
expect_rc 2 python3 "$P" --out "$TMP/p" --nodes 1 --cores 2 --gpus 1 --gpu p100 --roofline 4.5:0.7:5 &&
  [[ "$ERR" == *--roofline* ]] || fail "--roofline 4.5:0.7:5: '$ERR'"
expect_rc 2 python3 "$P" --out "$TMP/p" --nodes 2 --cores 2 --network 25gbe-rocee && [[ "$ERR" == *--network* ]] ||
  fail "unknown network: '$ERR'"
expect_rc 2 python3 "$P" --out "$TMP/p" --nodes 1 --cores 2 --gpus 1 --gpu p100 --pcie-gen 6 &&
  [[ "$ERR" == *--pcie-gen* ]] ||
  fail "--pcie-gen 6: '$ERR'"
expect_rc 2 python3 "$P" --out "$TMP/p" --nodes 1 --cores 2 --gpus 1 --gpu p100 --nvlink 5 &&
  [[ "$ERR" == *--nvlink* ]] ||
  fail "--nvlink 5: '$ERR'"
expect_rc 2 python3 "$P" --out "$TMP/p" --nodes 1 --cores 2 --nvlink 2 && [[ "$ERR" == *--nvlink* ]] ||
  fail "--nvlink without GPUs: '$ERR'"
expect_rc 2 bash "$ROOT/scripts/simulate.sh" --network 25gbe-rocee --no-build &&
  [[ "$ERR" == *"--network '25gbe-rocee'"*25gbe-roce* ]] ||
  fail "simulate.sh --network 25gbe-rocee: '$ERR'"
expect_rc 2 bash "$ROOT/scripts/simulate.sh" --nvlink 5 --no-build && [[ "$ERR" == *--nvlink* ]] ||
  fail "simulate.sh --nvlink 5: '$ERR'"
finish
