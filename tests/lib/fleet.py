"""A simulated fleet for the proving ground (bench/proving_ground.py) and its short ctest version
(tests/lab/lab_fleet_test.py): N nodes in Z zones, each a network namespace running one
real podnet-exporter that finds its peers through `peers.kubernetes` against the stand-in API
server, with real unbound DNS replicas behind a kube-dns VIP, a Service VIP, a real Prometheus
loading the shipped rules (scaled) and a real Alertmanager loading the shipped configuration.

Topology (every address private to the namespaces made here; nothing leaves them):

    node-i (ns PREFIX-nI, 10.77.Z.(10+i)/24, default via 10.77.Z.1)
      eth0 ── br0 of zone Z's router (ns PREFIX-zZ, 10.77.Z.1); a delay line takes the place
      of that wire only while a fault adds latency to the node (Fleet.detour)
    zone routers, one routed link per zone pair (10.78.(16x+y).0/30), each with its own
      [delay line: pair_delay_us]: a pair's latency, loss or cut touches that pair only
    control (ns PREFIX-ctl, 10.79.255.1): the API server, Prometheus, Alertmanager, the
      receiver; one link per zone router, no delay (a management network a zone cut spares)
    DNS replica k (ns PREFIX-dnsK, 10.77.K.250) on zone K's bridge as a node is: unbound
      serving tests/lab/unbound-zones.conf (nothing forwarded); the kube-dns VIP 10.96.0.10 is
      a DNAT in every node, one replica at random per flow, as kube-proxy's iptables mode; with
      discovery "dns" it also serves the probe Pods' headless Service (below)
    Service VIP 10.96.0.20:9479/udp: DNAT in every node to the UDP echo of the backend nodes of
      its own zone (topology hints honoured, as kube-proxy does with trafficDistribution
      PreferClose); the fault `service_leaves_zone` sends a zone's nodes to every backend.

A same-zone path is two veths and a bridge (tens of µs of RTT); a cross-zone path adds two
routers and its pair's delay line (pair_delay_us one way). Per-node delay lines on every wire
were tried first: 29 of them took about a core of the two at 24 nodes (a wake-up per frame),
and scrapes timed out. Node i is in zone i % Z.

Discovery (`discovery`): "watch" (the default), every exporter lists and watches the podnet
Service's EndpointSlices from the stand-in API server, as the DaemonSet ships; "dns"
(peers.kubernetes.discovery: dns, docs/design.md "Discovery at scale"), every exporter asks
PODNET_DNS_NAME's A records through the kube-dns VIP (its probes.dns resolv.conf's first
nameserver) every dns_refresh (the 30 s default / probe_scale) and each address's UDP echo
responder who it is, and GETs only its Node and the Service. The unbound replicas then answer
that name with the ready probe Pods' addresses (TTL DNS_TTL_S), changed live through unbound's
remote control (a unix socket, no restart: the DNS probe is not disturbed) as CoreDNS's
kubernetes plugin and cache would change them (_DnsPublisher: the lag modelled).

Faults (inject(kind, target, **params) -> a Fault whose clear() undoes it) are in
tests/lib/faults.py. Every wait is bounded; close() stops everything and deletes the namespaces.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import alerting
import fake_apiserver
import labkit
from labkit import Broken, log

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEPLOY_CONFIG = os.path.join(ROOT, "deploy", "kubernetes", "base", "podnet.yaml")
KUBE_DNS_VIP = "10.96.0.10"
SERVICE_VIP = "10.96.0.20"
API_ADDRESS = "10.79.255.1"
CLUSTER = "fleet"
SERVICE = "echo"  # the Service the Service probe asks (namespace podnet)
# How long after a Pod's SIGTERM its peers' watches say it is terminating (Fleet.restart_exporter).
PROPAGATION_S = 0.5
# The exporters' drain: the DaemonSet's --shutdown.drain-period=10s is not scaled down with the
# probes (10 s / 5 = 2 s): 5 s is 5x what the peers take here to drop a Pod (PROPAGATION_S, then
# at most 1 s of discovery's publish interval, which is not scaled either).
# PODNET_LAB_DRAIN_S overrides it (0: no drain, the rollout check of lab_fleet then fails).
# With discovery "dns" the peers drop a Pod later (drop_bound_s: up to ~13 s at probe_scale 5),
# and the exporter drains longer by itself: 1.1 x dns_refresh + 7 s (13.6 s here).
DRAIN_S = int(os.environ.get("PODNET_LAB_DRAIN_S", "5"))
# How the peers find each other: Fleet(discovery=...), see the module's docstring.
DISCOVERY = ("watch", "dns")
# Discovery "dns": the name asked (peers.kubernetes.dns_name's default for Service podnet/podnet),
# the TTL of its records (CoreDNS's kubernetes plugin's default `ttl`), and dns_refresh's
# default (docs/configuration.md), scaled as the probes are.
PODNET_DNS_NAME = "podnet.podnet.svc.cluster.local"
DNS_TTL_S = 5
DNS_REFRESH_DEFAULT_S = 30
# The podnet Service object the exporters GET with discovery "dns" (its UID: the bursts' key).
PODNET_SERVICE_PATH = "/api/v1/namespaces/podnet/services/podnet"
PODNET_SERVICE_UID = "5e1f0c7a-0000-4000-8000-0000f1ee7d15"
# Prometheus' scrape (and rule evaluation) interval, s: see Fleet._prometheus.
SCRAPE_S = 2
# The stage-1 records a global Prometheus federates (docs/deploy.md, "Federation"; generate.py
# refuses a stage-1 record outside it).
STAGE1_RECORDS = ".+:podnet_.+"
# The comments of the counters of TCP resets from the responders' ports (Fleet.responder_resets).
RESETS = {"refused": "podnet-refused", "other": "podnet-reset"}
REFUSED_PORTS = ((9479, "http"), (9480, "grpc"))
# A reset that refuses a connection answers a SYN, a segment without ACK: RFC 9293 (3.10.7.1)
# gives it sequence number 0 and the ACK flag. The kernel's other resets (a socket closed with
# data unread, a segment for a connection that is gone) carry a sequence number of the
# connection. u32: the TCP header's offset from the IP header's length, then its word 4..7.
REFUSAL_MATCH = "--tcp-flags RST,ACK RST,ACK -m u32 --u32 0>>22&0x3C@4=0"
# Alert settings this host cannot judge at their shipped values. HTTP p99: the exporters (nice
# 10, beside the delay lines and Prometheus on 2 saturated cores) time requests in user space,
# and a quiet fleet's zone-pair p99 swung 1.5-235 ms (medians 34-128 ms; 18 pairs over 300 s,
# 2026-12-06) against the shipped floor of +1 ms: PodnetHTTPLatencyRegression fired into zones
# no fault touched. A floor over the probes' 200 ms timeout: the proving ground does not judge
# HTTP latency (bench/README.md, "Proving ground").
HOST_SETTINGS = [alerting.setting("http_regression_min_increase_seconds", "0.001", "0.25")]
DNS_NAMES = ["kubernetes.default", "sts.ap-northeast-2.amazonaws.com"]
RESOLV = ("search podnet.svc.cluster.local svc.cluster.local cluster.local\n"
          "nameserver %s\noptions ndots:5 timeout:1 attempts:2\n" % KUBE_DNS_VIP)
# The DNS amplification fault: two more search domains (a node image's cloud domains).
RESOLV_LONG = ("search podnet.svc.cluster.local svc.cluster.local cluster.local "
               "ap-northeast-2.compute.internal ec2.internal\n"
               "nameserver %s\noptions ndots:5 timeout:1 attempts:2\n" % KUBE_DNS_VIP)


def zone_name(z):
    return "zone-%s" % chr(ord("a") + z)


def _scaled_durations(node, factor):
    """The probes section with every duration divided by `factor` (at least 1 ms)."""
    if isinstance(node, dict):
        return {k: _scaled_durations(v, factor) for k, v in node.items()}
    if isinstance(node, list):
        return [_scaled_durations(v, factor) for v in node]
    if isinstance(node, str):
        try:
            return alerting.duration(max(0.001, alerting.seconds(node) / factor))
        except ValueError:
            return node
    return node


class Node:
    """One simulated node: its namespace, address, zone, delay line and exporter."""

    def __init__(self, i, zones):
        self.i = i
        self.name = "node-%d" % i
        self.z = i % zones
        self.zone = zone_name(self.z)
        self.address = "10.77.%d.%d" % (self.z, 10 + i)
        self.generation = 0
        self.exporter = None
        self.in_fleet = True
        self.ready = False

    @property
    def pod(self):
        return "podnet-%s-g%d" % (self.name, self.generation)


class Fleet:
    """The fleet; use as a context manager. `probe_scale`: the deploy default's probe durations
    are divided by it (10 s rounds -> 1 s); `rule_scale` and `offsets`: see
    alerting.uniform_scale; `am_scale`: the shipped Alertmanager timings are divided by it.
    `mtu`: probes.mtu on, as deploy/kubernetes/base/podnet.yaml's commented line has it, its
    rounds divided by `rule_scale` (10 min -> 30 s), not `probe_scale`: PodnetPathMTUBlackHole's
    `for:` (25 min, the verdict of three rounds) is divided by it, and the two keep their ratio.
    `shards`: 0 or 1, one Prometheus loading both rule files; N >= 2, the rules in two stages
    (docs/deploy.md, "A sharded Prometheus"): N Prometheus shards, each scraping the exporters
    whose hashmod(__address__, N) is its number (labelled podnet_shard, as the
    prometheus-sharded overlay labels them) and evaluating stage 1, and a global Prometheus that
    federates every shard's records (`{__name__=~".+:podnet_.+"}`, honor_labels, the shards'
    timestamps dropped so that a record that stops goes stale: docs/deploy.md, "Federation")
    and evaluates stage 2; with `transport` "remote_write", each shard instead sends those
    records to the global Prometheus' remote-write receiver (docs/deploy.md, "Remote write");
    all of them send alerts to the one Alertmanager. `discovery`: "watch" or "dns", how the
    exporters find their peers (the module's docstring)."""

    def __init__(self, prefix, tmp, exporter, delayline, nodes=24, zones=3, pair_delay_us=250, dns_replicas=2, backends_per_zone=2, probe_scale=5,
                 rule_scale=20, offsets=None, am_scale=20, max_seconds=7200,
                 prometheus="prometheus", alertmanager="prometheus-alertmanager",
                 extra_probes=None, mtu=False, shards=0, transport="federate",
                 discovery="watch"):
        if zones < 2 or zones > 8 or nodes < zones or nodes > 200:
            raise ValueError("2..8 zones, zones..200 nodes")
        if discovery not in DISCOVERY:
            raise ValueError("discovery: %s" % " or ".join(DISCOVERY))
        self.discovery = discovery
        self.prefix, self.tmp, self.exe, self.delayline = prefix, tmp, exporter, delayline
        self.zones = zones
        self.nodes = [Node(i, zones) for i in range(nodes)]
        self.pair_delay_us = pair_delay_us
        self.dns = [{"k": k, "ns": "%s-dns%d" % (prefix, k), "zone": zone_name(k),
                     "address": "10.77.%d.250" % k, "proc": None}
                    for k in range(min(dns_replicas, zones))]
        self.backends = [n for z in range(zones)
                         for n in [m for m in self.nodes if m.z == z][:backends_per_zone]]
        self.probe_scale, self.rule_scale, self.am_scale = probe_scale, rule_scale, am_scale
        self.offsets = offsets or {"1d": 100, "1w": 110}
        self.max_seconds = max_seconds
        self.prometheus_bin, self.alertmanager_bin = prometheus, alertmanager
        self.extra_probes = extra_probes or {}
        self.mtu = mtu
        self.shards = shards if shards >= 2 else 0
        if transport not in ("federate", "remote_write"):
            raise ValueError("transport: federate or remote_write")
        self.transport = transport
        self.server_flags = {}  # Prometheus server name -> its extra command-line flags
        self.delaylines = {}  # name -> (ns, process, delay file, log, base delay)
        self.detours = {}  # host name -> (zone namespace, interface tag): see detour()
        self.prom = None
        self.prom_port = self.am_port = self.hook_port = None
        self.servers = []  # [(name, config file, port, process)]: the Prometheus servers
        self.receiver = None
        self.ctl = prefix + "-ctl"
        self.namespaces = []
        self.cgroup = "/sys/fs/cgroup/cpu/podnet-%s" % prefix
        # discovery "dns": CoreDNS's part (the replicas' records of the ready probe Pods)
        self.dns_publisher = _DnsPublisher(self) if discovery == "dns" else None

    # ---- names -------------------------------------------------------------------------
    def ns(self, node):
        return "%s-n%d" % (self.prefix, node.i)

    def zns(self, z):
        return "%s-z%d" % (self.prefix, z)

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def live(self):
        return [n for n in self.nodes if n.in_fleet]

    # ---- bring-up ----------------------------------------------------------------------
    def __enter__(self):
        try:
            self._network()
            self._dns()
            self._control()
            for n in self.nodes:
                self._start_exporter(n)
            self._write_endpoints()
            self._prometheus()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _ip(self, ns, *args):
        labkit.run("ip", "-n", ns, *args)

    def _batch(self, lines):
        """Runs the ip commands in `lines` in order ("-n NS CMD" in namespace NS), one
        `ip [-n NS] -batch -` for each run of lines in the same namespace."""
        runs = []
        for line in lines:
            ns, cmd = (line[3:].split(" ", 1) if line.startswith("-n ") else (None, line))
            if runs and runs[-1][0] == ns:
                runs[-1][1].append(cmd)
            else:
                runs.append((ns, [cmd]))
        for ns, cmds in runs:
            r = subprocess.run(["ip"] + (["-n", ns] if ns else []) + ["-batch", "-"],
                               input="\n".join(cmds) + "\n", capture_output=True, text=True,
                               timeout=120)
            if r.returncode != 0:
                raise Broken("ip -batch in %s: %s" % (ns, r.stderr.strip()[-500:]))

    def _sysctl(self, ns, *kv):
        labkit.run("ip", "netns", "exec", ns, "sysctl", "-q", "-w", *kv)

    def _netns(self, ns):
        labkit.run("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        self._ip(ns, "link", "set", "lo", "up")

    def _network(self):
        t0 = time.time()
        self._netns(self.ctl)
        self._ip(self.ctl, "addr", "add", API_ADDRESS + "/32", "dev", "lo")
        for z in range(self.zones):
            zns = self.zns(z)
            self._netns(zns)
            # arp_ignore=1: a zone router answers ARP only on the interface that has the address
            # asked for. With the default (0), it answered for its end of a zone pair's link
            # from the delay line's end too; the other zone then sent straight to that end and
            # its frames were routed at once, past the delay line: one direction of one zone
            # pair (a -> c here) had no delay (RTT 0.3 ms instead of 0.6, ping agreed).
            self._sysctl(zns, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.disable_ipv6=1",
                         "net.ipv6.conf.default.disable_ipv6=1",
                         "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.default.arp_ignore=1")
            self._batch([
                "-n %s link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0"
                % zns,
                "-n %s addr add 10.77.%d.1/24 dev br0" % (zns, z),
                "-n %s link set br0 up" % zns,
                # the management link to the control namespace
                "link add ctl netns %s type veth peer name c%d netns %s" % (zns, z, self.ctl),
                "-n %s addr add 10.79.%d.2/30 dev ctl" % (zns, z),
                "-n %s link set ctl up" % zns,
                "-n %s addr add 10.79.%d.1/30 dev c%d" % (self.ctl, z, z),
                "-n %s link set c%d up" % (self.ctl, z),
                "-n %s route add 10.77.%d.0/24 via 10.79.%d.2" % (self.ctl, z, z),
                "-n %s route add %s/32 via 10.79.%d.1" % (zns, API_ADDRESS, z),
            ])
        for x in range(self.zones):
            for y in range(x + 1, self.zones):
                self._pair_link(x, y)
        for n in self.nodes:
            self._attach(self.ns(n), n.z, n.address, "n%d" % n.i, "node-%d" % n.i)
            self._sysctl(self.ns(n), "net.ipv4.ping_group_range=0 2147483647")
        for d in self.dns:
            self._attach(d["ns"], d["k"], d["address"], "d%d" % d["k"], "dns-%d" % d["k"])
        for n in self.nodes:
            self._node_nat(n, self._zone_backends(n.z))
        log("fleet: %d nodes in %d zones, %d DNS replicas, %d delay lines up in %.1f s"
            % (len(self.nodes), self.zones, len(self.dns), len(self.delaylines),
               time.time() - t0))

    def _pair_link(self, x, y):
        zx, zy = self.zns(x), self.zns(y)
        net = "10.78.%d" % (16 * x + y)
        self._batch([
            "link add p%d netns %s type veth peer name p%dd netns %s" % (y, zx, y, zx),
            "link add p%de netns %s type veth peer name p%d netns %s" % (y, zx, x, zy),
            "-n %s addr add %s.1/30 dev p%d" % (zx, net, y),
            "-n %s addr add %s.2/30 dev p%d" % (zy, net, x),
            "-n %s link set p%d up" % (zx, y), "-n %s link set p%dd arp off up" % (zx, y),
            "-n %s link set p%de arp off up" % (zx, y), "-n %s link set p%d up" % (zy, x),
            "-n %s route add 10.77.%d.0/24 via %s.2" % (zx, y, net),
            "-n %s route add 10.77.%d.0/24 via %s.1" % (zy, x, net),
        ])
        self._start_delayline("pair-%d-%d" % (x, y), zx, "p%dd" % y, "p%de" % y,
                              self.pair_delay_us)

    def _attach(self, ns, z, address, tag, name):
        """A host namespace on zone z's bridge: eth0 <-> a<tag> (a port of br0). A spare pair
        b<tag> <-> c<tag> (c a port of br0, both down) lets a delay line take a<tag>'s place on
        demand (detour())."""
        if ns not in self.namespaces:
            self._netns(ns)
        zns = self.zns(z)
        self._batch([
            "link add eth0 netns %s type veth peer name a%s netns %s" % (ns, tag, zns),
            "link add b%s netns %s type veth peer name c%s netns %s" % (tag, zns, tag, zns),
            "-n %s link set c%s master br0" % (zns, tag),
            "-n %s link set b%s arp off" % (zns, tag),
            "-n %s link set a%s arp off master br0 up" % (zns, tag),
            "-n %s link set eth0 up" % ns,
            "-n %s addr add %s/24 dev eth0" % (ns, address),
            "-n %s route add default via 10.77.%d.1" % (ns, z),
        ])
        self.detours[name] = (zns, tag)

    def detour(self, name, one_way_us):
        """Host `name` (node-I, dns-K) behind a delay line of `one_way_us` (0: straight on the
        bridge again, the delay line stopped). The frames in flight while it switches are
        lost (a few ms)."""
        zns, tag = self.detours[name]
        running = name in self.delaylines
        if one_way_us and running:
            self.set_delay(name, one_way_us)
        elif one_way_us:
            self._batch(["-n %s link set a%s nomaster" % (zns, tag),
                         "-n %s link set b%s up" % (zns, tag),
                         "-n %s link set c%s up" % (zns, tag)])
            self._start_delayline(name, zns, "a" + tag, "b" + tag, one_way_us)
        elif running:
            labkit.stop(self.delaylines.pop(name)[1])
            self._batch(["-n %s link set b%s down" % (zns, tag),
                         "-n %s link set c%s down" % (zns, tag),
                         "-n %s link set a%s master br0" % (zns, tag)])

    def _start_delayline(self, name, ns, a, b, delay_us):
        folder = os.path.join(self.tmp, "delay")
        os.makedirs(folder, exist_ok=True)
        dfile = os.path.join(folder, name + ".delay")
        with open(dfile, "w") as f:
            f.write("%d\n" % delay_us)
        logf = os.path.join(folder, name + ".log")
        # --spin-us 0: it sleeps until each deadline (no busy wait: tens of them share 2 cores);
        # SCHED_FIFO keeps those wake-ups prompt while the exporters run.
        p = labkit.start(ns, [self.delayline, "--a", a, "--b", b, "--delay-us", str(delay_us),
                              "--delay-file", dfile, "--max-seconds", str(self.max_seconds),
                              "--spin-us", "0", "--rt-priority", "10", "--quiet"], logf)
        self.delaylines[name] = (ns, p, dfile, logf, delay_us)

    def set_delay(self, name, one_way_us):
        """Sets delay line `name` (node-I, dns-K, pair-X-Y) to `one_way_us`; returns once it
        logged the change (10 s at most)."""
        ns, p, dfile, logf, _ = self.delaylines[name]
        with open(dfile + ".new", "w") as f:
            f.write("%d\n" % one_way_us)
        os.replace(dfile + ".new", dfile)
        mark = "delay_us=%d from" % one_way_us
        before = labkit.tail(logf, 1000).count(mark)
        os.kill(p.pid, signal.SIGUSR2)
        labkit.wait_for(lambda: labkit.tail(logf, 1000).count(mark) > before, 10,
                        "delay line %s at %d us" % (name, one_way_us), step=0.05)

    def base_delay(self, name):
        return self.delaylines[name][4]

    # ---- kube-proxy's part: the kube-dns and Service VIPs ---------------------------------
    def _zone_backends(self, z):
        return [b for b in self.backends if b.z == z]

    def _node_nat(self, n, backends):
        """kube-dns VIP -> a random replica; Service VIP -> one of `backends` at random."""
        rules = ["*nat", ":PODNET-DNS - [0:0]", ":PODNET-SVC - [0:0]",
                 "-A OUTPUT -d %s/32 -j PODNET-DNS" % KUBE_DNS_VIP,
                 "-A OUTPUT -d %s/32 -j PODNET-SVC" % SERVICE_VIP]
        rules += self._random_dnat("PODNET-DNS", [(d["address"], 53) for d in self.dns],
                                   ("udp", "tcp"), 53)
        rules += self._random_dnat("PODNET-SVC", [(b.address, 9479) for b in backends],
                                   ("udp",), 9479)
        rules.append("COMMIT")
        # Counters, no verdict: the TCP resets this node sends from its responders' ports to a
        # prober (not to Prometheus, in 10.79/16): refusals (a probe that found no responder
        # listening), then every reset (aborts too: the difference).
        rules += ["*filter"] + [
            "-A OUTPUT -p tcp -d 10.77.0.0/16 --sport %d %s -m comment --comment %s-%s"
            % (port, match, RESETS[kind], what) for port, what in REFUSED_PORTS
            for kind, match in (("refused", REFUSAL_MATCH), ("other", "--tcp-flags RST RST"))]
        rules.append("COMMIT")
        r = subprocess.run(["ip", "netns", "exec", self.ns(n), "iptables-restore"],
                           input="\n".join(rules) + "\n", capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            raise Broken("iptables-restore in %s: %s" % (self.ns(n), r.stderr.strip()))

    @staticmethod
    def _random_dnat(chain, targets, protos, port):
        """kube-proxy's iptables mode: target k of n taken with probability 1/(n-k)."""
        out = []
        for proto in protos:
            for k, (addr, tport) in enumerate(targets):
                left = len(targets) - k
                stat = ("-m statistic --mode random --probability %.5f " % (1.0 / left)
                        if left > 1 else "")
                out.append("-A %s -p %s --dport %d %s-j DNAT --to-destination %s:%d"
                           % (chain, proto, port, stat, addr, tport))
        return out

    # ---- DNS -----------------------------------------------------------------------------
    def _dns(self):
        for d in self.dns:
            self._start_unbound(d)
        labkit.wait_for(lambda: all(self._dns_answers(d) for d in self.dns), 30,
                        "the DNS replicas answer")
        for n in self.nodes:
            self._write_resolv(n, RESOLV)
        if self.dns_publisher:
            self.dns_publisher.start()

    def _start_unbound(self, d):
        """Starts replica `d`'s unbound (again, after a dns_servfail fault). With discovery
        "dns", it also serves the podnet Service's records as the replica has them now
        (_DnsPublisher) and listens for unbound-control on a unix socket in its folder."""
        folder = os.path.join(self.tmp, "dns%d" % d["k"])
        os.makedirs(folder, exist_ok=True)
        conf = os.path.join(folder, "unbound.conf")
        text = labkit.UNBOUND_CONF.format(dir=folder, zones=labkit.UNBOUND_ZONES)
        text = text.replace("interface: 127.0.0.1", "interface: " + d["address"])
        text = text.replace("access-control: 127.0.0.0/8 allow",
                            "access-control: 10.77.0.0/16 allow")
        if self.dns_publisher:
            text += self.dns_publisher.unbound_conf(d, folder)
        with open(conf, "w") as f:
            f.write(text)
        d["conf"] = conf
        d["proc"] = labkit.start(d["ns"], ["unbound", "-d", "-c", conf],
                                 os.path.join(folder, "unbound.log"))

    def _dns_answers(self, d):
        """True when replica `d` answers an A question from node 0 (rcode NOERROR)."""
        code = ("import socket,struct;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
                "s.settimeout(2);q=struct.pack('!HHHHHH',4660,256,1,0,0,0)+b''.join("
                "bytes([len(p)])+p.encode() for p in 'kubernetes.default.svc.cluster.local'"
                ".split('.'))+b'\\0'+struct.pack('!HH',1,1);s.sendto(q,(%r,53));"
                "r=s.recv(512);print(r[3]&15)" % d["address"])
        r = labkit.run("ip", "netns", "exec", self.ns(self.nodes[0]), sys.executable, "-c",
                       code, check_rc=False, timeout=10)
        return r.returncode == 0 and r.stdout.strip() == "0"

    def resolv_path(self, n):
        return os.path.join(self.tmp, "resolv-%s.conf" % n.name)

    def _write_resolv(self, n, text):
        labkit.write_atomic(self.resolv_path(n), text)

    # ---- the API server, Prometheus, Alertmanager ------------------------------------------
    def _control(self):
        folder = os.path.join(self.tmp, "api")
        os.makedirs(folder, exist_ok=True)
        self.service_file = os.path.join(folder, "podnet-endpoints.json")
        self.node_file = os.path.join(folder, "nodes.json")
        self.dns_file = os.path.join(folder, "kube-dns-endpoints.json")
        self.echo_file = os.path.join(folder, "echo-endpoints.json")
        echo_service = os.path.join(folder, "echo-service.json")
        self._write_endpoints()
        self._json(self.node_file, {n.name: n.zone for n in self.nodes})
        self._json(self.dns_file, [{
            "addresses": [d["address"]],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": "dns-%d" % d["k"], "zone": d["zone"],
            "targetRef": {"kind": "Pod", "namespace": "kube-system",
                          "name": "coredns-%d" % d["k"]}} for d in self.dns])
        self._json(self.echo_file, [{
            "addresses": [b.address],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": b.name, "zone": b.zone, "hints": {"forZones": [{"name": b.zone}]}}
            for b in self.backends])
        self._json(echo_service, {
            "kind": "Service", "apiVersion": "v1",
            "metadata": {"name": SERVICE, "namespace": "podnet"},
            "spec": {"type": "ClusterIP", "clusterIP": SERVICE_VIP,
                     "trafficDistribution": "PreferClose", "internalTrafficPolicy": "Cluster",
                     "ports": [{"name": "echo", "protocol": "UDP", "port": 9479}]}})
        args = ["--service-file", self.service_file, "--node-zones", self.node_file,
                "--churn", "0", "--max-seconds", str(self.max_seconds), "--log-requests",
                "--extra-service", "kube-system/kube-dns=" + self.dns_file,
                "--extra-service", "podnet/%s=%s" % (SERVICE, self.echo_file),
                "--object", "/api/v1/namespaces/podnet/services/%s=%s"
                % (SERVICE, echo_service)]
        if self.discovery == "dns":
            # What DNS discovery GETs besides the Nodes: the headless Service (its UID).
            podnet_service = os.path.join(folder, "podnet-service.json")
            self._json(podnet_service, {
                "kind": "Service", "apiVersion": "v1",
                "metadata": {"name": "podnet", "namespace": "podnet",
                             "uid": PODNET_SERVICE_UID, "resourceVersion": "1"},
                "spec": {"type": "ClusterIP", "clusterIP": "None",
                         "ports": [{"name": "http", "protocol": "TCP", "port": 9479},
                                   {"name": "echo", "protocol": "UDP", "port": 9479},
                                   {"name": "burst", "protocol": "TCP", "port": 5201}]}})
            args += ["--object", "%s=%s" % (PODNET_SERVICE_PATH, podnet_service)]
        self.api_log = os.path.join(folder, "apiserver.log")
        self.api, self.kubeconfig = fake_apiserver.start(
            folder, "fleet-token", ns=self.ctl, address=API_ADDRESS,
            max_seconds=self.max_seconds, args=args)
        self.hook_port = labkit.free_port(self.ctl)
        self.receiver = alerting.start_receiver(self.ctl, self.tmp, self.hook_port)
        self.am_port = labkit.free_port(self.ctl)
        am_cfg = os.path.join(self.tmp, "alertmanager.yml")
        self.am_shipped = alerting.alertmanager_config(
            am_cfg, "http://127.0.0.1:%d/" % self.hook_port, self.am_scale)
        alerting.start_alertmanager(self.ctl, self.tmp, am_cfg, self.am_port,
                                    self.alertmanager_bin)

    @staticmethod
    def _json(path, doc):
        labkit.write_atomic(path, json.dumps(doc))

    def api_requests(self):
        """The paths (with their queries) of every GET the stand-in API server has had."""
        with open(self.api_log, errors="replace") as f:
            return [line[4:].strip() for line in f if line.startswith("GET ")]

    def _write_endpoints(self):
        """The podnet Service's endpoints (ready ones, and a Pod stopping as terminating)."""
        if not hasattr(self, "service_file"):
            return
        eps = []
        for n in self.live():
            eps.append({
                "addresses": [n.address],
                "conditions": {"ready": n.ready, "serving": n.ready,
                               "terminating": not n.ready},
                "targetRef": {"kind": "Pod", "namespace": "podnet", "name": n.pod},
                "nodeName": n.name, "zone": n.zone})
        self._json(self.service_file, eps)
        if self.dns_publisher:  # Kubernetes DNS: the ready endpoints only
            self.dns_publisher.want([n.address for n in self.live() if n.ready])
        self._write_targets()

    def _write_targets(self):
        """Prometheus' file_sd targets: the running exporters, labelled as the shipped
        scrape configuration labels them (namespace, pod, node)."""
        if not hasattr(self, "targets_file"):
            return
        self._json(self.targets_file, [{
            "targets": ["%s:9479" % n.address],
            "labels": {"namespace": "podnet", "pod": n.pod, "node": n.name}}
            for n in self.live() if n.exporter is not None])

    def exporter_config(self, n):
        import yaml  # python3-yaml, a test dependency
        with open(DEPLOY_CONFIG) as f:
            deploy = yaml.safe_load(f)
        probes = _scaled_durations(deploy["probes"], self.probe_scale)
        probes.pop("burst", None)  # see bench/README.md: not through user-space delay lines
        # a default left out of the deploy file, scaled as the rest (1 s -> 200 ms)
        probes["http"].setdefault("timeout", alerting.duration(1.0 / self.probe_scale))
        # The HTTP rounds are scaled too (1 s -> 200 ms). Left at 1 s they saturated the 2 cores
        # at 24 nodes (exporters 3 -> 6 % of a core each, RTT rounds skipped on 10 nodes); scaled,
        # the HTTP p99 is this host's, not the network's (HOST_SETTINGS).
        probes["dns"]["resolv_conf"] = self.resolv_path(n)
        probes["dns"]["names"] = list(DNS_NAMES)
        probes["service"] = {"interval": alerting.duration(30 / self.probe_scale),
                             "count": 10, "spacing": "10ms", "timeout": "200ms",
                             "targets": [{"name": SERVICE, "address": SERVICE_VIP,
                                          "port": 9479, "protocol": "udp",
                                          "kubernetes_service": "podnet/" + SERVICE}]}
        if self.mtu:
            probes["mtu"] = {"interval": alerting.duration(600 / self.rule_scale),
                             "timeout": alerting.duration(0.5 / self.probe_scale)}
        probes.update(self.extra_probes)
        # The discovery mode set here whatever the deploy file's (the fleet compares the two).
        peers = dict(deploy["peers"])
        peers["kubernetes"] = dict(peers["kubernetes"], discovery=self.discovery)
        if self.discovery == "dns":
            # The name is dns_name's default (PODNET_DNS_NAME), asked from the first nameserver
            # of probes.dns.resolv_conf: the kube-dns VIP, DNATed to a replica.
            peers["kubernetes"]["dns_refresh"] = alerting.duration(self.dns_refresh_s())
        doc = {"listen_address": "0.0.0.0:9479",
               "self": {"name": n.pod, "node": n.name, "zone": ""},
               "responders": {"udp_echo": {"listen_address": "0.0.0.0:9479"},
                              "grpc": {"listen_address": "0.0.0.0:9480"}},
               "peers": peers, "metrics": deploy.get("metrics", {}),
               "probes": probes}
        return yaml.safe_dump(doc, sort_keys=False)

    def dns_refresh_s(self):
        """Discovery "dns"'s dns_refresh: the deploy file's (else the default, 30 s) divided by
        probe_scale as the probes' durations are, within its bounds (1 s at least)."""
        import yaml
        with open(DEPLOY_CONFIG) as f:
            kube = yaml.safe_load(f)["peers"]["kubernetes"]
        refresh = alerting.seconds(kube.get("dns_refresh", "%ds" % DNS_REFRESH_DEFAULT_S))
        return max(1.0, refresh / self.probe_scale)

    def _start_exporter(self, n):
        cfg = os.path.join(self.tmp, "%s.yaml" % n.pod)
        with open(cfg, "w") as f:
            f.write(self.exporter_config(n))
        n.exporter = labkit.start(self.ns(n), [self.exe, "--config.file=" + cfg,
                                               "--kubeconfig=" + self.kubeconfig,
                                               "--shutdown.drain-period=%ds" % DRAIN_S,
                                               "--log.level=warn"],
                                  os.path.join(self.tmp, "%s.log" % n.pod),
                                  max_seconds=self.max_seconds)

    def wait_ready(self, nodes=None, timeout=60):
        nodes = nodes or self.live()
        for n in nodes:
            labkit.wait_for(lambda n=n: n.exporter.poll() is None and labkit.http(
                self.ns(n), "http://127.0.0.1:9479/-/ready", timeout=5)[0] == 200,
                timeout, "%s's exporter ready" % n.name, step=0.5)
            n.ready = True
        self._write_endpoints()

    def _prometheus(self):
        self.targets_file = os.path.join(self.tmp, "targets.json")
        self._write_targets()
        scale = alerting.uniform_scale(self.rule_scale, self.offsets) + HOST_SETTINGS
        alerting_cfg = ("alerting:\n  alertmanagers:\n"
                        "    - static_configs: [ { targets: ['127.0.0.1:%d'] } ]\n" % self.am_port)
        # Every 2 s, with a 2 s timeout: at 1 s / 1 s a busy machine (another job beside the
        # fleet) timed scrapes out and PodnetExporterDown went pending for exporters that were
        # fine; the rules' windows (15 s) still hold 7 scrapes.
        head = ("global: { scrape_interval: %ds, evaluation_interval: %ds, external_labels: {} }\n"
                % (SCRAPE_S, SCRAPE_S))
        podnet_job = ("  - job_name: podnet\n    scrape_timeout: 2s\n"
                      "    file_sd_configs: [ { files: ['%s'], refresh_interval: 5s } ]\n"
                      "    relabel_configs:\n"
                      "      - { target_label: cluster, replacement: %s }\n"
                      % (self.targets_file, CLUSTER))
        if not self.shards:
            self.rule_files = alerting.scaled_rules(self.tmp, scale)
            self._server("prom", head + "rule_files: [%s]\n" % ", ".join(
                "'%s'" % p for p in self.rule_files) + alerting_cfg + "scrape_configs:\n"
                + podnet_job)
        else:
            self.rule_files = alerting.scaled_rules(self.tmp, scale, alerting.STAGE_FILES)
            global_port = labkit.free_port(self.ctl)
            remote_write = ""
            if self.transport == "remote_write":
                # Batches every second (the default 5 s is a third of a scaled window).
                remote_write = (
                    "remote_write:\n  - url: http://127.0.0.1:%d/api/v1/write\n"
                    "    queue_config: { batch_send_deadline: 1s, min_backoff: 100ms,"
                    " max_backoff: 1s }\n"
                    "    write_relabel_configs: [ { source_labels: [__name__], regex: '%s',"
                    " action: keep } ]\n" % (global_port, STAGE1_RECORDS))
            for k in range(self.shards):
                # As prometheus-operator shards (hashmod of __address__, keep its own number)
                # and as the prometheus-sharded overlay labels the targets.
                self._server("shard%d" % k, head + "rule_files: ['%s']\n" % self.rule_files[0]
                             + alerting_cfg + remote_write + "scrape_configs:\n" + podnet_job
                             + "      - { source_labels: [__address__], modulus: %d,"
                               " target_label: podnet_shard, action: hashmod }\n"
                               "      - { source_labels: [podnet_shard], regex: '%d',"
                               " action: keep }\n" % (self.shards, k))
            if self.transport == "remote_write":
                stage1_input = "  []\n"
                self.server_flags["global"] = ["--web.enable-remote-write-receiver"]
            else:
                stage1_input = (
                    "  - job_name: federate\n    metrics_path: /federate\n"
                    "    honor_labels: true\n    honor_timestamps: false\n"
                    "    scrape_timeout: 2s\n"
                    "    params: { 'match[]': ['{__name__=~\"%s\"}'] }\n"
                    "    static_configs: [ { targets: [%s] } ]\n" % (
                        STAGE1_RECORDS, ", ".join("'127.0.0.1:%d'" % port
                                                  for _, _, port, _ in self.servers)))
            self._server("global", head + "rule_files: ['%s']\n" % self.rule_files[1]
                         + alerting_cfg + "scrape_configs:\n" + stage1_input, port=global_port)
        # The Prometheus that holds the alerts' inputs: the only one, or the global one.
        self.prom_port = self.servers[-1][2]
        self.start_prometheus()

    def _server(self, name, config, port=None):
        path = os.path.join(self.tmp, name + ".yml")
        with open(path, "w") as f:
            f.write(config)
        r = labkit.run("promtool", "check", "config", path, check_rc=False)
        if r.returncode != 0:
            raise Broken("promtool check config %s: %s" % (name, (r.stdout + r.stderr)[-500:]))
        self.servers.append([name, path, port or labkit.free_port(self.ctl), None])

    def start_prometheus(self):
        for server in self.servers:
            name, path, port, _ = server
            server[3] = labkit.start(self.ctl, [
                self.prometheus_bin, "--config.file=" + path,
                "--storage.tsdb.path=" + os.path.join(self.tmp, "tsdb-" + name),
                "--web.listen-address=127.0.0.1:%d" % port, *self.server_flags.get(name, [])],
                os.path.join(self.tmp, "%s.log" % name), max_seconds=self.max_seconds)
        for name, _, port, _ in self.servers:
            labkit.wait_for(lambda port=port: labkit.http(
                self.ctl, "http://127.0.0.1:%d/-/ready" % port)[0] == 200, 120,
                "prometheus %s ready" % name)
        self.prom = self.servers[-1][3]

    def restart_prometheus(self):
        for server in self.servers:
            labkit.stop(server[3], grace=30)
        self.start_prometheus()

    def promql(self, expr, at=None):
        """An instant query's result list. With shards: an expression that reads raw series
        (podnet_*, up) asks every shard and joins their results, ALERTS asks every server,
        anything else (records) the global Prometheus."""
        if not self.shards:
            return labkit.promql(self.ctl, expr, at=at, port=self.prom_port)
        names = set(re.findall(r"\b(?:podnet_[a-z_]+|up|ALERTS)\b(?![:(])",
                               re.sub(r"\{[^}]*\}|\"[^\"]*\"", "", expr)))
        if not names:
            return labkit.promql(self.ctl, expr, at=at, port=self.prom_port)
        ports = [port for _, _, port, _ in self.servers]
        if "ALERTS" not in names:
            ports = ports[:-1]
        return [r for port in ports for r in labkit.promql(self.ctl, expr, at=at, port=port)]

    def firing(self):
        """Alerts firing in Prometheus now: a list of label dicts."""
        return [r["metric"] for r in self.promql('ALERTS{alertstate="firing"}')]

    def alertmanager_alerts(self):
        """Alerts active in Alertmanager (not inhibited or silenced)."""
        code, body = labkit.http(self.ctl, "http://127.0.0.1:%d/api/v2/alerts?active=true"
                                 "&inhibited=false&silenced=false" % self.am_port)
        return json.loads(body) if code == 200 else []

    # ---- life cycle of Pods and nodes ------------------------------------------------------
    def restart_exporter(self, n, timeout=60):
        """One DaemonSet Pod replaced: the old one terminating, stopped, the new one (next
        generation, a new Pod name) started, ready, and in the Service. As in a cluster, the
        kubelet's SIGTERM comes first and the watchers hear of the terminating endpoint later
        (the EndpointSlice controller batches, the watch delivers: PROPAGATION_S here), so the
        peers probe a stopping Pod for a while: its drain must answer them."""
        n.ready = False
        labkit.terminate(n.exporter)
        time.sleep(PROPAGATION_S)
        self._write_endpoints()
        try:  # the drain; a second SIGTERM (stop()'s) would end it at once
            n.exporter.wait(timeout=self.drain_s() + 10)
        except subprocess.TimeoutExpired:
            pass
        labkit.stop(n.exporter)
        n.exporter = None
        n.generation += 1
        self._write_endpoints()
        self._start_exporter(n)
        self._write_targets()
        self.wait_ready([n], timeout)

    def leave(self, n):
        """The node leaves the cluster (drained, deleted): its Pod stops, its endpoint goes."""
        n.ready = False
        self._write_endpoints()
        labkit.stop(n.exporter)
        n.exporter = None
        n.in_fleet = False
        self._write_endpoints()

    def join(self, n, timeout=60):
        """The node (back) in the cluster: a new Pod starts and joins the Service when ready."""
        n.in_fleet = True
        n.generation += 1
        self._start_exporter(n)
        self._write_targets()
        self.wait_ready([n], timeout)

    # ---- faults ----------------------------------------------------------------------------
    def inject(self, kind, target, **params):
        """Injects fault `kind` at `target` (tests/lib/faults.py); returns a Fault."""
        import faults  # the faults act on a Fleet: imported when first used
        return faults.FAULTS[kind](self, target, **params)

    def responder_resets(self):
        """TCP resets sent so far from the nodes' responder ports to probers, summed over the
        nodes (_node_nat's counters), by kind and port: {"refused": {"http": n, "grpc": m},
        "other": {...}}. A refusal is an HTTP or gRPC probe's connection that reached a node
        where no responder listened (a Pod stopped before its peers dropped it); the others
        end a connection that was open (a responder closing with a request unread, a segment
        for a connection already closed)."""
        total = {kind: {what: 0 for _, what in REFUSED_PORTS} for kind in RESETS}
        for n in self.nodes:
            out = labkit.run("ip", "netns", "exec", self.ns(n), "iptables", "-w", "5", "-nvxL",
                             "OUTPUT").stdout
            for line in out.splitlines():
                for kind, comment in RESETS.items():
                    for _, what in REFUSED_PORTS:
                        if "/* %s-%s */" % (comment, what) in line:
                            total[kind][what] += int(line.split()[0])
        total["other"] = {w: v - total["refused"][w] for w, v in total["other"].items()}
        return total

    def iptables(self, ns, *args):
        labkit.run("ip", "netns", "exec", ns, "iptables", "-w", "5", *args)

    def pair_of(self, za, zb):
        x, y = sorted((za, zb))
        return x, y, "pair-%d-%d" % (x, y)

    def drop_bound_s(self):
        """The longest a peer may go on probing a Pod after its SIGTERM (restart_exporter):
        PROPAGATION_S, then with "watch" the stand-in API server's 0.2 s to send the slice,
        with "dns" a replica's answer changing (DNS_TTL_S at most) and the next answer asked
        (dns_refresh + 10 % jitter), then discovery's publish interval (1 s). The drain
        (drain_s) must outlast it, or the peers' HTTP and gRPC probes are refused."""
        if self.discovery == "dns":
            lag = DNS_TTL_S + 1.1 * self.dns_refresh_s()
        else:
            lag = 0.2
        return PROPAGATION_S + lag + 1.0

    def drain_s(self):
        """How long an exporter drains after its SIGTERM: --shutdown.drain-period (DRAIN_S), and
        with "dns" at least 1.1 x dns_refresh + 7 s, which the exporter adds by itself
        (KubernetesWatches::PeersStaleness), when DRAIN_S is not 0."""
        if self.discovery == "dns" and DRAIN_S > 0:
            return max(DRAIN_S, 1.1 * self.dns_refresh_s() + 7)
        return DRAIN_S

    def close(self):
        if self.dns_publisher:
            self.dns_publisher.stop()
        for n in self.nodes:
            if n.exporter is not None:
                labkit.resume(n.exporter)
        import faults
        for path in glob.glob(self.cgroup + "-*"):  # a bad_prober fault left on
            faults._uncgroup(path)
        labkit.stop_all()
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], timeout=30, capture_output=True)
        self.namespaces = []


class _DnsPublisher:
    """CoreDNS's part with discovery "dns": the podnet Service's A records (PODNET_DNS_NAME, TTL
    DNS_TTL_S) on every unbound replica, the addresses of the ready probe Pods (Kubernetes DNS
    lists a headless Service's ready endpoints only; none: NXDOMAIN, as the `local-zone: "."
    static` answers a name without data), changed live with unbound-control (remote control on
    a unix socket in the replica's folder, no certificates): restarting unbound would disturb
    the DNS probe, which asks the same replicas.

    The lag modelled: CoreDNS's kubernetes plugin hears an endpoint change from its watch as the
    exporters' watches do (the fleet writes the endpoints when they should hear it:
    PROPAGATION_S after a SIGTERM), so that part is taken as none; but every answer goes through
    the default Corefile's `cache 30`, which keeps it for min(TTL, 30 s) = DNS_TTL_S, and the
    name is asked all the time (every exporter every dns_refresh), so a replica's cached answer
    is always there and is renewed every DNS_TTL_S s. A replica's answer therefore changes at its
    first renewal after the endpoint change: 0 to DNS_TTL_S s later (half of it on average), the
    replicas' renewals spread evenly over the TTL (replica k at k/K of it). A change undone
    before a renewal is never seen, as with a cache. The exporters' own part comes on top: the
    next answer they ask for, dns_refresh later at most (+10 % jitter).

    A replica restarted (Fleet._start_unbound, after a dns_servfail fault) starts with the
    records as they are then (a new CoreDNS has no cache). Removing an address takes two
    unbound-control calls (local_data_remove of the name, then local_datas of the addresses
    left): a question between them (a few ms) is answered NXDOMAIN, which discovery counts
    (result="nxdomain") and survives (it keeps the last peers for 90 s). A failed call (a
    replica replaced by the dns_servfail fault's server) is retried at the next renewal.
    """

    def __init__(self, fleet):
        self.fl = fleet
        self.lock = threading.Lock()
        self.wanted = ()  # the ready probe Pods' addresses, sorted
        self.published = {}  # replica k -> the addresses it serves
        self.failing = set()  # replicas whose last update failed (logged once a streak)
        self.updates = 0  # unbound-control updates applied, all replicas together
        self.stopping = threading.Event()
        self.thread = None

    def want(self, addresses):
        """The addresses the replicas should serve from their next renewal on."""
        with self.lock:
            self.wanted = tuple(sorted(addresses))

    def unbound_conf(self, d, folder):
        """The lines replica `d`'s unbound.conf ends with: the records as wanted now (written to
        a file it includes), and its remote control."""
        path = os.path.join(folder, "podnet-records.conf")
        with self.lock:
            labkit.write_atomic(path, "server:\n" + "".join(
                '  local-data: "%s. %d IN A %s"\n' % (PODNET_DNS_NAME, DNS_TTL_S, a)
                for a in self.wanted))
            self.published[d["k"]] = self.wanted
        return ('  include: "%s"\nremote-control:\n  control-enable: yes\n'
                '  control-interface: "%s"\n  control-use-cert: no\n'
                % (path, os.path.join(folder, "control.sock")))

    def start(self):
        self.thread = threading.Thread(target=self._run, name="dns-publisher", daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=30)
            self.thread = None

    def _run(self):
        t0 = time.monotonic()
        due = {d["k"]: t0 + DNS_TTL_S * (i + 1) / len(self.fl.dns)
               for i, d in enumerate(self.fl.dns)}
        while not self.stopping.wait(max(0.0, min(due.values()) - time.monotonic())):
            now = time.monotonic()
            for d in self.fl.dns:
                if due[d["k"]] <= now:
                    self._renew(d)
                    while due[d["k"]] <= now:
                        due[d["k"]] += DNS_TTL_S

    def _control(self, d, *args, stdin=None):
        return labkit.run("unbound-control", "-c", d["conf"], *args, input=stdin, timeout=10)

    def _renew(self, d):
        """Replica `d`'s cached answer renewed: it serves the addresses wanted now."""
        with self.lock:
            want, had = self.wanted, self.published.get(d["k"], ())
            if want == had:
                return
            try:
                if set(had) - set(want):
                    self._control(d, "local_data_remove", PODNET_DNS_NAME + ".")
                    add = want
                else:
                    add = sorted(set(want) - set(had))
                if add:
                    self._control(d, "local_datas", stdin="".join(
                        "%s. %d IN A %s\n" % (PODNET_DNS_NAME, DNS_TTL_S, a) for a in add))
            except (Broken, subprocess.TimeoutExpired) as e:
                if d["k"] not in self.failing:
                    log("dns replica %d: the podnet records not updated (retried every %d s): "
                        "%s" % (d["k"], DNS_TTL_S, str(e).strip()[-200:]))
                self.failing.add(d["k"])
                return
            self.failing.discard(d["k"])
            self.published[d["k"]] = want
            self.updates += 1


def have_tools(*extra):
    """The tools the fleet runs (and `extra`); a list of those missing."""
    need = ["ip", "iptables", "iptables-restore", "unbound", "promtool", "getent"] + list(extra)
    return [t for t in need if not shutil.which(t)]
