#!/usr/bin/env python3
"""docs/rbac.md against the rendered manifests: every kustomization under deploy/kubernetes that
renders RBAC at all grants the exporter's ServiceAccount exactly the rules of the doc's table.

Each kustomization is rendered with `kubectl kustomize`; the rules that count are those of the
Roles and ClusterRoles a (Cluster)RoleBinding of the same render binds to the ServiceAccount,
one (kind, namespace, API group, resource, verb) per grant.

Usage: rbac_doc_test.py --kubectl KUBECTL --deploy DEPLOY_DIR --doc docs/rbac.md
Exit 77 (skipped) without kubectl, unless CI=true (then 1), as tests/deploy/kubectl.cjs does.
"""
import argparse
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import doc_tables  # noqa: E402

SERVICE_ACCOUNT = ("podnet-exporter", "podnet")
HEADER = ["kind", "namespace", "API group", "resource", "verbs", "what for"]


def doc_rules(path):
    """The grants of the doc's table: {(kind, namespace, group, resource, verb)}."""
    rules = set()
    for cells in doc_tables.table_rows(path, HEADER):
        kind, namespace = cells[0], cells[1].strip("`")
        namespace = "" if namespace == "(cluster)" else namespace
        group = re.match(r"`([^`]*)`", cells[2]).group(1).strip('"')
        resource = cells[3].strip("`")
        for verb in re.findall(r"`(\w+)`", cells[4]):
            rules.add((kind, namespace, group, resource, verb))
    return rules


def rendered_rules(kubectl, directory):
    """The grants bound to SERVICE_ACCOUNT in `kubectl kustomize directory`."""
    out = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    objects = [o for o in yaml.safe_load_all(out) if o]
    roles = {(o["kind"], o["metadata"].get("namespace", "") if o["kind"] == "Role" else "",
              o["metadata"]["name"]): o for o in objects if o["kind"] in ("Role", "ClusterRole")}
    rules = set()
    for b in objects:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and
                   (s.get("name"), s.get("namespace")) == SERVICE_ACCOUNT
                   for s in b.get("subjects", [])):
            continue
        ref = b["roleRef"]
        namespace = b["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        role = roles.get((ref["kind"], namespace, ref["name"]))
        if role is None:
            raise AssertionError("%s: %s %s binds %s %s, which is not rendered"
                                 % (directory, b["kind"], b["metadata"]["name"], ref["kind"],
                                    ref["name"]))
        for r in role.get("rules", []):
            for group in r.get("apiGroups", []):
                for resource in r.get("resources", []):
                    for verb in r.get("verbs", []):
                        rules.add((ref["kind"], namespace, group, resource, verb))
    return rules


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--deploy", required=True)
    ap.add_argument("--doc", required=True)
    args = ap.parse_args()
    try:
        subprocess.run([args.kubectl, "version", "--client"], capture_output=True, timeout=30,
                       check=True)
    except (OSError, subprocess.SubprocessError) as e:
        why = "kubectl (%s) cannot run: %s" % (args.kubectl, e)
        if os.environ.get("CI") == "true":
            print("FAILED %s (CI=true: a missing kubectl fails)" % why)
            return 1
        print("SKIPPED " + why)
        return 77
    want = doc_rules(args.doc)
    if not want:
        print("FAILED %s: no RBAC table found" % args.doc)
        return 1
    root = os.path.join(args.deploy, "kubernetes")
    failures, checked = [], 0
    for directory, _, files in sorted(os.walk(root)):
        if "kustomization.yaml" not in files:
            continue
        got = rendered_rules(args.kubectl, directory)
        if not got:
            continue  # renders no RBAC at all (e.g. the dashboards' ConfigMaps only)
        checked += 1
        for g in sorted(got - want):
            failures.append("%s grants %s, which %s does not list" % (directory, g, args.doc))
        for w in sorted(want - got):
            failures.append("%s lists %s, which %s does not grant" % (args.doc, w, directory))
    for f in failures:
        print("FAILED " + f)
    if checked == 0:
        print("FAILED no kustomization under %s renders RBAC" % root)
        return 1
    print("%d kustomizations render exactly the %d grants of %s%s"
          % (checked, len(want), args.doc, "" if not failures else ": NO"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
