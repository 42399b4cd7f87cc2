#!/usr/bin/env python3
"""DNS peer discovery in the lab (peers.kubernetes.discovery: dns; docs/design.md, "Discovery at
scale"): six real exporters find each other from the headless Service's A records, served by a
real unbound, and ask each address who it is (the UDP echo identity record, wire/echo.h).

Topology (every address private to the namespaces made here; nothing leaves them):

    hub (ns PREFIX-hub, br0 10.88.0.1/24): the stand-in API server (tests/lib/fake_apiserver.py,
      on 10.88.0.1, every GET logged); 10.89.0.0/21 is routed here and dropped (raw PREROUTING
      DROP, counted, and a blackhole route): the silent addresses of check 2
    node-i (ns PREFIX-nI, 10.88.0.(10+i), i = 0..5, zone-a/b/c two each): one exporter, self.zone
      empty (read from its Node), `peers.kubernetes: {discovery: dns, dns_refresh: 2s}`; its
      probes.dns resolv.conf (a file of this test) names the lab's unbound only
    dns (ns PREFIX-dns, 10.88.0.2): unbound serving podnet.podnet.svc.cluster.local (nothing
      forwarded: every other name NXDOMAIN); restarted with new records for each step
    liar (ns PREFIX-liar, 10.88.0.3): a UDP responder on port 9479 that claims to be node-0

Checks:
  1. every exporter ready on its first answer, an NXDOMAIN (Kubernetes DNS lists ready Pods
     only); then, the six in the records: 6 candidates each; podnet_peers by path class as the
     zones give it (1 same_zone, 4 cross_zone, no unknown); identity asks answered; the API
     server got each Node's GET and the Service's GET, and no EndpointSlice list or watch;
  2. 2,000 more A records in 10.89.0.0/21 (silent): the UDP answer is truncated and asked again
     over TCP, the asks to the silent addresses time out (and reached the hub's drop), candidates
     stay 6, the exporters keep running and answering /metrics, RSS under 200 MiB;
  3. the liar's address in the records: podnet_discovery_identity_node_conflicts == 1 everywhere;
     then the liar out of the records: it leaves at once (6 candidates, 0 conflicts);
  4. NXDOMAIN: counted, and the last 6 candidates kept for the grace (still 6 ~10 s later);
  5. discovery: auto, the six back in the records: from 4 Pods on, a reloaded exporter keeps
     the records (candidates{source="dns"} only); from 10, another takes the watch (an
     EndpointSlice request) and stays ready through the switch.

Usage: lab_dns_discovery_test.py --exporter BIN [--keep-logs DIR] (DIR: the logs, configs and
zone files, kept). Needs root (exit 77 otherwise, a failure with CI=true), unbound, iptables,
openssl and curl. About 35 s; every wait is bounded; every process is stopped and every
namespace deleted at the end.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import fake_apiserver  # noqa: E402
import labkit  # noqa: E402
from labkit import Broken, check, log  # noqa: E402

PREFIX = "pndd%d" % (os.getpid() % 1000)
HUB = PREFIX + "-hub"
DNS_NS = PREFIX + "-dns"
LIAR_NS = PREFIX + "-liar"
HUB_ADDRESS = "10.88.0.1"
DNS_ADDRESS = "10.88.0.2"
LIAR_ADDRESS = "10.88.0.3"
SILENT_NET = "10.89.0.0/21"
SILENT = ["10.89.%d.%d" % (k // 250, 1 + k % 250) for k in range(2000)]
NAME = "podnet.podnet.svc.cluster.local"
PROBED_NAME = "kubernetes.default.svc.cluster.local"  # probes.dns's own lookups
ZONES = ["zone-a", "zone-b", "zone-c"]
SERVICE_PATH = "/api/v1/namespaces/podnet/services/podnet"
SERVICE_UID = "5e1f0c7a-0000-4000-8000-00000000d115"
RSS_LIMIT_MIB = 200
MAX_SECONDS = 300  # every process of this test ends by itself after this long


class Node:
    def __init__(self, i):
        self.i = i
        self.name = "node-%d" % i
        self.zone = ZONES[i // 2]
        self.pod = "podnet-%d" % i
        self.ns = "%s-n%d" % (PREFIX, i)
        self.address = "10.88.0.%d" % (10 + i)
        self.proc = None


NODES = [Node(i) for i in range(6)]
namespaces = []  # made here, deleted at the end


# ---- the stand-in API server, every GET logged (--log-requests) -------------------------------

def start_apiserver(folder):
    """The stand-in API server on HUB_ADDRESS in the hub: each node's zone, the Service (with its
    UID); returns (process, kubeconfig, log path)."""
    with open(os.path.join(folder, "nodes.json"), "w") as f:
        json.dump({n.name: n.zone for n in NODES}, f)
    service = os.path.join(folder, "service.json")
    with open(service, "w") as f:
        json.dump({"kind": "Service", "apiVersion": "v1",
                   "metadata": {"name": "podnet", "namespace": "podnet", "uid": SERVICE_UID,
                                "resourceVersion": "42"},
                   "spec": {"type": "ClusterIP", "clusterIP": "None",
                            "ports": [{"name": "echo", "protocol": "UDP", "port": 9479}]}}, f)
    crt, key = fake_apiserver.make_cert(folder, HUB_ADDRESS)
    logfile = os.path.join(folder, "apiserver.log")
    p = labkit.start(HUB, [sys.executable, fake_apiserver.__file__, "--log-requests",
                           "--cert", crt, "--key", key, "--token", "dns-discovery",
                           "--listen", HUB_ADDRESS, "--nodes", "1", "--churn", "0",
                           "--max-seconds", str(MAX_SECONDS),
                           "--node-zones", os.path.join(folder, "nodes.json"),
                           "--object", "%s=%s" % (SERVICE_PATH, service)],
                     logfile, max_seconds=MAX_SECONDS + 30)
    labkit.wait_for(lambda: p.poll() is not None or fake_apiserver.listening_port(logfile), 30,
                    "the fake API server")
    if p.poll() is not None:
        raise Broken("fake API server exited (%s):\n%s" % (p.returncode, labkit.tail(logfile)))
    kubeconfig = fake_apiserver.write_kubeconfig(
        os.path.join(folder, "kubeconfig"), fake_apiserver.listening_port(logfile), crt,
        "dns-discovery", name="lab", address=HUB_ADDRESS)
    return p, kubeconfig, logfile


def api_requests(logfile):
    with open(logfile) as f:
        return [line.split(" ", 1)[1].strip() for line in f if line.startswith("GET ")]


# ---- the network ------------------------------------------------------------------------------

def netns(ns):
    labkit.run("ip", "netns", "add", ns)
    namespaces.append(ns)
    labkit.run("ip", "-n", ns, "link", "set", "lo", "up")


def attach(ns, tag, address):
    """Namespace `ns` on the hub's bridge as `address`/24; only the silent /21 is routed (to the
    hub): nothing else is reachable from it."""
    netns(ns)
    labkit.run("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", tag,
               "netns", HUB)
    labkit.run("ip", "-n", HUB, "link", "set", tag, "master", "br0", "up")
    labkit.run("ip", "-n", ns, "addr", "add", address + "/24", "dev", "eth0")
    labkit.run("ip", "-n", ns, "link", "set", "eth0", "up")
    labkit.run("ip", "-n", ns, "route", "add", SILENT_NET, "via", HUB_ADDRESS)


def network():
    netns(HUB)
    labkit.run("ip", "-n", HUB, "link", "add", "br0", "type", "bridge", "stp_state", "0",
               "forward_delay", "0")
    labkit.run("ip", "-n", HUB, "addr", "add", HUB_ADDRESS + "/24", "dev", "br0")
    labkit.run("ip", "-n", HUB, "link", "set", "br0", "up")
    # The silent addresses end here: counted and dropped before routing, and blackholed anyway.
    labkit.in_ns(HUB, "sysctl", "-q", "-w", "net.ipv4.ip_forward=0")
    labkit.run("ip", "-n", HUB, "route", "add", "blackhole", SILENT_NET)
    labkit.in_ns(HUB, "iptables", "-w", "5", "-t", "raw", "-A", "PREROUTING", "-d", SILENT_NET,
                 "-j", "DROP")
    attach(DNS_NS, "hdns", DNS_ADDRESS)
    attach(LIAR_NS, "hliar", LIAR_ADDRESS)
    for n in NODES:
        attach(n.ns, "h%d" % n.i, n.address)


def silent_drops():
    """Packets to the silent /21 dropped in the hub so far."""
    out = labkit.in_ns(HUB, "iptables", "-w", "5", "-t", "raw", "-nvxL", "PREROUTING").stdout
    return sum(int(line.split()[0]) for line in out.splitlines()
               if line.split() and line.split()[0].isdigit() and SILENT_NET in line)


# ---- unbound ----------------------------------------------------------------------------------

def zones_text(addresses):
    """unbound's local data: NAME's A records (`addresses`; None: the name does not exist) and
    the name probes.dns looks up; every other name NXDOMAIN."""
    lines = ["server:", '  local-zone: "." static',
             '  local-data: "%s. 5 IN A 10.96.0.1"' % PROBED_NAME]
    for a in addresses or []:
        lines.append('  local-data: "%s. 5 IN A %s"' % (NAME, a))
    return "\n".join(lines) + "\n"


DNS_QUERY = r"""
import socket, struct, sys
q = struct.pack('!HHHHHH', 4660, 256, 1, 0, 0, 0) + b''.join(
    bytes([len(p)]) + p.encode() for p in sys.argv[1].split('.')) + b'\0' + struct.pack('!HH', 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
s.sendto(q, (sys.argv[2], 53))
r = s.recv(4096)
print(r[3] & 15, (r[2] >> 1) & 1, struct.unpack('!H', r[6:8])[0])
"""


def dns_answer(name):
    """(rcode, TC, answer count) of a plain UDP question (no EDNS: 512 bytes) for `name` to the
    lab's unbound, asked from the hub; None when it does not answer."""
    r = labkit.in_ns(HUB, sys.executable, "-c", DNS_QUERY, name, DNS_ADDRESS, check_rc=False,
                     timeout=10)
    parts = r.stdout.split()
    return tuple(int(x) for x in parts) if r.returncode == 0 and len(parts) == 3 else None


class Unbound:
    def __init__(self, folder):
        self.folder = os.path.join(folder, "unbound")
        os.makedirs(self.folder)
        self.proc = None
        self.generation = 0

    def serve(self, addresses):
        """(Re)starts unbound with `addresses` as NAME's records (None: NXDOMAIN); returns once
        it answers NAME as configured."""
        if self.proc is not None:
            labkit.stop(self.proc)
        self.generation += 1
        zones = os.path.join(self.folder, "zones-%d.conf" % self.generation)
        with open(zones, "w") as f:
            f.write(zones_text(addresses))
        conf = os.path.join(self.folder, "unbound-%d.conf" % self.generation)
        text = labkit.UNBOUND_CONF.format(dir=self.folder, zones=zones)
        text = text.replace("interface: 127.0.0.1", "interface: " + DNS_ADDRESS)
        text = text.replace("access-control: 127.0.0.0/8 allow",
                            "access-control: 127.0.0.0/8 allow\n"
                            "  access-control: 10.88.0.0/24 allow")
        with open(conf, "w") as f:
            f.write(text)
        self.proc = labkit.start(DNS_NS, ["unbound", "-d", "-c", conf],
                                 os.path.join(self.folder, "..", "unbound-%d.log"
                                              % self.generation),
                                 max_seconds=MAX_SECONDS)
        want_rcode = 3 if addresses is None else 0

        def serving():
            if self.proc.poll() is not None:
                raise Broken("unbound exited (%s)" % self.proc.returncode)
            a = dns_answer(NAME)
            return a is not None and a[0] == want_rcode
        labkit.wait_for(serving, 20, "unbound serving %s (%s)"
                        % (NAME, "NXDOMAIN" if addresses is None
                           else "%d records" % len(addresses)), step=0.2)
        return dns_answer(NAME)


# ---- the liar ---------------------------------------------------------------------------------

LIAR = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9479))
node, zone, pod = b"node-0", b"zone-a", b"liar"
record = (b"PNI=" + bytes([len(node)]) + node + bytes([len(zone)]) + zone +
          b"PNIp" + bytes([len(pod)]) + pod)
print("listening", flush=True)
while True:
    data, peer = s.recvfrom(65535)
    d = bytearray(data)
    # a request of wire/echo.h: magic "PNET", version 1, kind 1 (request)
    if len(d) < 16 or d[:4] != b"PNET" or d[4] != 1 or d[5] != 1:
        continue
    d[5] = 2  # reply
    asked = d[16:20] in (b"PNI?", b"PNID")  # a probe's ask, or discovery's
    if asked and len(d) >= 16 + len(record):
        d[16:16 + len(record)] = record
    s.sendto(bytes(d), peer)  # the same size as the request
    if asked:
        print("identity asked by %s:%d, claimed node-0" % peer, flush=True)
"""


def start_liar(folder):
    path = os.path.join(folder, "liar.py")
    with open(path, "w") as f:
        f.write(LIAR)
    logfile = os.path.join(folder, "liar.log")
    p = labkit.start(LIAR_NS, [sys.executable, path, LIAR_ADDRESS], logfile,
                     max_seconds=MAX_SECONDS)
    labkit.wait_for(lambda: "listening" in labkit.tail(logfile), 10, "the liar listening")
    return logfile


# ---- the exporters ----------------------------------------------------------------------------

def exporter_config(n, resolv):
    return ("listen_address: \"0.0.0.0:9479\"\n"
            "self: { name: %s, node: %s, zone: \"\" }\n"
            "responders:\n  udp_echo: { listen_address: \"0.0.0.0:9479\" }\n"
            "peers:\n  kubernetes: { namespace: podnet, service: podnet, discovery: dns,"
            " dns_refresh: 2s }\n"
            "probes:\n"
            "  rtt: { protocol: udp, interval: 2s, count: 5, spacing: 50ms, timeout: 500ms }\n"
            # Its own lookups only to the lab's unbound (resolv.conf), no cluster DNS watch.
            "  dns:\n    interval: 30s\n    resolv_conf: %s\n    resolvers: [glibc]\n"
            "    names: [%s]\n    cluster_dns: false\n    sample: false\n"
            % (n.pod, n.name, resolv, PROBED_NAME))


def start_exporters(exe, folder, kubeconfig):
    resolv = os.path.join(folder, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver %s\noptions timeout:1 attempts:1\n" % DNS_ADDRESS)
    for n in NODES:  # all at once, as a DaemonSet's Pods start
        cfg = os.path.join(folder, "%s.yaml" % n.pod)
        with open(cfg, "w") as f:
            f.write(exporter_config(n, resolv))
        n.proc = labkit.start(n.ns, [exe, "--config.file=" + cfg, "--kubeconfig=" + kubeconfig,
                                     "--log.level=debug"],
                              os.path.join(folder, "%s.log" % n.pod), max_seconds=MAX_SECONDS)


def url(path):
    return "http://127.0.0.1:9479" + path


def ready(n):
    if n.proc.poll() is not None:
        raise Broken("%s's exporter exited (%s)" % (n.name, n.proc.returncode))
    return labkit.http(n.ns, url("/-/ready"), timeout=3)[0] == 200


def reload_refresh(n, tmp, refresh):
    """Node n's configuration with dns_refresh `refresh` (or, for "watch", discovery: watch;
    for "watch, zoned", that and self.zone set to n's zone: another watch; for "auto N",
    discovery: auto with auto_dns_from N), reloaded by SIGHUP; returns once applied."""
    text = exporter_config(n, os.path.join(tmp, "resolv.conf"))
    if refresh.startswith("auto"):
        text = text.replace("discovery: dns,", "discovery: auto, auto_dns_from: %s,"
                            % refresh.split()[1])
    elif refresh.startswith("watch"):
        text = text.replace("discovery: dns, dns_refresh: 2s", "discovery: watch")
        if refresh == "watch, zoned":
            text = text.replace('zone: ""', 'zone: "%s"' % n.zone)
    else:
        text = text.replace("dns_refresh: 2s", "dns_refresh: %s" % refresh)
    labkit.write_atomic(os.path.join(tmp, "%s.yaml" % n.pod), text)
    name = "podnet_config_last_reload_success_timestamp_seconds"
    stamp = value(metrics(n), name)
    # To the exporter itself: `timeout` (max_seconds) would pass a SIGHUP on and then kill.
    os.kill(labkit.leaf_pid(n.proc.pid), signal.SIGHUP)
    labkit.wait_for(lambda: value(metrics(n), name) != stamp, 10, "%s's reload" % n.name,
                    step=0.1)


def info_zone(n):
    """The zone /podnet/info gives ("" when it does not answer)."""
    code, body = labkit.http(n.ns, url("/podnet/info"), timeout=3)
    return json.loads(body).get("zone", "") if code == 200 else ""


def metrics(n):
    """{(name, frozenset(labels)): value} of one scrape of node n's exporter."""
    body = labkit.scrape(9479, ns=n.ns, timeout=5)
    return {(name, frozenset(labels.items())): v for name, labels, v in labkit.parse_metrics(body)}


def value(m, name, **labels):
    """The sum of series `name` whose labels include `labels` (0 when there is none)."""
    want = set(labels.items())
    return sum(v for (k, ls), v in m.items() if k == name and want <= ls)


def by_label(m, name, label):
    return {dict(ls).get(label): v for (k, ls), v in m.items() if k == name}


def scrape_all():
    return {n.name: metrics(n) for n in NODES}


def queries(m, result):
    return value(m, "podnet_discovery_dns_queries_total", result=result)


def asks(m, result):
    return value(m, "podnet_discovery_identity_asks_total", result=result)


def candidates(m, source=None):
    if source:
        return value(m, "podnet_discovery_candidates", source=source)
    return value(m, "podnet_discovery_candidates")


def rss_mib(n):
    pid = labkit.leaf_pid(n.proc.pid)
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise Broken("no VmRSS for pid %d" % pid)


def peer_view(m):
    """{peer: (peer_node, peer_zone, path_class)} of the per-peer series: who is probed as what."""
    out = {}
    for (_, ls), _v in m.items():
        d = dict(ls)
        if "peer" in d and "path_class" in d:
            out[d["peer"]] = (d.get("peer_node"), d.get("peer_zone"), d["path_class"])
    return out


def summary(ms, *fields):
    """A compact per-node view for check messages: node -> [field values]."""
    return {name: [f(m) for f in fields] for name, m in ms.items()}


# ---- the scenario -----------------------------------------------------------------------------

def scenario(args, tmp):
    t0 = time.monotonic()
    network()
    unbound = Unbound(tmp)
    # Kubernetes DNS lists the ready Pods only: none before the exporters are ready.
    unbound.serve(None)
    liar_log = start_liar(tmp)
    _, kubeconfig, api_log = start_apiserver(tmp)
    start_exporters(args.exporter, tmp, kubeconfig)
    log("lab up in %.1f s" % (time.monotonic() - t0))

    # 1. Discovery from DNS: ready on the first answer (NXDOMAIN), then, with the ready Pods in
    # the records, 6 candidates and path classes from the identities.
    for n in NODES:
        labkit.wait_for(lambda n=n: ready(n), 30, "%s's exporter ready" % n.name, step=0.2)
    ms = scrape_all()
    check(all(queries(m, "nxdomain") >= 1 and candidates(m) == 0 for m in ms.values()),
          "every exporter ready (/-/ready 200) on an NXDOMAIN answer after %.1f s (nxdomain, "
          "candidates: %s)" % (time.monotonic() - t0, summary(
              ms, lambda m: queries(m, "nxdomain"), candidates)))
    unbound.serve([n.address for n in NODES])

    def classes(m):
        return {k: v for k, v in by_label(m, "podnet_peers", "path_class").items() if v}

    def settled():
        return all(candidates(m) == 6 and asks(m, "answered") >= 5
                   and classes(m) == {"same_zone": 1, "cross_zone": 4}
                   for m in scrape_all().values())
    try:
        labkit.wait_for(settled, 15, "6 candidates and their path classes on every exporter",
                        step=0.5)
    except Broken as e:
        log(str(e))  # the checks below say what is missing
    ms = scrape_all()
    for n in NODES:
        m = ms[n.name]
        peers = classes(m)
        check(candidates(m) == 6, "%s: podnet_discovery_candidates == 6 (got %s)"
              % (n.name, candidates(m)))
        check(peers == {"same_zone": 1, "cross_zone": 4},
              "%s (%s): podnet_peers by path_class as the zones give it: 1 same_zone, 4 "
              "cross_zone, no unknown (got %s; peers %s)" % (n.name, n.zone, peers, peer_view(m)))
        check(asks(m, "answered") >= 5, "%s: identity asks answered >= 5 (%s)"
              % (n.name, by_label(m, "podnet_discovery_identity_asks_total", "result")))
    gets = api_requests(api_log)
    slices = [g for g in gets if "endpointslices" in g]
    check(not slices, "the API server got no EndpointSlice list or watch (%d requests: %s)"
          % (len(slices), slices[:3]))
    node_gets = {n.name: sum(1 for g in gets if g.split("?")[0] == "/api/v1/nodes/" + n.name)
                 for n in NODES}
    check(all(v >= 1 for v in node_gets.values()), "each exporter GET its Node: %s" % node_gets)
    service_gets = sum(1 for g in gets if g.split("?")[0] == SERVICE_PATH)
    check(service_gets >= len(NODES), "the Service GET (%s) %d times (>= %d)"
          % (SERVICE_PATH, service_gets, len(NODES)))
    others = sorted({g.split("?")[0] for g in gets} - {SERVICE_PATH}
                    - {"/api/v1/nodes/" + n.name for n in NODES})
    log("API requests: %d in all; other paths: %s" % (len(gets), others or "none"))

    # 2. A big answer: 2,000 more records at silent addresses.
    before = scrape_all()
    drops0 = silent_drops()
    answer = unbound.serve([n.address for n in NODES] + SILENT)
    log("unbound restarted with %d records; a plain UDP question gets rcode/TC/count %s"
        % (len(NODES) + len(SILENT), answer))
    seen_candidates = set()
    rss = {n.name: 0.0 for n in NODES}

    def big_seen():
        ms = scrape_all()
        for n in NODES:
            seen_candidates.add(candidates(ms[n.name]))
            rss[n.name] = max(rss[n.name], rss_mib(n))
        return all(queries(ms[n.name], "truncated") > queries(before[n.name], "truncated")
                   and queries(ms[n.name], "ok") > queries(before[n.name], "ok") + 1
                   and asks(ms[n.name], "timeout") >= 500 for n in NODES)
    try:
        labkit.wait_for(big_seen, 40, "truncated answers and 500 timed-out asks everywhere",
                        step=1)
    except Broken as e:
        log(str(e))
    after = scrape_all()
    for n in NODES:
        seen_candidates.add(candidates(after[n.name]))
        rss[n.name] = max(rss[n.name], rss_mib(n))
    check(all(queries(after[n.name], "truncated") > queries(before[n.name], "truncated")
              for n in NODES),
          "big answer: truncated UDP answers counted on every exporter %s"
          % summary(after, lambda m: queries(m, "truncated")))
    check(all(queries(after[n.name], "ok") > queries(before[n.name], "ok") + 1 for n in NODES),
          "big answer: asked again over TCP, answers ok counted on (before -> after %s)"
          % {n.name: (queries(before[n.name], "ok"), queries(after[n.name], "ok"))
             for n in NODES})
    check(all(queries(m, "too_many_records") == 0 for m in after.values()),
          "big answer: 2,006 records are not too many")
    check(all(asks(m, "timeout") >= 500 for m in after.values()),
          "big answer: asks to the silent addresses time out (timeouts %s)"
          % summary(after, lambda m: asks(m, "timeout")))
    drops = silent_drops() - drops0
    check(drops >= 500 * len(NODES), "big answer: the asks ended in the hub's drop (%d packets)"
          % drops)
    check(seen_candidates == {6.0}, "big answer: candidates stayed 6 (seen %s)"
          % sorted(seen_candidates))
    check(all(n.proc.poll() is None for n in NODES) and all(ready(n) for n in NODES),
          "big answer: every exporter running and ready, /metrics answering")
    check(max(rss.values()) < RSS_LIMIT_MIB, "big answer: RSS under %d MiB (max MiB %s)"
          % (RSS_LIMIT_MIB, {k: round(v, 1) for k, v in rss.items()}))

    log("DNS queries after the big answer: %s" % summary(
        after, lambda m: by_label(m, "podnet_discovery_dns_queries_total", "result")))

    # 3. A liar claims node-0; then it leaves the records.
    unbound.serve([n.address for n in NODES] + [LIAR_ADDRESS])

    def lied():  # the gauge of candidates follows at most 1 s later (publish interval)
        ms = scrape_all()
        return all(value(m, "podnet_discovery_identity_node_conflicts") == 1
                   and candidates(m) == 7 for m in ms.values())
    try:
        labkit.wait_for(lied, 20, "a node conflict on every exporter", step=0.5)
    except Broken as e:
        log(str(e))
    ms = scrape_all()
    check(all(value(m, "podnet_discovery_identity_node_conflicts") == 1 for m in ms.values()),
          "liar: podnet_discovery_identity_node_conflicts == 1 on every exporter %s"
          % summary(ms, lambda m: value(m, "podnet_discovery_identity_node_conflicts")))
    check(all(candidates(m) == 7 for m in ms.values()),
          "liar: the silent addresses left at once, the liar is a candidate: 7 %s"
          % summary(ms, candidates))
    told = labkit.tail(liar_log, 1000).count("claimed node-0")
    check(told >= len(NODES), "liar: asked by every exporter (%d identity asks answered)" % told)
    check(all(n.proc.poll() is None for n in NODES), "liar: every exporter running")
    unbound.serve([n.address for n in NODES])

    def liar_gone():
        ms = scrape_all()
        return all(candidates(m) == 6
                   and value(m, "podnet_discovery_identity_node_conflicts") == 0
                   for m in ms.values())
    try:
        labkit.wait_for(liar_gone, 15, "the liar gone from every exporter", step=0.5)
    except Broken as e:
        log(str(e))
    ms = scrape_all()
    log("DNS queries after the liar left: %s" % summary(
        ms, lambda m: by_label(m, "podnet_discovery_dns_queries_total", "result")))
    check(all(candidates(m) == 6 and value(m, "podnet_discovery_identity_node_conflicts") == 0
              for m in ms.values()),
          "liar out of the records: it leaves at once (candidates, conflicts %s)"
          % summary(ms, candidates,
                    lambda m: value(m, "podnet_discovery_identity_node_conflicts")))

    # 3b. Reloads that restart discovery for the same Service (dns_refresh 2s -> 1s, then the
    # watch, another watch (self.zone set), dns_refresh 2s, each before the last restart has
    # synced) while this node's
    # DNS and API server are cut: the last peers, readiness, this Pod's zone (read from its
    # Node) and the candidates gauge are kept until the new discovery has synced (every
    # exporter reloads one ConfigMap at once; dropping them would stop all probing and make
    # every Pod unready together).
    n0 = NODES[0]
    cuts = [["OUTPUT", "-d", DNS_ADDRESS, "-p", "udp", "--dport", "53", "-j", "DROP"],
            ["OUTPUT", "-d", HUB_ADDRESS, "-p", "tcp", "-j", "DROP"]]
    for cut in cuts:
        labkit.in_ns(n0.ns, "iptables", "-w", "5", "-A", *cut)
    try:
        for refresh, samples in (("1s", 10), ("watch", 5), ("watch, zoned", 5), ("2s", 5)):
            reload_refresh(n0, tmp, refresh)
            seen = []
            for _ in range(samples):  # ~0.4 s apart, the new discovery cannot sync
                time.sleep(0.4)
                m = metrics(n0)
                seen.append((ready(n0), tuple(sorted(classes(m).items())), info_zone(n0),
                             candidates(m)))
            check(all(r and dict(c) == {"same_zone": 1, "cross_zone": 4} and z == n0.zone
                      and k == 6 for r, c, z, k in seen),
                  "reload to %s while the DNS and API server are cut: %s stays ready with its "
                  "5 peers, its zone and 6 candidates until the new discovery has synced "
                  "(ready, podnet_peers by path_class, /podnet/info zone, candidates: %s)"
                  % ("the " + refresh if refresh.startswith("watch") else "dns_refresh " + refresh,
                     n0.name,
                     sorted(set(seen))))
        # The DNS back, the API server still cut: the new discovery syncs without reading its
        # Node; the zone it had is carried over, so the path classes stay.
        labkit.in_ns(n0.ns, "iptables", "-w", "5", "-D", *cuts[0])
        try:
            labkit.wait_for(lambda: queries(metrics(n0), "ok") > 0
                            and candidates(metrics(n0)) == 6, 20,
                            "%s's new discovery answered" % n0.name, step=0.5)
        except Broken as e:
            log(str(e))
        time.sleep(1.5)  # its snapshot published (at most one a second)
        m = metrics(n0)
        check(candidates(m) == 6 and classes(m) == {"same_zone": 1, "cross_zone": 4}
              and ready(n0) and info_zone(n0) == n0.zone,
              "DNS back, API server still cut: %s's new discovery has the 6 candidates and the "
              "same peers in the same zone (%s, %s, %s)"
              % (n0.name, candidates(m), classes(m), info_zone(n0)))
    finally:
        for cut in cuts:
            labkit.in_ns(n0.ns, "iptables", "-w", "5", "-D", *cut, check_rc=False)

    # 4. NXDOMAIN mid-run: the last addresses kept for the grace. Node-0 also reloads (a
    # discovery restart) during it: its new discovery's first answer is the NXDOMAIN, and the
    # peers it was started from are kept for the grace all the same.
    before = scrape_all()
    unbound.serve(None)

    def counted(ms):
        return all(queries(ms[k], "nxdomain") > queries(before[k], "nxdomain") for k in ms)
    try:
        labkit.wait_for(lambda: counted(scrape_all()), 15, "NXDOMAIN counted on every exporter",
                        step=0.5)
    except Broken as e:
        log(str(e))
    reload_refresh(n0, tmp, "1s")
    first = scrape_all()
    check(counted(first), "NXDOMAIN: counted on every exporter (before -> now %s)"
          % {k: (queries(before[k], "nxdomain"), queries(first[k], "nxdomain")) for k in first})
    check(all(candidates(m) == 6 for m in first.values()),
          "NXDOMAIN: candidates kept at 6 %s" % summary(first, candidates))
    time.sleep(10)
    later = scrape_all()
    check(all(queries(later[k], "nxdomain") >= queries(first[k], "nxdomain") + 3
              for k in later),
          "NXDOMAIN: asked on every ~2 s (%s)"
          % {k: (queries(first[k], "nxdomain"), queries(later[k], "nxdomain")) for k in later})
    check(all(candidates(m) == 6 for m in later.values()),
          "NXDOMAIN: candidates still 6 after 10 s (grace 90 s) %s" % summary(later, candidates))
    peers = {k: classes(m) for k, m in later.items()}
    check(all(p.get("cross_zone", 0) == 4 and p.get("same_zone", 0) == 1 for p in peers.values()),
          "NXDOMAIN: the peers are still probed: %s" % peers)
    check(all(n.proc.poll() is None for n in NODES) and all(ready(n) for n in NODES),
          "NXDOMAIN: every exporter running and ready")

    # 5. discovery: auto (discovery/kubernetes/auto_source.h), the six back in the records.
    # Node-1 with auto_dns_from 4: it starts from the records, counts 6 and keeps them (no
    # EndpointSlice request); node-2 with 10: 6 is too few, it takes the watch, keeping its
    # peers and readiness through the switch.
    unbound.serve([m.address for m in NODES])
    n1, n2 = NODES[1], NODES[2]
    labkit.wait_for(lambda: candidates(metrics(n1)) == 6 and queries(metrics(n1), "ok") > 0, 15,
                    "the records back at node-1", step=0.5)
    slices_before = len([g for g in api_requests(api_log) if "endpointslices" in g])
    reload_refresh(n1, tmp, "auto 4")
    reload_refresh(n2, tmp, "auto 10")
    try:
        labkit.wait_for(lambda: candidates(metrics(n2), "watch") > 0, 20,
                        "node-2 on the watch", step=0.5)
    except Broken as e:
        log(str(e))
    m1, m2 = metrics(n1), metrics(n2)
    slices = [g for g in api_requests(api_log) if "endpointslices" in g][slices_before:]
    check(candidates(m1, "dns") == 6 and candidates(m1, "watch") == 0
          and classes(m1).get("cross_zone", 0) == 4,
          "auto, 6 Pods from 4: node-1 keeps the DNS records (candidates by source %s, peers %s)"
          % (by_label(m1, "podnet_discovery_candidates", "source"), classes(m1)))
    check(candidates(m2, "watch") > 0 and candidates(m2, "dns") == 0 and len(slices) >= 1
          and ready(n2),
          "auto, 6 Pods from 10: node-2 takes the watch, ready through it (candidates by "
          "source %s; EndpointSlice requests since: %s)"
          % (by_label(m2, "podnet_discovery_candidates", "source"), slices))
    log("scenario time %.1f s" % (time.monotonic() - t0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--keep-logs", metavar="DIR", help="copy the logs and configs there at the end")
    args = ap.parse_args()
    if not labkit.have_root():
        return labkit.skip(labkit.ROOT_NEEDED)
    for tool in ("unbound", "iptables", "openssl", "curl"):
        if not shutil.which(tool):
            return labkit.skip("%s is not installed" % tool)
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="podnet-lab-dns-discovery-")
    try:
        try:
            scenario(args, tmp)
        except Exception as e:  # report, then clean up
            traceback.print_exc()
            check(False, "exception: %s" % e)
        labkit.stop_all()
        for ns in reversed(namespaces):
            subprocess.run(["ip", "netns", "del", ns], timeout=30, capture_output=True)
        if labkit.failures:
            labkit.dump_logs(tmp)
        if args.keep_logs:
            shutil.copytree(tmp, args.keep_logs, dirs_exist_ok=True)
    finally:
        labkit.stop_all()
        for ns in reversed(namespaces):  # again, should the first pass have been cut short
            subprocess.run(["ip", "netns", "del", ns], timeout=30, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    log("test time %.0f s" % (time.monotonic() - t0))
    return labkit.exit_code()


if __name__ == "__main__":
    sys.exit(main())
