#!/usr/bin/env python3
"""An Alertmanager webhook receiver for the lab tests: logs every notification it gets.

Usage: alert_receiver.py --port N --log FILE [--address 127.0.0.1]

Each POST body (Alertmanager's webhook JSON, version 4) is answered 200 and appended to FILE as
one JSON line per alert of the notification: {"received": Unix time, "status": the alert's
status ("firing" or "resolved"), "alertname", "labels" (all of them), "startsAt", "endsAt",
"group_status" (the notification's)}. Each line is flushed before the answer, so a reader never
sees half a notification. Standard library only; stops on SIGTERM.
"""
import argparse
import http.server
import json
import signal
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--address", default="127.0.0.1")
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    out = open(args.log, "a", buffering=1)
    count = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (the name http.server calls)
            received = time.time()
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(n, 1 << 20))
            count[0] += 1
            try:
                doc = json.loads(body)
                lines = [json.dumps({
                    "received": received, "status": a.get("status", ""),
                    "alertname": a.get("labels", {}).get("alertname", ""),
                    "labels": a.get("labels", {}), "startsAt": a.get("startsAt", ""),
                    "endsAt": a.get("endsAt", ""), "group_status": doc.get("status", ""),
                    "notification": count[0], "group_key": doc.get("groupKey", "")},
                    sort_keys=True) for a in doc.get("alerts", [])]
            except (ValueError, AttributeError) as e:
                lines = [json.dumps({"received": received, "error": str(e)})]
            out.write("".join(line + "\n" for line in lines))
            out.flush()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):  # quiet: the log file is the record
            pass

    server = http.server.HTTPServer((args.address, args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("listening on %s:%d" % (args.address, args.port), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
