#!/usr/bin/env python3
"""The shipped Alertmanager configuration's inhibition, run in a real Alertmanager.

deploy/kubernetes/alertmanager/alertmanager.yaml holds back the symptoms of a located fault
(inhibit_rules). promtool cannot test that part: this test starts the real
`prometheus-alertmanager` on loopback with the shipped file (receivers replaced by a webhook to
a closed loopback port, so no notification leaves the machine; route and inhibition as
shipped), posts alerts through its API (POST /api/v2/alerts) and asks which ones it holds back
(GET /api/v2/alerts: status.inhibitedBy).

Each case below is an incident: the alerts that fire together, and for each one whether the
shipped configuration must hold it back. Every case has its own `cluster` label, and every
shipped inhibit rule has `cluster` among its `equal` labels, so the cases cannot affect each
other and all are posted at once. The cases come from the proving ground
(bench/proving_ground.sh), where each extra notification of an incident was a page, and from
the configuration's own comments (what each rule is for, and what it must not hold back).

Usage: alertmanager_inhibit_test.py [--alertmanager PATH]. Exit 0 when every case passed, 1 when
one failed, 77 when Alertmanager is not installed (a failure with CI=true).
"""
import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import alerting  # noqa: E402
import labkit as K  # noqa: E402

# (case, [(alertname, labels, held back?)]). `node` is the exporter's node (scrape labels),
# peer_node / source_zone / peer_zone the alert's own labels, as the shipped rules set them.
CASES = [
    ("a zone cut: the pair's lookups retried across it are its symptom", [
        ("PodnetZonePairUnreachable", {"source_zone": "a", "peer_zone": "c"}, False),
        ("PodnetZonePairUnreachable", {"source_zone": "c", "peer_zone": "a"}, False),
        ("PodnetDNSQueriesPerLookupUp", {"form": "as_written", "resolver": "glibc"}, True),
        ("PodnetDNSFailures", {}, True),
        ("PodnetPacketLoss", {"source_zone": "a", "peer_zone": "c", "path_class": "cross_zone"},
         True),
    ]),
    ("a zone cut and a DNS replica down: the replica is another fault", [
        ("PodnetZonePairUnreachable", {"source_zone": "a", "peer_zone": "c"}, False),
        ("PodnetDNSServerDown", {"server": "10.0.0.10:53"}, False),
    ]),
    ("a cut between two zones leaves the third pair's alerts alone", [
        ("PodnetZonePairUnreachable", {"source_zone": "a", "peer_zone": "c"}, False),
        ("PodnetPacketLoss", {"source_zone": "a", "peer_zone": "b", "path_class": "cross_zone"},
         False),
    ]),
    ("an exporter down: its own rounds skipped and responders dropping are its symptoms", [
        ("PodnetExporterDown", {"node": "n1", "instance": "10.0.0.1:9479"}, False),
        ("PodnetProbeRoundsSkipped", {"node": "n1", "instance": "10.0.0.1:9479"}, True),
        ("PodnetResponderDropping", {"node": "n1", "instance": "10.0.0.1:9479"}, True),
        # another node's exporter is another fault
        ("PodnetResponderDropping", {"node": "n2", "instance": "10.0.0.2:9479"}, False),
    ]),
    ("a starved exporter's responders drop: its rounds skipped are the same trouble", [
        ("PodnetResponderDropping", {"node": "n4", "instance": "10.0.0.4:9479"}, False),
        ("PodnetProbeRoundsSkipped", {"node": "n4", "instance": "10.0.0.4:9479"}, True),
        # another exporter's skipped rounds are its own
        ("PodnetProbeRoundsSkipped", {"node": "n5", "instance": "10.0.0.5:9479"}, False),
    ]),
    ("a starved exporter answers late: the HTTP p99 into its zone, not into another", [
        ("PodnetResponderDropping", {"node": "n4", "instance": "10.0.0.4:9479", "peer_zone": "b"},
         False),
        ("PodnetHTTPLatencyRegression",
         {"source_zone": "a", "peer_zone": "b", "path_class": "cross_zone",
          "connection": "keepalive"}, True),
        ("PodnetHTTPLatencyRegression",
         {"source_zone": "b", "peer_zone": "b", "path_class": "same_zone",
          "connection": "new"}, True),
        ("PodnetHTTPLatencyRegression",
         {"source_zone": "b", "peer_zone": "c", "path_class": "cross_zone",
          "connection": "keepalive"}, False),
    ]),
    ("a node at fault holds back its exporter's health and its zone's HTTP p99", [
        ("PodnetPeerNodeFault", {"node": "n3", "peer_node": "n3", "peer_zone": "b"}, False),
        ("PodnetExporterDown", {"node": "n3", "instance": "10.0.0.3:9479"}, True),
        ("PodnetHTTPLatencyRegression",
         {"source_zone": "a", "peer_zone": "b", "path_class": "cross_zone",
          "connection": "keepalive"}, True),
        ("PodnetHTTPLatencyRegression",
         {"source_zone": "a", "peer_zone": "c", "path_class": "cross_zone",
          "connection": "keepalive"}, False),
    ]),
    ("a zone pair slower than a day ago: its latency alerts, not another pair's", [
        ("PodnetZonePairFault", {"source_zone": "a", "peer_zone": "b", "path_class": "cross_zone"},
         False),
        ("PodnetCrossZoneRTTRegression",
         {"source_zone": "a", "peer_zone": "b", "path_class": "cross_zone"}, True),
        ("PodnetCrossZoneRTTRegression",
         {"source_zone": "b", "peer_zone": "c", "path_class": "cross_zone"}, False),
    ]),
    ("one DNS replica down: the lookups through the Service", [
        ("PodnetDNSServerDown", {"server": "10.0.0.10:53"}, False),
        ("PodnetDNSQueriesPerLookupUp", {"form": "as_written", "resolver": "musl"}, True),
        ("PodnetDNSFailures", {}, True),
    ]),
]


def key_of(labels):
    return json.dumps({k: v for k, v in labels.items() if k != "severity"}, sort_keys=True)


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--alertmanager", default=shutil.which("prometheus-alertmanager")
                    or shutil.which("alertmanager"))
    args = ap.parse_args()
    if not args.alertmanager or not os.access(args.alertmanager, os.X_OK):
        return K.skip("prometheus-alertmanager is not installed")
    tmp = tempfile.mkdtemp(prefix="podnet-am-inhibit-")
    try:
        dead = K.free_port()  # nothing listens there: notifications fail on loopback
        config = os.path.join(tmp, "alertmanager.yml")
        alerting.alertmanager_config(config, "http://127.0.0.1:%d/" % dead)
        port = K.free_port()
        alerting.start_alertmanager(None, tmp, config, port, alertmanager=args.alertmanager)
        base = "http://127.0.0.1:%d/api/v2/alerts" % port
        now = datetime.datetime.now(datetime.timezone.utc)
        ends = (now + datetime.timedelta(minutes=30)).isoformat()
        alerts = []
        for i, (_case, incident) in enumerate(CASES):
            for name, labels, _held in incident:
                alerts.append({"labels": dict(labels, alertname=name, cluster="case%d" % i,
                                              severity="critical"),
                               "startsAt": now.isoformat(), "endsAt": ends})
        K.check(post(base, alerts) == 200, "Alertmanager took the %d alerts" % len(alerts))
        want = {key_of(dict(labels, alertname=name, cluster="case%d" % i)): held
                for i, (_case, incident) in enumerate(CASES) for name, labels, held in incident}

        def got_now():
            status, body = K.http(None, base + "?active=true&inhibited=true&silenced=true")
            return {key_of(a["labels"]): bool(a["status"].get("inhibitedBy"))
                    for a in (json.loads(body) if status == 200 else [])}
        # Alertmanager's inhibitor learns of new source alerts asynchronously (its subscription
        # to the alert store): read until every verdict is in, 10 s at most, then judge.
        got = got_now()
        deadline = time.time() + 10
        while got != want and time.time() < deadline:
            time.sleep(0.2)
            got = got_now()
        for i, (case, incident) in enumerate(CASES):
            for name, labels, held in incident:
                key = key_of(dict(labels, alertname=name, cluster="case%d" % i))
                K.check(got.get(key) is held,
                        "%s: %s %s is %s (Alertmanager: %s)"
                        % (case, name, labels, "held back" if held else "sent",
                           {True: "held back", False: "sent", None: "not found"}[got.get(key)]))
    except K.Broken as e:
        K.check(False, "could not run: %s" % e)
    finally:
        K.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    return K.exit_code()


if __name__ == "__main__":
    sys.exit(main())
