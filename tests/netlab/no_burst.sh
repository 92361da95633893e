#!/usr/bin/env bash
# no_burst.sh NETLAB [RATE]: the emulated link cannot burst. Two nodes on RATE links (1gbit unless given), one TCP connection
# between them (burst_probe.py, one process per node): after an idle second,
# 256 KiB must take at least 0.95x their link time (256 KiB x 8 / rate), timed
# on the receiver from its "go" to the last byte, with TCP's slow start after
# idle off so that only the link paces them. It also prints the best of three
# 64 MiB transfers as a fraction of the rate (the achieved ceiling) without
# checking it: that depends on the CPU the host gives the VM (on one idle
# 2-core VM, 0.58 in one run and 0.94 in the next two), a speed figure for
# the benchmarks, which measure their own links' ceilings.
# Needs root and network namespaces (netlab.sh); fails, never skips, without.
set -uo pipefail
netlab=$1 rate=${2:-1gbit}
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root: netlab.sh creates network namespaces and tc qdiscs (run the netlab label as root)"
[ -x /usr/bin/python3 ] || fail "needs /usr/bin/python3 (Debian's python3) for burst_probe.py"
echo "netlab --burst-of $rate: $("$netlab" --burst-of "$rate") bytes"
"$netlab" --nodes 2 --rate "$rate" -- /usr/bin/python3 "$(dirname "$0")/burst_probe.py"
rc=$?
[ "$rc" = 0 ] || fail "burst_probe through $netlab at $rate exited $rc (figures above; netlab.sh exits 2 on its own errors)"
echo "ok: no burst after idle at $rate"
