#!/usr/bin/env python3
"""The public interface against the last release's, so a name never changes silently.

docs/compatibility.md promises what a dashboard, a rule or an SLO keys on. This test gathers
those names from the files the other tests hold to the code (so they are the code's names):
  metric families and their labels   docs/metrics.md (reference_docs_test, lab_obs_test)
  configuration keys                 docs/configuration.md (reference_docs_test)
  recording rules, alerts            deploy/prometheus/podnet-*-rules.yml
  command-line flags, subcommands    podnet-exporter --help
  report JSON schema version         exporter/report/report.h (Report::kVersion)
and compares them with tests/compat/released-names.txt, the same list as of the last release.
Every name that is gone or new since then must be named in CHANGELOG.md's "## Unreleased"
section (in backticks; a schema version as "schema version N"), else the test fails and says
which. At a release, the Unreleased section becomes the version's and the list is written anew:
    public_names_test.py --exporter BIN --write
It also checks itself: a renamed family, a dropped label and a renamed rule, each made in
memory, must fail the comparison.

Usage: public_names_test.py --exporter BIN [--write]
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
RELEASED = os.path.join(ROOT, "tests", "compat", "released-names.txt")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def metric_names():
    """(kind, name) for each family and each (family, label) of docs/metrics.md's tables; a
    label set in italics (*source*, *peer*, *group*) stands for the labels its table gives."""
    text = read("docs/metrics.md")
    sets = {m.group(1): re.findall(r"`([a-z_][a-z0-9_]*)`", m.group(2))
            for m in re.finditer(r"^\| \*([a-z]+)\* \| ([^|]*) \|", text, re.M)}
    out = set()
    for m in re.finditer(r"^\| `(podnet_[a-z0-9_]+)` \| [a-z ]+ \|([^|]*)\|", text, re.M):
        out.add(("metric", m.group(1)))
        labels = re.findall(r"`([a-z_][a-z0-9_]*)`", m.group(2))
        for name in re.findall(r"\*([a-z]+)\*", m.group(2)):
            labels += sets[name]
        for label in labels:
            out.add(("label", "%s{%s}" % (m.group(1), label)))
    return out


def config_keys():
    return {("config", k) for k in re.findall(r"^\| `([a-z_][a-z0-9_.]*)` \|",
                                              read("docs/configuration.md"), re.M)}


def rule_names():
    out = set()
    for f, kind in (("podnet-recording-rules.yml", "record"), ("podnet-alert-rules.yml", "alert")):
        text = read(os.path.join("deploy", "prometheus", f))
        out |= {(kind, n) for n in re.findall(r"^\s*-?\s*%s:\s*(\S+)" % kind, text, re.M)}
    return out


def cli_names(exporter):
    text = subprocess.run([exporter, "--help"], capture_output=True, text=True, timeout=30).stdout
    out = {("flag", f) for f in re.findall(r"(?<![\w-])(--[a-z][a-z.-]*[a-z])", text)}
    out |= {("command", c) for c in re.findall(r"^\s+podnet-exporter ([a-z][a-z-]+) ", text, re.M)}
    return out


def schema_version():
    v = re.search(r"kVersion = (\d+);", read("exporter/report/report.h")).group(1)
    return {("report-schema-version", v)}


def current(exporter):
    return metric_names() | config_keys() | rule_names() | cli_names(exporter) | schema_version()


def fmt(item):
    return "%s %s" % item


def released():
    items = set()
    with open(RELEASED, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                kind, name = line.split(" ", 1)
                items.add((kind, name))
    return items


def unreleased_section(changelog):
    """The text under "## Unreleased" (or "## [Unreleased]"), None without that heading."""
    m = re.search(r"^## \[?Unreleased\]?\s*$(.*?)(?=^## |\Z)", changelog, re.M | re.S)
    return m.group(1) if m else None


def mentioned(item, notes):
    kind, name = item
    if kind == "report-schema-version":
        return re.search(r"schema version %s\b" % re.escape(name), notes) is not None
    if kind == "label":  # family{label}: the label, in backticks, in an entry naming the family
        family, label = name[:-1].split("{")
        return any("`%s`" % label in line and family in line for line in notes.splitlines())
    return "`%s`" % name in notes


HOW = {"label": " (name the label in backticks on a line that also names its family)",
       "report-schema-version": ' (write "schema version N")'}


def problems(now, then, notes):
    """Each name gone or new since the release that the Unreleased notes do not name."""
    out = []
    for item in sorted(then - now):
        if not mentioned(item, notes):
            out.append("gone since the last release, not in CHANGELOG.md's Unreleased: %s%s"
                       % (fmt(item), HOW.get(item[0], " (name it in backticks)")))
    for item in sorted(now - then):
        if not mentioned(item, notes):
            out.append("new since the last release, not in CHANGELOG.md's Unreleased: %s%s"
                       % (fmt(item), HOW.get(item[0], " (name it in backticks)")))
    return out


def self_check(now, notes):
    """The comparison must catch a renamed family, a dropped label and a renamed rule."""
    failures = []
    family = sorted(n for k, n in now if k == "metric")[0]
    label = sorted(n for k, n in now if k == "label")[0]
    rule = sorted(n for k, n in now if k == "record")[0]
    for what, changed in (
            ("a renamed family", (now - {("metric", family)}) | {("metric", family + "_renamed")}),
            ("a dropped label", now - {("label", label)}),
            ("a renamed recording rule", (now - {("record", rule)}) | {("record", rule + "2")})):
        if not problems(changed, now, notes):
            failures.append("self-check: %s passed the comparison" % what)
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--write", action="store_true",
                    help="write the list anew: at a release only (docs/compatibility.md), since "
                    "it makes every change since the last release pass")
    a = ap.parse_args()
    if not os.access(a.exporter, os.X_OK):
        print("FAIL --exporter %s: not an executable (build it first)" % a.exporter)
        return 1
    now = current(a.exporter)
    counts = {}
    for k, _ in now:
        counts[k] = counts.get(k, 0) + 1
    if a.write:
        with open(RELEASED, "w", encoding="utf-8") as f:
            f.write("# The public names of the last release (tests/integration/public_names_test.py"
                    " --write);\n# what a user's dashboards, rules and scripts key on: "
                    "docs/compatibility.md.\n")
            for item in sorted(now):
                f.write(fmt(item) + "\n")
        print("wrote %d names to %s" % (len(now), RELEASED))
        return 0
    notes = unreleased_section(read("CHANGELOG.md"))
    if notes is None:
        print("FAIL CHANGELOG.md has no \"## Unreleased\" heading: every change is listed under it")
        return 1
    failures = problems(now, released(), notes) + self_check(now, notes)
    for k in ("metric", "label", "config", "record", "alert", "flag", "command"):
        if counts.get(k, 0) < 2:
            failures.append("found only %d names of kind %s: the source moved?" % (counts.get(k, 0), k))
    print("public names: " + ", ".join("%d %s" % (v, k) for k, v in sorted(counts.items())))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
