#!/usr/bin/env bash
# Rules at scale: the shipped rules in a real Prometheus over the series of a simulated 300- or
# 3,000-node fleet (templates captured from a real 12-node fleet); each rule group's evaluation
# time against its interval, Prometheus' memory. As root, after scripts/build.sh --test.
# Options: see --help. ~17 min for 300 nodes (a 2.5-minute capture, 12 minutes of Prometheus).
# Exit 0 even on a MISS; non-zero only if the bench itself broke.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/rules_at_scale.py" "$@"
