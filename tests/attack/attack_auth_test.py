#!/usr/bin/env python3
"""Attack: a basic-auth flood (issue 21, kind 3). One real exporter on loopback with
basic_auth_users (a real bcrypt hash, cost 10); the right user scrapes /metrics every 20 ms
while, for FLOOD_SECONDS, 20 clients from 5 loopback sources (127.0.0.2-6, 4 each) send
wrong passwords over keep-alive connections, each at most 20 requests a second (a process per
source, so that the scraper's timing never waits for the flood's interpreter lock): 10 of them
repeat one wrong password each, 10 send a new one every time (half of those for a user that
does not exist). Before the flood the same scrapes run for QUIET_SECONDS: the quiet figures,
measured side by side in the same run.

Asserted:
  - every scrape of the right user is answered 200, quiet and under the flood;
  - its p95 under the flood is within MAX_P95_RATIO of quiet's, or P95_FLOOR_S (the issue's
    target is 2× at p99, printed; measured 1.1-2.0×; the bound leaves room for a busy 2-core
    machine, and the code before the fix was at ~600×, 4.6 s: every wrong password was a bcrypt
    on the loop that builds /metrics, which delayed every scrape). The p95, not the p99: of
    ~200 scrapes the p99 is the second slowest, which one stall of a shared host sets (272 ms
    against a quiet 31 ms here beside a busy neighbour; CI failed so once);
  - POST /-/reload under the flood answers within RELOAD_BOUND_S (it took ~2 s before);
  - bcrypt checks are bounded: podnet_web_auth_failures_total{reason="wrong_credentials"} (one
    per bcrypt that failed) at most the burst (8) and 2 a second of the flood, and the other
    refusals are counted by reason (known_wrong, source_limited or rate_limited);
  - a new user's first scrape from a quiet source (a Prometheus server that comes mid-flood)
    is checked and answered 200 within 3 tries.
Only ever aimed at 127.0.0.0/8; every loop bounded in time. Usage:
attack_auth_test.py --exporter BIN
"""
import argparse
import base64
import http.client
import multiprocessing
import os
import random
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit  # noqa: E402  (check, summary, parse_metrics, start_exporter, percentile)

QUIET_SECONDS = 8
FLOOD_SECONDS = 12
SCRAPE_EVERY_S = 0.02
FLOOD_CLIENTS = 20
FLOOD_SOURCES = ["127.0.0.%d" % i for i in range(2, 7)]
FLOOD_MAX_PER_S = 20
MAX_P95_RATIO = 8.0
P95_FLOOR_S = 0.025  # below this, a busy 2-core machine's scheduling noise, not the flood
RELOAD_BOUND_S = 1.0
# `htpasswd -nbBC 10 alice 'correct horse'` (Apache's own bcrypt, not libxcrypt), and
# "b0b:pw" at cost 5: the same hashes as the unit tests (tests/unit/web/auth_gate_test.cc).
ALICE = ("alice", "correct horse", "$2y$10$yvLRgfwHg35RmbzkbRjNJ.AHEv4ag.i6QwjkFMuX4mAlKidQ/ko4S")
BOB = ("bob", "b0b:pw", "$2y$05$GtTXuTJPT8t4APeW9E.kD.D4QMfuKdaOOjU0oUYLRTr7ntD9culky")


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


class Client:
    """One keep-alive HTTP/1.1 connection from `source`, reopened when the server closes it."""

    def __init__(self, port, source="127.0.0.1"):
        self.port, self.source, self.conn = port, source, None

    def request(self, method, path, auth=None, timeout=10):
        """(status, seconds) of one request; status 0 when the connection failed."""
        headers = {"Authorization": auth} if auth else {}
        t0 = time.monotonic()
        for attempt in range(2):  # once more on a fresh connection if the kept one was closed
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout,
                                                           source_address=(self.source, 0))
                self.conn.request(method, path, headers=headers)
                r = self.conn.getresponse()
                r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status, time.monotonic() - t0
            except (OSError, http.client.HTTPException):
                self.close()
        return 0, time.monotonic() - t0

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def flood(port, index, stop, counts):
    """One wrong-password client until `stop`, its answers counted by status into its own
    dict `counts`: a fixed wrong pair for even `index`, a new pair each request for odd (for a
    user that does not exist every other time)."""
    c = Client(port, FLOOD_SOURCES[index % len(FLOOD_SOURCES)])
    rng = random.Random(index)
    fixed = basic("alice", "wrong-%d" % index)
    n = 0
    while not stop.is_set():
        if index % 2 == 0:
            auth = fixed
        else:
            user = "alice" if n % 2 == 0 else "mallory%d" % index
            auth = basic(user, "guess-%d-%d" % (index, rng.getrandbits(48)))
        status, took = c.request("GET", "/metrics", auth)
        counts[status] = counts.get(status, 0) + 1
        n += 1
        stop.wait(max(0.0, 1.0 / FLOOD_MAX_PER_S - took))
    c.close()


def flood_process(port, indexes, stop, results):
    """The flood clients `indexes`, each on a thread of this process (a process of its own, so
    that the scraper's timing does not wait for this one's interpreter lock); puts their
    answers by status into `results` when `stop` is set."""
    counts = [{} for _ in indexes]
    threads = [threading.Thread(target=flood, args=(port, i, stop, counts[k]))
               for k, i in enumerate(indexes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = {}
    for c in counts:
        for code, n in c.items():
            total[code] = total.get(code, 0) + n
    results.put(total)


def scrape_for(c, seconds, statuses):
    """Latencies (s) of the right user's scrapes every SCRAPE_EVERY_S for `seconds`."""
    out = []
    auth = basic(ALICE[0], ALICE[1])
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        status, took = c.request("GET", "/metrics", auth)
        statuses[status] = statuses.get(status, 0) + 1
        out.append(took)
        time.sleep(max(0.0, SCRAPE_EVERY_S - took))
    return out


def reloads(c, n):
    """Durations (s) and statuses of `n` POST /-/reload, 1.1 s apart (one reload a second)."""
    out = []
    auth = basic(ALICE[0], ALICE[1])
    for _ in range(n):
        status, took = c.request("POST", "/-/reload", auth)
        out.append((status, took))
        time.sleep(1.1)
    return out


def auth_counts(port):
    """(status, {reason: podnet_web_auth_failures_total}) read by the right user."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics", headers={"Authorization": basic(ALICE[0], ALICE[1])})
    r = conn.getresponse()
    text = r.read().decode()
    conn.close()
    out = {}
    for name, labels, value in labkit.parse_metrics(text):
        if name == "podnet_web_auth_failures_total":
            out[labels.get("reason", "")] = value
    return r.status, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="podnet-attack-auth-")
    web = os.path.join(tmp, "web.yml")
    with open(web, "w") as f:
        f.write("basic_auth_users:\n  %s: %s\n  %s: %s\n" % (ALICE[0], ALICE[2], BOB[0], BOB[2]))
    try:
        _, port = labkit.start_exporter(
            args.exporter, tmp, "listen_address: \"127.0.0.1:{port}\"\n"
            "self: { name: attack-auth, node: n }\n", ["--web.config.file=" + web])
        right = Client(port)
        first = right.request("GET", "/metrics", basic(ALICE[0], ALICE[1]))
        labkit.check(first[0] == 200, "the right user's first scrape: %d in %.0f ms (one bcrypt)"
                     % (first[0], first[1] * 1e3))

        quiet_status = {}
        quiet = scrape_for(right, QUIET_SECONDS - 3.3, quiet_status)
        quiet_reload = reloads(right, 3)

        # One process per source, its 4 clients on threads of it.
        mp = multiprocessing.get_context("fork")
        stop, results = mp.Event(), mp.Queue()
        procs = [mp.Process(target=flood_process, daemon=True,
                            args=(port, range(s, FLOOD_CLIENTS, len(FLOOD_SOURCES)), stop,
                                  results)) for s in range(len(FLOOD_SOURCES))]
        t_flood = time.monotonic()
        for f in procs:
            f.start()
        time.sleep(1.0)  # the flood under way
        flood_status = {}
        loaded = scrape_for(right, FLOOD_SECONDS - 6.5, flood_status)
        flood_reload = reloads(right, 3)
        newcomer = Client(port, "127.0.0.9")
        tries = []
        for _ in range(3):
            tries.append(newcomer.request("GET", "/metrics", basic(BOB[0], BOB[1]))[0])
            if tries[-1] == 200:
                break
            time.sleep(1.0)
        stop.set()
        counts = {}
        for _ in procs:
            for code, n in results.get(timeout=15).items():
                counts[code] = counts.get(code, 0) + n
        for f in procs:
            f.join(timeout=10)
        flood_took = time.monotonic() - t_flood
        status, reasons = auth_counts(port)

        q50, q99 = labkit.percentile(quiet, 50), labkit.percentile(quiet, 99)
        l50, l99 = labkit.percentile(loaded, 50), labkit.percentile(loaded, 99)
        labkit.log("right user's /metrics, quiet: n=%d p50 %.1f ms p99 %.1f ms; under the flood: "
                   "n=%d p50 %.1f ms p99 %.1f ms (p99 %.2fx quiet; target 2x: %s)"
                   % (len(quiet), q50 * 1e3, q99 * 1e3, len(loaded), l50 * 1e3, l99 * 1e3,
                      l99 / q99, "met" if l99 <= 2 * q99 else "not met"))
        labkit.log("POST /-/reload quiet: %s; under the flood: %s" % (
            ", ".join("%d %.0f ms" % (s, t * 1e3) for s, t in quiet_reload),
            ", ".join("%d %.0f ms" % (s, t * 1e3) for s, t in flood_reload)))
        labkit.log("flood: %d requests in %.1f s, by status %s; refusals by reason %s"
                   % (sum(counts.values()), flood_took, dict(sorted(counts.items())),
                      dict(sorted(reasons.items()))))
        labkit.check(quiet_status == {200: len(quiet)} and flood_status == {200: len(loaded)},
                     "every scrape of the right user answered 200 (quiet %s, flood %s)"
                     % (quiet_status, flood_status))
        q95, l95 = labkit.percentile(quiet, 95), labkit.percentile(loaded, 95)
        labkit.check(l95 <= max(MAX_P95_RATIO * q95, P95_FLOOR_S),
                     "p95 under the flood within %.0fx of quiet or %.0f ms (%.1f ms vs %.1f ms)"
                     % (MAX_P95_RATIO, P95_FLOOR_S * 1e3, l95 * 1e3, q95 * 1e3))
        labkit.check(all(s == 200 and t <= RELOAD_BOUND_S for s, t in flood_reload),
                     "POST /-/reload under the flood: 200 within %.1f s each" % RELOAD_BOUND_S)
        checks = reasons.get("wrong_credentials", 0)
        labkit.check(status == 200 and 0 < checks <= 8 + 2 * flood_took + 2,
                     "bcrypt checks of wrong pairs bounded: %d <= 8 + 2/s x %.1f s"
                     % (checks, flood_took))
        labkit.check(reasons.get("known_wrong", 0) > 0,
                     "repeated wrong pairs refused from the cache (known_wrong %d)"
                     % reasons.get("known_wrong", 0))
        limited = reasons.get("source_limited", 0) + reasons.get("rate_limited", 0)
        labkit.check(0 < counts.get(429, 0) <= limited,
                     "new pairs over the budget answered 429 without a bcrypt and counted "
                     "(%d 429s, source_limited + rate_limited %d)" % (counts.get(429, 0), limited))
        labkit.check(200 in tries, "a new user's first scrape from a quiet source mid-flood: %s"
                     % tries)
    finally:
        labkit.stop_all()
    return labkit.exit_code()


if __name__ == "__main__":
    sys.exit(main())
