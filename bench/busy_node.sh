#!/usr/bin/env bash
# A busy node: the exporter at the DaemonSet's CPU request (cpu.shares of 50m) beside busy loops
# on every core, against the same run on an idle node, and against ping in the same cgroup:
# RTT p50/p99, lost and late requests, skipped rounds, /metrics latency. As root, after
# scripts/build.sh. Options: see --help (SECONDS_PHASE may also come from the environment).
# About 8 minutes. Exit 0 even on a MISS; non-zero only if the bench itself broke.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/busy_node.py" "$@"
