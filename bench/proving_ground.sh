#!/usr/bin/env bash
# The proving ground: a simulated fleet (24 nodes in 3 zones by default) takes faults at random
# targets and no-fault phases; every Alertmanager notification is scored against the truth
# (top-1, top-3, detection time, notifications per incident, false ones). As root, after
# scripts/build.sh --test; ~1-2.5 min a trial (--trials 10 over 12 classes: 2.5-5 h; in parts
# with --merge). Options:
# --help. Exit 0 when it ran, 2 when it could not.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
exec python3 "$(dirname "$(readlink -f "$0")")/lib/proving_ground.py" "$@"
