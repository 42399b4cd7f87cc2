#!/usr/bin/env bash
# Discovery at 5,000 nodes: the exporter against a stand-in API server (real-shaped EndpointSlices
# and Nodes, 10 readiness changes/s): discovery CPU and memory, peers chosen with
# peers_per_zone: 3, and the series one exporter exposes with and without aggregate_peers. As
# root, after scripts/build.sh. Options: see --help. Exit 0 even on a MISS.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/discovery_5000.py" "$@"
