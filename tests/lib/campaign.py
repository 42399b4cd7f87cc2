"""One proving-ground campaign's trials, phases and scores (shared by bench/proving_ground.sh
and its short ctest version, tests/lab/lab_fleet_test.py): a fault at a random target
with its truth recorded, held until its first notification (and `hold` s more), cleared, and
scored on the notifications the receiver logged; a no-fault phase scored on the notifications
it brought. Scores:
  top-1      the first notification after the injection names the injected location and no
             other (fleet.subjects: a node, a zone pair, a DNS server, a Service in a zone, DNS
             amplification)
  top-3      one of the first three does
  detection  injection -> first firing notification, in the lab's seconds (x rule_scale: the
             shipped timing the lab's rules stand for)
  pages      notifications per incident (from the injection until every alert resolved) that
             bring a firing alert no earlier one of the incident brought
  false      firing notifications in the no-fault phases, per node-hour of the shipped timing
"""
import collections
import json
import time

import faults as F
import fleet
import labkit as K
from alerting import seconds

# Faults whose alerts compare with "a day ago" (the scaled offsets): the fleet waits until the
# comparison reaches back past the last fault before injecting one of these.
OFFSET_SENSITIVE = {"node_latency", "zone_pair_latency", "dns_slow", "dns_amplification"}
# Classes whose first verdict waits for a slow probe's rounds (shipped seconds, divided by the
# rule scale in the lab): the detection deadline is that much longer for them. Two rounds of
# probes.mtu.interval: the round under way at the injection may end before it matters.
ROUND_BEFORE_VERDICT_S = {"path_mtu_blackhole": 2 * 600}
NO_FAULT_PHASES = ("quiet", "rollout", "churn", "prometheus_restart")
TARGETS = {"top1": 0.95, "top1_class": 0.90, "pages": 2, "false": 0}
# A trial or phase during which the hypervisor took more than this share of the machine's CPU
# (steal, /proc/stat) measured the host, not the rules: the fleet needs nearly all of 2 cores
# at 24 nodes (idle 0-10 % here on 2026-12-06), and a trial of that day under 20-70 % steal had
# scrapes time out and HTTP p99 rise before the fault's own alert. It is kept in the JSON,
# marked void, and left out of the scores; the tables count it.
HOST_STEAL_VOID = 0.10


class Campaign:
    def __init__(self, fl, args, rng):
        self.fl, self.args, self.rng = fl, args, rng
        self.rx = fl.receiver
        self.trials = []
        self.phases = []
        self.last_clear = 0.0
        self.before = set()  # alerts firing when the current trial began
        self.t_start = time.time()

    def progress(self, msg):
        el = time.time() - self.t_start
        K.log("[%5.0f s] %s" % (el, msg))

    # ---- waiting -------------------------------------------------------------------------
    def quiet_now(self):
        """No podnet alert firing in Prometheus (a pending one may be noise that never fires;
        if it fires during the next trial, that trial counts it)."""
        return not [a for a in self.fl.promql('ALERTS{alertstate="firing"}')
                    if a["metric"].get("alertname", "").startswith("Podnet")]

    def settle(self, timeout):
        """Waits (bounded) until nothing fires; returns the seconds waited, or None if it
        timed out (the trial after it is still run, and marked)."""
        t0 = time.time()
        try:
            K.wait_for(self.quiet_now, timeout, "no alert firing", step=1)
            return time.time() - t0
        except K.Broken:
            return None

    def window(self):
        return max(1, 300 // self.fl.rule_scale)

    # ---- one fault -----------------------------------------------------------------------
    def trial(self, kind, index, total):
        fl = self.fl
        settled = self.settle(self.args.settle_timeout)
        if kind in OFFSET_SENSITIVE:
            gap = max(fl.offsets.values()) + 2 * self.window()
            wait = self.last_clear + gap - time.time()
            if wait > 0:
                time.sleep(wait)
        target = F.draw_target(fl, kind, self.rng)
        # Alerts still firing from before (a settle that timed out) are not this fault's pages.
        self.before = {json.dumps({k: v for k, v in a.items()
                                   if k not in ("__name__", "alertstate")}, sort_keys=True)
                       for a in fl.firing()}
        t0 = time.time()
        cpu0 = K.cpu_times()
        fault = fl.inject(kind, target, **({"rng": self.rng} if "rng" in
                                            F.FAULTS[kind].__code__.co_varnames else {}))
        detect_deadline = (t0 + self.args.detect_timeout
                           + ROUND_BEFORE_VERDICT_S.get(kind, 0) / fl.rule_scale)
        first_right = None
        while time.time() < detect_deadline:
            got = [e for e in self.rx.since(t0) if e.get("status") == "firing"]
            right = [e for e in got if F.names(e.get("labels", {}), fault.truth)]
            if right:
                first_right = right[0]["received"]
                break
            time.sleep(0.5)
        # Keep the fault on a while after its first notification, as a real incident stays
        # until someone acts: the follow-up notifications (other groups, group_interval) land.
        hold_until = (first_right or time.time()) + self.args.hold
        while time.time() < hold_until:
            time.sleep(0.5)
        t_clear = time.time()
        fault.clear()
        self.last_clear = time.time()
        resolved = self.settle(self.args.resolve_timeout)
        t_end = time.time()
        # Alertmanager sends the resolved notifications group_interval after the alert clears.
        time.sleep(max(1.0, self._group_interval_s()))
        rec = self.score(kind, fault, t0, t_clear, time.time(), first_right)
        steal = K.steal_share(cpu0, K.cpu_times())
        rec.update({"target": str(getattr(target, "name", target)), "settled_before_s": settled,
                    "resolved_after_s": None if resolved is None else t_end - t_clear,
                    "host_steal": steal, "void": steal > HOST_STEAL_VOID})
        self.trials.append(rec)
        self.progress("trial %d/%d %-19s %-22s first=%-30s %s top1=%s pages=%d steal=%.0f%%%s%s"
                      % (index, total, kind, rec["truth"], rec["first_alert"] or "-",
                         "+%.1fs" % rec["detect_s"] if rec["detect_s"] is not None else "",
                         "yes" if rec["top1"] else "NO", rec["pages"], 100 * steal,
                         " VOID" if rec["void"] else "",
                         " (" + fault.detail + ")" if fault.detail else ""))

    def _group_interval_s(self):
        route = self.fl.am_shipped.get("route", {})
        return seconds(route.get("group_interval", "5m")) / self.fl.am_scale

    def notifications(self, t0, t1):
        """Receiver entries in [t0, t1) grouped by notification: a list of (received, alerts),
        oldest first, with alerts a list of entries."""
        by = collections.OrderedDict()
        for e in self.rx.since(t0, t1):
            by.setdefault(e.get("notification"), []).append(e)
        return [(alerts[0]["received"], alerts) for alerts in by.values()]

    def score(self, kind, fault, t0, t_clear, t1, first_right):
        firing = self.pages(t0, t1)
        first = firing[0] if firing else None
        named = set().union(*(F.subjects(a["labels"]) for a in first[1])) if first else set()
        top1 = named == {tuple(fault.truth)}
        top3 = any(any(F.names(a["labels"], fault.truth) for a in alerts)
                   for _, alerts in firing[:3])
        return {
            "kind": kind, "truth": "/".join(fault.truth), "detail": fault.detail,
            "t0": t0, "t_clear": t_clear, "t_end": t1,
            "first_alert": first[1][0]["alertname"] if first else None,
            "first_labels": first[1][0]["labels"] if first else None,
            "first_names": sorted("/".join(n) for n in named),
            "detect_s": first[0] - t0 if first else None,
            "detect_right_s": first_right - t0 if first_right else None,
            "top1": top1, "top3": top3, "pages": len(firing),
            "alerts": sorted({a["alertname"] for _, alerts in firing for a in alerts}),
            "notifications": [{"after_s": round(t - t0, 1),
                               "alerts": [_brief(a["labels"]) for a in alerts]}
                              for t, alerts in firing],
        }

    def pages(self, t0, t1):
        """The notifications in [t0, t1) that page: those with a firing alert that no earlier
        one of the window carried (a group's update that only resolves, or repeats, does not).
        A list of (received, [its new firing alerts]), oldest first."""
        seen = set(getattr(self, "before", ()))
        out = []
        for t, alerts in self.notifications(t0, t1):
            new = []
            for a in alerts:
                key = json.dumps(a.get("labels", {}), sort_keys=True)
                if a.get("status") == "firing" and key not in seen:
                    seen.add(key)
                    new.append(a)
            if new:
                out.append((t, new))
        return out

    # ---- no-fault phases -----------------------------------------------------------------
    def phase(self, name):
        fl = self.fl
        self.settle(self.args.settle_timeout)
        self.before = set()
        self.progress("phase %s begins" % name)
        t0 = time.time()
        cpu0 = K.cpu_times()
        detail = ""
        if name in ("rollout", "churn"):
            resets_before = fl.responder_resets()
        if name == "quiet":
            time.sleep(self.args.quiet)
        elif name == "rollout":
            peers_before = peer_values(fl, t0)
            for n in fl.live():
                fl.restart_exporter(n)
            detail = "%d Pods replaced one at a time" % len(fl.live())
        elif name == "churn":
            gone = self.rng.sample(fl.live(), max(1, len(fl.live()) // 8))
            for n in gone:
                fl.leave(n)
            time.sleep(self.args.quiet / 2)
            for n in gone:
                fl.join(n)
            detail = "%s left, then joined again" % ", ".join(n.name for n in gone)
        elif name == "prometheus_restart":
            fl.restart_prometheus()
            detail = "Prometheus stopped and started on its TSDB"
        # Anything the phase set off has its windows and `for:` to fire in.
        time.sleep(self.args.phase_tail)
        t1 = time.time()
        firing = self.pages(t0, t1)
        hours = (t1 - t0) / 3600.0 * fl.rule_scale  # the shipped timing's hours
        steal = K.steal_share(cpu0, K.cpu_times())
        rec = {"phase": name, "detail": detail, "t0": t0, "t1": t1, "lab_s": t1 - t0,
               "host_steal": steal, "void": steal > HOST_STEAL_VOID,
               "node_hours": len(fl.live()) * hours,
               "false_notifications": len(firing),
               "alerts": sorted({a["alertname"] for _, alerts in firing for a in alerts}),
               "examples": [_brief(a["labels"]) for _, alerts in firing[:5] for a in alerts[:3]]}
        if name in ("rollout", "churn"):
            # What the peers saw: no HTTP or gRPC probe refused by a stopping Pod (its drain
            # answers until its peers have dropped it; a node that leaves has no drain), and in
            # a rollout the RTT requests sent and lost as Prometheus has them, and no `peer`
            # value that was not there before (peers are named after their nodes). The RTT
            # probe here is ICMP, which the node's kernel answers whatever the Pod does: its
            # loss can show a network fault, not a Pod's stop.
            resets = {kind: {w: v - resets_before[kind][w] for w, v in by_port.items()}
                      for kind, by_port in fl.responder_resets().items()}
            refused = resets["refused"]
            rec.update({"refused_probes": sum(refused.values()), "refused_by_port": refused,
                        "other_resets": resets["other"],
                        "probe_errors": probe_errors(fl, t0, t1)})
            detail += "; probes refused: %s (other resets %s)" % (refused, resets["other"])
            if getattr(fl, "discovery", "watch") == "dns":
                # DNS discovery's questions by result (nxdomain, timeout, ...: answers missed)
                rec["discovery_dns_queries"] = {k[0]: v for k, v in sorted(exact_increase(
                    fl, "podnet_discovery_dns_queries_total", t0, t1, by=("result",),
                    grace_scrapes=2).items()) if v}
                detail += "; DNS discovery's questions %s" % rec["discovery_dns_queries"]
        if name == "rollout":
            sent, lost = rtt_sent_lost(fl, t0, t1)
            rec.update({"rtt_sent": sent, "rtt_lost": lost,
                        "new_peer_values": sorted(peer_values(fl, t1, t1 - t0) - peers_before)})
            detail += ("; RTT: %d sent, %d lost; new peer values: %s"
                       % (sent, lost, rec["new_peer_values"] or "none"))
        if name in ("rollout", "churn"):
            detail += "; probe errors: %s" % (rec["probe_errors"] or "none")
        self.phases.append(rec)
        self.progress("phase %-18s %5.0f s, %d false notifications %s steal=%.0f%%%s %s"
                      % (name, t1 - t0, len(firing), rec["alerts"], 100 * steal,
                         " VOID" if rec["void"] else "", detail))


def exact_increase(fl, metric, t0, t1, by=None, grace_scrapes=0):
    """The increase of counter `metric` from t0 to t1, summed over its series (or, with `by` a
    label name tuple, a dict from those labels' values to the sum of their series), from the raw
    samples Prometheus holds (not increase(), which extrapolates to the window's edges): from
    each series' last sample at or before t0, every rise added, a fall read as a reset (the value
    after it counts from 0). A series first scraped after t0 counts from 0 (a new Pod's, or a
    peer's added again), unless its first sample is within `grace_scrapes` scrapes of t0: then
    that sample is its start. For a counter made at its first event (an error's), which may have
    counted before t0 and been scraped after (seen: a gRPC round failing 7 s before a rollout,
    after the zone cut before it, counted in the rollout): probe_errors passes 2. Not for the
    RTT counters, which move when a train settles, sent and received together, so that the two
    increases of one window compare exactly: a grace there made a loss of -20 (lab_fleet, a
    received series first scraped one scrape after its sent series, which the grace had
    started from its first train, counted that train as received only)."""
    res = fl.promql("%s[%ds]" % (metric, int(t1 - t0) + 60), at=t1)
    sums = {}
    for r in res:
        key = tuple(r["metric"].get(label, "") for label in by or ())
        prev = 0.0
        for i, (t, v) in enumerate((float(t), float(v)) for t, v in r["values"]):
            if t <= t0 or (i == 0 and t <= t0 + grace_scrapes * fleet.SCRAPE_S):
                prev = v
                continue
            sums[key] = sums.get(key, 0.0) + (v - prev if v >= prev else v)
            prev = v
    return sums if by is not None else sums.get((), 0.0)


def _cumulative(values, t0):
    """A counter's raw samples [(t, v)] as its increase so far at each sample: from 0 at the
    sample at or before t0 that starts the range (a series first scraped after t0 counts from 0,
    its first value included), every rise added, a fall read as a reset."""
    out, total, prev = [], 0.0, None
    for t, v in ((float(t), float(v)) for t, v in values):
        if prev is None:
            total = 0.0 if t <= t0 else v
        else:
            total += v - prev if v >= prev else v
        prev = v
        out.append((t, total))
    return out


def rtt_sent_lost(fl, t0, t1):
    """The RTT echo requests the probers sent from t0 to t1, and how many of them were lost,
    from Prometheus' raw samples. Loss per series is the rise of sent − received (sent and
    received, increased when a train settles, compared scrape by scrape), each end the median of
    the last three scrapes at or before it: a scrape can read a train's received counter before
    it settles and its sent counter after (the exposition reads the families one after the
    other, `received` before `sent`), which alone read as ±1 train at that end (lab_fleet saw
    "-20 lost"); the median drops such a scrape. Returns (sent, lost)."""
    window = "[%ds]" % (int(t1 - t0) + 60)

    def curves(metric):
        out = {}
        for r in fl.promql(metric + window, at=t1):
            key = tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__"))
            out[key] = _cumulative(r["values"], t0)
        return out

    def at_or_before(points, t, n):
        got = [v for ts, v in points if ts <= t][-n:]
        return sorted(got)[len(got) // 2] if got else 0.0

    sent, received = (curves("podnet_rtt_packets_sent_total"),
                      curves("podnet_rtt_packets_received_total"))
    total_sent = total_lost = 0.0
    for key, s_points in sent.items():
        r_by_t = dict(received.get(key, []))
        lost_points = [(t, v - r_by_t.get(t, 0.0)) for t, v in s_points]
        total_sent += at_or_before(s_points, t1, 1) - at_or_before(s_points, t0, 1)
        total_lost += at_or_before(lost_points, t1, 3) - at_or_before(lost_points, t0, 3)
    return total_sent, total_lost


def peer_values(fl, at, window=60):
    """The `peer` values of the RTT series scraped in the `window` s before `at`."""
    got = fl.promql("count by (peer) (count_over_time(podnet_rtt_packets_sent_total[%ds]))"
                    % max(int(window), 10), at=at)
    return {r["metric"].get("peer", "") for r in got}


def probe_errors(fl, t0, t1):
    """The probe errors counted from t0 to t1, by probe and reason ("rtt/timeout": n)."""
    got = exact_increase(fl, "podnet_probe_errors_total", t0, t1, by=("probe", "reason"),
                         grace_scrapes=2)
    return {"%s/%s" % key: n for key, n in sorted(got.items()) if n}


def plan(classes, trials, rng):
    """The trials' order: `trials` of each class, shuffled, with the OFFSET_SENSITIVE ones
    spread evenly among the rest (each of those waits until the "day ago" comparison reaches
    past the last fault; a trial of another class before it fills most of that wait)."""
    sensitive = [k for k in classes if k in OFFSET_SENSITIVE for _ in range(trials)]
    other = [k for k in classes if k not in OFFSET_SENSITIVE for _ in range(trials)]
    rng.shuffle(sensitive)
    rng.shuffle(other)
    # sensitive trial j goes after the first round((j + 1) * O / (S + 1)) other ones
    after = [round((j + 1) * len(other) / (len(sensitive) + 1)) for j in range(len(sensitive))]
    out = []
    for i in range(len(other) + 1):
        out += [sensitive[j] for j in range(len(sensitive)) if after[j] == i]
        if i < len(other):
            out.append(other[i])
    return out


def _brief(labels):
    """An alert as one line: its name and the labels that say where."""
    keep = ("node", "peer_node", "source_node", "source_zone", "peer_zone", "server", "service",
            "name")
    return "%s{%s}" % (labels.get("alertname", ""), ",".join(
        "%s=%s" % (k, labels[k]) for k in keep if labels.get(k)))


def summarize(trials, phases):
    """The scores of the trials and phases that are not void (HOST_STEAL_VOID), per fault class
    and overall, and the confusion matrix; each row and `overall` count the void ones."""
    by = collections.OrderedDict()
    for t in trials:
        by.setdefault(t["kind"], []).append(t)
    rows = []
    for kind, every in by.items():
        ts = [t for t in every if not t.get("void")]
        det = sorted(t["detect_s"] for t in ts if t["detect_s"] is not None)
        pages = sorted(t["pages"] for t in ts)
        rows.append({
            "kind": kind, "trials": len(ts), "void": len(every) - len(ts),
            "top1": sum(t["top1"] for t in ts) / len(ts) if ts else None,
            "top3": sum(t["top3"] for t in ts) / len(ts) if ts else None,
            "detect_median_s": det[len(det) // 2] if det else None,
            "detect_max_s": det[-1] if det else None,
            "missed": sum(1 for t in ts if t["detect_s"] is None),
            "pages_max": pages[-1] if pages else None,
            "pages_median": pages[len(pages) // 2] if pages else None,
        })
    valid = [t for t in trials if not t.get("void")]
    n = len(valid)
    overall = {"trials": n, "void": len(trials) - n,
               "top1": sum(t["top1"] for t in valid) / n if n else None,
               "top3": sum(t["top3"] for t in valid) / n if n else None,
               "pages_max": max((t["pages"] for t in valid), default=None)}
    judged = [p for p in phases if not p.get("void")]
    node_hours = sum(p["node_hours"] for p in judged)
    false = sum(p["false_notifications"] for p in judged)
    overall["false_per_node_hour"] = false / node_hours if node_hours else None
    overall["false_notifications"] = false
    confusion = collections.OrderedDict()
    for t in valid:
        row = confusion.setdefault(t["kind"], collections.Counter())
        row[t["first_alert"] or "(none)"] += 1
    return rows, overall, confusion


def verdicts(rows, overall, phases):
    lines = []

    def line(ok, what):
        lines.append("%s %s" % ("PASS" if ok else "MISS", what))
    if overall["trials"]:
        line(overall["top1"] >= TARGETS["top1"], "top-1 overall %.0f %% (target >= 95 %%)"
             % (100 * overall["top1"]))
        for r in rows:
            if r["trials"]:
                line(r["top1"] >= TARGETS["top1_class"], "top-1 %s %.0f %% (target >= 90 %%)"
                     % (r["kind"], 100 * r["top1"]))
        line(overall["pages_max"] <= TARGETS["pages"], "at most %d notifications per incident "
             "(max %d)" % (TARGETS["pages"], overall["pages_max"]))
    for p in phases:
        if not p.get("void"):
            line(p["false_notifications"] == 0, "no-fault phase %s: %d false notifications"
                 % (p["phase"], p["false_notifications"]))
    void = overall.get("void", 0) + sum(1 for p in phases if p.get("void"))
    if void:
        lines.append("VOID %d trials or phases: the host took more than %.0f %% of the CPU "
                     "(steal) during them; not scored" % (void, 100 * HOST_STEAL_VOID))
    return lines
