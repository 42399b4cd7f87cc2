#!/usr/bin/env python3
"""Lab integration test of `podnet-exporter report`: one bounded run of every probe kind in the
network-namespace lab, then its tables.

The lab (tests/lab/lab.sh): a client Pod and three peers, same node (bridge), same zone and cross
zone (behind the user-space delay lines, 160 and 260 us one way). The peers run podnet-exporter as
responders (UDP/HTTP echo, gRPC health, bursts); unbound in the client's namespace answers DNS.
The client runs `report` with every kind configured. Checks:
  - exit 0, every section present and configured, no failure;
  - the RTT ladder: same_node < same_zone < cross_zone p50 (the delay lines make it);
  - HTTP rows for keep-alive and new connection, gRPC, bursts with 1 and 2 streams per path;
  - DNS: glibc asks 10 questions (8 NXDOMAIN) for sts.ap-northeast-2.amazonaws.com under ndots:5
    and four search domains, 2 for its absolute form (as tcpdump counts in lab_dns_truth);
  - cross-zone bytes > 0, and no cost on the same-node path;
  - the cluster's cost from the configuration: 4 probe Pods (3 static peers and the client) in 2
    zones, RTT bytes per Pod and hour = count x 2 x (20 + 8 + 56) x 3600 / interval towards the
    one cross-zone peer, priced; nothing on the same-node path; the series per Pod that
    --config.check prints for the same file;
  - the JSON round-trips (--input prints it unchanged); compared with itself (--baseline) nothing
    is marked; with a baseline whose cross-zone p50 was doubled, exactly that figure is marked;
  - a second live run against the first as baseline prints every section (its marks are logged);
  - a configured peer that is dead makes exit 1, its RTT and its bursts named in the report and
    on stderr.

Usage: lab_report_test.py --exporter BIN --delayline BIN --lab-script tests/lab/lab.sh
Needs root (network namespaces) and unbound. Every run is bounded (--duration, timeouts).
"""
import copy
import json
import re
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit  # noqa: E402
from labkit import ADDR, check, log, run, start, wait_for, http  # noqa: E402

PREFIX = "pnrp%d" % (os.getpid() % 10000)
NS = labkit.pod_namespaces(PREFIX)
SEARCH = "podnet.svc.cluster.local svc.cluster.local cluster.local ap-northeast-2.compute.internal"
SECTIONS = ["rtt", "http", "grpc", "burst", "dns", "cost", "cluster_cost", "zones", "mtu"]
TITLES = ["## RTT by path class", "## HTTP /echo: keep-alive vs new connection",
          "## gRPC health checks", "## TCP bursts: 1 and N streams", "## DNS: questions per lookup",
          "## Cross-zone bytes and cost",
          "## Cluster-wide probe traffic and cost (from the configuration)", "## RTT by zone pair",
          "## Failures"]
DURATION = "8s"


# Room for every burst of a run: six 1 s bursts over veths that carry up to ~40 Gbit/s (5 GB
# each). With 20 GB, a fast host's same-node bursts left less than the estimate of the last one
# (the largest earlier burst with its stream count), so it was skipped as budget_exhausted.
BUDGET_FOR_ALL = "200GB"


def client_config(path, resolv_conf, dead=False,
                  kinds=("rtt", "http", "grpc", "burst", "dns", "mtu"),
                  burst_budget=BUDGET_FOR_ALL):
    peers = [("same", ADDR["same"], "node-a", "zone-a"), ("zone", ADDR["zone"], "node-b", "zone-a"),
             ("cross", ADDR["cross"], "node-c", "zone-b")]
    if dead:
        peers.append(("dead", "10.213.0.9", "node-d", "zone-b"))  # no one has this address
    text = ("self: { name: client, node: node-a, zone: zone-a }\n"
            "peers:\n  static:\n")
    for name, addr, node, zone in peers:
        text += "    - { name: %s, address: %s, node: %s, zone: %s }\n" % (name, addr, node, zone)
    probes = {
        "rtt": "{ protocol: icmp, interval: 2s, count: 10, spacing: 20ms, timeout: 500ms }",
        "http": ("{ interval: 4s, duration: 1s, qps: 20, connections: 1, timeout: 500ms, "
                 "modes: [keepalive, new_connection] }"),
        "grpc": "{ interval: 4s, count: 10, spacing: 20ms, timeout: 500ms, port: 9480 }",
        "burst": ("{ interval: 15m, duration: 1s, streams: [1, 2], timeout: 1s, "
                  "max_bytes_per_hour: %s }" % burst_budget),
        "dns": ("{ interval: 4s, resolv_conf: %s, resolvers: [glibc, musl], "
                "names: [sts.ap-northeast-2.amazonaws.com, kubernetes.default] }" % resolv_conf),
        "mtu": "{ interval: 4s, timeout: 100ms, max_datagrams: 20 }",
    }
    text += "probes:\n" + "".join("  %s: %s\n" % (k, probes[k]) for k in kinds)
    with open(path, "w") as f:
        f.write(text)


def report(args, *flags, timeout=120):
    """Runs `podnet-exporter report FLAGS` in the client namespace: (rc, stdout, stderr)."""
    started = time.time()
    r = run("ip", "netns", "exec", NS["client"], args.exporter, "report", *flags,
            check_rc=False, timeout=timeout)
    log("report %s: exit %d in %.1f s" % (" ".join(flags), r.returncode, time.time() - started))
    return r.returncode, r.stdout, r.stderr


def rows(rep, section):
    return next(s for s in rep["sections"] if s["id"] == section)["rows"]


def row(rep, section, **key):
    for r in rows(rep, section):
        if all(r["key"].get(k) == v for k, v in key.items()):
            return r["figures"]
    return None


def marked(rep):
    return [(s["id"], r["key"], name) for s in rep["sections"] for r in s["rows"]
            for name, f in r["figures"].items() if f.get("beyond_spread")]


def main():
    args = labkit.lab_arguments()
    if not labkit.have_root():
        return labkit.skip(labkit.ROOT_NEEDED)
    if not shutil.which("unbound"):
        return labkit.skip("unbound is not installed (the DNS section needs it)")
    return labkit.run_lab_test(args.lab_script, args.delayline, PREFIX,
                               lambda lab, tmp: scenario(args, tmp), "podnet-report-")


def scenario(args, tmp):
    run("ip", "netns", "exec", NS["client"], "sysctl", "-q", "-w",
        "net.ipv4.ping_group_range=0 2147483647")
    for name in ("same", "zone", "cross"):
        cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write("self: { name: %s, node: n-%s, zone: z }\n"
                    "responders:\n  grpc: { listen_address: \"0.0.0.0:9480\" }\n"
                    "  burst: { listen_address: \"0.0.0.0:5201\", max_duration: 5s, clients: any }\n" % (name, name))
        start(NS[name], [args.exporter, "--config.file=" + cfg], os.path.join(tmp, name + ".log"))
    dns_dir = os.path.join(tmp, "dns")
    os.mkdir(dns_dir)
    labkit.start_unbound(NS["client"], dns_dir)
    resolv_conf = os.path.join(tmp, "resolv.conf")
    with open(resolv_conf, "w") as f:
        f.write("search %s\noptions ndots:5\nnameserver 127.0.0.1\n" % SEARCH)
    for name in ("same", "zone", "cross"):
        wait_for(lambda n=name: http(NS[n], "http://127.0.0.1:9479/-/ready")[0] == 200, 20,
                 "%s exporter ready" % name)
    wait_for(lambda: run("ip", "netns", "exec", NS["client"], args.exporter, "dns-explain",
                         "www.amazon.com.", "--resolv-conf=" + resolv_conf,
                         check_rc=False).returncode == 0, 10, "unbound answers")
    cfg = os.path.join(tmp, "client.yaml")
    client_config(cfg, resolv_conf)

    # 1. A live run, JSON.
    rc, out, err = report(args, "--config.file=" + cfg, "--duration=" + DURATION, "--format=json",
                          "--log.level=warn")
    check(rc == 0, "report exits 0 with every peer answering (exit %d)%s"
          % (rc, "" if rc == 0 else ": " + err.strip()[-2000:]))
    rep = json.loads(out)
    a_json = os.path.join(tmp, "a.json")
    with open(a_json, "w") as f:
        f.write(out)
    check(rep["schema"] == "podnet-exporter-report" and rep["version"] == 2,
          "JSON names its schema and version 2")
    check([s["id"] for s in rep["sections"]] == SECTIONS
          and all(s["configured"] for s in rep["sections"]),
          "every section present and configured: %s" % [s["id"] for s in rep["sections"]])
    check(rep["failures"] == [], "no failure: %s" % rep["failures"])
    p50 = {p: (row(rep, "rtt", path_class=p) or {}).get("p50_seconds", {}).get("value")
           for p in ("same_node", "same_zone", "cross_zone")}
    log("RTT p50 ms: %s" % {k: v and round(v * 1e3, 3) for k, v in p50.items()})
    check(None not in p50.values() and p50["same_node"] < p50["same_zone"] < p50["cross_zone"],
          "the RTT ladder is ordered: same_node < same_zone < cross_zone (p50)")
    # The zone matrix: zone-a -> zone-b holds only the cross-zone peer's samples, so its p50 is
    # the cross-zone one; zone-a -> zone-a those of the same-node and same-zone peers.
    za_zb = row(rep, "zones", source_zone="zone-a", peer_zone="zone-b")
    za_za = row(rep, "zones", source_zone="zone-a", peer_zone="zone-a")
    check(za_zb is not None and za_za is not None
          and za_zb["p50_seconds"]["value"] == p50["cross_zone"]
          and za_za["peers"]["value"] == 2
          and p50["same_node"] <= za_za["p50_seconds"]["value"] <= p50["same_zone"],
          "zones: zone-a -> zone-b p50 = the cross-zone p50, zone-a -> zone-a between same_node "
          "and same_zone (%s, %s)" % (za_zb and za_zb["p50_seconds"], za_za and za_za["p50_seconds"]))
    for p in ("same_node", "same_zone", "cross_zone"):
        for c in ("keepalive", "new"):
            f = row(rep, "http", path_class=p, connection=c)
            check(f is not None and f["requests"]["value"] > 0 and f["failed_requests"]["value"] == 0,
                  "HTTP %s %s: requests answered" % (p, c))
        g = row(rep, "grpc", path_class=p)
        check(g is not None and g["requests"]["value"] > 0 and g["failed_requests"]["value"] == 0,
              "gRPC %s: checks answered" % p)
        for n in ("1", "2"):
            b = row(rep, "burst", path_class=p, streams=n)
            check(b is not None and b["throughput_bits_per_second"]["value"] > 0,
                  "burst %s with %s stream(s): %s Gbit/s" % (
                      p, n, b and round(b["throughput_bits_per_second"]["value"] / 1e9, 3)))
    sts = row(rep, "dns", name="sts.ap-northeast-2.amazonaws.com", form="as_written",
              resolver="glibc")
    sts_abs = row(rep, "dns", name="sts.ap-northeast-2.amazonaws.com", form="absolute",
                  resolver="glibc")
    check(sts is not None and sts["queries_per_lookup"]["value"] == 10
          and sts["nxdomain_per_lookup"]["value"] == 8,
          "DNS: glibc sts... under ndots:5 = 10 questions, 8 NXDOMAIN per lookup (%s)"
          % str(sts and (sts["queries_per_lookup"]["value"], sts["nxdomain_per_lookup"]["value"])))
    check(sts_abs is not None and sts_abs["queries_per_lookup"]["value"] == 2,
          "DNS: its absolute form = 2 questions")
    cross = row(rep, "cost", path_class="cross_zone")
    same = row(rep, "cost", path_class="same_node")
    check(cross is not None and cross["run_bytes"]["value"] > 0
          and cross["daemon_usd_per_30_days"]["value"] > 0,
          "cost: cross-zone bytes counted and priced")
    check(same is not None and same["daemon_usd_per_30_days"]["value"] == 0,
          "cost: the same-node path costs nothing")
    # The configuration's cost: RTT { count: 10, interval: 2s }, ICMP echo of 56 bytes (ping -s).
    total = row(rep, "cluster_cost", probe="all", path_class="all")
    rtt_cross = row(rep, "cluster_cost", probe="rtt", path_class="cross_zone")
    rtt_hour = 10 * 2 * (20 + 8 + 56) * 3600 / 2
    r = subprocess.run([args.exporter, "--config.file=" + cfg, "--config.check"],
                       capture_output=True, text=True, timeout=30)
    m = re.search(r"series per Pod: ~(\d+) ", r.stdout)
    check(total is not None and total["pods"]["value"] == 4 and total["zones"]["value"] == 2
          and m and total.get("series_per_pod", {}).get("value") == int(m.group(1)),
          "cluster_cost: 4 probe Pods in 2 zones, the series per Pod --config.check prints "
          "(%s; %s)" % (total, m and m.group(0)))
    check(rtt_cross is not None and rtt_cross["peers"]["value"] == 1
          and rtt_cross["pod_bytes_per_hour"]["value"] == rtt_hour
          and rtt_cross["cluster_bytes_per_month"]["value"] == 4 * rtt_hour * 720
          and abs(rtt_cross["cluster_usd_per_month"]["value"]
                  - 4 * rtt_hour * 720 / 1e9 * 0.02) < 1e-9,
          "cluster_cost: RTT to the cross-zone peer %s bytes an hour per Pod, priced (%s)"
          % (rtt_hour, rtt_cross))
    same_cost = row(rep, "cluster_cost", probe="all", path_class="same_node")
    check(same_cost is not None and same_cost["cluster_usd_per_month"]["value"] == 0
          and total["cluster_usd_per_month"]["value"] > 0,
          "cluster_cost: the same-node path costs nothing, the cross-zone one does")

    # 2. Round trip: --input prints the saved report unchanged; against itself nothing is marked.
    rc, out, err = report(args, "--input=" + a_json, "--format=json")
    check(rc == 0 and json.loads(out) == rep, "JSON round-trips through --input (exit %d)" % rc)
    rc, out, err = report(args, "--input=" + a_json, "--baseline=" + a_json, "--format=json")
    same_rep = json.loads(out)
    check(rc == 0 and marked(same_rep) == [] and "baseline" in same_rep
          and row(same_rep, "rtt", path_class="cross_zone")["p50_seconds"]["baseline"] == p50["cross_zone"],
          "against itself as baseline: nothing beyond spread (%s)" % marked(same_rep))
    rc, md, err = report(args, "--input=" + a_json, "--baseline=" + a_json)
    check(all(t in md for t in TITLES) and " !)" not in md,
          "Markdown against itself: every section, no ! mark")

    # 3. A doctored baseline: the cross-zone p50 moved by twice its spread (p90 - p50 of this
    # very run, at least its bucket's width: on a busy host p90 can lie a p50 away) is marked,
    # and nothing else.
    doctored = copy.deepcopy(rep)
    for s in doctored["sections"]:
        for r in s["rows"]:
            if s["id"] == "rtt" and r["key"]["path_class"] == "cross_zone":
                p50 = r["figures"]["p50_seconds"]
                p50["value"] += 2 * p50["spread"] + p50["value"]
    d_json = os.path.join(tmp, "doctored.json")
    with open(d_json, "w") as f:
        json.dump(doctored, f)
    rc, out, err = report(args, "--input=" + a_json, "--baseline=" + d_json, "--format=json")
    m = marked(json.loads(out))
    check(m == [("rtt", {"path_class": "cross_zone", "protocol": "icmp"}, "p50_seconds")],
          "doctored baseline (cross-zone p50 moved beyond its spread): exactly that figure "
          "marked (%s)" % m)
    # The verdict gates: --fail-on-change exits 3 naming that figure, 0 against itself.
    rc, md, err = report(args, "--input=" + a_json, "--baseline=" + d_json, "--fail-on-change")
    verdict = md.split("\n")[2] if md.count("\n") > 2 else md
    check(rc == 3 and verdict.startswith("**Verdict:** 1 of ")
          and "figures changed beyond their run-to-run spread: RTT cross_zone icmp p50 ms" in verdict
          and "verdict: 1 of " in err,
          "--fail-on-change against the doctored baseline: exit 3, the verdict first, naming it "
          "(exit %d): %s" % (rc, verdict))
    # The same comparison as one HTML page (report_html checks it in a browser); with
    # PODNET_REPORT_HTML=FILE set, the page is kept there to look at.
    rc, page, err = report(args, "--input=" + a_json, "--baseline=" + d_json, "--format=html")
    check(rc == 0 and 'id="ladder-rtt"' in page and 'id="zone-matrix"' in page
          and 'class="verdict changed"' in page,
          "--format=html of the lab's run: the ladder, the zone matrix, the verdict (exit %d)" % rc)
    if os.environ.get("PODNET_REPORT_HTML"):
        with open(os.environ["PODNET_REPORT_HTML"], "w") as f:
            f.write(page)
    rc, md, err = report(args, "--input=" + a_json, "--baseline=" + a_json, "--fail-on-change")
    check(rc == 0 and "**Verdict:** No change beyond the run-to-run spread in " in md,
          "--fail-on-change against itself: exit 0, no change (exit %d)" % rc)

    # 4. A second live run against the first: the Markdown a user reads.
    rc, md, err = report(args, "--config.file=" + cfg, "--duration=" + DURATION,
                         "--baseline=" + a_json, "--log.level=warn")
    check(rc == 0 and all(t in md for t in TITLES),
          "second live run with --baseline: exit 0, every section (exit %d)" % rc)
    log("second run against the first: %d figure(s) beyond spread; %s"
        % (md.count(" !)"), md.split("\n")[2]))
    log("---- sample report (second run, against the first)\n" + md + "----")

    # 5. The burst budget holds in a report too: 1 GB an hour leaves room for about one burst.
    small_cfg = os.path.join(tmp, "small-budget.yaml")
    client_config(small_cfg, resolv_conf, kinds=("burst",), burst_budget="1GB")
    rc, md, err = report(args, "--config.file=" + small_cfg, "--duration=3s", "--log.level=warn")
    burst_md = md[md.index("## TCP bursts"):md.index("## DNS")] if "## DNS" in md else ""
    check("budget_exhausted" in burst_md and burst_md.count("| 2 |") < 3,
          "max_bytes_per_hour: 1GB: bursts past the budget are skipped and listed as "
          "budget_exhausted:\n" + burst_md)

    # 6. A dead peer: exit 1, named in the report and on stderr; the live peers are not.
    dead_cfg = os.path.join(tmp, "dead.yaml")
    client_config(dead_cfg, resolv_conf, dead=True, kinds=("rtt", "burst", "dns"))
    rc, md, err = report(args, "--config.file=" + dead_cfg, "--duration=4s", "--log.level=warn")
    failures = md[md.index("## Failures"):] if "## Failures" in md else ""
    check(rc == 1, "a dead peer: exit 1 (exit %d)" % rc)
    check("rtt → dead: 100% loss" in failures and "rtt -> dead" in err,
          "the dead peer is named in the report and on stderr: %s" % err.strip())
    # No burst to it completes, so it has no throughput series at all, only errors.
    check("burst → dead: no burst completed (" in failures and "burst -> dead" in err,
          "its bursts are named as failed too: %s" % failures.strip())
    check(all(p not in failures for p in ("→ same", "→ zone", "→ cross")),
          "the live peers are not named as failures")
    check("## HTTP /echo: keep-alive vs new connection\n\nNot configured" in md,
          "a kind left out of the configuration is present as \"Not configured\"")


if __name__ == "__main__":
    sys.exit(main())
