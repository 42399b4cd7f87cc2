#!/usr/bin/env python3
"""Lab test: native histograms (metrics.native_histograms) against a real Prometheus.

The lab (tests/lab/lab.sh): a client Pod and three peers, same node, same zone and cross zone
(behind user-space delay lines). The client probes the three (ICMP, trains of ROUND_COUNT every
INTERVAL_S) with native histograms on. Two Debian `prometheus` (2.42) in the client's namespace
scrape it every second, loading the shipped recording rules: "native" with
--enable-feature=native-histograms (it asks for protobuf and stores one native series per
histogram), "classic" without (it asks for text and stores the classic buckets).

For each path, at an instant where both hold exactly the first round (every packet of one
train, no second train yet), the test checks:
  - histogram_quantile(0.5) over the native series and over the classic buckets agree within
    the width of the classic bucket the classic answer lies in;
  - the native answer lies within 10 % of the exporter's exact median of the same samples
    (podnet_rtt_round_median_seconds, the round's median computed from its raw RTTs);
  - histogram_count of the native series equals the round's replies.
Then: the recording rules' path_class:podnet_rtt_seconds:p50 and the dashboards' RTT quantile
panels give a number for each path class in both servers (they read either kind), the native
server holds no classic RTT buckets and fewer series; each server's head series are printed.

Usage: lab_native_test.py --exporter BIN --delayline BIN --lab-script tests/lab/lab.sh
       --prometheus BIN --rules-dir deploy/prometheus --dashboards-dir dashboards
Needs root (network namespaces). Every wait is bounded; the lab is torn down on every exit.
"""
import argparse
import json
import os
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit  # noqa: E402
from labkit import ADDR, PATH_OF, by_label, check, http, log, start, wait_for  # noqa: E402

PREFIX = "pnnh%d" % (os.getpid() % 10000)
NS = labkit.pod_namespaces(PREFIX)
INTERVAL_S = 6
ROUND_COUNT = 60
PORTS = {"native": 9090, "classic": 9091}
NODES = {"same": ("node-a", "zone-a"), "zone": ("node-b", "zone-a"),
         "cross": ("node-c", "zone-b")}


def promql(server, expr, at=None):
    return labkit.promql(NS["client"], expr, at, port=PORTS[server])


def query_range(server, expr, start_s, end_s):
    url = ("http://127.0.0.1:%d/api/v1/query_range?query=%s&start=%.3f&end=%.3f&step=0.25"
           % (PORTS[server], urllib.parse.quote(expr), start_s, end_s))
    code, body = http(NS["client"], url)
    if code != 200:
        raise labkit.Broken("query_range failed (%d): %s" % (code, body))
    return json.loads(body)["data"]["result"]


def head_series(server):
    code, body = http(NS["client"], "http://127.0.0.1:%d/api/v1/status/tsdb" % PORTS[server])
    if code != 200:
        raise labkit.Broken("tsdb status failed (%d): %s" % (code, body))
    return json.loads(body)["data"]["headStats"]["numSeries"]


def one(result):
    return float(result[0]["value"][1]) if result else None


def classic_bucket(server, peer, at, q):
    """The (lower, upper) bounds of the classic bucket holding `q` (seconds), from the `le`
    values the server stores for the peer's histogram."""
    bounds = sorted(float(r["metric"]["le"]) for r in
                    promql(server, 'podnet_rtt_seconds_bucket{peer="%s"}' % peer, at)
                    if r["metric"]["le"] not in ("+Inf", "inf"))
    lower = 0.0
    for b in bounds:
        if q <= b:
            return lower, b
        lower = b
    return lower, float("inf")


def first_round_instant(peer, since):
    """An evaluation time at which both servers hold exactly one round of `peer` (sent ==
    ROUND_COUNT), or None."""
    now = time.time()
    ok = None
    for server in PORTS:
        res = query_range(server, 'podnet_rtt_packets_sent_total{peer="%s"}' % peer, since, now)
        times = {round(float(t), 2) for t, v in (res[0]["values"] if res else [])
                 if float(v) == ROUND_COUNT}
        ok = times if ok is None else ok & times
    return max(ok) if ok else None


def scenario(args, lab, tmp):
    labkit.start_lab_responders(NS, args.exporter, tmp, NODES)
    client_cfg = os.path.join(tmp, "client.yaml")
    text = ("listen_address: \"0.0.0.0:9479\"\n"
            "self: { name: client, node: node-a, zone: zone-a }\n"
            "metrics: { native_histograms: true }\n"
            "peers:\n  static:\n")
    for name, (node, zone) in NODES.items():
        text += ("    - { name: %s, address: \"%s\", node: %s, zone: %s }\n"
                 % (name, ADDR[name], node, zone))
    text += ("probes:\n  rtt: { protocol: icmp, interval: %ds, count: %d, spacing: 10ms, "
             "timeout: 500ms }\n" % (INTERVAL_S, ROUND_COUNT))
    with open(client_cfg, "w") as f:
        f.write(text)
    since = time.time()
    start(NS["client"], [args.exporter, "--config.file=" + client_cfg],
          os.path.join(tmp, "client.log"))
    for name in ("client", "same", "zone", "cross"):
        wait_for(lambda n=name: http(NS[n], "http://127.0.0.1:9479/-/ready")[0] == 200, 20,
                 "%s exporter ready" % name)
    rules = os.path.join(args.rules_dir, "podnet-recording-rules.yml")
    for server, port in PORTS.items():
        cfg = os.path.join(tmp, "prometheus-%s.yml" % server)
        with open(cfg, "w") as f:
            f.write("global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
                    "rule_files: ['%s']\n"
                    "scrape_configs:\n  - job_name: podnet\n"
                    "    static_configs: [ { targets: ['127.0.0.1:9479'] } ]\n" % rules)
        flags = ["--enable-feature=native-histograms"] if server == "native" else []
        start(NS["client"], [args.prometheus, "--config.file=" + cfg,
                             "--storage.tsdb.path=" + os.path.join(tmp, "tsdb-" + server),
                             "--web.listen-address=127.0.0.1:%d" % port, *flags],
              os.path.join(tmp, "prometheus-%s.log" % server), max_seconds=240)
    for server, port in PORTS.items():
        wait_for(lambda p=port: http(NS["client"], "http://127.0.0.1:%d/-/ready" % p)[0] == 200,
                 60, "prometheus (%s) ready" % server)

    # Every peer's first round scraped by both (rounds start at a random phase within the
    # interval; a train takes ROUND_COUNT x 10 ms + the timeout).
    instants = {}

    def all_first_rounds():
        for peer in NODES:
            if peer not in instants:
                at = first_round_instant(peer, since)
                if at is not None:
                    instants[peer] = at
        return len(instants) == len(NODES)

    wait_for(all_first_rounds, 3 * INTERVAL_S + 20, "both servers hold each peer's first round")

    for peer, at in sorted(instants.items()):
        native = one(promql("native", 'histogram_quantile(0.5, podnet_rtt_seconds{peer="%s"})'
                            % peer, at))
        classic = one(promql("classic",
                             'histogram_quantile(0.5, podnet_rtt_seconds_bucket{peer="%s"})'
                             % peer, at))
        exact = one(promql("native", 'podnet_rtt_round_median_seconds{peer="%s"}' % peer, at))
        count = one(promql("native", 'histogram_count(podnet_rtt_seconds{peer="%s"})' % peer, at))
        received = one(promql("native", 'podnet_rtt_packets_received_total{peer="%s"}' % peer,
                              at))
        if None in (native, classic, exact):
            check(False, "%s: native %s, classic %s, exact median %s at %.2f"
                  % (peer, native, classic, exact, at))
            continue
        lower, upper = classic_bucket("classic", peer, at, classic)
        log("%-5s (%s): exact median %.1f us; native p50 %.1f us (%+.1f %%); classic p50 %.1f us "
            "in bucket (%.0f, %.0f] us; %d samples"
            % (peer, PATH_OF[peer], exact * 1e6, native * 1e6, (native / exact - 1) * 100,
               classic * 1e6, lower * 1e6, upper * 1e6, count or 0))
        check(count == received and received > 0,
              "%s: the native series counts the round's %s replies (%s)" % (peer, received, count))
        check(abs(native - classic) <= upper - lower,
              "%s: native and classic p50 agree within the classic bucket's width (%.1f us)"
              % (peer, (upper - lower) * 1e6))
        check(abs(native - exact) <= 0.10 * exact,
              "%s: native p50 within 10 %% of the exact median" % peer)

    # The shipped recording rules read either kind of histogram.
    for server in PORTS:
        p50 = {}

        def finite(s=server):  # a rate needs two rounds in its window: NaN until then
            p50.clear()
            p50.update({k: v for k, v in by_label(promql(s, "path_class:podnet_rtt_seconds:p50"),
                                                 "path_class").items() if v == v})
            return len(p50) == 3

        wait_for(finite, 2 * INTERVAL_S + 20,
                 "%s: the recording rule path_class:podnet_rtt_seconds:p50, three numbers" % server)
        log("%s: path_class:podnet_rtt_seconds:p50 (us): %s" % (
            server, ", ".join("%s %.1f" % (k, v * 1e6) for k, v in sorted(p50.items()))))
        check(set(p50) == set(PATH_OF.values()),
              "%s: the p50 recording rule gives a number for each path class" % server)
    # The dashboards' RTT latency panels (now, not `offset`): a number in both servers.
    for path in sorted(os.listdir(args.dashboards_dir)):
        if not path.endswith(".json"):
            continue
        with open(os.path.join(args.dashboards_dir, path)) as f:
            exprs = [t["expr"] for p in json.load(f)["panels"] for t in p.get("targets", [])
                     if "histogram_quantile" in t.get("expr", "")
                     and "podnet_rtt_seconds" in t["expr"] and "offset" not in t["expr"]]
        for expr in exprs:
            q = (expr.replace("$__rate_interval", "1m").replace('"$cluster"', '".*"')
                 .replace('"$zone"', '".*"').replace('"$node"', '".*"').replace('"$peer"', '".*"'))
            got = {s: [float(r["value"][1]) for r in promql(s, q)] for s in PORTS}
            check(all(v and all(x == x for x in v) for v in got.values()),
                  "%s: %s... gives numbers in both servers (native %d, classic %d)"
                  % (path, expr[:60], len(got["native"]), len(got["classic"])))
    native_series = one(promql("native", "sum(histogram_count(podnet_rtt_seconds))"))
    check(native_series is not None and native_series > 0,
          "the native server stores native RTT histograms")
    classic_buckets = promql("native", "count(podnet_rtt_seconds_bucket)")
    check(not classic_buckets, "the native server stores no classic RTT buckets beside them")
    # Head series (what prometheus_tsdb_head_series counts: the exporter's, the scrape's own
    # and the recording rules'), and the exporter's alone.
    heads = {s: head_series(s) for s in PORTS}
    own = {s: one(promql(s, 'count({job="podnet"})')) for s in PORTS}
    log("head series: native %s, classic %s; of the exporter (job=\"podnet\"): native %s, "
        "classic %s" % (heads["native"], heads["classic"], own["native"], own["classic"]))
    check(own["native"] is not None and own["classic"] is not None
          and own["native"] < own["classic"],
          "native histograms store fewer series than classic ones")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--delayline", required=True)
    ap.add_argument("--lab-script", required=True)
    ap.add_argument("--prometheus", default=shutil.which("prometheus"))
    ap.add_argument("--rules-dir", required=True)
    ap.add_argument("--dashboards-dir", required=True)
    args = ap.parse_args()
    if not labkit.have_root():
        return labkit.skip(labkit.ROOT_NEEDED)
    if not args.prometheus:
        return labkit.skip("no prometheus binary")
    return labkit.run_lab_test(args.lab_script, args.delayline, PREFIX,
                               lambda lab, tmp: scenario(args, lab, tmp))


if __name__ == "__main__":
    sys.exit(main())
