#!/usr/bin/env python3
"""Lab integration test of the Service probe through a real dataplane (issue 14, item 3).

The lab (tests/lab/lab.sh) gives a client Pod and three backends: same node, same zone and cross
zone from the client. Each backend runs podnet-exporter as a responder that knows its node and
zone. In the client's namespace a Service VIP is built the way kube-proxy's iptables mode builds
one: nat OUTPUT rules `-d VIP -p udp|tcp --dport P -m statistic --mode random --probability p
-j DNAT --to-destination BACKEND:P`, one after the other, the last without a statistic match.
The client probes the VIP with probes.service (one udp and one http target). Checks:
  1. The answers' shares by path class (same_node, same_zone, cross_zone) match the DNAT
     probabilities (0.5, 0.3, 0.2) within 4 binomial standard deviations of the request count,
     sqrt(p(1-p)/N), for both protocols. Measured and expected are printed.
  2. Every request was a flow of its own: conntrack pins a flow (its 5-tuple) to the backend
     the DNAT rule chose for its first packet, so requests sharing a socket or a connection
     would all be answered by one backend; this check fails if one backend got more than 90 %
     (and (1) would fail too).
  3. The attribution is the responders' truth: each backend's own answered counter
     (podnet_responder_requests_total) agrees with the client's count for its path class,
     within one round of requests in flight between the scrapes.
  4. The rules are replaced by same-zone-only rules (what topology-aware hints program); after
     the conntrack table is flushed (as kube-proxy deletes stale UDP entries), the requests
     answered since are 100 % same_node or same_zone (difference of counters), none cross_zone
     or unknown.
  5. `promtool check metrics` finds no problem in the client's /metrics.

Usage: lab_service_test.py --exporter BIN --delayline BIN --lab-script tests/lab/lab.sh
Needs root, iptables and conntrack (scripts/install-deps.sh --test). Traffic stays in the lab's
namespaces; every wait is bounded; the lab is torn down on every exit.
"""
import math
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit as lab  # noqa: E402

PREFIX = "pnsv%d" % (os.getpid() % 10000)
NS = lab.pod_namespaces(PREFIX)
ADDR = lab.ADDR
VIP = "10.96.0.10"  # outside the lab's /24: only the DNAT rules make it reachable
PORT = 9479
# Backend → (node, zone) it says it is; the client is node-a in zone-a.
IDENTITY = {"same": ("node-a", "zone-a"), "zone": ("node-b", "zone-a"),
            "cross": ("node-c", "zone-b")}
ZONE_OF_PATH = {"same_node": "zone-a", "same_zone": "zone-a", "cross_zone": "zone-b"}
SHARES = {"same": 0.5, "zone": 0.3, "cross": 0.2}  # phase 1's DNAT split
HINTS = {"same": 0.5, "zone": 0.5}  # phase 2: same-zone backends only
COUNT = 100  # requests per target per round
INTERVAL_S = 2
PHASE1_REQUESTS = 600  # per target
PHASE2_REQUESTS = 300
SIGMAS = 4
TARGETS = {"svc-udp": ("udp", "udp_echo"), "svc-http": ("tcp", "http_echo")}


def dnat_rules(shares):
    """kube-proxy's iptables mode: rule i matches with probability share_i / (what is left), the
    last one always; the same split for UDP and TCP."""
    rules = []
    for proto in ("udp", "tcp"):
        left = 1.0
        items = list(shares.items())
        for i, (name, share) in enumerate(items):
            rule = ["-d", VIP + "/32", "-p", proto, "--dport", str(PORT)]
            if i < len(items) - 1:
                rule += ["-m", "statistic", "--mode", "random", "--probability",
                         "%.10f" % (share / left)]
            rule += ["-j", "DNAT", "--to-destination", "%s:%d" % (ADDR[name], PORT)]
            rules.append(rule)
            left -= share
    return rules


def program(shares):
    """Replaces the VIP's rules, then flushes conntrack (entries made under the old rules would
    keep their backend for a reused source port)."""
    lab.in_ns(NS["client"], "iptables", "-w", "-t", "nat", "-F", "OUTPUT")
    for rule in dnat_rules(shares):
        lab.in_ns(NS["client"], "iptables", "-w", "-t", "nat", "-A", "OUTPUT", *rule)
    lab.in_ns(NS["client"], "conntrack", "-F", check_rc=False)


def metrics(ns):
    code, body = lab.http(ns, "http://127.0.0.1:9479/metrics")
    return body if code == 200 else ""


def counts(samples):
    """{(service, path): answered requests} and {(service, reason): errors} from the client."""
    answered, errors, zones = {}, {}, {}
    for name, labels, value in samples:
        if name == "podnet_service_requests_total":
            key = (labels["service"], labels["path_class"])
            answered[key] = answered.get(key, 0) + value
            zones[key] = labels["backend_zone"]
        elif name == "podnet_service_request_errors_total":
            key = (labels["service"], labels["reason"])
            errors[key] = errors.get(key, 0) + value
    return answered, errors, zones


def backend_answered(name, responder):
    for n, labels, value in lab.parse_metrics(metrics(NS[name])):
        if (n == "podnet_responder_requests_total" and labels.get("responder") == responder
                and labels.get("result") == "answered"):
            return value
    return 0


def total(answered, service):
    return sum(v for (s, _), v in answered.items() if s == service)


def scenario(args, tmp):
    check = lab.check
    for name, (node, zone) in IDENTITY.items():
        cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write("self: { name: %s, node: %s, zone: %s }\n" % (name, node, zone))
        lab.start(NS[name], [args.exporter, "--config.file=" + cfg],
                  os.path.join(tmp, name + ".log"))
    lab.in_ns(NS["client"], "ip", "route", "add", VIP + "/32", "dev", "eth0")
    program(SHARES)
    client_cfg = os.path.join(tmp, "client.yaml")
    timeout_ms = 500
    with open(client_cfg, "w") as f:
        f.write("self: { name: client, node: node-a, zone: zone-a }\n"
                "probes:\n  service:\n    interval: %ds\n    count: %d\n    spacing: 5ms\n"
                "    timeout: %dms\n    targets:\n"
                "      - { name: svc-udp, address: %s, port: %d, protocol: udp }\n"
                "      - { name: svc-http, address: %s, port: %d, protocol: http }\n"
                % (INTERVAL_S, COUNT, timeout_ms, VIP, PORT, VIP, PORT))
    for name in IDENTITY:
        lab.wait_for(lambda n=name: lab.http(NS[n], "http://127.0.0.1:9479/-/ready")[0] == 200,
                     20, "%s exporter ready" % name)
    lab.start(NS["client"], [args.exporter, "--config.file=" + client_cfg],
              os.path.join(tmp, "client.log"))
    lab.wait_for(lambda: lab.http(NS["client"], "http://127.0.0.1:9479/-/ready")[0] == 200, 20,
                 "client exporter ready")

    # Phase 1: the three-way split.
    def enough(n, since=None):
        a, _, _ = counts(lab.parse_metrics(metrics(NS["client"])))
        return all(total(a, s) - (total(since, s) if since else 0) >= n for s in TARGETS)
    lab.wait_for(lambda: enough(PHASE1_REQUESTS), 60, "%d answers per target" % PHASE1_REQUESTS)
    body = metrics(NS["client"])
    truth = {(s, b): backend_answered(b, responder) for s, (_, responder) in TARGETS.items()
             for b in IDENTITY}
    r = subprocess.run([args.promtool, "check", "metrics"], input=body, capture_output=True,
                       text=True)
    check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
          "promtool check metrics: no problem %s" % (r.stdout + r.stderr).strip())
    answered, errors, zones = counts(lab.parse_metrics(body))
    for service in TARGETS:
        n = total(answered, service)
        errs = {k[1]: v for k, v in errors.items() if k[0] == service}
        check(sum(errs.values()) <= 0.01 * n,
              "%s: %d answered, errors %s (at most 1 %%)" % (service, n, errs))
        shares = {}
        for backend, p in SHARES.items():
            path = lab.PATH_OF[backend]
            got = answered.get((service, path), 0)
            shares[backend] = got / n if n else 0
            sigma = math.sqrt(p * (1 - p) / n) if n else 1
            lab.log("%s %-10s expected %.3f measured %.3f (%d of %d), tolerance +-%.3f (%d sigma)"
                    % (service, path, p, shares[backend], got, n, SIGMAS * sigma, SIGMAS))
            check(abs(shares[backend] - p) <= SIGMAS * sigma,
                  "%s: %s share %.3f within %d sigma (%.3f) of the DNAT probability %.2f"
                  % (service, path, shares[backend], SIGMAS, SIGMAS * sigma, p))
            check(zones.get((service, path)) == ZONE_OF_PATH[path],
                  "%s: %s answers carry backend_zone %s (%s)"
                  % (service, path, ZONE_OF_PATH[path], zones.get((service, path))))
            # The responder's own count, taken right after the client's scrape: one round of
            # requests at most may fall between the two.
            check(abs(truth[(service, backend)] - got) <= COUNT,
                  "%s: backend %s answered %d, the client attributed %d to %s"
                  % (service, backend, truth[(service, backend)], got, path))
        check(answered.get((service, "unknown"), 0) == 0,
              "%s: every answer identified its backend" % service)
        check(max(shares.values()) < 0.9 and min(shares.values()) > 0,
              "%s: each request a flow of its own (one flow would pin every request to one "
              "backend): largest share %.3f" % (service, max(shares.values())))

    # Phase 2: same-zone-only rules (topology hints). Counters from after the change.
    program(HINTS)
    time.sleep(timeout_ms / 1000 + 0.5)  # requests sent under the old rules have ended
    before, before_err, _ = counts(lab.parse_metrics(metrics(NS["client"])))
    lab.wait_for(lambda: enough(PHASE2_REQUESTS, before), 60,
                 "%d more answers per target" % PHASE2_REQUESTS)
    after, after_err, _ = counts(lab.parse_metrics(metrics(NS["client"])))
    for service in TARGETS:
        delta = {path: after.get((service, path), 0) - before.get((service, path), 0)
                 for path in ("same_node", "same_zone", "cross_zone", "unknown")}
        n = sum(delta.values())
        local = delta["same_node"] + delta["same_zone"]
        lab.log("%s after the hints: %s" % (service, delta))
        check(n >= PHASE2_REQUESTS and local == n,
              "%s: 100 %% same_node/same_zone after same-zone-only rules (%d of %d)"
              % (service, local, n))
        check(delta["same_node"] > 0 and delta["same_zone"] > 0,
              "%s: both same-zone backends still answer (%d / %d)"
              % (service, delta["same_node"], delta["same_zone"]))
    check(lab.procs[-1].poll() is None, "the client exporter is still running")
    return 1 if lab.failures else 0


def main():
    args = lab.lab_arguments()
    if not lab.have_root():
        return lab.skip(lab.ROOT_NEEDED)
    for tool in ("iptables", "conntrack"):
        if shutil.which(tool) is None:
            return lab.skip("%s is not installed (scripts/install-deps.sh --test)" % tool)
    started = time.monotonic()
    rc = lab.run_lab_test(args.lab_script, args.delayline, PREFIX,
                          lambda _, tmp: scenario(args, tmp), "podnet-lab-service-")
    lab.log("wall time %.1f s" % (time.monotonic() - started))
    return rc


if __name__ == "__main__":
    sys.exit(main())
