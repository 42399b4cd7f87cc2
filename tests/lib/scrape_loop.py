#!/usr/bin/env python3
"""Scrapes a /metrics URL back to back on one keep-alive connection, as a Prometheus server does
(Accept-Encoding: gzip; the body is read whole, not decompressed), for at most --seconds.
Prints one line per scrape: "STATUS SECONDS BYTES". Loopback and lab addresses only.
"""
import argparse
import http.client
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--path", default="/metrics")
    a = ap.parse_args()
    if not a.host.startswith(("127.", "10.213.")) and a.host != "::1":
        raise SystemExit("scrape_loop.py: refusing to aim at %s" % a.host)
    deadline = time.monotonic() + a.seconds
    conn = None
    while time.monotonic() < deadline:
        if conn is None:
            conn = http.client.HTTPConnection(a.host, a.port, timeout=30)
        t0 = time.monotonic()
        try:
            conn.request("GET", a.path, headers={"Accept-Encoding": "gzip"})
            r = conn.getresponse()
            body = r.read()
            print("%d %.6f %d" % (r.status, time.monotonic() - t0, len(body)), flush=True)
        except (OSError, http.client.HTTPException) as e:
            print("0 %.6f 0 %s" % (time.monotonic() - t0, e), flush=True)
            conn.close()
            conn = None
            time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
