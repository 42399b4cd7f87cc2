#!/usr/bin/env bash
# Scale: podnet-exporter alone probing 1,000 loopback peers at 1 packet/s each for 60 s: CPU, RSS,
# /metrics scrape time, size and series count, promtool check metrics. As root, after
# scripts/build.sh. Options: see --help (PEERS, SECONDS_WINDOW, MODE may also come from the
# environment). Exit 0 even on a MISS; non-zero only if the bench itself broke.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/scale_1000.py" "$@"
