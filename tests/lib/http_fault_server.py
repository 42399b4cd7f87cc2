#!/usr/bin/env python3
"""Misbehaving HTTP/1.1 servers for the HTTP probe's fault tests, one port per fault.

  http_fault_server.py --host ADDR --base-port P --seconds S

Ports from P: +0 blackhole (accepts, reads, never answers), +1 reset (half a response, then RST),
+2 status500, +3 garbage (not HTTP), +4 slowloris (a valid response one byte every 50 ms),
+5 bigbody (Content-Length 1 MB, over the probe's limit), and three keep-alive servers that
real clients (curl, Go's net/http) take without an error: +6 early_hints ("103 Early Hints" with
a Link header before each 200), +7 idle_close (closes the idle connection after 3 responses,
without "Connection: close"), +8 close_on_reuse (answers the first request of a connection,
closes at the second without a byte), +9 chunked_length ("Transfer-Encoding: chunked" and a wrong
"Content-Length", RFC 9112 6.3: chunked wins), +10 bare_lf (header, chunk-size and trailer lines
ending in a bare LF, RFC 9112 2.2), and +11 ambiguous_length (two different Content-Length
fields: curl takes the last, python the first). "refused" needs no server: a port nothing listens on. Bounded: the process exits after --seconds; every connection is closed
within a few seconds; at most 512 connections per fault are handled at once (more are closed at
once).

Each fault is served by a process of its own (forked after every port is bound), so that one
fault's load cannot change what another does: the probe sends each port up to 25 requests a
second (lab_http_test.QPS) (4 in flight), the faults that answer at once (reset, status500, garbage, bigbody) turn
over a connection per request, and each blackhole thread sleeps 3 s. In one process, under one
GIL and one connection limit, a slowloris or garbage answer could then miss the probe's timeout
before its first byte, and the probe would rightly count `timeout`, not the fault the test
expects.
"""
import argparse
import os
import socket
import sys
import threading
import time

FAULTS = ["blackhole", "reset", "status500", "garbage", "slowloris", "bigbody",
          "early_hints", "idle_close", "close_on_reuse", "chunked_length", "bare_lf",
          "ambiguous_length"]
KEEPALIVE = {"early_hints", "idle_close", "close_on_reuse", "chunked_length", "bare_lf"}
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npodnet"
# The same body framed as the keep-alive framing servers frame it.
FRAMED = {
    "chunked_length": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n"
                       b"\r\n6\r\npodnet\r\n0\r\n\r\n"),
    "bare_lf": (b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nX-A: b\n\n"
                b"6;a=b\npodnet\r\n0\nX-T: 1\n\n"),
}
HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"


def keepalive(kind, c):
    """Serves requests on one connection for at most 10 s (pipelined heads are answered in
    order)."""
    data, served, until = b"", 0, time.time() + 10
    while time.time() < until:
        while b"\r\n\r\n" not in data:
            c.settimeout(max(0.01, until - time.time()))
            try:
                chunk = c.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            data += chunk
        data = data.split(b"\r\n\r\n", 1)[1]
        if kind == "close_on_reuse" and served == 1:
            return
        if kind == "early_hints":
            if served % 2:
                c.sendall(HINTS)
                time.sleep(0.002)
                c.sendall(OK)
            else:
                c.sendall(HINTS + OK)
        else:
            c.sendall(FRAMED.get(kind, OK))
        served += 1
        if kind == "idle_close" and served == 3:
            time.sleep(0.002)
            return
active = threading.BoundedSemaphore(512)


def read_head(c, deadline):
    data = b""
    while b"\r\n\r\n" not in data and time.time() < deadline and len(data) < 65536:
        c.settimeout(max(0.01, deadline - time.time()))
        try:
            chunk = c.recv(4096)
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def handle(kind, c):
    try:
        if kind in KEEPALIVE:
            keepalive(kind, c)
            return
        if read_head(c, time.time() + 2) is None:
            return
        if kind == "blackhole":
            time.sleep(3)  # longer than any probe timeout in the tests
        elif kind == "reset":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 75\r\n\r\npodnet")
            time.sleep(0.002)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        elif kind == "status500":
            c.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\n"
                      b"Connection: close\r\n\r\nerror\n")
        elif kind == "garbage":
            c.sendall(b"SSH-2.0-OpenSSH_9.2 not an http server\r\n\r\n")
        elif kind == "slowloris":
            body = b"x" * 75
            resp = (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                    % len(body)) + body
            for i in range(len(resp)):  # ~7 s in all; the probe gives up long before
                c.sendall(resp[i:i + 1])
                time.sleep(0.05)
                if i > 60:
                    break
        elif kind == "ambiguous_length":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Length: 7\r\n\r\npodnet!")
        elif kind == "bigbody":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n")
            c.sendall(b"x" * 65536)
    except OSError:
        pass
    finally:
        try:
            c.close()
        except OSError:
            pass
        active.release()


def serve(kind, sock, until):
    sock.settimeout(0.2)
    while time.time() < until:
        try:
            c, _ = sock.accept()
        except socket.timeout:
            continue
        except OSError:
            return
        if not active.acquire(blocking=False):
            c.close()
            continue
        threading.Thread(target=handle, args=(kind, c), daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--base-port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=120)
    a = ap.parse_args()
    until = time.time() + a.seconds
    socks = []
    for i, kind in enumerate(FAULTS):
        fam = socket.AF_INET6 if ":" in a.host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((a.host, a.base_port + i))
        s.listen(256)
        socks.append((kind, s))
    children = []
    for kind, s in socks:
        pid = os.fork()
        if pid == 0:  # the child serves its fault until `until`; its handler threads die with it
            for _, other in socks:
                if other is not s:
                    other.close()
            serve(kind, s, until)
            os._exit(0)
        children.append(pid)
        s.close()
    print("ready", flush=True)
    for pid in children:  # every child's accept loop ends at `until`
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
