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
if [[ $mode == quick ]]; then
  set -- -LE lab "$@"
fi
# -j2: the unit and other tests two at a time (their timing bounds have 5x margin, and most of
# them wait on timers); the lab tests are RUN_SERIAL, each alone.
rc=0
rm -f Testing/Temporary/LastTestsFailed.log
ctest --output-on-failure --timeout 900 -j2 "$@" || rc=$?
# A failed lab or attack test (real namespaces, real timers: labels lab and attack) runs once
# more, alone, when every failed test is one: their checks bound timings and losses with margin,
# but the host of a shared virtual machine can take half its CPU for minutes (steal: 59 s of a
# 56 s lab's 112 CPU-seconds in one run here), and a check that two runs in a row fail is a
# defect of ours, not the neighbour's. The first run's log is kept (LastTest.first.log); a test
# that passes only the second time is printed as FLAKY. Any other failure fails at once.
if ((rc != 0)) && [[ -s Testing/Temporary/LastTestsFailed.log ]]; then
  failed=$(sed 's/^[0-9]*://' Testing/Temporary/LastTestsFailed.log)
  timing=$(ctest -N -L '^(lab|attack)$' | sed -n 's/^ *Test *#[0-9]*: //p')
  if [[ -z $(comm -23 <(sort <<<"$failed") <(sort <<<"$timing")) ]]; then
    cp Testing/Temporary/LastTest.log Testing/Temporary/LastTest.first.log
    echo "test.sh: running the failed lab tests once more, alone:" $failed >&2
    rc=0
    ctest --output-on-failure --timeout 900 --rerun-failed || rc=$?
    again=$( ((rc == 0)) || sed 's/^[0-9]*://' Testing/Temporary/LastTestsFailed.log)
    for t in $failed; do
      if ! grep -qx "$t" <<<"$again"; then echo "test.sh: FLAKY (passed the second time): $t" >&2; fi
    done
  fi
fi
if ((rc != 0)); then
  # The failed checks again, last: a CI log cut to its head and tail still shows them.
  echo "test.sh: the failed checks (Testing/Temporary/LastTest.log):" >&2
  grep -E '^(FAILED |\[  FAILED  \]|[^ ]+:[0-9]+: Failure)' Testing/Temporary/LastTest.log \
    | tail -n 40 >&2 || true
fi
exit "$rc"
