#!/usr/bin/env python3
"""Lab test of the dashboards and rules against a real Prometheus that scraped the exporter.

The lab (tests/lab/lab.sh): a client Pod probing three peers (same node, same zone, cross zone)
that run podnet-exporter as responders, plus one peer on a closed port (probe errors). The client
runs the rtt, http, burst, dns and service probes (DNS against a real unbound in its namespace). A real
`prometheus` in the client namespace scrapes it every second, with the target labelled
cluster="lab", and loads deploy/prometheus's recording and alert rules. Then:

  - every recording rule returns data, and every rule evaluates without error; except the rules
    that compare with a day earlier (NEEDS_A_DAY: this Prometheus is minutes old), which must
    have no data yet and evaluate without error; those that read the cluster DNS replicas
    (NEEDS_REPLICAS: probes.dns.cluster_dns needs peers.kubernetes, this lab's peers are
    static; lab_fleet checks their data), held to the same, as are the panels of Kubernetes
    discovery (podnet_discovery_*, podnet_kubernetes_*); and the path-MTU rules and panels
    (they read podnet_path_mtu_*), which are held to the same only while the client's /metrics has
    podnet_path_mtu_bytes series: without them (a build without the path-MTU probe, or the
    probe not configured here) they must evaluate and have no data, and the run says so;
  - every dashboard query returns data with a finite value, and every label its legend (or its
    matrix table) shows,
    twice: with the variables at "All" and at the lab's own values (cluster, zone, node, peer,
    name, resolver), so a renamed metric or label fails; a query that reads the past (`offset
    1d`, `offset 1w`) is checked so with its offsets removed, and must evaluate as written;
  - the dashboards' alert annotation (ALERTS) evaluates; no alert is expected to fire here;
  - every dashboard variable (label_values) finds values;
  - `promtool check metrics` finds nothing to say about the exporter's /metrics;
  - docs/metrics.md lists every family of the client's and a responder peer's /metrics, with its
    type and label names, and each family it lists that neither shows is one whose "present"
    column names a condition this lab does not meet (a section it leaves off, or "from the
    first" event of a kind that did not happen).

Usage: lab_obs_test.py --exporter BIN --delayline BIN --lab-script tests/lab/lab.sh
Needs root (exit 77 otherwise). Traffic stays in the lab's namespaces; every wait is bounded.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import doc_tables  # noqa: E402
import labkit  # noqa: E402
import obs_queries as oq  # noqa: E402
from labkit import ADDR, check, log  # noqa: E402

PREFIX = "pnob%d" % (os.getpid() % 10000)
CLOSED_PORT = 18099  # nothing listens there: HTTP and burst errors for the peer "closed"
# Grafana's $__rate_interval for a 1 s scrape is 4 s; 20 s spans several samples of everything.
RATE_INTERVAL = "20s"
RATE_INTERVAL_S = 20
LAB_VALUES = {"cluster": "lab", "zone": "zone-a", "node": "node-a", "peer": "(cross|closed)",
              "name": "(kubernetes.default|sts.ap-northeast-2.amazonaws.com)", "resolver": "glibc"}
# Recording rules that compare with the same time a day earlier (offset 1d, or a rule that does):
# no data in a lab minutes old. Listed here, checked against the rule files (a new rule of the
# kind must be added, and a listed one must still be of the kind).
NEEDS_A_DAY = {
    "zone_pair:podnet_rtt_round_median_seconds:ratio_1d",
    "zone_pair:podnet_rtt_regressed:bool",
    "cluster:podnet_rtt_zone_pairs_regressed:ratio",
    "cluster:podnet_rtt_zone_pairs:count",
    "zone_pair:podnet_rtt_at_fault:ratio_1d",
}
# Recording rules that read the cluster DNS replicas (probes.dns.cluster_dns, which needs
# peers.kubernetes; this lab's peers are static): no data here, listed and checked against the
# rule files as above. lab_fleet, whose exporters discover two replicas, checks their data.
NEEDS_REPLICAS = {
    "instance_server:podnet_dns_server_answers:rate5m",
    "server:podnet_dns_server_asking_probers:count",
    "server:podnet_dns_server_unanswered_probers:count",
    "server:podnet_dns_server_rtt_seconds_bucket:rate5m",
    "server:podnet_dns_server_rtt_seconds:rate5m",
    "server:podnet_dns_server_silent:ratio",
    "server:podnet_dns_server_probers:count",
    "server:podnet_dns_server_rtt_seconds:p50",
    "cluster:podnet_dns_server_rtt_seconds:p50_min",
    "server:podnet_dns_server_at_fault:bool",
}
# Stage-1 records of native histograms (metrics.native_histograms): this lab's exporter keeps
# classic ones, so they have no data; lab_native checks them. Checked against the rule files.
NATIVE_ONLY = {
    "path_class_zone:podnet_rtt_seconds:rate5m",
    "path_class_zone:podnet_http_request_duration_seconds:rate5m",
    "name:podnet_dns_lookup_duration_seconds:rate5m",
    "server:podnet_dns_server_rtt_seconds:rate5m",
    "service_zone:podnet_service_rtt_seconds:rate5m",
}
# Records with a series only while something is wrong (a path with no reply, an exporter that
# skips rounds, a path-MTU black hole): held to evaluating without error, not to data.
ONLY_WHILE_WRONG = {
    "path:podnet_rtt_unanswered_packets_sent:rate5m",
    "instance:podnet_probe_rounds_skipped:rate5m",
    "path:podnet_path_mtu_black_hole:bytes",
}
# podnet_service_info needs peers.kubernetes (this lab's peers are static); lab_fleet has it.
NEEDS_KUBERNETES = {"service:podnet_service_info:max"}
EXEMPT = NEEDS_A_DAY | NEEDS_REPLICAS | NATIVE_ONLY | ONLY_WHILE_WRONG | NEEDS_KUBERNETES
# The path-MTU probe's families: rules and dashboard queries that read them (podnet.mtu, the
# Zone matrix's path MTU panels) need its series in the client's /metrics.
PATH_MTU = "podnet_path_mtu_"
# Panels of Kubernetes discovery (podnet_discovery_*, podnet_kubernetes_*): this lab's peers are
# static, so they must evaluate and have no data here; lab_fleet checks their data.
DISCOVERY = re.compile(r"podnet_(discovery|kubernetes)_")
SEARCH = "podnet.svc.cluster.local svc.cluster.local cluster.local ap-northeast-2.compute.internal"


def client_config(tmp):
    resolv = os.path.join(tmp, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("search %s\noptions ndots:5 timeout:1 attempts:2\nnameserver 127.0.0.1\n" % SEARCH)
    path = os.path.join(tmp, "client.yaml")
    with open(path, "w") as f:
        f.write(
            'listen_address: "0.0.0.0:9479"\n'
            "self: { name: client, node: node-a, zone: zone-a }\n"
            "peers:\n  static:\n"
            "    - { name: same, address: %s, node: node-a, zone: zone-a }\n"
            "    - { name: zone, address: %s, node: node-b, zone: zone-a }\n"
            "    - { name: cross, address: %s, node: node-c, zone: zone-b }\n"
            "    - { name: closed, address: %s, port: %d, burst_port: %d, node: node-a, "
            "zone: zone-a }\n"
            "probes:\n"
            "  rtt: { protocol: icmp, interval: 2s, count: 10, spacing: 20ms, timeout: 500ms }\n"
            "  http: { interval: 4s, duration: 1s, qps: 50, connections: 2, timeout: 500ms, "
            "modes: [keepalive, new_connection] }\n"
            "  burst: { interval: 15s, duration: 1s, timeout: 1s, streams: [1, 4], "
            "max_bytes_per_hour: 500GB }\n"
            "  mtu: { interval: 5s, timeout: 100ms, max_datagrams: 20 }\n"
            "  dns: { interval: 2s, resolv_conf: %s, resolvers: [glibc, musl], "
            "names: [kubernetes.default, sts.ap-northeast-2.amazonaws.com] }\n"
            # Service targets straight at two peers (no VIP here; lab_service builds one): the
            # service series and rules get answers from a same-zone and a cross-zone backend.
            "  service: { interval: 2s, count: 10, spacing: 20ms, timeout: 500ms, targets: [\n"
            "    { name: obs-udp, address: %s, protocol: udp },\n"
            "    { name: obs-http, address: %s, protocol: http } ] }\n"
            % (ADDR["same"], ADDR["zone"], ADDR["cross"], ADDR["same"], CLOSED_PORT,
               CLOSED_PORT, resolv, ADDR["cross"], ADDR["zone"]))
    return path


def prometheus_config(tmp):
    path = os.path.join(tmp, "prometheus.yml")
    with open(path, "w") as f:
        f.write("global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
                "rule_files: [%s]\n"
                "scrape_configs:\n  - job_name: podnet\n"
                "    static_configs: [ { targets: ['127.0.0.1:9479'], labels: { cluster: lab } } ]\n"
                % ", ".join("'%s'" % p for p in oq.RULE_FILES))
    return path


def finite(result):
    return [r for r in result if not math.isnan(float(r["value"][1]))
            and not math.isinf(float(r["value"][1]))]


def missing_labels(panel, legend, result):
    """Labels the panel shows that no series of the result carries: those its legend names
    ({{label}}) and the rows and columns of a matrix table (groupingToMatrix)."""
    want = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend or ""))
    for t in panel.get("transformations", []):
        if t["id"] == "groupingToMatrix":
            want |= {t["options"]["rowField"], t["options"]["columnField"]}
    have = set()
    for r in result:
        have |= {k for k, v in r["metric"].items() if v}
    return sorted(want - have)


def path_mtu_exported(ns):
    """Whether the client's /metrics has path-MTU series (the probe built, configured, a round
    done)."""
    _, body = labkit.http(ns, "http://127.0.0.1:9479/metrics")
    text = body.decode() if isinstance(body, bytes) else body
    return re.search(r"^%sbytes\{" % PATH_MTU, text, re.M) is not None


def all_recorded(ns, path_mtu):
    names = [r["record"] for _, r in oq.rules() if "record" in r
             and r["record"] not in EXEMPT
             and (path_mtu or PATH_MTU not in r["expr"] + r["record"])]
    return [n for n in names if not finite(labkit.promql(ns, n))]


def scenario(args, lab, tmp):
    ns = lab.ns
    labkit.run("ip", "netns", "exec", ns["client"], "sysctl", "-q", "-w",
               "net.ipv4.ping_group_range=0 2147483647")
    for name in ("same", "zone", "cross"):
        cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write("self: { name: %s, node: n-%s, zone: z }\n"
                    'responders: { burst: { listen_address: "0.0.0.0:5201", clients: any } }\n' % (name, name))
        labkit.start(ns[name], [args.exporter, "--config.file=" + cfg],
                     os.path.join(tmp, name + ".log"))
    labkit.start_unbound(ns["client"], tmp)
    for name in ("same", "zone", "cross"):
        labkit.wait_for(lambda n=name: labkit.http(ns[n], "http://127.0.0.1:9479/-/ready")[0]
                        == 200, 20, "%s exporter ready" % name)
    client = labkit.start(ns["client"], [args.exporter, "--config.file=" + client_config(tmp)],
                          os.path.join(tmp, "client.log"))
    labkit.wait_for(lambda: labkit.http(ns["client"], "http://127.0.0.1:9479/-/ready")[0] == 200,
                    20, "client exporter ready")
    labkit.start(ns["client"], [args.prometheus, "--config.file=" + prometheus_config(tmp),
                                "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                                "--web.listen-address=127.0.0.1:9090"],
                 os.path.join(tmp, "prom.log"))
    labkit.wait_for(lambda: labkit.http(ns["client"], "http://127.0.0.1:9090/-/ready")[0] == 200,
                    60, "prometheus ready")

    # Until every recording rule has data: two bursts per peer, DNS walks, HTTP rounds (bounded).
    started = time.time()
    missing = None
    deadline = started + 150
    while time.time() < deadline:
        missing = all_recorded(ns["client"], path_mtu_exported(ns["client"]))
        if not missing:
            break
        time.sleep(5)
    log("recording rules with data after %.0f s (still missing: %s)"
        % (time.time() - started, missing))
    time.sleep(RATE_INTERVAL_S)  # a full rate window past the first samples
    check(client.poll() is None, "the client exporter is running")
    path_mtu = path_mtu_exported(ns["client"])
    if not path_mtu:
        log("NOTE: the client's /metrics has no %sbytes series (a build without the path-MTU "
            "probe, or the probe not configured here): the rules and panels that read %s* are "
            "checked to evaluate with no data, not for data" % (PATH_MTU, PATH_MTU))

    # Every recording rule has data (those that need a day of history: none yet); every rule
    # evaluates without error.
    check(oq.history_rules() == NEEDS_A_DAY, "the rules that need a day of history are %s: %s"
          % (sorted(NEEDS_A_DAY), sorted(oq.history_rules())))
    check(oq.replica_rules() == NEEDS_REPLICAS, "the rules that read cluster DNS replicas are "
          "%s: %s" % (sorted(NEEDS_REPLICAS), sorted(oq.replica_rules())))
    check(oq.native_rules() == NATIVE_ONLY, "the rules that read native histograms only are "
          "%s: %s" % (sorted(NATIVE_ONLY), sorted(oq.native_rules())))
    for _, r in oq.rules():
        if "record" in r and r["record"] in NATIVE_ONLY | NEEDS_KUBERNETES:
            res = labkit.promql(ns["client"], r["record"])
            check(not res, "recording rule %s: no data with classic histograms and static "
                  "peers (%d series)" % (r["record"], len(res)))
        elif "record" in r and r["record"] in ONLY_WHILE_WRONG:
            log("recording rule %s: %d series (one while something is wrong; evaluated below)"
                % (r["record"], len(labkit.promql(ns["client"], r["record"]))))
        elif "record" in r and r["record"] in NEEDS_A_DAY:
            res = labkit.promql(ns["client"], r["record"])
            check(not res, "recording rule %s: no data before a day of history (%d series)"
                  % (r["record"], len(res)))
        elif "record" in r and r["record"] in NEEDS_REPLICAS:
            res = labkit.promql(ns["client"], r["record"])
            check(not res, "recording rule %s: no data without cluster DNS replicas (%d series)"
                  % (r["record"], len(res)))
        elif "record" in r and not path_mtu and PATH_MTU in r["expr"] + r["record"]:
            res = labkit.promql(ns["client"], r["record"])
            check(not res, "recording rule %s: no data without path-MTU series (%d series)"
                  % (r["record"], len(res)))
        elif "record" in r:
            res = labkit.promql(ns["client"], r["record"])
            check(bool(finite(res)), "recording rule %s: %d series with a value"
                  % (r["record"], len(finite(res))))
    _, body = labkit.http(ns["client"], "http://127.0.0.1:9090/api/v1/rules")
    groups = json.loads(body)["data"]["groups"]
    loaded = [r for g in groups for r in g["rules"]]
    check(len(loaded) == len(oq.rules()), "Prometheus loaded all %d rules (%d)"
          % (len(oq.rules()), len(loaded)))
    bad = ["%s: %s" % (r["name"], r.get("lastError")) for r in loaded if r.get("health") != "ok"]
    check(not bad, "every rule evaluates without error %s" % bad)

    # Every dashboard query returns data, with the labels its legend shows.
    for label, values in (("All", {}), ("lab values", LAB_VALUES)):
        subst = dict(values, __rate_interval=RATE_INTERVAL)
        for where, expr, panel in oq.panel_queries():
            legend = next(t["legendFormat"] for t in panel["targets"] if t["expr"] == expr)
            now = oq.without_offsets(expr)
            if now != expr:  # reads the past: evaluates as written, has data read now
                labkit.promql(ns["client"], oq.substitute(expr, subst))  # raises on an error
                where += " (offsets removed)"
            res = labkit.promql(ns["client"], oq.substitute(now, subst))
            if not path_mtu and PATH_MTU in expr:
                check(not res, "%s (%s): no data without path-MTU series (%d series)"
                      % (where, label, len(res)))
                continue
            if DISCOVERY.search(expr):
                check(not res, "%s (%s): no data without peers.kubernetes (%d series)"
                      % (where, label, len(res)))
                continue
            lacking = missing_labels(panel, legend, res)
            check(bool(finite(res)) and not lacking,
                  "%s (%s): %d series%s" % (where, label, len(finite(res)),
                                            ", missing labels %s" % lacking if lacking else ""))
        for where, expr in oq.annotation_queries():
            res = labkit.promql(ns["client"], oq.substitute(expr, subst))  # raises on an error
            check(True, "%s (%s): evaluates (%d alerts firing; none expected here)"
                  % (where, label, len(res)))
    for where, sel, lbl in oq.variable_queries():
        res = labkit.promql(ns["client"], "count by (%s) (%s)" % (lbl, oq.substitute(sel)))
        values = sorted(r["metric"].get(lbl, "") for r in res)
        check(bool(values) and "" not in values, "%s: values %s" % (where, values))

    code, body = labkit.http(ns["client"], "http://127.0.0.1:9479/metrics")
    r = subprocess.run([args.promtool, "check", "metrics"], input=body, capture_output=True,
                       text=True, timeout=60)
    check(code == 200 and r.returncode == 0 and not (r.stdout + r.stderr).strip(),
          "promtool check metrics: no problem %s" % (r.stdout + r.stderr).strip())
    series_arithmetic(args, tmp, body)
    _, peer_body = labkit.http(ns["cross"], "http://127.0.0.1:9479/metrics")
    metrics_doc(tmp, [body, peer_body])


def metrics_doc(tmp, bodies):
    """docs/metrics.md against the /metrics of this run (the client and a responder peer)."""
    seen, doc = doc_tables.check_exposed(bodies, check)
    with open(os.path.join(tmp, "client.yaml")) as f:
        on = {"probes." + k for k in re.findall(r"^  (\w+): ", f.read(), re.M)}
    on |= {"responders.burst"}  # the peers'
    unseen = []
    for name, (_, _, present) in sorted(doc.items()):
        if name in seen:
            continue
        keys = set(re.findall(r"`([a-z_]+(?:\.[a-z_]+)+|basic_auth_users)`", present))
        if not (keys - on) and "from the first" not in present:
            unseen.append(name)
    check(not unseen, "docs/metrics.md: every family absent from this run says why (present "
          "with a section the lab leaves off, or from the first event): not so %s" % unseen)


def series_arithmetic(args, tmp, body):
    """--config.check's series per family against this exporter's /metrics (same file): the
    estimate's families together within 10 % of the real count, each within 25 %."""
    r = subprocess.run([args.exporter, "--config.file=" + os.path.join(tmp, "client.yaml"),
                        "--config.check"], capture_output=True, text=True, timeout=30)
    est = {m.group(1): int(m.group(2))
           for m in re.finditer(r"^  (podnet_\w+) (\d+)$", r.stdout, re.M)}
    real, failures = {}, 0
    text = body.decode() if isinstance(body, bytes) else body
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if 'code="error"' in line:
            # A request without a response: a series the estimate (the steady state) leaves
            # out. On a loaded CI machine a 500 ms timeout now and then adds one per peer and
            # connection mode (seen once here beside the ASan build).
            failures += 1
            continue
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        family = family if family in est else name
        real[family] = real.get(family, 0) + 1
    for f in sorted(est):
        log("series %-55s estimate %4d  real %4d" % (f, est[f], real.get(f, 0)))
    want, got = sum(est.values()), sum(real.get(f, 0) for f in est)
    log("series per Pod: %d in /metrics (and %d of failed requests); the estimate's %d "
        "families: estimate %d, real %d" % (sum(real.values()), failures, len(est), want, got))
    check(r.returncode == 0 and est and abs(got - want) <= 0.1 * got,
          "--config.check's series estimate (%d) within 10 %% of /metrics (%d)" % (want, got))
    off = [f for f in est if abs(real.get(f, 0) - est[f]) > max(2, 0.25 * est[f])]
    check(not off, "each family's estimate within 25 %% (or 2 series): off %s" % off)


def main():
    args = labkit.lab_arguments()
    if not labkit.have_root():
        return labkit.skip(labkit.ROOT_NEEDED)
    for tool in ("unbound", "curl", args.prometheus, args.promtool):
        if not shutil.which(tool):
            log("FAILED: %s is not installed (scripts/install-deps.sh --test)" % tool)
            return 1
    return labkit.run_lab_test(args.lab_script, args.delayline, PREFIX,
                               lambda lab, tmp: scenario(args, lab, tmp), "podnet-lab-obs-")

if __name__ == "__main__":
    sys.exit(main())
