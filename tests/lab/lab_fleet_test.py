#!/usr/bin/env python3
"""The proving ground's short version (issue 37; the full campaign is bench/proving_ground.sh):
a fleet of 9 nodes in 3 zones (tests/lib/fleet.py: one real exporter each, discovery through
the stand-in API server, real unbound replicas, a real Prometheus with the shipped rules and a
real Alertmanager with the SHIPPED configuration, deploy/kubernetes/alertmanager, time-scaled),
then, scored by tests/lib/campaign.py on what the webhook receiver logged:

  1. a node black hole at a random node: the first notification names that node, and the
     incident brings at most 2 notifications;
  2. a zone cut between two random zones: the first notification names that zone pair, at most
     2 notifications (one page for a cut, not one per path);
  3. a rolling restart of every exporter, one at a time (a DaemonSet rollout: each Pod's
     endpoint terminating, the Pod drained and replaced under a new name, ready, back in the
     Service; its peers hear of it 0.5 s after its SIGTERM): no notification but the lab's
     HTTP noise (LAB_NOISE), at most 2 HTTP or gRPC connections refused by a stopped Pod
     (resets answering a SYN, counted in each node; 0 with the drain, 83 without it:
     PODNET_LAB_DRAIN_S=0 shows this check fail), no RTT echo request lost (from the raw
     samples, a torn scrape at either end dropped: campaign.rtt_sent_lost) and no new `peer`
     value;
  0. before the faults, every node reached by >= 3 probe Pods from >= 2 zones, as the nodes'
     responders count them (podnet_responder_probers);
  4. every recording rule that reads the cluster DNS replicas (discovered through the
     EndpointSlices of kube-dns: lab_obs_test's lab has none) has data, one series per replica
     where it is per replica; those of native histograms none (the fleet's are classic).

--discovery dns runs every exporter with `peers.kubernetes.discovery: dns` instead of the
watch (tests/lib/fleet.py: the unbound replicas serve podnet.podnet.svc.cluster.local's A records
of the ready probe Pods, TTL 5 s, changed through a modelled CoreDNS cache 0-5 s after each
endpoint change; dns_refresh 30 s / 5 = 6 s). Before the faults it checks that DNS discovery
works (every exporter has every Pod as a candidate from answers counted `ok`, the API server
had the Service's GET and no list or watch of the podnet Service's EndpointSlices); the checks
above are the same. A peer then drops a stopped Pod only once its replica's answer has changed
and it asked again (up to ~13 s after the SIGTERM: 0.5 + 5 + 6.6 + 1; measured 2.8-10 s, or
never when no question fell while the address was out): past a 5 s drain, the rollout's
refused-probe check (3) failed (2026-12-07: 8 refused, http 6, grpc 2; no notification, no RTT
lost; with a 15 s drain 0 refused), so the exporter now drains at least 1.1 x dns_refresh + 7 s
when it reads the DNS records (13.6 s here). Here a new Pod keeps its node's address, so a peer
that never saw it leave the answer probes the new Pod; in a cluster, where a new Pod gets a new
address, it would probe a dead one.
Both modes: every query of the dashboards' discovery panels has data (those of DNS discovery
only with dns), with the labels its legend shows.

By default one Prometheus loads both rule files. --shards 2 (ctest) runs the rules as
docs/deploy.md ("A sharded Prometheus") describes instead: two Prometheus shards, each scraping
about half of the exporters and evaluating stage 1, and a global Prometheus federating their
records (--transport remote_write: receiving them by remote write) and evaluating stage 2;
the checks are the same, and take as long (~280 s either way).
With the shards' timestamps kept by the federation (the staleness they defeat: docs/deploy.md,
"Federation"), the zone cut after a node black hole failed (seed 11: 3 notifications, the
first a PodnetPeerUnreachable to the node that had been black-holed).

Usage: lab_fleet_test.py --exporter BIN --delayline BIN [--nodes 9] [--seed N]
[--shards N [--transport remote_write]] [--discovery watch|dns]. Needs root (exit 77 otherwise,
a failure with CI=true). Traffic stays in the namespaces it makes; every wait is bounded;
everything is stopped and the namespaces deleted on exit. ~4.5 min (~6 with a 15 s drain).
"""
import argparse
import os
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import alerting  # noqa: E402
import campaign as C  # noqa: E402
import fleet as F  # noqa: E402
import labkit  # noqa: E402
import obs_queries  # noqa: E402
from labkit import check, log  # noqa: E402


# Alerts the rollout may fire here from the lab's own noise, not from the rollout's loss:
# HTTP's (below), and a round skipped by an exporter whose CPU the lab's other Pods took (all
# the nodes share 2 cores; with `for` scaled to seconds one skip notifies: node-7 once, here,
# on a host that took ~40 % of the CPU as steal). A node of its own has no such neighbours.
LAB_NOISE = {"PodnetHTTPLatencyRegression", "PodnetProbeRoundsSkipped"}


def check_dns_discovery(fl, nodes):
    """Discovery "dns" at work: every exporter's candidates are every Pod (its own included),
    from answers counted ok; the stand-in API server had the podnet Service's GET and no list or
    watch of its EndpointSlices (only the watches of kube-dns and the echo Service)."""
    def per_node(expr):
        return {r["metric"].get("node"): float(r["value"][1]) for r in fl.promql(expr)}
    try:
        labkit.wait_for(lambda: sorted(per_node("podnet_discovery_candidates").values())
                        == [nodes] * nodes, 30, "every Pod a candidate of every exporter")
    except labkit.Broken:
        pass  # the check below says what was seen
    cands = per_node("podnet_discovery_candidates")
    check(len(cands) == nodes and set(cands.values()) == {nodes},
          "dns discovery: podnet_discovery_candidates == %d on every exporter (%s)"
          % (nodes, cands))
    results = {}
    for r in fl.promql("sum by (node, result) (podnet_discovery_dns_queries_total)"):
        results.setdefault(r["metric"].get("node"), {})[r["metric"].get("result")] = \
            int(float(r["value"][1]))
    check(len(results) == nodes and all(v.get("ok", 0) >= 1 for v in results.values()),
          "dns discovery: answers ok on every exporter (questions by result: %s)" % results)
    gets = [(path, urllib.parse.parse_qs(query))
            for path, _, query in (g.partition("?") for g in fl.api_requests())]
    slices = [path for path, q in gets if path.endswith("/namespaces/podnet/endpointslices")
              and q.get("labelSelector") == ["kubernetes.io/service-name=podnet"]]
    check(not slices, "dns discovery: no list or watch of the podnet Service's EndpointSlices "
          "(%d of %d requests)" % (len(slices), len(gets)))
    service = sum(1 for path, _ in gets if path == F.PODNET_SERVICE_PATH)
    check(service >= nodes, "dns discovery: the Service's GET (%s) %d times (>= %d)"
          % (F.PODNET_SERVICE_PATH, service, nodes))


# Panels of Kubernetes discovery (lab_obs_test has static peers: no data there, so here). Those of
# DNS discovery have data only with --discovery dns; the others in both modes.
DISCOVERY_PANEL = re.compile(r"podnet_(discovery|kubernetes)_")
DNS_DISCOVERY_PANEL = re.compile(r"podnet_discovery_(dns_queries|identity_asks)_total")


def check_discovery_panels(fl):
    """Every dashboard query of discovery's panels has data in this fleet (or, those of DNS
    discovery in a watching fleet, none), with the labels its legend shows."""
    for where, expr, panel in obs_queries.panel_queries():
        if not DISCOVERY_PANEL.search(expr):
            continue
        res = [r for r in fl.promql(obs_queries.substitute(expr, {"__rate_interval": "1m"}))
               if r["value"][1] not in ("NaN", "+Inf", "-Inf")]
        legend = next(t["legendFormat"] for t in panel["targets"] if t["expr"] == expr)
        shown = set(re.findall(r"\{\{(\w+)\}\}", legend))
        if DNS_DISCOVERY_PANEL.search(expr) and fl.discovery != "dns":
            check(not res, "%s: no data with discovery %s (%d series)"
                  % (where, fl.discovery, len(res)))
            continue
        check(bool(res) and all(shown <= set(r["metric"]) for r in res),
              "%s: %d series, each with %s (%s)"
              % (where, len(res), sorted(shown), sorted({tuple(sorted(
                  (k, v) for k, v in r["metric"].items() if k in shown)) for r in res})[:6]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--delayline", required=True)
    ap.add_argument("--nodes", type=int, default=9)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--shards", type=int, default=0)
    ap.add_argument("--transport", choices=("federate", "remote_write"), default="federate",
                    help="with --shards: how stage 1's records reach the global Prometheus")
    ap.add_argument("--discovery", choices=F.DISCOVERY, default="watch",
                    help="how the exporters find their peers: the EndpointSlice watch, or the "
                         "Service's DNS records")
    args = ap.parse_args()
    if args.transport != "federate" and args.shards < 2:
        ap.error("--transport goes with --shards 2 or more")
    if not labkit.have_root():
        return labkit.skip(labkit.ROOT_NEEDED)
    missing = F.have_tools("prometheus", "prometheus-alertmanager",
                           *(["unbound-control"] if args.discovery == "dns" else []))
    if missing:
        log("FAILED: not installed: %s (scripts/install-deps.sh --test)" % " ".join(missing))
        return 1
    # The campaign's knobs (bench/lib/proving_ground.py has them as flags).
    opts = argparse.Namespace(detect_timeout=90, hold=10, settle_timeout=90,
                              resolve_timeout=90, quiet=30, phase_tail=30)
    rng = random.Random(args.seed)
    log("seed %d (--seed %d repeats the targets); discovery %s, --shutdown.drain-period %d s"
        % (args.seed, args.seed, args.discovery, F.DRAIN_S))
    prefix = "pgt%d" % (os.getpid() % 1000)
    tmp = tempfile.mkdtemp(prefix="podnet-lab-fleet-")
    t0 = time.time()
    try:
        with F.Fleet(prefix, tmp, args.exporter, args.delayline, nodes=args.nodes,
                     zones=3, max_seconds=900, shards=args.shards,
                     transport=args.transport, discovery=args.discovery) as fl:
            fl.wait_ready(timeout=60)
            if fl.shards:
                # Every shard scrapes some exporters (hashmod of the addresses), or the run
                # proves nothing about sharding.
                def per_shard():
                    return [len(labkit.promql(fl.ctl, 'up{job="podnet"}', port=port))
                            for _, _, port, _ in fl.servers[:-1]]
                try:
                    labkit.wait_for(lambda: sum(per_shard()) == args.nodes, 30,
                                    "every exporter scraped by a shard", step=1)
                except labkit.Broken:
                    pass  # the check below says what was seen
                spread = per_shard()
                check(min(spread) >= 1 and sum(spread) == args.nodes,
                      "the exporters spread over %d Prometheus shards: %s" % (fl.shards, spread))
            c = C.Campaign(fl, opts, rng)
            # Every path probed and judged before the first fault.
            def judged():
                healthy = len(fl.promql("node_pair:podnet_path_bad:bool == 0"))
                return (healthy >= args.nodes * 2
                        and healthy >= 0.9 * len(fl.promql("node_pair:podnet_path_bad:bool")))
            labkit.wait_for(judged, 60, "90 % of the probed node pairs judged healthy", step=1)
            if fl.discovery == "dns":
                check_dns_discovery(fl, args.nodes)
            # Coverage from each node's own side (podnet_responder_probers): every node reached
            # by >= 3 probe Pods from >= 2 zones.
            def coverage():
                probers = {r["metric"].get("peer_node"): float(r["value"][1])
                           for r in fl.promql("peer_node:podnet_probers:count")}
                zones = {r["metric"].get("peer_node"): float(r["value"][1]) for r in fl.promql(
                    "count by (peer_node) (count by (peer_node, source_zone)"
                    " (podnet_responder_probers > 0))")}
                return probers, zones
            labkit.wait_for(lambda: len([n for n, v in coverage()[0].items() if v >= 3])
                            >= args.nodes, 60, "every node reached by 3 probe Pods", step=1)
            probers, zones = coverage()
            check(len(probers) == args.nodes and min(probers.values()) >= 3
                  and min(zones.get(n, 0) for n in probers) >= 2,
                  "coverage: %d nodes report it; probe Pods per node min %s, zones min %s"
                  % (len(probers), min(probers.values(), default=None),
                     min((zones.get(n, 0) for n in probers), default=None)))
            # What the canary Service asks for (podnet_service_info) comes from the 2 Pods of
            # each zone on that duty (rendezvous over the listed Pods), not from every node: the
            # API cost of the poll does not grow with the cluster.
            def info_per_zone():
                nodes = {r["metric"].get("node") for r in fl.promql("podnet_service_info")}
                per_zone = {}
                for n in fl.nodes:
                    if n.name in nodes:
                        per_zone[n.zone] = per_zone.get(n.zone, 0) + 1
                return per_zone, len(nodes)
            want = {n.zone: 2 for n in fl.nodes}
            try:
                labkit.wait_for(lambda: info_per_zone()[0] == want, 120,
                                "podnet_service_info from 2 Pods of each zone", step=2)
            except labkit.Broken:
                pass  # the check below says what was seen
            per_zone, exporting = info_per_zone()
            check(per_zone == want and exporting == sum(want.values()),
                  "podnet_service_info from %d Pods, by zone %s (2 of each zone wanted)"
                  % (exporting, per_zone))
            for kind in ("node_blackhole", "zone_cut"):
                c.trial(kind, len(c.trials) + 1, 2)
                t = c.trials[-1]
                check(t["detect_s"] is not None, "%s: a notification arrived (after %s s)"
                      % (kind, t["detect_s"] and round(t["detect_s"], 1)))
                check(t["top1"], "%s at %s: the first notification names it (%s %s)"
                      % (kind, t["truth"], t["first_alert"], t["first_labels"]))
                check(t["pages"] <= 2, "%s: %d notifications for the incident (at most 2): %s"
                      % (kind, t["pages"], t["alerts"]))
            c.phase("rollout")
            p = c.phases[-1]
            # The lab's HTTP noise aside (bench/README.md, "The lab's HTTP noise": with the
            # probes scaled a zone pair's p99 rests on a few requests, and each new Pod's start
            # on 2 busy cores can lift it: 2 of 4 rollouts fired PodnetHTTPLatencyRegression).
            other = [a for a in p["alerts"] if a not in LAB_NOISE]
            check(not other, "rollout of %d Pods: no notification but the lab's HTTP noise (%d "
                  "in all: %s %s)" % (len(fl.live()), p["false_notifications"], p["alerts"],
                                      p["examples"]))
            # Refusals only (a reset answering a SYN), not the resets that end open connections
            # (bench/README.md, "Rollouts"): 0 in every run with the drain, 83 without.
            # At most 2: a flake guard for a busy CI machine, far below a broken drain.
            check(p["refused_probes"] <= 2,
                  "rollout: %d HTTP/gRPC connections refused by a stopped Pod %s (0 is the aim, "
                  "at most 2: a stopping Pod answers through its drain (%d s), its peers drop it "
                  "first (discovery %s: up to %.1f s after its SIGTERM); other resets %s)"
                  % (p["refused_probes"], p["refused_by_port"], fl.drain_s(), fl.discovery,
                     fl.drop_bound_s(), p["other_resets"]))
            # ICMP is answered by the kernel whether a Pod runs or not: a loss here is the lab's
            # (0 in every run of bench/README.md's rollout table). At most 1 in 10,000: a host
            # that takes the CPU can hold a reply past the timeout (3 of 58,460 here once).
            check(p["rtt_sent"] > 0 and p["rtt_lost"] <= p["rtt_sent"] / 10000,
                  "rollout: %d RTT echo requests sent by the probers, %d lost (at most 1 in "
                  "10,000)" % (p["rtt_sent"], p["rtt_lost"]))
            check(not p["new_peer_values"], "rollout: no new peer values (%s)"
                  % (p["new_peer_values"] or "none"))
            log("rollout: probe errors %s" % (p["probe_errors"] or "none"))
            if fl.discovery == "dns":
                log("rollout: DNS discovery's questions %s"
                    % (p.get("discovery_dns_queries") or "none"))
            check_discovery_panels(fl)
            # (The records of native histograms have none here: the fleet's are classic.)
            for name in sorted(obs_queries.replica_rules() - obs_queries.native_rules()):
                got = fl.promql(name)
                servers = {r["metric"].get("server") for r in got} - {None}
                want = 1 if name.startswith("cluster:") else len(fl.dns)
                have = len(got) if name.startswith("cluster:") else len(servers)
                check(have >= want, "recording rule %s: %d series of replicas (%d wanted)"
                      % (name, have, want))
            log("receiver log:")
            for e in fl.receiver.entries():
                log(alerting.fmt(e, t0))
    except Exception as e:  # report, then clean up
        traceback.print_exc()
        check(False, "exception: %s" % e)
        labkit.dump_logs(tmp, 15)
    finally:
        labkit.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    log("test time %.0f s" % (time.time() - t0))
    return labkit.exit_code()


if __name__ == "__main__":
    sys.exit(main())
