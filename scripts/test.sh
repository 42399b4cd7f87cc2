#!/usr/bin/env bash
# Builds podnet-exporter and runs every test: unit tests (GoogleTest) and, as root, the
# network-namespace lab integration tests with a real Prometheus. Installs what it needs (apt
# runs only when a package is missing).
# Usage: scripts/test.sh [--quick | --setup-only] [CTEST ARGS...]
#   (none)        every test (~20 min on 2 cores from scratch, ~13 min of it ctest)
#   --quick       every test but the lab ones (ctest -LE lab): ~2 min after a build
#   --setup-only  installs the test dependencies and configures build/ with the tests on;
#                 builds and runs nothing (scripts/fresh-root-check.sh proves this part)
# Further arguments go to ctest, e.g. scripts/test.sh -R lab_http, or -L unit.
# One test by hand, and the other fast paths: docs/development.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=all
case "${1:-}" in
  --quick) mode=quick; shift ;;
  --setup-only) mode=setup; shift ;;
esac
if [[ $mode == setup ]]; then
  exec scripts/build.sh --test --configure-only
fi
scripts/build.sh --test
cd build
# -j2: the unit and other tests two at a time (their timing bounds have 5x margin, and most of
# them wait on timers). With no ctest arguments, the lab tests (label lab) run after all the
# others, also two at a time where tests/CMakeLists.txt lets them pair (PAIRABLE, LOCKS) and
# alone otherwise: never beside the promtool or unit tests, which load both cores. With
# arguments, one ctest run of what they select.
rc=0
failed_log=Testing/Temporary/LastTestsFailed.log
logs=(Testing/Temporary/LastTest.log)
rm -f "$failed_log"
if [[ $mode == all ]] && (($# > 0)); then
  ctest --output-on-failure --timeout 900 -j2 "$@" || rc=$?
else
  ctest --output-on-failure --timeout 900 -j2 -LE lab "$@" || rc=$?
fi
if [[ $mode == all ]] && (($# == 0)); then
  cp Testing/Temporary/LastTest.log Testing/Temporary/LastTest.others.log
  logs+=(Testing/Temporary/LastTest.others.log)
  first_failed=$(cat "$failed_log" 2>/dev/null || true)
  rm -f "$failed_log"
  ctest --output-on-failure --timeout 900 -j2 -L lab || rc=$?
  # ctest --rerun-failed below reads this file: the failures of both runs.
  printf '%s\n' "$first_failed" "$(cat "$failed_log" 2>/dev/null || true)" | sed '/^$/d' \
    >"$failed_log.both"
  mv "$failed_log.both" "$failed_log"
fi
# A failed lab or attack test (real namespaces, real timers: labels lab and attack) runs once
# more, alone, when every failed test is one: their checks bound timings and losses with margin,
# but the host of a shared virtual machine can take half its CPU for minutes (steal: 59 s of a
# 56 s lab's 112 CPU-seconds in one run here), and a check that two runs in a row fail is a
# defect of ours, not the neighbour's. The first run's log is kept (LastTest.first.log); a test
# that passes only the second time is printed as FLAKY. Any other failure fails at once.
if ((rc != 0)) && [[ -s $failed_log ]]; then
  failed=$(sed 's/^[0-9]*://' "$failed_log")
  timing=$(ctest -N -L '^(lab|attack)$' | sed -n 's/^ *Test *#[0-9]*: //p')
  if [[ -z $(comm -23 <(sort <<<"$failed") <(sort <<<"$timing")) ]]; then
    cp Testing/Temporary/LastTest.log Testing/Temporary/LastTest.first.log
    echo "test.sh: running the failed lab tests once more, alone:" $failed >&2
    rc=0
    ctest --output-on-failure --timeout 900 --rerun-failed || rc=$?
    again=$( ((rc == 0)) || sed 's/^[0-9]*://' "$failed_log")
    for t in $failed; do
      if ! grep -qx "$t" <<<"$again"; then echo "test.sh: FLAKY (passed the second time): $t" >&2; fi
    done
  fi
fi
if ((rc != 0)); then
  # The failed checks again, last: a CI log cut to its head and tail still shows them.
  echo "test.sh: the failed checks (${logs[*]}):" >&2
  grep -hE '^(FAILED |\[  FAILED  \]|[^ ]+:[0-9]+: Failure)' "${logs[@]}" | tail -n 40 >&2 || true
fi
exit "$rc"
