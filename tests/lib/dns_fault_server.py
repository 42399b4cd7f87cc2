#!/usr/bin/env python3
"""A misbehaving DNS server for the fault tests (python3 stdlib only).

Usage: dns_fault_server.py --listen ADDR --port N --mode MODE [--max-seconds S]
ADDR may be a scoped IPv6 address (fe80::53%eth0).
MODE: drop (never answers), servfail, refused, tc (UDP answers are empty with TC set; TCP
answers carry one A / AAAA record), garbage (random bytes of random length), ok (one record),
stray (each UDP question first gets an NXDOMAIN with its ID from the same address but another
port, then the answer from port N 150 ms later), lose-first-aaaa (an AAAA question with an ID
not seen before for its name goes unanswered; the same ID again, a libc's retransmission, is
answered), cname-only (NOERROR holding only a CNAME to gone.invalid., a name that does not
exist: coredns#2492), tc-cname (over UDP: TC and only the first link of a CNAME chain, the
name → next.<name>; over TCP: the chain and the record: coredns#6149).
Listens on UDP and TCP; logs one line per question to stdout ("udp A name"). Exits after
--max-seconds (default 600) so a lost test cannot leave it running.
"""
import argparse
import os
import select
import socket
import struct
import sys
import time


def parse_question(msg):
    """(id, flags, qname, qtype, question bytes) or None."""
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if qd < 1:
        return None
    i, labels = 12, []
    while i < len(msg) and msg[i] != 0:
        n = msg[i]
        if n & 0xC0 or i + 1 + n > len(msg):
            return None
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    if i + 5 > len(msg):
        return None
    qtype = struct.unpack("!H", msg[i + 1:i + 3])[0]
    return qid, flags, ".".join(labels), qtype, msg[12:i + 5]


def wire_name(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".") if l) + b"\0"


def answer(q, rcode, tc=False, records=False, cname=None):
    """A response to question q. cname: (target, then_records): a CNAME from the question's
    name to `target` first, and the record under `target` when then_records."""
    qid, flags, _, qtype, question = q
    rd = flags & 0x0100
    out_flags = 0x8000 | rd | 0x0080 | (0x0200 if tc else 0) | rcode
    rr = b""
    an = 0
    owner = b"\xc0\x0c"  # the question's name
    if cname:
        target = wire_name(cname[0])
        rr += owner + struct.pack("!HHIH", 5, 1, 60, len(target)) + target
        an += 1
        owner = target
        records = cname[1]
    if records and qtype in (1, 28):
        data = socket.inet_pton(socket.AF_INET, "10.9.9.9") if qtype == 1 else \
            socket.inet_pton(socket.AF_INET6, "fd00:9::9")
        rr += owner + struct.pack("!HHIH", qtype, 1, 60, len(data)) + data
        an += 1
    return struct.pack("!HHHHHH", qid, out_flags, 1, an, 0, 0) + question + rr


def reply_for(mode, q, tcp):
    if mode == "drop":
        return None
    if mode == "garbage":
        return os.urandom(3 + os.urandom(1)[0] % 40)
    if mode == "servfail":
        return answer(q, 2)
    if mode == "refused":
        return answer(q, 5)
    if mode == "tc":
        return answer(q, 0, records=True) if tcp else answer(q, 0, tc=True)
    if mode == "cname-only":
        return answer(q, 0, cname=("gone.invalid", False))
    if mode == "tc-cname":
        return answer(q, 0, tc=not tcp, cname=("next." + q[2], tcp))
    return answer(q, 0, records=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--mode", required=True,
                    choices=["drop", "servfail", "refused", "tc", "garbage", "ok", "stray",
                             "lose-first-aaaa", "cname-only", "tc-cname"])
    ap.add_argument("--max-seconds", type=float, default=600)
    a = ap.parse_args()
    fam = socket.AF_INET6 if ":" in a.listen else socket.AF_INET
    addr = (a.listen, a.port)
    if "%" in a.listen:  # a link-local address with its zone: fe80::53%eth0
        host, zone = a.listen.split("%", 1)
        addr = (host, a.port, 0, int(zone) if zone.isdigit() else socket.if_nametoindex(zone))
    udp = socket.socket(fam, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    udp.bind(addr)
    tcp = socket.socket(fam, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(addr)
    tcp.listen(16)
    stray = socket.socket(fam, socket.SOCK_DGRAM)  # same address, another port
    stray.bind((addr[0], 0) + tuple(addr[2:]))
    print("ready", flush=True)
    end = time.time() + a.max_seconds
    conns = []
    later = []  # (due, reply, peer): the stray mode's real answers
    seen = set()  # lose-first-aaaa: (name, id) of the AAAA questions left unanswered
    while time.time() < end:
        now = time.time()
        for item in [x for x in later if x[0] <= now]:
            later.remove(item)
            udp.sendto(item[1], item[2])
        wait = min([0.5] + [max(0.0, x[0] - now) for x in later])
        r, _, _ = select.select([udp, tcp] + conns, [], [], wait)
        for s in r:
            if s is udp:
                msg, peer = udp.recvfrom(4096)
                q = parse_question(msg)
                if not q:
                    continue
                print("udp %d %s" % (q[3], q[2]), flush=True)
                if a.mode == "stray":
                    stray.sendto(answer(q, 3), peer)
                    later.append((time.time() + 0.15, answer(q, 0, records=True), peer))
                    continue
                if a.mode == "lose-first-aaaa":
                    if q[3] == 28 and (q[2].lower(), q[0]) not in seen:
                        seen.add((q[2].lower(), q[0]))
                        continue
                    udp.sendto(answer(q, 0, records=True), peer)
                    continue
                out = reply_for(a.mode, q, False)
                if out is not None:
                    udp.sendto(out, peer)
            elif s is tcp:
                c, _ = tcp.accept()
                c.settimeout(2)
                conns.append(c)
            else:
                try:
                    hdr = s.recv(2)
                    if len(hdr) < 2:
                        raise OSError("closed")
                    n = struct.unpack("!H", hdr)[0]
                    msg = b""
                    while len(msg) < n:
                        chunk = s.recv(n - len(msg))
                        if not chunk:
                            raise OSError("closed")
                        msg += chunk
                    q = parse_question(msg)
                    if not q:
                        continue
                    print("tcp %d %s" % (q[3], q[2]), flush=True)
                    out = reply_for(a.mode, q, True)
                    if out is not None:
                        s.sendall(struct.pack("!H", len(out)) + out)
                except OSError:
                    s.close()
                    conns.remove(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
