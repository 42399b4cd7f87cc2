#!/usr/bin/env python3
"""Writes the Grafana dashboards (dashboards/*.json) from the tables below.

    python3 dashboards/generate.py           rewrite the JSON files next to this script
    python3 dashboards/generate.py --check   exit 1 if a JSON file differs from what this writes

The JSON files are what users import (committed, stable uids); this script keeps their variables,
selectors and layout consistent. Grafana 10/11 model (schemaVersion 39); the Prometheus data
source is the variable `datasource`. Latency histograms carry no `peer` label by default (they
are per peer zone and path class unless metrics.per_peer_histograms), so no histogram query
selects on $peer; counters do, and keep working with `metrics: { aggregate_peers: true }`, where
`peer=~"$peer"` with "All" (.*) also matches series without the label.

At a glance: latency and DNS panels draw the same figure 1 day and 1 week earlier (with_past:
PromQL `offset`, dashed and dotted lines); every dashboard marks firing podnet alerts (the
annotation "podnet alerts" on ALERTS); cluster-wide latency panels read the recording rules'
per-zone-pair buckets, not the raw `_bucket` series (the Peers dashboard keeps those, per node).
"""
import json
import os
import re
import sys

SCHEMA_VERSION = 39
DS = {"type": "prometheus", "uid": "${datasource}"}
# The selector every prober-side series gets; "$peer" only on dashboards that offer it.
SEL = 'cluster=~"$cluster", source_zone=~"$zone", source_node=~"$node"'
SEL_PEER = SEL + ', peer=~"$peer"'
CL = 'cluster=~"$cluster"'
DNS_SEL = 'cluster=~"$cluster", name=~"$name", resolver=~"$resolver"'
RI = "$__rate_interval"
# Recorded per-zone-pair histograms (podnet-recording-rules.yml): what cluster-wide latency
# panels read instead of the raw buckets (~150 k RTT, ~300 k HTTP series at 300 nodes).
RTT_RATE = "path_class_zone:podnet_rtt_seconds_bucket:rate5m"
HTTP_RATE = "path_class_zone:podnet_http_request_duration_seconds_bucket:rate5m"
ZONE_SEL = 'cluster=~"$cluster", source_zone=~"$zone"'
# The figure beside the current one: (PromQL offset, legend suffix, line style).
PAST = (("1d", "1d ago", {"fill": "dash", "dash": [10, 10]}),
        ("1w", "1w ago", {"fill": "dot", "dash": [0, 10]}))
SELECTOR = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\{[^{}]*\}(\[[^\]]+\])?")


def shifted(expr, offset):
    """expr with every series selector read `offset` earlier (PromQL's offset modifier)."""
    out, n = SELECTOR.subn(lambda m: m.group(0) + " offset " + offset, expr)
    if n == 0 or n != expr.count("{"):  # every selector has braces: none may stay unshifted
        raise ValueError("cannot shift every selector of: " + expr)
    return out


def with_past(exprs):
    """[(expr, legend)] followed by the same 1 day and 1 week earlier."""
    out = list(exprs)
    for offset, suffix, _ in PAST:
        out += [(shifted(e, offset), (legend + " " + suffix).strip()) for e, legend in exprs]
    return out


def q(var, label, metric, label_name=None, multi=True):
    """A query variable: the values of `label_name` (default: the variable's name) on `metric`."""
    lv = "label_values(%s, %s)" % (metric, label_name or var)
    return {"type": "query", "name": var, "label": label, "datasource": DS,
            "query": {"query": lv, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "refresh": 2, "sort": 1, "multi": multi, "includeAll": True,
            "allValue": ".*", "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "options": [], "hide": 0, "regex": "", "skipUrlSync": False}


def variables(kind):
    out = [{"type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus",
            "hide": 0, "includeAll": False, "multi": False, "options": [],
            "refresh": 1, "regex": "", "skipUrlSync": False},
           q("cluster", "Cluster", "podnet_build_info")]
    if kind == "dns":
        out += [q("name", "Name", "podnet_dns_lookups_total{%s}" % CL),
                q("resolver", "Resolver", "podnet_dns_lookups_total{%s}" % CL)]
        return out
    out += [q("zone", "Source zone", "podnet_rtt_packets_sent_total{%s}" % CL, "source_zone"),
            q("node", "Source node", 'podnet_rtt_packets_sent_total{%s, source_zone=~"$zone"}' % CL,
              "source_node"),
            q("peer", "Peer", 'podnet_rtt_packets_sent_total{%s, source_zone=~"$zone", '
                              'source_node=~"$node"}' % CL)]
    return out


def target(expr, legend, ref, instant=False, fmt="time_series"):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "range": not instant,
         "instant": instant, "format": fmt, "editorMode": "code"}
    return t


def panel(kind, title, exprs, unit, x, y, w=12, h=8, desc="", **extra):
    """exprs: [(expr, legend)]."""
    p = {"type": kind, "title": title, "description": desc, "datasource": DS,
         "gridPos": {"x": x, "y": y, "w": w, "h": h},
         "targets": [target(e, l, chr(ord("A") + i), instant=extra.get("instant", False),
                            fmt=extra.get("fmt", "time_series")) for i, (e, l) in enumerate(exprs)],
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
         "options": {}}
    if kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {"drawStyle": "line", "lineWidth": 1,
                                                  "fillOpacity": 0, "showPoints": "never",
                                                  "spanNulls": False}
        for _, suffix, style in PAST:  # the past figures of with_past, dashed and dotted
            if any(legend.endswith(suffix) for _, legend in exprs):
                p["fieldConfig"]["overrides"].append(
                    {"matcher": {"id": "byRegexp", "options": ".*%s$" % suffix},
                     "properties": [{"id": "custom.lineStyle", "value": style}]})
        p["options"] = {"legend": {"displayMode": "table", "placement": "bottom",
                                   "showLegend": True, "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}
    elif kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "justifyMode": "auto",
                        "orientation": "auto", "textMode": "auto"}
    elif kind == "bargauge":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "orientation": "horizontal", "displayMode": "gradient",
                        "showUnfilled": True}
        if "minmax" in extra:
            p["fieldConfig"]["defaults"]["min"], p["fieldConfig"]["defaults"]["max"] = \
                extra["minmax"]
    elif kind == "heatmap":
        p["options"] = {"calculate": False, "cellGap": 1,
                        "color": {"mode": "scheme", "scheme": "Oranges", "fill": "dark-orange",
                                  "scale": "exponential", "exponent": 0.5, "steps": 64,
                                  "reverse": False},
                        "yAxis": {"axisPlacement": "left", "unit": "s", "reverse": False},
                        "rowsFrame": {"layout": "le"}, "showValue": "never",
                        "tooltip": {"mode": "single", "yHistogram": True, "showColorScale": True},
                        "legend": {"show": True}, "exemplars": {"color": "rgba(255,0,255,0.7)"},
                        "filterValues": {"le": 1e-9}}
    elif kind == "table":
        p["options"] = {"showHeader": True, "cellHeight": "sm",
                        "footer": {"show": False, "reducer": ["sum"], "fields": ""}}
        p["fieldConfig"]["defaults"]["custom"] = {"align": "auto",
                                                  "cellOptions": {"type": "color-background"}}
        p["fieldConfig"]["defaults"]["thresholds"] = {
            "mode": "absolute", "steps": [{"color": "green", "value": None},
                                          {"color": "orange", "value": extra.get("warn", 0.001)},
                                          {"color": "red", "value": extra.get("crit", 0.002)}]}
        p["transformations"] = [{"id": "groupingToMatrix",
                                 "options": {"rowField": "source_zone", "columnField": "peer_zone",
                                             "valueField": "Value"}}]
    return p


def native_or(classic, q_, metric, by, sel, window):
    """`classic` where it is a number or, where Prometheus stores `metric` as native histograms
    (metrics.native_histograms: no _bucket series, or only ones that stopped moving, whose
    quantile is NaN), the same quantile read from them."""
    return "(%s >= 0 or histogram_quantile(%s, sum by (%s) (rate(%s{%s}[%s]))))" % (
        classic, q_, by, metric, sel, window)


def quantile(q_, metric, by, sel, window=RI):
    return native_or("histogram_quantile(%s, sum by (%s, le) (rate(%s_bucket{%s}[%s])))" % (
        q_, by, metric, sel, window), q_, metric, by, sel, window)


def recorded_quantile(q_, rate_rule, by, sel):
    """The quantile from a recorded bucket rate (path_class_zone:*_bucket:rate5m, a stage-1
    record: summed over the shards here), else from the recorded native histograms
    (path_class_zone:*:rate5m), else from the raw native histograms over the rule's 5m (the gaps
    Prometheus before 2.47 leaves in recorded native histograms: podnet-recording-rules.yml says
    why). The first two need only records, as a global evaluator holds them."""
    metric = re.fullmatch(r"path_class_zone:(\w+)_bucket:rate5m", rate_rule).group(1)
    native = "path_class_zone:%s:rate5m" % metric
    return native_or("(histogram_quantile(%s, sum by (%s, le) (%s{%s})) >= 0 or "
                     "histogram_quantile(%s, sum by (%s) (%s{%s})))" % (
                         q_, by, rate_rule, sel, q_, by, native, sel), q_, metric, by, sel, "5m")


def row(title, y):
    return {"type": "row", "title": title, "collapsed": False, "panels": [],
            "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}}


def loss(by, sel):
    return ("1 - sum by ({by}) (rate(podnet_rtt_packets_received_total{{{sel}}}[{ri}]))\n"
            "  / (sum by ({by}) (rate(podnet_rtt_packets_sent_total{{{sel}}}[{ri}])) > 0)"
            .format(by=by, sel=sel, ri=RI))


def where_is_the_fault(y):
    """The row "Where is the fault" (podnet.fault recording rules; alerts PodnetPeerNodeFault,
    PodnetProberFault, PodnetZonePairFault): 1 + 8 high from y."""
    zone_pair = 'zone_pair:podnet_rtt_round_median_seconds:median_avg5m{%s}' % ZONE_SEL
    return [
        row("Where is the fault", y),
        panel("bargauge", "Nodes: share of their probers that see them bad (top 10)",
              [('topk(10, peer_node:podnet_path_bad:ratio{%s})' % CL,
                "{{peer_node}} ({{peer_zone}})")], "percentunit", 0, y + 1, 6, 8,
              "Per peer node: the share of the probers probing it whose path to it is bad (loss "
              "or RTT far above its path class's normal). More than half, of at least 3 probers: "
              "PodnetPeerNodeFault names the node. Empty with metrics.aggregate_peers.",
              minmax=(0, 1)),
        panel("bargauge", "Probers: share of their peers they see bad (top 10)",
              [('topk(10, source_node:podnet_path_bad:ratio{%s})' % ZONE_SEL,
                "{{source_node}} ({{source_zone}})")], "percentunit", 6, y + 1, 6, 8,
              "Per prober: the share of its peers (peer nodes) it sees bad. More than half, of "
              "at least 3, while the others see them fine: PodnetProberFault names the prober.",
              minmax=(0, 1)),
        panel("timeseries", "Zone pairs: RTT now ÷ 1 day ago, and the regression ratio",
              [('%s / %s' % (zone_pair, shifted(zone_pair, "1d")),
                "{{source_zone}} → {{peer_zone}} {{path_class}}"),
               ("podnet:config:rtt_regression_ratio", "regression ratio (setting)")],
              "none", 12, y + 1, 12, 8,
              "Median over each zone pair's paths of their exact round medians, against the "
              "same time yesterday. One pair above the ratio while the others stay near 1: "
              "PodnetZonePairFault; all of them: a cluster-wide change."),
    ]


def overview():
    fault = where_is_the_fault(6)
    below = 6 + 9 + 1  # below the row and its panels, under a row of their own
    return "podnet-overview", "podnet / Overview: the latency ladder", "overview", [
        panel("bargauge", "RTT p50 by path class (recorded, last 5m)",
              with_past([('path_class:podnet_rtt_seconds:p50{%s}' % CL, "{{path_class}}")]),
              "s", 0, 0, 8, 6,
              "The ladder: same_node < same_zone < cross_zone, and the same 1 day and 1 week "
              "ago. From the recording rules."),
        panel("bargauge", "HTTP p50 by path class and connection (recorded)",
              with_past([('path_class:podnet_http_request_duration_seconds:p50{%s}' % CL,
                          "{{path_class}} {{connection}}")]), "s", 8, 0, 8, 6),
        panel("stat", "Peers by path class",
              [('sum by (path_class) (podnet_peers{%s})' % CL, "{{path_class}}")],
              "none", 16, 0, 8, 6, "Peers each prober measures (summed over probers)."),
        *fault,
        row("Latency, loss and the exporter over time", below - 1),
        panel("timeseries", "RTT p50 by path class (recorded, by source zone)",
              with_past([(recorded_quantile(0.5, RTT_RATE, "path_class", ZONE_SEL),
                          "{{path_class}}")]), "s", 0, below,
              desc="From the per-zone-pair bucket rates of the recording rules: follows the "
                   "zone variable, not node (Peers has one node's view)."),
        panel("timeseries", "RTT p99 by path class (recorded, by source zone)",
              with_past([(recorded_quantile(0.99, RTT_RATE, "path_class", ZONE_SEL),
                          "{{path_class}}")]), "s", 12, below),
        panel("timeseries", "HTTP request p50 by path class and connection (recorded)",
              with_past([(recorded_quantile(0.5, HTTP_RATE, "path_class, connection", ZONE_SEL),
                          "{{path_class}} {{connection}}")]),
              "s", 0, below + 8),
        panel("timeseries", "HTTP request p99 by path class and connection (recorded)",
              with_past([(recorded_quantile(0.99, HTTP_RATE, "path_class, connection",
                                            ZONE_SEL), "{{path_class}} {{connection}}")]),
              "s", 12, below + 8),
        panel("timeseries", "Packet loss by path class",
              [(loss("path_class", SEL_PEER), "{{path_class}}")],
              "percentunit", 0, below + 16),
        panel("timeseries", "Probe errors by probe and reason",
              [('sum by (probe, reason) (rate(podnet_probe_errors_total{%s}[%s]))' % (CL, RI),
                "{{probe}} {{reason}}")], "ops", 12, below + 16),
        # The exporter's own health: what it costs, and whether it keeps its schedule and answers
        # its peers (alerts PodnetProbeRoundsSkipped, PodnetResponderDropping).
        panel("timeseries", "Exporter health: CPU (cores) and resident memory by instance",
              [('rate(process_cpu_seconds_total{%s, job=~".*podnet.*"}[%s])' % (CL, RI),
                "{{instance}} CPU"),
               ('process_resident_memory_bytes{%s, job=~".*podnet.*"} / 2^30' % CL,
                "{{instance}} RSS GiB")], "none", 0, below + 24, 8, 8,
              "process_* metrics of each exporter: CPU in cores, resident memory in GiB."),
        panel("timeseries", "Exporter health: round start delay p99 by probe",
              [(quantile(0.99, "podnet_probe_round_start_delay_seconds", "probe", CL),
                "{{probe}}")], "s", 8, below + 24, 8, 8,
              "How late probe rounds start: a busy or throttled probe loop shows here first."),
        panel("timeseries", "Exporter health: skipped rounds and responder drops",
              [('sum by (probe) (rate(podnet_probe_rounds_skipped_total{%s}[%s]))' % (CL, RI),
                "skipped {{probe}}"),
               ('sum by (responder, reason) (rate(podnet_responder_dropped_total{%s}[%s]))'
                % (CL, RI), "dropped {{responder}} {{reason}}")], "ops", 16, below + 24, 8, 8,
              "Rounds skipped (a round outlasted its interval) and requests the responders did "
              "not answer (rate limit, malformed)."),
    ]


def path_mtu(y):
    """Path MTU (the path-MTU probe; podnet.mtu recording rules, alert PodnetPathMTUBlackHole):
    a table of zone pairs and directions with black holes in red, and the MTU over time."""
    mtu = 'path_class_zone:podnet_path_mtu_bytes:min{%s}' % ZONE_SEL
    # One row per zone pair and direction: every query has the same labels and no metric name
    # (the table's merge joins rows on them). The interface MTU has no direction: it is repeated
    # for each direction of the pair's path MTU.
    # The records are stage 1's, one per Prometheus shard: minimums (min by) and counts (sum by)
    # over the shards.
    by = "sum by (cluster, path_class, source_zone, peer_zone, direction) (%s)"
    least = "min by (cluster, path_class, source_zone, peer_zone, direction) (%s)"
    iface = ('min by (cluster, path_class, source_zone, peer_zone) '
             '(path_class_zone:podnet_path_mtu_interface_bytes:min{%s})\n'
             '  + on (cluster, path_class, source_zone, peer_zone) group_right\n'
             '    0 * %s' % (ZONE_SEL, least % mtu))
    columns = ["path MTU", "interface MTU", "black-holed paths", "paths"]
    table = panel("table", "Path MTU by zone pair and direction (black holes in red)",
                  [(least % mtu, ""), (iface, ""),
                   (by % ('path_class_zone:podnet_path_mtu_black_holes:count{%s}' % ZONE_SEL), ""),
                   (by % ('path_class_zone:podnet_path_mtu_paths:count{%s}' % ZONE_SEL), "")],
                  "none", 0, y, 12, 8,
                  "The smallest path MTU (bytes) of each zone pair's paths, per direction "
                  "(forward: the source zone's probers to their peers; reverse: the peers' "
                  "replies back, asked only up to the forward figure, so equal to it means at "
                  "least that: the other zone's forward row measures beyond), against the Pods' "
                  "interface MTU. Black-holed paths: larger "
                  "packets lost with no ICMP frag-needed / packet-too-big while smaller ones "
                  "passed; PodnetPathMTUBlackHole fires after 25 minutes of it. A path MTU below "
                  "the interface MTU without black holes is path MTU discovery at work.",
                  instant=True, fmt="table")
    defaults = table["fieldConfig"]["defaults"]
    defaults["custom"]["cellOptions"] = {"type": "auto"}
    defaults["thresholds"] = {"mode": "absolute", "steps": [{"color": "text", "value": None}]}
    table["fieldConfig"]["overrides"] = [
        {"matcher": {"id": "byName", "options": "black-holed paths"},
         "properties": [{"id": "custom.cellOptions", "value": {"type": "color-background"}},
                        {"id": "color", "value": {"mode": "thresholds"}},
                        {"id": "thresholds", "value": {"mode": "absolute", "steps": [
                            {"color": "green", "value": None}, {"color": "red", "value": 1}]}}]}]
    table["transformations"] = [
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {
            "excludeByName": {"Time": True},
            "renameByName": {"Value #%s" % chr(ord("A") + i): c for i, c in enumerate(columns)},
            "indexByName": {}}}]
    return [
        table,
        panel("timeseries", "Path MTU by zone pair and direction (recorded)",
              [(least % mtu, "{{source_zone}} → {{peer_zone}} {{path_class}} {{direction}}"),
               ('min by (cluster, path_class, source_zone, peer_zone) '
                '(path_class_zone:podnet_path_mtu_interface_bytes:min{%s})' % ZONE_SEL,
                "interface {{source_zone}} → {{peer_zone}} {{path_class}}")],
              "none", 12, y, 12, 8,
              "The smallest path MTU (bytes) of each zone pair's paths and the Pods' interface "
              "MTU over time: a step down lines up with the change that made it (a CNI "
              "setting, a new gateway or tunnel). Written once per probe round (minutes apart)."),
    ]


def zone_matrix():
    # The recorded per-zone-pair bucket rates (no peer and no node label on them).
    not_same_node = ZONE_SEL + ', path_class!="same_node"'
    rtt_p50 = recorded_quantile(0.5, RTT_RATE, "source_zone, peer_zone", not_same_node)
    return "podnet-zone-matrix", "podnet / Zone matrix", "zone", [
        panel("table", "RTT p50: source zone (rows) × peer zone (columns)",
              [(rtt_p50, "")], "s",
              0, 0, 12, 8, "Same-node pairs left out, so the diagonal is the same-zone RTT. "
              "From the recording rules (5-minute rates).",
              instant=True, fmt="table"),
        panel("table", "RTT p99: source zone × peer zone",
              [(recorded_quantile(0.99, RTT_RATE, "source_zone, peer_zone", not_same_node), "")],
              "s", 12, 0, 12, 8, instant=True, fmt="table", warn=0.002, crit=0.005),
        panel("table", "Packet loss: source zone × peer zone",
              [(loss("source_zone, peer_zone", SEL_PEER).replace(RI, "5m"), "")], "percentunit",
              0, 8, 12, 8, instant=True, fmt="table", warn=0.001, crit=0.01),
        panel("table", "HTTP keep-alive p50: source zone × peer zone",
              [(recorded_quantile(0.5, HTTP_RATE, "source_zone, peer_zone",
                                  not_same_node + ', connection="keepalive"'), "")], "s",
              12, 8, 12, 8, instant=True, fmt="table"),
        panel("timeseries", "RTT p50 by zone pair and path class (recorded)",
              with_past([('path_class_zone:podnet_rtt_seconds:p50{%s}' % ZONE_SEL,
                          "{{source_zone}} → {{peer_zone}} {{path_class}}")]), "s", 0, 16),
        panel("timeseries", "RTT p99 by zone pair and path class (recorded)",
              with_past([('path_class_zone:podnet_rtt_seconds:p99{%s}' % ZONE_SEL,
                          "{{source_zone}} → {{peer_zone}} {{path_class}}")]), "s", 12, 16),
        panel("timeseries", "Loss by zone pair and path class (recorded)",
              [('path_class_zone:podnet_rtt_loss:ratio_rate5m{%s, source_zone=~"$zone"}' % CL,
                "{{source_zone}} → {{peer_zone}} {{path_class}}")], "percentunit", 0, 24),
        panel("timeseries", "HTTP p99 by zone pair and connection (recorded)",
              with_past([('path_class_zone:podnet_http_request_duration_seconds:p99{%s}'
                          % ZONE_SEL, "{{source_zone}} → {{peer_zone}} {{connection}}")]),
              "s", 12, 24),
        # Service locality (probes.service): does traffic through a Service address stay in
        # the zone? The path class here is the prober's → the backend that answered.
        panel("timeseries", "Service answers kept in the zone (recorded)",
              [('service_zone:podnet_service_in_zone:ratio_rate5m{%s, source_zone=~"$zone"}' % CL,
                "{{service}} from {{source_zone}}")], "percentunit", 0, 32,
              desc="Share of the service probe's answers that came from a backend in the "
                   "prober's zone (same node or same zone). Alert PodnetServiceTrafficLeavesZone "
                   "compares it with what the Service asks for (podnet_service_info)."),
        panel("timeseries", "Service answers by backend zone and path class",
              [('sum by (service, source_zone, backend_zone, path_class) '
                '(rate(podnet_service_requests_total{%s}[%s]))' % (SEL, RI),
                "{{service}} {{source_zone}} → {{backend_zone}} {{path_class}}")], "reqps", 12, 32,
              desc="Each request is a flow of its own, so this is how the dataplane spreads "
                   "flows over the backends. path_class=unknown: the answer carried no identity."),
        panel("timeseries", "Service request p50 by source zone and path class (recorded)",
              with_past([('service_zone:podnet_service_rtt_seconds:p50{%s}' % ZONE_SEL,
                          "{{service}} {{source_zone}} {{path_class}}")]), "s", 0, 40, 24, 8,
              desc="Through the Service address: a new flow each time (UDP: one echo; HTTP: "
                   "connect and one request)."),
        # The matrix against the past: 1 = as then; the regression alerts' ratio is 1.5.
        panel("table", "RTT p50 now ÷ 1 day ago: source zone × peer zone",
              [("%s / %s" % (rtt_p50, shifted(rtt_p50, "1d")), "")], "none", 0, 48, 12, 8,
              "The p50 matrix above against the same time yesterday.",
              instant=True, fmt="table", warn=1.2, crit=1.5),
        panel("table", "RTT p50 now ÷ 1 week ago: source zone × peer zone",
              [("%s / %s" % (rtt_p50, shifted(rtt_p50, "1w")), "")], "none", 12, 48, 12, 8,
              "The p50 matrix above against the same time a week ago.",
              instant=True, fmt="table", warn=1.2, crit=1.5),
        *path_mtu(56),
    ]


def peers():
    sel = SEL_PEER
    return "podnet-peers", "podnet / Peers", "peers", [
        # Latency histograms are per (peer zone, path class) unless per_peer_histograms: the
        # distributions are read without the peer selector; "which peer?" is read from the
        # per-peer round gauges and counters.
        panel("heatmap", "RTT distribution by peer zone (histogram buckets)",
              [('sum by (le) (increase(podnet_rtt_seconds_bucket{%s}[%s]))' % (SEL, RI),
                "{{le}}")], "s", 0, 0, 24, 9,
              "Every RTT sample of the selected source(s), all peers (histograms are per peer "
              "zone and path class).", fmt="heatmap"),
        panel("timeseries", "RTT by peer: round median and minimum (exact)",
              with_past([('avg by (peer) (avg_over_time(podnet_rtt_round_median_seconds{%s}[%s]))'
                          % (sel, RI), "median {{peer}}"),
                         ('min by (peer) (min_over_time(podnet_rtt_round_min_seconds{%s}[%s]))'
                          % (sel, RI), "min {{peer}}")]), "s", 0, 9,
              desc="From each train's own samples (kernel stamps): a 20 µs change shows here, "
                   "inside any histogram bucket."),
        panel("timeseries", "Packet loss by peer", [(loss("peer", sel), "{{peer}}")],
              "percentunit", 12, 9),
        panel("timeseries", "HTTP request p50 by peer zone and path class",
              with_past([(quantile(0.5, "podnet_http_request_duration_seconds",
                                   "peer_zone, path_class, connection", SEL),
                          "{{connection}} {{path_class}} {{peer_zone}}")]), "s", 0, 17,
              desc="Time to first byte and connect time have no panel: their families are off "
                   "by default (metrics.families)."),
        panel("timeseries", "HTTP responses by code",
              [('sum by (peer, connection, code) (rate(podnet_http_requests_total{%s}[%s]))'
                % (sel, RI), "{{peer}} {{connection}} {{code}}")], "reqps", 12, 17),
        panel("timeseries", "Probe errors by peer and reason",
              [('sum by (peer, probe, reason) (rate(podnet_probe_errors_total{%s}[%s]))'
                % (sel, RI), "{{peer}} {{probe}} {{reason}}")], "ops", 0, 25),
        # Coordinated bursts (peers.kubernetes) are per zone pair, without a peer label: the
        # peer zone names them.
        panel("timeseries", "Burst throughput by peer",
              [('max by (peer, peer_zone, streams) '
                '(podnet_burst_throughput_bytes_per_second{%s})' % sel,
                "{{peer}} {{peer_zone}} {{streams}} streams")], "Bps", 12, 25),
    ]


def dns():
    sel = DNS_SEL
    by = "name, form, resolver"
    # Every panel beside the same figure 1 day and 1 week ago (with_past): a search list or
    # ndots that changed shows as the line leaving its past.
    return "podnet-dns", "podnet / DNS amplification", "dns", [
        panel("timeseries", "Queries per lookup (last lookup)",
              with_past([('max by (%s) (podnet_dns_queries_per_lookup{%s})' % (by, sel),
                          "{{name}} {{form}} {{resolver}}")]), "none", 0, 0,
              desc="Questions on the wire for one lookup: the search-list walk as written, "
                   "against the name with a trailing dot (absolute)."),
        panel("timeseries", "Amplification: as written / absolute (recorded)",
              with_past([('name:podnet_dns_amplification:ratio{%s}' % sel,
                          "{{name}} {{resolver}}")]), "none", 12, 0),
        panel("timeseries", "NXDOMAIN share of responses (recorded)",
              with_past([('name:podnet_dns_nxdomain:ratio_rate5m{%s}' % sel,
                          "{{name}} {{form}} {{resolver}}")]), "percentunit", 0, 8),
        panel("timeseries", "Lookup latency p50: as written against absolute (recorded)",
              with_past([('name:podnet_dns_lookup_duration_seconds:p50{%s}' % sel,
                          "{{name}} {{form}} {{resolver}}")]), "s", 12, 8),
        panel("timeseries", "Lookups by result",
              with_past([('sum by (name, resolver, result) (rate(podnet_dns_lookups_total{%s}[%s]))'
                          % (sel, RI), "{{name}} {{resolver}} {{result}}")]), "ops", 0, 16),
        panel("timeseries", "Queries by type and form",
              with_past([('sum by (resolver, form, qtype) (rate(podnet_dns_queries_total{%s}[%s]))'
                          % (sel, RI), "{{resolver}} {{form}} {{qtype}}")]), "qps", 12, 16),
        panel("timeseries", "Lookup p99 (recorded)",
              with_past([('name:podnet_dns_lookup_duration_seconds:p99{%s}' % sel,
                          "{{name}} {{form}} {{resolver}}")]), "s", 0, 24),
        panel("timeseries", "Failed lookups share (recorded)",
              with_past([('name:podnet_dns_lookup_failures:ratio_rate5m{%s}' % sel,
                          "{{name}} {{form}} {{resolver}}")]), "percentunit", 12, 24),
    ]


def throughput_cost():
    sel = SEL_PEER
    return "podnet-throughput-cost", "podnet / Throughput and cost", "throughput", [
        panel("timeseries", "Burst throughput by path class and streams (last burst)",
              [('avg by (path_class, streams) (podnet_burst_throughput_bytes_per_second{%s})' % sel,
                "{{path_class}} {{streams}} streams")], "Bps", 0, 0),
        panel("timeseries", "Retransmits per burst hour by path class and streams",
              [('sum by (path_class, streams) (increase(podnet_burst_retransmits_total{%s}[1h]))'
                % sel,
                "{{path_class}} {{streams}} streams")], "none", 12, 0),
        panel("timeseries", "Sender TCP RTT during bursts (tcpi_rtt)",
              with_past([('avg by (path_class, streams) (podnet_burst_tcp_rtt_seconds{%s})' % sel,
                          "{{path_class}} {{streams}} streams")]), "s", 0, 8),
        panel("timeseries", "Congestion window at the end of a burst",
              [('avg by (path_class, streams) (podnet_burst_snd_cwnd_bytes{%s})' % sel,
                "{{path_class}} {{streams}} streams")], "bytes", 12, 8),
        panel("timeseries", "Prober bytes/s by path class and probe (sent + received)",
              [('sum by (path_class, probe) (rate(podnet_probe_sent_bytes_total{%s}[%s]))\n'
                '  + sum by (path_class, probe) (rate(podnet_probe_received_bytes_total{%s}[%s]))'
                % (sel, RI, sel, RI), "{{path_class}} {{probe}}")], "Bps", 0, 16),
        panel("timeseries", "Cross-zone bytes/s by zone pair (recorded)",
              [('path_class_zone:podnet_cross_zone_bytes:rate5m{%s, source_zone=~"$zone"}' % CL,
                "{{source_zone}} → {{peer_zone}}")], "Bps", 12, 16),
        panel("stat", "Estimated cross-zone cost of the prober, $ per hour",
              [('cluster:podnet_cross_zone_cost_usd:per_hour{%s}' % CL, "{{cluster}}")],
              "currencyUSD", 0, 24, 8, 6,
              "Bytes/s × 3600 / 1e9 × podnet:config:cross_zone_usd_per_gb "
              "(deploy/prometheus/podnet-recording-rules.yml)."),
        panel("stat", "… per 30 days", [('cluster:podnet_cross_zone_cost_usd:per_hour{%s} * 24 * 30'
                                         % CL, "{{cluster}}")], "currencyUSD", 8, 24, 8, 6),
        panel("stat", "Price used, $ per GB crossing zones (both ends)",
              [("podnet:config:cross_zone_usd_per_gb", "")], "currencyUSD", 16, 24, 8, 6),
        panel("timeseries", "Cost by zone pair, $ per hour (recorded)",
              [('path_class_zone:podnet_cross_zone_cost_usd:per_hour{%s, source_zone=~"$zone"}'
                % CL,
                "{{source_zone}} → {{peer_zone}}")], "currencyUSD", 0, 30, 24, 8),
        # What finding the peers costs the API server and CoreDNS (docs/design.md, "Discovery
        # at scale"): which source each exporter runs, the watch's fan-out, DNS discovery's load.
        row("What discovery costs the API server and CoreDNS", 38),
        panel("timeseries", "Discovery: exporters by source, and the probe Pods they see",
              [('count by (source) (podnet_discovery_candidates{%s})' % CL,
                "{{source}}: exporters"),
               ('max by (source) (podnet_discovery_candidates{%s})' % CL,
                "{{source}}: probe Pods seen")], "none", 0, 39, 8, 8,
              "source watch: the exporter lists and watches the probe Service's EndpointSlices "
              "(every slice write is sent to it); dns: it reads the Service's DNS records. "
              "discovery: auto takes dns from 100 probe Pods on."),
        panel("timeseries", "Discovery: EndpointSlice watch events/s received, by watch and type",
              [('sum by (resource, type) (rate(podnet_kubernetes_watch_events_total{%s}[%s]))'
                % (CL, RI), "{{resource}} {{type}}")], "ops", 8, 39, 8, 8,
              "What the API server sends all exporters together: endpointslices is the probe "
              "Service (none from exporters on dns), dns_endpointslices the cluster DNS Service."),
        panel("timeseries", "Discovery from DNS: questions and identity asks/s, by result",
              [('sum by (result) (rate(podnet_discovery_dns_queries_total{%s}[%s]))' % (CL, RI),
                "question {{result}}"),
               ('sum by (result) (rate(podnet_discovery_identity_asks_total{%s}[%s]))'
                % (CL, RI), "identity ask {{result}}")], "ops", 16, 39, 8, 8,
              "Exporters on dns: the Service name asked of CoreDNS (truncated: asked again over "
              "TCP), and each address asked who it is by its UDP echo responder."),
    ]


# Firing podnet alerts on every panel (Prometheus' ALERTS series; a region while it fires). The
# query in `target`, the event's title, text and tags as the Prometheus data source reads them.
ALERT_ANNOTATION = {
    "datasource": DS, "enable": True, "hide": False, "iconColor": "red", "name": "podnet alerts",
    "target": {"refId": "Anno", "interval": "60s",
               "expr": 'ALERTS{alertname=~"Podnet.*", alertstate="firing", %s}' % CL},
    "titleFormat": "{{alertname}}",
    "textFormat": "{{severity}}: {{source_zone}} {{peer_zone}} {{source_node}} {{peer_node}} "
                  "{{name}} {{instance}}",
    "tagKeys": "alertname,severity,path_class,source_zone,peer_zone,source_node,peer_node",
    "useValueForTime": False}


def dashboard(uid, title, kind, panels):
    for i, p in enumerate(panels, 1):
        p["id"] = i
    return {
        "uid": uid, "title": title, "tags": ["podnet"], "timezone": "browser",
        "editable": True, "graphTooltip": 1, "schemaVersion": SCHEMA_VERSION, "version": 1,
        "refresh": "1m", "time": {"from": "now-6h", "to": "now"}, "timepicker": {},
        "fiscalYearStartMonth": 0, "liveNow": False, "weekStart": "",
        "description": "podnet-exporter: Pod-to-Pod RTT, HTTP latency, bursts and DNS by path "
                       "class (same_node, same_zone, cross_zone).",
        "links": [{"title": "podnet dashboards", "type": "dashboards", "tags": ["podnet"],
                   "asDropdown": True, "includeVars": True, "keepTime": True, "icon": "external link",
                   "targetBlank": False, "tooltip": "", "url": ""}],
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"},
                                 ALERT_ANNOTATION]},
        "templating": {"list": variables(kind)},
        "panels": panels,
    }


BUILDERS = {"overview.json": overview, "zone-matrix.json": zone_matrix, "peers.json": peers,
            "dns-amplification.json": dns, "throughput-cost.json": throughput_cost}


def render():
    return {name: json.dumps(dashboard(*build()), indent=2, ensure_ascii=False) + "\n"
            for name, build in BUILDERS.items()}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    check = "--check" in sys.argv[1:]
    stale = []
    for name, text in render().items():
        path = os.path.join(here, name)
        if check:
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
                stale.append(name)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        print("out of date (run dashboards/generate.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
