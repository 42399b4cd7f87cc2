#!/usr/bin/env python3
"""Discovery at 5,000 nodes: podnet-exporter against a stand-in API server (fake_apiserver.py)
serving a 5,000-node, 5-zone cluster as real-shaped EndpointSlices and Nodes, with 10 endpoint
readiness changes per second on the watch.

Three runs of the same binary, one after the other, each in a private network namespace (every
peer address is 127.1.x.y there, answered by the exporter's own responders):
  discovery   Kubernetes discovery alone, no probe: the cost of listing/watching 5,000 nodes
  per-peer    discovery + RTT + HTTP probes, peers_per_zone 3, every peer its own series
  aggregated  the same with metrics.aggregate_peers: true (no peer / peer_node labels)
Each: CPU % of one core over the window, RSS and peak RSS, peers probed by path class, and the
series of one /metrics scrape. Side by side, what probing every Pod would cost (goldpinger's and
kubenurse's model before its cap): the per-peer series count scaled to 4,999 peers.
"""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "tests", "lib")]
import benchlib as B  # noqa: E402
import fake_apiserver  # noqa: E402  (the stand-in API server)
import labkit as K  # noqa: E402  (processes, waiting, scraping)
import loopbench as L  # noqa: E402

TOKEN = "bench-token-5000"

def exporter_config(probes, aggregate):
    """The exporter's configuration, "{port}" standing for its port (labkit.start_exporter)."""
    lines = ["listen_address: \"0.0.0.0:{port}\"",
             "self: { name: podnet-00000, node: node-0, zone: \"\" }",
             "responders:",
             "  udp_echo: { listen_address: \"0.0.0.0:{port}\" }",
             "peers:",
             "  kubernetes: { namespace: podnet, service: podnet, peers_per_zone: 3,"
             " port: {port} }",
             "metrics: { aggregate_peers: %s }" % ("true" if aggregate else "false")]
    if probes:
        lines += ["probes:",
                  "  rtt: { protocol: udp, interval: 2s, count: 5, spacing: 50ms, timeout: 1s }",
                  "  http: { interval: 5s, duration: 1s, qps: 20, connections: 2,"
                  " modes: [keepalive, new_connection] }"]
    return "\n".join(lines) + "\n"


def one_run(exe, ns, tmp, kcfg, tag, probes, aggregate, warmup, seconds):
    p, port = K.start_exporter(exe, tmp, exporter_config(probes, aggregate),
                               ["--kubeconfig=" + kcfg], ns=ns, name="exporter-" + tag,
                               ready="/-/ready", timeout=60, max_seconds=warmup + seconds + 300)
    m = L.measure(p, ns, port, warmup, seconds, lambda _text: (0, 0))
    body = K.scrape(port, ns, timeout=30)
    s = K.parse_metrics(body)
    m["series"] = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    m["bytes"] = len(body.encode())
    m["peers"] = {l.get("path_class", "?"): v for n, l, v in s if n == "podnet_peers"}
    peer_series = 0
    for line in body.splitlines():
        if line and not line.startswith("#") and "peer_zone=" in line:
            peer_series += 1
    m["peer_series"] = peer_series
    m["candidates"] = sum(v for n, _l, v in s if n == "podnet_discovery_candidates")
    m["events"] = sum(v for n, _l, v in s if n == "podnet_kubernetes_watch_events_total")
    m["api_errors"] = sum(v for n, _l, v in s if n == "podnet_kubernetes_api_errors_total")
    K.stop(p)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exporter")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--zones", type=int, default=5)
    ap.add_argument("--churn", type=float, default=10, help="watch events per second")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=10)
    args = ap.parse_args()
    B.install_signal_handlers()
    B.require_root()
    B.require_tools("ip", "curl", "openssl")
    exe, version, bindir = B.exporter_binary(args.exporter)
    ns = os.environ.get("PODNET_BENCH_NS", "pnbenchdisc")
    tmp = tempfile.mkdtemp(prefix="podnet-bench-disc-")
    K.log("== discovery_5000: %d simulated nodes in %d zones, %.0f watch events/s"
          % (args.nodes, args.zones, args.churn))
    K.log("exporter: %s, git %s" % (version, B.git_describe()))
    K.log("machine:  %s" % B.machine_line())
    warning = B.busy_warning()
    if warning:
        K.log(warning)
    runs = {}
    try:
        L.setup_netns(ns)
        api_s = 3 * (args.warmup + args.seconds) + 300
        _, kcfg = fake_apiserver.start(
            tmp, TOKEN, ["--nodes", str(args.nodes), "--zones", str(args.zones), "--churn",
                         str(args.churn), "--max-seconds", str(api_s)],
            ns=ns, name="bench", max_seconds=api_s + 100)
        for tag, probes, aggregate in (("discovery", False, False), ("per-peer", True, False),
                                       ("aggregated", True, True)):
            K.log("-- %s" % tag)
            runs[tag] = one_run(exe, ns, tmp, kcfg, tag, probes, aggregate, args.warmup,
                                args.seconds)
    finally:
        K.stop_all()
        B.netns_del(ns)
        shutil.rmtree(bindir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    K.log("")
    rows = []
    for tag in ("discovery", "per-peer", "aggregated"):
        m = runs[tag]
        peers = m["peers"]
        rows.append([tag, "%.2f" % m["cpu_pct"], "%.1f" % m["rss_mib"], "%.1f" % m["hwm_mib"],
                     "%d" % m["candidates"],
                     "%d/%d/%d" % (peers.get("same_node", 0), peers.get("same_zone", 0),
                                   peers.get("cross_zone", 0)),
                     "%d" % m["series"], "%d" % m["peer_series"], "%d" % m["events"],
                     "%d" % m["api_errors"]])
    B.table(["run", "CPU %", "RSS MiB", "peak MiB", "candidates", "peers node/zone/cross",
             "series", "peer series", "watch events", "API errors"], rows)
    pp = runs["per-peer"]
    probed = sum(pp["peers"].values())
    if probed:
        per_peer = pp["peer_series"] / probed
        everyone = per_peer * (args.nodes - 1)
        K.log("")
        K.log("peer series per probed peer: %.0f; probing all %d other Pods (no selection) would"
              " expose ~%.0f peer series, %.0fx the selected %d and %.0fx the aggregated %d"
              % (per_peer, args.nodes - 1, everyone, everyone / max(1, pp["peer_series"]),
                 pp["peer_series"], everyone / max(1, runs["aggregated"]["peer_series"]),
                 runs["aggregated"]["peer_series"]))
    return 0


if __name__ == "__main__":
    B.main_wrapper(main)
