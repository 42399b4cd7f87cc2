#!/usr/bin/env python3
"""CPU and memory: podnet-exporter vs smokeping_prober, the same peers at the same rate.

Both probe the same N loopback addresses (127.0.x.y, in a private network namespace) with one
ICMP echo request per address per second, one after the other, for the same window after the
same warm-up. CPU = delta(utime+stime) of the process from /proc/PID/stat over the window, as %
of one core (the per-thread schedstat sum is printed next to it as a finer cross-check); memory =
VmRSS at the end of the window (and VmHWM, the peak). Scrapes of /metrics, only to check that
both really sent and were answered at the configured rate, happen outside the window.

Both ICMP socket kinds are measured by default (see loopbench.py): `dgram` (unprivileged ping
sockets; smokeping_prober as Debian's service runs it) and `raw` (smokeping_prober --privileged,
raw sockets, one per target).

Target: the exporter's CPU <= 1/10 of smokeping_prober's.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "tests", "lib")]
import benchlib as B  # noqa: E402
import labkit as K  # noqa: E402  (processes, waiting, scraping, histogram_quantile)
import loopbench as L  # noqa: E402

SMOKEPING = "/usr/bin/prometheus-smokeping-prober"


def run_smokeping(ns, tmp, addrs, mode, warmup, seconds, binary):
    port = K.free_port(ns)
    cfg = os.path.join(tmp, "smokeping-%s.yml" % mode)
    with open(cfg, "w") as f:
        f.write(L.smokeping_config(addrs, mode))
    logpath = os.path.join(tmp, "smokeping-%s.log" % mode)
    cmd = [binary, "--config.file=" + cfg, "--web.listen-address=127.0.0.1:%d" % port,
           "--ping.interval=1s", "--log.level=warn"]
    p = K.start(ns, cmd, logpath, max_seconds=warmup + seconds + 300)
    L.wait_ready(ns, port, p, logpath)
    m = L.measure(p, ns, port, warmup, seconds, L.smokeping_counters)
    K.stop(p)
    m["log"] = K.tail(logpath, 5)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exporter")
    ap.add_argument("--smokeping", default=SMOKEPING)
    ap.add_argument("--peers", type=int, default=int(os.environ.get("PEERS", "200")))
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SECONDS_WINDOW", "60")))
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--modes", default=os.environ.get("MODES", "dgram,raw"),
                    help="ICMP socket kinds to measure: dgram,raw (default both)")
    ap.add_argument("--compare", metavar="OLD_EXE",
                    help="also measure this exporter binary (e.g. a build of the previous commit)"
                         " in each mode, right after the first, and print both side by side")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in L.PING_GROUP_RANGE for m in modes):
        raise B.BenchBroken("--modes: dgram and/or raw")
    B.install_signal_handlers()
    B.require_root()
    B.require_tools("ip", "curl", "timeout", "sysctl")
    if not os.access(args.smokeping, os.X_OK):
        raise B.BenchBroken("%s not found (apt-get install -y prometheus-smokeping-prober)"
                            % args.smokeping)
    exe, version, bindir = B.exporter_binary(args.exporter)
    old = B.exporter_binary(args.compare) if args.compare else None
    sp_version = subprocess.run([args.smokeping, "--version"], capture_output=True, text=True,
                                timeout=10)
    sp_version = (sp_version.stdout + sp_version.stderr).strip().splitlines()[0]
    ns = os.environ.get("PODNET_BENCH_NS", "pnbenchlo")
    tmp = tempfile.mkdtemp(prefix="podnet-bench-cpu-")
    addrs = L.peer_addresses(args.peers)

    K.log("== cpu_vs_smokeping: podnet-exporter vs smokeping_prober, %d loopback peers, 1 packet/s"
          " each" % args.peers)
    K.log("exporter:  %s, git %s" % (version, B.git_describe()))
    if old:
        K.log("compared:  %s (%s)" % (args.compare, old[1]))
    K.log("smokeping: %s" % sp_version)
    K.log("machine:   %s" % B.machine_line())
    warning = B.busy_warning()
    if warning:
        K.log(warning)
    K.log("window %.0f s after %.0f s warm-up, one tool at a time, in namespace %s (%s .. %s)"
          % (args.seconds, args.warmup, ns, addrs[0], addrs[-1]))
    results = []
    try:
        L.setup_netns(ns)
        for mode in modes:
            L.set_socket_mode(ns, mode)
            e = L.run_exporter(exe, ns, tmp, addrs, args.warmup, args.seconds, mode)
            o = (L.run_exporter(old[0], ns, tmp, addrs, args.warmup, args.seconds,
                                mode + "-old") if old else None)
            s = run_smokeping(ns, tmp, addrs, mode, args.warmup, args.seconds,
                              args.smokeping)
            results.append((mode, e, s, o))
    finally:
        K.stop_all()
        B.netns_del(ns)
        shutil.rmtree(bindir, ignore_errors=True)
        if old:
            shutil.rmtree(old[2], ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    K.log("")
    rows = []
    for mode, e, s, o in results:
        tools = [("podnet-exporter", e)] + ([("podnet-exporter (compared)", o)] if o else [])
        for name, m in tools + [("smokeping_prober", s)]:
            rows.append([mode, name, m["sockets"], "%.0f" % m["sent_pps"], "%.0f" % m["recv_pps"],
                         "%.2f" % m["cpu_s"], "%.2f" % m["cpu_pct"],
                         "%.2f" % m["cpu_pct_schedstat"], "%.0f" % m["ctxsw_per_s"],
                         "%.1f" % m["rss_mib"], "%.1f" % m["hwm_mib"], m["threads"]])
    B.table(["mode", "tool", "ICMP sockets", "sent/s", "replies/s", "cpu s", "CPU %", "CPU % (sched)",
             "ctxsw/s", "RSS MiB", "peak MiB", "threads"], rows)
    K.log("  CPU %%: of one core, from utime+stime (1/%d s ticks); (sched): sum of per-thread"
          " schedstat run time;"
          % B.CLK_TCK)
    K.log("  ctxsw/s: context switches (wake-ups) per second, all threads; peak: VmHWM within the"
          " window")
    K.log("")
    K.log("target: exporter CPU <= 1/10 of smokeping_prober's")
    for mode, e, s, o in results:
        if o:
            K.log("       %-5s compared binary: %.2f %% of a core, ratio %.3f (1/%.1f); this one"
                  " / compared: %.2f"
                  % (mode, o["cpu_pct"], o["cpu_pct"] / s["cpu_pct"] if s["cpu_pct"] > 0 else 0,
                     s["cpu_pct"] / o["cpu_pct"] if o["cpu_pct"] > 0 else float("inf"),
                     e["cpu_pct"] / o["cpu_pct"] if o["cpu_pct"] > 0 else float("inf")))
        ratio = e["cpu_pct"] / s["cpu_pct"] if s["cpu_pct"] > 0 else float("inf")
        ratio_s = (e["cpu_pct_schedstat"] / s["cpu_pct_schedstat"]
                   if s["cpu_pct_schedstat"] > 0 else float("inf"))
        wrong = [t for t, m in (("exporter", e), ("smokeping_prober", s))
                 if (m["raw_sockets"] > 0) != (mode == "raw")]
        rate_ok = not wrong and (abs(e["sent_pps"] - s["sent_pps"]) <= 0.05 * max(e["sent_pps"], s["sent_pps"])
                   and e["recv_pps"] >= 0.95 * e["sent_pps"] and s["recv_pps"] >= 0.95 * s["sent_pps"])
        K.log("%s %-5s exporter %.2f %% vs smokeping_prober %.2f %% of a core: ratio %.3f"
              " (1/%.1f; schedstat %.3f); RSS %.1f vs %.1f MiB%s"
              % (B.verdict(ratio <= 0.1), mode, e["cpu_pct"], s["cpu_pct"], ratio,
                 1 / ratio if ratio > 0 else float("inf"), ratio_s, e["rss_mib"], s["rss_mib"],
                 "" if rate_ok else "  (CAUTION: rates or socket kinds differ, see the table)"))
    return 0


if __name__ == "__main__":
    B.main_wrapper(main)
