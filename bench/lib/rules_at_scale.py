"""Rules at scale: the shipped recording and alert rules, evaluated by a real Prometheus over the
series of a simulated 300- or 3,000-node fleet (issue "Rules for the Prometheus a 3,000-node
cluster really runs", item 3: cost at scale, before any rule change).

Where the series come from: a small real fleet (tests/lib/fleet.py: 12 nodes in 3 zones, the
deploy default's probe set, discovery through the stand-in API server) runs for
--capture-seconds, and each exporter's /metrics is read once. Those expositions are the
templates, so the label sets are the exporter's own. Every synthetic node takes one: a node
among the first two of its zone takes one of an exporter that ran DNS lookups (probes.dns.sample
picks 2 Pods a zone), the others one that did not. In it the template's node, zone and peers
give way to the synthetic node's own (the same number of peers in each zone, spread so that
every node has probers), and each counter grows at the template's rate (its value over the
template exporter's uptime). Gauges keep their values.

One HTTP server of this process, on 127.0.0.1, serves every synthetic node at /metrics/NODE;
Prometheus scrapes them every --interval (30 s, the Prometheus Operator's default) and evaluates
deploy/prometheus's two rule files, as shipped, at the same interval, for --minutes. Then, from
Prometheus' own metrics over the last 5 minutes: each rule group's evaluation time (mean and
max of prometheus_rule_group_last_duration_seconds) against its interval, the samples it wrote,
the raw series its rules read (counted by metric name), Prometheus' RSS and head series.

Target (issue 39): every group's evaluation within 25 % of its interval with classic
histograms (the templates are classic; the 10 % target with native histograms is not measured
here). And the series stage 1 (the groups *.shard) writes, which is all a global evaluator of
stage 2 reads, against the raw series (target: at most 5 %). A target missed is a MISS line;
exit 0 unless the bench itself broke.

With --split, the two stages run as a sharded Prometheus runs them, one after the other on this
machine: the first Prometheus evaluates stage 1 alone (deploy/prometheus/stages/, as one shard
holding every node would; --shards N labels the nodes podnet_shard as N shards' relabelling
would, so that the per-shard records come N times); at its end its recorded series are read
once through /federate, and a second Prometheus, alone, scrapes that snapshot as a global
Prometheus federates and evaluates stage 2 for --global-minutes (global_run).

Usage (root, after scripts/build.sh --test): bench/rules_at_scale.sh [--nodes 300,3000]
  [--minutes 12] [--interval 30] [--templates DIR] [--save-templates DIR] [--split
  [--shards N] [--global-minutes 8]] [--json FILE]
"""
import argparse
import http.server
import importlib.util
import json
import os
import re
import socketserver
import sys
import tempfile
import threading
import time
import urllib.parse

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

sys.path.insert(0, os.path.join(B.REPO, "tests", "lib"))
import fleet as F  # noqa: E402
import labkit as K  # noqa: E402

GENERATOR = os.path.join(B.REPO, "deploy", "kubernetes", "prometheus-operator", "generate.py")
RULE_FILES = [os.path.join(B.REPO, "deploy", "prometheus", f)
              for f in ("podnet-recording-rules.yml", "podnet-alert-rules.yml")]
# The same rules split by stage (generate.py writes them): stage 1 (shards), stage 2 (global).
STAGE_FILES = [os.path.join(B.REPO, "deploy", "prometheus", "stages", "podnet-rules-%s.yml" % s)
               for s in ("shard", "global")]
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
TARGET_SHARE = 0.25  # of a group's interval, classic histograms (issue 39)
STAGE2_INPUT_SHARE = 0.05  # stage 1's output over the raw series (issue 39)


# ---- templates ---------------------------------------------------------------------------
def capture(args, exe, tmp):
    """{node name: exposition text} of a 12-node fleet after --capture-seconds, and each
    exporter's uptime then (s). 4 nodes a zone: each exporter has the deploy default's 3 peers
    in its own zone too, as in a big fleet (with 3 a zone it had 2)."""
    with F.Fleet("ras%d" % (os.getpid() % 1000), tmp, exe, args.delayline, nodes=12,
                 zones=3, max_seconds=args.capture_seconds + 600) as fl:
        fl.wait_ready(timeout=120)
        t0 = time.time()
        K.log("capturing: a 12-node fleet runs %d s" % args.capture_seconds)
        time.sleep(args.capture_seconds)
        out = {}
        for n in fl.live():
            code, body = K.http(fl.ctl, "http://%s:9479/metrics" % n.address, timeout=10)
            if code != 200:
                raise K.Broken("%s's /metrics answered %d" % (n.name, code))
            out[n.name] = body
        return out, time.time() - t0


def parse(text):
    """(family types {name: type}, samples [(name, {labels}, value)]) of an exposition."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            if m:
                samples.append((m.group(1), dict(LABEL.findall(m.group(2) or "")),
                                float(m.group(3))))
    return types, samples


def cumulative(name, types):
    """Whether a sample of `name` only grows (a counter, a histogram's or summary's parts)."""
    if types.get(name) == "counter":
        return True
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and types.get(name[:-len(suffix)]) in ("histogram", "summary"):
            return True
    return False


class Template:
    """One captured exposition: its node, zone index, peers by zone index, samples."""

    def __init__(self, node, text, zones):
        self.node = node
        self.types, self.samples = parse(text)
        zone_of = {}
        for _, labels, _ in self.samples:
            for a, b in (("source_node", "source_zone"), ("peer_node", "peer_zone")):
                if labels.get(a) and labels.get(b):
                    zone_of[labels[a]] = labels[b]
        self.zone = zone_index(zone_of[node], zones)
        self.peers = {}  # zone index -> sorted peer node names
        for name, z in zone_of.items():
            if name != node:
                self.peers.setdefault(zone_index(z, zones), []).append(name)
        for z in self.peers:
            self.peers[z].sort(key=lambda n: int(n.rsplit("-", 1)[1]))
        self.dns_lookups = any(n == "podnet_dns_lookups_total" for n, _, _ in self.samples)


def zone_index(name, zones):
    i = ord(name[-1]) - ord("a")
    if not name.startswith("zone-") or not 0 <= i < zones:
        raise K.Broken("unexpected zone name %r" % name)
    return i


# ---- the synthetic fleet ------------------------------------------------------------------
def synthesize(templates, nodes, zones, age):
    """{node name: [(sample line's name and labels, value at 0, growth per second)]} for
    `nodes` synthetic nodes in `zones` zones, from the captured templates (no TYPE or HELP
    lines: the rules need none)."""
    by_zone = [[i for i in range(nodes) if i % zones == z] for z in range(zones)]
    with_dns = [t for t in templates if t.dns_lookups]
    without = [t for t in templates if not t.dns_lookups] or with_dns
    fleet = {}
    for i in range(nodes):
        z = i % zones
        pos = by_zone[z].index(i)
        pool = with_dns if pos < 2 and with_dns else without
        t = pool[i % len(pool)]
        shift = (z - t.zone) % zones
        names = {t.node: "node-%d" % i}
        for tz, peers in t.peers.items():
            sz = (tz + shift) % zones
            others = [j for j in by_zone[sz] if j != i]
            step = max(1, len(others) // (len(peers) + 1))
            for k, p in enumerate(peers):
                names[p] = "node-%d" % others[(pos + 1 + k * step) % len(others)]
        zname = {F.zone_name(a): F.zone_name((a + shift) % zones) for a in range(zones)}
        rows = []
        for name, labels, value in t.samples:
            out = []
            for k, v in labels.items():
                if v in names:
                    v = names[v]
                elif v.startswith("podnet-node-"):  # a Pod's name: podnet-node-N-gG
                    node = v[len("podnet-"):v.rindex("-g")]
                    v = "podnet-%s-g0" % names.get(node, node)
                elif v in zname:
                    v = zname[v]
                out.append('%s="%s"' % (k, v))
            prefix = "%s{%s}" % (name, ",".join(out)) if out else name
            grow = value / age if cumulative(name, t.types) and value > 0 else 0.0
            rows.append((prefix, value, grow))
        fleet["node-%d" % i] = rows
    return fleet


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def serve(fleet):
    """An HTTP server on 127.0.0.1 (a free port) serving /metrics/NODE; returns it."""
    t0 = time.time()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            rows = fleet.get(self.path.rsplit("/", 1)[-1])
            if rows is None or not self.path.startswith("/metrics/"):
                self.send_error(404)
                return
            t = time.time() - t0
            body = ("".join("%s %r\n" % (p, v + g * t) for p, v, g in rows)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    srv = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


# ---- one run ------------------------------------------------------------------------------
def raw_names(groups):
    """{group name: sorted raw metric names its rules read} (names without a colon), as the
    rules' generator reads them (deploy/kubernetes/prometheus-operator/generate.py,
    series_read)."""
    spec = importlib.util.spec_from_file_location("podnet_rules_generate", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return {g["name"]: sorted({n for r in g["rules"] for n in gen.series_read(str(r["expr"]))
                               if ":" not in n and n != "ALERTS"}) for g in groups}


def one_run(args, templates, age, nodes, tmp):
    """The figures of one fleet size: {"nodes", ..., "groups": [...]} (measure), with the
    rules of RULE_FILES in one Prometheus; with --split, stage 1 alone in that one (as a shard
    holding every node would), and under "global" the figures of a second Prometheus that
    evaluates stage 2 alone (global_run)."""
    fleet = synthesize(templates, nodes, args.zones, age)
    per_node = sum(len(r) for r in fleet.values()) / len(fleet)
    srv = serve(fleet)
    port = srv.server_address[1]
    run_dir = tempfile.mkdtemp(prefix="n%d-" % nodes, dir=tmp)
    targets = os.path.join(run_dir, "targets.json")
    with open(targets, "w") as f:
        json.dump([{"targets": ["127.0.0.1:%d" % port],
                    "labels": dict({"__metrics_path__": "/metrics/" + n, "instance": n + ":9479",
                                    "cluster": "scale", "namespace": "podnet", "node": n,
                                    "pod": "podnet-%s-g0" % n},
                                   # Not i mod shards: synthesize() gives node i zone
                                   # i mod zones, and with as many shards as zones each
                                   # shard would hold one zone.
                                   **({"podnet_shard": str(i // args.zones % args.shards)}
                                      if args.shards else {}))}
                   for i, n in enumerate(fleet)], f)
    K.log("== %d nodes: %.0f series a node, %d in all; Prometheus for %g min, every %d s%s"
          % (nodes, per_node, per_node * nodes, args.minutes, args.interval,
             "; stage 1 only" if args.split else ""))
    rule_files = STAGE_FILES[0:1] if args.split else RULE_FILES
    cpu0 = time.process_time()
    try:
        with running_prometheus(args, run_dir, rule_files,
                                [{"job_name": "podnet",
                                  "file_sd_configs": [{"files": [targets]}]}]) as prom_port:
            wait_minutes(args.minutes, prom_port, 'count(up{job="podnet"} == 1)', nodes)
            run = measure(args, prom_port, nodes, per_node, time.process_time() - cpu0,
                          rule_files, "podnet", args.minutes)
            snapshot = (stage1_snapshot(prom_port) if args.split and args.global_minutes > 0
                        else None)
    finally:
        srv.shutdown()
    if snapshot is not None:
        run["global"] = global_run(args, snapshot, nodes, tmp)
    return run


class running_prometheus:
    """A real Prometheus in RUN_DIR evaluating `rule_files` every --interval, scraping
    `scrape_configs` and itself (job "prometheus"), as a context: its web port once ready;
    stopped (30 s grace) on leaving."""

    def __init__(self, args, run_dir, rule_files, scrape_configs):
        self.args, self.run_dir = args, run_dir
        self.rule_files, self.scrape_configs = rule_files, scrape_configs

    def __enter__(self):
        args, port = self.args, K.free_port()
        cfg = os.path.join(self.run_dir, "prometheus.yml")
        with open(cfg, "w") as f:
            yaml.safe_dump({
                "global": {"scrape_interval": "%ds" % args.interval,
                           "evaluation_interval": "%ds" % args.interval,
                           "scrape_timeout": "%ds" % min(10, args.interval)},
                "rule_files": self.rule_files,
                "scrape_configs": self.scrape_configs + [
                    {"job_name": "prometheus",
                     "static_configs": [{"targets": ["127.0.0.1:%d" % port]}]}]}, f)
        self.prom = K.start(None, ["prometheus", "--config.file=" + cfg,
                                   "--storage.tsdb.path=" + os.path.join(self.run_dir, "tsdb"),
                                   "--web.listen-address=127.0.0.1:%d" % port],
                            os.path.join(self.run_dir, "prom.log"),
                            max_seconds=(args.minutes + args.global_minutes) * 60 + 900)
        try:
            K.wait_for(lambda: K.http(None, "http://127.0.0.1:%d/-/ready" % port)[0] == 200,
                       120, "prometheus ready")
        except BaseException:
            K.stop(self.prom, grace=30)
            raise
        return port

    def __exit__(self, *_):
        K.stop(self.prom, grace=30)


def wait_minutes(minutes, port, up_expr, want):
    """Sleeps `minutes`, logging once a minute how many of `want` targets `up_expr` counts."""
    t_end = time.time() + minutes * 60
    while time.time() < t_end:
        time.sleep(min(60, t_end - time.time()))
        K.log("  %4.0f s: %d of %d targets up" % (
            minutes * 60 - (t_end - time.time()), K.promql_value(None, up_expr, port, 0), want))


def stage1_snapshot(port):
    """What a global evaluator federates from this Prometheus: stage 1's records
    ({__name__=~F.STAGE1_RECORDS}, docs/deploy.md's selector) as [(name and labels, value,
    0.0)], read once through /federate (timestamps dropped)."""
    code, body = K.http(None, "http://127.0.0.1:%d/federate?match[]=%s" % (
        port, urllib.parse.quote('{__name__=~"%s"}' % F.STAGE1_RECORDS)), timeout=300)
    if code != 200:
        raise K.Broken("federate answered %d: %s" % (code, body[:200]))
    rows = []
    for line in body.splitlines():
        if line and not line.startswith("#"):
            prefix, value, _ts = line.rsplit(" ", 2)
            rows.append((prefix, float(value), 0.0))
    K.log("stage 1's output: %d series read through /federate" % len(rows))
    return rows


def global_run(args, snapshot, nodes, tmp):
    """Stage 2 alone in a fresh Prometheus (the global evaluator), nothing else on the machine:
    it scrapes stage 1's output read at the end of the first run (stage1_snapshot) every
    --interval with honor_labels, as federation does, for --global-minutes. The values stay as
    read: what the rules compute does not move, what they read and how long they take does
    not depend on it. Returns measure()'s figures for the stage-2 rule file."""
    srv = serve({"stage1": snapshot})
    run_dir = tempfile.mkdtemp(prefix="global-%d-" % nodes, dir=tmp)
    K.log("== the global stage of %d nodes: %d series, Prometheus for %g min"
          % (nodes, len(snapshot), args.global_minutes))
    cpu0 = time.process_time()
    try:
        with running_prometheus(args, run_dir, STAGE_FILES[1:2], [
                {"job_name": "federate", "honor_labels": True, "metrics_path": "/metrics/stage1",
                 "static_configs": [{"targets": ["127.0.0.1:%d" % srv.server_address[1]]}]}]
                ) as prom_port:
            wait_minutes(args.global_minutes, prom_port, 'count(up{job="federate"} == 1)', 1)
            return measure(args, prom_port, nodes, len(snapshot) / nodes,
                           time.process_time() - cpu0,
                           STAGE_FILES[1:2], "federate", args.global_minutes)
    finally:
        srv.shutdown()


def measure(args, port, nodes, per_node, server_cpu, rule_files, up_job, minutes):
    def q(expr):
        return K.promql(None, expr, port=port)

    def by_group(expr):
        return {r["metric"]["rule_group"].rsplit(";", 1)[-1]: float(r["value"][1])
                for r in q(expr)}

    mean = by_group("avg_over_time(prometheus_rule_group_last_duration_seconds[5m])")
    worst = by_group("max_over_time(prometheus_rule_group_last_duration_seconds[5m])")
    interval = by_group("prometheus_rule_group_interval_seconds")
    samples = by_group("avg_over_time(prometheus_rule_group_last_evaluation_samples[5m])")
    missed = by_group("increase(prometheus_rule_group_iterations_missed_total[5m])")
    groups = []
    for path in rule_files:
        with open(path) as f:
            groups += yaml.safe_load(f)["groups"]

    def one(expr, empty=float("nan")):
        return K.promql_value(None, expr, port, empty)
    def count(metrics):
        # At 3,000 nodes a count over ~1 M series can outlast the query timeout on 2 cores:
        # then the input is unknown (None), and the run's other figures still stand.
        try:
            return int(one('count({__name__=~"%s"})' % "|".join(metrics), 0)) if metrics else 0
        except K.Broken as e:
            K.log("raw series read: not counted (%s)" % e)
            return None
    inputs = {name: count(metrics) for name, metrics in raw_names(groups).items()}
    rss = one('max_over_time(process_resident_memory_bytes{job="prometheus"}[5m])')
    head = one("prometheus_tsdb_head_series")
    scrape = one('max_over_time(max(scrape_duration_seconds{job="%s"})[5m:30s])' % up_job)
    up = one('count(up{job="%s"} == 1)' % up_job)
    rows = []
    for g in groups:
        n = g["name"]
        iv = interval.get(n, args.interval)
        rows.append({"group": n, "rules": len(g["rules"]), "input_series": inputs.get(n, 0),
                     "mean_s": mean.get(n), "max_s": worst.get(n), "interval_s": iv,
                     "share_max": (worst.get(n) or 0) / iv, "samples": samples.get(n),
                     "missed": missed.get(n, 0)})
    return {"nodes": nodes, "zones": args.zones, "series_per_node": per_node,
            "raw_series": per_node * nodes, "head_series": head, "rss_bytes": rss,
            "scrape_max_s": scrape, "targets_up": up, "server_cpu_s": server_cpu,
            "minutes": minutes, "interval_s": args.interval, "groups": rows}


def report(run, stage2_alone=False):
    """Logs one run's table, its MISS lines and verdicts; with `stage2_alone`, the global
    Prometheus of --split (its input is stage 1's output)."""
    K.log("")
    K.log("%d nodes%s: %d %s series, head %d, Prometheus RSS %.0f MiB, slowest scrape %.2f s, "
          "%d of %d targets up" % (
              run["nodes"], ", stage 2 alone" if stage2_alone else "", run["raw_series"],
              "input (stage 1's output)" if stage2_alone else "raw", run["head_series"],
              run["rss_bytes"] / 2**20, run["scrape_max_s"], run["targets_up"],
              1 if stage2_alone else run["nodes"]))
    rows = [[g["group"], g["rules"], "?" if g["input_series"] is None else g["input_series"],
             "%.3f" % (g["mean_s"] or 0), "%.3f" % (g["max_s"] or 0),
             "%.1f %%" % (100 * g["share_max"]), "%.0f" % (g["samples"] or 0),
             "%.0f" % g["missed"]] for g in run["groups"]]
    B.table(["group", "rules", "raw series read", "eval mean s", "eval max s",
             "max / interval", "samples out", "missed"], rows)
    for g in run["groups"]:
        if g["share_max"] > TARGET_SHARE or g["missed"]:
            K.log("MISS %s: %.1f %% of its %d s interval at worst (target %d %%), %d missed"
                  % (g["group"], 100 * g["share_max"], g["interval_s"], 100 * TARGET_SHARE,
                     g["missed"]))
    if not stage2_alone:
        # What a global evaluator reads (issue 39's target: at most 5 % of the raw series): the
        # series stage 1 writes, each group's samples per evaluation (with --split, counted
        # once more through /federate).
        stage1 = sum(g["samples"] or 0 for g in run["groups"] if g["group"].endswith(".shard"))
        federated = ""
        if "global" in run:  # the larger of the two counts
            federated = " (%d through /federate)" % run["global"]["raw_series"]
            stage1 = max(stage1, run["global"]["raw_series"])
        share = stage1 / run["raw_series"] if run["raw_series"] else float("nan")
        K.log("%s stage 2 reads %d series written by stage 1%s: %.2f %% of the %d raw series "
              "(target %d %%)" % (B.verdict(share <= STAGE2_INPUT_SHARE), stage1, federated,
                                  100 * share, run["raw_series"], 100 * STAGE2_INPUT_SHARE))
    worst = max(run["groups"], key=lambda g: g["share_max"])
    K.log("%s every group within %d %% of its interval at %d nodes (worst: %s, %.1f %%)" % (
        B.verdict(all(g["share_max"] <= TARGET_SHARE for g in run["groups"])),
        100 * TARGET_SHARE, run["nodes"], worst["group"], 100 * worst["share_max"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exporter", default=os.path.join(B.REPO, "build", "podnet-exporter"))
    ap.add_argument("--delayline",
                    default=os.path.join(B.REPO, "build", "tests", "podnet-lab-delayline"))
    ap.add_argument("--nodes", default="300", help="comma list of fleet sizes")
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--minutes", type=float, default=12,
                    help="Prometheus' run per size (the last 5 minutes are measured)")
    ap.add_argument("--interval", type=int, default=30, help="scrape and evaluation, s")
    ap.add_argument("--capture-seconds", type=int, default=150)
    ap.add_argument("--templates", help="a folder of NODE.prom expositions (no capture)")
    ap.add_argument("--save-templates", help="write the captured expositions here")
    ap.add_argument("--split", action="store_true",
                    help="stage 1 and stage 2 in two Prometheus servers, one after the other")
    ap.add_argument("--shards", type=int, default=0,
                    help="label the nodes podnet_shard = index mod N, as N shards would")
    ap.add_argument("--global-minutes", type=float, default=8,
                    help="with --split: the global Prometheus' run (0: none, stage 1 alone)")
    ap.add_argument("--json")
    args = ap.parse_args()
    B.install_signal_handlers()
    B.require_root()
    B.require_tools("prometheus", "promtool")
    tmp = tempfile.mkdtemp(prefix="podnet-bench-rules-")
    runs = []
    try:
        if args.templates:
            texts = {f[:-5]: open(os.path.join(args.templates, f)).read()
                     for f in os.listdir(args.templates) if f.endswith(".prom")}
            age = args.capture_seconds
        else:
            exe, _version, _dir = B.exporter_binary(args.exporter)
            texts, age = capture(args, exe, tmp)
        if args.save_templates:
            os.makedirs(args.save_templates, exist_ok=True)
            for n, t in texts.items():
                with open(os.path.join(args.save_templates, n + ".prom"), "w") as f:
                    f.write(t)
        templates = [Template(n, t, args.zones) for n, t in sorted(texts.items())]
        K.log("templates: %d exporters, %d with DNS lookups; git %s; %s" % (
            len(templates), sum(t.dns_lookups for t in templates), B.git_describe(),
            B.machine_line()))
        for n in [int(x) for x in args.nodes.split(",") if x]:
            runs.append(one_run(args, templates, age, n, tmp))
            report(runs[-1])
            if "global" in runs[-1]:
                report(runs[-1]["global"], stage2_alone=True)
    except K.Broken as e:
        B.note("could not run: %s" % e)
        return 2
    finally:
        K.stop_all()
        if not os.environ.get("PODNET_KEEP_TMP"):
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"commit": B.git_describe(), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
