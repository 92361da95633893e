#!/usr/bin/python3
"""Times transfers over one TCP connection between two emulated nodes.

Run as the mpirun'd program of `netlab.sh --nodes 2` (one process per node):
rank 0 listens on QSGD_NETLAB_MASTER and receives, rank 1 connects and sends.
For each transfer the receiver sends an 8-byte "go" (the size wanted) and
times go -> last byte received on its own clock; the sender answers every go
with that many bytes. First LONG-REPS transfers of LONG bytes (they also open
the congestion and receive windows), then SMALL-REPS transfers of SMALL bytes,
each after IDLE seconds with the connection quiet. Around the short ones both
processes poll instead of sleeping, so that no CPU has to wake from idle on
the way, and TCP's slow start after idle is off in both namespaces (unless
--slow-start-after-idle): only the link paces what follows the go.

  burst_probe.py [--small BYTES] [--small-reps N] [--long BYTES] [--long-reps N]
                 [--idle S] [--min-small F] [--min-long F] [--port P] [--sockbuf BYTES]
                 [--slow-start-after-idle]

Checks (rank 0 prints the figures and exits 1 when one fails):
  every SMALL transfer after IDLE s takes >= MIN_SMALL x its link time
  (SMALL * 8 / rate): the link's token bucket lets no burst through;
  the best LONG transfer reaches >= MIN_LONG x the rate (the ceiling; 0, the
  default, prints it and checks nothing: how close TCP gets to the rate
  depends on the CPU the host has free, so a floor on it is a speed target
  for a benchmark, and every sweep measures its own links' ceilings).
The rate is QSGD_NETLAB_RATE (tc units: 1gbit = 1e9 bit/s).
"""
import argparse
import os
import re
import socket
import struct
import sys
import time


def rate_bits(text):
    m = re.fullmatch(r"([0-9]+)(gbit|mbit)", text or "")
    if not m:
        raise SystemExit("burst_probe: QSGD_NETLAB_RATE=%r is not <N>gbit or <N>mbit "
                         "(an unshaped link has no link time)" % text)
    return int(m.group(1)) * (10**9 if m.group(2) == "gbit" else 10**6)


def recv_exact(sock, n, buf, spin=False):
    """Receives N bytes into BUF (reused). SPIN: poll a non-blocking socket
    instead of sleeping in recv, so that no CPU wakes from idle on the way
    (here about 0.5 ms after an idle second, a quarter of the link time)."""
    view = memoryview(buf)
    got = 0
    sock.setblocking(not spin)
    try:
        while got < n:
            try:
                k = sock.recv_into(view[:min(len(buf), n - got)])
            except BlockingIOError:
                continue
            if k == 0:
                raise SystemExit("burst_probe: peer closed the connection after %d of %d bytes" % (got, n))
            got += k
    finally:
        sock.setblocking(True)


def spin_sleep(seconds):
    """Waits SECONDS with this CPU busy (see recv_exact)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def big_buffers(sock, nbytes):
    """Fixed socket buffers of NBYTES each way (root may exceed rmem_max): the
    window then never limits a transfer, and a process descheduled for a few
    ms does not idle the link (autotuning starts near 128 KiB, 1 ms at 1 Gbit/s)."""
    for force, plain in ((33, socket.SO_RCVBUF), (32, socket.SO_SNDBUF)):  # SO_RCVBUFFORCE, SO_SNDBUFFORCE
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, nbytes)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, plain, nbytes)


def no_slow_start_after_idle():
    """TCP restarts slow start after an idle RTO by default, which would hide a
    burst behind its own ramp; turn that off in this node's namespace so that
    only the link paces the transfer after idle (netlab runs ranks as root)."""
    path = "/proc/sys/net/ipv4/tcp_slow_start_after_idle"
    try:
        with open(path, "w") as f:
            f.write("0\n")
    except OSError as e:
        raise SystemExit("burst_probe: cannot write %s in this node's network namespace (%s): "
                         "run under netlab.sh as root, or pass --slow-start-after-idle" % (path, e))


def receiver(args, rate):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    big_buffers(srv, args.sockbuf)
    srv.bind((args.master, args.port))
    srv.listen(1)
    srv.settimeout(60)
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(1 << 20)
    name = os.environ.get("QSGD_NETLAB_RATE")

    def timed(n, idle, spin):
        (spin_sleep if spin else time.sleep)(idle)
        t0 = time.monotonic()
        conn.sendall(struct.pack("!Q", n))
        recv_exact(conn, n, buf, spin)
        return time.monotonic() - t0

    ok = True
    # Long transfers first: they measure the ceiling and open the congestion
    # window and the receive window, so that the short ones after idle are
    # paced by nothing but the link.
    long_t = [timed(args.long, 0.05, False) for _ in range(args.long_reps)]
    for i, t in enumerate(long_t):
        print("netlab probe: %d B (%d/%d): %.3f s, %.1f Mbit/s of payload, %.3f of the %s rate"
              % (args.long, i + 1, len(long_t), t, args.long * 8 / t / 1e6, args.long * 8 / t / rate, name),
              flush=True)
    ceiling = args.long * 8 / min(long_t) / rate
    print("netlab probe: achieved ceiling %.3f of the %s rate (payload: at MTU 1500 TCP/IP and Ethernet "
          "headers cap it at 0.956)" % (ceiling, name), flush=True)
    if ceiling < args.min_long:
        ok = False
        print("netlab probe: FAIL: the best %d B transfer reached %.3f of the rate (< %.2f)"
              % (args.long, ceiling, args.min_long), flush=True)
    link = args.small * 8 / rate
    small = [timed(args.small, args.idle, True) for _ in range(args.small_reps)]
    for i, t in enumerate(small):
        print("netlab probe: %d B after %.1f s idle (%d/%d): %.3f ms, link time %.3f ms, %.3fx"
              % (args.small, args.idle, i + 1, len(small), t * 1e3, link * 1e3, t / link), flush=True)
    worst = min(small) / link
    print("netlab probe: fastest %d B after idle: %.3fx its link time (%s)"
          % (args.small, worst, "TCP slow start after idle on" if args.slow_start_after_idle
             else "TCP slow start after idle off"), flush=True)
    if worst < args.min_small:
        ok = False
        print("netlab probe: FAIL: a %d B transfer after %.1f s idle took %.3fx its link time (< %.2fx): "
              "the link let a burst through" % (args.small, args.idle, worst, args.min_small), flush=True)
    conn.sendall(struct.pack("!Q", 0))
    conn.close()
    return 0 if ok else 1


def sender(args):
    deadline = time.monotonic() + 60
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        big_buffers(sock, args.sockbuf)
        sock.settimeout(5)
        try:
            sock.connect((args.master, args.port))
            break
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    payload = b"\x5a" * max(args.small, min(args.long, 64 << 20))  # touched: no page faults while timed
    buf = bytearray(8)
    while True:
        recv_exact(sock, 8, buf, spin=True)  # the go: no wake-up from idle before sending
        (n,) = struct.unpack("!Q", buf)
        if n == 0:
            return 0
        view = memoryview(payload)
        while n > 0:
            k = min(n, len(payload))
            sock.sendall(view[:k])
            n -= k


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--small", type=int, default=256 << 10)
    p.add_argument("--small-reps", type=int, default=3)
    p.add_argument("--long", type=int, default=64 << 20)
    p.add_argument("--long-reps", type=int, default=3)
    p.add_argument("--idle", type=float, default=1.0)
    p.add_argument("--min-small", type=float, default=0.95)
    p.add_argument("--min-long", type=float, default=0.0)
    p.add_argument("--port", type=int, default=47321)
    p.add_argument("--sockbuf", type=int, default=8 << 20, help="socket buffer bytes each way")
    p.add_argument("--slow-start-after-idle", action="store_true",
                   help="leave net.ipv4.tcp_slow_start_after_idle as it is (TCP's ramp then adds to the time)")
    args = p.parse_args()
    args.master = os.environ.get("QSGD_NETLAB_MASTER")
    rank = os.environ.get("OMPI_COMM_WORLD_RANK")
    if not args.master or rank not in ("0", "1"):
        raise SystemExit("burst_probe: run as rank 0 or 1 under netlab.sh (QSGD_NETLAB_MASTER=%r, "
                         "OMPI_COMM_WORLD_RANK=%r)" % (args.master, rank))
    rate = rate_bits(os.environ.get("QSGD_NETLAB_RATE"))  # both ranks: an unshaped run fails at once
    if not args.slow_start_after_idle:
        no_slow_start_after_idle()
    if rank == "0":
        return receiver(args, rate)
    return sender(args)


if __name__ == "__main__":
    sys.exit(main())
