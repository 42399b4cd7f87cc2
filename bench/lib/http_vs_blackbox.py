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
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import benchlib as B  # noqa: E402
TICK = os.sysconf("SC_CLK_TCK")
procs = []


def log(msg):
    print(msg, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(cmd, logfile, ns=None):
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    p = subprocess.Popen(cmd, stdout=open(logfile, "w"), stderr=subprocess.STDOUT,
                         start_new_session=True)
    procs.append(p)
    return p


def stop_all():
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
    procs.clear()


def fetch(url, ns=None, timeout=10):
    if ns:
        r = subprocess.run(["ip", "netns", "exec", ns, "curl", "-s", "-m", str(timeout), url],
                           capture_output=True, text=True, timeout=timeout + 5)
        return r.stdout
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(pred, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if pred():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise RuntimeError("timed out waiting for " + what)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def hist(text, name, **want):
    buckets, total, count = [], 0.0, 0.0
    for line in text.splitlines():
        m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if any(labels.get(k) != v for k, v in want.items()):
            continue
        if m.group(1) == name + "_bucket":
            le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
            buckets.append((le, float(m.group(3))))
        elif m.group(1) == name + "_sum":
            total = float(m.group(3))
        elif m.group(1) == name + "_count":
            count = float(m.group(3))
    buckets.sort()
    return buckets, total, count


def hist_delta(a, b):
    ba = dict(a[0])
    return ([(le, c - ba.get(le, 0)) for le, c in b[0]], b[1] - a[1], b[2] - a[2])


def quantile(h, q):
    """histogram_quantile of a hist() result (benchlib's, the one every bench uses)."""
    return B.histogram_quantile(q, dict(h[0]))


def ping_p50_ms(addr, count, ns=None):
    cmd = ["ping", "-n", "-c", str(count), "-i", "0.005", "-W", "1", addr]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    times = [float(t) for t in re.findall(r"time=([\d.]+) ms", r.stdout)]
    return statistics.median(times) if times else float("nan")


def requests_total(text, connection):
    return sum(float(m.group(1)) for m in re.finditer(
        r'podnet_http_requests_total\{[^}]*connection="%s"[^}]*\} (\S+)' % connection, text))


def measure_exporter(exe, tmp, label, peer_addr, ns_client=None, ns_peer=None, rounds=3,
                     qps=200, duration_s=2):
    """Runs a responder and a prober; returns keep-alive and new-connection histograms (deltas
    over `rounds` rounds) and the prober's CPU seconds over them."""
    if ns_client:
        port, prom_port = 9479, 9479
    else:
        port, prom_port = free_port(), free_port()
    rcfg = os.path.join(tmp, label + "-resp.yaml")
    with open(rcfg, "w") as f:
        f.write("listen_address: \"%s:%d\"\nresponders: { udp_echo: { listen_address: "
                "\"%s:%d\" } }\nself: { name: resp, node: n2, zone: z }\n"
                % (peer_addr, port, peer_addr, port))
    start([exe, "--config.file=" + rcfg], os.path.join(tmp, label + "-resp.log"), ns_peer)
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
    prober = start([exe, "--config.file=" + pcfg], os.path.join(tmp, label + "-probe.log"),
                   ns_client)
    url = "http://127.0.0.1:%d/metrics" % prom_port
    wait_for(lambda: "podnet_build_info" in fetch(url, ns_client), 20, label + " prober")
    # Wait for the first round to finish (its phase is random within the interval).
    wait_for(lambda: requests_total(fetch(url, ns_client), "new") > 0, interval + 10,
             label + " first round")
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
    late = sum(float(m.group(1)) for m in re.finditer(
        r'podnet_http_late_requests_total\{[^}]*\} (\S+)', t1))
    stop_all()
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
    port = free_port()
    cfg = os.path.join(tmp, "blackbox.yml")
    with open(cfg, "w") as f:
        f.write("modules:\n  http_2xx:\n    prober: http\n    timeout: 2s\n"
                "    http: { preferred_ip_protocol: ip4 }\n")
    p = start([bb, "--config.file=" + cfg, "--web.listen-address=127.0.0.1:%d" % port],
              os.path.join(tmp, "blackbox.log"))
    base = "http://127.0.0.1:%d" % port
    wait_for(lambda: "blackbox" in fetch(base + "/metrics"), 20, "blackbox exporter")
    url = base + "/probe?module=http_2xx&target=" + urllib.request.quote(target_url, safe="")
    fetch(url)  # warm-up
    c0 = cpu_seconds(p.pid)
    phases, totals, ok = [], [], 0
    deadline = time.time() + 120
    for _ in range(probes):
        if time.time() > deadline:
            break
        t = fetch(url)
        if re.search(r"^probe_success 1", t, re.M):
            ok += 1
        ph = {m.group(1): float(m.group(2)) for m in re.finditer(
            r'probe_http_duration_seconds\{phase="(\w+)"\} (\S+)', t)}
        phases.append(sum(ph.get(k, 0) for k in ("connect", "processing", "transfer")))
        m = re.search(r"^probe_duration_seconds (\S+)", t, re.M)
        if m:
            totals.append(float(m.group(1)))
    c1 = cpu_seconds(p.pid)
    stop_all()
    return {"phases_p50": statistics.median(phases), "total_p50": statistics.median(totals),
            "ok": ok, "n": len(totals), "cpu": c1 - c0}


def lab_path(args, tmp):
    lab_script = os.path.join(ROOT, "tests", "lab", "lab.sh")
    prefix = "pnhb%d" % (os.getpid() % 10000)
    env = dict(os.environ, PODNET_LAB_PREFIX=prefix, PODNET_DELAYLINE=args.delayline,
               PODNET_LAB_MAX_SECONDS="600")
    subprocess.run([lab_script, "up"], env=env, check=True, timeout=120,
                   capture_output=True)
    try:
        ns_client, ns_zone = prefix + "-client", prefix + "-zone"
        floor = ping_p50_ms("10.213.0.3", args.ping_count, ns_client)
        r = measure_exporter(args.exporter, tmp, "lab", "10.213.0.3", ns_client, ns_zone,
                             rounds=args.rounds, qps=args.qps)
        return floor, r
    finally:
        stop_all()
        subprocess.run([lab_script, "down"], env=env, timeout=120, capture_output=True)


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
            port = free_port()
            rcfg = os.path.join(tmp, "bb-resp.yaml")
            with open(rcfg, "w") as f:
                f.write("listen_address: \"127.0.0.1:%d\"\nresponders: { udp_echo: { "
                        "listen_address: \"127.0.0.1:%d\" } }\nself: { name: r, node: n, zone: z }\n"
                        % (port, port))
            resp = start([args.exporter, "--config.file=" + rcfg], os.path.join(tmp, "bbr.log"))
            procs.remove(resp)
            try:
                wait_for(lambda: "Healthy" in fetch("http://127.0.0.1:%d/-/healthy" % port), 20,
                         "responder")
                fl = http_floor(args.floor_client, "127.0.0.1", port, args.floor_requests)
                bb = blackbox(args.blackbox, tmp, "http://127.0.0.1:%d/echo" % port,
                              args.blackbox_probes)
            finally:
                os.killpg(resp.pid, signal.SIGTERM)
                resp.wait(timeout=10)
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
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
