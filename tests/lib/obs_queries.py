"""Every PromQL expression the project ships: dashboard panel queries, dashboard variable queries
(label_values), recording rules and alerts. Shared by obs_static_test.py (they parse, they are
consistent) and lab_obs_test.py (they return data from a real Prometheus in the lab).
"""
import glob
import json
import os
import re

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DASHBOARDS = os.path.join(ROOT, "dashboards")
RULES = os.path.join(ROOT, "deploy", "prometheus")
RULE_FILES = [os.path.join(RULES, "podnet-recording-rules.yml"),
              os.path.join(RULES, "podnet-alert-rules.yml")]
RUNBOOKS = os.path.join(ROOT, "docs", "runbooks.md")

# Grafana's built-in variables, as Grafana would expand them for a 1 s scrape interval
# and the dashboards' own variables at "All".
BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}


def dashboards():
    """[(file name, dashboard dict)]"""
    return [(os.path.basename(p), json.load(open(p, encoding="utf-8")))
            for p in sorted(glob.glob(os.path.join(DASHBOARDS, "*.json")))]


def panels(dash):
    for p in dash.get("panels", []):
        yield p
        for sub in p.get("panels", []):  # rows
            yield sub


def panel_queries():
    """[(where, expr, panel)] for every dashboard panel target."""
    out = []
    for name, d in dashboards():
        for p in panels(d):
            for t in p.get("targets", []):
                out.append(("%s: %s [%s]" % (name, p["title"], t["refId"]), t["expr"], p))
    return out


def annotation_queries():
    """[(where, expr)] for every dashboard annotation that queries Prometheus."""
    out = []
    for name, d in dashboards():
        for a in d.get("annotations", {}).get("list", []):
            expr = a.get("target", {}).get("expr")
            if expr:
                out.append(("%s: annotation %s" % (name, a["name"]), expr))
    return out


def variable_queries():
    """[(where, series selector, label)] for every label_values() variable."""
    out = []
    for name, d in dashboards():
        for v in d["templating"]["list"]:
            if v["type"] != "query":
                continue
            text = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", text.strip(), re.S)
            if not m:
                raise ValueError("%s: variable %s: not label_values(selector, label): %s"
                                 % (name, v["name"], text))
            out.append(("%s: variable $%s" % (name, v["name"]), m.group(1), m.group(2)))
    return out


def rules():
    """[(group name, rule dict)] of every rule file."""
    out = []
    for path in RULE_FILES:
        for g in yaml.safe_load(open(path, encoding="utf-8"))["groups"]:
            out += [(g["name"], r) for r in g["rules"]]
    return out


def dependent_rules(pattern):
    """Recording rules whose expression matches the regular expression `pattern`, directly or
    through another such rule (a set of record names)."""
    recorded = {r["record"]: r["expr"] for _, r in rules() if "record" in r}
    found = set()
    while True:
        more = {name for name, expr in recorded.items() if name not in found and (
            re.search(pattern, expr) or any(
                re.search(r"(?<![\w:])%s(?![\w:])" % re.escape(p), expr) for p in found))}
        if not more:
            return found
        found |= more


def history_rules():
    """Recording rules that compare with the past (`offset`), directly or through another such
    rule: without that much history they have no data."""
    return dependent_rules(r"\boffset\b")


def replica_rules():
    """Recording rules that read the cluster DNS replicas' series (`server_zone!=""`: those
    probes.dns.cluster_dns discovers through peers.kubernetes), directly or through another
    such rule: without discovery they have no data."""
    return dependent_rules(r'server_zone\s*!=\s*""')


def native_rules():
    """Recording rules whose only input is native histograms (the rate of a raw histogram
    family, without `_bucket` or `_count`, as stage 1 records them): with classic histograms
    they have no data."""
    return {r["record"] for _, r in rules() if "record" in r
            and re.search(r"\brate\(podnet_\w+_seconds(\{[^}]*\})?\[", r["expr"])
            and not re.search(r"_(bucket|count)\b", r["expr"])}


def without_offsets(expr):
    """expr read at the evaluation time: every `offset` modifier removed."""
    return re.sub(r"\s+offset\s+\w+", "", expr)


def substitute(expr, values=None):
    """Expands $var, ${var} and [[var]] as Grafana would; `values` overrides the defaults
    (built-ins as above, every dashboard variable ".*", i.e. "All")."""
    env = dict(BUILTINS, **(values or {}))

    def one(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return env.get(name, ".*")
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", one, expr)
