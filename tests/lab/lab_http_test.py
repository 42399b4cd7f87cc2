#!/usr/bin/env python3
"""Lab integration test of the HTTP probe: the latency ladder and the faults, for real.

The lab (tests/lab/lab.sh) gives a client Pod and three peers: same node (bridge, no delay), same
zone and cross zone (behind user-space delay lines). The peers run podnet-exporter as responders
(/echo); the client probes them with probes.http (both modes). Checks, from the client's
/metrics:
  - keep-alive p50 same_node below cross_zone (the whole ladder is printed: the step between
    same_zone and cross_zone, 0.2 ms, falls inside one histogram bucket);
  - on every path, new_connection p50 exceeds keep-alive p50 by at least one RTT of that path
    (the TCP handshake costs one round trip). Stated as far as the histograms can tell: the
    upper bound of new_connection's p50 bucket minus the lower bound of keep-alive's p50 bucket
    is at least iputils ping's fastest echo on that path (same run). The interpolated p50s are
    logged, not asserted on: with buckets up to 35 % wide their difference can miss one RTT by
    0.1 ms on a path whose handshake costs exactly one RTT;
  - gRPC health checks (grpc.health.v1.Health/Check) answered SERVING, same_node p50 below
    cross_zone p50;
  - faults, each on its own port of a misbehaving server (http_fault_server.py) in the
    same-node Pod, each with its reason counter, while the healthy peers go on being probed:
    refused, timeout (never answers), reset (mid-response), bad_status (500),
    malformed_response (garbage), slow_response (byte at a time), body_too_large,
    ambiguous_framing (two different Content-Length fields);
  - keep-alive servers curl takes without an error are taken by the probe too (1xx, idle
    closes, and the framing of docs/probes.md "Response framing": chunked with a
    Content-Length, bare-LF lines; python's http.client is asked about those too);
  - `promtool check metrics` finds no problem.

Usage: lab_http_test.py --exporter BIN --delayline BIN --lab-script tests/lab/lab.sh
Needs root (network namespaces). Every wait is bounded; the lab is torn down on every exit.
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit as lab  # noqa: E402  (shared helpers: run, in_ns, http, start, check, ...)
import doc_tables  # noqa: E402

PREFIX = "pnht%d" % (os.getpid() % 10000)
NS = lab.pod_namespaces(PREFIX)
ADDR = lab.ADDR
PATH_OF = lab.PATH_OF
FAULT_BASE_PORT = 18000
FAULTS = {  # peer name -> (port offset from FAULT_BASE_PORT, or None for a closed port; reason)
    "f-refused": (None, "refused"),
    "f-blackhole": (0, "timeout"),
    "f-reset": (1, "reset"),
    "f-500": (2, "bad_status"),
    "f-garbage": (3, "malformed_response"),
    "f-slowloris": (4, "slow_response"),
    "f-bigbody": (5, "body_too_large"),
    "f-ambiguous": (11, "ambiguous_framing"),
}
# Keep-alive peers real clients take without an error (curl is the truth, asked in the same
# run): peer name -> (port offset, the reconnect reason the probe must count, or None).
CLEAN = {
    "f-early-hints": (6, None),
    "f-idle-close": (7, "idle_closed"),
    "f-close-on-reuse": (8, "retried"),
    "f-chunked-length": (9, None),
    "f-bare-lf": (10, None),
}
# Of those, the ones python's http.client is asked about too (it returns a 103 as the response).
PYTHON_TOO = {"f-chunked-length", "f-bare-lf"}
PYTHON_GETS = (
    "import http.client, sys\n"
    "c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5)\n"
    "for _ in range(10):\n"
    "    c.request('GET', '/echo'); r = c.getresponse(); r.read(); print(r.status)\n")
INTERVAL_S = 6
# Requests a second of each HTTP round, to every peer: the healthy three and the twelve fault
# servers, which are Python (a thread per connection). At 100 (1,200 requests a second to the
# faults), on a machine whose host took half its CPU (steal: 59 s of 112 in one run here),
# hundreds of their answers came after the probe's timeout (CI failed so at stop 51); 25 still
# fills every histogram a check reads.
QPS = 25


def select(samples, name, **want):
    return [(l, v) for n, l, v in samples if n == name and all(l.get(k) == v2 for k, v2 in want.items())]


def quantile(samples, name, q, **want):
    """histogram_quantile over one series' cumulative buckets (linear within a bucket)."""
    return lab.histogram_quantile(q, lab.buckets(samples, name, **want))


def quantile_bounds(samples, name, q, **want):
    """(lo, hi): the bucket bounds the true quantile q of one series lies in; None if empty."""
    return lab.histogram_quantile_bounds(q, lab.buckets(samples, name, **want))


def counter(samples, name, **want):
    return sum(v for _, v in select(samples, name, **want))


def fault_errors(samples, peer, reason):
    """A fault peer's HTTP probe errors: (count with `reason`, {other reason: count})."""
    errors = {l["reason"]: v for l, v in select(samples, "podnet_probe_errors_total", peer=peer,
                                                probe="http") if v}
    return errors.pop(reason, 0.0), errors


def classified(n, others):
    """The fault was seen (n > 0) and counted as itself: other reasons at most 5 % of n."""
    return n > 0 and sum(others.values()) <= 0.05 * n


def clean_answers(samples, peer):
    """A keep-alive server real clients take, as the HTTP probe saw it: (200s only, count of
    200s, {other code: count}, {error reason: count}); zero counts left out."""
    errors = {l["reason"]: v for l, v in select(samples, "podnet_probe_errors_total", peer=peer,
                                                probe="http") if v}
    ok = counter(samples, "podnet_http_requests_total", peer=peer, code="200")
    other = {l["code"]: v for l, v in select(samples, "podnet_http_requests_total", peer=peer)
             if l["code"] != "200" and v}
    return ok > 0 and not errors and not other, ok, other, errors


def write_client_config(path, faults):
    text = ("listen_address: \"0.0.0.0:9479\"\n"
            "self: { name: client, node: node-a, zone: zone-a }\n"
            "peers:\n  static:\n"
            "    - { name: same, address: %s, node: node-a, zone: zone-a }\n"
            "    - { name: zone, address: %s, node: node-b, zone: zone-a }\n"
            "    - { name: cross, address: %s, node: node-c, zone: zone-b }\n"
            % (ADDR["same"], ADDR["zone"], ADDR["cross"]))
    for name, (offset, _) in (list(FAULTS.items()) + list(CLEAN.items()) if faults else []):
        port = FAULT_BASE_PORT + (offset if offset is not None else 90)
        text += ("    - { name: %s, address: %s, port: %d, node: node-a, zone: zone-a }\n"
                 % (name, ADDR["same"], port))
    # Percentiles are read per peer (same, zone and the fault peers share a path class).
    text += "metrics: { per_peer_histograms: true }\n"
    text += ("probes:\n  http: { interval: %ds, duration: 2s, qps: %d, connections: 4, "
             "timeout: 500ms, max_body_bytes: 64KiB, modes: [keepalive, new_connection] }\n"
             "  grpc: { interval: %ds, count: 50, spacing: 20ms, timeout: 500ms, port: 9480 }\n"
             % (INTERVAL_S, QPS, INTERVAL_S))
    with open(path, "w") as f:
        f.write(text)


def healthy_checks(samples, ping, ping_min, check):
    """Phase 1's checks of the healthy paths over `samples` (a reading, or the difference of
    two: labkit.sample_delta): answers, the keep-alive/new_connection ladder, gRPC."""
    ka, new = {}, {}
    for name, path in PATH_OF.items():
        ka[name] = quantile(samples, "podnet_http_request_duration_seconds", 0.5, peer=name,
                            connection="keepalive")
        new[name] = quantile(samples, "podnet_http_request_duration_seconds", 0.5, peer=name,
                             connection="new")
        ok = counter(samples, "podnet_http_requests_total", peer=name, code="200")
        bad = counter(samples, "podnet_http_requests_total", peer=name, code="error")
        late = counter(samples, "podnet_http_late_requests_total", peer=name)
        lab.log("%-10s keep-alive p50 %.3f ms, new p50 %.3f ms, ping %.3f ms; 200: %d, "
                "errors: %d, late: %d" % (path, (ka[name] or 0) * 1e3, (new[name] or 0) * 1e3,
                                          ping[name], ok, bad, late))
        # Two rounds of 2 s keep-alive and 2 s new_connection: 8 x QPS asked; half must come.
        check(ok >= 4 * QPS and bad <= ok * 0.01,
              "%s: healthy path answered (%d ok, %d errors)" % (path, ok, bad))
    if all(ka.values()) and all(new.values()):
        # Only the ends of the ladder, as for gRPC: the 0.2 ms between same_zone and cross_zone
        # falls inside one bucket (0.6-0.8 ms), and in CI (stop 30) the interpolated p50s came
        # out 0.765 / 0.742 ms once, then in order on the re-run. The step is printed.
        check(ka["same"] < ka["cross"],
              "keep-alive p50 same_node < cross_zone (ladder %.3f / %.3f / %.3f ms)"
              % (ka["same"] * 1e3, ka["zone"] * 1e3, ka["cross"] * 1e3))
        for name, path in PATH_OF.items():
            new_lo, new_hi = quantile_bounds(samples, "podnet_http_request_duration_seconds", 0.5,
                                             peer=name, connection="new")
            ka_lo, ka_hi = quantile_bounds(samples, "podnet_http_request_duration_seconds", 0.5,
                                           peer=name, connection="keepalive")
            check(new_hi - ka_lo >= ping_min[name] / 1e3,
                  "%s: new_connection p50 (in %.3f..%.3f ms) - keep-alive p50 (in %.3f..%.3f ms) "
                  "can be >= one RTT (ping min %.3f ms); interpolated difference %.3f ms"
                  % (path, new_lo * 1e3, new_hi * 1e3, ka_lo * 1e3, ka_hi * 1e3, ping_min[name],
                     (new[name] - ka[name]) * 1e3))
    else:
        check(False, "HTTP latency for every path: %s %s" % (ka, new))
    grpc50 = {}
    for name, path in PATH_OF.items():
        grpc50[name] = quantile(samples, "podnet_grpc_request_duration_seconds", 0.5, peer=name)
        ok = counter(samples, "podnet_grpc_requests_total", peer=name, code="OK")
        lab.log("%-10s gRPC health p50 %.3f ms (%d OK)" % (path, (grpc50[name] or 0) * 1e3, ok))
        errors = counter(samples, "podnet_probe_errors_total", peer=name, probe="grpc")
        check(ok >= 50 and errors == 0,
              "%s: gRPC health checks answered SERVING (%d)" % (path, ok))
    if all(grpc50.values()):
        # Only the ends of the ladder: a gRPC call crosses gRPC's own threads twice, and on a
        # busy 2-CPU machine their wake-ups blur the 0.2 ms between same_zone and cross_zone.
        check(grpc50["same"] < grpc50["cross"],
              "gRPC p50 same_node < cross_zone (ladder %.3f / %.3f / %.3f ms)"
              % tuple(grpc50[n] * 1e3 for n in ("same", "zone", "cross")))


def scenario(args, tmp):
    check = lab.check
    for name in ("same", "zone", "cross"):
        cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write("self: { name: %s, node: n-%s, zone: z }\n"
                    "responders: { grpc: { listen_address: \"0.0.0.0:9480\" } }\n"
                    % (name, name))
        lab.start(NS[name], [args.exporter, "--config.file=" + cfg],
                  os.path.join(tmp, name + ".log"))
    fault = lab.start(NS["same"], [sys.executable,
                                   os.path.join(os.path.dirname(__file__), "..", "lib", "http_fault_server.py"),
                                   "--host", ADDR["same"], "--base-port", str(FAULT_BASE_PORT),
                                   "--seconds", "120"], os.path.join(tmp, "faults.log"))
    client_cfg = os.path.join(tmp, "client.yaml")
    write_client_config(client_cfg, faults=False)
    for name in ("same", "zone", "cross"):
        lab.wait_for(lambda n=name: lab.http(NS[n], "http://127.0.0.1:9479/-/ready")[0] == 200,
                     20, "%s exporter ready" % name)
    lab.wait_for(lambda: "ready" in open(os.path.join(tmp, "faults.log")).read(), 10,
                 "fault server ready")
    client = lab.start(NS["client"], [args.exporter, "--config.file=" + client_cfg],
                       os.path.join(tmp, "client.log"))
    lab.wait_for(lambda: lab.http(NS["client"], "http://127.0.0.1:9479/-/ready")[0] == 200, 20,
                 "client exporter ready")

    ping, ping_min = {}, {}
    for name in ("same", "zone", "cross"):
        rtts, loss = lab.ping_rtts_ms(NS["client"], ADDR[name])
        ping[name] = rtts[len(rtts) // 2] if rtts else float("nan")
        ping_min[name] = rtts[0] if rtts else float("nan")
    lab.log("ping median (min) ms: " + ", ".join("%s=%.3f (%.3f)" % (k, ping[k], ping_min[k])
                                                 for k in ping))

    # Phase 1, healthy peers only: two rounds per peer (each round: 2 s keep-alive, then 2 s new_connection).
    time.sleep(2 * INTERVAL_S + 1)
    code, body = lab.http(NS["client"], "http://127.0.0.1:9479/metrics")
    check(code == 200, "/metrics answers 200")
    r = subprocess.run([args.promtool, "check", "metrics"], input=body, capture_output=True,
                       text=True)
    check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
          "promtool check metrics: no problem %s" % (r.stdout + r.stderr).strip())
    first = lab.parse_metrics(body)
    # The HTTP and gRPC families (lab_obs runs no gRPC) as docs/metrics.md lists them.
    doc_tables.check_exposed([body], check, per_peer_histograms=True, every_probe=False)

    # A stall of a shared host (the CI machine's neighbours: a 1 ms sleep overshot by up to
    # 465 ms here beside a busy one) turns answers into timeouts and lifts one window's p50s;
    # a defect shows in every window. So a first window that fails is measured once more: the
    # next two rounds on their own (sample_delta), and those are checked.
    results = []
    healthy_checks(first, ping, ping_min, lambda cond, what: results.append((cond, what)) or cond)
    if all(cond for cond, _ in results):
        for cond, what in results:
            check(cond, what)
    else:
        lab.log("phase 1: not met in the first rounds (%s); checking the next two on their own"
                % "; ".join(what for cond, what in results if not cond))
        time.sleep(2 * INTERVAL_S + 1)
        later = lab.parse_metrics(lab.http(NS["client"], "http://127.0.0.1:9479/metrics")[1])
        healthy_checks(lab.sample_delta(later, first), ping, ping_min, check)

    # Phase 2: the fault peers join (SIGHUP reload) while the healthy ones go on being probed.
    write_client_config(client_cfg, faults=True)
    os.kill(client.pid, signal.SIGHUP)  # `ip netns exec` exec()s: the pid is the exporter's
    time.sleep(2 * INTERVAL_S + 1)
    _, body = lab.http(NS["client"], "http://127.0.0.1:9479/metrics")
    first = lab.parse_metrics(body)
    r = subprocess.run([args.promtool, "check", "metrics"], input=body, capture_output=True,
                       text=True)
    check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip()
          and "podnet_http_reconnects_total{" in body,
          "promtool check metrics with every fault and reconnect series: no problem %s"
          % (r.stdout + r.stderr).strip())
    # Each fault's errors carry its reason (at most 5 % others). A fault peer whose first
    # rounds break that is counted once more over the following round, and that window is
    # checked: a stall of a shared host (the fault server is Python) lands in one window and
    # turns answers into `timeout`, while a wrong classification recurs in every round.
    # The keep-alive servers real clients take (CLEAN, below) get the same second window.
    stray = [name for name, (_, reason) in FAULTS.items()
             if not classified(*fault_errors(first, name, reason))]
    stray += [name for name in CLEAN if not clean_answers(first, name)[0]]
    if stray:
        lab.log("%s: other reasons in the first rounds; counting the next round on its own"
                % ", ".join(stray))
        time.sleep(INTERVAL_S + 2)
        _, body = lab.http(NS["client"], "http://127.0.0.1:9479/metrics")
        later = lab.parse_metrics(body)
    for name, (_, reason) in FAULTS.items():
        n, others = fault_errors(first, name, reason)
        note = ""
        if name in stray:
            note = "; the first rounds: %d, others %s" % (n, others)
            n, others = fault_errors(lab.sample_delta(later, first), name, reason)
        check(classified(n, others),
              "%s: errors counted as %s (%d; others %s%s)" % (name, reason, n, others, note))
        check(counter(first, "podnet_http_request_duration_seconds_count", peer=name) == 0,
              "%s: no latency observed for failed requests" % name)

    # Keep-alive servers real clients take: curl (10 requests on one connection) is the truth.
    for name, (offset, reason) in CLEAN.items():
        url = "http://%s:%d/echo" % (ADDR["same"], FAULT_BASE_PORT + offset)
        r = lab.in_ns(NS["client"], "curl", "-s", "-m", "10", "-w",
                      "%{http_code} %{num_connects}\n", *(["-o", "/dev/null", url] * 10),
                      check_rc=False, timeout=30)
        codes = [l.split()[0] for l in r.stdout.splitlines() if l.strip()]
        connects = sum(int(l.split()[1]) for l in r.stdout.splitlines() if l.strip())
        lab.log("curl %s: codes %s, %d connections" % (name, " ".join(codes), connects))
        check(codes == ["200"] * 10, "%s: curl gets 200 ten times (%s)" % (name, codes))
        if name in PYTHON_TOO:
            r = lab.in_ns(NS["client"], sys.executable, "-c", PYTHON_GETS, ADDR["same"],
                          str(FAULT_BASE_PORT + offset), check_rc=False, timeout=30)
            codes = r.stdout.split()
            check(codes == ["200"] * 10, "%s: python's http.client gets 200 ten times (%s)"
                  % (name, codes))
        good, ok, other, errors = clean_answers(first, name)
        note = ""
        if name in stray:
            note = "; the first rounds: %d, other codes %s, errors %s" % (ok, other, errors)
            good, ok, other, errors = clean_answers(lab.sample_delta(later, first), name)
        check(good, "%s: the probe, like curl, gets 200 only (%d; other codes %s, errors %s%s)"
              % (name, ok, other, errors, note))
        if reason:
            n = counter(first, "podnet_http_reconnects_total", peer=name, reason=reason)
            check(n > 0, "%s: reconnects counted as %s (%d)" % (name, reason, n))

    # The probe goes on: another round later, the healthy peers got more answers and the
    # faults more errors; the exporter serves and is alive.
    time.sleep(INTERVAL_S)
    _, body = lab.http(NS["client"], "http://127.0.0.1:9479/metrics")
    later = lab.parse_metrics(body)
    for name in ("same", "zone", "cross"):
        check(counter(later, "podnet_http_requests_total", peer=name, code="200")
              > counter(first, "podnet_http_requests_total", peer=name, code="200"),
              "%s: still probed after the faults" % name)
    for name, (_, reason) in FAULTS.items():
        check(counter(later, "podnet_probe_errors_total", peer=name, reason=reason)
              > counter(first, "podnet_probe_errors_total", peer=name, reason=reason),
              "%s: the fault is counted round after round" % name)
    check(lab.procs[-1].poll() is None, "the client exporter is still running")
    check(fault.poll() is None, "the fault server is still running")
    return 1 if lab.failures else 0


def main():
    args = lab.lab_arguments()
    if not lab.have_root():
        return lab.skip(lab.ROOT_NEEDED)
    return lab.run_lab_test(args.lab_script, args.delayline, PREFIX,
                            lambda _, tmp: scenario(args, tmp), "podnet-lab-http-")

if __name__ == "__main__":
    sys.exit(main())
