#!/usr/bin/env python3
"""/metrics in both exposition formats, scraped by a real Prometheus (loopback, no root):

  - two Debian `prometheus` (2.42) processes scrape one exporter every second: one started with
    --enable-feature=native-histograms, which asks for the protobuf format in its Accept header,
    and one without, which asks for text;
  - a stand-in target both also scrape records the Accept each sends: the first must ask for
    protobuf and the second not, and the exporter, sent each recorded Accept, must answer with
    the protobuf Content-Type and the text one respectively;
  - the two Prometheus servers must hold the same series (every name and label set, the
    histograms' _bucket series with le="+Inf" included) and count the same samples a scrape
    (scrape_samples_scraped), with no failed scrape.

Usage: scrape_protobuf_test.py --exporter BIN [--prometheus BIN]
"""
import argparse
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit  # noqa: E402

check = labkit.check
PROTOBUF = "application/vnd.google.protobuf"

# A peer on loopback probed over UDP (no ICMP socket needed): an RTT histogram with samples.
CONFIG = """listen_address: "127.0.0.1:{port}"
self: { name: pb, node: n, zone: z }
responders: { udp_echo: { listen_address: "127.0.0.1:{port}" } }
peers:
  static:
    - { name: loop, address: 127.0.0.1, port: {port}, node: n, zone: z }
probes:
  rtt: { protocol: udp, interval: 1s, count: 5, spacing: 20ms, timeout: 500ms }
"""


class Recorder(http.server.BaseHTTPRequestHandler):
    """A scrape target that records the Accept of every request, by User-Agent's scraper."""
    accepts = {}

    def do_GET(self):
        Recorder.accepts[self.path] = self.headers.get("Accept", "")
        body = b"recorder_up 1\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def api(port, path, **params):
    url = "http://127.0.0.1:%d/api/v1/%s?%s" % (port, path, urllib.parse.urlencode(params))
    code, body = labkit.http(None, url)
    if code != 200:
        raise labkit.Broken("prometheus API %s: %d %s" % (path, code, body))
    return json.loads(body)["data"]


# The series Prometheus adds to every scrape itself.
SYNTHETIC = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
             "scrape_samples_post_metric_relabeling", "scrape_series_added"}


def series(port, normalize):
    """Every series of job podnet in the last scrape (the exporter's, not Prometheus' own), as
    a set of sorted label tuples. `normalize`: `le` and `quantile` as the number they spell —
    Prometheus 2.42 writes them from a protobuf scrape as OpenMetrics floats (le="1.0"), from
    a text scrape as the text has them (le="1")."""
    result = api(port, "query", query='{job="podnet"}')["result"]
    out = set()
    for r in result:
        labels = dict(r["metric"])
        if labels["__name__"] in SYNTHETIC:
            continue
        for k in ("le", "quantile"):
            if normalize and k in labels:
                labels[k] = repr(float(labels[k]))
        out.add(tuple(sorted(labels.items())))
    return out


def value(port, expr):
    r = api(port, "query", query=expr)["result"]
    return float(r[0]["value"][1]) if r else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--prometheus", default=shutil.which("prometheus"))
    args = ap.parse_args()
    if not args.prometheus:
        return labkit.skip("no prometheus binary")
    tmp = tempfile.mkdtemp(prefix="podnet-scrape-protobuf-%d-" % os.getpid())
    recorder = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    try:
        _, port = labkit.start_exporter(args.exporter, tmp, CONFIG)
        proms = {}
        for name, flags in (("protobuf", ["--enable-feature=native-histograms"]), ("text", [])):
            web = labkit.free_port()
            cfg = os.path.join(tmp, "prometheus-%s.yml" % name)
            with open(cfg, "w") as f:
                f.write("global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
                        "scrape_configs:\n"
                        "  - job_name: podnet\n"
                        "    static_configs: [ { targets: ['127.0.0.1:%d'] } ]\n"
                        "  - job_name: recorder\n"
                        "    metrics_path: /%s\n"
                        "    static_configs: [ { targets: ['127.0.0.1:%d'] } ]\n"
                        % (port, name, recorder.server_address[1]))
            labkit.start(None, [args.prometheus, "--config.file=" + cfg,
                                "--storage.tsdb.path=" + os.path.join(tmp, "tsdb-" + name),
                                "--web.listen-address=127.0.0.1:%d" % web, *flags],
                         os.path.join(tmp, "prometheus-%s.log" % name), max_seconds=120)
            proms[name] = web
        for name, web in proms.items():
            labkit.wait_for(lambda: labkit.http(None, "http://127.0.0.1:%d/-/ready" % web)[0]
                            == 200, 60, "prometheus (%s) ready" % name)
        # Three scrapes each after the first RTT round (a histogram with samples).
        for name, web in proms.items():
            labkit.wait_for(lambda: (value(web, 'count_over_time(up{job="podnet"}[1m])') or 0)
                            >= 3 and "/" + name in Recorder.accepts, 30,
                            "three scrapes by prometheus (%s)" % name)

        sent = Recorder.accepts
        check(sent["/protobuf"].startswith(PROTOBUF),
              "with native-histograms Prometheus asks for protobuf: %s" % sent["/protobuf"])
        check(PROTOBUF not in sent["/text"],
              "without it, for text: %s" % sent["/text"])
        for name, want in (("protobuf", PROTOBUF + ";"), ("text", "text/plain;")):
            req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port,
                                         headers={"Accept": sent["/" + name]})
            with urllib.request.urlopen(req, timeout=10) as r:
                ctype = r.headers.get("Content-Type", "").replace(" ", "")
            check(ctype.startswith(want), "the exporter answers %s's Accept with %s" % (name, ctype))

        # The same series in both (a series added between the two scrapes: asked again, a
        # bounded number of times).
        same = False
        for _ in range(10):
            pb, text = series(proms["protobuf"], True), series(proms["text"], True)
            samples = [value(w, 'scrape_samples_scraped{job="podnet"}') for w in proms.values()]
            if pb == text and samples[0] == samples[1]:
                same = True
                break
            time.sleep(1)
        check(same, "both hold the same %d series (protobuf only: %s; text only: %s)"
              % (len(text), sorted(pb - text)[:3], sorted(text - pb)[:3]))
        check(samples[0] == samples[1] and samples[0] == len(text),
              "scrape_samples_scraped: protobuf %s, text %s" % tuple(samples))
        # What a switch of format does to a series' identity (docs/metrics.md): the bounds
        # written as integers in text ("1") are "1.0" from protobuf.
        spelled = series(proms["protobuf"], False) - series(proms["text"], False)
        labkit.log("series whose le/quantile Prometheus spells differently: %d (e.g. %s)"
                   % (len(spelled), [dict(s).get("le") for s in sorted(spelled)[:3]]))
        inf = [s for s in pb if ("le", "inf") in s and dict(s)["__name__"].startswith(
            "podnet_rtt")]
        check(len(inf) > 0, "the RTT histogram's le=\"+Inf\" buckets came through protobuf (%d)"
              % len(inf))
        count = value(proms["protobuf"],
                      'sum(podnet_rtt_seconds_count{job="podnet"})')
        check((count or 0) > 0, "the protobuf scrape holds RTT samples (%s)" % count)
        for name, web in proms.items():
            check(value(web, 'min_over_time(up{job="podnet"}[1m])') == 1,
                  "prometheus (%s): no failed scrape" % name)
    except labkit.Broken as e:
        check(False, str(e))
    finally:
        labkit.stop_all()
        recorder.shutdown()
        for name in ("protobuf", "text"):
            log = labkit.tail(os.path.join(tmp, "prometheus-%s.log" % name), 5)
            if labkit.failures and log:
                labkit.log("prometheus (%s) log:\n%s" % (name, log))
        shutil.rmtree(tmp, ignore_errors=True)
    return labkit.exit_code()


if __name__ == "__main__":
    sys.exit(main())
