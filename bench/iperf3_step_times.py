#!/usr/bin/env python3
"""How long an iperf3 client takes over each step of a TCP test, seen from the server: the
numbers the burst responder's per-step deadlines are set from (docs/design.md).

A minimal iperf3 server (TCP, forward direction: the client sends) on loopback that times, per
test, in milliseconds:
  cookie      accept of the control connection -> its 37-byte cookie read
  params      PARAM_EXCHANGE written -> the parameter JSON read
  streams     CREATE_STREAMS written -> the last data stream's cookie read (and per stream)
  first_data  TEST_RUNNING written -> the first payload byte
  min_1s, min_2s  the fewest payload bytes in any 1 s / 2 s window of the data phase (sliding,
              100 ms steps)
  test_end    TEST_RUNNING written -> TEST_END read, minus the test's time + omit
  results     EXCHANGE_RESULTS written -> the client's results JSON read
  done        DISPLAY_RESULTS written -> IPERF_DONE read
and runs the clients itself: a stock `iperf3 -c` (-P 1 and -P 16) and, with --burst, the
exporter's own engine (`podnet-burst client`). Loopback only; every test bounded by its
client's own timeout. Usage: iperf3_step_times.py [--burst build/podnet-burst] [--runs 5] [--time 3]
"""
import argparse
import json
import select
import socket
import struct
import subprocess
import sys
import threading
import time

TEST_START, TEST_RUNNING, TEST_END = 1, 2, 4
PARAM_EXCHANGE, CREATE_STREAMS = 9, 10
EXCHANGE_RESULTS, DISPLAY_RESULTS, IPERF_DONE = 13, 14, 16


def read_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise EOFError("closed after %d of %d bytes" % (len(out), n))
        out += chunk
    return out


def read_json(s):
    (n,) = struct.unpack(">I", read_exact(s, 4))
    return json.loads(read_exact(s, n))


def ms(a, b):
    return round((b - a) * 1000, 3)


def serve_one(listener):
    """One whole test on `listener`; returns its step times."""
    ctrl, _ = listener.accept()
    t_accept = time.monotonic()
    ctrl.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cookie = read_exact(ctrl, 37)
    out = {"cookie": ms(t_accept, time.monotonic())}
    t = time.monotonic()
    ctrl.sendall(bytes([PARAM_EXCHANGE]))
    params = read_json(ctrl)
    out["params"] = ms(t, time.monotonic())
    parallel = int(params.get("parallel", 1))
    out["parallel"] = parallel
    t = time.monotonic()
    ctrl.sendall(bytes([CREATE_STREAMS]))
    streams, per_stream = [], []
    while len(streams) < parallel:
        s, _ = listener.accept()
        if read_exact(s, 37) != cookie:
            s.close()
            continue
        streams.append(s)
        per_stream.append(ms(t, time.monotonic()))
    out["streams"] = per_stream[-1]
    out["stream_gaps"] = [round(b - a, 3) for a, b in zip([0] + per_stream, per_stream)]
    for s in streams:
        s.setblocking(False)
    t_run = time.monotonic()
    ctrl.sendall(bytes([TEST_START, TEST_RUNNING]))
    buf = bytearray(256 * 1024)
    first, bins, total = None, {}, 0
    end_state = None
    while end_state is None:
        ready, _, _ = select.select(streams + [ctrl], [], [], 1.0)
        now = time.monotonic()
        for s in ready:
            if s is ctrl:
                end_state = ctrl.recv(1)
                t_end = now
                continue
            try:
                n = s.recv_into(buf)
            except BlockingIOError:
                continue
            if n and first is None:
                first = now
            k = int((now - t_run) * 10)
            bins[k] = bins.get(k, 0) + n
            total += n
    out["first_data"] = ms(t_run, first) if first else None
    length = int(params.get("time", 0)) + int(params.get("omit", 0))
    out["test_end"] = round(ms(t_run, t_end) - 1000 * length, 3)
    last = int((t_end - t_run) * 10)
    windows = [sum(bins.get(i, 0) for i in range(k, k + 20)) for k in range(0, max(1, last - 19))]
    out["min_2s"] = min(windows) if windows else total
    windows = [sum(bins.get(i, 0) for i in range(k, k + 10)) for k in range(0, max(1, last - 9))]
    out["min_1s"] = min(windows) if windows else total
    out["bytes"] = total
    t = time.monotonic()
    ctrl.sendall(bytes([EXCHANGE_RESULTS]))
    read_json(ctrl)
    out["results"] = ms(t, time.monotonic())
    res = {"cpu_util_total": 0, "cpu_util_user": 0, "cpu_util_system": 0,
           "sender_has_retransmits": -1,
           "streams": [{"id": 1 if i == 0 else i + 2, "bytes": 0, "retransmits": -1,
                        "jitter": 0, "errors": 0, "omitted_errors": 0, "packets": 0,
                        "omitted_packets": 0, "start_time": 0, "end_time": length}
                       for i in range(parallel)]}
    body = json.dumps(res, separators=(",", ":")).encode()
    t = time.monotonic()
    ctrl.sendall(struct.pack(">I", len(body)) + body + bytes([DISPLAY_RESULTS]))
    ctrl.settimeout(5)
    try:
        state = ctrl.recv(1)
        out["done"] = ms(t, time.monotonic()) if state else "closed"
    except socket.timeout:
        out["done"] = "none"
    for s in streams + [ctrl]:
        s.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burst", help="podnet-burst (the exporter's engine as a tool)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--time", type=int, default=3, help="each test's data phase, seconds")
    args = ap.parse_args()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    stock = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(args.time)]
    clients = [("iperf3 -P 1", stock), ("iperf3 -P 16", stock + ["-P", "16"])]
    if args.burst:
        for n in (1, 16):
            clients.append(("podnet-burst %d" % n,
                            [args.burst, "client", "127.0.0.1", "--port", str(port),
                             "--parallel", str(n), "--time", str(args.time)]))
    for name, cmd in clients:
        for _ in range(args.runs):
            result = {}
            th = threading.Thread(target=lambda: result.update(serve_one(listener)))
            th.start()
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            th.join(timeout=10)
            result["client"] = name
            result["client_rc"] = p.returncode
            print(json.dumps(result))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
