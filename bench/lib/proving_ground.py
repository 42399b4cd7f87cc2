"""The proving ground: does an alert name the fault, once, and only then? A simulated fleet
(tests/lib/fleet.py: N nodes in Z zones, one real exporter each, discovery through the stand-in
API server, real unbound replicas, a real Prometheus with the shipped rules and a real
Alertmanager with the shipped configuration, time-scaled) takes faults one at a time, each at a
random target with its ground truth recorded, and no-fault phases; every notification the
receiver logs is scored against the truth.

The scores (top-1, top-3, detection time, notifications per incident, false notifications per
node-hour) are tests/lib/campaign.py's; this program runs the campaign and prints them as
tables (per class, the no-fault phases, a confusion matrix of fault class x the first
notification's alert), PASS/MISS lines against the targets, and JSON for before/after
comparisons. bench/README.md ("Proving ground") has the results.

Usage (root, after scripts/build.sh --test): bench/proving_ground.sh [--nodes 24] [--zones 3]
  [--trials 10] [--classes a,b] [--phases quiet,rollout,churn,prometheus_restart]
  [--discovery watch|dns] [--seed N] [--json FILE] [--markdown FILE]
--discovery dns: every exporter finds its peers from the podnet Service's DNS records
(peers.kubernetes.discovery: dns; the fleet's unbound replicas serve them as CoreDNS would,
tests/lib/fleet.py) instead of the EndpointSlice watch; PODNET_LAB_DRAIN_S sets the exporters'
drain (5 s). The rollout and churn phases also record the HTTP/gRPC probes refused by a stopped
Pod and, with dns, discovery's questions by result.
The JSON is rewritten after every trial and phase ("partial": true until the end), so a run cut
short keeps what it scored. A campaign too long for one sitting runs in parts (other seeds,
other classes) that are then scored together:
  bench/proving_ground.sh --merge A.json B.json ... [--json FILE] [--markdown FILE]
which refuses parts whose fleet (nodes, zones, scales) or rules and Alertmanager configuration
(the SHA-256 of their parsed YAML, "rules_sha256": a comment does not count) differ.
Exit 0 when it ran (a missed target is a MISS line, not an error); 2 when it could not run.
"""
import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

sys.path.insert(0, os.path.join(B.REPO, "tests", "lib"))
import campaign as C  # noqa: E402
import faults  # noqa: E402
import fleet as F  # noqa: E402
import labkit as K  # noqa: E402
import alerting  # noqa: E402

def markdown(rows, overall, confusion, phases, meta):
    out = ["Proving ground, %(nodes)d nodes in %(zones)d zones, rules x1/%(rule_scale)d, "
           "probes x1/%(probe_scale)d, seed %(seed)s, %(minutes).0f min, %(commit)s" % meta
           + ", discovery %s, drain %s s" % (meta.get("discovery", "watch"),
                                              meta.get("drain_s", "?")), "",
           "| fault class | trials | void (host steal) | top-1 | top-3 | detection median / max "
           "(lab s) | = shipped (min) | missed | notifications per incident (median / max) |",
           "|---|---|---|---|---|---|---|---|---|"]

    def pct(x):
        return "%.0f %%" % (100 * x) if x is not None else "-"
    for r in rows:
        det = ("%.0f / %.0f" % (r["detect_median_s"], r["detect_max_s"])
               if r["detect_median_s"] is not None else "-")
        shipped = ("%.0f / %.0f" % (r["detect_median_s"] * meta["rule_scale"] / 60,
                                    r["detect_max_s"] * meta["rule_scale"] / 60)
                   if r["detect_median_s"] is not None else "-")
        pages = ("%d / %d" % (r["pages_median"], r["pages_max"])
                 if r["pages_max"] is not None else "-")
        out.append("| %s | %d | %d | %s | %s | %s | %s | %d | %s |"
                   % (r["kind"], r["trials"], r.get("void", 0), pct(r["top1"]), pct(r["top3"]),
                      det, shipped, r["missed"], pages))
    if overall["trials"] or overall.get("void"):
        out.append("| **all** | %d | %d | %s | %s | | | | max %s |"
                   % (overall["trials"], overall.get("void", 0), pct(overall["top1"]),
                      pct(overall["top3"]),
                      overall["pages_max"] if overall["pages_max"] is not None else "-"))
    out += ["", "| no-fault phase | lab s | node-hours (shipped timing) | host steal | false "
            "notifications | alerts |", "|---|---|---|---|---|---|"]
    for p in phases:
        steal = ("%.0f %%%s" % (100 * p["host_steal"], " (void)" if p.get("void") else "")
                 if "host_steal" in p else "-")
        out.append("| %s | %.0f | %.1f | %s | %d | %s |"
                   % (p["phase"], p["lab_s"], p["node_hours"], steal, p["false_notifications"],
                      ", ".join(p["alerts"]) or "-"))
    cols = sorted({c for row in confusion.values() for c in row})
    if cols:
        out += ["", "Confusion (rows: injected class; columns: the first notification's alert)",
                "", "| | " + " | ".join(c.replace("Podnet", "") for c in cols) + " |",
                "|---|" + "---|" * len(cols)]
        for kind, row in confusion.items():
            out.append("| %s | " % kind + " | ".join(str(row.get(c, "")) for c in cols) + " |")
    return "\n".join(out) + "\n"


# What a part of a campaign must share with the others to be scored with them, and the value
# of those a part written before they were recorded had.
SAME_FLEET = ("nodes", "zones", "rule_scale", "probe_scale", "rules_sha256", "shards",
              "discovery")
BEFORE_RECORDED = {"shards": 0, "discovery": "watch"}


# How rules_sha256 reads the files: their YAML parsed (a part without this mark hashed the bytes).
RULES_HASH = "parsed"


def rules_sha256(read=None):
    """SHA-256 (hex) of the shipped rule files and Alertmanager configuration the fleet loads, as
    parsed (each file's YAML loaded and written back as sorted JSON: comments and layout do not
    count), in that order: two parts of a campaign are scored together only under the same
    rules. `read(path)`: a file's text by its path in the repository (default: this checkout's).
    Raises OSError, or subprocess's and yaml's errors, when a file cannot be read or parsed."""
    paths = [os.path.join(alerting.RULES, n) for n in alerting.RULE_FILES]
    h = hashlib.sha256()
    for path in paths + [alerting.ALERTMANAGER_CONFIG]:
        rel = os.path.relpath(path, B.REPO)
        if read:
            text = read(rel)
        else:
            with open(path) as f:
                text = f.read()
        h.update(json.dumps(yaml.safe_load(text), sort_keys=True).encode())
    return h.hexdigest()


def rehash_old_part(path, part):
    """A part written before RULES_HASH: its rules_sha256 recomputed from the commit it names
    (git show), so that a change of comments alone does not split a campaign. Left as it is
    (and then refused by the comparison) when the commit had uncommitted changes or is gone."""
    meta = part["meta"]
    if meta.get("rules_hash") == RULES_HASH:
        return
    commit = meta.get("commit", "")
    if not commit or "+" in commit:
        return
    try:
        meta["rules_sha256"] = rules_sha256(lambda rel: K.run(
            "git", "-C", B.REPO, "show", "%s:%s" % (commit, rel)).stdout)
    except Exception as e:  # noqa: BLE001 (any failure: the part keeps its byte hash)
        B.note("--merge: %s: cannot read the rules of commit %s again: %s" % (path, commit, e))
        return
    meta["rules_hash"] = RULES_HASH
    B.note("--merge: %s: rules hashed again as parsed, from commit %s" % (path, commit))


def keep_logs(tmp, dest):
    """Copies the fleet's logs (every *.log under `tmp`: Prometheus, Alertmanager, the
    exporters, the API server, unbound; not the TSDB) to folder `dest`, for a trial that
    missed: the temporary folder is deleted at the end of the run. Returns how many files."""
    import shutil
    n = 0
    for root, dirs, files in os.walk(tmp):
        dirs[:] = [d for d in dirs if not d.startswith("tsdb")]
        for name in files:
            if name.endswith(".log"):
                rel = os.path.relpath(os.path.join(root, name), tmp)
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copy2(os.path.join(root, name), os.path.join(dest, rel))
                n += 1
    return n


def write_results(args, meta, trials, phases, final):
    """Scores `trials` and `phases`; writes --json (always, "partial" until `final`) and, when
    `final`, --markdown and the tables and PASS/MISS lines to the log."""
    rows, overall, confusion = C.summarize(trials, phases)
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"meta": meta, "partial": not final, "classes": rows, "overall": overall,
                       "confusion": confusion, "phases": phases, "trials": trials}, f,
                      indent=1, default=str)
        os.replace(tmp, args.json)
    if not final:
        return
    text = markdown(rows, overall, confusion, phases, meta)
    K.log("")
    K.log(text)
    for v in C.verdicts(rows, overall, phases):
        K.log(v)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


def merge(args):
    """--merge: the parts' trials and phases scored as one campaign. Returns the exit code."""
    parts = []
    for path in args.merge:
        try:
            with open(path) as f:
                parts.append((path, json.load(f)))
        except (OSError, ValueError) as e:
            B.note("--merge: %s: %s" % (path, e))
            return 2
    for path, p in parts:
        rehash_old_part(path, p)
    first_path, first = parts[0]
    for path, p in parts[1:]:
        # A part from before --shards ran one Prometheus, from before --discovery the watch.
        diff = [k for k in SAME_FLEET
                if p["meta"].get(k, BEFORE_RECORDED.get(k))
                != first["meta"].get(k, BEFORE_RECORDED.get(k))]
        if diff:
            B.note("--merge: %s differs from %s in %s: not one campaign"
                   % (path, first_path, ", ".join(diff)))
            return 2
    for path, p in parts:
        if p.get("partial"):
            B.note("%s is partial (its run was cut short): its %d trials are kept"
                   % (path, len(p["trials"])))
    meta = dict(first["meta"])
    meta.update({"seed": "+".join(str(p["meta"]["seed"]) for _, p in parts),
                 "minutes": sum(p["meta"]["minutes"] for _, p in parts),
                 "commit": "+".join(sorted({p["meta"]["commit"] for _, p in parts}))})
    write_results(args, meta, [t for _, p in parts for t in p["trials"]],
                  [ph for _, p in parts for ph in p["phases"]], final=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exporter", default=os.path.join(B.REPO, "build", "podnet-exporter"))
    ap.add_argument("--delayline",
                    default=os.path.join(B.REPO, "build", "tests", "podnet-lab-delayline"))
    ap.add_argument("--nodes", type=int, default=24)
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--trials", type=int, default=10, help="per fault class")
    ap.add_argument("--classes", default=",".join(faults.FAULTS))
    ap.add_argument("--phases", default=",".join(C.NO_FAULT_PHASES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quiet", type=float, default=120, help="lab seconds of the quiet phase")
    ap.add_argument("--phase-tail", type=float, default=40)
    ap.add_argument("--detect-timeout", type=float, default=90)
    ap.add_argument("--hold", type=float, default=15)
    ap.add_argument("--settle-timeout", type=float, default=120)
    ap.add_argument("--resolve-timeout", type=float, default=120)
    ap.add_argument("--keep-missed", metavar="DIR", default="/tmp/pg/missed",
                    help="copy the fleet's logs here after each trial whose first notification "
                         "missed or that paged more than twice ('' to keep none)")
    ap.add_argument("--shards", type=int, default=0,
                    help="N >= 2: N Prometheus shards (stage 1 of the rules) and a global one "
                         "federating them (stage 2), as docs/deploy.md's sharded Prometheus; "
                         "0: one Prometheus")
    ap.add_argument("--discovery", choices=F.DISCOVERY, default="watch",
                    help="how the exporters find their peers: watch (the EndpointSlices) or dns "
                         "(the Service's DNS records, peers.kubernetes.discovery: dns)")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    ap.add_argument("--prefix", default="pg%d" % (os.getpid() % 1000))
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="score these parts' --json files as one campaign (no fleet is run)")
    args = ap.parse_args()
    if args.merge:
        return merge(args)
    B.install_signal_handlers()
    try:
        B.require_root()
        missing = F.have_tools("prometheus", "prometheus-alertmanager",
                               *(["unbound-control"] if args.discovery == "dns" else []))
        if missing:
            raise B.BenchBroken("missing tools: %s" % " ".join(missing))
    except B.BenchBroken as e:
        B.note("could not run: %s" % e)
        return 2
    if not 2 <= args.zones <= 8 or not args.zones <= args.nodes <= 200:
        B.note("--zones 2..8 and --nodes from --zones to 200 (got %d, %d)"
               % (args.zones, args.nodes))
        return 2
    classes = [c for c in args.classes.split(",") if c]
    bad = [c for c in classes if c not in faults.FAULTS]
    if bad:
        B.note("unknown fault classes %s (known: %s)" % (bad, ", ".join(faults.FAULTS)))
        return 2
    rng = random.Random(args.seed)
    # The commit whose rules the fleet loads (read now: the run takes long, the tree may move).
    commit = K.run("git", "-C", B.REPO, "rev-parse", "--short", "HEAD", check_rc=False).stdout.strip()
    if K.run("git", "-C", B.REPO, "status", "--porcelain", "--untracked-files=no",
             check_rc=False).stdout.strip():
        commit += "+changes"
    sha = rules_sha256()
    exe, _version, exe_dir = B.exporter_binary(args.exporter)
    tmp = tempfile.mkdtemp(prefix="podnet-pg-")
    t_start = time.time()
    phases = [p for p in args.phases.split(",") if p]
    # Every process of the fleet ends by itself after max_seconds: the longest this campaign
    # can take (each trial at its every timeout, each phase at 10 minutes, the warm-up), so that
    # a long campaign is never cut by its own bound (the fleet's default is 2 hours).
    per_trial = (args.settle_timeout + args.detect_timeout + args.hold + args.resolve_timeout
                 + 180)
    max_seconds = int(900 + len(classes) * args.trials * per_trial + len(phases) * 600)
    try:
        # probes.mtu (off at the deploy default) only for the class that needs it: it is
        # the one extra load, and the other classes are judged on the default probe set.
        with F.Fleet(args.prefix, tmp, exe, args.delayline, nodes=args.nodes,
                     zones=args.zones, mtu="path_mtu_blackhole" in classes,
                     max_seconds=max(7200, max_seconds), shards=args.shards,
                     discovery=args.discovery) as fl:
            fl.wait_ready(timeout=120)
            c = C.Campaign(fl, args, rng)
            # "A day ago" must reach past the fleet's first minute (probes starting, caches
            # cold): with 3 windows only, a quiet phase began with 12 HTTP p99 "regressions"
            # against that minute.
            warm = max(fl.offsets.values()) + 120
            c.progress("fleet ready; warming up %d s (the day-ago comparison needs data)"
                       % warm)
            time.sleep(warm)
            plan = C.plan(classes, args.trials, rng)
            meta = {"nodes": args.nodes, "zones": args.zones, "rule_scale": fl.rule_scale,
                    "probe_scale": fl.probe_scale, "seed": args.seed, "minutes": 0,
                    "shards": fl.shards, "discovery": fl.discovery, "drain_s": F.DRAIN_S,
                    "commit": commit, "rules_sha256": sha, "rules_hash": RULES_HASH}

            def save(final=False):
                meta["minutes"] = (time.time() - t_start) / 60
                write_results(args, meta, c.trials, c.phases, final)
            if "quiet" in phases:
                c.phase("quiet")
                save()
            for i, kind in enumerate(plan, 1):
                c.trial(kind, i, len(plan))
                save()
                t = c.trials[-1]
                if args.keep_missed and (not t.get("top1") or t.get("pages", 0) > 2):
                    dest = os.path.join(args.keep_missed, "seed%s-trial%d-%s"
                                        % (args.seed, i, kind))
                    c.progress("trial %d missed: %d log files kept in %s"
                               % (i, keep_logs(tmp, dest), dest))
            for p in phases:
                if p != "quiet":
                    c.phase(p)
                    save()
            save(final=True)
    except K.Broken as e:
        B.note("could not run: %s" % e)
        K.dump_logs(tmp, 15)
        return 2
    finally:
        K.stop_all()
        if not os.environ.get("PODNET_KEEP_TMP"):
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(exe_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
