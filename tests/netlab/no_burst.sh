#!/usr/bin/env bash
# no_burst.sh NETLAB [RATE]: the emulated link cannot burst and still reaches
# its rate. Two nodes on RATE links (1gbit unless given), one TCP connection
# between them (burst_probe.py, one process per node): after an idle second,
# 256 KiB must take at least 0.95x their link time (256 KiB x 8 / rate), timed
# on the receiver from its "go" to the last byte, with TCP's slow start after
# idle off so that only the link paces them; and the best of three 64 MiB
# transfers must reach 0.90 of the rate (it prints the achieved ceiling).
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
echo "ok: no burst after idle and the rate reached at $rate"
