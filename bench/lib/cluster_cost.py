#!/usr/bin/env python3
"""What podnet-exporter costs on a cluster: series and scrape bytes (as a real Prometheus counts
them) and probe bytes by path class (as the kernel counts them), per Pod and per cluster of
N nodes in 3 zones, with the month's price; side by side with goldpinger's and kubenurse's
metric sets at the same sizes (formulas from their metric definitions).

One real exporter is one Pod (podnet-00000 on node-0) of a simulated cluster, in a private
network namespace:
  - the stand-in API server (tests/lib/fake_apiserver.py) lists N probe Pods (Pod i on node-i,
    zone-a/b/c by i % 3, address 127.1.x.y) and kube-system/kube-dns with 2 CoreDNS replicas
    (127.2.0.1 in the Pod's zone, 127.2.0.2 in another), no churn;
  - every peer the exporter picks has a responder of its own on its address: an exporter with
    no probes (UDP echo and HTTP 9479, gRPC 9480, bursts 5201); two unbound
    (tests/lab/unbound-zones.conf) answer DNS, and the kernel answers ICMP echo;
  - the measured exporter runs the deploy default (deploy/kubernetes/base/podnet.yaml, the
    ConfigMap's config) with only what the bench must change (printed at the start);
  - a real Prometheus (Debian's) scrapes it: prometheus_tsdb_head_series, scrape_samples_scraped
    and scrape_body_size_bytes are the series and bytes; a curl asking for gzip as Prometheus does
    gives the compressed bytes;
  - iptables rules in a chain of the bench's own in the namespace's OUTPUT count the bytes to and
    from every selected peer and DNS replica by probe kind (ICMP: rtt, TCP 9479: http, 9480: grpc,
    5201: burst, UDP 53: dns, UDP 9479: mtu with --mtu) over a bounded window; each kind's bytes per round, from the
    exporter's podnet_probe_round_start_delay_seconds_count{probe}, are scaled to an hour by the
    configured intervals. With peers.kubernetes bursts are coordinated (probes.burst.coordinated:
    one prober per ordered zone pair and period, cluster-wide): the cluster's burst bytes are
    zone pairs x len(streams) x the per-burst bytes per period, whatever the node count, and a
    Pod's share is that / N. The per-burst wire bytes are max_bytes_per_burst (or what the
    modelled link moves in `duration`, if less) x the wire overhead measured on the bursts this
    Pod ran in the window (checks every 60 s and a 60 s period in the bench, so that it is the
    prober of some pairs; 1.06 when it ran none).
Exit 0 when it ran, 2 when it could not (BENCH BROKEN).
"""
import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "tests", "lib")]
import benchlib as B  # noqa: E402
import fake_apiserver  # noqa: E402  (the stand-in API server)
import labkit as K  # noqa: E402  (processes, waiting, scraping)

TOKEN = "bench-cluster-cost"
ZONES = 3
NATIVE = False  # --native-histograms
MTU = False  # --mtu
DEPLOY_CONFIG = os.path.join(B.REPO, "deploy", "kubernetes", "base", "podnet.yaml")
PODMONITOR = os.path.join(B.REPO, "deploy", "kubernetes", "prometheus-operator", "podmonitor.yaml")
SELF = {"POD_NAME": "podnet-00000", "NODE_NAME": "node-0", "POD_ZONE": ""}  # Pod 0: zone-a
# The 2 CoreDNS replicas (kube-system/kube-dns): address -> (node, zone).
DNS_REPLICAS = {"127.2.0.1": ("node-dns-a", "zone-a"), "127.2.0.2": ("node-dns-b", "zone-b")}
# An EKS Pod's resolv.conf (the lab's search list, as tests/lab/lab_obs_test.py); its
# nameserver is the same-zone replica (in a cluster: the kube-dns ClusterIP, which kube-proxy
# sends to any replica).
RESOLV_CONF = ("search podnet.svc.cluster.local svc.cluster.local cluster.local "
               "ap-northeast-2.compute.internal\noptions ndots:5 timeout:1 attempts:2\n"
               "nameserver 127.2.0.1\n")
# The peers' responders listen on the deployed ports (the namespace is private).
PEER_PORTS = {"http": 9479, "grpc": 9480, "burst": 5201}
RESPONDER_CONFIG = """listen_address: "%(addr)s:%(http)d"
self: { name: %(name)s, node: %(node)s, zone: %(zone)s }
responders:
  udp_echo: { listen_address: "%(addr)s:%(http)d" }
  burst: { listen_address: "%(addr)s:%(burst)d" }
  grpc: { listen_address: "%(addr)s:%(grpc)d" }
"""
KINDS = ("rtt", "http", "grpc", "burst", "dns", "mtu")
CLASSES = ("same_node", "same_zone", "cross_zone")
CHAIN = "PNCOST"
HOURS_PER_MONTH = 720  # 30 days, as the Throughput and cost dashboard and `report`
BENCH_BURST_INTERVAL_S = 60
# probes.mtu.interval in the bench (--mtu): every peer has a round within the window (a round at
# the defaults is at most 2 x 24 datagrams x 500 ms = 24 s).
BENCH_MTU_INTERVAL_S = 30
# Wire bytes per payload byte of a burst when none ran in the window: IP+TCP headers (52 of 1500
# bytes), the receiver's ACKs, the control connection.
BURST_WIRE_OVERHEAD = 1.06


def parse_duration(text):
    """Seconds of a Prometheus-style duration ("100ms", "30s", "15m", "1h")."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text.strip())
    if not m:
        raise B.BenchBroken("cannot read the duration %r" % text)
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def parse_size(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(B|kB|MB|GB|TB|KiB|MiB|GiB)?", text.strip())
    if not m:
        raise B.BenchBroken("cannot read the size %r" % text)
    mult = {None: 1, "B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 2 ** 10,
            "MiB": 2 ** 20, "GiB": 2 ** 30}[m.group(2)]
    return float(m.group(1)) * mult


class Deploy:
    """The deploy default as shipped: the ConfigMap's config text and the figures the cost model
    reads from it (intervals, burst settings, DNS targets), and the shipped scrape interval."""

    def __init__(self):
        with open(DEPLOY_CONFIG) as f:
            self.text = f.read()
        self.interval = {}
        probes = self.text[self.text.index("\nprobes:"):]
        for kind in ("rtt", "http", "grpc", "burst"):
            m = re.search(r"^  %s: \{[^}]*\binterval: (\S+?)[,}]" % kind, probes, re.M)
            if m:
                self.interval[kind] = parse_duration(m.group(1))
        # probes.mtu: commented out at the deploy default; --mtu turns it on as the line says.
        m = re.search(r"^  (?:# )?mtu: \{[^}]*\binterval: (\S+?)[,}]", probes, re.M)
        if m and MTU:
            self.interval["mtu"] = parse_duration(m.group(1))
        m = re.search(r"^  dns:\s*\n((?:    .*\n)+)", probes, re.M)
        self.dns_targets = 0
        if m:
            block = m.group(1)
            self.interval["dns"] = parse_duration(re.search(r"interval: (\S+)", block).group(1))
            names = re.search(r"names: \[([^\]]*)\]", block).group(1).split(",")
            resolvers = re.search(r"resolvers: \[([^\]]*)\]", block).group(1).split(",")
            # dns_probe.h: one target per (name, form, resolver), forms as_written and absolute,
            # plus one "servers" target.
            self.dns_targets = 2 * len(names) * len(resolvers) + 1
        burst = re.search(r"^  burst: \{([^}]*)\}", probes, re.M)
        self.burst = None
        if burst:
            b = burst.group(1)
            self.burst = {
                "duration_s": parse_duration(re.search(r"duration: (\S+?)[,}]", b + "}").group(1)),
                "streams": [int(s) for s in re.search(r"streams: \[([^\]]*)\]", b).group(1)
                            .split(",")],
                "cap_bytes": parse_size(re.search(r"max_bytes_per_hour: ([^,}]+)", b + "}")
                                        .group(1)),
                "coordinated": None,
            }
            if "kubernetes:" in self.text:
                # probes.burst.coordinated, its defaults when absent (exporter/config/kinds/burst.h).
                period = re.search(r"coordinated: \{[^}]*\bperiod: (\S+?)[,} ]", b + "}")
                per_burst = re.search(r"max_bytes_per_burst: ([^,} ]+)", b + "}")
                self.burst["coordinated"] = {
                    "period_s": max(parse_duration(period.group(1)) if period else 6 * 3600,
                                    self.interval["burst"]),
                    "max_bytes": parse_size(per_burst.group(1)) if per_burst else 500e6,
                }
        self.peers_per_zone = int(re.search(r"peers_per_zone: (\d+)", self.text).group(1))
        with open(PODMONITOR) as f:
            m = re.search(r"^\s+interval: (\S+)", f.read(), re.M)
        self.scrape_interval_s = parse_duration(m.group(1))

    def adapted(self, resolv_conf, own_burst_port, own_grpc_port):
        """The config the bench runs ("{port}" left for labkit.start_exporter), and what was
        changed, as lines to print. Every change must match exactly once: if the deploy file
        changes shape, the bench says so instead of measuring something else."""
        text = self.text
        changes = []

        def sub(pattern, repl, why):
            nonlocal text
            new, n = re.subn(pattern, repl, text, flags=re.M)
            if n != 1:
                raise B.BenchBroken("deploy config: %r matched %d times (expected once): update "
                                    "bench/lib/cluster_cost.py" % (pattern, n))
            text = new
            changes.append(why)

        sub(r'^listen_address: "\[::\]:9479"', 'listen_address: "127.0.0.1:{port}"',
            "listen_address, udp_echo, burst and grpc responders on 127.0.0.1 (free ports): the "
            "measured Pod's own servers, which no peer probes here; Prometheus scrapes "
            "127.0.0.1:PORT")
        sub(r'udp_echo: \{ listen_address: "\[::\]:9479" \}',
            'udp_echo: { listen_address: "127.0.0.1:{port}" }', None)
        sub(r'burst: \{ listen_address: "\[::\]:5201" \}',
            'burst: { listen_address: "127.0.0.1:%d" }' % own_burst_port, None)
        sub(r'grpc: \{ listen_address: "\[::\]:9480" \}',
            'grpc: { listen_address: "127.0.0.1:%d" }' % own_grpc_port, None)
        if NATIVE:
            sub(r"^  native_histograms: false$", "  native_histograms: true",
                "metrics.native_histograms: true (--native-histograms), and the bench Prometheus "
                "with --enable-feature=native-histograms")
        if MTU:
            sub(r"^  (?:# )?mtu: \{([^}]*)\binterval: \S+?([,}])",
                r"  mtu: {\g<1>interval: %ds\g<2>" % BENCH_MTU_INTERVAL_S,
                "probes.mtu on (--mtu; the deploy default has it commented out), interval %gs -> "
                "%ds so that every peer has rounds within the window; bytes are scaled back to "
                "the deployed interval" % (self.interval["mtu"], BENCH_MTU_INTERVAL_S))
        sub(r"resolv_conf: /etc/resolv\.conf", "resolv_conf: %s" % resolv_conf,
            "probes.dns.resolv_conf: an EKS-shaped resolv.conf (4 search domains, ndots:5) "
            "whose nameserver is the same-zone CoreDNS replica")
        if self.burst:
            sub(r"^(  burst: \{[^}]*\binterval: )\S+?,", r"\g<1>%ds," % BENCH_BURST_INTERVAL_S,
                "probes.burst.interval %gs -> %ds, so that every peer is burst within the window;"
                " bytes are scaled back to the deployed interval"
                % (self.interval["burst"], BENCH_BURST_INTERVAL_S))
            if self.burst["coordinated"]:
                sub(r"(coordinated: \{[^}]*\bperiod: )\S+?([,} ])",
                    r"\g<1>%ds\g<2>" % BENCH_BURST_INTERVAL_S,
                    "probes.burst.coordinated.period %gs -> %ds, so that this Pod is the prober of "
                    "some pairs within the window (its bursts give the wire overhead); the cluster's "
                    "burst bytes are computed for the deployed period"
                    % (self.burst["coordinated"]["period_s"], BENCH_BURST_INTERVAL_S))
        changes.append("self from the environment as the DaemonSet sets it: POD_NAME=%s "
                       "NODE_NAME=%s POD_ZONE= (zone read from the Node: zone-a)"
                       % (SELF["POD_NAME"], SELF["NODE_NAME"]))
        changes.append("--kubeconfig: the stand-in API server's address, CA and token (in a "
                       "cluster: the in-cluster service account)")
        changes.append("net.ipv4.ping_group_range=\"0 2147483647\" in the namespace, as the "
                       "DaemonSet's securityContext.sysctls")
        return text, [c for c in changes if c]


# ---------------------------------------------------------------------------------------------
# Kernel byte counters: a chain of the bench's own in the namespace's OUTPUT (on lo, every
# packet, request or reply, passes OUTPUT once). Rules without a target only count.

KIND_MATCH = {
    "rtt": (["-p", "icmp"], ["-p", "icmp"]),
    "http": (["-p", "tcp", "--dport", "9479"], ["-p", "tcp", "--sport", "9479"]),
    "grpc": (["-p", "tcp", "--dport", "9480"], ["-p", "tcp", "--sport", "9480"]),
    "burst": (["-p", "tcp", "--dport", "5201"], ["-p", "tcp", "--sport", "5201"]),
    "dns": (["-p", "udp", "--dport", "53"], ["-p", "udp", "--sport", "53"]),
    # The UDP echo responder: the path-MTU probe's only user at the deploy default (RTT is ICMP).
    "mtu": (["-p", "udp", "--dport", "9479"], ["-p", "udp", "--sport", "9479"]),
}


def ipt(ns, *args, check_rc=True):
    return K.in_ns(ns, "iptables", "-w", "5", *args, check_rc=check_rc, timeout=30)


def counters_install(ns, addrs):
    """One rule per (address, kind, direction) and one per (address, direction) for all
    traffic; returns the rule keys in chain order."""
    counters_remove(ns)
    ipt(ns, "-N", CHAIN)
    ipt(ns, "-I", "OUTPUT", "-j", CHAIN)
    keys = []
    for addr in addrs:
        for kind, (out, back) in KIND_MATCH.items():
            ipt(ns, "-A", CHAIN, "-d", addr, *out)
            keys.append((addr, kind, "sent"))
            ipt(ns, "-A", CHAIN, "-s", addr, *back)
            keys.append((addr, kind, "received"))
        ipt(ns, "-A", CHAIN, "-d", addr)
        keys.append((addr, "all", "sent"))
        ipt(ns, "-A", CHAIN, "-s", addr)
        keys.append((addr, "all", "received"))
    return keys


def counters_zero(ns):
    ipt(ns, "-Z", CHAIN)


def counters_read(ns, keys):
    """{(addr, kind, direction): bytes} in the order counters_install() made the rules."""
    out = ipt(ns, "-L", CHAIN, "-v", "-x", "-n").stdout.splitlines()[2:]
    rows = [line.split() for line in out if line.strip()]
    if len(rows) != len(keys):
        raise B.BenchBroken("iptables chain %s has %d rules, expected %d" % (CHAIN, len(rows),
                                                                             len(keys)))
    return {k: int(r[1]) for k, r in zip(keys, rows)}


def counters_remove(ns):
    ipt(ns, "-D", "OUTPUT", "-j", CHAIN, check_rc=False)
    ipt(ns, "-F", CHAIN, check_rc=False)
    ipt(ns, "-X", CHAIN, check_rc=False)


# ---------------------------------------------------------------------------------------------

def pod_address(name):
    """fake_apiserver.py's address of Pod podnet-NNNNN."""
    i = int(name.rsplit("-", 1)[1])
    return "127.1.%d.%d" % (i // 250, 1 + i % 250)


def path_of(labels):
    """The series' path class: `path_class`, or `path` in a 0.1.0 binary (the "before" runs)."""
    return labels.get("path_class", labels.get("path", "unknown"))


def prometheus_config(path, port, scrape_s):
    with open(path, "w") as f:
        f.write("global: { scrape_interval: %ds, scrape_timeout: %ds }\n"
                "scrape_configs:\n  - job_name: podnet\n"
                "    static_configs: [ { targets: [ \"127.0.0.1:%d\" ] } ]\n"
                % (scrape_s, min(scrape_s, 10), port))


def start_prometheus(ns, tmp, tag, target_port, scrape_s, max_seconds):
    folder = os.path.join(tmp, "prometheus-" + tag)
    os.makedirs(folder)
    cfg = os.path.join(folder, "prometheus.yml")
    prometheus_config(cfg, target_port, scrape_s)
    port = K.free_port(ns)
    p = K.start(ns, ["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + folder,
                     "--web.listen-address=127.0.0.1:%d" % port,
                     "--enable-feature=extra-scrape-metrics" + (",native-histograms" if NATIVE
                                                                 else ""),
                     "--log.level=warn"],
                os.path.join(tmp, "prometheus-%s.log" % tag), max_seconds=max_seconds)
    K.wait_for(lambda: p.poll() is not None
               or K.http(ns, "http://127.0.0.1:%d/-/ready" % port, timeout=2)[0] == 200, 60,
               "prometheus ready")
    if p.poll() is not None:
        log = os.path.join(tmp, "prometheus-%s.log" % tag)
        raise B.BenchBroken("prometheus exited:\n" + K.tail(log))
    return p, port


def family_table(samples, n_peers):
    """{family: (series with a peer label, series without)} of one scrape; a histogram's _bucket,
    _sum and _count are one family."""
    fam = {}
    for name, labels, _v in samples:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        per_peer, per_pod = fam.get(base, (0, 0))
        if "peer" in labels:
            per_peer += 1
        else:
            per_pod += 1
        fam[base] = (per_peer, per_pod)
    return fam


def one_size(args, d, exe, ns, tmp, nodes, dns_file, resolv):
    tag = "n%d" % nodes
    K.log("-- %d nodes" % nodes)
    api_max = args.seconds + 240
    api, kcfg_path = fake_apiserver.start(
        os.path.join(tmp, tag), TOKEN,
        ["--nodes", str(nodes), "--zones", str(ZONES), "--churn", "0", "--max-seconds",
         str(api_max), "--extra-service", "kube-system/kube-dns=" + dns_file],
        ns=ns, name="bench", max_seconds=api_max + 30)
    ports = set()
    while len(ports) < 2:
        ports.add(K.free_port(ns))
    own_burst, own_grpc = sorted(ports)
    config, _changes = d.adapted(resolv, own_burst, own_grpc)
    os.environ.update(SELF)  # ${POD_NAME} etc., expanded by the exporter as in the DaemonSet

    def start_exporter(name):
        return K.start_exporter(exe, os.path.join(tmp, tag), config,
                                ["--kubeconfig=" + kcfg_path], ns=ns, name=name,
                                ready="/-/ready", timeout=60, max_seconds=args.seconds + 200)

    def chosen_peers(port):
        """{peer: path class} once every peer the exporter chose has RTT series (its first
        round starts at a random phase within the RTT interval; the kernel answers ICMP)."""
        state = {}

        def known():
            s = K.parse_metrics(K.scrape(port, ns, timeout=30))
            want = sum(v for n, _l, v in s if n == "podnet_peers")
            state["peers"] = {l["peer"]: path_of(l) for n, l, _v in s
                              if n == "podnet_rtt_packets_sent_total" and "peer" in l}
            return want > 0 and len(state["peers"]) == want

        K.wait_for(known, d.interval.get("rtt", 10) + 30, "the exporter's peers (RTT series)")
        return state["peers"]

    # A first start learns which peers the exporter picks (rendezvous hashing over the same Pod
    # list picks the same ones again); each gets a responder of its own on its address, as each
    # peer Pod is one (one responder for all would meet its per-source connection limits).
    first, port = start_exporter("discovery")
    peers = chosen_peers(port)
    K.stop(first)
    responders = []
    for name in sorted(peers):
        i = int(name.rsplit("-", 1)[1])
        cfg = os.path.join(tmp, tag, "responder-%s.yaml" % name)
        with open(cfg, "w") as f:
            f.write(RESPONDER_CONFIG % dict(PEER_PORTS, addr=pod_address(name), name=name,
                                            node="node-%d" % i, zone="zone-%s" % "abc"[i % 3]))
        responders.append(K.start(ns, [exe, "--config.file=" + cfg], cfg[:-5] + ".log",
                                  max_seconds=args.seconds + 300))
    for name, p in zip(sorted(peers), responders):
        url = "http://%s:%d/-/ready" % (pod_address(name), PEER_PORTS["http"])
        K.wait_for(lambda: p.poll() is not None or K.http(ns, url, timeout=2)[0] == 200, 30,
                   "responder " + name)
        if p.poll() is not None:
            raise B.BenchBroken("responder %s exited:\n%s" % (
                name, K.tail(os.path.join(tmp, tag, "responder-%s.log" % name))))
    exp, port = start_exporter("exporter")
    prom, prom_port = start_prometheus(ns, tmp, tag, port, args.scrape_every, args.seconds + 200)
    again = chosen_peers(port)
    if again != peers:
        raise B.BenchBroken("the exporter chose other peers on its second start: %s vs %s"
                            % (sorted(again), sorted(peers)))
    addrs = {pod_address(p): c for p, c in peers.items()}
    for a, (_node, zone) in DNS_REPLICAS.items():
        addrs[a] = "same_zone" if zone == "zone-a" else "cross_zone"
    keys = counters_install(ns, sorted(addrs))
    counters_zero(ns)
    s0 = K.parse_metrics(K.scrape(port, ns, timeout=30))
    t0 = time.monotonic()
    while time.monotonic() - t0 < args.seconds:
        if exp.poll() is not None:
            raise B.BenchBroken("exporter exited during the window:\n"
                                + K.tail(os.path.join(tmp, tag, "exporter.log")))
        time.sleep(min(2.0, max(0.0, args.seconds - (time.monotonic() - t0))))
    s1 = K.parse_metrics(K.scrape(port, ns, timeout=30))
    kernel = counters_read(ns, keys)
    window = time.monotonic() - t0
    counters_remove(ns)

    # Prometheus's view: wait for one scrape after the window, then read the last one.
    last = K.promql_value(ns, "timestamp(up{job=\"podnet\"})", prom_port)
    K.wait_for(lambda: K.promql_value(ns, "timestamp(up{job=\"podnet\"})", prom_port) > last,
               args.scrape_every + 15, "one more scrape")
    samples_scraped = K.promql_value(ns, "scrape_samples_scraped{job=\"podnet\"}", prom_port)
    body_bytes = K.promql_value(ns, "scrape_body_size_bytes{job=\"podnet\"}", prom_port)
    synthetic = K.promql_value(ns, "count({__name__=~\"up|scrape_.+\"})", prom_port)
    head = [v for n, _l, v in K.parse_metrics(K.scrape(prom_port, ns, timeout=30))
            if n == "prometheus_tsdb_head_series"]
    head_series = head[0] if head else float("nan")
    _t, gzip_bytes, code = B.curl_timing("http://127.0.0.1:%d/metrics" % port, ns=ns, gzip=True)
    if code != 200:
        raise B.BenchBroken("/metrics (gzip) answered %d" % code)
    text = K.scrape(port, ns, timeout=30)
    identity_bytes = len(text.encode())
    fams = family_table(K.parse_metrics(text), len(peers))
    errors = {"%s/%s" % (l.get("probe"), l.get("reason")): v for n, l, v in s1
              if n == "podnet_probe_errors_total" and v > 0}
    burst_peers = {l["peer"] for n, l, _v in s1
                   if n == "podnet_burst_sent_bytes_total" and "peer" in l}
    for p in [exp, prom, api] + responders:
        K.stop(p)

    def rounds(s, kind):
        return sum(v for n, l, v in s if n == "podnet_probe_round_start_delay_seconds_count"
                   and l.get("probe") == kind)

    def own_bytes(s, kind):
        acc = {}
        for n, l, v in s:
            if n in ("podnet_probe_sent_bytes_total", "podnet_probe_received_bytes_total") \
                    and l.get("probe") == kind:
                acc[path_of(l)] = acc.get(path_of(l), 0.0) + v
        return acc

    n_class = {c: sum(1 for x in peers.values() if x == c) for c in CLASSES}
    kinds = {}
    for kind in KINDS:
        if kind not in d.interval:
            continue
        by_class = {c: 0.0 for c in CLASSES}
        for (addr, k, _dir), b in kernel.items():
            if k == kind:
                by_class[addrs[addr]] = by_class.get(addrs[addr], 0.0) + b
        total = sum(by_class.values())
        r = rounds(s1, kind) - rounds(s0, kind)
        interval = d.interval[kind]
        if kind == "dns":
            targets = d.dns_targets
            # Split by the class of the replica each byte went to, as measured.
            hour = {c: (total / r * targets * 3600 / interval * by_class[c] / total
                        if r and total else 0.0) for c in CLASSES}
        else:
            # Every peer's round is the same work: bytes per peer-round x peers of the class.
            per_round = total / r if r else 0.0
            hour = {c: per_round * n_class[c] * 3600 / interval for c in CLASSES}
        if kind == "burst" and d.burst["coordinated"]:
            co = d.burst["coordinated"]
            payload = sum(v for n, l, v in s1 if n == "podnet_burst_sent_bytes_total") - sum(
                v for n, l, v in s0 if n == "podnet_burst_sent_bytes_total")
            overhead = total / payload if payload > 0 and total > 0 else BURST_WIRE_OVERHEAD
            link = args.link_gbps * 1e9 / 8 * d.burst["duration_s"]
            per_burst = min(co["max_bytes"], link) * overhead
            # Ordered zone pairs: ZONES same-zone, ZONES x (ZONES - 1) cross-zone; one round of
            # len(streams) bursts each per period for the whole cluster; this Pod's share: / N.
            pairs = {"same_node": 0, "same_zone": ZONES, "cross_zone": ZONES * (ZONES - 1)}
            cluster_hour = {c: pairs.get(c, 0) * len(d.burst["streams"]) * per_burst * 3600
                            / co["period_s"] for c in CLASSES}
            hour = {c: v / nodes for c, v in cluster_hour.items()}
            kinds["burst_info"] = {"coordinated": True, "overhead": overhead,
                                   "measured_overhead": payload > 0 and total > 0,
                                   "per_burst": per_burst, "cluster_hour": cluster_hour,
                                   "window_bytes": total, "window_payload": payload}
        elif kind == "burst":
            d_burst = {"per_round": per_round, "hour_uncapped": dict(hour)}
            cap = d.burst["cap_bytes"]
            unc = sum(hour.values())
            scale = min(1.0, cap / unc) if unc else 1.0
            hour = {c: v * scale for c, v in hour.items()}
            d_burst["capped"] = scale < 1.0
            # The same at a modelled link rate (loopback is far faster than a node's NIC).
            link = args.link_gbps * 1e9 / 8 * d.burst["duration_s"] * len(d.burst["streams"])
            link_hour = link * len(peers)
            d_burst["link_round"] = link
            d_burst["link_hour_uncapped"] = link_hour
            kinds["burst_info"] = d_burst
        own0, own1 = own_bytes(s0, kind), own_bytes(s1, kind)
        own = sum(own1.values()) - sum(own0.values())
        kinds[kind] = {"kernel_window": by_class, "kernel_total": total, "rounds": r,
                       "hour": hour, "own_window": own}
    other = sum(b for (a, k, _d), b in kernel.items() if k == "all") - sum(
        b for (a, k, _d), b in kernel.items() if k != "all")
    return {"nodes": nodes, "peers": peers, "n_class": n_class, "samples_scraped": samples_scraped,
            "body_bytes": body_bytes, "identity_bytes": identity_bytes, "gzip_bytes": gzip_bytes,
            "head_series": head_series, "synthetic": synthetic, "fams": fams, "kinds": kinds,
            "window_s": window, "unclassified_bytes": other, "errors": errors,
            "burst_peers": len(burst_peers)}


# ---------------------------------------------------------------------------------------------
# Prices and the alternatives' metric sets

def sample_cost(samples_per_month, tiers):
    """$ for a month's samples over [(samples in tier or inf, $ per 10 M)]."""
    left, usd = samples_per_month, 0.0
    for size, price in tiers:
        take = min(left, size)
        usd += take / 1e7 * price
        left -= take
        if left <= 0:
            break
    return usd


def parse_tiers(text):
    out = []
    for part in text.split(","):
        size, _, price = part.partition(":")
        out.append((math.inf if size.strip() == "inf" else float(size), float(price)))
    return out


def goldpinger_series(nodes):
    """bloomberg/goldpinger pkg/goldpinger/stats.go (v3): per peer
    goldpinger_peers_response_time_s{goldpinger_instance, call_type="ping", host_ip, pod_ip},
    12 buckets -> 12 + Inf + sum + count = 15 series; every other Pod is a peer by default
    (--ping-number 0, pkg/goldpinger/config.go). Per Pod: goldpinger_kube_master_response_time_s
    15, goldpinger_nodes_health_total 2, goldpinger_cluster_health_total 1, goldpinger_stats_total
    {made,received} x ping 2 = 20 (errors only when they happen; Go runtime and process
    collectors not counted)."""
    return 15 * (nodes - 1) + 20


def kubenurse_series(nodes):
    """postfinance/kubenurse README "metrics" + internal/servicecheck/httptrace.go: histograms
    with client_golang's DefBuckets (11 -> 14 series each). Per neighbour (type=path_NODE,
    KUBENURSE_NEIGHBOUR_LIMIT default 10): kubenurse_httpclient_request_duration_seconds 14,
    kubenurse_httpclient_trace_request_duration_seconds{event} for got_conn, connect_start,
    connect_done, wrote_request, got_first_resp_byte 5 x 14 = 70,
    kubenurse_httpclient_requests_total{code} 1 -> 85. Per Pod: the 4 other checks
    (api_server_direct: HTTPS by IP, 7 events; api_server_dns and me_ingress: HTTPS by name, 9;
    me_service: HTTP by name, 7) 32 x 14 + 4 x 14 + 4 = 508, and
    kubenurse_neighbourhood_incoming_checks 1 = 509 (errors only when they happen; runtime
    metrics not counted)."""
    return 85 * min(10, nodes - 1) + 509


# ---------------------------------------------------------------------------------------------

def fmt_int(x):
    return "{:,.0f}".format(x)


def fmt_bytes(x):
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= div:
            return "%.2f %s" % (x / div, unit)
    return "%.0f B" % x


def fmt_usd(x):
    return "${:,.2f}".format(x) if x < 100 else "${:,.0f}".format(x)


def report(args, d, runs, changes, tiers):
    K.log("")
    K.log("== Series and scrape bytes, one Pod (a real Prometheus's counts) and the cluster; "
          "samples/s at the shipped scrape interval %gs (%s)" % (d.scrape_interval_s,
                                                              os.path.relpath(PODMONITOR, B.REPO)))
    rows = []
    for m in runs:
        per_pod = m["head_series"] - m["synthetic"]
        sps = m["samples_scraped"] / d.scrape_interval_s
        month = sps * m["nodes"] * 3600 * HOURS_PER_MONTH
        m.update(per_pod=per_pod, month_samples=month, metrics_usd=sample_cost(month, tiers))
        rows.append([fmt_int(m["nodes"]), "%d (%d/%d/%d)" % (len(m["peers"]),
                                                             m["n_class"]["same_node"],
                                                             m["n_class"]["same_zone"],
                                                             m["n_class"]["cross_zone"]),
                     fmt_int(per_pod), fmt_int(m["samples_scraped"]),
                     fmt_int(m["body_bytes"]), fmt_int(m["gzip_bytes"]), "%.1f" % sps,
                     fmt_int(sps * m["nodes"]), fmt_int(per_pod * m["nodes"]),
                     "%.2f B" % (month / 1e9), fmt_usd(m["metrics_usd"])])
    B.table(["nodes", "peers (node/zone/cross)", "series/Pod (head)", "samples/scrape",
             "bytes/scrape", "gzip bytes", "samples/s/Pod", "samples/s cluster",
             "series cluster", "samples/month", "$/month metrics"], rows)

    K.log("")
    K.log("== Probe bytes per hour by path class (sent + received, kernel counters on lo, "
          "scaled from bytes per round to the configured intervals; bursts capped at %s/h)"
          % fmt_bytes(d.burst["cap_bytes"]) if d.burst else "")
    rows = []
    for m in runs:
        tot = {c: sum(m["kinds"][k]["hour"][c] for k in KINDS if k in m["kinds"]) for c in CLASSES}
        m["hour_by_class"] = tot
        cross_cluster = tot["cross_zone"] * m["nodes"]
        m["probe_usd"] = cross_cluster / 1e9 * args.usd_per_gb * HOURS_PER_MONTH
        rows.append([fmt_int(m["nodes"])] + [fmt_bytes(tot[c]) for c in CLASSES]
                    + [fmt_bytes(tot[c] * m["nodes"]) for c in CLASSES]
                    + [fmt_usd(m["probe_usd"])])
    B.table(["nodes", "Pod same_node", "Pod same_zone", "Pod cross_zone", "cluster same_node",
             "cluster same_zone", "cluster cross_zone", "$/month cross-zone"], rows)

    K.log("")
    K.log("== Per probe kind, one Pod (per hour; in brackets: bytes in the %.0f s window, kernel "
          "/ the exporter's own podnet_probe_*_bytes_total, rounds)" % runs[0]["window_s"])
    rows = []
    for m in runs:
        for k in KINDS:
            if k not in m["kinds"]:
                continue
            x = m["kinds"][k]
            rows.append([fmt_int(m["nodes"]), k, "%gs" % d.interval[k]]
                        + [fmt_bytes(x["hour"][c]) for c in CLASSES]
                        + ["%s / %s, %d" % (fmt_bytes(x["kernel_total"]),
                                            fmt_bytes(x["own_window"]) if x["own_window"]
                                            else "-", x["rounds"])])
    B.table(["nodes", "kind", "interval", "same_node/h", "same_zone/h", "cross_zone/h",
             "window: kernel / own, rounds"], rows)
    if d.burst:
        for m in runs:
            bi = m["kinds"].get("burst_info")
            if not bi:
                continue
            if bi.get("coordinated"):
                co = d.burst["coordinated"]
                K.log("bursts, %d nodes: coordinated, one round (streams %s) per ordered zone pair "
                      "every %gs cluster-wide; %s per burst (min(max_bytes_per_burst %s, %g Gbit/s "
                      "x %gs) x wire overhead %.3f, %s); cluster: %s/h cross-zone, %s/h same-zone, "
                      "whatever the node count; this Pod in the window: %s on the wire for %s "
                      "payload"
                      % (m["nodes"], d.burst["streams"], co["period_s"],
                         fmt_bytes(bi["per_burst"]), fmt_bytes(co["max_bytes"]), args.link_gbps,
                         d.burst["duration_s"], bi["overhead"],
                         "measured" if bi["measured_overhead"] else "assumed: it ran no burst",
                         fmt_bytes(bi["cluster_hour"]["cross_zone"]),
                         fmt_bytes(bi["cluster_hour"]["same_zone"]),
                         fmt_bytes(bi["window_bytes"]), fmt_bytes(bi["window_payload"])))
                continue
            K.log("bursts, %d nodes: %s per peer-round on loopback (streams %s, %gs each); %d "
                  "peers x 1 round/%gs = %s/h uncapped -> %s/h with max_bytes_per_hour (%s); "
                  "at %g Gbit/s per burst: %s per peer-round, %s/h uncapped -> %s/h capped; "
                  "burst series for %d of %d peers"
                  % (m["nodes"], fmt_bytes(bi["per_round"]), d.burst["streams"],
                     d.burst["duration_s"], len(m["peers"]), d.interval["burst"],
                     fmt_bytes(sum(bi["hour_uncapped"].values())),
                     fmt_bytes(sum(m["kinds"]["burst"]["hour"].values())),
                     "binds" if bi["capped"] else "does not bind", args.link_gbps,
                     fmt_bytes(bi["link_round"]), fmt_bytes(bi["link_hour_uncapped"]),
                     fmt_bytes(min(bi["link_hour_uncapped"], d.burst["cap_bytes"])),
                     m["burst_peers"], len(m["peers"])))
    for m in runs:
        if m["unclassified_bytes"]:
            K.log("%d nodes: %s to/from peers matched no probe kind" % (
                m["nodes"], fmt_bytes(m["unclassified_bytes"])))
        if m["errors"]:
            K.log("%d nodes: probe errors in the run: %s" % (m["nodes"], m["errors"]))

    K.log("")
    ref = runs[len(runs) // 2]
    K.log("== Series arithmetic (--config.check style), from the %d-node scrape: per Pod = "
          "per-peer series x peers + per-Pod series" % ref["nodes"])
    n = len(ref["peers"])
    rows = []
    tot_peer = tot_pod = 0
    for fam, (pp, po) in sorted(ref["fams"].items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        tot_peer += pp
        tot_pod += po
        rows.append([fam, "%.1f" % (pp / n if n else 0), fmt_int(po), fmt_int(pp + po)])
    B.table(["family", "per peer", "per Pod", "total"], rows[:25])
    if len(rows) > 25:
        K.log("... and %d smaller families" % (len(rows) - 25))
    K.log("per Pod: %.1f per peer x %d peers + %d = %d series (sample lines of the last scrape)"
          % (tot_peer / n if n else 0, n, tot_pod, tot_peer + tot_pod))
    for m in runs:
        K.log("  %6s nodes: %s per Pod x %s Pods = %s series; / %gs = %s samples/s; x %d h = "
              "%.2f billion samples/month" % (
                  fmt_int(m["nodes"]), fmt_int(m["per_pod"]), fmt_int(m["nodes"]),
                  fmt_int(m["per_pod"] * m["nodes"]), d.scrape_interval_s,
                  fmt_int(m["per_pod"] * m["nodes"] / d.scrape_interval_s), HOURS_PER_MONTH,
                  m["per_pod"] * m["nodes"] / d.scrape_interval_s * 3600 * HOURS_PER_MONTH / 1e9))

    K.log("")
    K.log("== Side by side: series per Pod and per cluster, and $/month for metrics at the same "
          "%gs scrape interval (goldpinger: 15 x (N-1) + 20; kubenurse: 85 x min(10, N-1) + 509;"
          " see --help)" % d.scrape_interval_s)
    rows = []
    for m in runs:
        nn = m["nodes"]
        cells = [fmt_int(nn)]
        for per_pod in (m["per_pod"], goldpinger_series(nn), kubenurse_series(nn)):
            month = per_pod * nn / d.scrape_interval_s * 3600 * HOURS_PER_MONTH
            cells += [fmt_int(per_pod), fmt_int(per_pod * nn), fmt_usd(sample_cost(month, tiers))]
        rows.append(cells)
    B.table(["nodes", "podnet/Pod", "podnet cluster", "podnet $/mo", "goldpinger/Pod",
             "goldpinger cluster", "goldpinger $/mo", "kubenurse/Pod", "kubenurse cluster",
             "kubenurse $/mo"], rows)
    K.log("")
    K.log("prices: samples %s (first tier, then the rest; --sample-tiers); cross-zone $%.3f per "
          "GB crossing (--usd-per-gb); month = %d h" % (
              ", ".join("%s at $%.2f/10M" % ("rest" if math.isinf(s) else "%.0f B" % (s / 1e9), p)
                        for s, p in tiers), args.usd_per_gb, HOURS_PER_MONTH))
    K.log("changed from the deploy default for the bench:")
    for c in changes:
        K.log("  - " + c)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: v for k, v in m.items() if k != "fams"} for m in runs], f, indent=1,
                      default=str)
        K.log("figures written to %s" % args.json)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog=goldpinger_series.__doc__ + "\n" + kubenurse_series.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exporter")
    ap.add_argument("--nodes", default="30,300,3000", help="cluster sizes (comma-separated)")
    ap.add_argument("--seconds", type=float, default=75, help="probing window per size")
    ap.add_argument("--scrape-every", type=int, default=10,
                    help="the bench Prometheus's scrape interval (s); costs use the shipped one")
    ap.add_argument("--sample-tiers", default="2e9:0.90,inf:0.35",
                    help="managed Prometheus ingestion, SAMPLES:USD_PER_10M,... (default: "
                         "Amazon Managed Service for Prometheus, https://aws.amazon.com/"
                         "prometheus/pricing/: $0.90 per 10 M for the first 2 billion samples a "
                         "month, $0.35 after; its lower tier past ~250 billion is not applied)")
    ap.add_argument("--usd-per-gb", type=float, default=0.02,
                    help="cross-zone transfer per GB crossing: AWS EC2 $0.01/GB out of one AZ + "
                         "$0.01/GB into the other (https://aws.amazon.com/ec2/pricing/on-demand/,"
                         " Data Transfer within the same AWS Region)")
    ap.add_argument("--link-gbps", type=float, default=5.0,
                    help="a burst's rate on a real path, for the modelled burst bytes (the "
                         "design's reference: one flow capped at 4.96 Gbit/s between nodes)")
    ap.add_argument("--native-histograms", action="store_true",
                    help="metrics.native_histograms: true, scraped by a Prometheus with "
                         "--enable-feature=native-histograms (series as it stores them)")
    ap.add_argument("--mtu", action="store_true",
                    help="probes.mtu on, as the deploy ConfigMap's commented line says (its "
                         "series and bytes with the rest)")
    ap.add_argument("--json", metavar="FILE",
                    help="also write every figure as JSON (before/after comparisons)")
    args = ap.parse_args()
    global NATIVE, MTU
    NATIVE = args.native_histograms
    MTU = args.mtu
    B.install_signal_handlers()
    B.require_root()
    B.require_tools("ip", "iptables", "curl", "openssl", "prometheus", "unbound")
    tiers = parse_tiers(args.sample_tiers)
    d = Deploy()
    sizes = [int(x) for x in args.nodes.split(",")]
    exe, version, bindir = B.exporter_binary(args.exporter)
    ns = os.environ.get("PODNET_BENCH_NS", "pnbenchcost")
    tmp = tempfile.mkdtemp(prefix="podnet-bench-cost-")
    K.log("== cluster_cost: sizes %s, %d zones, %.0f s window each; deploy default %s"
          % (sizes, ZONES, args.seconds, os.path.relpath(DEPLOY_CONFIG, B.REPO)))
    K.log("exporter: %s, git %s" % (version, B.git_describe()))
    K.log("machine:  %s" % B.machine_line())
    K.log("deploy: intervals %s, peers_per_zone %d, burst %s, DNS targets %d, scrape every %gs"
          % ({k: "%gs" % v for k, v in d.interval.items()}, d.peers_per_zone, d.burst,
             d.dns_targets, d.scrape_interval_s))
    warning = B.busy_warning()
    if warning:
        K.log(warning + " (counts and bytes do not depend on it)")
    runs = []
    _text, changes = d.adapted("RESOLV", 0, 0)
    try:
        B.netns_add(ns)
        K.in_ns(ns, "sysctl", "-q", "-w", "net.ipv4.ping_group_range=0 2147483647")
        for a in DNS_REPLICAS:
            folder = os.path.join(tmp, "unbound-" + a)
            os.makedirs(folder)
            K.start_unbound(ns, folder, address=a)
        dns_file = os.path.join(tmp, "kube-dns.json")
        with open(dns_file, "w") as f:
            json.dump([{"addresses": [a], "conditions": {"ready": True, "serving": True,
                                                         "terminating": False},
                        "targetRef": {"kind": "Pod", "namespace": "kube-system",
                                      "name": "coredns-%d" % i},
                        "nodeName": node, "zone": zone}
                       for i, (a, (node, zone)) in enumerate(sorted(DNS_REPLICAS.items()))], f)
        resolv = os.path.join(tmp, "resolv.conf")
        with open(resolv, "w") as f:
            f.write(RESOLV_CONF)
        for nodes in sizes:
            os.makedirs(os.path.join(tmp, "n%d" % nodes))
            runs.append(one_size(args, d, exe, ns, tmp, nodes, dns_file, resolv))
    except BaseException:
        K.dump_logs(tmp, 15) if os.path.isdir(tmp) else None
        raise
    finally:
        try:
            counters_remove(ns) if ns in B.netns_list() else None
        finally:
            K.stop_all()
            B.netns_del(ns)
            shutil.rmtree(bindir, ignore_errors=True)
            if os.environ.get("PODNET_BENCH_KEEP"):
                K.log("kept %s (PODNET_BENCH_KEEP)" % tmp)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
    report(args, d, runs, changes, tiers)
    return 0


if __name__ == "__main__":
    B.main_wrapper(main)
