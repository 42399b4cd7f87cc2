#!/usr/bin/env python3
"""The dashboards and rules hold together, without a lab (no root needed):

  - dashboards/*.json are what dashboards/generate.py writes;
  - every PromQL expression parses (promtool check rules on a temporary rule file holding every
    dashboard query, with Grafana's variables expanded, every variable query and every rule);
  - dashboards: stable unique uids, current schemaVersion, the Prometheus data source is the
    variable `datasource` everywhere, the variables cluster/zone/node/peer (DNS: cluster, name,
    resolver), unique panel ids, and only the Peers dashboard groups by `peer`;
  - rules: no rule needs `peer` (aggregate_peers drops it), and only the fault-location rules
    read `peer_node` (their peer-node view is empty with aggregate_peers, documented), as do
    PodnetPeerUnreachable, PodnetPathMTUBlackHole and PodnetExporterDown to hold their paths (or
    the exporter) back for a located fault (HOLD_BACK_ALERTS); every alert has a severity, a summary, a description and a
    runbook_url whose anchor is a heading of docs/runbooks.md, a promtool test that fires it and
    one that keeps it quiet, and a row in docs/deploy.md's table of alerts;
  - the job the alerts select (`up{job="..."}`) is the job both documented ways of scraping
    produce: the scrape-config example's job_name and the PodMonitor's job relabeling.
  - the DaemonSet the alerts read from kube-state-metrics (`namespace="...", daemonset="..."`,
    named once) is the one deploy/kubernetes/base renders, and the queries and commands of its
    runbook (docs/runbooks.md, PodnetCoverageHole) name the same one.

Usage: obs_static_test.py [--promtool PATH]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit  # noqa: E402
import obs_queries as oq  # noqa: E402

check = labkit.check
SCHEMA_VERSION = 39
# Fault location needs to know which node a path leads to: these groups may read peer_node, and
# so may the stage-1 records it reads, whose level is a node pair or a peer node.
FAULT_GROUPS = ("podnet.fault", "podnet.alerts.fault")
FAULT_LEVELS = ("node_pair:", "peer_node:")
# Alerts that hold a path (or an exporter) on a node at fault back (unless on (cluster, peer_node)).
HOLD_BACK_ALERTS = ("PodnetPeerUnreachable", "PodnetPathMTUBlackHole", "PodnetExporterDown")


def github_anchor(heading):
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def check_generated():
    r = subprocess.run([sys.executable, os.path.join(oq.DASHBOARDS, "generate.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "dashboards/*.json are what generate.py writes %s"
          % r.stdout.strip())


def check_parse(promtool):
    exprs = [(w, oq.substitute(e)) for w, e, _ in oq.panel_queries()]
    exprs += [(w, "count by (%s) (%s)" % (label, oq.substitute(sel)))
              for w, sel, label in oq.variable_queries()]
    exprs += [(w, oq.substitute(e)) for w, e in oq.annotation_queries()]
    exprs += [("rule %s" % (r.get("record") or r.get("alert")), r["expr"]) for _, r in oq.rules()]
    check(len(exprs) > 50, "%d expressions found to parse" % len(exprs))
    doc = {"groups": [{"name": "parse-check", "rules": [
        {"record": "podnet_parse_check_%d" % i, "expr": e} for i, (_, e) in enumerate(exprs)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        yaml.safe_dump(doc, f)
        path = f.name
    try:
        r = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True,
                           timeout=120)
    finally:
        os.unlink(path)
    out = r.stdout + r.stderr
    # Name the expressions promtool could not parse (it reports rule numbers).
    bad = sorted({int(n) for n in re.findall(r"podnet_parse_check_(\d+)", out)})
    for n in bad:
        labkit.log("  cannot parse: %s\n    %s" % exprs[n])
    check(r.returncode == 0, "every dashboard, variable and rule expression parses%s"
          % ("" if r.returncode == 0 else ":\n" + out.strip()[-2000:]))
    r = subprocess.run([promtool, "check", "rules"] + oq.RULE_FILES, capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0 and "WARNING" not in r.stdout + r.stderr,
          "promtool check rules on the rule files: clean %s" % (r.stdout + r.stderr).strip()[-500:])


def check_dashboards():
    uids = {}
    for name, d in oq.dashboards():
        uids.setdefault(d.get("uid"), []).append(name)
        check(re.fullmatch(r"podnet-[a-z-]+", d.get("uid", "")) is not None,
              "%s: stable uid %s" % (name, d.get("uid")))
        check(d.get("schemaVersion") == SCHEMA_VERSION, "%s: schemaVersion %s"
              % (name, d.get("schemaVersion")))
        variables = {v["name"]: v for v in d["templating"]["list"]}
        ds = variables.get("datasource", {})
        check(ds.get("type") == "datasource" and ds.get("query") == "prometheus",
              "%s: the Prometheus data source is the variable $datasource" % name)
        want = ["cluster", "name", "resolver"] if "dns" in name else [
            "cluster", "zone", "node", "peer"]
        check(all(w in variables for w in want), "%s: variables %s" % (name, ", ".join(want)))
        ids, refs = [], []
        for p in oq.panels(d):
            ids.append(p.get("id"))
            if p.get("type") == "row":  # a row holds panels, not queries
                continue
            refs.append(p.get("datasource", {}).get("uid"))
            refs += [t.get("datasource", {}).get("uid") for t in p.get("targets", [])]
            check(bool(p.get("targets")) and all(t.get("expr") for t in p["targets"]),
                  "%s: panel %r has queries" % (name, p.get("title")))
        check(len(ids) == len(set(ids)) and None not in ids, "%s: unique panel ids" % name)
        check(set(refs) == {"${datasource}"}, "%s: every panel and query uses ${datasource} (%s)"
              % (name, sorted(set(map(str, refs)))))
    check(all(len(v) == 1 for v in uids.values()), "dashboard uids are unique: %s" % uids)
    check(len(uids) == 5, "five dashboards: %s" % sorted(map(str, uids)))
    by_peer = re.compile(r"\b(by|without)\s*\([^)]*\bpeer(_node)?\b")
    for where, expr, _ in oq.panel_queries():
        if not where.startswith("peers.json"):
            check(not by_peer.search(expr), "%s: does not group by peer" % where)


def check_rules():
    with open(oq.RUNBOOKS, encoding="utf-8") as f:
        anchors = {github_anchor(m) for m in re.findall(r"^#+\s+(.*)$", f.read(), re.M)}
    with open(os.path.join(oq.ROOT, "docs", "deploy.md"), encoding="utf-8") as f:
        deploy_doc = f.read()
    tests = []
    for name in ("podnet-rules-test.yml", "podnet-rules-test-week.yml"):
        with open(os.path.join(oq.RULES, name), encoding="utf-8") as f:
            for t in yaml.safe_load(f)["tests"]:
                tests += t.get("alert_rule_test", [])
    peer_label = re.compile(r"\bpeer\b")
    peer_node = re.compile(r"\bpeer_node\b")
    for group, r in oq.rules():
        name = r.get("record") or r.get("alert")
        check(not peer_label.search(r["expr"]), "%s: needs no peer label" % name)
        if (group not in FAULT_GROUPS and name not in HOLD_BACK_ALERTS
                and not (group.endswith(".shard") and name.startswith(FAULT_LEVELS))):
            check(not peer_node.search(r["expr"]), "%s: needs no peer_node label" % name)
        if "alert" not in r:
            continue
        a = r.get("annotations", {})
        check(r.get("labels", {}).get("severity") in ("warning", "critical") and
              a.get("summary") and a.get("description") and "{{" in a["description"],
              "%s: severity, summary, description with values" % name)
        url = a.get("runbook_url", "")
        anchor = url.rpartition("#")[2]
        check(url.endswith("docs/runbooks.md#" + anchor) and anchor in anchors,
              "%s: runbook_url %s has a section in docs/runbooks.md" % (name, url))
        mine = [t for t in tests if t["alertname"] == name]
        check(any(t.get("exp_alerts") for t in mine) and any(not t.get("exp_alerts") for t in mine),
              "%s: promtool tests that fire it and keep it quiet" % name)
        check(re.search(r"^\|\s*`%s`" % name, deploy_doc, re.M) is not None,
              "%s: a row in docs/deploy.md's table of alerts" % name)


def check_job_name():
    jobs = set()
    for _group, r in oq.rules():
        jobs.update(re.findall(r'\bjob="([^"]*)"', r["expr"]))
    check(len(jobs) == 1, "the alerts select one scrape job: %s" % sorted(jobs))
    job = next(iter(jobs), None)
    with open(os.path.join(oq.RULES, "scrape-config.example.yaml"), encoding="utf-8") as f:
        example = yaml.safe_load(f)
    names = [j.get("job_name") for j in example.get("scrape_configs", [])]
    check(names == [job], "scrape-config example's job_name %s is the alerts' job %r"
          % (names, job))
    pm_path = os.path.join(oq.ROOT, "deploy", "kubernetes", "prometheus-operator",
                           "podmonitor.yaml")
    with open(pm_path, encoding="utf-8") as f:
        pm = yaml.safe_load(f)
    # The operator names the job "<namespace>/<name>" unless a relabeling replaces it.
    set_job = [rl.get("replacement") for ep in pm["spec"]["podMetricsEndpoints"]
               for rl in ep.get("relabelings", [])
               if rl.get("targetLabel") == "job" and not rl.get("sourceLabels")]
    check(set_job == [job], "the PodMonitor relabels job to the alerts' job %r: %s"
          % (job, set_job))


def check_daemonset_name():
    pairs = set()
    for _group, r in oq.rules():
        pairs.update(re.findall(r'\bnamespace="([^"]*)",\s*daemonset="([^"]*)"', r["expr"]))
    check(len(pairs) == 1, "the alerts name one DaemonSet (namespace, name): %s" % sorted(pairs))
    namespace, name = next(iter(pairs), (None, None))
    base = os.path.join(oq.ROOT, "deploy", "kubernetes", "base")
    with open(os.path.join(base, "daemonset.yaml"), encoding="utf-8") as f:
        ds = yaml.safe_load(f)
    with open(os.path.join(base, "kustomization.yaml"), encoding="utf-8") as f:
        kust = yaml.safe_load(f)
    namespaces = [yaml.safe_load(t)["metadata"]["namespace"] for t in kust.get("transformers", [])
                  if yaml.safe_load(t).get("kind") == "NamespaceTransformer"]
    check(ds["metadata"]["name"] == name and namespaces == [namespace],
          "the alerts' DaemonSet %s/%s is the base's %s/%s"
          % (namespace, name, namespaces, ds["metadata"]["name"]))
    with open(oq.RUNBOOKS, encoding="utf-8") as f:
        runbooks = f.read()
    # The section of the alert that reads the DaemonSet (other runbooks name other namespaces).
    runbooks = runbooks.partition("\n## PodnetCoverageHole\n")[2].partition("\n## ")[0]
    names = set(re.findall(r'\b(?:daemonset|created_by_name|owner_name)="([^"]*)"', runbooks))
    names.update(re.findall(r"\bdescribe ds (\S+)", runbooks))
    spaces = set(re.findall(r'\bnamespace="([^"]*)"', runbooks))
    spaces.update(re.findall(r"\bkubectl -n (\S+)", runbooks))
    check(names == {name} and spaces == {namespace},
          "docs/runbooks.md#podnetcoveragehole names the DaemonSet %s/%s only: %s/%s"
          % (namespace, name, sorted(spaces), sorted(names)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--promtool", default=shutil.which("promtool") or "/usr/bin/promtool")
    args = ap.parse_args()
    check_generated()
    check_parse(args.promtool)
    check_dashboards()
    check_rules()
    check_job_name()
    check_daemonset_name()
    labkit.log(labkit.summary())
    return 1 if labkit.failures else 0


if __name__ == "__main__":
    sys.exit(main())
