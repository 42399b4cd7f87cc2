#!/usr/bin/env python3
"""Scale: podnet-exporter alone probing 1,000 loopback peers at 1 packet/s each.

In a private network namespace (see loopbench.py), the exporter probes N (default 1,000)
addresses 127.0.x.y with probes.rtt { icmp, interval 1s, count 1, timeout 500ms }. After a
warm-up, over a window (default 60 s):
  CPU % of one core (utime+stime delta from /proc/PID/stat; schedstat as a cross-check),
  RSS (VmRSS at the end of the window; VmHWM, the peak, too),
then, outside that window: 10 fetches of /metrics with curl as it is (identity) and 10 asking
for gzip as Prometheus does (curl --compressed: the time includes curl's inflate), each with
its median time, size, the exporter's CPU per scrape and the peak RSS over those fetches; then
5 rounds of 2 fetches at once (--concurrent, two Prometheus replicas) and their peak RSS; the
scrape's series count, and `promtool check metrics` over one scrape.

--compare EXE runs the same measurement with a second binary (e.g. a build of the previous
commit) right after, in the same run, and prints both side by side.

Targets: CPU < 5 % of a core, RSS <= 50 MiB, scrape median < 100 ms.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "tests", "lib")]
import benchlib as B  # noqa: E402
import labkit as K  # noqa: E402  (processes, waiting, scraping, histogram_quantile)
import loopbench as L  # noqa: E402


def fetch_figures(url, ns, pid, fetches, gzip):
    B.reset_peak_rss(pid)
    s0 = B.proc_sample(pid)
    times, sizes = [], []
    for _ in range(fetches):
        t, size, code = B.curl_timing(url, ns=ns, timeout=30, gzip=gzip)
        if code != 200:
            raise B.BenchBroken("/metrics answered %d" % code)
        times.append(t)
        sizes.append(size)
    s1 = B.proc_sample(pid)
    return {"times": times, "median_s": B.median(times), "max_s": max(times), "min_s": min(times),
            "bytes": sizes[-1],
            "cpu_per_scrape_ms": (s1["ticks"] - s0["ticks"]) / B.CLK_TCK / fetches * 1000,
            "rss_after_mib": s1["rss_kib"] / 1024.0, "hwm_mib": s1["hwm_kib"] / 1024.0}


def concurrent_figures(url, ns, pid, rounds, concurrent, gzip):
    """`rounds` times `concurrent` fetches started together (Prometheus replicas scraping at
    once): the peak RSS over them all (VmHWM reset first) and the median fetch time."""
    B.reset_peak_rss(pid)
    times = []
    for _ in range(rounds):
        results = [None] * concurrent

        def fetch(i):
            results[i] = B.curl_timing(url, ns=ns, timeout=30, gzip=gzip)
        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(concurrent)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            if r is None or r[2] != 200:
                raise B.BenchBroken("/metrics (concurrent) answered %r" % (r,))
            times.append(r[0])
    s1 = B.proc_sample(pid)
    return {"median_s": B.median(times), "max_s": max(times), "hwm_mib": s1["hwm_kib"] / 1024.0}


def scrape_figures(ns, port, pid, fetches, tmp, promtool, concurrent):
    url = "http://127.0.0.1:%d/metrics" % port
    plain = fetch_figures(url, ns, pid, fetches, gzip=False)
    gz = fetch_figures(url, ns, pid, fetches, gzip=True)
    rounds = max(1, fetches // 2)
    together = {mode: concurrent_figures(url, ns, pid, rounds, concurrent, gzip=mode == "gzip")
                for mode in ("plain", "gzip")} if concurrent > 1 else None
    body = K.scrape(port, ns, timeout=30)
    path = os.path.join(tmp, "scrape.txt")
    with open(path, "w") as f:
        f.write(body)
    series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    families = sum(1 for line in body.splitlines() if line.startswith("# TYPE "))
    pt = None
    if promtool:
        with open(path) as f:
            r = subprocess.run([promtool, "check", "metrics"], stdin=f, capture_output=True,
                               text=True, timeout=300)
        out = (r.stdout + r.stderr).strip()
        pt = (r.returncode, out)
    return {"plain": plain, "gzip": gz, "series": series, "families": families, "promtool": pt,
            "together": together}


def measure_binary(exe_path, args, ns, promtool, tag):
    exe, version, bindir = B.exporter_binary(exe_path)
    tmp = tempfile.mkdtemp(prefix="podnet-bench-scale-")
    addrs = L.peer_addresses(args.peers)
    K.log("exporter %s: %s" % (tag, version))
    try:
        L.setup_netns(ns)
        L.set_socket_mode(ns, args.mode)
        m = L.run_exporter(exe, ns, tmp, addrs, args.warmup, args.seconds, "scale",
                           after=lambda port, pid: scrape_figures(ns, port, pid, args.fetches,
                                                                  tmp, promtool, args.concurrent))
    finally:
        K.stop_all()
        B.netns_del(ns)
        shutil.rmtree(bindir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    K.log("%s probing: sent %.0f/s, replies %.0f/s, ICMP sockets: %s, threads %d, context"
          " switches %.0f/s" % (tag, m["sent_pps"], m["recv_pps"], m["sockets"], m["threads"],
                                m["ctxsw_per_s"]))
    for mode in ("plain", "gzip"):
        K.log("%s scrape times, %s (s): %s" % (tag, mode, " ".join(
            "%.3f" % t for t in m["after"][mode]["times"])))
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exporter")
    ap.add_argument("--peers", type=int, default=int(os.environ.get("PEERS", "1000")))
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SECONDS_WINDOW", "60")))
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--fetches", type=int, default=10)
    ap.add_argument("--concurrent", type=int, default=2,
                    help="then fetches/2 rounds of this many fetches at once (two Prometheus"
                         " replicas: 2, the default; 1 skips them)")
    ap.add_argument("--mode", default=os.environ.get("MODE", "raw"), choices=("raw", "dgram"),
                    help="ICMP socket kind (default raw: root with the kernel's default"
                         " ping_group_range)")
    ap.add_argument("--compare", metavar="EXE",
                    help="a second exporter binary, measured the same way right after")
    args = ap.parse_args()
    B.install_signal_handlers()
    B.require_root()
    B.require_tools("ip", "curl", "timeout", "sysctl")
    promtool = shutil.which("promtool")
    ns = os.environ.get("PODNET_BENCH_NS", "pnbenchlo")
    addrs = L.peer_addresses(args.peers)

    K.log("== scale_1000: podnet-exporter alone, %d loopback peers, 1 packet/s each" % args.peers)
    K.log("git %s" % B.git_describe())
    K.log("machine:  %s" % B.machine_line())
    warning = B.busy_warning()
    if warning:
        K.log(warning)
    K.log("window %.0f s after %.0f s warm-up, %s ICMP sockets, namespace %s (%s .. %s)"
          % (args.seconds, args.warmup, args.mode, ns, addrs[0], addrs[-1]))
    runs = [("this", measure_binary(args.exporter, args, ns, promtool, "this"))]
    if args.compare:
        runs.append(("compare", measure_binary(args.compare, args, ns, promtool, "compare")))

    K.log("")
    def row(label, fmt, detail_fmt, target, ok):
        r = [label]
        for _tag, m in runs:
            r += [fmt(m), detail_fmt(m)]
        r += [target, " / ".join(B.verdict(ok(m)) for _t, m in runs) if ok else ""]
        return r
    sc = lambda m: m["after"]  # noqa: E731
    rows = [
        row("CPU % of one core (probing)", lambda m: "%.2f" % m["cpu_pct"],
            lambda m: "schedstat %.2f" % m["cpu_pct_schedstat"], "< 5",
            lambda m: m["cpu_pct"] < 5),
        row("RSS MiB, end of window (window peak)", lambda m: "%.1f" % m["rss_mib"],
            lambda m: "peak %.1f" % m["hwm_mib"], "<= 50", lambda m: m["hwm_mib"] <= 50),
    ]
    for mode, what in (("plain", "identity"), ("gzip", "gzip")):
        rows += [
            row("/metrics %s: time, median of %d (ms)" % (what, args.fetches),
                lambda m, mo=mode: "%.1f" % (sc(m)[mo]["median_s"] * 1000),
                lambda m, mo=mode: "min %.1f max %.1f" % (sc(m)[mo]["min_s"] * 1000,
                                                         sc(m)[mo]["max_s"] * 1000),
                "< 100", lambda m, mo=mode: sc(m)[mo]["median_s"] < 0.1),
            row("/metrics %s: bytes" % what, lambda m, mo=mode: "%d" % sc(m)[mo]["bytes"],
                lambda m, mo=mode: "%.2f MiB" % (sc(m)[mo]["bytes"] / 2**20), "-", None),
            row("/metrics %s: exporter CPU per scrape (ms)" % what,
                lambda m, mo=mode: "%.0f" % sc(m)[mo]["cpu_per_scrape_ms"], lambda m: "", "-",
                None),
            row("/metrics %s: peak RSS over the fetches (MiB)" % what,
                lambda m, mo=mode: "%.1f" % sc(m)[mo]["hwm_mib"],
                lambda m, mo=mode: "after %.1f" % sc(m)[mo]["rss_after_mib"], "<= 50",
                lambda m, mo=mode: sc(m)[mo]["hwm_mib"] <= 50),
        ]
    if args.concurrent > 1:
        for mode, what in (("plain", "identity"), ("gzip", "gzip")):
            rows += [
                row("/metrics %s, %d at once: peak RSS (MiB)" % (what, args.concurrent),
                    lambda m, mo=mode: "%.1f" % sc(m)["together"][mo]["hwm_mib"],
                    lambda m, mo=mode: "time median %.0f ms"
                    % (sc(m)["together"][mo]["median_s"] * 1000), "<= 50",
                    lambda m, mo=mode: sc(m)["together"][mo]["hwm_mib"] <= 50),
            ]
    rows.append(row("/metrics series (sample lines)", lambda m: "%d" % sc(m)["series"],
                    lambda m: "%d families" % sc(m)["families"], "-", None))
    if promtool is None:
        rows.append(["promtool check metrics"] + ["not installed", ""] * len(runs) + ["", ""])
    else:
        def pt(m):
            rc, out = sc(m)["promtool"]
            return rc, len([line for line in out.splitlines() if line.strip()])
        rows.append(row("promtool check metrics", lambda m: "rc %d" % pt(m)[0],
                        lambda m: "%d problem lines" % pt(m)[1], "no problems",
                        lambda m: pt(m) == (0, 0)))
    headers = ["figure"]
    for tag, _m in runs:
        headers += [tag, "detail"]
    B.table(headers + ["target", "verdict"], rows)
    for tag, m in runs:
        if sc(m)["promtool"] is not None and sc(m)["promtool"][1]:
            out = sc(m)["promtool"][1].splitlines()
            K.log("promtool says about %s (first 10 lines of %d):" % (tag, len(out)))
            for line in out[:10]:
                K.log("  " + line)
    return 0


if __name__ == "__main__":
    B.main_wrapper(main)
