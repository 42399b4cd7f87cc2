#!/usr/bin/env bash
# RTT accuracy: podnet-exporter vs iputils ping on the lab's same-node, same-zone and cross-zone
# paths, at the same time. As root, after scripts/build.sh. Options: see --help
# (ROUNDS and PING_COUNT may also come from the environment). Exit 0 even on a MISS;
# non-zero only if the bench itself broke. The lab is torn down on every exit.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/rtt_vs_ping.py" "$@"
