#!/usr/bin/env python3
"""The two rule stages on a sharded Prometheus give what the rules give on one Prometheus.

Each promtool test file of deploy/prometheus (the single-Prometheus tests: every alert and
record they expect) runs again against the generated stage files,
deploy/prometheus/stages/podnet-rules-{shard,global}.yml, with its raw input series spread
over N shards: every raw series of one scrape target (its `instance`, or where a test series
names none, the exporter's node: `source_node`, `node`, then `peer_node` for the responders'
series) gets the target's shard as the label `podnet_shard`, as the relabelling of
docs/deploy.md ("A sharded Prometheus") gives it. Evaluating stage 1 over all the shards'
series together is exactly each shard's own evaluation side by side (every stage-1 rule groups
by `podnet_shard` or keeps one target's labels), and stage 2 reads their union as a global
evaluator does; so every test must pass unchanged, except that an alert about one target
carries that target's `podnet_shard` as its other target labels (added to its expected labels
here). Records of the settings (podnet:config:*, inputs of the multi-cluster test) are stage 2's
own and keep no shard.

A check that cannot fail is a defect: the same run with one stage-2 rule reading a shard's
share only (a `sum by` that keeps podnet_shard) must fail (--self-check, run by ctest).

Usage: sharded_rules_test.py --promtool BIN --rules-dir deploy/prometheus [--shards 2,3]
Exit 0 when every test passes at every shard count, 1 otherwise (promtool's output printed).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import zlib

import yaml

TESTS = ["podnet-rules-test.yml", "podnet-rules-test-week.yml", "podnet-rules-test-clusters.yml"]
STAGES = ["stages/podnet-rules-shard.yml", "stages/podnet-rules-global.yml"]
# The labels that name a series' scrape target, first found wins.
TARGET_KEYS = ["instance", "source_node", "node", "peer_node"]


def shard_of(value, shards, salt=0):
    return str(zlib.crc32(("%d/%s" % (salt, value)).encode()) % shards)


def target_of(labels):
    for key in TARGET_KEYS:
        m = re.search(r'\b%s="([^"]*)"' % key, labels)
        if m:
            return m.group(1)
    return ""


def parse_series(series):
    m = re.fullmatch(r"\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{.*\})?\s*", series)
    return m.group(1), (m.group(2) or "{}")


def split_salt(test, shards):
    """The hash salt that spreads this test's targets over at least 2 shards (the first of 64
    that does; 0 when it has fewer than 2 targets)."""
    targets = {target_of(parse_series(s["series"])[1]) for s in test.get("input_series", [])
               if ":" not in parse_series(s["series"])[0]}
    if len(targets) < 2:
        return 0
    for salt in range(64):
        if len({shard_of(t, shards, salt) for t in targets}) >= 2:
            return salt
    return 0


def shard_series(series, shards, seen=None, salt=0):
    """'metric{labels}' of a raw series -> the same with podnet_shard; records unchanged.
    seen: a dict {shard: set of targets} to fill."""
    name, labels = parse_series(series)
    if ":" in name:
        return series
    shard = shard_of(target_of(labels), shards, salt)
    if seen is not None:
        seen.setdefault(shard, set()).add(target_of(labels))
    inner = labels[1:-1].strip()
    return '%s{podnet_shard="%s"%s}' % (name, shard, ("," + inner) if inner else "")


# The alerts about one scrape target, whose labels are the target's own series' labels: those
# with `instance`, and PodnetPeerUnreachable (one prober's path; its test series name the prober
# by source_node).
TARGET_ALERTS = {"PodnetPeerUnreachable"}


def shard_alert(alertname, labels, shards, salt=0):
    """Expected labels of an alert: a target's alert gains that target's podnet_shard."""
    if "instance" in labels or alertname in TARGET_ALERTS:
        key = ",".join('%s="%s"' % kv for kv in labels.items())
        return dict(labels, podnet_shard=shard_of(target_of(key), shards, salt))
    return labels


def stage1_records(rules_dir):
    doc = yaml.safe_load(open(os.path.join(rules_dir, STAGES[0]), encoding="utf-8"))
    return {r["record"] for g in doc["groups"] for r in g["rules"] if "record" in r}


def shard_expr(test, stage1):
    """A query of a stage-1 record reads each shard's share: the test asks for all shards' figure
    as stage 2 reads it, the shares added up (min for a minimum), without the metric name."""
    names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", test["expr"])) & stage1
    if not names:
        return
    agg = "min" if all(n.endswith(":min") for n in names) else "sum"
    test["expr"] = "%s without (podnet_shard) (%s)" % (agg, test["expr"])
    for sample in test.get("exp_samples") or []:
        sample["labels"] = re.sub(r"^\s*[A-Za-z_:][A-Za-z0-9_:]*\s*", "", sample["labels"])


def rewrite(test_file, rules_dir, shards, out_dir, edit_global=None, only_alert=None):
    """Writes the sharded copy of one test file into out_dir; returns (its path, the number of
    targets in each shard)."""
    doc = yaml.safe_load(open(os.path.join(rules_dir, test_file), encoding="utf-8"))
    stage_files = []
    for stage in STAGES:
        text = open(os.path.join(rules_dir, stage), encoding="utf-8").read()
        if edit_global and "global" in stage:
            text = edit_global(text)
        path = os.path.join(out_dir, os.path.basename(stage))
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        stage_files.append(path)
    doc["rule_files"] = stage_files
    if only_alert:  # just the tests that expect this alert to fire
        doc["tests"] = [t for t in doc["tests"] if any(
            a["alertname"] == only_alert and a.get("exp_alerts")
            for a in t.get("alert_rule_test", []))]
    stage1 = stage1_records(rules_dir)
    seen = {}
    for test in doc["tests"]:
        # Each test's own targets spread over at least 2 shards, not just the file's.
        salt = split_salt(test, shards)
        for s in test.get("input_series", []):
            s["series"] = shard_series(s["series"], shards, seen, salt)
        for a in test.get("alert_rule_test", []):
            for e in a.get("exp_alerts") or []:
                e["exp_labels"] = shard_alert(a["alertname"], e.get("exp_labels", {}), shards,
                                              salt)
        for q in test.get("promql_expr_test", []):
            shard_expr(q, stage1)
    path = os.path.join(out_dir, "sharded-%d-%s" % (shards, test_file))
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f, sort_keys=False, width=1 << 16)
    return path, [len(seen.get(str(i), ())) for i in range(shards)]


def stage_order(rules_dir):
    """Every group of the two stage files, stage 1's first: the order a test must evaluate them
    in (promtool orders only the groups a test's group_eval_order lists; the rest at random)."""
    return [g["name"] for stage in STAGES for g in yaml.safe_load(
        open(os.path.join(rules_dir, stage), encoding="utf-8"))["groups"]]


# Departures from the stage split that generate.py's check must refuse: (what, group, the
# change to its first rule's expression or annotations).
GENERATOR_MUTATIONS = [
    ("stage 2 reads a raw bucket beside its recorded rate", "podnet.rtt",
     lambda r: r.update(expr=r["expr"] + " or sum(rate(podnet_rtt_seconds_bucket[5m]))")),
    ("stage 2 reads `up` (a substring of a record it reads)", "podnet.dns",
     lambda r: r.update(expr=r["expr"] + " or count(up)")),
    ("stage 2 reads a raw series by {__name__=...}", "podnet.rtt",
     lambda r: r.update(expr=r["expr"] + ' or count({__name__="podnet_build_info"})')),
    ("stage 2 reads a raw series after a # comment with a quote", "podnet.rtt",
     lambda r: r.update(expr="# it's\n" + r["expr"] + " or podnet_build_info")),
    ("stage 2 reads a record no rule writes", "podnet.rtt",
     lambda r: r.update(expr="path_class_zone:podnet_rtt_secs_bucket:rate5m")),
    ("a stage-1 sum drops podnet_shard", "podnet.rtt.shard",
     lambda r: r.update(expr="sum by (cluster, path_class, le) (rate(podnet_rtt_seconds_bucket[5m]))")),
    ("stage 1 reads stage 2's record", "podnet.rtt.shard",
     lambda r: r.update(expr=r["expr"] + " * on (cluster) group_left max by (cluster) "
                                         "(podnet:config:fault_share)")),
    ("a stage-1 alert reads a stage-2 alert", "podnet.alerts.exporter.shard",
     lambda r: r.update(expr=r["expr"] + ' unless on () ALERTS{alertname="PodnetProberFault"}')),
    ("a stage-1 record outside the federation's selector", "podnet.burst.shard",
     lambda r: r.update(record="node_path_class:burst_throughput_bytes_per_second:avg"),
     "selector"),
    ("a stage-2 alert's annotation queries a raw series", "podnet.alerts.fault",
     lambda r: r["annotations"].update(summary='{{ "podnet_build_info" | query }}')),
]


def check_generator(rules_dir):
    """generate.py's stage check passes the shipped files and refuses each mutation. Returns
    the number of failures."""
    import copy
    import importlib.util
    path = os.path.join(rules_dir, "..", "kubernetes", "prometheus-operator", "generate.py")
    spec = importlib.util.spec_from_file_location("podnet_rules_generate", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    files = {f: yaml.safe_load(open(os.path.join(rules_dir, f), encoding="utf-8"))
             for f in gen.SOURCES}
    failed = 0
    shipped = gen.check_stages(files)
    print("%s: generate.py's stage check passes the shipped rules %s"
          % ("FAIL" if shipped else "PASS", shipped or ""))
    failed += bool(shipped)
    for what, group, change, *named in GENERATOR_MUTATIONS:
        mutated = copy.deepcopy(files)
        g = next(g for f in mutated.values() for g in f["groups"] if g["name"] == group)
        change(g["rules"][0])
        # A mutation with a fourth item must be refused for that reason (a word of it).
        found = [p for p in gen.check_stages(mutated) if all(w in p for w in named)]
        print("%s: generate.py refuses it: %s (%s)"
              % ("PASS" if found else "FAIL", what, found[0] if found else "not seen"))
        failed += not found
    return failed


def run(promtool, path):
    r = subprocess.run([promtool, "test", "rules", path], capture_output=True, text=True,
                       timeout=900, cwd=os.path.dirname(path))
    return r.returncode, r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--promtool", default="promtool")
    ap.add_argument("--rules-dir", required=True)
    ap.add_argument("--shards", default="2,3")
    ap.add_argument("--self-check", action="store_true",
                    help="also run once with a stage-2 rule that reads one shard's share only")
    args = ap.parse_args()
    failed = check_generator(args.rules_dir)
    order = stage_order(args.rules_dir)
    for test_file in TESTS:
        doc = yaml.safe_load(open(os.path.join(args.rules_dir, test_file), encoding="utf-8"))
        if len(doc.get("rule_files", [])) > 1:  # both stages loaded: the order matters
            ok = doc.get("group_eval_order") == order
            print("%s: %s's group_eval_order is every group in stage order%s"
                  % ("PASS" if ok else "FAIL", test_file, "" if ok else ": want %s" % order))
            failed += not ok
    with tempfile.TemporaryDirectory(prefix="podnet-sharded-rules-") as tmp:
        for shards in [int(n) for n in args.shards.split(",")]:
            for test_file in TESTS:
                out = os.path.join(tmp, "%d-%s" % (shards, test_file))
                os.mkdir(out)
                path, targets = rewrite(test_file, args.rules_dir, shards, out)
                rc, log = run(args.promtool, path)
                print("%s: %s over %d shards (targets in each: %s)"
                      % ("PASS" if rc == 0 else "FAIL", test_file, shards, targets))
                if sum(targets) == 0:
                    print("  (its inputs are records only: stage 2 alone)")
                elif min(targets) == 0:
                    print("FAIL: a shard holds no target: the split proves nothing")
                    rc = 1
                if rc != 0:
                    print(log[-6000:])
                    failed += 1
        if args.self_check:
            # The global loss of a zone pair summed per shard: each shard's share alone is not
            # the zone pair's loss, and the tests that expect PodnetPacketLoss must see that.
            def per_shard(text):
                old = "1 - sum by (cluster, path_class, source_zone, peer_zone) ("
                assert old in text, "the self-check's rule is gone: update it"
                return text.replace(old, "1 - sum by (cluster, podnet_shard, path_class, "
                                         "source_zone, peer_zone) (", 1)
            out = os.path.join(tmp, "self-check")
            os.mkdir(out)
            rc, _ = run(args.promtool, rewrite(TESTS[0], args.rules_dir, 2, out, per_shard,
                                               only_alert="PodnetPacketLoss")[0])
            print("%s: a stage-2 rule that reads one shard's share fails the tests (exit %d)"
                  % ("PASS" if rc != 0 else "FAIL", rc))
            failed += rc == 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
