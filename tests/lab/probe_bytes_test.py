#!/usr/bin/env python3
"""The probes' byte counters against the kernel's: podnet_probe_sent_bytes_total and
podnet_probe_received_bytes_total (IP layer: payload plus IP and ICMP/UDP/TCP headers, TCP
handshakes, ACKs and FINs included) must match what netfilter counted for the same packets.

In a private network namespace (lo only, made and removed here): exporter A answers (HTTP /echo,
gRPC health, ICMP by the kernel) on 127.0.0.2; exporter B probes A with the deploy default's
kinds, rtt (ICMP), http (keep-alive and new connections) and grpc, at short intervals. iptables
rules without a target in OUTPUT count every packet from B to A and back, per kind (on lo each
packet passes OUTPUT once): their byte counters (`iptables -nvxL`, the IP packet's length) are the
truth. B's counters and iptables' are zeroed together when B starts; after RUN_S, for each kind,
both are read in a quiet moment of that kind (its rules unchanged for QUIET_S before and during
the scrape of B's /metrics), so that no round is half counted. Each of B's counters must be
within TOLERANCE of the kernel's, in both directions; the ratios are printed.

Usage: probe_bytes_test.py --exporter BIN [--run-seconds S]
Needs root (a network namespace, iptables). About 15 s; every wait is bounded.
"""
import argparse
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit as lab  # noqa: E402

NS = "pbytes%d" % (os.getpid() % 10000)  # not "pn...": the lab's prefix
A_ADDR, B_ADDR = "127.0.0.2", "127.0.0.1"
A_PORT, A_GRPC_PORT, B_PORT = 19471, 19472, 19473
RUN_S = 10.0
QUIET_S = 0.4      # above the longest gap inside a round (100 ms spacing of gRPC)
TOLERANCE = 0.10   # of the kernel's count
# kind -> (iptables match of prober -> A, of A -> prober)
RULES = {
    "rtt": (["-p", "icmp", "-d", A_ADDR, "--icmp-type", "echo-request"],
            ["-p", "icmp", "-s", A_ADDR, "--icmp-type", "echo-reply"]),
    "http": (["-p", "tcp", "-d", A_ADDR, "--dport", str(A_PORT)],
             ["-p", "tcp", "-s", A_ADDR, "--sport", str(A_PORT)]),
    "grpc": (["-p", "tcp", "-d", A_ADDR, "--dport", str(A_GRPC_PORT)],
             ["-p", "tcp", "-s", A_ADDR, "--sport", str(A_GRPC_PORT)]),
}


def a_config():
    return ('listen_address: "%s:%d"\n'
            "self: { name: a, node: node-a, zone: zone-a }\n"
            'responders: { udp_echo: { listen_address: "%s:%d" },'
            ' grpc: { listen_address: "%s:%d" } }\n'
            "peers: { static: [] }\n" % (A_ADDR, A_PORT, A_ADDR, A_PORT, A_ADDR, A_GRPC_PORT))


# The deploy default's rounds (deploy/kubernetes/base/podnet.yaml): kind -> (round's options,
# interval there). Here each kind runs every INTERVAL_S[kind] instead, leaving quiet gaps.
DEPLOY = {
    "rtt": ("protocol: icmp, count: 20, spacing: 50ms, timeout: 1s", 10),
    "http": ("duration: 1s, qps: 20, connections: 2, modes: [keepalive, new_connection]", 30),
    "grpc": ("count: 10, spacing: 100ms, timeout: 1s, port: %d" % A_GRPC_PORT, 30),
}
INTERVAL_S = {"rtt": 2, "http": 5, "grpc": 2}  # http: >= its longest round (5 s)


def b_config():
    return ('listen_address: "%s:%d"\n'
            "self: { name: b, node: node-b, zone: zone-b }\n"
            'responders: { udp_echo: { listen_address: "%s:%d" } }\n'
            "peers:\n  static:\n"
            "    - { name: a, address: %s, port: %d, node: node-a, zone: zone-a }\n"
            "probes:\n" % (B_ADDR, B_PORT, B_ADDR, B_PORT, A_ADDR, A_PORT)
            + "".join("  %s: { interval: %ds, %s }\n" % (k, INTERVAL_S[k], DEPLOY[k][0])
                      for k in DEPLOY))


def ipt(*args):
    return lab.in_ns(NS, "iptables", "-w", *args)


def kernel_bytes():
    """{(kind, "sent"|"received"): bytes} from the OUTPUT rules, in the order they were added."""
    out = ipt("-nvxL", "OUTPUT").stdout
    rows = [line.split() for line in out.splitlines()[2:] if line.strip()]
    got, i = {}, 0
    for kind in RULES:
        for way in ("sent", "received"):
            got[(kind, way)] = int(rows[i][1])
            i += 1
    return got


def exporter_bytes():
    """{(kind, "sent"|"received"|"rounds"): value} from B's /metrics."""
    code, body = lab.http(NS, "http://%s:%d/metrics" % (B_ADDR, B_PORT))
    if code != 200:
        raise RuntimeError("B's /metrics answered %d" % code)
    s = lab.parse_metrics(body)
    got = {}
    for kind in RULES:
        for way in ("sent", "received"):
            name = "podnet_probe_%s_bytes_total" % way
            got[(kind, way)] = sum(v for n, l, v in s if n == name and l.get("probe") == kind)
        got[(kind, "rounds")] = sum(v for n, l, v in s
                                    if n == "podnet_probe_round_start_delay_seconds_count"
                                    and l.get("probe") == kind)
    return got


def quiet_snapshot(kind, deadline):
    """(kernel, exporter) bytes of `kind` read while its packets are quiet: its rules unchanged
    over QUIET_S before the scrape and across it. Raises at `deadline`."""
    keys = [(kind, "sent"), (kind, "received")]
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        k = kernel_bytes()
        now = [k[x] for x in keys]
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= QUIET_S:
            e = exporter_bytes()
            if [kernel_bytes()[x] for x in keys] == now:
                return {x: k[x] for x in keys}, {x: e[x] for x in keys + [(kind, "rounds")]}
            last, since = None, time.monotonic()
        time.sleep(0.02)
    raise RuntimeError("%s never quiet for %.1f s" % (kind, QUIET_S))


def scenario(args, tmp):
    check = lab.check
    lab.run("ip", "netns", "add", NS)
    lab.run("ip", "-n", NS, "link", "set", "lo", "up")
    for kind, (to_a, from_a) in RULES.items():
        ipt("-A", "OUTPUT", *to_a, "-m", "comment", "--comment", kind + " sent")
        ipt("-A", "OUTPUT", *from_a, "-m", "comment", "--comment", kind + " received")
    acfg, bcfg = os.path.join(tmp, "a.yaml"), os.path.join(tmp, "b.yaml")
    with open(acfg, "w") as f:
        f.write(a_config())
    with open(bcfg, "w") as f:
        f.write(b_config())
    lab.start(NS, [args.exporter, "--config.file=" + acfg], os.path.join(tmp, "a.log"),
              max_seconds=120)
    lab.wait_for(lambda: lab.http(NS, "http://%s:%d/-/ready" % (A_ADDR, A_PORT))[0] == 200, 30,
                 "exporter A ready")
    ipt("-Z", "OUTPUT")  # A's readiness checks are not B's
    lab.start(NS, [args.exporter, "--config.file=" + bcfg], os.path.join(tmp, "b.log"),
              max_seconds=120)
    lab.wait_for(lambda: lab.http(NS, "http://%s:%d/-/ready" % (B_ADDR, B_PORT))[0] == 200, 30,
                 "exporter B ready")
    time.sleep(args.run_seconds)
    deadline = time.monotonic() + 10
    for kind in RULES:
        kernel, exporter = quiet_snapshot(kind, deadline)
        for way in ("sent", "received"):
            k, e = kernel[(kind, way)], exporter[(kind, way)]
            ratio = e / k if k else float("nan")
            check(k > 0 and abs(e - k) <= TOLERANCE * k,
                  "%s %s: exporter %d B, kernel %d B (ratio %.3f, tolerance %.0f %%)"
                  % (kind, way, e, k, ratio, 100 * TOLERANCE))
        # The audit's figures (docs/probes.md, bench/README "Cluster cost"): the deploy default's rounds
        # are the same work at any interval, so bytes an hour = bytes a round x 3600 / interval.
        rounds = exporter[(kind, "rounds")]
        if rounds:
            per_round = sum(exporter[(kind, w)] for w in ("sent", "received")) / rounds
            lab.log("%s: %d rounds, %.0f B a round (sent + received, exporter); at the deploy "
                    "default's %d s interval %.3f MB an hour per peer"
                    % (kind, rounds, per_round, DEPLOY[kind][1],
                       per_round * 3600 / DEPLOY[kind][1] / 1e6))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--run-seconds", type=float, default=RUN_S)
    args = ap.parse_args()
    if not lab.have_root():
        return lab.skip(lab.ROOT_NEEDED)
    if shutil.which("iptables") is None:
        return lab.skip("no iptables")
    rc, _ = lab.run_namespace_test(NS, lambda tmp: scenario(args, tmp), "podnet-probe-bytes-")
    return rc


if __name__ == "__main__":
    sys.exit(main())
