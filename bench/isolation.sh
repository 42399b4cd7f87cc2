#!/usr/bin/env bash
# Measurement isolation, the fine comparison: a peer's UDP RTT p99 and HTTP keep-alive p99 to an
# exporter under each of its chores (back-to-back scrapes, reloads, a UDP flood, relists of
# 5,000 endpoints) against the same figures with it quiet, in alternating slots; each loaded
# p99 must be within max(2 x quiet, quiet + 200 us). Prints the table and a PASS/MISS line per
# phase and figure. As root (a private network namespace, loopback only), after
# scripts/build.sh. ~4-8 min. Exit 0 when every phase passed, 1 on a MISS, 2 if it broke,
# 77 without root.
# ctest's lab_isolation runs the same scenario as a gate: 10 ms UDP, 30 ms HTTP (5x margin).
# Options: --peers N --seconds S --phases scrape,reload,flood,relist,healthy,cpu
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
here="$(dirname "$(readlink -f "$0")")"
exporter=${PODNET_EXPORTER:-$here/../build/podnet-exporter}
if [[ ! -f $exporter || ! -x $exporter ]]; then
  echo "isolation.sh: no exporter at $exporter (scripts/build.sh, or set PODNET_EXPORTER)" >&2
  exit 2
fi
exec python3 "$here/../tests/lab/lab_isolation_test.py" --bench --exporter "$exporter" "$@"
