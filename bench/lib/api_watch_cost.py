#!/usr/bin/env python3
"""What a rollout of the probe DaemonSet costs the API server's watch fan-out: every probe Pod
watches the EndpointSlices of the headless Service `podnet`, and every readiness step of every
replaced Pod rewrites a slice of up to 100 endpoints that goes to every watcher.

The run: the stand-in API server (tests/lib/fake_apiserver.py, --rollout-file) serves an N-node
cluster, W real exporters (discovery only, one per simulated node, in a private network
namespace) list and watch it, then the server rolls every Pod (waves of maxUnavailable Pods,
four slice steps per Pod: terminating, deleted, created unready, ready) and counts the slice
writes, the events and bytes it sends to watchers (JSON, what the exporter asks for), the lists
and the TLS connections. Each exporter's own count of MODIFIED events is checked against the
writes (none missed, no relist).

Side by side, by model, not run: the same rollout behind a non-headless Service of the same size
seen by kube-proxy (one watcher per node, as every node runs one): the same writes (the
EndpointSlice controller treats both alike) to the same number of watchers, in the protobuf
encoding kube-proxy asks for (sizes from bench/lib/k8s_protobuf.py on the same objects). And the
same rollout at --scale-to nodes: writes per Pod as measured, watchers = nodes, bytes per event
as measured (slices hold 100 endpoints at any size), each slice changing as often at any size
(a wave is a share of the Pods).
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "tests", "lib")]
import benchlib as B  # noqa: E402
import fake_apiserver  # noqa: E402  (the stand-in API server)
import k8s_protobuf  # noqa: E402
import labkit as K  # noqa: E402

TOKEN = "bench-token-rollout"


def exporter_config(i, zones):
    """Discovery only, as Pod i on node-i (the fake cluster's zone for it)."""
    return "\n".join([
        "listen_address: \"127.0.0.1:{port}\"",
        "self: { name: podnet-%05d, node: node-%d, zone: zone-%s }" % (i, i, chr(ord("a")
                                                                               + i % zones)),
        "responders:",
        "  udp_echo: { listen_address: \"127.0.0.1:{port}\" }",
        "peers:",
        "  kubernetes: { namespace: podnet, service: podnet, peers_per_zone: 3, port: {port} }",
    ]) + "\n"


def read_stats(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def event_sizes(zones):
    """(JSON bytes, protobuf bytes) of one MODIFIED event of a full slice (100 endpoints) of
    the fake cluster, JSON as the watch's chunk carries it (the line, its newline, the chunk's
    size line and CRLFs)."""
    sl = fake_apiserver.Cluster(fake_apiserver.PER_SLICE, zones, "podnet", "podnet").slices[0]
    line = len(json.dumps({"type": "MODIFIED", "object": sl})) + 1
    return line + len("%x\r\n\r\n" % line), k8s_protobuf.watch_event_size("MODIFIED", sl)


def one_run(exe, ns, tmp, args, batch_s):
    wave = max(1, math.ceil(args.nodes * args.max_unavailable / 100.0))
    go = os.path.join(tmp, "go-%g" % batch_s)
    stats_file = os.path.join(tmp, "stats-%g.json" % batch_s)
    run_s = args.nodes / wave * args.wave_seconds + args.watchers * 1.0 + 300
    _, kcfg = fake_apiserver.start(
        tmp, TOKEN, ["--nodes", str(args.nodes), "--zones", str(args.zones), "--churn", "0",
                     "--rollout-file", go, "--rollout-wave", str(wave),
                     "--rollout-wave-seconds", str(args.wave_seconds),
                     "--rollout-batch-seconds", str(batch_s), "--stats-file", stats_file,
                     "--max-seconds", str(run_s)],
        ns=ns, name="bench", max_seconds=run_s + 60)
    K.log("-- batch %g s: %d Pods in waves of %d every %g s; starting %d exporters"
          % (batch_s, args.nodes, wave, args.wave_seconds, args.watchers))
    exporters = []
    for i in range(args.watchers):
        p, port = K.start_exporter(exe, tmp, exporter_config(i, args.zones),
                                   ["--kubeconfig=" + kcfg, "--log.level=warn"], ns=ns,
                                   name="exporter-%g-%d" % (batch_s, i), ready="/-/ready",
                                   timeout=60, max_seconds=run_s)
        exporters.append((p, port))
    K.wait_for(lambda: read_stats(stats_file).get("watches", 0) >= args.watchers, 60,
               "every exporter watching")
    time.sleep(2)
    before = read_stats(stats_file)
    with open(go, "w"):
        pass
    K.wait_for(lambda: read_stats(stats_file).get("rollout_end"),
               args.nodes / wave * args.wave_seconds + 120, "the rollout to end")
    time.sleep(5)  # the last events reach every watcher
    after = read_stats(stats_file)
    modified, errors = [], 0
    for p, port in exporters:
        s = K.parse_metrics(K.scrape(port, ns, timeout=30))
        modified.append(sum(v for n, l, v in s if n == "podnet_kubernetes_watch_events_total"
                            and l.get("type") == "MODIFIED"
                            and l.get("resource") == "endpointslices"))
        errors += sum(v for n, _l, v in s if n == "podnet_kubernetes_api_errors_total")
    for p, _port in exporters:
        K.stop(p)
    K.stop_all()
    writes = after["writes"]
    by_s = after.get("writes_by_second", {})
    return {
        "batch_s": batch_s, "wave": wave, "writes": writes,
        "peak_writes_s": max(by_s.values()) if by_s else 0,
        "rollout_s": after["rollout_end"] - after["rollout_start"],
        "events": after.get("watch_events", 0) - before.get("watch_events", 0),
        "bytes": after.get("watch_bytes", 0) - before.get("watch_bytes", 0),
        "list_bytes": before.get("list_bytes", 0), "lists": before.get("lists", 0),
        "lists_during": after.get("lists", 0) - before.get("lists", 0),
        "connections_during": after.get("connections", 0) - before.get("connections", 0),
        "connections": after.get("connections", 0), "requests": after.get("requests", 0),
        "modified_min": min(modified), "modified_max": max(modified), "api_errors": errors,
    }


def gb(n):
    return "%.2f" % (n / 1e9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exporter")
    ap.add_argument("--nodes", type=int, default=300)
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--watchers", type=int, help="exporters that watch (default: --nodes)")
    ap.add_argument("--max-unavailable", type=float, default=10,
                    help="the DaemonSet's maxUnavailable, %% of the Pods (deploy default 10)")
    ap.add_argument("--wave-seconds", type=float, default=15,
                    help="one wave: old Pod stopped, new Pod ready")
    ap.add_argument("--batch", default="0,1",
                    help="the EndpointSlice controller's batch periods to run, s (comma list)")
    ap.add_argument("--scale-to", type=int, default=3000)
    args = ap.parse_args()
    args.watchers = args.watchers or args.nodes
    B.install_signal_handlers()
    B.require_root()
    B.require_tools("ip", "curl", "openssl")
    exe, version, bindir = B.exporter_binary(args.exporter)
    ns = os.environ.get("PODNET_BENCH_NS", "pnbenchapi")
    tmp = tempfile.mkdtemp(prefix="podnet-bench-api-")
    K.log("== api_watch_cost: a rollout of %d probe Pods (%d zones), %d watching exporters"
          % (args.nodes, args.zones, args.watchers))
    K.log("exporter: %s, git %s" % (version, B.git_describe()))
    K.log("machine:  %s" % B.machine_line())
    runs = []
    try:
        B.netns_add(ns)
        for b in args.batch.split(","):
            runs.append(one_run(exe, ns, tmp, args, float(b)))
    finally:
        K.stop_all()
        B.netns_del(ns)
        shutil.rmtree(bindir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    js, pb = event_sizes(args.zones)
    K.log("")
    K.log("one MODIFIED event of a full slice (100 endpoints): %.0f bytes JSON, %.0f bytes "
          "protobuf (%.2fx)" % (js, pb, js / pb))
    rows = []
    for r in runs:
        w = args.watchers
        per_event = r["bytes"] / max(1, r["events"])
        rows.append(["%g s" % r["batch_s"], "%d" % r["writes"],
                     "%.2f" % (r["writes"] / args.nodes), "%d" % r["peak_writes_s"],
                     "%d" % r["events"], "%.0f" % per_event, gb(r["bytes"]),
                     "%.1f" % (r["peak_writes_s"] * per_event * w / 1e6),
                     gb(r["bytes"] * pb / js),
                     "%d-%d" % (r["modified_min"], r["modified_max"]),
                     "%d" % r["lists_during"], "%d" % r["connections_during"],
                     "%d" % r["api_errors"]])
    B.table(["batch", "writes", "writes/Pod", "peak writes/s", "events sent", "bytes/event",
             "podnet GB", "podnet peak MB/s", "kube-proxy GB (model)", "MODIFIED seen",
             "lists", "new conns", "API errors"], rows)
    K.log("")
    K.log("the first lists: %d of %.0f KB each" % (runs[0]["lists"], runs[0]["list_bytes"]
                                                  / max(1, runs[0]["lists"]) / 1e3))
    for r in runs:
        K.log("batch %g s: %d requests on %d TLS connections over the run: %.2f requests and "
              "%.2f connections an exporter" % (r["batch_s"], r["requests"], r["connections"],
                                                r["requests"] / args.watchers,
                                                r["connections"] / args.watchers))
    n = args.scale_to
    wave = max(1, math.ceil(n * args.max_unavailable / 100.0))
    rows = []
    for r in runs:
        per_event = js  # every slice is full at this size
        writes = r["writes"] / args.nodes * n
        # Steady rate: `wave` Pods replaced every wave_seconds, each Pod's writes as measured
        # (a wave is a share of the Pods, so each slice sees the same change rate at any size,
        # and the batch period merges the same share of its steps).
        writes_s = r["writes"] / args.nodes * wave / args.wave_seconds
        rows.append(["%g s" % r["batch_s"], "%d" % n, "%.0f" % writes, "%.0f" % writes_s,
                     gb(writes * per_event * n), "%.0f" % (writes_s * per_event * n / 1e6),
                     gb(writes * pb * n), "%.0f" % (writes_s * pb * n / 1e6),
                     "%.1f" % (n / wave * args.wave_seconds / 60)])
    K.log("")
    K.log("at %d nodes, by the model (writes per Pod as measured, %d Pods a wave every %g s):"
          % (n, wave, args.wave_seconds))
    B.table(["batch", "nodes", "writes", "writes/s", "podnet GB", "podnet MB/s",
             "kube-proxy GB", "kube-proxy MB/s", "rollout min"], rows)
    bad = [r for r in runs if r["modified_min"] < r["writes"] or r["api_errors"]]
    K.log("")
    K.log("every exporter saw every write, no API error: %s" % ("yes" if not bad else "NO"))
    return 0 if not bad else 1


if __name__ == "__main__":
    B.main_wrapper(main)
