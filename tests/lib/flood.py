#!/usr/bin/env python3
"""Bounded flood of a podnet-exporter's responders, for the lab test (run inside a lab namespace).

Opens --connections idle TCP connections to the HTTP port and holds them, and sends UDP datagrams
(garbage and well-formed-looking requests with a bad magic) to the UDP echo port as fast as it
can, for at most --seconds and at most --max-datagrams. Only ever aimed at a lab address.
Prints: connections_opened=N datagrams_sent=N
"""
import argparse
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, default=9479)
    ap.add_argument("--connections", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--max-datagrams", type=int, default=2_000_000)
    a = ap.parse_args()
    if not a.host.startswith("10.213.") and a.host not in ("127.0.0.1", "::1"):
        raise SystemExit("flood.py: refusing to aim at %s (lab and loopback only)" % a.host)
    conns = []
    for _ in range(a.connections):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(0.2)
        try:
            s.connect((a.host, a.port))
            conns.append(s)
        except OSError:
            s.close()  # the server's backlog is full: expected once past its limit
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setblocking(False)
    junk = [b"\x00" * 64, b"PNET\x09\x01" + b"\x00" * 58, b"x" * 1400]
    sent = 0
    deadline = time.monotonic() + a.seconds
    while time.monotonic() < deadline and sent < a.max_datagrams:
        for j in junk:
            try:
                u.sendto(j, (a.host, a.port))
                sent += 1
            except BlockingIOError:
                pass
    print("connections_opened=%d datagrams_sent=%d" % (len(conns), sent), flush=True)
    for s in conns:
        s.close()


if __name__ == "__main__":
    main()
