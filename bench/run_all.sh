#!/usr/bin/env bash
# Runs every bench one after the other (about 8 minutes): rtt_vs_ping, cpu_vs_smokeping,
# scale_1000. As root, after scripts/build.sh. Each prints its figures and PASS/MISS lines; a MISS
# does not fail the run. Exit status: 0 if every bench ran, 1 if any bench itself broke.
# Each bench cleans up after itself (lab, namespaces, processes), also when interrupted.
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
broken=()
child=""
trap 'if [[ -n "$child" ]]; then kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; fi; exit 130' INT TERM HUP
for bench in rtt_vs_ping cpu_vs_smokeping scale_1000; do
  echo
  echo "######## $bench"
  "$here/$bench.sh" "$@" &
  child=$!
  wait "$child"
  rc=$?
  child=""
  if [[ $rc -ne 0 ]]; then
    echo "######## $bench: BROKEN (exit $rc)"
    broken+=("$bench")
  fi
done
echo
echo "######## summary"
if [[ ${#broken[@]} -gt 0 ]]; then
  echo "broken: ${broken[*]}"
  exit 1
fi
echo "all benches ran (see PASS/MISS above)"
