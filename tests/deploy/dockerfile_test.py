#!/usr/bin/env python3
"""Keeps deploy/docker/Dockerfile true without a Docker engine (none runs on this machine).

The runtime stage installs exactly the Debian packages that own the shared libraries the freshly
built exporter links (`ldd` of the binary, `dpkg -S` of each library): none missing (the image
would not start), none extra and no -dev package (the image would carry what it does not need).
Also: the build stage is Debian 12 running the same scripts as developers and CI, the runtime is
debian:12-slim, the process is non-root 65532, the ENTRYPOINT runs the copied binary with
--config.file, and .dockerignore keeps the host's build tree out of the context.
Each check also runs against a mutated Dockerfile, which it must reject.

Usage: dockerfile_test.py --binary build/podnet-exporter --dockerfile deploy/docker/Dockerfile
                          --dockerignore .dockerignore
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

results = []


def check(cond, what):
    print(("ok     " if cond else "FAILED ") + what, flush=True)
    results.append(bool(cond))


def stages(text):
    """[(from_line, [instructions])] with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(
        l for l in text.splitlines() if not l.lstrip().startswith("#")))
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.upper().startswith("FROM "):
            out.append((line, []))
        elif out:
            out[-1][1].append(line)
    return out


def apt_packages(run_line):
    """Package names an `apt-get install` in one RUN line installs."""
    pkgs = []
    for cmd in re.split(r"&&|;|\|\|", run_line):
        words = shlex.split(cmd)
        if "apt-get" in words and "install" in words:
            for w in words[words.index("install") + 1:]:
                if not w.startswith("-"):
                    pkgs.append(w)
    return pkgs


def library_packages(binary):
    """{package: [libraries]} for every shared library ldd resolves for the binary."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=60, check=True)
    libs = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if "not found" in line:
            raise SystemExit("ldd: " + line)
        m = re.match(r"\S+ => (/\S+) \(", line) or re.match(r"(/\S+) \(", line)
        if m:
            libs.append(m.group(1))
    def candidates(lib):  # usrmerge: dpkg may know a library as /lib/... or as /usr/lib/...
        out = []
        for p in (lib, os.path.realpath(lib)):
            out += [p, re.sub(r"^/usr/", "/", p), p if p.startswith("/usr/") else "/usr" + p]
        return list(dict.fromkeys(out))

    paths = sorted({c for lib in libs for c in candidates(lib)})
    # One dpkg -S for all (it exits 1 when some path is unknown, and still lists the others).
    r = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True, timeout=120)
    owner_of = {}
    for line in r.stdout.splitlines():
        pkgs, _, path = line.partition(": ")
        owner_of[path.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    owners = {}
    for lib in libs:
        pkg = next((owner_of[c] for c in candidates(lib) if c in owner_of), None)
        if pkg is None:
            raise SystemExit("no Debian package owns %s (%s)" % (lib, os.path.realpath(lib)))
        owners.setdefault(pkg, []).append(os.path.basename(lib))
    return owners


def problems(dockerfile, dockerignore, needed):
    p = []
    st = stages(dockerfile)
    if len(st) < 2:
        return ["multi-stage: %d stage(s)" % len(st)]
    build_from, build = st[0]
    run_from, runtime = st[-1]
    if not re.match(r"FROM debian:12(\.\d+)? AS build$", build_from, re.I):
        p.append("build stage is not debian:12: " + build_from)
    build_runs = " ".join(i for i in build if i.upper().startswith("RUN "))
    for script in ("scripts/install-deps.sh", "scripts/build.sh"):
        if script not in build_runs:
            p.append("build stage does not run " + script)
    if not re.match(r"FROM debian:12(\.\d+)?-slim$", run_from, re.I):
        p.append("runtime stage is not debian:12-slim: " + run_from)
    listed = [pk for i in runtime if i.upper().startswith("RUN ") for pk in apt_packages(i[4:])]
    if len(set(listed)) != len(listed):
        p.append("a runtime package is listed twice")
    missing = sorted(set(needed) - set(listed))
    extra = sorted(set(listed) - set(needed))
    if missing:
        p.append("runtime stage lacks %s (for %s)" % (
            " ".join(missing), ", ".join(l for m in missing for l in needed[m])))
    if extra:
        p.append("runtime stage installs packages the binary does not link: " + " ".join(extra))
    dev = [pk for pk in listed if pk.endswith("-dev") or pk in ("g++", "gcc", "cmake", "make")]
    if dev:
        p.append("runtime stage installs build packages: " + " ".join(dev))
    users = [i.split(None, 1)[1] for i in runtime if i.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] != "65532":
        p.append("runtime user is not 65532: %s" % users)
    entry = [i for i in runtime if i.upper().startswith("ENTRYPOINT ")]
    try:
        argv = json.loads(entry[-1].split(None, 1)[1]) if entry else []
    except json.JSONDecodeError:
        argv = []
    if not argv or not any(a.startswith("--config.file=") for a in argv[1:]):
        p.append("ENTRYPOINT is not an exec-form [binary, --config.file=...]: %s" % entry)
    else:
        copies = [i for i in runtime if re.match(r"COPY\s+--from=build\s+\S+\s+%s$" % re.escape(argv[0]), i)]
        if not copies:
            p.append("the ENTRYPOINT binary %s is not copied from the build stage" % argv[0])
    ignored = {l.strip().rstrip("/") for l in dockerignore.splitlines() if l.strip() and not l.startswith("#")}
    for must in ("build", ".git"):
        if must not in ignored:
            p.append(".dockerignore does not exclude %s" % must)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--dockerfile", required=True)
    ap.add_argument("--dockerignore", required=True)
    a = ap.parse_args()
    needed = library_packages(a.binary)
    print("the binary links, by package: " + "; ".join(
        "%s (%s%s)" % (k, ", ".join(v[:3]), " +%d more" % (len(v) - 3) if len(v) > 3 else "")
        for k, v in sorted(needed.items())))
    check(len(needed) >= 3 and "libc6" in needed, "ldd + dpkg -S resolve the binary's libraries")
    text = open(a.dockerfile).read()
    ignore = open(a.dockerignore).read()
    found = problems(text, ignore, needed)
    check(not found, "the Dockerfile matches the binary" + "".join("\n  " + x for x in found))

    # Mutants: each must be caught.
    some_pkg = sorted(needed)[-1]
    mutants = {
        "a library package dropped": re.sub(r"(\s)%s(\s)" % re.escape(some_pkg), r"\1\2", text, count=1),
        "a -dev package added": text.replace("--no-install-recommends", "--no-install-recommends libssl-dev", 1),
        "runtime from debian:12": text.replace("FROM debian:12-slim", "FROM debian:12"),
        "root user": text.replace("USER 65532:65532", "USER root"),
        "build without scripts/build.sh": text.replace("scripts/build.sh", "cmake --build build"),
        "shell-form ENTRYPOINT": re.sub(r"^ENTRYPOINT .*$", "ENTRYPOINT /usr/bin/podnet-exporter", text, flags=re.M),
    }
    missed = [name for name, m in mutants.items() if m == text or not problems(m, ignore, needed)]
    missed += [] if problems(text, ignore.replace("build", "nothing"), needed) else [".dockerignore without build"]
    check(not missed, "each of %d broken Dockerfiles is caught%s" % (
        len(mutants) + 1, "; missed: " + ", ".join(missed) if missed else ""))
    print("%d passed, %d failed" % (results.count(True), results.count(False)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
