#!/usr/bin/env python3
"""Attack (issue 21): strings from a hostile or broken Kubernetes API server, end to end through
a running exporter. tests/lib/fake_apiserver.py serves (loopback, TLS, bearer token):
  - the peers' Service podnet/hostile, whose EndpointSlice has two endpoints with a 1 MB Pod
    name, a 1 MB zone behind a terminal escape (ESC [2J), a NUL in a node name, an OSC escape
    (set the window title) in a Pod name and a 300-byte node name;
  - beside it, a forged slice of podnet/hostile (labelled with the Service's name, not managed
    by the EndpointSlice controller) holding one more "probe Pod": ignored, counted;
  - the Service shop/api that a probes.service target names, with a 1 MB
    spec.trafficDistribution and a NUL in spec.internalTrafficPolicy.
Measured, from /metrics and the exporter's log once the discovered peers have been probed: the
longest label value, raw control bytes in the exposition, the longest log line, and
podnet_kubernetes_strings_sanitized_total. Asserted: no label value over 253 bytes (a DNS
subdomain, the longest Kubernetes name), no NUL or ESC in the exposition or the log, no log line
over 8 KiB, what was cut or escaped counted. Before the fix a label value was 1 MB and so was a
log line, and the NUL stayed in the label.

Only ever aimed at 127.0.0.0/8; no root. Usage: attack_inputs_test.py --exporter BIN
"""
import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "lib")]
import labkit  # noqa: E402  (check, summary, wait_for, parse_metrics)
import fake_apiserver  # noqa: E402  (the stand-in API server)

TOKEN = "attack-token"
MB = 1 << 20


def hostile_endpoints():
    """The EndpointSlice endpoints of podnet/hostile, as the API writes them (JSON escapes the
    NUL and the ESC as \\u0000 and \\u001b: they arrive as those bytes)."""
    def endpoint(address, pod, node, zone):
        return {"addresses": [address],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "targetRef": {"kind": "Pod", "namespace": "podnet", "name": pod},
                "nodeName": node, "zone": zone}
    # The exporter's own Pod is listed too, as a DaemonSet's is: the Pods that poll what a
    # probed Service asks for (podnet_service_info) are drawn among the listed ones.
    return [endpoint("127.1.9.1", "p" * MB, "node\x00b", "zone\x1b[2J" + "z" * MB),
            endpoint("127.1.9.2", "podnet-evil\x1b]0;owned\x07", "n" * 300, "zone-a"),
            endpoint("127.0.0.1", "podnet-self", "node-0", "zone-a")]


def hostile_service():
    return {"kind": "Service", "apiVersion": "v1",
            "metadata": {"name": "api", "namespace": "shop", "resourceVersion": "77"},
            "spec": {"clusterIP": "10.96.12.34", "type": "ClusterIP",
                     "trafficDistribution": "P" * MB, "internalTrafficPolicy": "Clu\x00ster"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="podnet-attack-inputs-")
    endpoints, service = os.path.join(tmp, "endpoints.json"), os.path.join(tmp, "service.json")
    with open(endpoints, "w") as f:
        json.dump(hostile_endpoints(), f)
    with open(service, "w") as f:
        json.dump(hostile_service(), f)
    # Issue 42: a slice labelled with the Service's name that the EndpointSlice controller did
    # not write, holding a "probe Pod" in zone-a (it would steer the bursts): ignored, counted.
    forged = os.path.join(tmp, "forged.json")
    with open(forged, "w") as f:
        json.dump([{"addresses": ["127.1.9.3"], "conditions": {"ready": True},
                    "targetRef": {"kind": "Pod", "namespace": "podnet", "name": "podnet-forged"},
                    "nodeName": "node-forged", "zone": "zone-a"}], f)
    exporter = None
    try:
        _, kubeconfig = fake_apiserver.start(
            tmp, TOKEN, ["--nodes", "1", "--churn", "0",
                         "--extra-service", "podnet/hostile=" + endpoints,
                         "--forged-slice", "podnet/hostile=" + forged,
                         "--object", "/api/v1/namespaces/shop/services/api=" + service,
                         "--max-seconds", "90"])
        burst, closed = labkit.free_port(), labkit.free_port()
        exporter, port = labkit.start_exporter(
            a.exporter, tmp,
            "listen_address: \"127.0.0.1:{port}\"\n"
            "self: { name: podnet-self, node: node-0, zone: zone-a }\n"
            "responders:\n  udp_echo: { listen_address: \"127.0.0.1:{port}\" }\n"
            "  burst: { listen_address: \"127.0.0.1:%d\" }\n"
            "peers:\n  kubernetes: { namespace: podnet, service: hostile, port: {port} }\n"
            "probes:\n"
            "  rtt: { protocol: udp, interval: 1s, count: 2, spacing: 10ms, timeout: 200ms }\n"
            "  service: { interval: 2s, count: 1, timeout: 200ms, targets: [{ name: api,"
            " address: 127.0.0.1, port: %d, kubernetes_service: shop/api }] }\n"
            % (burst, closed), ["--kubeconfig=" + kubeconfig])
        log_path = os.path.join(tmp, "exporter.log")
        base = "http://127.0.0.1:%d" % port

        def scrape():
            with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
                return r.read()

        def probed():
            text = scrape().decode("utf-8", "replace")
            series = labkit.parse_metrics(text)
            peers = {l.get("peer") for n, l, _ in series if n == "podnet_rtt_packets_sent_total"}
            info = [n for n, _, _ in series if n == "podnet_service_info"]
            return len(peers) >= 2 and info

        start = time.time()
        labkit.wait_for(probed, 40, "both hostile peers probed and podnet_service_info")
        took = time.time() - start
        body = scrape()
        series = labkit.parse_metrics(body.decode("utf-8", "replace"))
        longest = max(((len(v.encode()), n, k) for n, l, _ in series for k, v in l.items()),
                      default=(0, "", ""))
        controls = sorted({"%02x" % b for b in body if b < 0x20 and b != 0x0A})
        with open(log_path, "rb") as f:
            log = f.read()
        log_lines = log.split(b"\n")
        longest_log = max(len(line) for line in log_lines)
        log_controls = sorted({"%02x" % b for line in log_lines for b in line if b < 0x20})
        sanitized = {(l.get("resource"), l.get("reason")): v for n, l, v in series
                     if n == "podnet_kubernetes_strings_sanitized_total"}
        print("figures: peers probed after %.1f s; /metrics %d bytes; longest label value %d "
              "bytes (%s{%s}); control bytes in /metrics: %s; log %d bytes, longest line %d "
              "bytes, control bytes: %s; sanitized: %s"
              % (took, len(body), longest[0], longest[1], longest[2], controls or "none",
                 len(log), longest_log, log_controls or "none", sanitized), flush=True)
        labkit.check(longest[0] <= 253, "no label value over 253 bytes (longest: %d, %s{%s})"
                     % longest)
        labkit.check(not controls, "no NUL or ESC in the exposition (%s)" % (controls or "none"))
        labkit.check(longest_log <= 8192 and not log_controls,
                     "no log line over 8 KiB (longest %d bytes), no control byte in the log (%s)"
                     % (longest_log, log_controls or "none"))
        info = [l for n, l, _ in series if n == "podnet_service_info"]
        labkit.check(info and info[0].get("internal_traffic_policy") == "Clu\\\\x00ster"
                     and len(info[0].get("traffic_distribution", "")) <= 63,
                     "podnet_service_info: the NUL shown as \\x00, trafficDistribution at most "
                     "63 bytes: %s" % {k: v[:80] for k, v in (info[0] if info else {}).items()})
        labkit.check(sanitized.get(("endpointslices", "truncated"), 0) >= 2
                     and sanitized.get(("endpointslices", "escaped"), 0) >= 3
                     and sanitized.get(("services", "truncated"), 0) >= 1
                     and sanitized.get(("services", "escaped"), 0) >= 1,
                     "podnet_kubernetes_strings_sanitized_total counts what was cut and escaped")
        unmanaged = sum(v for n, l, v in series if n == "podnet_kubernetes_api_errors_total"
                        and l.get("reason") == "unmanaged_slice"
                        and l.get("resource") == "endpointslices")
        candidates = [v for n, _, v in series if n == "podnet_discovery_candidates"]
        forged_labels = sorted({"%s=%s" % (k, v) for _, l, _ in series for k, v in l.items()
                                if "forged" in v})
        # Candidates: the two hostile endpoints and the exporter's own; not the forged one.
        labkit.check(unmanaged >= 1 and candidates == [3] and not forged_labels,
                     "a forged EndpointSlice (not the controller's) is ignored and counted: "
                     "unmanaged_slice %g, candidates %s, labels naming it %s"
                     % (unmanaged, candidates, forged_labels or "none"))
        ready = urllib.request.urlopen(base + "/-/ready", timeout=10).status
        labkit.check(exporter.poll() is None and ready == 200,
                     "the exporter runs on and is ready (%s)" % ready)
    except RuntimeError as e:  # a wait that timed out: the figures say the rest
        labkit.check(False, str(e))
    finally:
        labkit.stop_all()
    print(labkit.summary(), flush=True)
    return 1 if labkit.failures else 0


if __name__ == "__main__":
    sys.exit(main())
