#!/usr/bin/env python3
"""What adding a probe kind costs, held: tests/layout/tick_kind.patch is the smallest kind,
whole (its options, decoder and families in exporter/config/kinds/tick.{h,cc}, its probe in
exporter/probes/tick/, one row in config.h's kProbeSections beside its Config member, one row in
probes/registry.cc, its docs and its golden families). docs/development.md ("A probe kind's
files") points here.

Default (ctest kind_patch, a second): the patch still applies to the tree (with one line of
context, so an unrelated edit near a row does not stop it), touches at most 6 production files
(exporter/ and the build files), 4 of them new, and nothing outside exporter/, tests/unit/ and
docs/. A new central list of kinds (a file every kind must edit) makes it fail: the patch no
longer builds the kind, or touches a seventh file once mended.

--build DIR (by hand, ~15 minutes on 2 cores: 894 s of build here): the committed tree (git
archive HEAD) in DIR with the patch applied, configured and built (the exporter and the unit
tests), then proves the kind works: the unit tests that read the kinds (families,
configuration, docs) pass, `--config.check` lists it and its series, and an exporter probing
itself on loopback counts its rounds.

Usage: kind_patch.py --source-dir DIR [--patch FILE] [--build WORKDIR]
Exit 0 when it holds; 1 with what does not.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

MAX_PRODUCTION_FILES = 6
NEW_FILES = ["exporter/config/kinds/tick.h", "exporter/config/kinds/tick.cc",
             "exporter/probes/tick/tick_probe.h", "exporter/probes/tick/tick_probe.cc"]
ALLOWED_ROOTS = ("exporter/", "tests/unit/", "docs/")


def production(path):
    return path.startswith("exporter/") or os.path.basename(path) == "CMakeLists.txt"


def run(cmd, cwd, timeout=1800):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def check_patch(src, patch):
    """The problems of `patch` against the tree at `src` (empty: it holds), and its files."""
    problems = []
    r = run(["git", "apply", "--check", "-C1", patch], src, 60)
    if r.returncode != 0:
        problems.append("the patch no longer applies (git apply --check -C1): %s" % r.stderr.strip())
    r = run(["git", "apply", "--numstat", "--summary", patch], src, 60)
    files, created = [], set()
    for line in r.stdout.splitlines():
        m = re.match(r"^\d+\t\d+\t(.+)$", line)
        if m:
            files.append(m.group(1))
        m = re.match(r"^ create mode \d+ (.+)$", line)
        if m:
            created.add(m.group(1))
    prod = [f for f in files if production(f)]
    if len(prod) > MAX_PRODUCTION_FILES:
        problems.append("%d production files (at most %d): %s" % (len(prod), MAX_PRODUCTION_FILES,
                                                                  ", ".join(prod)))
    if sorted(created) != sorted(NEW_FILES):
        problems.append("the new files are %s, not the kind's own %s" % (sorted(created), NEW_FILES))
    outside = [f for f in files if not f.startswith(ALLOWED_ROOTS)]
    if outside:
        problems.append("files outside %s: %s" % (", ".join(ALLOWED_ROOTS), ", ".join(outside)))
    return problems, files, prod


def build_and_run(src, patch, work):
    """Builds the patched tree in `work` and proves the kind works; the problems found."""
    tree = os.path.join(work, "tree")
    os.makedirs(tree)
    archive = subprocess.run(["git", "-C", src, "archive", "HEAD"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
    r = run(["git", "apply", "-C1", patch], tree, 60)
    if r.returncode != 0:
        return ["git apply: " + r.stderr.strip()]
    build = os.path.join(tree, "build")
    steps = [["cmake", "-S", ".", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
              "-DPODNET_BUILD_TESTS=ON"],
             ["cmake", "--build", "build", "--parallel", str(os.cpu_count() or 2), "--target",
              "podnet-exporter", "podnet_unit_tests"]]
    for cmd in steps:
        started = time.time()
        r = run(cmd, tree, 3600)
        print("kind_patch: %s: exit %d in %.0f s" % (" ".join(cmd[:3]), r.returncode,
                                                     time.time() - started))
        if r.returncode != 0:
            return ["%s failed:\n%s" % (" ".join(cmd), (r.stdout + r.stderr)[-4000:])]
    problems = []
    r = run([os.path.join(build, "tests", "podnet_unit_tests"), "--gtest_brief=1",
             "--gtest_filter=KindFamilies*:Config*:HostileConfig*:ConfigurationDoc*:MetricsDoc*"],
            tree, 600)
    print("kind_patch: unit tests: exit %d, %s" % (r.returncode, r.stdout.strip().splitlines()[-1:]))
    if r.returncode != 0:
        problems.append("unit tests failed:\n" + r.stdout[-4000:])
    exe = os.path.join(build, "podnet-exporter")
    config = os.path.join(work, "tick.yaml")
    with open(config, "w") as f:
        f.write('listen_address: "127.0.0.1:19579"\n'
                "self: { name: me, node: n1, zone: z1 }\n"
                'responders: { udp_echo: { listen_address: "127.0.0.1:19579" } }\n'
                "peers: { static: [ { name: other, address: 127.0.0.1, port: 19579, node: n2, "
                "zone: z1 } ] }\n"
                "probes: { tick: { interval: 1s } }\n")
    r = run([exe, "--config.file=" + config, "--config.check"], work, 60)
    if r.returncode != 0 or "probes: tick;" not in r.stdout or \
            not re.search(r"^  podnet_tick_rounds_total 1$", r.stdout, re.M):
        problems.append("--config.check does not list the kind and its series: " + r.stdout + r.stderr)
    p = subprocess.Popen([exe, "--config.file=" + config], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        rounds = 0.0
        for _ in range(50):  # up to 5 s: the first rounds start within a second
            time.sleep(0.1)
            try:
                text = urllib.request.urlopen("http://127.0.0.1:19579/metrics", timeout=2).read()
            except OSError:
                continue
            m = re.search(rb"^podnet_tick_rounds_total\{[^}]*\} (\S+)$", text, re.M)
            rounds = float(m.group(1)) if m else 0.0
            if rounds >= 2:
                break
        print("kind_patch: podnet_tick_rounds_total %g" % rounds)
        if rounds < 2:
            problems.append("the tick probe ran %g rounds in 5 s (want 2)" % rounds)
    finally:
        p.terminate()
        p.wait(timeout=20)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--patch")
    ap.add_argument("--build", metavar="WORKDIR", help="build the patched tree there (by hand)")
    a = ap.parse_args()
    src = os.path.abspath(a.source_dir)
    patch = os.path.abspath(a.patch or os.path.join(src, "tests", "layout", "tick_kind.patch"))
    problems, files, prod = check_patch(src, patch)
    with open(patch) as f:
        added = sum(1 for line in f if line.startswith("+") and not line.startswith("+++"))
    print("kind_patch: %d files (%d production: %s), %d lines added"
          % (len(files), len(prod), ", ".join(prod), added))
    if a.build and not problems:
        work = tempfile.mkdtemp(prefix="kind-patch-", dir=a.build)
        try:
            problems += build_and_run(src, patch, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for p in problems:
        print("kind_patch: FAILED " + p)
    if not problems:
        print("kind_patch: holds" + (" (built and ran)" if a.build else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
