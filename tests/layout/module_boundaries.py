#!/usr/bin/env python3
"""The module map holds in the build: for every pair of modules (A, B), a file of A that includes
a header of B preprocesses with A's include directories (as CMake gives them to A's sources)
exactly when the module map (exporter/modules.json) lets A reach B: B is A itself, a module A
lists, or a module one of those lists as public (public edges carry on). So an include across an
edge the map does not have fails to compile: CMakeLists.txt links the modules from the same file,
and a module linked by hand past the map, or a header reachable without linking, fails here.

Inside the probes module, one rule the build cannot see: a probe kind's folder (exporter/probes/X/
holding X_probe.h) never includes another kind's folder; what two kinds share lives outside the
kinds' folders (the HTTP client: exporter/net/http_client.h). So a kind can be read, changed or
removed alone.

Usage: module_boundaries.py --cxx C++ --map exporter/modules.json --source-dir DIR
                            --module NAME=DIR:DIR... (one per module)
Exit 0 when every pair agrees; 1 with the pairs that do not.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def parse_map(path):
    """{module: (public set, private set, folder)} from the module map (exporter/modules.json)."""
    with open(path, encoding="utf-8") as f:
        modules = json.load(f)["modules"]
    return {name: (set(m["public"]), set(m["private"]), m["folder"])
            for name, m in modules.items()}


def reachable(deps, module):
    """What `module` may include: itself, its edges, and the public edges of those, onwards."""
    public, private, _ = deps[module]
    seen, todo = {module}, list(public | private)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(deps[m][0])
    return seen


def kinds_apart(source_dir):
    """Includes from one probe kind's folder into another's: a list of "file: include"."""
    root = os.path.join(source_dir, "exporter", "probes")
    folders = [d for d in sorted(os.listdir(root)) if os.path.isdir(os.path.join(root, d))]
    kinds = {d for d in folders if os.path.isfile(os.path.join(root, d, d + "_probe.h"))}
    include = re.compile(r'^\s*#\s*include\s+"exporter/probes/([^/"]+)/', re.M)
    out = []
    for kind in sorted(kinds):
        for name in sorted(os.listdir(os.path.join(root, kind))):
            path = os.path.join(root, kind, name)
            with open(path, encoding="utf-8") as f:
                for other in include.findall(f.read()):
                    if other in kinds and other != kind:
                        out.append("exporter/probes/%s/%s includes the %s kind's folder"
                                   % (kind, name, other))
    return out, len(kinds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--map", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--module", action="append", default=[], help="NAME=DIR:DIR...")
    a = ap.parse_args()
    deps = parse_map(a.map)
    includes = {}
    for spec in a.module:
        name, _, dirs = spec.partition("=")
        includes[name] = [d for d in dirs.split(":") if d]
    problems = []
    if set(deps) != set(includes):
        problems.append("modules in the map %s, in the build %s"
                        % (sorted(deps), sorted(includes)))
    # One header per module: its smallest, so that preprocessing stays cheap.
    header = {}
    for m in includes:
        folder = os.path.join(a.source_dir, deps[m][2] if m in deps else "exporter/" + m)
        hs = [h for h in os.listdir(folder) if h.endswith(".h")]
        header[m] = min(hs, key=lambda h: os.path.getsize(os.path.join(folder, h)))
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.cc")
        for a_mod in sorted(includes):
            allowed = reachable(deps, a_mod) if a_mod in deps else set()
            for b_mod in sorted(includes):
                with open(src, "w") as f:
                    f.write('#include "exporter/%s/%s"\n' % (b_mod, header[b_mod]))
                cmd = [a.cxx, "-std=c++20", "-E", "-o", os.devnull, "-DPODNET_WITH_GRPC"]
                cmd += ["-I" + d for d in includes[a_mod]] + [src]
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                ok = r.returncode == 0
                checked += 1
                if ok != (b_mod in allowed):
                    why = r.stderr.strip().splitlines()[:1]
                    problems.append("%s including %s/%s: %s, the map says %s %s"
                                    % (a_mod, b_mod, header[b_mod],
                                       "compiles" if ok else "fails",
                                       "allowed" if b_mod in allowed else "forbidden", why))
    crossing, kinds = kinds_apart(a.source_dir)
    problems += crossing
    print("%d probe kinds, %d includes from one kind's folder into another's"
          % (kinds, len(crossing)))
    for p in problems:
        print("FAILED " + p)
    print("%d module pairs checked, %d disagree with the module map %s"
          % (checked, len(problems), a.map))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
