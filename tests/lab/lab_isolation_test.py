#!/usr/bin/env python3
"""Measurement isolation: an exporter's own chores must not move what its peers measure.

Two modes, one scenario:
  default (ctest lab_isolation, ~1.5 min): a gate with margin. Each loaded phase's p99 must stay
    under an absolute GATE_P99_S: 10 ms for UDP RTT, 30 ms for HTTP keep-alive (or 5x the same
    pair's quiet p99, when a host that takes the CPU lifts that near the gate). The worst p99s
    seen beside a neighbour (a busy loop per core, or a build) are 0.5 ms and 5.4 ms, 20x and
    5.5x under; the regression this exists for, /metrics served on the responder loop, gave
    38.6 ms and 64.2 ms beside a busy loop per core, over both. The functional checks (the
    load happened, B kept measuring, no relist in a quiet slot) hold with 5x margin too.
    Shorter: 3 pairs of 2 s slots per phase; a phase over the gate is measured once more and
    checked on that second pair, as with --bench (one stall of a busy CI host gave 75 ms once;
    the regression recurs in every loaded slot).
  --bench (bench/isolation.sh, ~4-8 min): the fine comparison, loaded p99 within
    max(2 x quiet, quiet + 200 us), each phase over 5 pairs of 4 s slots and measured once more
    when beyond; prints the table and PASS/MISS per phase, exit 1 on any MISS. Run it when you
    touch a responder, the loops or the HTTP server, and give its table in your note.

Two exporters in a private network namespace (lo only, made and removed by this test):
  A probes --peers (default 500) loopback addresses 127.0.x.y by ICMP at 1 packet/s each, with
    full peer labels (so /metrics is several MiB), and runs its UDP echo and HTTP responders;
  B probes A: UDP echo trains (50 requests 10 ms apart, every second) and HTTP keep-alive on A's
    /echo (100 requests/s for 1 s every 2 s).
Phases: for each, B's figures with A quiet and with A under a load, --seconds (default 6; 20
with --bench) of each, taken in alternating slots (CYCLES pairs: quiet, loaded, quiet, loaded, ...; a load process
is stopped with SIGSTOP between its slots), so that the shared host's noise, which comes and goes
over seconds to minutes, weighs on both sides alike. The loads:
  scrape: A's /metrics fetched back to back on one keep-alive connection (gzip, as Prometheus
          asks);
  reload: POST /-/reload every second (A's file: --peers static peers);
  flood:  a third process sends A well-formed UDP echo requests at A's rate limit (20,000/s)
          from one address other than B's (A answers it 1/16 of its limit, B keeps its share);
  relist: A watches the fake API server's 5,000 endpoints (tests/lib/fake_apiserver.py), whose
          watches end with 410 Expired after 1 s during the loaded slots, each after a
          BOOKMARK, so that A relists at once every time instead of backing off into the quiet
          slots (checked from the server's log of LISTs);
  references, reported and not checked: healthy (/-/healthy back to back: the client's own load),
  cpu (another process burning a core).
B's UDP RTT p50/p99 and HTTP keep-alive p99 to A come from B's own histograms
(podnet_rtt_seconds{protocol="udp"}, podnet_http_request_duration_seconds{connection=
"keepalive"}): bucket deltas between scrapes of B at each slot's ends, summed per side. With --bench, for
each loaded phase: p99 <= max(2 x quiet p99, quiet p99 + 200 us) for both, and the loaded side
has at least 0.8 of the quiet side's samples (a p99 over the few answers a load let through would
mean nothing; the gate asks for half). Both modes: no relist began in a quiet slot.
With --bench, a phase beyond the bound is measured once more, and that second pair is checked: a single stall
of the host can still land in loaded slots only (a p99 of ~1,000 samples is the 10th slowest),
while a chore of A's that stalls its responders recurs in every loaded slot. Both pairs are in
the table.

Usage: lab_isolation_test.py --exporter BIN [--bench] [--peers N] [--seconds S] [--phases ...]
Needs root (a network namespace, raw ICMP). Every wait and load is bounded in time.
"""
import argparse
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit as lab  # noqa: E402
import fake_apiserver  # noqa: E402  (the stand-in API server)

HERE = os.path.dirname(os.path.abspath(__file__))
NS = "pniso%d" % (os.getpid() % 100000)
A_PORT = 9479  # a fresh namespace: no other listener can hold these
B_PORT = 9579
SLACK_S = 200e-6
# Both exporters run at nice -10 (the test is root), the load (curl) at 0: CI machines run other
# work, and what this test measures is A's own chores against A's responders, not the
# neighbours'. (With sched_autogroup each lab process is a scheduling group of its own, where a
# nice value alone orders nothing against the neighbours: labkit.start gives the group the same
# nice.) A's threads keep their own order: its control loop sets itself to nice 10 (20 above
# its responder loop here, 10 in a Pod), and the responder and probe loops ask for short slices.
NICE = ["nice", "-n", "-10"]
# A UDP train lasts 0.69 s and lands its samples at its end: after the warm-up scrape of A, wait
# for the trains (and HTTP runs) that overlapped it to end.
SETTLE_S = 2.5
# A phase's quiet and loaded samples are taken in alternating slots (quiet, loaded, quiet, ...):
# this shared host's noise comes and goes over seconds to minutes (two quiet 10 s windows 12 s
# apart differed by up to 2.3x here), so back-to-back 20 s windows compared the host's moods as
# much as A's chores. CYCLES pairs of slots share the host's mood between the two sides.
CYCLES = 5  # --bench; the gate: GATE_CYCLES
GATE_CYCLES = 3
# The gate's bound on a loaded phase's p99 (UDP RTT and HTTP keep-alive). Worst seen beside a
# busy neighbour and the regression's figures: docs/development.md, "lab_isolation".
GATE_P99_S = {"udp_p99": 10e-3, "http_p99": 30e-3}
# ... or this many times the same pair's quiet p99, when that is higher: a host that takes half
# the CPU (steal) gave quiet p99s of 11.7 ms (UDP) and 41 ms (HTTP), at or over the gate, and
# the gate then measured the host (loaded/quiet up to 3.8x in those runs: HTTP under the flood
# 55.6 ms beside a quiet 14.6 ms). The regression above is 13x (HTTP) and 77x (UDP) a quiet
# p99 of an ordinary run; under such a host the gate is weaker, and says so in its line.
GATE_QUIET_RATIO = 5.0


def gate(key, q):
    """The default mode's bound (s) on a loaded p99 whose quiet p99 is `q` (s, or None)."""
    return max(GATE_P99_S[key], GATE_QUIET_RATIO * q) if q else GATE_P99_S[key]
# After a loaded slot, a UDP train (0.69 s) or HTTP run (1 s, 200 ms timeout) begun under load
# ends before the next quiet slot starts counting.
SLOT_SETTLE_S = 1.5
# The flood comes from this many addresses (127.0.3.x), not from B's 127.0.0.1: a flood from B's
# own address put B in the flood's 1/16 share of A's 20,000 replies/s (EchoLimits::source_share)
# and B's p99 was over the echoes that got through. One hostile sender: A answers 1/16 and drops
# the rest as source_limited. (15 senders, A answering 15/16, failed both pairs once on this
# noisy host: an open question, not this test's.)
FLOOD_SOURCES = 1


def a_config(peers, kubernetes=False):
    lines = ['listen_address: "127.0.0.1:%d"' % A_PORT,
             "self: { name: a, node: node-a, zone: zone-a }",
             'responders: { udp_echo: { listen_address: "127.0.0.1:%d" } }' % A_PORT,
             "peers:"]
    if kubernetes:  # the fake API server's 5,000 Pods; 3 per zone are probed
        lines.append("  kubernetes: { namespace: podnet, service: podnet, peers_per_zone: 3 }")
    lines.append("  static:")
    for i in range(peers):
        lines.append("    - { name: lo-%d, address: 127.0.%d.%d, node: lo-node-%d, zone: zone-a }"
                     % (i + 1, 1 + i // 250, 1 + i % 250, i + 1))
    lines.append("probes:")
    lines.append("  rtt: { protocol: icmp, interval: 1s, count: 1, spacing: 1s, timeout: 500ms }")
    return "\n".join(lines) + "\n"


def b_config():
    return ("listen_address: \"127.0.0.1:%d\"\n"
            "self: { name: b, node: node-b, zone: zone-a }\n"
            "responders: { udp_echo: { listen_address: \"127.0.0.1:%d\" } }\n"
            "peers:\n  static:\n"
            "    - { name: a, address: 127.0.0.1, port: %d, node: node-a, zone: zone-a }\n"
            "metrics: { per_peer_histograms: true }\n"  # the p99s are read by peer="a"
            "probes:\n"
            "  rtt: { protocol: udp, interval: 1s, count: 50, spacing: 10ms, timeout: 200ms }\n"
            "  http: { interval: 2s, duration: 1s, qps: 100, connections: 1, timeout: 200ms,"
            " modes: [keepalive] }\n" % (B_PORT, B_PORT, A_PORT))


def scrape_b():
    code, body = lab.http(NS, "http://127.0.0.1:%d/metrics" % B_PORT)
    if code != 200:
        raise RuntimeError("B's /metrics answered %d" % code)
    s = lab.parse_metrics(body)
    return (lab.buckets(s, "podnet_rtt_seconds", protocol="udp", peer="a"),
            lab.buckets(s, "podnet_http_request_duration_seconds", connection="keepalive",
                        peer="a"))


def window(seconds):
    """B's bucket deltas (UDP RTT, HTTP keep-alive) over one `seconds` slot."""
    u0, h0 = scrape_b()
    time.sleep(seconds)
    u1, h1 = scrape_b()
    return lab.bucket_delta(u1, u0), lab.bucket_delta(h1, h0)


def add(total, part):
    for le, c in part.items():
        total[le] = total.get(le, 0.0) + c


def figures(du, dh):
    return {"udp_n": du.get(math.inf, 0), "udp_p50": lab.histogram_quantile(0.5, du),
            "udp_p99": lab.histogram_quantile(0.99, du), "http_n": dh.get(math.inf, 0),
            "http_p99": lab.histogram_quantile(0.99, dh)}


class ProcessLoad:
    """A load that is a process (started by `start()`): started at its first slot, stopped
    (SIGSTOP) between slots, so that it keeps its state and costs nothing in a quiet slot."""

    def __init__(self, start):
        self.start, self.p = start, None

    def on(self):
        if self.p is None:
            self.p = self.start()
        elif self.p.poll() is not None:
            raise RuntimeError("the load ended before its slots did (exit %s)" % self.p.returncode)
        else:
            lab.resume(self.p)

    def off(self):
        if self.p is not None:
            lab.pause(self.p)

    def end(self):
        if self.p is not None:
            lab.stop(self.p)


class FileLoad:
    """A load that is a file's presence (the fake API server's gone-file)."""

    def __init__(self, path):
        self.path = path

    def on(self):
        open(self.path, "w").close()

    def off(self):
        if os.path.exists(self.path):
            os.unlink(self.path)

    end = off


def measure(seconds, load):
    """B's figures with A quiet and with A under `load` (on/off/end), interleaved: CYCLES pairs
    of slots of seconds / CYCLES each, quiet then loaded, each loaded slot followed by
    SLOT_SETTLE_S that counts for neither (as does one before the first slot: whatever the caller
    did to A, such as a scrape for its counters, ends first). Returns (quiet figures, loaded
    figures, quiet slots), the figures each from `seconds` of B's samples (bucket deltas summed
    over the slots), the quiet slots as [(start, end)] in Unix time (s)."""
    slot = seconds / CYCLES
    qu, qh, lu, lh = {}, {}, {}, {}
    quiet_slots = []
    time.sleep(SLOT_SETTLE_S)
    try:
        for _ in range(CYCLES):
            t0 = time.time()
            du, dh = window(slot)
            quiet_slots.append((t0, time.time()))
            add(qu, du)
            add(qh, dh)
            load.on()
            du, dh = window(slot)
            add(lu, du)
            add(lh, dh)
            load.off()
            time.sleep(SLOT_SETTLE_S)
    finally:
        load.end()
    return figures(qu, qh), figures(lu, lh), quiet_slots


def lists_begun(log):
    """The Unix times (s) of the LISTs the fake API server logged ("list T" lines)."""
    with open(log) as f:
        return [float(line.split()[1]) for line in f if line.startswith("list ")]


def wall_seconds(seconds):
    """A bound on one measure(seconds, ...)'s wall time, for the load processes' own limits."""
    return int(2 * seconds + CYCLES * (SLOT_SETTLE_S + 2) + 30)


def scrape_load(tmp, seconds, path="/metrics"):
    """A's /metrics back to back on one keep-alive connection, gzip, as Prometheus scrapes
    (scrape_loop.py); one line per scrape in load.p.figures_file."""
    out = os.path.join(tmp, "scrapes.txt")

    def start():
        p = lab.start(NS, [sys.executable, os.path.join(HERE, "..", "lib", "scrape_loop.py"), "--port",
                           str(A_PORT), "--seconds", str(wall_seconds(seconds)), "--path", path],
                      out)
        p.figures_file = out
        return p
    return ProcessLoad(start)


def reload_load(seconds):
    """POST /-/reload to A every second (each one parses A's file of --peers peers)."""
    script = ("while :; do curl -s -o /dev/null -X POST http://127.0.0.1:%d/-/reload; sleep 1; "
              "done" % A_PORT)

    def start():
        return lab.start(NS, ["timeout", str(wall_seconds(seconds)), "sh", "-c", script],
                         os.devnull)
    return ProcessLoad(start)


def flood_load(tmp, seconds):
    """Well-formed UDP echo requests to A at its rate limit (20,000/s) from a third process."""
    out = os.path.join(tmp, "flood.txt")

    def start():
        return lab.start(NS, [sys.executable, os.path.join(HERE, "..", "lib", "echo_flood.py"), "--port",
                              str(A_PORT), "--rate", "20000", "--sources", str(FLOOD_SOURCES),
                              "--seconds", str(wall_seconds(seconds))], out)
    return ProcessLoad(start)


def start_api_server(tmp, seconds):
    """tests/lib/fake_apiserver.py with 5,000 Pods (50 EndpointSlices) and no churn; while
    tmp/gone exists, every watch ends after 1 s with 410 Expired, so A relists all 5,000
    endpoints about every second. Returns the kubeconfig's path."""
    return fake_apiserver.start(tmp, "isolation", [
        "--nodes", "5000", "--churn", "0", "--gone-file", os.path.join(tmp, "gone"),
        "--gone-bookmark", "--log-lists", "--max-seconds", str(int(seconds))], ns=NS,
        name="lab")[1]


def a_counter(name, **want):
    code, body = lab.http(NS, "http://127.0.0.1:%d/metrics" % A_PORT, timeout=30)
    return sum(v for n, labels, v in lab.parse_metrics(body)
               if n == name and all(labels.get(k) == w for k, w in want.items()))


def cpu_load(seconds):
    """A reference, not a check: another process burning one core at nice 0 (what the scrape
    load would cost A's responders if it were CPU contention alone)."""
    def start():
        return lab.start(NS, ["timeout", str(wall_seconds(seconds)), "sh", "-c",
                              "while :; do :; done"], os.devnull)
    return ProcessLoad(start)


def scrapes_done(path):
    times = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "200":
                times.append(float(parts[1]))
    return times


def fmt_us(x):
    return "n/a" if x is None else "%.0f us" % (x * 1e6)


def bound(quiet):
    return max(2 * quiet, quiet + SLACK_S)


REFERENCES = {"healthy": "/-/healthy back to back (reference)",
              "cpu": "another process burning a core (reference)"}


def within(q, v):
    """A loaded phase's p99 `v` against its quiet p99 `q`: both measured, v <= bound(q)."""
    return q is not None and v is not None and v <= bound(q)


def breaches(quiet, m, fine):
    """The figures of `m` beyond their bound, as text ("" when none): bound(quiet) when `fine`
    (--bench), else gate()."""
    out = []
    for key in ("udp_p99", "http_p99"):
        q, v = quiet[key], m[key]
        limit = (bound(q) if q else None) if fine else gate(key, q)
        if v is None or limit is None or v > limit:
            out.append("%s %s > %s" % (key, fmt_us(v), fmt_us(limit)))
    return ", ".join(out)


def run_phase(phase, args, tmp):
    """One measure() of B's figures, A quiet and A under `phase`'s load, interleaved: (quiet
    figures, loaded figures, note). Checks that the load happened (scrapes, reloads, a flood,
    relists)."""
    check = lab.check
    note = ""
    if phase == "scrape":
        load = scrape_load(tmp, args.seconds)
        quiet, m, _ = measure(args.seconds, load)
        times = scrapes_done(load.p.figures_file)
        note = "%d scrapes, median %.0f ms" % (
            len(times), 1000 * sorted(times)[len(times) // 2]) if times else "no scrapes"
        check(len(times) >= 5, "scrape: A was scraped back to back (%s)" % note)
    elif phase == "reload":
        r0 = a_counter("podnet_config_last_reload_success_timestamp_seconds")
        quiet, m, _ = measure(args.seconds, reload_load(args.seconds))
        r1 = a_counter("podnet_config_last_reload_success_timestamp_seconds")
        note = "POST /-/reload every 1 s"
        check(r1 > r0, "reload: A reloaded during the phase (%s)" % note)
    elif phase == "flood":
        r0 = a_counter("podnet_responder_requests_total", responder="udp_echo")
        quiet, m, _ = measure(args.seconds, flood_load(tmp, args.seconds))
        r1 = a_counter("podnet_responder_requests_total", responder="udp_echo")
        note = "%.0f echo requests/s to A" % ((r1 - r0) / args.seconds)
        # The flooder sends 20,000/s in its slots; A's share for one source is 1,250/s. The
        # gate asks for 2,000/s (10x margin, still over the share), --bench for 5,000/s.
        check(r1 - r0 >= (5000 if args.bench else 2000) * args.seconds,
              "flood: A received a flood (%s)" % note)
    elif phase == "relist":
        log = os.path.join(tmp, "apiserver.log")
        before = len(lists_begun(log))
        quiet, m, quiet_slots = measure(args.seconds, FileLoad(os.path.join(tmp, "gone")))
        times = lists_begun(log)[before:]
        in_quiet = [t for t in times if any(a <= t <= b for a, b in quiet_slots)]
        note = "%d relists of 5,000 endpoints" % (len(times) - len(in_quiet))
        # Each gone watch sends a BOOKMARK before its 410 (--gone-bookmark), so A relists at
        # once every time rather than backing off: no relist is left to land in a quiet slot.
        check(len(times) - len(in_quiet) >= 2, "relist: A relisted during the phase (%s)" % note)
        check(not in_quiet, "relist: no relist began in a quiet slot (%d did)" % len(in_quiet))
    elif phase == "healthy":  # reference: the same client load without a body to build
        quiet, m, _ = measure(args.seconds, scrape_load(tmp, args.seconds, "/-/healthy"))
    elif phase == "cpu":
        quiet, m, _ = measure(args.seconds, cpu_load(args.seconds))
    else:
        raise RuntimeError("unknown phase %s" % phase)
    # B sends 50 UDP echoes/s and 50 keep-alive requests/s (100/s, every other second).
    least = 20 if args.bench else 10
    check(quiet["udp_n"] >= least * args.seconds and quiet["http_n"] >= least * args.seconds,
          "%s: B measured quiet A (%d UDP echoes, %d keep-alive requests)"
          % (phase, quiet["udp_n"], quiet["http_n"]))
    # A p99 is only as good as its samples: a load that made A drop or time out B's requests
    # would leave the loaded side's p99 to the ones that got through. (A flood from B's own
    # address left 622 of 1,000; slot edges move a train or two, 50 samples each.)
    share = 0.8 if args.bench else 0.5
    check(m["udp_n"] >= share * quiet["udp_n"] and m["http_n"] >= share * quiet["http_n"],
          "%s: B measured loaded A as often (%d UDP echoes, %d keep-alive requests)"
          % (phase, m["udp_n"], m["http_n"]))
    return quiet, m, note


def scenario(args, tmp):
    check = lab.check
    lab.run("ip", "netns", "add", NS)
    lab.run("ip", "-n", NS, "link", "set", "lo", "up")
    acfg, bcfg = os.path.join(tmp, "a.yaml"), os.path.join(tmp, "b.yaml")
    relist = "relist" in args.phases
    kube = []
    if relist:
        kube = ["--kubeconfig=" + start_api_server(tmp, 120 + 2 * wall_seconds(args.seconds)
                                                   * len(args.phases))]
    with open(acfg, "w") as f:
        f.write(a_config(args.peers, kubernetes=relist))
    with open(bcfg, "w") as f:
        f.write(b_config())
    lab.start(NS, NICE + [args.exporter, "--config.file=" + acfg] + kube,
              os.path.join(tmp, "a.log"))
    lab.wait_for(lambda: lab.http(NS, "http://127.0.0.1:%d/-/ready" % A_PORT)[0] == 200, 30,
                 "exporter A ready")
    lab.start(NS, NICE + [args.exporter, "--config.file=" + bcfg], os.path.join(tmp, "b.log"))
    lab.wait_for(lambda: lab.http(NS, "http://127.0.0.1:%d/-/ready" % B_PORT)[0] == 200, 30,
                 "exporter B ready")
    # Warm-up: A's series for every peer exist (its /metrics at full size), B has rounds.
    lab.wait_for(lambda: scrape_b()[0].get(math.inf, 0) >= 100, 30, "B's first UDP trains")
    time.sleep(3)
    size = len(lab.http(NS, "http://127.0.0.1:%d/metrics" % A_PORT, timeout=30)[1])
    lab.log("A: %d peers, /metrics %.2f MiB" % (args.peers, size / 2**20))
    time.sleep(SETTLE_S)  # B's trains that overlapped that scrape have ended

    rows = []
    verdicts = []
    for phase in args.phases:
        quiet, m, note = run_phase(phase, args, tmp)
        if phase in REFERENCES:
            rows += [("A quiet (beside %s)" % phase, quiet, ""), (REFERENCES[phase], m, "")]
            continue
        rows += [("A quiet (beside %s)" % phase, quiet, ""), ("A " + phase, m, note)]
        beyond = breaches(quiet, m, args.bench)
        if beyond:
            # Interleaving shares the host's slow moods between both sides, not its single
            # stalls: one stall can still move a p99 of ~300-1,000 samples (its 3rd-10th
            # slowest; CI once saw B's HTTP p99 at 75 ms beside a quiet 5.6 ms, UDP at 0.7 ms,
            # in the relist phase of a run that passed it before and after). A chore of A's
            # recurs in every slot. So a phase beyond the bound is measured once more, and the
            # check is on that second pair (both are in the table).
            lab.log("%s: beyond the bound (%s); measuring %s once more" % (phase, beyond, phase))
            quiet, m, note = run_phase(phase, args, tmp)
            rows += [("A quiet (beside %s, again)" % phase, quiet, ""),
                     ("A %s (again)" % phase, m, note)]
        if not args.bench:
            for key, what in (("udp_p99", "UDP RTT p99"), ("http_p99", "HTTP keep-alive p99")):
                v, limit = m[key], gate(key, quiet[key])
                check(v is not None and v <= limit,
                      "%s: B's %s to A %s <= max(%s, %gx quiet %s) (the fine comparison: "
                      "bench/isolation.sh)" % (phase, what, fmt_us(v), fmt_us(GATE_P99_S[key]),
                                               GATE_QUIET_RATIO, fmt_us(quiet[key])))
            continue
        for key, what in (("udp_p99", "UDP RTT p99"), ("http_p99", "HTTP keep-alive p99")):
            q, v = quiet[key], m[key]
            ok = within(q, v)
            check(ok, "%s: B's %s to A %s <= max(2 x quiet, quiet + 200 us) = %s (quiet %s)"
                  % (phase, what, fmt_us(v), fmt_us(bound(q) if q else None), fmt_us(q)))
            verdicts.append("%s %s: %s (loaded/quiet %s)" % (
                "PASS" if ok else "MISS", phase, what,
                "%.2f" % (v / q) if q and v is not None else "n/a"))
    lab.log("")
    lab.log("| %d x (%g s quiet, %g s loaded) per phase | B's UDP RTT to A, p50 | p99 | "
            "B's HTTP keep-alive p99 | A |" % (CYCLES, args.seconds / CYCLES,
                                               args.seconds / CYCLES))
    lab.log("|---|---|---|---|---|")
    for name, m, note in rows:
        lab.log("| %s | %s | %s | %s | %s |" % (name, fmt_us(m["udp_p50"]), fmt_us(m["udp_p99"]),
                                              fmt_us(m["http_p99"]), note))
    for v in verdicts:
        lab.log(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--peers", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=None,
                    help="loaded seconds per phase (default 6; 20 with --bench)")
    ap.add_argument("--phases", default="scrape,reload,flood,relist")
    ap.add_argument("--bench", action="store_true",
                    help="the fine comparison against quiet (bench/isolation.sh), not the gate")
    args = ap.parse_args()
    global CYCLES
    if not args.bench:
        CYCLES = GATE_CYCLES
    if args.seconds is None:
        args.seconds = 20.0 if args.bench else 6.0
    args.phases = [p for p in args.phases.split(",") if p]
    if not lab.have_root():
        return lab.skip(lab.ROOT_NEEDED)
    rc, broke = lab.run_namespace_test(NS, lambda tmp: scenario(args, tmp),
                                       "podnet-lab-isolation-")
    if broke and args.bench:
        return 2  # bench/isolation.sh: it could not run (1 is a MISS)
    return rc


if __name__ == "__main__":
    sys.exit(main())
