#!/usr/bin/env python3
"""A bounded flood of well-formed podnet UDP echo requests (wire/echo.h: magic "PNET",
version 1, kind request, seq, token; 56 bytes, or --size bytes with zero padding) at --rate
per second, paced in 1 ms batches, for
at most --seconds, at a loopback or lab address, from one unbound socket, or with --sources N
from N sockets in turn bound to 127.0.3.1, 127.0.3.2, ... (senders apart from any other
loopback client, each with its own share of the responder's per-source limit). Replies are not read (the sockets' receive buffers overflow and
drop them). Prints: sent=N
"""
import argparse
import math
import socket
import struct
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rate", type=float, default=20000)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--sources", type=int)
    ap.add_argument("--size", type=int, default=56)
    a = ap.parse_args()
    if not a.host.startswith(("127.", "10.213.")):
        raise SystemExit("echo_flood.py: refusing to aim at %s" % a.host)
    if a.sources is not None and not 1 <= a.sources <= 250:
        raise SystemExit("echo_flood.py: --sources is 1 to 250")
    if not 16 <= a.size <= 65507:
        raise SystemExit("echo_flood.py: --size is 16 to 65507")
    socks = []
    for i in range(a.sources or 1):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if a.sources:
            u.bind(("127.0.3.%d" % (i + 1), 0))
        u.setblocking(False)
        socks.append(u)
    owed = max(1, math.ceil(a.rate / 100))
    pad = b"\0" * (a.size - 16)
    start = time.monotonic()
    sent = skipped = 0  # sent + skipped: the requests due so far
    while True:
        now = time.monotonic()
        if now - start >= a.seconds:
            break
        due = int((now - start) * a.rate)
        # After a stall (or a SIGSTOP between a test's slots), go on at --rate, not in a burst
        # that catches up: at most 10 ms of requests are owed.
        skipped = max(skipped, due - owed - sent)
        while sent + skipped < due:
            payload = struct.pack("!IBBHQ", 0x504E4554, 1, 1, sent & 0xFFFF, 0xF100D) + pad
            try:
                socks[sent % len(socks)].sendto(payload, (a.host, a.port))
            except BlockingIOError:
                pass
            sent += 1
        time.sleep(0.001)
    print("sent=%d" % sent, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
