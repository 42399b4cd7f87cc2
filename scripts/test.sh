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
ctest --output-on-failure --timeout 900 -j2 "$@" || rc=$?
if ((rc != 0)); then
  # The failed checks again, last: a CI log cut to its head and tail still shows them.
  echo "test.sh: the failed checks (Testing/Temporary/LastTest.log):" >&2
  grep -E '^(FAILED |\[  FAILED  \]|[^ ]+:[0-9]+: Failure)' Testing/Temporary/LastTest.log \
    | tail -n 40 >&2 || true
fi
exit "$rc"
