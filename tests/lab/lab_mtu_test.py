#!/usr/bin/env python3
"""Path MTU and black holes on a real dataplane (issue 27): the `mtu` probe against the Linux
router's forwarding, its ICMP errors and iptables dropping them.

Per topology, three network namespaces made here (PID-unique names) and removed after it:

    client (prober) --veth, MTU 9001-- router --veth, MTU 9001-- peer (responder)

Both links are 9001 bytes, as the Pods' interfaces; the bottleneck is the router's route towards
the peer (forward) or back towards the client (reverse), `mtu lock N`, which Linux applies when
it forwards (IPv4 and IPv6): a packet over it with DF is dropped and answered with an ICMP
fragmentation-needed / ICMPv6 packet-too-big naming N — unless iptables / ip6tables drop those
on the router's OUTPUT: a black hole. The client's exporter probes the peer's over IPv4 and over
IPv6 at once (two static peers), and the peer's probes the client's, as every probe Pod does its
peers. Every topology checks, for both families and both ends: the largest size each direction
carried (podnet_path_mtu_bytes), the black-hole verdict, the MTU the ICMP error named
(podnet_path_mtu_icmp_bytes, absent when dropped) and the interface MTU (9001); and prints the
true MTU, the answers, the verdicts, the time the client's round took and the bytes it cost (the
probe's debug log line of its first round). A reverse test asks back only sizes that crossed
forward (no reply is larger than its request), so an end's reverse answer is the smaller of the
two directions, and a return path narrower than the forward one is a black hole there only
below the forward answer; the other end's forward answer is the return path's own. In one topology with ICMP delivered and one black hole, a
TCP transfer (400 kB from client to peer, through the same router) is timed: it completes where
ICMP gets through and stalls (nothing finished within TCP_TIMEOUT_S) in the black hole, while the
probe's verdict came within its first round.

Then the faults of issue 44 (FAULTS; one round each): a local MTU mismatch (the client's veth
9001, its router side 1500), a router whose frag-needed quotes only 28 bytes, and a path of
1,200 bytes (below min_size) with ICMP delivered and dropped. Every topology also checks the path MTU the client's kernel learned
towards the peer (`ip route get`): the truth the probe's ICMP reading must match.

Usage: lab_mtu_test.py --exporter BIN [--only NAME-PART]. Needs root (namespaces, iptables,
ip6tables). ~85 s; every wait is bounded.
"""
import argparse
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit as lab  # noqa: E402

TAG = "mtu%d" % (os.getpid() % 100000)  # not "pn...": the lab's prefix
PORT = 19479
CLIENT_PORT = 19480
TCP_PORT = 19481
TCP_BYTES = 400_000
TCP_TIMEOUT_S = 3.0
INTERVAL_S = 4
ADDR = {  # (client, router's client side, router's peer side, peer)
    4: ("10.27.1.1", "10.27.1.2", "10.27.2.2", "10.27.2.1"),
    6: ("fd27:1::1", "fd27:1::2", "fd27:2::2", "fd27:2::1"),
}
PREFIX = {4: 24, 6: 64}
NET = {4: ("10.27.1.0/24", "10.27.2.0/24"), 6: ("fd27:1::/64", "fd27:2::/64")}

# name, MTU of the router's route to the peer, of its route back, ICMP errors delivered, TCP run
# (and, for the faults of issue 44 below, what differs).
TOPOLOGIES = [
    ("1500, ICMP delivered", 1500, 1500, True, True),
    ("1500, ICMP dropped", 1500, 1500, False, True),
    ("overlay 1450, ICMP delivered", 1450, 1450, True, False),
    ("overlay 1450, ICMP dropped", 1450, 1450, False, False),
    ("return path 1450 only, ICMP delivered", 9001, 1450, True, False),
    ("return path 1450 only, ICMP dropped", 9001, 1450, False, False),
]


class Fault:
    """A topology of issue 44: the truth per family ({4: .., 6: ..}: the largest IP packet that
    crosses each way), whether each direction's oversize packets draw an ICMP error the sender's
    kernel takes (forward, reverse), and how it is made (`setup`: "veth" or "routes"); one round
    is waited for (its figures are the verdict; the second round's bytes are not printed)."""

    def __init__(self, name, forward, reverse, icmp, tcp, setup, rounds=1):
        self.name, self.forward, self.reverse, self.icmp = name, forward, reverse, icmp
        self.tcp, self.setup, self.rounds = tcp, setup, rounds


def as_fault(spec):
    """A TOPOLOGIES row as a Fault: the router's routes locked at its MTUs, two rounds."""
    name, forward_mtu, reverse_mtu, icmp, tcp = spec
    return Fault(name, {4: forward_mtu, 6: forward_mtu}, {4: reverse_mtu, 6: reverse_mtu},
                 (icmp, icmp), tcp, "routes", rounds=2)


# Kind 5, a local MTU mismatch: the client's own veth at 9001, its router side at 1500 (the Pod's
# eth0 and a host-side veth a CNI left at 1500). The router side drops what exceeds its MTU
# (+ 4 bytes of VLAN header: IP packets up to 1504 cross; net/core/dev.c is_skb_forwardable) and
# no ICMP error says so: the sender's send() fails with ENOBUFS under IP_RECVERR, "succeeds"
# without it (udp(7)). Back towards the client, the router forwards into the 1500-byte veth and
# answers larger replies with an ICMP error naming 1500. No TCP run: the veth lets GSO packets
# by whatever their size (the router then cuts them to its route's MTU), so a 400 kB send with
# the veth's TSO/GSO on (the default) completes; with them off it stalls (327,680 B, 3 s), as
# every datagram over 1504 bytes vanishes.
#
# Kind 6, ICMP errors the kernel takes: a router whose fragmentation-needed quotes only what
# RFC 792 asks (the IP header and 8 bytes: 28; RFC 1812 §4.3.2.3 asks for more, many routers
# don't). The Linux router quotes more, so it forwards everything (its routes 9001), iptables drop
# what the client sends over 1400 bytes in FORWARD, and QUOTE_ICMP, on the router's client side,
# answers each such packet with a frag-needed naming 1400 that quotes 28 bytes. The client's
# kernel takes it (icmp_unreach wants 8 bytes past the quoted IP header; __udp4_lib_err finds the
# socket by the quoted addresses and ports) and learns 1400; TCP completes. IPv6 is left at 9001.
# And paths below min_size (1280): 1200 bytes over IPv4 (overlays sit at 1,100-1,200:
# projectcalico/calico#7146), IPv6 at its minimum, 1280, with the router's ICMP errors delivered
# and dropped.
FAULTS = [
    Fault("local veth 9001 -> 1500", {4: 1504, 6: 1504}, {4: 1500, 6: 1500}, (False, True),
          False, "veth"),
    Fault("frag-needed quoting 28 bytes, 1400", {4: 1400, 6: 9001}, {4: 9001, 6: 9001},
          (True, True), True, "quote"),
    Fault("path 1200, ICMP delivered", {4: 1200, 6: 1280}, {4: 1200, 6: 1280}, (True, True),
          True, "routes"),
    Fault("path 1200, ICMP dropped", {4: 1200, 6: 1280}, {4: 1200, 6: 1280}, (False, False),
          False, "routes"),
]
QUOTE_MTU = 1400

QUOTE_ICMP = r"""
import socket, struct, sys, time
dev, mtu, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ETH_P_IP = 0x0800
sniff = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
sniff.bind((dev, ETH_P_IP))
sniff.settimeout(0.2)
out = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)


def checksum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))  # 8 + 28 bytes: even
    s = (s >> 16) + (s & 0xFFFF)
    return ~(s + (s >> 16)) & 0xFFFF


sent = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        pkt, addr = sniff.recvfrom(128)
    except socket.timeout:
        continue
    if addr[2] == socket.PACKET_OUTGOING or len(pkt) < 28 or pkt[0] != 0x45:
        continue  # IPv4 without options: 20 + 8 quoted
    total, frag = struct.unpack("!HH", pkt[2:4] + pkt[6:8])
    if total <= mtu or not frag & 0x4000:
        continue
    msg = struct.pack("!BBHHH", 3, 4, 0, 0, mtu) + pkt[:28]
    msg = msg[:2] + struct.pack("!H", checksum(msg)) + msg[4:]
    out.sendto(msg, (socket.inet_ntoa(pkt[12:16]), 0))
    sent += 1
    if sent <= 3 or sent % 100 == 0:
        print("frag-needed %d to %s quoting 28 bytes of a %d-byte packet (%d sent)"
              % (mtu, socket.inet_ntoa(pkt[12:16]), total, sent), flush=True)
"""

def client_config():
    peers = "".join(
        "    - { name: peer-v%d, address: \"%s\", port: %d, node: node-p, zone: zone-v%d }\n"
        % (f, ADDR[f][3], PORT, f) for f in (4, 6))
    return ('listen_address: "127.0.0.1:%d"\n'
            "self: { name: client, node: node-c, zone: zone-c }\n"
            'responders: { udp_echo: { listen_address: "[::]:%d" } }\n'
            "peers:\n  static:\n%s"
            "probes:\n  mtu: { interval: %ds, timeout: 100ms, max_datagrams: 20 }\n"
            % (CLIENT_PORT, CLIENT_PORT, peers, INTERVAL_S))


def peer_config():
    peers = "".join(
        "    - { name: client-v%d, address: \"%s\", port: %d, node: node-c, zone: zone-v%d }\n"
        % (f, ADDR[f][0], CLIENT_PORT, f) for f in (4, 6))
    return ('listen_address: "[::]:%d"\n'
            "self: { name: peer, node: node-p, zone: zone-p }\n"
            'responders: { udp_echo: { listen_address: "[::]:%d" } }\n'
            "peers:\n  static:\n%s"
            "probes:\n  mtu: { interval: %ds, timeout: 100ms, max_datagrams: 20 }\n"
            % (PORT, PORT, peers, INTERVAL_S))


TCP_SERVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(4)
while True:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    c.close()
"""

TCP_CLIENT = r"""
import socket, sys, time
addr, port, n, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
s.settimeout(timeout)
for _ in range(40):  # the server listening (bounded: 2 s)
    try:
        s.connect((addr, port))
        break
    except ConnectionRefusedError:
        s.close()
        s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
        s.settimeout(timeout)
        time.sleep(0.05)
t0 = time.monotonic()
sent = 0
try:
    while sent < n:
        sent += s.send(b"x" * min(65536, n - sent))
    s.shutdown(socket.SHUT_WR)   # FIN after the data: acknowledged only when all of it was
    s.recv(1)                    # the server's close: every byte arrived
    print("done %.3f %d" % (time.monotonic() - t0, sent))
except (socket.timeout, OSError) as e:
    print("stalled %.3f %d" % (time.monotonic() - t0, sent))
"""


def setup(names, spec):
    c, r, p = names
    for ns in names:
        lab.run("ip", "netns", "add", ns)
        lab.run("ip", "-n", ns, "link", "set", "lo", "up")
    router_side = "1500" if spec.setup == "veth" else "9001"
    lab.run("ip", "-n", c, "link", "add", "c0", "mtu", "9001", "type", "veth", "peer", "name",
            "r0", "mtu", router_side, "netns", r)
    lab.run("ip", "-n", r, "link", "add", "r1", "mtu", "9001", "type", "veth", "peer", "name",
            "p0", "mtu", "9001", "netns", p)
    lab.in_ns(r, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
    for ns, dev, idx in ((c, "c0", 0), (r, "r0", 1), (r, "r1", 2), (p, "p0", 3)):
        for f in (4, 6):
            extra = ["nodad"] if f == 6 else []
            lab.run("ip", "-n", ns, "-%d" % f, "addr", "add",
                    "%s/%d" % (ADDR[f][idx], PREFIX[f]), "dev", dev, *extra)
        lab.run("ip", "-n", ns, "link", "set", dev, "up")
    for f in (4, 6):
        lab.run("ip", "-n", c, "-%d" % f, "route", "add", "default", "via", ADDR[f][1])
        lab.run("ip", "-n", p, "-%d" % f, "route", "add", "default", "via", ADDR[f][2])
        if spec.setup != "routes":
            continue  # the interfaces' MTUs
        # The bottlenecks: the router's routes, locked (IPv6 forwarding honours only a lock).
        # The connected routes replaced (IPv6: theirs have metric 256).
        metric = ["metric", "256"] if f == 6 else []
        lab.run("ip", "-n", r, "-%d" % f, "route", "replace", NET[f][1], "dev", "r1", *metric,
                "mtu", "lock", str(spec.forward[f]))
        lab.run("ip", "-n", r, "-%d" % f, "route", "replace", NET[f][0], "dev", "r0", *metric,
                "mtu", "lock", str(spec.reverse[f]))
    # Neighbours resolved and both families forwarded before the exporters start.
    for f in (4, 6):
        lab.wait_for(lambda: lab.in_ns(c, "ping", "-%d" % f, "-c", "1", "-W", "1", ADDR[f][3],
                                       check_rc=False).returncode == 0,
                     10, "IPv%d client -> peer" % f, step=0.1)
    if spec.setup == "quote":
        # The client's TCP segments one by one (no GSO packet of several, which the length match
        # would take whole, and a router cut): each crosses or draws the helper's error.
        lab.run("ip", "-n", c, "link", "set", "c0", "gso_max_segs", "1")
        lab.in_ns(r, "iptables", "-w", "-A", "FORWARD", "-i", "r0", "-m", "length", "--length",
                  "%d:65535" % (QUOTE_MTU + 1), "-j", "DROP")
    if spec.setup == "routes" and not spec.icmp[0]:
        lab.in_ns(r, "iptables", "-w", "-A", "OUTPUT", "-p", "icmp", "--icmp-type",
                  "fragmentation-needed", "-j", "DROP")
        lab.in_ns(r, "ip6tables", "-w", "-A", "OUTPUT", "-p", "icmpv6", "--icmpv6-type",
                  "packet-too-big", "-j", "DROP")


def learned_mtu(ns, address):
    """The path MTU the kernel of `ns` learned towards `address` (`ip route get`: a route
    exception's "mtu N"), or None."""
    out = lab.in_ns(ns, "ip", "route", "get", address, check_rc=False).stdout
    m = re.search(r"\bmtu (\d+)", out)
    return int(m.group(1)) if m else None


def gauges(body):
    """{(family, peer, direction): value} of the path-MTU gauges."""
    out = {}
    for name, labels, value in lab.parse_metrics(body):
        if name.startswith("podnet_path_mtu_"):
            out[(name, labels.get("peer"), labels.get("direction"))] = value
    return out


def rounds_of(logfile, which=0):
    """{peer: {field: value}} from the debug line of each peer's round number `which` (0: the
    first)."""
    seen, rounds = {}, {}
    with open(logfile, errors="replace") as f:
        for line in f:
            m = re.search(r"mtu: peer=(\S+) (.*)", line)
            if not m:
                continue
            n = seen.get(m.group(1), 0)
            seen[m.group(1)] = n + 1
            if n == which:
                rounds[m.group(1)] = dict(kv.split("=", 1) for kv in m.group(2).split()
                                          if "=" in kv)
    return rounds


def tcp_transfer(names, tmp, f):
    c, _, p = names
    server_py, client_py = os.path.join(tmp, "tcp_server.py"), os.path.join(tmp, "tcp_client.py")
    with open(server_py, "w") as fh:
        fh.write(TCP_SERVER)
    with open(client_py, "w") as fh:
        fh.write(TCP_CLIENT)
    server = lab.start(p, [sys.executable, server_py, ADDR[f][3], str(TCP_PORT)],
                       os.path.join(tmp, "tcp_server_v%d.log" % f), max_seconds=30)
    r = lab.in_ns(c, sys.executable, client_py, ADDR[f][3], str(TCP_PORT), str(TCP_BYTES),
                  str(TCP_TIMEOUT_S), timeout=TCP_TIMEOUT_S + 10, check_rc=False)
    out = (r.stdout.strip() or r.stderr.strip().splitlines()[-1:] or ["?"])
    out = out if isinstance(out, str) else out[0]
    lab.stop(server)
    return out


def topology(args, tmp, n, spec):
    name = spec.name
    names = ("%s-%d-c" % (TAG, n), "%s-%d-r" % (TAG, n), "%s-%d-p" % (TAG, n))
    rows = []
    try:
        setup(names, spec)
        c, _, p = names
        ccfg, pcfg = os.path.join(tmp, "c%d.yaml" % n), os.path.join(tmp, "p%d.yaml" % n)
        with open(ccfg, "w") as fh:
            fh.write(client_config())
        with open(pcfg, "w") as fh:
            fh.write(peer_config())
        if spec.setup == "quote":
            helper = os.path.join(tmp, "quote_icmp.py")
            with open(helper, "w") as fh:
                fh.write(QUOTE_ICMP)
            lab.start(names[1], [sys.executable, helper, "r0", str(QUOTE_MTU), "40"],
                      os.path.join(tmp, "quote_icmp%d.log" % n), max_seconds=45)
        clog = os.path.join(tmp, "client%d.log" % n)
        plog = os.path.join(tmp, "peer%d.log" % n)
        lab.start(p, [args.exporter, "--config.file=" + pcfg, "--log.level=debug"], plog,
                  max_seconds=60)
        lab.start(c, [args.exporter, "--config.file=" + ccfg, "--log.level=debug"], clog,
                  max_seconds=60)
        done = lambda: len(rounds_of(clog)) == 2 and len(rounds_of(plog)) == 2  # noqa: E731
        lab.wait_for(done, 3 * INTERVAL_S + 10, "%s: a round towards both peers" % name,
                     step=0.2)
        code, body = lab.http(c, "http://127.0.0.1:%d/metrics" % CLIENT_PORT)
        g = gauges(body) if code == 200 else {}
        code, body = lab.http(p, "http://127.0.0.1:%d/metrics" % PORT)
        g.update(gauges(body) if code == 200 else {})
        rounds = rounds_of(clog)
        # One end's view of (forward, reverse): the truth each way, the reverse asked back only
        # up to the forward answer.
        views = (("client", "peer-v%d", spec.forward, spec.reverse, spec.icmp),
                 ("peer", "client-v%d", spec.reverse, spec.forward, spec.icmp[::-1]))
        for f in (4, 6):
            seen = {}
            for end, peer_fmt, truth_fwd, truth_rev, (icmp_f, icmp_r) in views:
                peer = peer_fmt % f
                true_fwd, true_rev = truth_fwd[f], truth_rev[f]
                want_rev = min(true_rev, true_fwd)
                fwd = g.get(("podnet_path_mtu_bytes", peer, "forward"))
                rev = g.get(("podnet_path_mtu_bytes", peer, "reverse"))
                hole_f = g.get(("podnet_path_mtu_black_hole", peer, "forward"))
                hole_r = g.get(("podnet_path_mtu_black_hole", peer, "reverse"))
                named = g.get(("podnet_path_mtu_icmp_bytes", peer, None))
                iface = g.get(("podnet_path_mtu_interface_bytes", peer, None))
                where = "%s, IPv%d, the %s's view" % (name, f, end)
                lab.check(fwd == true_fwd, "%s: forward %s, true %d" % (where, fwd, true_fwd))
                lab.check(rev == want_rev, "%s: reverse %s, want %d (true %d)"
                          % (where, rev, want_rev, true_rev))
                lab.check(hole_f == (0 if icmp_f or true_fwd == 9001 else 1),
                          "%s: forward black hole %s" % (where, hole_f))
                lab.check(hole_r == (0 if icmp_r or true_rev >= true_fwd else 1),
                          "%s: reverse black hole %s" % (where, hole_r))
                want_named = true_fwd if icmp_f and true_fwd < 9001 else None
                lab.check(named == want_named, "%s: MTU named by ICMP %s, want %s"
                          % (where, named, want_named))
                lab.check(iface == 9001, "%s: interface MTU %s" % (where, iface))
                seen[end] = (fwd, rev, hole_f, hole_r, named)
            fwd, rev, hole_f, hole_r, named = seen["client"]
            back, _, hole_b, _, _ = seen["peer"]
            # The kernel's own verdict: the path MTU it learned from the ICMP errors it took (the
            # probe's datagrams draw them as any sender's would), none where none came.
            kernel = learned_mtu(c, ADDR[f][3])
            want_kernel = spec.forward[f] if spec.icmp[0] and spec.forward[f] < 9001 else None
            lab.check(kernel == want_kernel, "%s, IPv%d: the client's kernel learned %s, want %s"
                      % (name, f, kernel, want_kernel))
            r = rounds.get("peer-v%d" % f, {})
            rows.append((name, f, spec.forward[f], spec.reverse[f], fwd, rev, hole_f, hole_r,
                         back, hole_b, named, kernel, r.get("seconds"), r.get("datagrams"),
                         r.get("bytes"), "-", ""))
        if spec.tcp:
            out = tcp_transfer(names, tmp, 4)
            stalled = out.startswith("stalled")
            lab.check(stalled != spec.icmp[0],
                      "%s: TCP %d B client -> peer over IPv4: %s (want %s)"
                      % (name, TCP_BYTES, out, "done" if spec.icmp[0] else "stalled"))
            rows[-2] = rows[-2][:-1] + (out,)
        if spec.rounds > 1:
            # The next round starts from this one's answers: its bytes (no check, for the docs).
            lab.wait_for(lambda: len(rounds_of(clog, 1)) == 2, 2 * INTERVAL_S + 10,
                         "%s: a second round" % name, step=0.2)
            second = rounds_of(clog, 1)
            rows = [r[:15] + (second.get("peer-v%d" % r[1], {}).get("bytes"),) + r[16:]
                    if r[0] == name else r for r in rows]
    finally:
        lab.stop_all()
        for ns in names:
            lab.run("ip", "netns", "del", ns, check_rc=False, timeout=30)
    return rows


def scenario(args, tmp):
    lab.run("ip", "netns", "add", TAG)  # run_namespace_test's: each topology makes its own
    rows = []
    start = time.monotonic()
    for n, spec in enumerate([as_fault(t) for t in TOPOLOGIES] + FAULTS):
        if args.only in spec.name:
            rows += topology(args, tmp, n, spec)
    lab.log("")
    head = "%-38s %-4s %-8s %-8s " + "%-6s " * 8 + "%-7s %-6s %-7s %-7s %s"
    lab.log(head % ("topology", "ip", "true fwd", "true rev", "fwd", "rev", "hole f", "hole r",
                    "back", "hole b", "icmp", "kernel", "round s", "dgrams", "bytes", "next",
                    "tcp"))
    fmt = lambda v: "-" if v is None else ("%g" % v if isinstance(v, float) else str(v))  # noqa
    for r in rows:
        lab.log(head.replace("%-4s", "v%-3d").replace("%-8s", "%-8d")
                % (r[0], r[1], r[2], r[3], *(fmt(v) for v in r[4:16]), r[16]))
    lab.log("(fwd, rev, hole f, hole r: the client's view; back, hole b: the return path as the "
            "peer's own probe measures it, its forward; kernel: the path MTU the client's kernel "
            "learned towards the peer)")
    lab.log("all topologies: %.1f s" % (time.monotonic() - start))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--only", default="", help="run only the topologies whose name has this")
    args = ap.parse_args()
    if not lab.have_root():
        return lab.skip(lab.ROOT_NEEDED)
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            return lab.skip("no " + tool)
    rc, _ = lab.run_namespace_test(TAG, lambda tmp: scenario(args, tmp),
                                   "podnet-lab-mtu-")
    return rc


if __name__ == "__main__":
    sys.exit(main())
