#!/usr/bin/env python3
"""Cluster DNS server locality in the lab (docs/dns.md "Cluster DNS server locality").

Three real unbound resolvers, one in each lab Pod beside the prober (same node, same zone
through a 160 us delay line, another zone through 260 us), stand for three CoreDNS replicas. A
stand-in API server (tests/lib/fake_apiserver.py, in the prober's namespace) serves them as the
EndpointSlice of kube-system/kube-dns, with the nodes and zones a real cluster would give. The
exporter, with peers.kubernetes and probes.dns every second, must:
  1. have one podnet_dns_server_rtt_seconds series per replica with its server_zone and the path
     class from its own node and zone (same_node, same_zone, cross_zone), answered by that
     unbound (its own answers are counted: the question went to that address);
  2. ask resolv.conf's nameserver, which is also a replica's address, once, under the replica's
     labels (one series for that server, not two);
  3. drop the series of the cross-zone replica within a few rounds of its leaving the slice,
     keep the others, and not bring it back;
  4. count the watch under resource="dns_endpointslices", apart from the peers' watch.
Needs root; about 20 s. Every wait is bounded.
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit  # noqa: E402
from labkit import ADDR, check, http, log, start, wait_for  # noqa: E402

import fake_apiserver  # noqa: E402

PREFIX = "pnds%d" % (os.getpid() % 10000)
NS = labkit.pod_namespaces(PREFIX)
METRICS = "http://127.0.0.1:9479/metrics"
# The replicas: lab Pod → (Pod name, node, zone, the path class the prober must give it). The
# prober is node-a in zone-a.
REPLICAS = {
    "same": ("coredns-same", "node-a", "zone-a", "same_node"),
    "zone": ("coredns-zone", "node-b", "zone-a", "same_zone"),
    "cross": ("coredns-cross", "node-c", "zone-c", "cross_zone"),
}


def endpoint(pod):
    name, node, zone, _ = REPLICAS[pod]
    return {"addresses": [ADDR[pod]],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "targetRef": {"kind": "Pod", "namespace": "kube-system", "name": name},
            "nodeName": node, "zone": zone}


def write_endpoints(path, pods):
    """The kube-dns slice's endpoints, replaced atomically (the server re-reads on change)."""
    with open(path + ".tmp", "w") as f:
        json.dump([endpoint(p) for p in pods], f)
    os.replace(path + ".tmp", path)


def server_series(body):
    """{server: (labels, sample count)} of podnet_dns_server_rtt_seconds, every series."""
    out = {}
    for name, labels, value in labkit.parse_metrics(body):
        if name == "podnet_dns_server_rtt_seconds_count":
            out.setdefault(labels["server"], []).append((labels, value))
    return out


def scrape():
    code, body = http(NS["client"], METRICS)
    if code != 200:
        raise RuntimeError("scrape: HTTP %d" % code)
    return body


def scenario(args, tmp):
    for pod in REPLICAS:
        folder = os.path.join(tmp, "unbound-" + pod)
        os.makedirs(folder)
        labkit.start_unbound(NS[pod], folder, address=ADDR[pod])
    slices = os.path.join(tmp, "kube-dns.json")
    write_endpoints(slices, REPLICAS)
    _, kubeconfig = fake_apiserver.start(
        tmp, "dns-servers", ["--nodes", "1", "--churn", "0", "--max-seconds", "120",
                             "--extra-service", "kube-system/kube-dns=" + slices],
        ns=NS["client"], name="lab")
    resolv = os.path.join(tmp, "resolv.conf")
    with open(resolv, "w") as f:  # the same-zone replica's address, as a NodeLocal-less Pod's
        f.write("nameserver %s\noptions timeout:1 attempts:1\n" % ADDR["zone"])
    cfg = os.path.join(tmp, "client.yaml")
    with open(cfg, "w") as f:
        f.write("listen_address: \"127.0.0.1:9479\"\n"
                "self: { name: prober, node: node-a, zone: zone-a }\n"
                "peers:\n  kubernetes: { namespace: podnet, service: podnet }\n"
                "probes:\n  dns:\n    interval: 1s\n    resolv_conf: %s\n    resolvers: [glibc]\n"
                "    names: [www.amazon.com]\n"
                "    cluster_dns: { namespace: kube-system, service: kube-dns }\n"
                # The prober is not a Pod of the listed Service: outside any sample.
                "    sample: false\n" % resolv)
    start(NS["client"], [args.exporter, "--config.file=" + cfg, "--kubeconfig=" + kubeconfig,
                         "--log.level=debug"], os.path.join(tmp, "client.log"))

    # 1. One series per replica, with its zone and path class.
    want = {"%s:53" % ADDR[p]: (REPLICAS[p][2], REPLICAS[p][3]) for p in REPLICAS}
    wait_for(lambda: all(s in server_series(scrape()) for s in want), 20,
             "a series for every replica")
    wait_for(lambda: all(v[0][1] >= 2 for v in server_series(scrape()).values()), 10,
             "two answers from every replica")
    series = server_series(scrape())
    for server, (zone, path) in sorted(want.items()):
        got = series.get(server, [])
        check(len(got) == 1 and got[0][0].get("server_zone") == zone
              and got[0][0].get("path_class") == path,
              "%s: one series, server_zone=%s path_class=%s (got %s)"
              % (server, zone, path, [g[0] for g in got]))
    # 2. resolv.conf's nameserver is the same-zone replica: asked once, as that replica.
    check(set(series) == set(want),
          "no other server series (resolv.conf's %s:53 is the replica's): %s"
          % (ADDR["zone"], sorted(series)))
    body = scrape()
    lists = {labels.get("resource"): v for n, labels, v in labkit.parse_metrics(body)
             if n == "podnet_kubernetes_lists_total"}
    check(lists.get("dns_endpointslices", 0) >= 1 and lists.get("endpointslices", 0) >= 1,
          "lists counted per watch: %s" % lists)

    # 3. The cross-zone replica leaves the Service.
    write_endpoints(slices, ["same", "zone"])
    gone = "%s:53" % ADDR["cross"]
    wait_for(lambda: gone not in server_series(scrape()), 10, "the gone replica's series removed")
    check(True, "%s's series removed after it left the EndpointSlice" % gone)
    kept = server_series(scrape())
    before = {s: kept[s][0][1] for s in kept}
    wait_for(lambda: all(server_series(scrape()).get(s, [({}, 0)])[0][1] > n
                         for s, n in before.items()), 10, "the kept replicas answering on")
    after = server_series(scrape())
    check(set(after) == {"%s:53" % ADDR["same"], "%s:53" % ADDR["zone"]},
          "the kept replicas go on, the gone one stays gone: %s" % sorted(after))
    events = {(labels.get("resource"), labels.get("type")): v
              for n, labels, v in labkit.parse_metrics(scrape())
              if n == "podnet_kubernetes_watch_events_total"}
    check(events.get(("dns_endpointslices", "MODIFIED"), 0) >= 1,
          "the change came as a MODIFIED event of the DNS watch: %s" % events)
    code, _ = http(NS["client"], "http://127.0.0.1:9479/-/ready")
    check(code == 200, "ready (HTTP %d)" % code)


def main():
    args = labkit.lab_arguments()
    if not labkit.have_root():
        return labkit.skip(labkit.ROOT_NEEDED)
    for tool in ("unbound", "openssl", "curl"):
        if not shutil.which(tool):
            return labkit.skip("%s is not installed" % tool)
    return labkit.run_lab_test(args.lab_script, args.delayline, PREFIX,
                               lambda lab, tmp: scenario(args, tmp))


if __name__ == "__main__":
    sys.exit(main())
