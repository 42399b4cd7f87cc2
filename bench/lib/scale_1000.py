#!/usr/bin/env python3
"""Scale: podnet-exporter alone probing 1,000 loopback peers at 1 packet/s each.

In a private network namespace (see loopbench.py), the exporter probes N (default 1,000)
addresses 127.0.x.y with probes.rtt { icmp, interval 1s, count 1, timeout 500ms }. After a
warm-up, over a window (default 60 s):
  CPU % of one core (utime+stime delta from /proc/PID/stat; schedstat as a cross-check),
  RSS (VmRSS at the end of the window; VmHWM, the peak, too),
then, outside that window: 10 fetches of /metrics with curl (time_total; the median is the
figure), the scrape's size and series count, the CPU the exporter spent per scrape, RSS after
the scrapes, and `promtool check metrics` over one scrape.

Targets: CPU < 5 % of a core, RSS <= 50 MiB, scrape median < 100 ms.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import loopbench as L  # noqa: E402


def scrape_figures(ns, port, pid, fetches, tmp, promtool):
    url = "http://127.0.0.1:%d/metrics" % port
    s0 = B.proc_sample(pid)
    times, sizes = [], []
    for _ in range(fetches):
        t, size, code = B.curl_timing(url, ns=ns, timeout=30)
        if code != 200:
            raise B.BenchBroken("/metrics answered %d" % code)
        times.append(t)
        sizes.append(size)
    s1 = B.proc_sample(pid)
    body = L.scrape(ns, port)
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
    return {
        "times": times, "median_s": B.median(times), "max_s": max(times), "min_s": min(times),
        "bytes": sizes[-1], "series": series, "families": families,
        "cpu_per_scrape_ms": (s1["ticks"] - s0["ticks"]) / B.CLK_TCK / fetches * 1000,
        "rss_after_mib": s1["rss_kib"] / 1024.0, "hwm_after_mib": s1["hwm_kib"] / 1024.0,
        "promtool": pt,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exporter")
    ap.add_argument("--peers", type=int, default=int(os.environ.get("PEERS", "1000")))
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SECONDS_WINDOW", "60")))
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--fetches", type=int, default=10)
    ap.add_argument("--mode", default=os.environ.get("MODE", "raw"), choices=("raw", "dgram"),
                    help="ICMP socket kind (default raw: root with the kernel's default"
                         " ping_group_range)")
    args = ap.parse_args()
    B.install_signal_handlers()
    B.require_root()
    B.require_tools("ip", "curl", "timeout", "sysctl")
    promtool = shutil.which("promtool")
    exe, version, bindir = B.exporter_binary(args.exporter)
    ns = os.environ.get("PODNET_BENCH_NS", "pnbenchlo")
    tmp = tempfile.mkdtemp(prefix="podnet-bench-scale-")
    addrs = L.peer_addresses(args.peers)
    procs = B.Procs()

    B.log("== scale_1000: podnet-exporter alone, %d loopback peers, 1 packet/s each" % args.peers)
    B.log("exporter: %s, git %s" % (version, B.git_describe()))
    B.log("machine:  %s" % B.machine_line())
    warning = B.busy_warning()
    if warning:
        B.log(warning)
    B.log("window %.0f s after %.0f s warm-up, %s ICMP sockets, namespace %s (%s .. %s)"
          % (args.seconds, args.warmup, args.mode, ns, addrs[0], addrs[-1]))
    try:
        L.setup_netns(ns)
        L.set_socket_mode(ns, args.mode)
        m = L.run_exporter(procs, exe, ns, tmp, addrs, args.warmup, args.seconds, "scale",
                           after=lambda port, pid: scrape_figures(ns, port, pid, args.fetches,
                                                                  tmp, promtool))
    finally:
        procs.stop_all()
        B.netns_del(ns)
        shutil.rmtree(bindir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    sc = m["after"]
    B.log("")
    B.log("probing: sent %.0f/s, replies %.0f/s, ICMP sockets: %s, threads %d, context switches"
          " %.0f/s" % (m["sent_pps"], m["recv_pps"], m["sockets"], m["threads"], m["ctxsw_per_s"]))
    B.log("scrape times (s): " + " ".join("%.3f" % t for t in sc["times"]))
    B.log("")
    rows = [
        ["CPU % of one core (probing)", "%.2f" % m["cpu_pct"],
         "schedstat %.2f" % m["cpu_pct_schedstat"], "< 5", B.verdict(m["cpu_pct"] < 5)],
        ["RSS MiB (end of probing window)", "%.1f" % m["rss_mib"],
         "window peak %.1f" % m["hwm_mib"], "<= 50", B.verdict(m["hwm_mib"] <= 50)],
        ["RSS MiB after %d scrapes" % args.fetches, "%.1f" % sc["rss_after_mib"],
         "peak incl. scrapes %.1f" % sc["hwm_after_mib"], "<= 50",
         B.verdict(sc["hwm_after_mib"] <= 50)],
        ["/metrics time, median of %d (ms)" % args.fetches, "%.1f" % (sc["median_s"] * 1000),
         "min %.1f max %.1f" % (sc["min_s"] * 1000, sc["max_s"] * 1000), "< 100",
         B.verdict(sc["median_s"] < 0.1)],
        ["/metrics size (bytes)", "%d" % sc["bytes"], "%.1f MiB" % (sc["bytes"] / 2**20), "-", ""],
        ["/metrics series (sample lines)", "%d" % sc["series"], "%d families" % sc["families"],
         "-", ""],
        ["exporter CPU per scrape (ms)", "%.0f" % sc["cpu_per_scrape_ms"], "", "-", ""],
    ]
    if sc["promtool"] is None:
        rows.append(["promtool check metrics", "not installed", "", "no problems", ""])
    else:
        rc, out = sc["promtool"]
        nlines = len([line for line in out.splitlines() if line.strip()])
        rows.append(["promtool check metrics", "rc %d" % rc, "%d problem lines" % nlines,
                     "no problems", B.verdict(rc == 0 and nlines == 0)])
    B.table(["figure", "measured", "detail", "target", "verdict"], rows)
    if sc["promtool"] is not None and sc["promtool"][1]:
        out = sc["promtool"][1].splitlines()
        B.log("promtool says (first 10 lines of %d):" % len(out))
        for line in out[:10]:
            B.log("  " + line)
    return 0


if __name__ == "__main__":
    B.main_wrapper(main)
