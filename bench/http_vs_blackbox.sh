#!/usr/bin/env bash
# HTTP probe benchmark: keep-alive p50 against the path's RTT floor (loopback, and a lab path as
# root), new-connection latency against prometheus-blackbox-exporter's http prober on the same
# target, and CPU per 1,000 requests of both. After scripts/build.sh (or with --build-dir).
# Options: see --help. Exit 0 even on a MISS; non-zero only if the bench itself broke.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/http_vs_blackbox.py" "$@"
