#!/usr/bin/env python3
"""RTT accuracy: podnet-exporter vs iputils ping on the same lab paths, at the same time.

The lab (tests/lab/lab.sh) gives a client Pod and three peers: same node (bridge), same zone
(160 us one-way delay line) and cross zone (260 us). The exporter runs in the client namespace
probing the three by ICMP (trains of --count every --interval); in each round the three
`ping -c N -i 0.02` run in parallel while the exporter keeps probing, and the exporter's
/metrics is read before and after the round. From the deltas:

  exporter mean   = delta(podnet_rtt_seconds_sum) / delta(podnet_rtt_seconds_count)
  exporter median = histogram_quantile(0.5) over the delta of the buckets (33 % wide, linear
                    interpolation as Prometheus does it)
  ping mean/median from its per-packet times; and ping's samples binned into the exporter's own
  buckets and interpolated the same way, which shows the error the buckets alone cause.

Target: |exporter - ping| <= max(10 % of ping, 5 us), for the mean and for the median.
ping times from user space before sendto() to the kernel RX stamp of the reply; the exporter from
the kernel's TX stamp (taken in the driver) to the kernel's RX stamp, so it may read lower by the
send path's cost: a constant offset across paths is that, not a path error.

With --capture (the default) a first, calibration round also measures ping's send overhead per
packet (txcap.py, a tap on the bridge port); the measured rounds then run without the tap and are
compared again with ping minus that overhead. After the rounds, a reference phase runs a
kernel-timestamped prober (txstamps.py: kernel TX stamp -> kernel RX stamp, no user-space time) on
the three paths while the exporter keeps probing: the like-for-like comparison, which also shows
how many TX stamps each request gets and the RTT from the first and from the last of them.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "tests", "lib")]
import benchlib as B  # noqa: E402
import labkit as K  # noqa: E402  (processes, waiting, scraping, buckets)

PREFIX = os.environ.get("PODNET_LAB_PREFIX", "pnbench")
NS = {k: "%s-%s" % (PREFIX, k) for k in ("client", "same", "zone", "cross")}
ADDR = {"same": "10.213.0.2", "zone": "10.213.0.3", "cross": "10.213.0.4"}
PATH_OF = {"same": "same_node", "zone": "same_zone", "cross": "cross_zone"}
NODE = {"same": ("node-a", "zone-a"), "zone": ("node-b", "zone-a"), "cross": ("node-c", "zone-b")}
PORT = 9479
CLIENT_ADDR = "10.213.0.1"
NODE_A_NS = PREFIX + "-node-a"
TIME_RE = re.compile(r"icmp_seq=(\d+) .*time=([\d.]+) ms")



def wait_done(p, what, timeout):
    """Waits up to `timeout` s for `p` (started by labkit.start) to end, then reaps it.
    Raises BenchBroken naming `what` when it does not end in time."""
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise B.BenchBroken("%s did not finish" % what)
    K.stop(p)

def client_config(args):
    lines = ["listen_address: \"127.0.0.1:%d\"" % PORT,
             "self: { name: client, node: node-a, zone: zone-a }",
             "peers:", "  static:"]
    for name in ("same", "zone", "cross"):
        node, zone = NODE[name]
        lines.append("    - { name: %s, address: \"%s\", node: %s, zone: %s }"
                     % (name, ADDR[name], node, zone))
    lines.append("probes:")
    lines.append("  rtt: { protocol: icmp, interval: %s, count: %d, spacing: %s, timeout: %s }"
                 % (args.interval, args.count, args.spacing, args.timeout))
    return "\n".join(lines) + "\n"


def lab_arguments(doc):
    """The argument parser of a bench on this lab (its first line of `doc` as the description):
    --exporter, --delayline and --lab-script; the bench adds its own."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--exporter")
    ap.add_argument("--delayline", default=os.environ.get("PODNET_DELAYLINE") or
                    os.path.join(B.REPO, "build", "tests", "podnet-lab-delayline"))
    ap.add_argument("--lab-script", default=os.path.join(B.REPO, "tests", "lab", "lab.sh"))
    return ap


def lab_up(args, env, tmp):
    """Brings the lab up (args.lab_script with `env`) and writes the client's configuration for
    `args` in `tmp`; returns its path. Raises BenchBroken when the lab does not come up."""
    r = subprocess.run([args.lab_script, "up"], env=env, capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        raise B.BenchBroken("lab up failed:\n%s%s" % (r.stdout, r.stderr))
    cfg = os.path.join(tmp, "client.yaml")
    with open(cfg, "w") as f:
        f.write(client_config(args))
    return cfg


def scrape():
    return K.parse_metrics(K.scrape(PORT, NS["client"]))


def exporter_state(samples):
    return {
        "sum": B.sum_by(samples, "podnet_rtt_seconds_sum", "path_class"),
        "count": B.sum_by(samples, "podnet_rtt_seconds_count", "path_class"),
        "buckets": {p: K.buckets(samples, "podnet_rtt_seconds", path_class=p)
                    for p in PATH_OF.values()},
        "sent": B.sum_by(samples, "podnet_rtt_packets_sent_total", "path_class"),
        "received": B.sum_by(samples, "podnet_rtt_packets_received_total", "path_class"),
        "late": B.sum_by(samples, "podnet_rtt_late_replies_total", "path_class"),
    }


def run_pings(tmp, rnd, count, capture):
    """Runs the three pings at once (with the send-overhead capture if `capture`).

    Returns {peer: [(icmp_seq, rtt seconds)]}, {peer: lost} and {peer: {icmp_seq: overhead s}}.
    """
    started = {}
    deadline = int(count * 0.02 + 15)
    cap = None
    if capture:
        cap_out = os.path.join(tmp, "txcap-%d.txt" % rnd)
        cap_log = os.path.join(tmp, "txcap-%d.log" % rnd)
        # On the bridge port facing the client (node-a): see txcap.py.
        cap = K.start(NODE_A_NS, [sys.executable, os.path.join(HERE, "txcap.py"), "--iface",
                                  "client", "--direction", "in", "--src", CLIENT_ADDR,
                                  "--seconds", str(deadline + 20), "--out", cap_out],
                      cap_log, max_seconds=deadline + 30)
        K.wait_for(lambda: "ready" in K.tail(cap_log), 10, "send-overhead capture", step=0.2)
    for name in ("same", "zone", "cross"):
        path = os.path.join(tmp, "ping-%s-%d.txt" % (name, rnd))
        p = K.start(NS["client"], ["ping", "-n", "-c", str(count), "-i", "0.02", "-W", "1",
                                   "-w", str(deadline), ADDR[name]], path)
        started[name] = (p, path)
    rtts, lost = {}, {}
    for name, (p, path) in started.items():
        wait_done(p, "ping to %s" % name, deadline + 10)
        with open(path) as f:
            out = f.read()
        vals = [(int(m.group(1)), float(m.group(2)) * 1e-3) for m in TIME_RE.finditer(out)]
        if not vals:
            raise B.BenchBroken("ping to %s: no replies\n%s" % (name, out[-500:]))
        rtts[name] = vals
        lost[name] = count - len(vals)
    ovh = {n: {} for n in ADDR}
    if cap is not None:
        time.sleep(0.3)  # the last requests' lines
        K.stop(cap)
        by_addr = {a: n for n, a in ADDR.items()}
        with open(cap_out) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] in by_addr:
                    ovh[by_addr[parts[0]]][int(parts[2])] = int(parts[3]) * 1e-9
    return rtts, lost, ovh


def main():
    ap = lab_arguments(__doc__)
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "3")))
    ap.add_argument("--ping-count", type=int, default=int(os.environ.get("PING_COUNT", "200")))
    ap.add_argument("--interval", default="2s")
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--spacing", default="20ms")
    ap.add_argument("--timeout", default="500ms")
    ap.add_argument("--no-capture", dest="capture", action="store_false",
                    help="skip the calibration round (ping's send overhead) and the reference phase")
    args = ap.parse_args()
    B.install_signal_handlers()
    B.require_root()
    B.require_tools("ip", "ping", "curl", "timeout")
    if not os.access(args.delayline, os.X_OK):
        raise B.BenchBroken("delay line %s not found (build the CMake target)" % args.delayline)
    exe, version, bindir = B.exporter_binary(args.exporter)
    tmp = tempfile.mkdtemp(prefix="podnet-bench-rtt-")
    max_s = 120 + (args.rounds + 1) * (args.ping_count * 0.02 + 30)
    env = dict(os.environ, PODNET_LAB_PREFIX=PREFIX, PODNET_DELAYLINE=args.delayline,
               PODNET_LAB_MAX_SECONDS=str(int(max_s + 300)))

    K.log("== rtt_vs_ping: podnet-exporter vs iputils ping, lab paths, same time")
    K.log("exporter: %s, git %s" % (version, B.git_describe()))
    K.log("machine:  %s" % B.machine_line())
    warning = B.busy_warning()
    if warning:
        K.log(warning)
    K.log("exporter: protocol icmp, interval %s, count %d, spacing %s, timeout %s;"
          " ping: -c %d -i 0.02 on the three paths in parallel; %d measured round(s)%s"
          % (args.interval, args.count, args.spacing, args.timeout, args.ping_count,
             args.rounds, " after 1 calibration round" if args.capture else ""))
    try:
        cfg = lab_up(args, env, tmp)
        exporter = K.start(NS["client"], [exe, "--config.file=" + cfg],
                           os.path.join(tmp, "exporter.log"), max_seconds=max_s)
        K.wait_for(lambda: K.http(NS["client"], "http://127.0.0.1:%d/-/ready" % PORT,
                                  timeout=2)[0] == 200, 20, "exporter ready", step=0.2)
        # Warm-up: every path has finished at least one train.
        K.wait_for(lambda: all(exporter_state(scrape())["count"].get(p, 0) > 0
                               for p in PATH_OF.values()), 30, "first trains", step=0.2)

        # Round 1 (with --capture, the default) is the calibration round: the tap on the bridge
        # port measures ping's send overhead per packet. The tap's own work sits on the path
        # between the request's first kernel TX stamp and the reply, so the comparison uses only
        # the rounds after it, without the tap, and subtracts the calibrated overhead.
        rounds = []
        total = args.rounds + (1 if args.capture else 0)
        for rnd in range(total):
            calib = args.capture and rnd == 0
            s0 = exporter_state(scrape())
            rtts, lost, ovh = run_pings(tmp, rnd, args.ping_count, calib)
            s1 = exporter_state(scrape())
            if exporter.poll() is not None:
                raise B.BenchBroken("exporter exited:\n" +
                                    K.tail(os.path.join(tmp, "exporter.log")))
            rounds.append({"calib": calib, "s0": s0, "s1": s1, "lost": lost,
                           "ping": {n: [rtt for _seq, rtt in rtts[n]] for n in ADDR},
                           "ovh": {n: [ovh[n][seq] for seq, _rtt in rtts[n] if seq in ovh[n]]
                                   for n in ADDR}})
        # Reference phase: a kernel-timestamped prober (txstamps.py) on the three paths at once,
        # while the exporter keeps probing; the exporter's deltas over the same phase.
        ref = {}
        if args.capture:
            r0 = exporter_state(scrape())
            started = {}
            for n in ADDR:
                out = os.path.join(tmp, "ref-%s.txt" % n)
                started[n] = (K.start(NS["client"], [sys.executable,
                                                     os.path.join(HERE, "txstamps.py"),
                                                     "--dst", ADDR[n], "--count", "200"],
                                      out, max_seconds=60), out)
            for n, (p, out) in started.items():
                wait_done(p, "reference prober to %s" % n, 70)
                ref[n] = parse_ref(K.tail(out, 5))
            r1 = exporter_state(scrape())
            ref["_exporter"] = {"calib": False, "s0": r0, "s1": r1}
        exp_log = K.tail(os.path.join(tmp, "exporter.log"), 50)
    finally:
        K.stop_all()
        # Always: `up` may have failed half-way.
        subprocess.run([args.lab_script, "down"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(bindir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    report(args, rounds, exp_log, ref)
    return 0


def us(x):
    return "%.1f" % (x * 1e6)


def exporter_delta(rounds, path):
    """(count, sum, {le: count}, sent) of the exporter over `rounds` (per-round deltas added)."""
    count = total = sent = 0.0
    buckets = {}
    for rd in rounds:
        s0, s1 = rd["s0"], rd["s1"]
        count += s1["count"].get(path, 0) - s0["count"].get(path, 0)
        total += s1["sum"].get(path, 0) - s0["sum"].get(path, 0)
        sent += s1["sent"].get(path, 0) - s0["sent"].get(path, 0)
        for le, c in K.bucket_delta(s1["buckets"].get(path, {}),
                                    s0["buckets"].get(path, {})).items():
            buckets[le] = buckets.get(le, 0.0) + c
    return count, total, buckets, sent


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def parse_ref(text):
    """{key: value} of txstamps.py's output line (numbers as floats, '-' as nan)."""
    out = {}
    for line in text.splitlines():
        if "requests=" not in line:
            continue
        for kv in line.split()[1:]:
            k, _, v = kv.partition("=")
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v if v != "-" else float("nan")
    if not out:
        raise B.BenchBroken("reference prober printed nothing: %r" % text[-300:])
    return out


def report(args, rounds, exp_log, ref):
    mode = re.search(r"opened (.*?) socket for IPv4 \(kernel RX stamps: (\w+), TX stamps: (\w+)\)",
                     exp_log)
    if mode:
        K.log("exporter socket: %s, kernel RX stamps %s, TX stamps %s"
              % (mode.group(1), mode.group(2), mode.group(3)))
    calib = [rd for rd in rounds if rd["calib"]]
    measured = [rd for rd in rounds if not rd["calib"]]
    ovh = {n: [o for rd in calib for o in rd["ovh"][n]] for n in ADDR}
    K.log("")
    K.log("per round, mean RTT in us: exporter / ping")
    rows = []
    for i, rd in enumerate(rounds):
        cells = []
        for n in ADDR:
            c, t, _b, _s = exporter_delta([rd], PATH_OF[n])
            cells.append("%s / %s" % (us(t / c) if c else "nan", us(mean(rd["ping"][n]))))
        rows.append(["%d%s" % (i + 1, " (calibration, tap on)" if rd["calib"] else "")] + cells)
    B.table(["round"] + [PATH_OF[n] for n in ADDR], rows)
    K.log("")
    rows, rows2, checks, offsets = [], [], [], []
    for n in ADDR:
        p = PATH_OF[n]
        dc, ds, db, _sent = exporter_delta(measured, p)
        e_mean = ds / dc if dc else float("nan")
        e_p50 = B.quantile(0.5, db)
        pr = [r for rd in measured for r in rd["ping"][n]]
        lost = sum(rd["lost"][n] for rd in measured)
        p_mean, p_p50 = mean(pr), B.median(pr)
        p_p50_b = B.quantile(0.5, B.to_cumulative(pr, db.keys()))
        offsets.append(p_mean - e_mean)
        rows.append([p, "%d" % dc, "%d/%d" % (len(pr), len(pr) + lost),
                     us(e_mean), us(p_mean), "%+.1f" % ((p_mean - e_mean) * 1e6),
                     us(e_p50), us(p_p50), us(p_p50_b), "%+.1f" % ((p_p50 - e_p50) * 1e6),
                     us(max(0.10 * p_mean, 5e-6))])
        checks.append((p, "ping", "mean", e_mean, p_mean))
        checks.append((p, "ping", "median", e_p50, p_p50))
        if ovh[n]:
            o_mean, o_p50 = mean(ovh[n]), B.median(ovh[n])
            w_mean, w_p50 = p_mean - o_mean, p_p50 - o_p50
            rows2.append([p, "%d" % len(ovh[n]), us(o_p50), us(o_mean), us(w_mean), us(e_mean),
                          "%+.1f" % ((w_mean - e_mean) * 1e6), us(w_p50), us(e_p50),
                          "%+.1f" % ((w_p50 - e_p50) * 1e6)])
            checks.append((p, "ping-ovh", "mean", e_mean, w_mean))
            checks.append((p, "ping-ovh", "median", e_p50, w_p50))
    K.log("%d measured round(s), RTT in us (exp n: the exporter's replies in those rounds, sent"
          " as trains of %d):" % (len(measured), args.count))
    B.table(["path class", "exp n", "ping n", "exp mean", "ping mean", "ping-exp", "exp p50*",
             "ping p50", "ping p50*", "ping-exp", "target +/-"], rows)
    K.log("  * p50 interpolated in the exporter's buckets as histogram_quantile does; 'ping p50*'"
          " bins ping's own samples")
    K.log("    the same way: its distance from 'ping p50' is the error the bucket layout alone"
          " causes.")
    spread = max(offsets) - min(offsets)
    mid = sorted(offsets)[1]
    K.log("ping - exporter mean, per path: %s us (spread %.1f us)%s"
          % (", ".join("%+.1f" % (o * 1e6) for o in offsets), spread * 1e6,
             ": about the same on every path, i.e. a constant, not a path error"
             if spread <= max(5e-6, 0.3 * abs(mid)) else ": NOT constant across paths"))
    if rows2:
        K.log("")
        K.log("ping's send overhead, measured per packet in the calibration round (its send"
              " timeval in the payload ->")
        K.log("the request's kernel stamp on the bridge port, taken right after the veth's TX"
              " stamp; see txcap.py),")
        K.log("and ping without it in the measured rounds (the span the exporter times, kernel TX"
              " to kernel RX):")
        B.table(["path class", "packets", "ovh p50", "ovh mean", "ping-ovh mean", "exp mean",
                 "diff", "ping-ovh p50", "exp p50*", "diff"], rows2)
    if ref:
        K.log("")
        K.log("reference: a kernel-timestamped prober (txstamps.py: raw socket, SO_TIMESTAMPING TX+RX"
              " software stamps, 200")
        K.log("requests 20 ms apart per path) at the same time as the exporter; RTT from the first"
              " and from the last TX stamp")
        K.log("of each request's OPT_ID key, to the reply's kernel RX stamp (no user-space time"
              " counts):")
        rows3 = []
        for n in ADDR:
            p = PATH_OF[n]
            r = ref[n]
            dc, ds, db, _sent = exporter_delta([ref["_exporter"]], p)
            e_mean = ds / dc if dc else float("nan")
            e_p50 = B.quantile(0.5, db)
            rows3.append([p, "%d" % dc, us(e_mean), us(e_p50), "%.0f" % r["replies"],
                          "%.1f" % r["first_us_mean"], "%.1f" % r["first_us_p50"],
                          "%.1f" % r["last_us_mean"], "%.1f" % r["last_us_p50"],
                          r["stamps_per_key"], "%.1f" % r["gap_us_p50"],
                          "%+.1f" % (e_mean * 1e6 - r["first_us_mean"]),
                          "%+.1f" % (e_mean * 1e6 - r["last_us_mean"])])
            checks.append((p, "ref", "mean", e_mean, r["first_us_mean"] * 1e-6))
            checks.append((p, "ref", "median", e_p50, r["first_us_p50"] * 1e-6))
        B.table(["path class", "exp n", "exp mean", "exp p50*", "ref n", "first mean", "first p50",
                 "last mean", "last p50", "stamps/key", "gap p50", "exp-first", "exp-last"],
                rows3)
        K.log("  stamps/key 2:N = every request got 2 TX stamps: the bridge's egress veth stamps the"
              " request again (same")
        K.log("  key, 'gap' later); an exporter mean next to 'last' rather than 'first' means it"
              " times from that later hop.")
    K.log("")
    K.log("target: |exporter - reference| <= max(10 % of the reference, 5 us)   (ping-ovh: ping"
          " minus its measured send")
    K.log("overhead; ref: the kernel-timestamped reference prober, from the first TX stamp)")
    for p, ref, stat, e, r in checks:
        ok = abs(e - r) <= max(0.10 * r, 5e-6)
        K.log("%s %-10s %-6s vs %-8s exporter %7.1f us  %-8s %7.1f us  diff %+.1f us"
              % (B.verdict(ok), p, stat, ref, e * 1e6, ref, r * 1e6, (e - r) * 1e6))


if __name__ == "__main__":
    B.main_wrapper(main)
