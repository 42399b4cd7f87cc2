#!/usr/bin/env python3
"""Soak: one real exporter on loopback under everything at once for a bounded time, then its
resources must come back to where they were.

For SOAK_SECONDS (or --seconds; default 300), all at the same time, each bounded in rate and in
how much it holds open:
  - a reload every 2 s (SIGHUP), alternating two static peer sets (A: 2 peers, B: 3), and every
    5th one a hostile file instead: the config path a FIFO, or a peer name with a byte 0xff
    (refused at once; the running configuration is kept);
  - scrapes of /metrics, /podnet/info and /-/healthy, 4 a second, each of which must answer 200;
  - UDP echo: per second one 65,507-byte request, 20 malformed datagrams, 5 cut requests and
    3,000 valid requests from one source (over its share, 1/16 of 20,000/s);
  - HTTP: every 5 s (from 127.0.0.6) 10 slow clients (a request line, then one header a second,
    then gone) and 10 half-open ones (half a request, then SHUT_WR);
  - gRPC: every 5 s 30 idle connections from one source (over its limit of 8), held 1 s, and
    1 s of HTTP/2 rapid reset (HEADERS then RST_STREAM) from 2 connections of 127.0.0.7
    (attack_grpc_test.flood_connection: cut for its input, it connects again 10 ms later);
  - bursts (iperf3-compatible): every 5 s 5 connections that stall before their cookie, and one
    hostile client (127.0.0.3) stalling at each step of the protocol in turn (after the cookie,
    the parameters, CREATE_STREAMS, trickling data: attack_burst_test.attack_once);
  - HTTP from many sources: every 5 s 8 addresses (127.0.2.1-8) each opening 24 connections that
    send half a request line (over the 16 an address may hold) and hold them 1 s;
  - basic auth (the exporter runs with a web config of one user, whom every scrape above names):
    10 wrong-password requests a second from 2 addresses, a new password each (over their
    bcrypt budget: answered 401 or 429, never a bcrypt each);
  - Kubernetes discovery (peers.kubernetes besides the static peers, fed by
    tests/lib/fake_apiserver.py: 12 Pods on 12 nodes in 2 zones, each on 127.1.0.0/16 where
    nothing listens): 0.7 watch events a second (a Pod goes out of service, then comes back, so
    the selected peers change), and every 10 s the watches end with 410 Expired for 2.5 s
    (relists);
while the exporter's own RTT (UDP), HTTP and gRPC probes run against itself (the first peer of
each set) and against loopback addresses where nothing listens (the others and the discovered
peers: peers that are down).

Baseline: measured after a warm-up (every load for 30 s, or a fifth of the soak) with set A
loaded, the loads stopped and the churn paused (every Pod in service, so rendezvous hashing
selects the same discovered peers at both ends). End: the same after the soak. Asserted (tolerances):
  - RSS within max(+10 MiB, +20 %) of the baseline (malloc keeps some freed memory);
  - the heap (podnet_heap_allocated_bytes) over 300 more reloads after a warm-up of 50 grows by
    at most 0.7 KiB a reload (RSS cannot see a leak that small; see RELOAD_BLOCKS);
  - open descriptors within +4 (keep-alive connections of the probes may be mid-reconnect);
  - threads: ours (named after the executable) the same number; all of them within +4 (gRPC's
    executor and event-engine pools size themselves to the load);
  - the series: no peer of set B left; every non-outcome series (histograms, gauges) the same
    set as at the baseline; outcome counters (errors, drops, codes) may have gained label values,
    but only for set A's peers, the discovered ones, or none;
  - discovery did its part: 4 discovered peers (peers_per_zone 2, 2 zones) at both ends, watch
    events and relists counted during the soak.
Only ever aimed at 127.0.0.0/8. Usage: soak_test.py --exporter BIN [--seconds N]
"""
import argparse
import base64
import http.client
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "lib"), os.path.join(HERE, "..", "attack")]
import labkit  # noqa: E402  (check, summary, parse_metrics)
import attack_burst_test  # noqa: E402  (attack_once: a burst client that stalls at one step)
import attack_grpc_test  # noqa: E402  (flood_connection: HTTP/2 rapid reset on one connection)
import fake_apiserver  # noqa: E402  (the stand-in API server: its certificate, port, kubeconfig)

OUTCOMES = {"podnet_probe_errors_total", "podnet_responder_dropped_total",
            "podnet_responder_requests_total", "podnet_http_requests_total",
            "podnet_grpc_requests_total", "podnet_http_reconnects_total",
            "podnet_rtt_packets_sent_total", "podnet_rtt_packets_received_total"}
SET_A = ("soak-a1", "soak-a2")
SET_B = ("soak-b1", "soak-b2", "soak-b3")
OUTCOMES |= {"podnet_kubernetes_watch_events_total", "podnet_kubernetes_api_errors_total"}
# What the fake API server's cluster gives peers.kubernetes: 12 Pods (podnet-00000..11 on node-i,
# zone-a for even i, zone-b for odd; a discovered peer is named after its node), this exporter is
# podnet-00000; peers_per_zone 2 of the 5
# others in zone-a and of the 6 in zone-b, and with one Pod out of service still 2 of each.
API_NODES, API_ZONES, PEERS_PER_ZONE = 12, 2, 2
# A Pod out of service for 1/CHURN_PER_S s: longer than discovery's publish interval (1 s), and
# not a multiple of it, so the selection really changes.
CHURN_PER_S = 0.7
DISCOVERED = PEERS_PER_ZONE * API_ZONES
TOKEN = "soak-token"
# The web config's one user: bcrypt cost 5, so that the soak's own first scrape costs little (the
# same pair as tests/unit/web/auth_gate_test.cc); every scrape of the soak names it.
USER, PASSWORD = "bob", "b0b:pw"
USER_HASH = "$2y$05$GtTXuTJPT8t4APeW9E.kD.D4QMfuKdaOOjU0oUYLRTr7ntD9culky"
BURST_STALLS = ("after_cookie", "after_params", "after_streams", "trickle")


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_text(ports, peers):
    http, burst, grpc = ports
    text = ("listen_address: \"127.0.0.1:%d\"\n"
            "self: { name: podnet-00000, node: node-0, zone: zone-a }\n"
            "responders:\n  udp_echo: { listen_address: \"127.0.0.1:%d\" }\n"
            "  burst: { listen_address: \"127.0.0.1:%d\", clients: any }\n"
            "  grpc: { listen_address: \"127.0.0.1:%d\" }\n"
            "peers:\n"
            "  kubernetes: { namespace: podnet, service: podnet, peers_per_zone: %d, port: %d }\n"
            "  static:\n" % (http, http, burst, grpc, PEERS_PER_ZONE, http))
    # The first peer is this exporter itself; the others are addresses where nothing listens
    # (a peer that is down: refused, unreachable, timeouts).
    for i, name in enumerate(peers):
        text += ("    - { name: %s, address: 127.0.0.%d, port: %d, node: n%d, zone: zone-a }\n"
                 % (name, i + 1 + 3 * (peers is SET_B), http, i))
    return text + (
        "probes:\n"
        "  rtt: { protocol: udp, interval: 1s, count: 5, spacing: 20ms, timeout: 300ms }\n"
        "  http: { interval: 5s, duration: 500ms, timeout: 1s, qps: 20, connections: 1,"
        " modes: [keepalive, new_connection] }\n"
        "  grpc: { interval: 2s, count: 3, spacing: 10ms, timeout: 500ms, port: %d }\n" % grpc)


class ApiServer:
    """tests/lib/fake_apiserver.py on 127.0.0.1 (TLS, bearer token), its churn paused while
    `pause` exists and its watches ended with 410 while `gone` exists."""

    def __init__(self, tmp, seconds):
        self.gone, self.pause = os.path.join(tmp, "gone"), os.path.join(tmp, "pause")
        self.p, self.kubeconfig = fake_apiserver.start(
            tmp, TOKEN, ["--nodes", str(API_NODES), "--zones", str(API_ZONES), "--churn",
                         str(CHURN_PER_S), "--gone-file", self.gone, "--pause-file", self.pause,
                         "--max-seconds", str(int(seconds))], name="soak")

    def set(self, path, on):
        if on:
            open(path, "w").close()
        elif os.path.exists(path):
            os.unlink(path)

    def stop(self):
        labkit.stop(self.p)


class Exporter:
    def __init__(self, exe, tmp, ports, kubeconfig):
        self.ports, self.cfg, self.tmp = ports, os.path.join(tmp, "soak.yaml"), tmp
        self.write(config_text(ports, SET_A).encode())
        self.base = "http://127.0.0.1:%d" % ports[0]
        self.log = open(os.path.join(tmp, "exporter.log"), "w")
        web = os.path.join(tmp, "web.yaml")
        with open(web, "w") as f:
            f.write("basic_auth_users:\n  %s: %s\n" % (USER, USER_HASH))
        self.auth = "Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()
        self.p = subprocess.Popen([exe, "--config.file=" + self.cfg, "--web.config.file=" + web,
                                   "--kubeconfig=" + kubeconfig], stdout=subprocess.DEVNULL,
                                  stderr=self.log)
        deadline = time.time() + 15
        while time.time() < deadline and self.p.poll() is None:
            try:
                if self.get("/-/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("soak_test.py: the exporter did not become ready (%s)" % self.cfg)

    def write(self, data):
        """Replaces the config file at once (a reload never reads half a file)."""
        tmp = self.cfg + ".new"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, self.cfg)

    def write_fifo(self):
        tmp = self.cfg + ".fifo"
        os.mkfifo(tmp)
        os.replace(tmp, self.cfg)

    def reload(self):
        self.p.send_signal(signal.SIGHUP)

    def get(self, path, timeout=5):
        request = urllib.request.Request(self.base + path, headers={"Authorization": self.auth})
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8")

    def metrics(self):
        return labkit.parse_metrics(self.get("/metrics")[1])

    def gauge(self, name):
        return sum(v for n, _, v in self.metrics() if n == name)

    def wait_gauge(self, name, want, timeout=3.0, poll=0.1):
        """The gauge once it equals `want` (or, if `want` is callable, once want(value) is
        true), or its last value after `timeout` s."""
        ok = want if callable(want) else (lambda got: got == want)
        deadline = time.time() + timeout
        while True:
            got = self.gauge(name)
            if ok(got) or time.time() > deadline:
                return got
            time.sleep(poll)

    def resources(self):
        status = {}
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                status[key] = value.split()
        names = {}
        for task in os.listdir("/proc/%d/task" % self.p.pid):
            try:
                with open("/proc/%d/task/%s/comm" % (self.p.pid, task)) as f:
                    name = f.read().strip()
            except OSError:
                continue
            names[name] = names.get(name, 0) + 1
        return {"rss_mib": int(status["VmRSS"][0]) / 1024.0, "thread_names": names,
                "heap_kib": self.gauge("podnet_heap_allocated_bytes") / 1024.0,
                "fds": len(os.listdir("/proc/%d/fd" % self.p.pid)),
                "threads": int(status["Threads"][0])}


class Loads:
    """The load generators: threads that run until stop(), each bounded per cycle."""

    def __init__(self, ex, api):
        self.ex, self.api, self.stopping, self.threads = ex, api, threading.Event(), []
        self.errors, self.reloads, self.hostile, self.scrapes = [], 0, 0, 0
        self.seen = set()  # every discovered peer that had series in a scrape
        self.peer_set = SET_A

    def start(self):
        self.reloads, self.hostile, self.scrapes, self.seen = 0, 0, 0, set()
        self.api.set(self.api.pause, False)
        for f in (self.reloader, self.scraper, self.udp, self.slow_http, self.many_sources_http,
                  self.wrong_passwords, self.grpc, self.burst, self.burst_stalls, self.discovery):
            t = threading.Thread(target=self.guard, args=(f,), daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=30)
        self.threads = []
        self.stopping.clear()

    def guard(self, f):
        try:
            f()
        except Exception as e:  # noqa: BLE001  (any failure of a load is the test's failure)
            self.errors.append("%s: %r" % (f.__name__, e))

    def every(self, seconds):
        """Yields once per `seconds` until stop()."""
        while not self.stopping.is_set():
            yield
            self.stopping.wait(seconds)

    def reloader(self):
        n = 0
        for _ in self.every(2.0):
            n += 1
            if n % 5 == 0:
                if (n // 5) % 2:
                    self.ex.write_fifo()
                else:
                    self.ex.write(config_text(self.ex.ports, SET_A).encode().replace(
                        b"soak-a2", b"soak-\xff"))
                self.ex.reload()
                ok = self.ex.wait_gauge("podnet_config_last_reload_successful", 0)
                if ok != 0:
                    self.errors.append("hostile reload %d was not refused" % n)
                self.hostile += 1
                continue
            self.peer_set = SET_B if self.peer_set == SET_A else SET_A
            self.ex.write(config_text(self.ex.ports, self.peer_set).encode())
            self.ex.reload()
            if self.ex.wait_gauge("podnet_config_last_reload_successful", 1) != 1:
                self.errors.append("reload %d failed" % n)
            elif (self.ex.wait_gauge("podnet_peers", len(self.peer_set) + DISCOVERED)
                  != len(self.peer_set) + DISCOVERED):
                self.errors.append("reload %d: podnet_peers is not %d" % (
                    n, len(self.peer_set) + DISCOVERED))
            self.reloads += 1

    def scraper(self):
        for _ in self.every(0.25):
            for path in ("/metrics", "/podnet/info", "/-/healthy"):
                code, body = self.ex.get(path)
                if code != 200:
                    self.errors.append("%s answered %d" % (path, code))
                elif path == "/metrics":
                    self.seen |= discovered_peers(labkit.parse_metrics(body))
            self.scrapes += 1

    def udp(self):
        port = self.ex.ports[0]
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        rnd = random.Random(13)
        seq = 0

        def send(data):
            try:
                s.sendto(data, ("127.0.0.1", port))
            except (BlockingIOError, OSError):
                pass  # our own send buffer full: the flood is at its limit

        for _ in self.every(1.0):
            request = struct.pack("!IBBHQ", 0x504E4554, 1, 1, 0, 0x50AC)
            send(request + b"\0" * (65507 - len(request)))  # oversize
            for _ in range(20):
                send(bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 100))))
            for cut in range(1, 6):
                send(request[:cut * 2])
            t0 = time.monotonic()
            for batch in range(100):  # 3,000 valid requests in 30-request batches, 10 ms apart
                for _ in range(30):
                    seq = (seq + 1) & 0xFFFF
                    send(struct.pack("!IBBHQ", 0x504E4554, 1, 1, seq, 0x50AC) + b"\0" * 40)
                if self.stopping.is_set():
                    break
                time.sleep(max(0.0, t0 + (batch + 1) * 0.0095 - time.monotonic()))
        s.close()

    def slow_http(self):
        port = self.ex.ports[0]
        for _ in self.every(5.0):
            slow, half = [], []
            for _ in range(10):
                c = socket.create_connection(("127.0.0.1", port), timeout=2,
                                             source_address=("127.0.0.6", 0))
                try:
                    c.sendall(b"GET /metrics HTTP/1.1\r\n")
                except OSError:
                    pass  # the same
                slow.append(c)
                h = socket.create_connection(("127.0.0.1", port), timeout=2,
                                             source_address=("127.0.0.6", 0))
                try:
                    h.sendall(b"GET /metrics HTTP/1.1\r\nHost: soak\r\nX-Half")
                    h.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # closed over the 16 connections an address may hold: counted
                half.append(h)
            for i in range(3):
                if self.stopping.wait(1.0):
                    break
                for c in slow:
                    try:
                        c.sendall(b"X-Slow-%d: 1\r\n" % i)
                    except OSError:
                        pass  # the server gave up on it: what it should do eventually
            for c in slow + half:
                c.close()

    def many_sources_http(self):
        for _ in self.every(5.0):
            sources = ["127.0.2.%d" % i for i in range(1, 9)]
            threads = [threading.Thread(target=self.connections, args=(
                self.ex.ports[0], 24, 1.0, b"GET /metrics HTTP/1.1\r\n", s)) for s in sources]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

    def wrong_passwords(self):
        rnd = random.Random(21)
        n = 0
        for _ in self.every(0.1):
            n += 1
            guess = base64.b64encode(("%s:guess-%d" % (USER, rnd.getrandbits(48))).encode())
            c = http.client.HTTPConnection("127.0.0.1", self.ex.ports[0], timeout=5,
                                           source_address=("127.0.0.%d" % (4 + n % 2), 0))
            try:
                c.request("GET", "/metrics", headers={"Authorization": b"Basic " + guess})
                status = c.getresponse().status
                if status not in (401, 429):
                    self.errors.append("a wrong password was answered %d" % status)
            except (OSError, http.client.HTTPException):
                pass  # closed over a connection limit: counted by the exporter
            finally:
                c.close()

    def burst_stalls(self):
        n = 0
        while not self.stopping.is_set():  # each attempt ends when the responder cuts it
            attack_burst_test.attack_once(BURST_STALLS[n % len(BURST_STALLS)], "127.0.0.3",
                                          self.ex.ports[1], self.stopping)
            n += 1
            self.stopping.wait(0.2)

    def connections(self, port, count, hold, send=b"", source="127.0.0.2"):
        held = []
        for _ in range(count):
            c = socket.socket()
            c.bind((source, 0))
            c.settimeout(2)
            try:
                c.connect(("127.0.0.1", port))
                if send:
                    c.sendall(send)
            except OSError:
                pass  # reset over a limit: expected
            held.append(c)
        self.stopping.wait(hold)
        for c in held:
            c.close()

    def grpc(self):
        for _ in self.every(4.0):
            self.connections(self.ex.ports[2], 30, 1.0)
            stats = {"connects": 0, "streams_written": 0, "cut": 0}
            flood = [threading.Thread(target=attack_grpc_test.flood_connection, args=(
                self.ex.ports[2], "127.0.0.7", time.time() + 1.0, stats)) for _ in range(2)]
            for t in flood:
                t.start()
            for t in flood:
                t.join()

    def burst(self):
        for _ in self.every(4.0):
            self.connections(self.ex.ports[1], 5, 1.0, send=b"a" * 36)

    def discovery(self):
        """Relists: every 10 s, the watches end with 410 Expired for 2.5 s (the churn itself is
        the API server's own, 2 events a second)."""
        for _ in self.every(10.0):
            self.api.set(self.api.gone, True)
            self.stopping.wait(2.5)
            self.api.set(self.api.gone, False)


def discovered_peers(samples):
    """The names of the discovered peers (named after their nodes: node-N) that have series in
    `samples`."""
    return {l["peer"] for _, l, _ in samples if l.get("peer", "").startswith("node-")}


def series_problems(baseline, end):
    """What in the end scrape's series is not as at the baseline (a list of strings)."""
    def keys(samples):
        return {(n, tuple(sorted(l.items()))) for n, l, _ in samples
                if n.startswith("podnet_")}

    base, now = keys(baseline), keys(end)
    problems = []
    stale = sorted(k for k in now if dict(k[1]).get("peer") in SET_B)
    if stale:
        problems.append("%d series of set B's peers left, e.g. %s" % (len(stale), stale[0]))
    fixed_base = {k for k in base if k[0] not in OUTCOMES}
    fixed_now = {k for k in now if k[0] not in OUTCOMES}
    if fixed_base != fixed_now:
        problems.append("non-outcome series differ: +%s -%s" % (
            sorted(fixed_now - fixed_base)[:3], sorted(fixed_base - fixed_now)[:3]))
    loaded = set(SET_A) | discovered_peers(baseline)
    odd = [k for k in now - base if k[0] in OUTCOMES and dict(k[1]).get("peer", SET_A[0])
           not in loaded]
    if odd:
        problems.append("new outcome series for peers not loaded: %s" % odd[:3])
    return problems


def settle(ex, api):
    """Set A loaded, the loads' connections gone, the churn paused with every Pod in service:
    what the resources come back to."""
    api.set(api.gone, False)
    api.set(api.pause, True)
    ex.write(config_text(ex.ports, SET_A).encode())
    ex.reload()
    ex.wait_gauge("podnet_peers", len(SET_A) + DISCOVERED)
    time.sleep(2.0 / CHURN_PER_S)  # the Pod that was out, if any, is back in service
    time.sleep(8)  # a few probe rounds with set A; closed connections reaped everywhere
    return ex.resources(), ex.metrics()


# The reload leak check: RELOAD_BLOCKS reloads (SIGHUP, each waited for, alternating set B and set
# A), the heap read after the first block and after the second, both with set A settled. A
# leak of 1 KiB per reload grows the heap by RELOAD_BLOCKS[1] KiB; the check allows 0.7 of
# that. (RSS cannot see it: malloc keeps MiBs of freed pages, and RSS moves by whole pages.)
# Over 300 reloads here: +75 and +93 KiB as the code is (blocks of 150 in a row: +48, +33, +21,
# +40 KiB, not yet levelling off), +376 KiB with 1 KiB a reload put in on purpose: see
# docs/development.md, "Soak".
RELOAD_BLOCKS = (50, 300)
RELOAD_LEAK_KIB = 0.7


def reload_block(ex, n):
    """n reloads (n even: the last loads set A), each waited for; then set A settled. Returns
    the heap in KiB (podnet_heap_allocated_bytes)."""
    stamp = "podnet_config_last_reload_success_timestamp_seconds"
    for i in range(n):
        ex.write(config_text(ex.ports, SET_B if i % 2 == 0 else SET_A).encode())
        before = ex.gauge(stamp)
        ex.reload()
        ex.wait_gauge(stamp, lambda got: got != before, timeout=5, poll=0.005)
    ex.wait_gauge("podnet_peers", len(SET_A) + DISCOVERED)
    time.sleep(4)  # probe rounds of set A; closed connections reaped
    return ex.gauge("podnet_heap_allocated_bytes") / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 300)))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="podnet-soak-")
    ports = (free_port(), free_port(), free_port())
    warm = min(30.0, max(10.0, a.seconds / 5))
    api = ApiServer(tmp, warm + a.seconds + 300)
    ex = Exporter(a.exporter, tmp, ports, api.kubeconfig)
    loads = Loads(ex, api)
    try:
        labkit.log("warm-up: every load for %.0f s" % warm)
        loads.start()
        time.sleep(warm)
        loads.stop()
        base_res, base_metrics = settle(ex, api)
        labkit.log("baseline: %s, %d series" % (base_res, len(base_metrics)))
        labkit.log("soak: every load for %.0f s" % a.seconds)
        t0 = time.time()
        loads.start()
        while time.time() - t0 < a.seconds and ex.p.poll() is None:
            time.sleep(min(5.0, a.seconds - (time.time() - t0)))
        peak = ex.resources() if ex.p.poll() is None else {}
        loads.stop()
        labkit.check(ex.p.poll() is None, "the exporter is alive after %.0f s (exit %s)"
                     % (a.seconds, ex.p.poll()))
        if ex.p.poll() is not None:
            return 1
        end_res, end_metrics = settle(ex, api)
        labkit.log("during: %s; end: %s, %d series" % (peak, end_res, len(end_metrics)))
        labkit.check(not loads.errors, "every scrape answered 200 and every reload did as "
                     "expected: %d reloads, %d hostile ones refused, %d scrape rounds %s"
                     % (loads.reloads, loads.hostile, loads.scrapes, loads.errors[:5]))
        labkit.check(loads.reloads >= a.seconds / 2 * 0.6 and loads.hostile >= 1,
                     "the reloads kept coming (%d good, %d hostile in %.0f s)"
                     % (loads.reloads, loads.hostile, a.seconds))
        rss_limit = base_res["rss_mib"] + max(10.0, 0.2 * base_res["rss_mib"])
        labkit.check(end_res["rss_mib"] <= rss_limit, "RSS %.1f MiB -> %.1f MiB (limit %.1f)"
                     % (base_res["rss_mib"], end_res["rss_mib"], rss_limit))
        labkit.check(end_res["fds"] <= base_res["fds"] + 4, "open descriptors %d -> %d (limit +4)"
                     % (base_res["fds"], end_res["fds"]))
        own = os.path.basename(a.exporter)[:15]  # the comm of the threads we start ourselves
        own_base, own_end = (r["thread_names"].get(own, 0) for r in (base_res, end_res))
        labkit.check(own_end == own_base and end_res["threads"] <= base_res["threads"] + 4,
                     "threads: ours %d -> %d, all %d -> %d (gRPC's pools may grow by 4) %s"
                     % (own_base, own_end, base_res["threads"], end_res["threads"],
                        end_res["thread_names"]))
        found = [discovered_peers(m) for m in (base_metrics, end_metrics)]
        labkit.check(len(found[0]) == DISCOVERED and found[0] == found[1],
                     "the same %d discovered peers at both ends: %s, %s"
                     % (DISCOVERED, sorted(found[0]), sorted(found[1])))
        labkit.check(len(loads.seen - found[0]) > 0, "the churn changed the selection: %d "
                     "other discovered peers had series during the soak" % len(loads.seen - found[0]))
        counts = [{n: sum(v for m, _, v in ms if m == n) for n in
                   ("podnet_kubernetes_watch_events_total", "podnet_kubernetes_lists_total")}
                  for ms in (base_metrics, end_metrics)]
        events, lists = (counts[1][n] - counts[0][n] for n in counts[0])
        labkit.check(events >= a.seconds * CHURN_PER_S / 2 and lists >= a.seconds / 10 / 2,
                     "discovery events during the soak: %d watch events, %d lists (relists)"
                     % (events, lists))
        problems = series_problems(base_metrics, end_metrics)
        labkit.check(not problems, "series back to the baseline's (%d -> %d samples) %s"
                     % (len(base_metrics), len(end_metrics), problems))
        warm = reload_block(ex, RELOAD_BLOCKS[0])
        after = reload_block(ex, RELOAD_BLOCKS[1])
        labkit.check(after - warm <= RELOAD_LEAK_KIB * RELOAD_BLOCKS[1],
                     "heap after %d more reloads: %.0f KiB -> %.0f KiB (%+.0f KiB; limit +%.0f: "
                     "%.1f KiB a reload)" % (RELOAD_BLOCKS[1], warm, after, after - warm,
                                             RELOAD_LEAK_KIB * RELOAD_BLOCKS[1], RELOAD_LEAK_KIB))
        samples = {(n, tuple(sorted(l.items()))): v for n, l, v in end_metrics}
        for reason in ("too_large", "malformed", "source_limited"):
            v = samples.get(("podnet_responder_dropped_total",
                             (("reason", reason), ("responder", "udp_echo"))), 0)
            labkit.check(v > 0, "UDP echo counted its %s requests (%d)" % (reason, v))
        v = samples.get(("podnet_responder_dropped_total",
                         (("reason", "source_connection_limit"), ("responder", "grpc"))), 0)
        labkit.check(v > 0, "gRPC reset connections over the source limit (%d)" % v)
        for responder, reason in (("http", "source_connection_limit"), ("burst", "timeout"),
                                  ("burst", "stalled"), ("grpc", "input_budget")):
            v = samples.get(("podnet_responder_dropped_total",
                             (("reason", reason), ("responder", responder))), 0)
            labkit.check(v > 0, "%s refused with reason %s (%d)" % (responder, reason, v))
        v = sum(samples.get(("podnet_web_auth_failures_total", (("reason", r),)), 0)
                for r in ("source_limited", "rate_limited"))
        labkit.check(v > 0, "wrong passwords over the bcrypt budget answered 429 (%d)" % v)
    finally:
        loads.stop()
        ex.p.send_signal(signal.SIGTERM)
        try:
            rc = ex.p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            ex.p.kill()
            rc = ex.p.wait()
        labkit.check(rc == 0, "SIGTERM: exit 0 (%s); log: %s" % (rc, ex.log.name))
        api.stop()
        labkit.log(labkit.summary())
    if not labkit.failures:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if labkit.failures else 0


if __name__ == "__main__":
    sys.exit(main())
