#!/usr/bin/env bash
# Emulated cluster on one machine: K network namespaces ("nodes") joined by a
# Linux bridge, every link shaped with tc tbf, and one mpirun that starts one
# Open MPI daemon per namespace over TCP. Everything the script creates is torn
# down on exit, whether the command succeeds, fails or is interrupted.
#
#   netlab.sh --nodes K [--rate 1gbit|10gbit|unshaped] [--ranks-per-node R]
#             [--subnet 10.77.X] -- PROGRAM [ARGS...]
#   netlab.sh --burst-of RATE     prints the tbf burst (bytes) a RATE link gets
#
# The program runs under `mpirun -np K*R` with the TCP transport restricted to
# the bridge subnet. Needs root (ip netns, tc). Environment for the ranks:
# QSGD_NETLAB_RATE (the rate), QSGD_NETLAB_MASTER (first node's address) and
# QSGD_NETLAB_IFACE (qsgd0, every node's interface), e.g. for gloo rendezvous.
#
# Shaping: tbf on both ends of each veth pair (node egress and bridge egress),
# so every node has a full-duplex link of the given rate to the switch.
# Below 10 Gbit/s the token bucket holds 24 KiB: after an idle moment at most
# 24 KiB leave faster than the rate, so 256 KiB of TCP payload (274 KB on
# the wire) take at least 0.95x their link time (256 KiB x 8 / rate). TCP
# sends packets of at most 8 segments there (gso_max_segs 8: 12 KB on the
# wire), which fit the bucket with 100 us of the 1 Gbit/s link to spare for
# a late qdisc timer. At 10 Gbit/s and above packets keep the kernel's size
# (up to 64 KiB) and the bucket holds 1 MiB (0.84 ms of the link): two cores
# cannot keep a smaller one full, and the stack's own latency already
# exceeds a 256 KiB transfer's link time there. `--burst-of` prints the
# bucket; tests/netlab measures the burst and the ceiling.
# `netem` does not exist in this kernel: no latency emulation.
# Open MPI's TCP eager limit is raised to 8 MiB (see below, with the measured
# reason); set OMPI_MCA_btl_tcp_eager_limit and friends to override it.
set -euo pipefail

nodes=2
rate=1gbit
rpn=1
subnet=""
burst_of=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --ranks-per-node) rpn="$2"; shift 2 ;;
    --subnet) subnet="$2"; shift 2 ;;
    --burst-of) burst_of="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "netlab: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# link_params RATE: "BUCKET GSO_SEGS" of a RATE link: the tbf bucket in bytes
# and the most TCP segments in one packet (0: the kernel's default).
link_params() {
  case "$1" in
    *gbit) [ "${1%gbit}" -ge 10 ] && { echo "$((1 << 20)) 0"; return; } ;;
  esac
  echo "$((24 << 10)) 8"
}
burst_bytes() { local p; p="$(link_params "$1")"; echo "${p% *}"; }
if [ -n "$burst_of" ]; then
  case "$burst_of" in
    unshaped) echo 0 ;;
    *[0-9]gbit|*[0-9]mbit) burst_bytes "$burst_of" ;;
    *) echo "netlab: rate '$burst_of' is not unshaped, <N>gbit or <N>mbit" >&2; exit 2 ;;
  esac
  exit 0
fi
[ $# -gt 0 ] || { echo "netlab: no program given (netlab.sh [options] -- PROGRAM ...)" >&2; exit 2; }
case "$rate" in
  unshaped) ;;
  *[0-9]gbit|*[0-9]mbit) ;;
  *) echo "netlab: rate '$rate' is not unshaped, <N>gbit or <N>mbit" >&2; exit 2 ;;
esac
if ! [[ "$nodes" =~ ^[0-9]+$ ]] || [ "$nodes" -lt 1 ] || [ "$nodes" -gt 64 ]; then
  echo "netlab: --nodes must be 1..64" >&2; exit 2
fi
[ "$(id -u)" = 0 ] || { echo "netlab: needs root (network namespaces, tc)" >&2; exit 2; }

tag="q$$"                       # unique per invocation: names never collide
[ -n "$subnet" ] || subnet="10.$((77 + $$ % 100)).$((($$ / 100) % 250))"
bridge="${tag}br"
workdir="$(mktemp -d /tmp/qsgd-netlab.XXXXXX)"
created_ns=()
created_links=()

teardown() {
  set +e
  for ns in "${created_ns[@]}"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
  for ns in "${created_ns[@]}"; do ip netns del "$ns" 2>/dev/null; done
  for l in "${created_links[@]}"; do ip link del "$l" 2>/dev/null; done
  rm -rf "$workdir"
}
trap teardown EXIT
trap 'exit 130' INT TERM

shape() {  # shape DEV [NETNS]
  [ "$rate" = unshaped ] && return 0
  local burst segs run=()
  read -r burst segs <<< "$(link_params "$rate")"
  [ -n "${2:-}" ] && run=(ip netns exec "$2")
  if [ "$segs" -gt 0 ]; then
    "${run[@]}" ip link set dev "$1" gso_max_segs "$segs"
  fi
  "${run[@]}" tc qdisc add dev "$1" root tbf rate "$rate" burst "$burst" latency 100ms
}

ip link add "$bridge" type bridge
created_links+=("$bridge")
ip addr add "${subnet}.1/24" dev "$bridge"
ip link set "$bridge" up

hostfile="$workdir/hosts"
: > "$hostfile"
declare -A ns_of tmp_of
for i in $(seq 0 $((nodes - 1))); do
  ns="${tag}n$i"
  host="${tag}h$i"
  peer="${tag}p$i"
  addr="${subnet}.$((10 + i))"
  ip netns add "$ns"
  created_ns+=("$ns")
  ip link add "$host" type veth peer name "$peer"
  created_links+=("$host")
  ip link set "$peer" netns "$ns"
  # Same interface name in every node, so daemons can be told which to use.
  ip netns exec "$ns" ip link set "$peer" name qsgd0
  ip link set "$host" master "$bridge" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip addr add "$addr/24" dev qsgd0
  ip netns exec "$ns" ip link set qsgd0 up
  shape "$host"
  shape qsgd0 "$ns"
  echo "$addr slots=$rpn" >> "$hostfile"
  ns_of[$addr]="$ns"
  mkdir -p "$workdir/tmp-n$i"
  tmp_of[$addr]="$workdir/tmp-n$i"
done

# rsh agent: "agent [options] HOST COMMAND..." -> run COMMAND inside HOST's namespace.
agent="$workdir/rsh-agent"
{
  echo '#!/usr/bin/env bash'
  echo 'while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done'
  echo 'host="$1"; shift'
  echo 'case "$host" in'
  for a in "${!ns_of[@]}"; do echo "  $a) ns=${ns_of[$a]} tmp=${tmp_of[$a]} ;;"; done
  echo '  *) echo "netlab rsh-agent: unknown host $host" >&2; exit 1 ;;'
  echo 'esac'
  echo 'export PMIX_MCA_ptl_tcp_if_include=qsgd0 OMPI_MCA_orte_tmpdir_base="$tmp"'
  # mpirun passes its own orte_tmpdir_base on the daemon's command line
  # (overriding the environment); swap in this node's.
  echo "hnp_tmp=$workdir/tmp-hnp"
  echo 'cmd="$*"; cmd="${cmd//"$hnp_tmp"/"$tmp"}"'
  echo 'exec ip netns exec "$ns" /bin/sh -c "$cmd"'
} > "$agent"
chmod +x "$agent"

# Session directories: every namespace shares this machine's /tmp and host
# name, so by default mpirun and all daemons create and remove the same
# /tmp/ompi.HOST.UID/jf.N; a daemon once failed at start-up there ("mkdir
# ... File exists", orte_session_dir failed, exit 213). Each daemon gets its
# own base under the work directory (set by the rsh agent above), mpirun too.
export OMPI_MCA_orte_tmpdir_base="$workdir/tmp-hnp"
mkdir -p "$OMPI_MCA_orte_tmpdir_base"
# rtc/hwloc shares the topology through shared memory between daemons on
# one host; it crashed orted intermittently here (segfault in
# hwloc_shmem_topology_write). No binding either: every namespace looks like
# a whole node to its daemon, which would pin every rank to core 0.
export PMIX_MCA_ptl_tcp_remote_connections=1
export PMIX_MCA_ptl_tcp_if_include="$bridge"
export QSGD_NETLAB_RATE="$rate"
export QSGD_NETLAB_MASTER="${subnet}.10"
export QSGD_NETLAB_IFACE=qsgd0
# TCP eager limit: Open MPI sends messages over 64 KiB with a rendezvous
# handshake, and on these links the handshake's reply waits behind up to
# 100 ms of queued data (tbf latency 100ms) on the peer's egress. A ring of
# 4 MiB segments then stalls: an 80 MiB fp32 ring allreduce at K = 2 took
# 1.24x the link time (median of 10), 1.00x with segments sent eagerly. So
# messages up to 8 MiB go eagerly here, unless the caller set these.
export OMPI_MCA_btl_tcp_eager_limit="${OMPI_MCA_btl_tcp_eager_limit:-8388608}"
export OMPI_MCA_btl_tcp_rndv_eager_limit="${OMPI_MCA_btl_tcp_rndv_eager_limit:-8388608}"
export OMPI_MCA_btl_tcp_max_send_size="${OMPI_MCA_btl_tcp_max_send_size:-8388608}"
echo "netlab: $nodes node(s) on ${subnet}.0/24, links $rate, $rpn rank(s) per node" >&2
set +e
mpirun --allow-run-as-root --oversubscribe \
  -np $((nodes * rpn)) --hostfile "$hostfile" --map-by "ppr:${rpn}:node" \
  --mca plm_rsh_agent "$agent" --mca rtc ^hwloc --bind-to none \
  --mca btl tcp,self --mca btl_tcp_if_include "${subnet}.0/24" \
  --mca oob_tcp_if_include "${subnet}.0/24" \
  -x QSGD_NETLAB_RATE -x QSGD_NETLAB_MASTER -x QSGD_NETLAB_IFACE -x PATH \
  "$@"
status=$?
set -e
exit $status
