"""The alerting half of the lab tests and the proving ground: the shipped rule files scaled for
a run of minutes, a real Prometheus loading them, a real Alertmanager loading the shipped
route/group/inhibit configuration, and the webhook receiver's log read back. Standard library
(and python3-yaml for the Alertmanager configuration).

Scaling (rules): each (pattern, replacement) of a scale is applied to temporary copies of
deploy/prometheus/podnet-{recording,alert}-rules.yml; every pattern must match at least once, so
a renamed window or setting fails instead of going unscaled.
"""
import json
import os
import re
import sys

import labkit
from labkit import log

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
RULES = os.path.join(ROOT, "deploy", "prometheus")
RULE_FILES = ("podnet-recording-rules.yml", "podnet-alert-rules.yml")
# The shipped Alertmanager configuration (route, grouping, inhibition; rendered by
# deploy/kubernetes/alertmanager as the Secret a prometheus-operator Alertmanager reads).
ALERTMANAGER_CONFIG = os.path.join(ROOT, "deploy", "kubernetes", "alertmanager",
                                   "alertmanager.yaml")
RECEIVER = os.path.join(HERE, "alert_receiver.py")

_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)$")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def seconds(text):
    """A Prometheus duration of one unit ("30s", "5m", "4h") in seconds; raises ValueError."""
    m = _DURATION.match(str(text).strip())
    if not m:
        raise ValueError("not a one-unit Prometheus duration: %r" % text)
    return int(m.group(1)) * _SECONDS[m.group(2)]


def duration(s):
    """Seconds as a Prometheus duration ("250ms", "10s"); whole milliseconds."""
    ms = max(1, int(round(s * 1000)))
    return "%ds" % (ms // 1000) if ms % 1000 == 0 else "%dms" % ms


# The same rules split by stage (deploy/prometheus/stages, docs/deploy.md "A sharded
# Prometheus"): stage 1 for each shard, stage 2 for the global evaluator.
STAGE_FILES = ("stages/podnet-rules-shard.yml", "stages/podnet-rules-global.yml")


def scaled_rules(tmp, scale, files=RULE_FILES):
    """Temporary copies (in folder `tmp`) of the shipped rule files (`files`, paths under
    deploy/prometheus) with `scale` applied: a list of (regex, replacement or function of the
    match). Returns their paths, in order. Raises labkit.Broken if a pattern matched nothing in
    the files together."""
    hits = {p: 0 for p, _ in scale}
    out = []
    for name in files:
        with open(os.path.join(RULES, name)) as f:
            text = f.read()
        for pattern, repl in scale:
            text, n = re.subn(pattern, repl, text)
            hits[pattern] += n
        path = os.path.join(tmp, os.path.basename(name))
        with open(path, "w") as f:
            f.write(text)
        out.append(path)
    missing = [p for p, n in hits.items() if n == 0]
    if missing:
        raise labkit.Broken("scaling patterns that match nothing in the rules: %s" % missing)
    log("rules scaled: %s" % ", ".join("%s x%d" % (p, n) for p, n in hits.items()))
    return out


def setting(name, shipped, value):
    """A scale entry that sets the alert setting `podnet:config:NAME` (a recording rule shipped
    as `podnet:config:clusters + SHIPPED`) to `value` (strings, as written in the file). Where
    the shipped value is another, it matches nothing and scaled_rules raises."""
    return (r"(record: podnet:config:%s\n\s+expr: podnet:config:clusters \+ )%s\b"
            % (name, re.escape(shipped)), r"\g<1>" + value)


def uniform_scale(factor, offsets):
    """A rule scale that divides every range window ([5m]) and every `for:` by `factor` (whole
    seconds, at least 1 s) and replaces `offset 1d` / `offset 1w` with `offsets` (a dict
    {"1d": seconds, "1w": seconds}: "the same time yesterday" is then a quiet moment of the
    run). Windows of an hour or more (the burst rules') are left as shipped."""
    def window(m):
        s = seconds(m.group(1))
        return m.group(0) if s >= 3600 else "[%s]" % duration(max(1, s / factor))

    def for_(m):
        return "for: %s" % duration(max(1, seconds(m.group(1)) / factor))
    return [
        (r"\[(\d+[smh])\]", window),
        (r"for: (\d+[smh])\b", for_),
        (r"offset 1d\b", "offset %ds" % offsets["1d"]),
        (r"offset 1w\b", "offset %ds" % offsets["1w"]),
    ]


def alertmanager_config(path, webhook_url, scale_factor=1.0):
    """Writes to `path` the shipped Alertmanager configuration with every receiver replaced by
    one webhook to `webhook_url` (send_resolved) and its route timings (group_wait,
    group_interval, repeat_interval, at every level) divided by `scale_factor`. Route, grouping
    and inhibition stay as shipped. Returns the parsed shipped document (for the report)."""
    import yaml  # python3-yaml, a test dependency
    with open(ALERTMANAGER_CONFIG) as f:
        shipped = yaml.safe_load(f)
    doc = json.loads(json.dumps(shipped))
    names = [r["name"] for r in doc.get("receivers", [])]
    doc["receivers"] = [{"name": n, "webhook_configs": [{"url": webhook_url,
                                                           "send_resolved": True}]}
                        for n in names]

    def scale_route(r):
        for key in ("group_wait", "group_interval", "repeat_interval"):
            if key in r:
                r[key] = duration(max(1.0, seconds(r[key]) / scale_factor))
        for child in r.get("routes", []):
            scale_route(child)
    scale_route(doc["route"])
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return shipped


def start_receiver(ns, tmp, port, address="127.0.0.1"):
    """alert_receiver.py in `ns` on address:port, its log TMP/receiver.jsonl; returns a
    Receiver reading that log."""
    path = os.path.join(tmp, "receiver.jsonl")
    labkit.start(ns, [sys.executable, RECEIVER, "--port", str(port), "--address", address,
                      "--log", path], os.path.join(tmp, "receiver.log"), max_seconds=7200)
    return Receiver(path)


def start_alertmanager(ns, tmp, config, port, alertmanager="prometheus-alertmanager"):
    """A real Alertmanager in `ns` on 127.0.0.1:port with `config`, its data in TMP/am; waits
    (30 s at most) until ready. Returns the process."""
    p = labkit.start(ns, [alertmanager, "--config.file=" + config,
                          "--storage.path=" + os.path.join(tmp, "am"),
                          "--web.listen-address=127.0.0.1:%d" % port,
                          "--cluster.listen-address="],
                     os.path.join(tmp, "alertmanager.log"), max_seconds=7200)
    labkit.wait_for(lambda: labkit.http(ns, "http://127.0.0.1:%d/-/ready" % port)[0] == 200,
                    30, "alertmanager ready")
    return p


class Receiver:
    """The receiver's log, read back: one dict per alert per notification (alert_receiver.py's
    fields)."""

    def __init__(self, path):
        self.path = path

    def entries(self):
        out = []
        try:
            with open(self.path) as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line still being written: read at the next call
        except OSError:
            pass
        return out

    def since(self, t0, t1=None):
        return [e for e in self.entries()
                if e.get("received", 0) >= t0 and (t1 is None or e["received"] < t1)]


def fmt(e, t_start):
    """One receiver entry as a line: time from t_start, status, alert name, labels."""
    labels = {k: v for k, v in sorted(e.get("labels", {}).items())
              if k not in ("alertname", "severity")}
    return "  +%6.1f s  %-8s %-30s %s" % (e["received"] - t_start, e.get("status"),
                                         e.get("alertname"),
                                         " ".join("%s=%s" % kv for kv in labels.items()))
