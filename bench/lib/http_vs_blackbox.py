#!/usr/bin/env python3
"""HTTP probe benchmark (see bench/http_vs_blackbox.sh and bench/README.md).

1. Loopback: a responder podnet-exporter on 127.0.0.1 and a prober podnet-exporter with
   probes.http towards it. Keep-alive p50 (from the prober's own histogram, and its mean) against
   the RTT floor of the path (iputils ping p50 in the same run), and against the keep-alive
   floor of the same responder measured by a blocking C client (bench/http_floor.c): the
   difference to the latter is the probe's own overhead in µs, the one to ping includes the
   responder's wake-up and HTTP handling, which ping's kernel-made reply never has.
2. The same on the lab's same-zone path (root only; skipped otherwise).
3. New-connection p50 of the prober against prometheus-blackbox-exporter's http prober
   (module http_2xx) on the same /echo target, probed sequentially N times: blackbox's
   connect+processing+transfer phases and its probe_duration_seconds.
4. CPU per 1,000 requests: prober user+system time over its rounds; blackbox's over its probes
   (each probe also costs it one /probe scrape of its own).
Loops are bounded by counts and time; all traffic is to loopback or lab namespaces.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, "tests", "lib")]
import benchlib as B  # noqa: E402
import labkit as K  # noqa: E402  (processes, waiting, parse_metrics, buckets, the lab)
from labkit import log  # noqa: E402


def fetch(url, ns=None, timeout=10):
    """The body of one GET (in `ns` if given); "" when nothing answered."""
    return K.http(ns, url, timeout=timeout)[1]


def cpu_seconds(pid):
    return B.proc_sample(pid)["ticks"] / B.CLK_TCK


def total(samples, name, **want):
    """The sum of `name` over the series whose labels include `want`."""
    return sum(v for n, labels, v in samples
               if n == name and all(labels.get(k) == w for k, w in want.items()))


def hist(text, name, **want):
    """({le: cumulative count}, sum, count) of histogram `name` in one /metrics body."""
    s = K.parse_metrics(text)
    return (K.buckets(s, name, **want), total(s, name + "_sum", **want),
            total(s, name + "_count", **want))


def hist_delta(a, b):
    return K.bucket_delta(b[0], a[0]), b[1] - a[1], b[2] - a[2]


def quantile(h, q):
    return B.quantile(q, h[0])


def ping_p50_ms(addr, count, ns=None):
    cmd = ["ping", "-n", "-c", str(count), "-i", "0.005", "-W", "1", addr]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    times = [float(t) for t in re.findall(r"time=([\d.]+) ms", r.stdout)]
    return statistics.median(times) if times else float("nan")


def requests_total(text, connection):
    return total(K.parse_metrics(text), "podnet_http_requests_total", connection=connection)


def measure_exporter(exe, tmp, label, peer_addr, ns_client=None, ns_peer=None, rounds=3,
                     qps=200, duration_s=2):
    """Runs a responder and a prober; returns keep-alive and new-connection histograms (deltas
    over `rounds` rounds) and the prober's CPU seconds over them."""
    if ns_client:
        port, prom_port = 9479, 9479
    else:
        port, prom_port = K.free_port(), K.free_port()
    rcfg = os.path.join(tmp, label + "-resp.yaml")
    with open(rcfg, "w") as f:
        f.write("listen_address: \"%s:%d\"\nresponders: { udp_echo: { listen_address: "
                "\"%s:%d\" } }\nself: { name: resp, node: n2, zone: z }\n"
                % (peer_addr, port, peer_addr, port))
    resp = K.start(ns_peer, [exe, "--config.file=" + rcfg], os.path.join(tmp, label + "-resp.log"))
    interval = 2 * (duration_s + 1) + 1 + 1
    pcfg = os.path.join(tmp, label + "-probe.yaml")
    listen = "127.0.0.1" if not ns_client else "0.0.0.0"
    with open(pcfg, "w") as f:
        f.write("listen_address: \"%s:%d\"\nresponders: { udp_echo: { listen_address: "
                "\"%s:%d\" } }\nself: { name: probe, node: n1, zone: z }\n"
                "peers:\n  static:\n    - { name: target, address: \"%s\", port: %d, node: n2, "
                "zone: z }\nprobes:\n  http: { interval: %ds, duration: %ds, qps: %d, "
                "connections: 4, timeout: 1s }\n"
                % (listen, prom_port, listen, prom_port, peer_addr, port, interval, duration_s,
                   qps))
    prober = K.start(ns_client, [exe, "--config.file=" + pcfg],
                     os.path.join(tmp, label + "-probe.log"))
    url = "http://127.0.0.1:%d/metrics" % prom_port
    K.wait_for(lambda: "podnet_build_info" in fetch(url, ns_client), 20, label + " prober",
               step=0.2)
    # Wait for the first round to finish (its phase is random within the interval).
    K.wait_for(lambda: requests_total(fetch(url, ns_client), "new") > 0, interval + 10,
               label + " first round", step=0.2)
    time.sleep(duration_s + 2)
    t0 = fetch(url, ns_client)
    c0 = cpu_seconds(prober.pid)
    ka0, new0 = (hist(t0, "podnet_http_request_duration_seconds", connection=c)
                 for c in ("keepalive", "new"))
    n0 = requests_total(t0, "keepalive") + requests_total(t0, "new")
    time.sleep(rounds * interval)
    t1 = fetch(url, ns_client)
    c1 = cpu_seconds(prober.pid)
    ka = hist_delta(ka0, hist(t1, "podnet_http_request_duration_seconds", connection="keepalive"))
    new = hist_delta(new0, hist(t1, "podnet_http_request_duration_seconds", connection="new"))
    n = requests_total(t1, "keepalive") + requests_total(t1, "new") - n0
    late = total(K.parse_metrics(t1), "podnet_http_late_requests_total")
    K.stop(prober)
    K.stop(resp)
    return {"ka": ka, "new": new, "requests": n, "cpu": c1 - c0, "late_total": late,
            "port": port}


def http_floor(exe, addr, port, n):
    """p50/p90/p99 (µs) of bench/http_floor.c against addr:port, or None without the binary."""
    if not os.access(exe, os.X_OK):
        log("floor client: %s not built (scripts/build.sh --test builds it)" % exe)
        return None
    r = subprocess.run([exe, addr, str(port), str(n), "5000"], capture_output=True, text=True,
                       timeout=60 + n * 0.01)
    if r.returncode != 0:
        log("floor client failed: %s" % r.stderr.strip())
        return None
    f = r.stdout.split()
    return {f[i]: float(f[i + 1]) for i in range(0, len(f), 2)}


def blackbox(bb, tmp, target_url, probes):
    port = K.free_port()
    cfg = os.path.join(tmp, "blackbox.yml")
    with open(cfg, "w") as f:
        f.write("modules:\n  http_2xx:\n    prober: http\n    timeout: 2s\n"
                "    http: { preferred_ip_protocol: ip4 }\n")
    p = K.start(None, [bb, "--config.file=" + cfg, "--web.listen-address=127.0.0.1:%d" % port],
                os.path.join(tmp, "blackbox.log"))
    base = "http://127.0.0.1:%d" % port
    K.wait_for(lambda: "blackbox" in fetch(base + "/metrics"), 20, "blackbox exporter", step=0.2)
    url = base + "/probe?module=http_2xx&target=" + urllib.request.quote(target_url, safe="")
    fetch(url)  # warm-up
    c0 = cpu_seconds(p.pid)
    phases, totals, ok = [], [], 0
    deadline = time.time() + 120
    for _ in range(probes):
        if time.time() > deadline:
            break
        t = K.parse_metrics(fetch(url))
        if total(t, "probe_success") == 1:
            ok += 1
        phases.append(sum(total(t, "probe_http_duration_seconds", phase=k)
                          for k in ("connect", "processing", "transfer")))
        if any(n == "probe_duration_seconds" for n, _, _ in t):
            totals.append(total(t, "probe_duration_seconds"))
    c1 = cpu_seconds(p.pid)
    K.stop(p)
    return {"phases_p50": statistics.median(phases), "total_p50": statistics.median(totals),
            "ok": ok, "n": len(totals), "cpu": c1 - c0}


def lab_path(args, tmp):
    lab_script = os.path.join(ROOT, "tests", "lab", "lab.sh")
    prefix = "pnhb%d" % (os.getpid() % 10000)
    with K.Lab(lab_script, args.delayline, prefix) as lab:
        floor = ping_p50_ms("10.213.0.3", args.ping_count, lab.ns["client"])
        r = measure_exporter(args.exporter, tmp, "lab", "10.213.0.3", lab.ns["client"],
                             lab.ns["zone"], rounds=args.rounds, qps=args.qps)
        return floor, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3, help="prober rounds measured per path")
    ap.add_argument("--qps", type=int, default=200)
    ap.add_argument("--ping-count", type=int, default=400)
    ap.add_argument("--blackbox-probes", type=int, default=300)
    ap.add_argument("--floor-requests", type=int, default=2000,
                    help="requests of the blocking floor client (5 ms apart)")
    ap.add_argument("--blackbox", default=shutil.which("prometheus-blackbox-exporter") or
                    "/usr/bin/prometheus-blackbox-exporter")
    args = ap.parse_args()
    args.exporter = os.path.join(args.build_dir, "podnet-exporter")
    args.delayline = os.path.join(args.build_dir, "tests", "podnet-lab-delayline")
    args.floor_client = os.path.join(args.build_dir, "podnet-bench-http-floor")
    if not os.access(args.exporter, os.X_OK):
        log("no %s: run scripts/build.sh first" % args.exporter)
        return 2
    tmp = tempfile.mkdtemp(prefix="podnet-bench-http-")
    try:
        log("load average before: %s" % open("/proc/loadavg").read().split()[:3])
        floor = ping_p50_ms("127.0.0.1", args.ping_count)
        lo = measure_exporter(args.exporter, tmp, "loopback", "127.0.0.1", rounds=args.rounds,
                              qps=args.qps)
        ka50, new50 = quantile(lo["ka"], 0.5), quantile(lo["new"], 0.5)
        ka_mean = lo["ka"][1] / max(lo["ka"][2], 1)
        log("")
        log("== loopback (127.0.0.1), %d qps x 4 connections, %d rounds" % (args.qps, args.rounds))
        log("RTT floor (ping p50)            %8.1f us" % (floor * 1e3))
        log("keep-alive p50 (histogram)      %8.1f us   overhead %+.1f us (target <= 30)"
            % (ka50 * 1e6, ka50 * 1e6 - floor * 1e3))
        log("keep-alive mean                 %8.1f us   overhead %+.1f us"
            % (ka_mean * 1e6, ka_mean * 1e6 - floor * 1e3))
        log("new-connection p50 (histogram)  %8.1f us" % (new50 * 1e6))
        log("requests %d, late starts %d, prober CPU %.3f s -> %.1f ms CPU per 1,000 requests"
            % (lo["requests"], lo["late_total"], lo["cpu"],
               1e3 * lo["cpu"] / max(lo["requests"], 1) * 1e3))
        if os.access(args.blackbox, os.X_OK):
            # Same target: a responder on loopback again (its own process), probed by blackbox.
            port = K.free_port()
            rcfg = os.path.join(tmp, "bb-resp.yaml")
            with open(rcfg, "w") as f:
                f.write("listen_address: \"127.0.0.1:%d\"\nresponders: { udp_echo: { "
                        "listen_address: \"127.0.0.1:%d\" } }\nself: { name: r, node: n, zone: z }\n"
                        % (port, port))
            resp = K.start(None, [args.exporter, "--config.file=" + rcfg],
                           os.path.join(tmp, "bbr.log"))
            try:
                K.wait_for(lambda: "Healthy" in fetch("http://127.0.0.1:%d/-/healthy" % port),
                           20, "responder", step=0.2)
                fl = http_floor(args.floor_client, "127.0.0.1", port, args.floor_requests)
                bb = blackbox(args.blackbox, tmp, "http://127.0.0.1:%d/echo" % port,
                              args.blackbox_probes)
            finally:
                K.stop(resp)
            if fl:
                log("keep-alive floor of the responder (blocking C client, one connection,"
                    " 200 req/s): p50 %.1f us, p90 %.1f us, p99 %.1f us (n %d)"
                    % (fl["p50_us"], fl["p90_us"], fl["p99_us"], fl["n"]))
                log("keep-alive p50: podnet %.1f us vs floor client %.1f us -> the probe's own"
                    " overhead %+.1f us (target <= 30)"
                    % (ka50 * 1e6, fl["p50_us"], ka50 * 1e6 - fl["p50_us"]))
            log("blackbox_exporter http_2xx (%d/%d ok): connect+processing+transfer p50 %.1f us, "
                "probe_duration_seconds p50 %.1f us; %.1f ms CPU per 1,000 probes"
                % (bb["ok"], bb["n"], bb["phases_p50"] * 1e6, bb["total_p50"] * 1e6,
                   1e3 * bb["cpu"] / max(bb["n"], 1) * 1e3))
            log("new-connection p50: podnet %.1f us vs blackbox %.1f us (target: no higher)"
                % (new50 * 1e6, bb["phases_p50"] * 1e6))
        else:
            log("blackbox: %s not found (apt-get install prometheus-blackbox-exporter)"
                % args.blackbox)
        if os.geteuid() == 0 and os.access(args.delayline, os.X_OK):
            floor, r = lab_path(args, tmp)
            ka50 = quantile(r["ka"], 0.5)
            log("")
            log("== lab same_zone path (delay line 160 us each way)")
            log("RTT floor (ping p50)            %8.1f us" % (floor * 1e3))
            log("keep-alive p50 (histogram)      %8.1f us   overhead %+.1f us"
                % (ka50 * 1e6, ka50 * 1e6 - floor * 1e3))
            log("new-connection p50 (histogram)  %8.1f us" % (quantile(r["new"], 0.5) * 1e6))
            log("requests %d, late starts %d, %.1f ms CPU per 1,000 requests"
                % (r["requests"], r["late_total"], 1e3 * r["cpu"] / max(r["requests"], 1) * 1e3))
        else:
            log("lab path: skipped (needs root and %s)" % args.delayline)
        log("load average after: %s" % open("/proc/loadavg").read().split()[:3])
        return 0
    finally:
        K.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
