#!/usr/bin/env bash
# What podnet-exporter costs on a cluster of 30 / 300 / 3,000 nodes in 3 zones, deploy default:
# series and scrape bytes as a real Prometheus counts them, probe bytes per hour by path class
# as the kernel counts them, the month's price; goldpinger's and kubenurse's metric sets side by
# side. As root, after scripts/build.sh; ~6 min. Options: see --help. Exit 0 when it ran.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/cluster_cost.py" "$@"
