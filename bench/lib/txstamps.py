#!/usr/bin/env python3
"""A kernel-timestamped reference prober: TX software stamps per request, and RTT from each.

Opens a raw ICMP socket with SO_TIMESTAMPING (TX_SOFTWARE, RX_SOFTWARE, OPT_ID), sends --count echo
requests --spacing apart to --dst, reads the error queue and the replies. On a plain device path
each request yields one TX stamp per OPT_ID key. When the skb keeps its socket across a veth into
a bridge (no ip_rcv on the way, which would orphan it), the bridge's egress veth stamps it again
with the same key, later. RTT is given from the first stamp (the request leaving the sender: what
ping and a kernel-stamping prober mean) and from the last one (what a prober that keeps the last
stamp of a key reports). Both use the kernel RX stamp of the reply, so no user-space time counts.

Prints one line: "<dst> requests=N keys=K stamps_per_key=n:keys,... gap_us_p50=G gap_us_mean=M
first_us_p50=.. first_us_mean=.. last_us_p50=.. last_us_mean=.. replies=R" (gap: last minus
first stamp of a key). Run it in the sender's namespace, as root.
"""
import argparse
import os
import socket
import statistics
import struct
import sys
import time

SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_RX_SOFTWARE = 1 << 3
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_ID = 1 << 7
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11
SO_TIMESTAMPING = 37


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dst", required=True)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--spacing", type=float, default=0.02)
    args = ap.parse_args()
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING,
                 SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE |
                 SOF_TIMESTAMPING_SOFTWARE |
                 SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY)
    ident = (os.getpid() * 7 + 13) & 0xFFFF
    stamps = {}
    rx = {}

    def drain_replies():
        for _ in range(1000):
            try:
                data, anc, _f, _a = s.recvmsg(2048, 512, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            ihl = (data[0] & 0x0F) * 4
            if len(data) < ihl + 8 or data[ihl] != 0:
                continue
            rid, rseq = struct.unpack("!HH", data[ihl + 4:ihl + 8])
            if rid != ident:
                continue
            for level, typ, val in anc:
                if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPING:
                    sec, ns = struct.unpack("qq", val[:16])
                    if sec or ns:
                        rx.setdefault(rseq, sec * 1_000_000_000 + ns)

    def drain():
        for _ in range(1000):
            try:
                _d, anc, _f, _a = s.recvmsg(64, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            t = k = None
            for level, typ, val in anc:
                if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPING:
                    sec, ns = struct.unpack("qq", val[:16])
                    t = sec * 1_000_000_000 + ns
                elif len(val) >= 16:  # sock_extended_err: ee_data is the OPT_ID key
                    k = struct.unpack("IBBBBII", val[:16])[6]
            if t is not None and k is not None:
                stamps.setdefault(k, []).append(t)

    for i in range(args.count):
        payload = b"podnet-bench" + bytes(44)
        head = struct.pack("!BBHHH", 8, 0, 0, ident, i)
        pkt = struct.pack("!BBHHH", 8, 0, checksum(head + payload), ident, i) + payload
        s.sendto(pkt, (args.dst, 0))
        time.sleep(args.spacing)
        drain()
        drain_replies()
    time.sleep(0.2)
    drain()
    drain_replies()
    per_key = {}
    for v in stamps.values():
        per_key[len(v)] = per_key.get(len(v), 0) + 1
    gaps = [(max(v) - min(v)) / 1000 for v in stamps.values() if len(v) > 1]
    # OPT_ID keys count from 0 in send order, as the ICMP sequence numbers here do.
    first = [(rx[k] - min(v)) / 1000 for k, v in stamps.items() if k in rx]
    last = [(rx[k] - max(v)) / 1000 for k, v in stamps.items() if k in rx]

    def fmt(xs, f):
        return "%.1f" % f(xs) if xs else "-"
    print("%s requests=%d keys=%d stamps_per_key=%s gap_us_p50=%s gap_us_mean=%s "
          "first_us_p50=%s first_us_mean=%s last_us_p50=%s last_us_mean=%s replies=%d"
          % (args.dst, args.count, len(stamps),
             ",".join("%d:%d" % kv for kv in sorted(per_key.items())),
             fmt(gaps, statistics.median), fmt(gaps, statistics.mean),
             fmt(first, statistics.median), fmt(first, statistics.mean),
             fmt(last, statistics.median), fmt(last, statistics.mean), len(rx)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
