#!/usr/bin/env python3
"""End to end in the lab: a fault on the wire becomes an Alertmanager notification (issue 26).

Real parts: the lab's three paths (tests/lab/lab.sh: delay lines between the "nodes"), a
podnet-exporter in each of its four Pods probing the other three (UDP echo RTT trains; the
client also runs the DNS probe against a real unbound in its namespace), a real `prometheus`
loading the SHIPPED rule files (deploy/prometheus/podnet-{recording,alert}-rules.yml, rewritten
into a temporary copy only where SCALE below says), a real `prometheus-alertmanager` routing
every alert to alert_receiver.py (a webhook receiver on the client namespace's loopback that logs
each notification: alert name, labels, status, receive time). Phases, back to back, each asserted
on the receiver's log:

  1. quiet: once the regression alerts' day and week comparisons (scaled offsets) have data, no
     alert has reached the receiver and none is firing;
  2. +X_US µs one way on the cross-zone delay line (RTT + 2 X_US): PodnetCrossZoneRTTRegression
     arrives naming the zone pair (source_zone, peer_zone); after the delay is removed, its
     resolved notification arrives;
  3. the client's resolv.conf (the DNS probe re-reads it every round) gains a search list of
     three domains and ndots:5: a lookup of sts.ap-northeast-2.amazonaws.com (3 dots) walks the
     list first, 2 -> 8 queries (A and AAAA per try): PodnetDNSQueriesPerLookupUp arrives (form
     as_written, per resolver model), and resolves once the old file is back;
  4. the same-zone peer's exporter (node-b: its UDP echo responder) is stopped: exactly one
     alert names node-b as the one at fault (PodnetPeerNodeFault), and PodnetPeerUnreachable,
     which without the fault location would fire once per prober (3: client, same, cross), does
     not reach the receiver.
The receiver's log is printed per phase at the end.

Why X_US = 2500: the cross-zone paths are ~0.6 ms (node-a <-> node-c, one delay line) and
~0.9 ms (node-b <-> node-c, both) of RTT; +5 ms makes them ~5.6 and ~5.9 ms. The zone pair's
p50 (from the RTT histogram, buckets ... 3.3, 4.7, 6.8, 10 ms) goes from ~0.6 ms to ~5.6 ms:
more than podnet:config:rtt_regression_ratio (1.5) times the past figure and more than
podnet:config:rtt_regression_min_increase_seconds (100 µs shipped, 2 ms here: SCALE) above it,
while staying under podnet:config:cross_zone_rtt_high_seconds (2 ms shipped, 10 ms here:
SCALE), so only the regression alert speaks (PodnetCrossZoneRTTHigh is allowed in phase 2 all
the same). Both settings and the delay are that large because of the host: one that took ~40 %
of the CPU as steal moved the quiet p50 of the user-space delay lines from ~0.6 ms to over
2 ms for seconds at a time, enough for a regression of 0.8 ms (X_US was 400) to resolve while
on and for noise to fire one in phases 1, 3 and 4 (CI failed so at stop 51, and twice here).

What cannot happen here, by design of the rules: PodnetZonePairFault needs no more than half of
the cluster's zone pairs regressed; the lab has 3 (zone-a->zone-a, zone-a->zone-b,
zone-b->zone-a: zone-b has one node, so no zone-b->zone-b pair) and a delay line regresses both
directions (2 of 3). It is allowed in phase 2, not required.

Usage: lab_alerts_test.py --exporter BIN --delayline BIN --lab-script tests/lab/lab.sh
  [--alertmanager BIN]. Needs root (exit 77 otherwise). Traffic stays in the lab's namespaces and
their loopbacks; every wait is bounded; everything is stopped and the lab taken down on exit.
"""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import alerting  # noqa: E402
import labkit  # noqa: E402
from alerting import fmt  # noqa: E402
from labkit import ADDR, check, log, wait_for, write_atomic  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "pnal%d" % (os.getpid() % 10000)
CROSS_DELAY_US = int(os.environ.get("PODNET_LAB_CROSS_DELAY_US", "260"))
X_US = 2500  # added one way on the cross-zone delay line in phase 2 (see the docstring)
DNS_NAME = "sts.ap-northeast-2.amazonaws.com"
QUIET_RESOLV = "nameserver 127.0.0.1\noptions ndots:1 timeout:1 attempts:1\n"
LOUD_RESOLV = ("search podnet.svc.cluster.local svc.cluster.local cluster.local\n"
               "nameserver 127.0.0.1\noptions ndots:5 timeout:1 attempts:1\n")

# The lab's Pods as the rules see them: client and same share node-a (the same-node path),
# zone is node-b in zone-a (behind the zone delay line), cross is node-c in zone-b.
PODS = {"client": ("node-a", "zone-a"), "same": ("node-a", "zone-a"),
        "zone": ("node-b", "zone-a"), "cross": ("node-c", "zone-b")}
STOPPED = "zone"  # phase 4: this Pod's exporter is stopped

# How the shipped rules are scaled for a test of minutes (the temporary copy only; each pattern
# must match at least once, so a renamed window or setting fails here instead of going unscaled):
#   - every 5-minute window ([5m]) becomes 10 s and every 10-minute one ([10m]) 20 s: ten of the
#     probes' 1 s rounds, so a change shows in a window within seconds;
#   - `offset 1d` becomes 40 s and `offset 1w` 45 s: "the same time yesterday / last week" is
#     then the quiet phase, and a regression stays one until the delay is removed (phase 2
#     removes it ~15 s after setting it, well before 40 s);
#   - every `for:` (5 to 30 minutes) becomes 5 s;
#   - the setting podnet:config:fault_min_probers (3) becomes 2: a peer node here has two
#     prober nodes at most (node-a's two Pods count as one prober node; the lab has three
#     nodes), and the rule needs more than fault_share (0.5) of them, so both must see it bad;
#   - the settings podnet:config:cross_zone_rtt_high_seconds (2 ms) and
#     podnet:config:rtt_regression_min_increase_seconds (100 µs) become 10 ms and 2 ms: with
#     `for` at 5 s, a host that takes half the CPU (steal) lifted the user-space delay lines'
#     quiet cross-zone p50 (~0.6-0.9 ms) over 2 ms for long enough (the docstring, X_US). No
#     phase asserts PodnetCrossZoneRTTHigh (phase 2 allows it); both settings' shipped values
#     are the rules' unit tests' (podnet-rules-test*.yml).
# Left as shipped: the 1-hour and 1- and 7-day windows of the burst rules (no burst probe runs
# here: no data), and every other setting.
SCALE = [
    (r"\[5m\]", "[10s]"),
    (r"\[10m\]", "[20s]"),
    (r"offset 1d\b", "offset 40s"),
    (r"offset 1w\b", "offset 45s"),
    (r"for: \d+m\b", "for: 5s"),
    alerting.setting("fault_min_probers", "3", "2"),
    alerting.setting("cross_zone_rtt_high_seconds", "0.002", "0.01"),
    alerting.setting("rtt_regression_min_increase_seconds", "0.0001", "0.002"),
]
OFFSET_1W_S = 45
WINDOW_S = 10
FOR_S = 5

# Alerts a phase may bring besides the one it asserts (each says why).
PHASE4_ALLOWED = {
    "PodnetPeerNodeFault",  # the one asserted
    "PodnetExporterDown",   # the stopped exporter is not scraped either (its instance)
    # Per zone pair, names no node; once node-b's fault is located its paths are left out
    # (path_class_zone:podnet_rtt_loss_unlocated), but the seconds before may reach `for`.
    "PodnetPacketLoss",
}
PHASE2_ALLOWED = {
    "PodnetCrossZoneRTTRegression",  # the one asserted
    "PodnetZonePairFault",           # cannot fire here (see above), allowed where it could
    # The delayed p50 (~5.6-5.9 ms) stays under its threshold (10 ms here, SCALE), but a
    # loaded machine's user-space delay line can push it over: the same symptom, so allowed,
    # not required.
    "PodnetCrossZoneRTTHigh",
}


def exporter_config(name, resolv):
    node, zone = PODS[name]
    peers = "".join("    - { name: %s, address: %s, node: %s, zone: %s }\n"
                    % (p, ADDR[p], PODS[p][0], PODS[p][1]) for p in PODS if p != name)
    text = ('listen_address: "0.0.0.0:9479"\n'
            "self: { name: %s, node: %s, zone: %s }\n"
            "peers:\n  static:\n%s"
            "probes:\n"
            "  rtt: { protocol: udp, interval: 1s, count: 10, spacing: 20ms, timeout: 300ms }\n"
            % (name, node, zone, peers))
    if name == "client":
        text += ("  dns: { interval: 1s, resolv_conf: %s, resolvers: [glibc, musl], "
                 "names: [%s] }\n" % (resolv, DNS_NAME))
    return text


def scenario(args, lab, tmp):
    ns = lab.ns
    cl = ns["client"]
    t_start = time.time()
    resolv = os.path.join(tmp, "resolv.conf")
    write_atomic(resolv, QUIET_RESOLV)
    labkit.start_unbound(cl, tmp)
    exporters = {}
    for name in PODS:
        cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write(exporter_config(name, resolv))
        exporters[name] = labkit.start(ns[name], [args.exporter, "--config.file=" + cfg],
                                       os.path.join(tmp, name + ".log"), max_seconds=600)
    for name in PODS:
        wait_for(lambda n=name: labkit.http(ns[n], "http://127.0.0.1:9479/-/ready")[0] == 200,
                 20, "%s exporter ready" % name)

    hook_port = labkit.free_port(cl)
    rx = alerting.start_receiver(cl, tmp, hook_port)
    am_port = labkit.free_port(cl)
    am_cfg = os.path.join(tmp, "alertmanager.yml")
    with open(am_cfg, "w") as f:
        # One notification per alert (group_by '...'), sent 1 s after it arrives, resolved ones
        # too; no repeats within the test.
        f.write("route:\n  receiver: hook\n  group_by: ['...']\n  group_wait: 1s\n"
                "  group_interval: 1s\n  repeat_interval: 1h\n"
                "receivers:\n  - name: hook\n    webhook_configs:\n"
                "      - { url: 'http://127.0.0.1:%d/', send_resolved: true }\n" % hook_port)
    alerting.start_alertmanager(cl, tmp, am_cfg, am_port, args.alertmanager)

    rule_files = alerting.scaled_rules(tmp, SCALE)
    r = labkit.run(args.promtool, "check", "rules", *rule_files, check_rc=False)
    check(r.returncode == 0, "promtool check rules: the scaled copies load %s"
          % ((r.stdout + r.stderr).strip()[-300:] if r.returncode else ""))
    prom_port = labkit.free_port(cl)
    prom_cfg = os.path.join(tmp, "prometheus.yml")
    targets = ", ".join("'%s:9479'" % ADDR[p] for p in PODS)
    with open(prom_cfg, "w") as f:
        f.write("global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
                "rule_files: [%s]\n"
                "alerting:\n  alertmanagers:\n"
                "    - static_configs: [ { targets: ['127.0.0.1:%d'] } ]\n"
                "scrape_configs:\n  - job_name: podnet\n"
                "    static_configs: [ { targets: [%s], labels: { cluster: lab } } ]\n"
                % (", ".join("'%s'" % p for p in rule_files), am_port, targets))
    labkit.start(cl, [args.prometheus, "--config.file=" + prom_cfg,
                      "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                      "--web.listen-address=127.0.0.1:%d" % prom_port],
                 os.path.join(tmp, "prom.log"), max_seconds=600)
    wait_for(lambda: labkit.http(cl, "http://127.0.0.1:%d/-/ready" % prom_port)[0] == 200, 60,
             "prometheus ready")

    def promql(expr):
        return labkit.promql(cl, expr, port=prom_port)

    def firing(alertname=None):
        sel = 'alertstate="firing"' + (',alertname="%s"' % alertname if alertname else "")
        return promql("ALERTS{%s}" % sel)

    phases = []  # (title, t0, t1)

    # Phase 1: quiet, until both comparisons of the regression alerts reach back into data.
    t1 = time.time()
    wait_for(lambda: len(promql('path_class_zone:podnet_rtt_seconds:p50{path_class="cross_zone"}'
                                " offset %ds" % OFFSET_1W_S)) == 2
             and promql("name:podnet_dns_queries_per_lookup:ratio_rate5m offset %ds"
                        % OFFSET_1W_S), 120,
             "a week's (%d s) history of the cross-zone p50 and the DNS queries" % OFFSET_1W_S,
             step=1)
    time.sleep(FOR_S + 3)  # anything pending at that point has had its `for:` and group_wait
    _, body = labkit.http(cl, "http://127.0.0.1:%d/api/v1/rules" % prom_port)
    loaded = [r for g in json.loads(body)["data"]["groups"] for r in g["rules"]]
    bad = ["%s: %s" % (r["name"], r.get("lastError")) for r in loaded if r.get("health") != "ok"]
    check(len(loaded) > 50 and not bad, "Prometheus runs the %d scaled rules, without error %s"
          % (len(loaded), bad))
    p50 = labkit.by_label(promql('path_class_zone:podnet_rtt_seconds:p50{path_class="cross_zone"}'),
                          "source_zone")
    log("quiet cross-zone RTT p50 by source zone: %s"
        % {k: "%.0f us" % (v * 1e6) for k, v in p50.items()})
    qpl = labkit.by_label(promql("name:podnet_dns_queries_per_lookup:ratio_rate5m"), "resolver")
    log("quiet DNS queries per lookup (as written and absolute) by resolver: %s" % qpl)
    quiet = rx.since(0)
    now_firing = [r["metric"]["alertname"] for r in firing()]
    check(not quiet and not now_firing, "phase 1 (quiet, %.0f s): no alert reached the receiver "
          "(%d) and none fires %s" % (time.time() - t1, len(quiet), now_firing))
    phases.append(("1 quiet", t1, time.time()))

    # Phase 2: +X_US one way on the cross-zone delay line, then back.
    t2 = time.time()
    lab.set_delay("cross", CROSS_DELAY_US + X_US)
    log("phase 2: cross delay line %d -> %d us one way at +%.1f s"
        % (CROSS_DELAY_US, CROSS_DELAY_US + X_US, t2 - t_start))

    def regression_firing():
        return [e for e in rx.since(t2) if e["status"] == "firing"
                and e["alertname"] in ("PodnetCrossZoneRTTRegression", "PodnetZonePairFault")]
    wait_for(lambda: regression_firing(), 60, "the cross-zone regression alert", step=0.5)
    time.sleep(2)  # the other direction's alert, if it comes at the same evaluation
    fired = regression_firing()
    t2_off = time.time()
    p50 = labkit.by_label(promql('path_class_zone:podnet_rtt_seconds:p50{path_class="cross_zone"}'),
                          "source_zone")
    log("delayed cross-zone RTT p50 by source zone: %s"
        % {k: "%.0f us" % (v * 1e6) for k, v in p50.items()})
    lab.set_delay("cross", CROSS_DELAY_US)
    log("phase 2: cross delay line back to %d us at +%.1f s (alert after %.1f s)"
        % (CROSS_DELAY_US, t2_off - t_start, fired[0]["received"] - t2))
    pairs = {(e["labels"].get("source_zone"), e["labels"].get("peer_zone")) for e in fired}
    check(pairs and pairs <= {("zone-a", "zone-b"), ("zone-b", "zone-a")},
          "phase 2: the regression alert names the cross-zone pair(s): %s" % sorted(pairs))
    keys = {json.dumps(e["labels"], sort_keys=True) for e in fired}

    def resolved_all():
        done = {json.dumps(e["labels"], sort_keys=True) for e in rx.since(t2_off)
                if e["status"] == "resolved"}
        return keys <= done
    early = [e for e in rx.since(t2, t2_off) if e["status"] == "resolved"]
    wait_for(resolved_all, 60, "the regression alerts' resolved notifications", step=0.5)
    t2_end = time.time()
    check(not early, "phase 2: no regression alert resolved while the delay was on (%d)"
          % len(early))
    others = sorted({e["alertname"] for e in rx.since(t2, t2_end)} - PHASE2_ALLOWED)
    check(not others, "phase 2: no other alert reached the receiver %s" % others)
    check(True, "phase 2: every regression alert resolved, %.1f s after the delay was removed"
          % (t2_end - t2_off))
    phases.append(("2 cross-zone +%d us one way" % X_US, t2, t2_end))

    # Phase 3: the resolv.conf grows a search list and ndots:5.
    t3 = time.time()
    write_atomic(resolv, LOUD_RESOLV)

    def dns_firing():
        return [e for e in rx.since(t3) if e["status"] == "firing"
                and e["alertname"] == "PodnetDNSQueriesPerLookupUp"]
    wait_for(dns_firing, 60, "PodnetDNSQueriesPerLookupUp", step=0.5)
    time.sleep(2)  # the other resolver's
    qpl = labkit.by_label(promql('name:podnet_dns_queries_per_lookup:ratio_rate5m'
                                 '{form="as_written"}'), "resolver")
    log("phase 3: DNS queries per lookup (as written) by resolver now: %s" % qpl)
    got = dns_firing()
    check(all(e["labels"].get("name") == DNS_NAME and e["labels"].get("form") == "as_written"
              for e in got),
          "phase 3: PodnetDNSQueriesPerLookupUp arrived (%.1f s after the change) for %s as "
          "written: %s" % (got[0]["received"] - t3, DNS_NAME,
                           sorted((e["labels"].get("resolver"), e["labels"].get("form"))
                                  for e in got)))
    t3_back = time.time()
    write_atomic(resolv, QUIET_RESOLV)
    dns_keys = {json.dumps(e["labels"], sort_keys=True) for e in got}
    wait_for(lambda: dns_keys <= {json.dumps(e["labels"], sort_keys=True)
                                  for e in rx.since(t3_back) if e["status"] == "resolved"},
             60, "PodnetDNSQueriesPerLookupUp resolved", step=0.5)
    t3_end = time.time()
    check(True, "phase 3: resolved %.1f s after the old resolv.conf came back"
          % (t3_end - t3_back))
    others = sorted({e["alertname"] for e in rx.since(t3, t3_end)}
                    - {"PodnetDNSQueriesPerLookupUp"})
    check(not others, "phase 3: no other alert reached the receiver %s" % others)
    phases.append(("3 resolv.conf ndots:5 + 3 search domains", t3, t3_end))

    # Phase 4: the same-zone peer's exporter (its responders) stops.
    t4 = time.time()
    labkit.stop(exporters[STOPPED])
    node = PODS[STOPPED][0]

    def node_fault():
        return [e for e in rx.since(t4) if e["status"] == "firing"
                and e["alertname"] == "PodnetPeerNodeFault"]
    wait_for(node_fault, 60, "PodnetPeerNodeFault", step=0.5)
    t4_fault = node_fault()[0]["received"]
    # Long enough for a per-prober PodnetPeerUnreachable to have arrived: its window without a
    # reply, its `for:`, Alertmanager's group_wait, and margin.
    hold = t4 + WINDOW_S + FOR_S + 10
    while time.time() < hold:
        time.sleep(0.5)
    held_back = promql("(sum without (protocol) (rate(podnet_rtt_packets_sent_total[10s])) > 0"
                       " unless sum without (protocol) "
                       "(rate(podnet_rtt_packets_received_total[10s])) > 0)")
    unreachable_state = [r["metric"].get("alertstate") for r in
                         promql('ALERTS{alertname="PodnetPeerUnreachable"}')]
    t4_end = time.time()
    got = rx.since(t4, t4_end)
    faults = {json.dumps(e["labels"], sort_keys=True) for e in got
              if e["status"] == "firing" and e["alertname"] == "PodnetPeerNodeFault"}
    naming = {json.dumps(e["labels"], sort_keys=True) for e in got
              if e["status"] == "firing" and (e["labels"].get("peer_node") == node
                                              or e["labels"].get("source_node") == node)}
    check(len(faults) == 1 and json.loads(next(iter(faults))).get("peer_node") == node,
          "phase 4: exactly one PodnetPeerNodeFault, naming %s (%.1f s after the stop): %s"
          % (node, t4_fault - t4, sorted(faults)))
    check(naming == faults, "phase 4: no other alert names %s: %s" % (node, sorted(naming)))
    unreachable = [e for e in got if e["alertname"] == "PodnetPeerUnreachable"]
    probers = sorted(r["metric"].get("instance", "")
                     for r in held_back if r["metric"].get("peer_node") == node)
    check(len(probers) == 3 and not unreachable and not unreachable_state,
          "phase 4: PodnetPeerUnreachable held back: its condition holds for %d probers of %s %s,"
          " %d notifications, in Prometheus %s"
          % (len(probers), node, probers, len(unreachable),
             unreachable_state or "neither pending nor firing"))
    others = sorted({e["alertname"] for e in got} - PHASE4_ALLOWED)
    check(not others, "phase 4: no alert outside %s reached the receiver %s"
          % (sorted(PHASE4_ALLOWED), others))
    check(all(exporters[p].poll() is None for p in PODS if p != STOPPED),
          "the other exporters still run")
    phases.append(("4 %s's exporter (%s) stopped" % (STOPPED, node), t4, t4_end))

    log()
    log("Receiver log (times from the test's start, %s UTC; labels without alertname and "
        "severity):" % time.strftime("%H:%M:%S", time.gmtime(t_start)))
    for title, a, b in phases:
        log("phase %s (+%.1f .. +%.1f s):" % (title, a - t_start, b - t_start))
        entries = rx.since(a, b)
        for e in entries:
            log(fmt(e, t_start))
        if not entries:
            log("  (nothing)")
    log("test time %.0f s" % (time.time() - t_start))


def main():
    sys.argv, alertmanager = _split_alertmanager(sys.argv)
    args = labkit.lab_arguments()
    args.alertmanager = alertmanager
    if not labkit.have_root():
        return labkit.skip(labkit.ROOT_NEEDED)
    for tool in ("unbound", "curl", args.prometheus, args.promtool, args.alertmanager):
        if not shutil.which(tool):
            log("FAILED: %s is not installed (scripts/install-deps.sh --test)" % tool)
            return 1
    return labkit.run_lab_test(args.lab_script, args.delayline, PREFIX,
                               lambda lab, tmp: scenario(args, lab, tmp), "podnet-lab-alerts-")


def _split_alertmanager(argv):
    """argv without --alertmanager BIN, and BIN (default: the PATH's prometheus-alertmanager)."""
    out, am, i = [], None, 0
    while i < len(argv):
        if argv[i] == "--alertmanager" and i + 1 < len(argv):
            am = argv[i + 1]
            i += 2
            continue
        if argv[i].startswith("--alertmanager="):
            am = argv[i].split("=", 1)[1]
            i += 1
            continue
        out.append(argv[i])
        i += 1
    return out, am or shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"


if __name__ == "__main__":
    sys.exit(main())
