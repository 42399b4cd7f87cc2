#!/usr/bin/env python3
"""Attack: hostile clients of the burst responder (iperf3-compatible, TCP) that take its test
slots and stall, while a legitimate client keeps testing. Issue 21, kind 2.

One exporter on loopback (responders.burst with its defaults: max_clients 2, max_duration 10s,
max_streams 16). The legitimate client, from 127.0.0.1, runs a test of 1 s, then rests 3.2 s
(longer than the responder's 3 s cooldown: a client that tests back to back waits behind those
that have not just tested), alternating a stock `iperf3 -c` and the exporter's own engine
(`podnet-burst client`, with --burst); a test counts when it completes. Phases:
  1. baseline: 2 tests, no attack;
  2. one source (127.0.0.2): 5 attackers, one stalling at each step of the protocol: before the
     cookie (36 of its 37 bytes), after the cookie (no parameters), after the parameters (no
     streams), after CREATE_STREAMS (streams connected, no data), trickling data (1 byte/s); each
     starts again as soon as its connection is closed; 4 tests;
  3. 32 sources (127.0.1.1-32): one attacker each, cycling through the same five stalls; 4
     tests.
  4. strangers: a second exporter with the default `clients: probe_pods` and one static peer,
     127.0.0.1 (the legitimate client): the 32 attackers of phase 3 are closed as they connect
     (reason not_probe_pod, no other), its 4 tests complete, and a stock `iperf3 -c` bound to
     127.0.0.5 is turned away.
Phases 1-3 run with `clients: any`: what sources that share a probe Pod's address (a SNAT, a
reused Pod IP) or any client, with `any`, can do.
Every attacker is a bounded loop (it stops with its phase, each connection held at most 20 s).
Printed: per phase the tests that completed and their wall time, and the refusals by reason
(podnet_responder_dropped_total{responder="burst"}). Asserted: every test of every phase
completes. Before the fix (held 5 s after the cookie or the parameters, 15 s after
CREATE_STREAMS, slots taken again at once) the attacked phases completed 0 of 4.

Only ever aimed at 127.0.0.0/8, no root needed; ~65 s.
Usage: attack_burst_test.py --exporter BIN [--burst PODNET_BURST] [--iperf3 iperf3]
"""
import argparse
import json
import os
import random
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "lib")]
import labkit  # noqa: E402  (check, summary, log, parse_metrics, free_port, start_exporter)

STEPS = ("before_cookie", "after_cookie", "after_params", "after_streams", "trickle")
PARAM_EXCHANGE, CREATE_STREAMS, TEST_START, TEST_RUNNING = 9, 10, 1, 2
HOLD_S = 20  # the most an attacker holds one connection (the responder should close it first)
REST_S = 3.2  # the legitimate client's rest between tests
TESTS = 4


def cookie():
    alphabet = "abcdefghijklmnopqrstuvwxyz234567"
    return ("".join(random.choice(alphabet) for _ in range(36)) + "\0").encode()


def connect(source, port):
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def read_state(s):
    """One state byte (signed), or None when the connection closed or nothing came in 5 s (the
    responder may keep a client waiting in line for a slot up to 3 s)."""
    try:
        b = s.recv(1)
    except OSError:
        return None
    return struct.unpack("b", b)[0] if b else None


def hold(socks, stop, trickle=None):
    """Holds `socks` until the responder closes one, `stop` is set or HOLD_S passed; with
    `trickle`, sends one byte a second on it."""
    deadline = time.time() + HOLD_S
    next_byte = time.time() + 1
    while not stop.is_set() and time.time() < deadline:
        ready, _, _ = select.select(socks, [], [], 0.2)
        for s in ready:
            try:
                if not s.recv(4096):
                    return
            except OSError:
                return
        if trickle is not None and time.time() >= next_byte:
            try:
                trickle.send(b"x")
            except OSError:
                return
            next_byte += 1


def attack_once(step, source, port, stop):
    """One connection (and its stream) that goes as far as `step`, then stalls there."""
    socks = []
    try:
        c = connect(source, port)
        socks.append(c)
        if step == "before_cookie":
            c.sendall(b"a" * 36)
            return hold(socks, stop)
        k = cookie()
        c.sendall(k)
        if read_state(c) != PARAM_EXCHANGE:
            return  # refused (busy, penalty) or closed
        if step == "after_cookie":
            return hold(socks, stop)
        params = json.dumps({"tcp": True, "omit": 0, "time": 10, "parallel": 1, "len": 131072,
                             "client_version": "3.12"}).encode()
        c.sendall(struct.pack(">I", len(params)) + params)
        if read_state(c) != CREATE_STREAMS:
            return
        if step == "after_params":
            return hold(socks, stop)
        d = connect(source, port)
        socks.append(d)
        d.sendall(k)
        if read_state(c) != TEST_START or read_state(c) != TEST_RUNNING:
            return
        return hold(socks, stop, trickle=d if step == "trickle" else None)
    except OSError:
        return
    finally:
        for s in socks:
            s.close()


def attacker(steps, source, port, stop):
    """Stalls at each of `steps` in turn, from `source`, until `stop`; bounded: every attempt
    ends by HOLD_S, and at most 1,000 attempts."""
    for i in range(1000):
        if stop.is_set():
            return
        attack_once(steps[i % len(steps)], source, port, stop)
        stop.wait(0.05)


def legit_test(i, port, args):
    """One test of 1 s from 127.0.0.1: (ok, what, seconds)."""
    t0 = time.time()
    if args.burst and i % 2 == 1:
        r = subprocess.run([args.burst, "client", "127.0.0.1", "--port", str(port), "--time",
                            "1"], capture_output=True, text=True, timeout=30)
        try:
            err = json.loads(r.stdout)["error"]
        except (ValueError, KeyError):
            err = "no result: " + (r.stdout + r.stderr).strip()[-200:]
        return err == "", "podnet-burst: " + (err or "ok"), time.time() - t0
    r = subprocess.run([args.iperf3, "-c", "127.0.0.1", "-p", str(port), "-t", "1",
                        "--connect-timeout", "3000"], capture_output=True, text=True, timeout=30)
    ok = r.returncode == 0 and "receiver" in r.stdout
    what = "ok" if ok else (r.stdout + r.stderr).strip().splitlines()[-1:]
    return ok, "iperf3: %s" % what, time.time() - t0


def dropped(base):
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return {labels["reason"]: v for name, labels, v in labkit.parse_metrics(text)
            if name == "podnet_responder_dropped_total" and labels.get("responder") == "burst"}


def phase(name, attackers, port, base, args):
    """Runs TESTS legitimate tests (2 for the baseline) beside `attackers` [(steps, source)]:
    (completed, tests, seconds per test, refusals by reason during the phase)."""
    before = dropped(base)
    stop = threading.Event()
    threads = [threading.Thread(target=attacker, args=(steps, src, port, stop), daemon=True)
               for steps, src in attackers]
    for t in threads:
        t.start()
    if attackers:
        time.sleep(1.0)  # the attackers hold the slots first
    n = TESTS if attackers else 2
    done, times, whats = 0, [], []
    for i in range(n):
        ok, what, secs = legit_test(i, port, args)
        done += ok
        times.append(secs)
        whats.append(what)
        if attackers or i < n - 1:  # the next phase's attackers need no rested client
            time.sleep(REST_S)
    stop.set()
    for t in threads:
        t.join(timeout=HOLD_S + 10)
    after = dropped(base)
    delta = {k: int(after.get(k, 0) - before.get(k, 0)) for k in after
             if after.get(k, 0) != before.get(k, 0)}
    labkit.log("%-12s %d of %d tests completed; wall time per test %s s; refused: %s" % (
        name, done, n, " ".join("%.1f" % t for t in times),
        ", ".join("%s %d" % kv for kv in sorted(delta.items())) or "none"))
    if done < n:
        labkit.log("             " + "; ".join(str(w) for w in whats))
    return done, n, delta


def start(args, tmp, name, extra):
    """An exporter on loopback with a burst responder (its options `extra`, YAML flow pairs
    after the address; then the rest of the file): (process, HTTP port, burst port), or None
    (a failed check) when it does not start."""
    bport = labkit.free_port()
    try:
        p, http = labkit.start_exporter(
            args.exporter, tmp, "listen_address: \"127.0.0.1:{port}\"\n"
            "self: { name: %s, node: n }\n"
            "responders:\n  udp_echo: { listen_address: \"127.0.0.1:0\" }\n"
            "  burst: { listen_address: \"127.0.0.1:%d\"%s\n" % (name, bport, extra))
    except labkit.Broken as e:
        labkit.check(False, "the exporter %s starts (%s)" % (name, e))
        return None
    return p, http, bport


def strangers(args, tmp, attackers):
    """Phase 4: the default `clients: probe_pods`, 127.0.0.1 its one probe Pod."""
    started = start(args, tmp, "guard", " }\npeers:\n  static:\n"
                    "    - { name: prober, address: 127.0.0.1, node: n2 }")
    if not started:
        return
    g, ghttp, gport = started
    gbase = "http://127.0.0.1:%d" % ghttp
    try:
        done, n, delta = phase("strangers", attackers, gport, gbase, args)
        labkit.check(done == n, "strangers: %d of %d tests of the probe Pod completed" % (done, n))
        labkit.check(delta.get("not_probe_pod", 0) > 0 and set(delta) == {"not_probe_pod"},
                     "strangers are closed as they connect, counted as not_probe_pod only: %s"
                     % delta)
        r = subprocess.run([args.iperf3, "-c", "127.0.0.1", "-p", str(gport), "-t", "1",
                            "--bind", "127.0.0.5", "--connect-timeout", "3000"],
                           capture_output=True, text=True, timeout=30)
        labkit.check(r.returncode != 0 and "receiver" not in r.stdout,
                     "a stock iperf3 -c from 127.0.0.5 is turned away: %s"
                     % (r.stdout + r.stderr).strip().splitlines()[-1:])
        labkit.check(g.poll() is None, "the exporter with clients: probe_pods is still running")
    finally:
        labkit.stop(g)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--burst", help="podnet-burst: every second test is ours, not iperf3's")
    ap.add_argument("--iperf3", default=shutil.which("iperf3") or "iperf3")
    args = ap.parse_args()
    if not os.path.exists(args.iperf3) and not shutil.which(args.iperf3):
        labkit.check(False, "iperf3 is installed (scripts/install-deps.sh --test)")
        print(labkit.summary())
        return 1
    with tempfile.TemporaryDirectory(prefix="podnet-attack-burst-") as tmp:
        started = start(args, tmp, "attack", ", clients: any }")
        if not started:
            print(labkit.summary())
            return 1
        p, http, bport = started
        base = "http://127.0.0.1:%d" % http
        try:
            one = [(STEPS[i:] + STEPS[:i], "127.0.0.2") for i in range(len(STEPS))]
            many = [(STEPS[i % 5:] + STEPS[:i % 5], "127.0.1.%d" % (i + 1))
                    for i in range(32)]
            results = [("baseline", phase("baseline", [], bport, base, args)),
                       ("one source", phase("one source", one, bport, base, args)),
                       ("32 sources", phase("32 sources", many, bport, base, args))]
            for name, (done, n, delta) in results:
                labkit.check(done == n, "%s: %d of %d legitimate tests completed" % (
                    name, done, n))
            _, _, delta = results[2][1]
            labkit.check(delta.get("penalty", 0) + delta.get("busy", 0) > 0 and
                         delta.get("timeout", 0) + delta.get("stalled", 0) > 0,
                         "the attackers' stalls and retries are counted by reason")
            labkit.check(p.poll() is None, "the exporter is still running")
        finally:
            labkit.stop(p)
        strangers(args, tmp, many)
    print(labkit.summary())
    return 1 if labkit.failures else 0


if __name__ == "__main__":
    sys.exit(main())
