#!/usr/bin/env python3
"""Measures iputils ping's send overhead: user-space send time -> the packet on the wire.

iputils ping writes its gettimeofday() send time (struct timeval, host order) at the start of each
echo request's data. The frame's kernel timestamp is read with an AF_PACKET socket:

  --direction in (the bench's choice): on the far end of the sender's veth (the bridge port in the
    node namespace), frames arriving from the sender, stamped in netif_rx, which veth_xmit calls
    right after it takes the kernel TX software stamp the exporter uses. The tap's own work comes
    after the stamp, on the path both tools' RTT includes, and nothing is added to the sender.
  --direction out: on the sender's interface, outgoing frames stamped at the device tap
    (dev_queue_xmit_nit), before the tap's own work and before the driver; that work then counts
    in the sender's send path, so ping's overhead reads low.

Their difference is the part of ping's RTT that the exporter's kernel TX stamp does not count.

Usage (in the right namespace): txcap.py --iface IF --direction in|out --seconds S --out FILE
Writes "ready" to stdout once listening, then one line per echo request with a plausible timeval:
"<dst> <icmp id> <icmp seq> <overhead ns>". Stops after S seconds or on SIGTERM/SIGINT.
"""
import argparse
import select
import signal
import socket
import struct
import sys
import time

ETH_P_IP = 0x0800
ETH_P_ALL = 0x0003  # outgoing frames reach only ETH_P_ALL taps (dev_queue_xmit_nit)
PACKET_OUTGOING = 4
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iface", required=True)
    ap.add_argument("--direction", choices=("in", "out"), default="in")
    ap.add_argument("--src", help="only frames from this IPv4 source (direction in)")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    s.bind((args.iface, ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    deadline = time.monotonic() + args.seconds
    print("ready", flush=True)
    with open(args.out, "w") as out:
        while not stop and time.monotonic() < deadline:
            try:
                r, _, _ = select.select([s], [], [], 0.2)
            except InterruptedError:
                continue
            if not r:
                continue
            try:
                data, anc, _flags, addr = s.recvmsg(256, 256, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                continue
            if addr[1] != ETH_P_IP or len(data) < 20 + 8 + 16:
                continue
            if (addr[2] == PACKET_OUTGOING) != (args.direction == "out"):
                continue
            if args.src and socket.inet_ntoa(data[12:16]) != args.src:
                continue
            ihl = (data[0] & 0x0F) * 4
            if data[9] != 1 or len(data) < ihl + 8 + 16 or data[ihl] != 8:  # ICMP echo request
                continue
            ts = None
            for level, typ, val in anc:
                if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", val[:16])
                    ts = sec * 1_000_000_000 + nsec
            if ts is None:
                continue
            ident, seq = struct.unpack("!HH", data[ihl + 4:ihl + 8])
            tv_sec, tv_usec = struct.unpack("<qq", data[ihl + 8:ihl + 24])
            sent = tv_sec * 1_000_000_000 + tv_usec * 1000
            # Not a ping timeval (e.g. the exporter's own payload): skip.
            if not (0 <= tv_usec < 1_000_000) or abs(ts - sent) > 1_000_000_000:
                continue
            dst = socket.inet_ntoa(data[16:20])
            out.write("%s %d %d %d\n" % (dst, ident, seq, ts - sent))
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
