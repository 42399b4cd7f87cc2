"""The proving ground's faults (each at a target of a tests/lib/fleet.py Fleet, with the truth a
correct alert names) and what an alert names (subjects), shared by bench/proving_ground.sh and
lab_fleet. A fault's clear() puts back what it changed; every one of them acts only inside the
fleet's own namespaces (iptables in a node or zone router, a delay line, a resolv.conf file, a
DNS server process) or on its exporter's cgroup.

  node_blackhole       every packet in and out of a node dropped (its scrapes too)
  node_gray_loss       0.5-2 % random loss on a node's link, both ways
  node_latency         0.5-2 ms more one way on a node's link (a delay line takes its place)
  bad_prober           a node's exporter held to 2 % of a core (cgroup v1 cpu controller)
  zone_pair_latency    0.3-1 ms more one way on the link between two zones
  zone_pair_loss       2-10 % round-trip loss on the link between two zones
  zone_cut             the link between two zones drops everything
  path_mtu_blackhole   packets over 1,280-1,420 bytes from one zone to another vanish, no ICMP
                       (one way; needs probes.mtu on: Fleet(mtu=True))
  dns_slow             one DNS replica 20-80 ms further away
  dns_servfail         one DNS replica answers SERVFAIL to everything
  dns_amplification    every node's resolv.conf gains two search domains
  service_leaves_zone  a zone's nodes send the Service VIP to backends in every zone
"""
import os
import random
import sys

import labkit

import fleet as F

DNS_FAULT_SERVER = os.path.join(F.ROOT, "tests", "lib", "dns_fault_server.py")


class Fault:
    """An injected fault: `kind`, `truth` (what a correct alert names), `clear()`."""

    def __init__(self, kind, truth, undo, detail=""):
        self.kind, self.truth, self._undo, self.detail = kind, truth, undo, detail
        self.cleared = False

    def clear(self):
        if not self.cleared:
            self.cleared = True
            self._undo()


def _drop(fleet, ns, rules, probability=None):
    """Inserts DROP rules in namespace ns's filter table: `rules` are [chain, match...] lists;
    with `probability`, each drops that share at random (the `statistic` match). Returns the
    undo (deletes them)."""
    stat = (["-m", "statistic", "--mode", "random", "--probability", "%.5f" % probability]
            if probability else [])
    rules = [r + stat + ["-j", "DROP"] for r in rules]
    for r in rules:
        fleet.iptables(ns, "-I", r[0], "1", *r[1:])
    return lambda: [fleet.iptables(ns, "-D", *r) for r in rules]


def _node_drop(fleet, n, probability=None):
    return _drop(fleet, fleet.ns(n), [["INPUT", "-i", "eth0"], ["OUTPUT", "-o", "eth0"]],
                 probability)


def fault_node_blackhole(fleet, n):
    """Every packet in and out of node n dropped (its scrapes too)."""
    return Fault("node_blackhole", ("node", n.name), _node_drop(fleet, n))


def fault_node_gray_loss(fleet, n, loss=None, rng=random):
    """Random loss on node n: each direction drops `loss`/2, so a round trip through it loses
    ~`loss` (0.5-2 %)."""
    loss = loss or rng.uniform(0.005, 0.02)
    return Fault("node_gray_loss", ("node", n.name), _node_drop(fleet, n, loss / 2),
                 "%.2f %% round trip" % (loss * 100))


def fault_node_latency(fleet, n, added_us=None, rng=random):
    """`added_us` more one way on node n's delay line (0.5-2 ms: its RTTs + 1-4 ms)."""
    added_us = added_us or int(rng.uniform(500, 2000))
    name = "node-%d" % n.i
    fleet.detour(name, added_us)
    return Fault("node_latency", ("node", n.name), lambda: fleet.detour(name, 0),
                 "+%d us one way" % added_us)


def fault_bad_prober(fleet, n, quota=0.02):
    """Node n's exporter starved of CPU: a cgroup (v1 cpu controller) holding it to `quota` of
    one core. Its responders share the starvation (one process), as in a real Pod."""
    if not os.path.isfile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        raise labkit.Broken("bad_prober needs cgroup v1's cpu controller at /sys/fs/cgroup/cpu "
                            "(this machine has not got it: leave the class out with --classes)")
    path = "%s-%s" % (fleet.cgroup, n.name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
        f.write("100000")
    with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
        f.write(str(int(100000 * quota)))
    _move_group(n.exporter.pid, path)
    return Fault("bad_prober", ("node", n.name), lambda: _uncgroup(path),
                 "%.0f %% of a core" % (quota * 100))


def _move_group(pid, cgroup):
    """Every process of the session `pid` leads into `cgroup`."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.getsid(int(p)) == pid:
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                    f.write(p)
        except OSError:
            pass


def _uncgroup(path):
    """Moves the processes of cgroup `path` back to the cpu controller's root (where the fleet's
    processes start) and removes it."""
    root = "/sys/fs/cgroup/cpu"
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            pids = [line.strip() for line in f if line.strip()]
    except OSError:
        return
    for p in pids:
        try:
            with open(os.path.join(root, "cgroup.procs"), "w") as f:
                f.write(p)
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def fault_zone_pair_latency(fleet, zones, added_us=None, rng=random):
    """`added_us` more one way on the link between two zones (300-1,000 us)."""
    added_us = added_us or int(rng.uniform(300, 1000))
    x, y, name = fleet.pair_of(*zones)
    base = fleet.base_delay(name)
    fleet.set_delay(name, base + added_us)
    return Fault("zone_pair_latency", ("zones", F.zone_name(x), F.zone_name(y)),
                 lambda: fleet.set_delay(name, base), "+%d us one way" % added_us)


def _pair_drop(fleet, zones, probability=None):
    x, y, _ = fleet.pair_of(*zones)
    undo = _drop(fleet, fleet.zns(x), [["FORWARD", "-o", "p%d" % y], ["FORWARD", "-i", "p%d" % y]],
                 probability)
    return ("zones", F.zone_name(x), F.zone_name(y)), undo


def fault_zone_pair_loss(fleet, zones, loss=None, rng=random):
    """Random loss on the link between two zones: `loss` of a round trip (2-10 %)."""
    loss = loss or rng.uniform(0.02, 0.10)
    truth, undo = _pair_drop(fleet, zones, loss / 2)
    return Fault("zone_pair_loss", truth, undo, "%.1f %% round trip" % (loss * 100))


def fault_zone_cut(fleet, zones):
    """The link between two zones drops everything."""
    truth, undo = _pair_drop(fleet, zones)
    return Fault("zone_cut", truth, undo)


def fault_path_mtu_blackhole(fleet, zones, limit=None, rng=random):
    """A one-way path-MTU black hole: packets from zone zones[0] to zone zones[1] larger than
    `limit` bytes (IP packet, headers included; 1,280-1,420, below the nodes' 1,500) are
    dropped in zones[0]'s router with no ICMP "fragmentation needed" sent back, as a middlebox
    with a smaller MTU whose ICMP is filtered does. The other direction is untouched. An
    iptables `length` match, not a smaller link MTU: a veth drops what exceeds its MTU on
    receive too, which would make the black hole two-way."""
    if not fleet.mtu:
        raise labkit.Broken("path_mtu_blackhole needs probes.mtu on in the fleet (mtu=True)")
    limit = limit or int(rng.uniform(1280, 1420))
    src, dst = zones
    undo = _drop(fleet, fleet.zns(src), [["FORWARD", "-o", "p%d" % dst, "-m", "length",
                                          "--length", "%d:65535" % (limit + 1)]])
    x, y, _ = fleet.pair_of(src, dst)
    return Fault("path_mtu_blackhole", ("zones", F.zone_name(x), F.zone_name(y)), undo,
                 "%s -> %s over %d bytes" % (F.zone_name(src), F.zone_name(dst), limit))


def fault_dns_slow(fleet, k, added_us=None, rng=random):
    """DNS replica k answers late: its delay line + 20-80 ms one way."""
    added_us = added_us or int(rng.uniform(20000, 80000))
    name = "dns-%d" % k
    fleet.detour(name, added_us)
    return Fault("dns_slow", ("dns_server", fleet.dns[k]["address"]),
                 lambda: fleet.detour(name, 0), "+%d ms one way" % (added_us // 1000))


def fault_dns_servfail(fleet, k):
    """DNS replica k answers every question SERVFAIL (unbound replaced by a server that does)."""
    d = fleet.dns[k]
    labkit.stop(d["proc"])
    folder = os.path.join(fleet.tmp, "dns%d" % k)
    bad = labkit.start(d["ns"], [sys.executable, DNS_FAULT_SERVER, "--listen", d["address"],
                                 "--port", "53", "--mode", "servfail", "--max-seconds", "900"],
                       os.path.join(folder, "servfail.log"))

    def undo():
        labkit.stop(bad)
        fleet._start_unbound(d)
    return Fault("dns_servfail", ("dns_server", d["address"]), undo)


def fault_dns_amplification(fleet, _target=None):
    """Every node's resolv.conf gains two search domains (each lookup walks two more)."""
    for n in fleet.nodes:
        fleet._write_resolv(n, F.RESOLV_LONG)
    return Fault("dns_amplification", ("dns_amplification",),
                 lambda: [fleet._write_resolv(n, F.RESOLV) for n in fleet.nodes])


def fault_service_leaves_zone(fleet, z):
    """Zone z's nodes send the Service VIP to every backend, hints ignored."""
    nodes = [n for n in fleet.nodes if n.z == z]
    for n in nodes:
        fleet._node_nat(n, fleet.backends)
    return Fault("service_leaves_zone", ("service", F.SERVICE, F.zone_name(z)),
                 lambda: [fleet._node_nat(n, fleet._zone_backends(z)) for n in nodes])


# kind -> (injector, how a target is drawn: "node", "zone_pair", "dns", "zone", None)
FAULTS = {
    "node_blackhole": fault_node_blackhole,
    "node_gray_loss": fault_node_gray_loss,
    "node_latency": fault_node_latency,
    "bad_prober": fault_bad_prober,
    "zone_pair_latency": fault_zone_pair_latency,
    "zone_pair_loss": fault_zone_pair_loss,
    "zone_cut": fault_zone_cut,
    "path_mtu_blackhole": fault_path_mtu_blackhole,
    "dns_slow": fault_dns_slow,
    "dns_servfail": fault_dns_servfail,
    "dns_amplification": fault_dns_amplification,
    "service_leaves_zone": fault_service_leaves_zone,
}
TARGET_KIND = {
    "node_blackhole": "node", "node_gray_loss": "node", "node_latency": "node",
    "bad_prober": "node", "zone_pair_latency": "zone_pair", "zone_pair_loss": "zone_pair",
    "zone_cut": "zone_pair", "path_mtu_blackhole": "zone_pair", "dns_slow": "dns",
    "dns_servfail": "dns",
    "dns_amplification": None, "service_leaves_zone": "zone",
}


def draw_target(fleet, kind, rng):
    """A random target for fault `kind` in `fleet`."""
    what = TARGET_KIND[kind]
    if what == "node":
        return rng.choice(fleet.live())
    if what == "zone_pair":
        return tuple(rng.sample(range(fleet.zones), 2))
    if what == "dns":
        return rng.randrange(len(fleet.dns))
    if what == "zone":
        return rng.randrange(fleet.zones)
    return None


# ---- what an alert names ------------------------------------------------------------------
def subjects(labels):
    """The fault locations an alert (its labels) names, as truth tuples (Fault.truth's shape):
    a node, a zone pair (unordered), a DNS server, a Service in a zone, DNS amplification, or a
    DNS name. An alert that names a path names its peer node."""
    a = labels.get("alertname", "")
    out = set()
    if a in ("PodnetPeerNodeFault",):
        out.add(("node", labels.get("peer_node", "")))
    elif a in ("PodnetProberFault",):
        out.add(("node", labels.get("source_node", "")))
    elif a == "PodnetPeerUnreachable":
        out.add(("node", labels.get("peer_node", "")))
    elif labels.get("node") and a.startswith("Podnet") and "source_zone" not in labels:
        out.add(("node", labels["node"]))
    if a == "PodnetDNSQueriesPerLookupUp":
        out.add(("dns_amplification",))
    if labels.get("server") and a.startswith("PodnetDNSServer"):
        out.add(("dns_server", labels["server"].rsplit(":", 1)[0].strip("[]")))
    if a == "PodnetServiceTrafficLeavesZone":
        out.add(("service", labels.get("service", ""), labels.get("source_zone", "")))
    if not out and labels.get("source_zone") and labels.get("peer_zone"):
        x, y = sorted((labels["source_zone"], labels["peer_zone"]))
        out.add(("zones", x, y))
    if not out and labels.get("name"):
        out.add(("dns_name", labels["name"]))
    return out


def names(labels, truth):
    """True when the alert with `labels` names `truth`."""
    return tuple(truth) in subjects(labels)
