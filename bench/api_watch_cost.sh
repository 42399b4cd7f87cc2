#!/usr/bin/env bash
# A rollout of the probe DaemonSet against a stand-in API server: the slice writes and the watch
# bytes and events it sends to the N exporters that watch (run at 300 nodes), side by side with
# what kube-proxy's watches of a non-headless Service of the same size receive (model), and both
# at 3,000 nodes (model). As root, after scripts/build.sh. Options: see --help.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/api_watch_cost.py" "$@"
