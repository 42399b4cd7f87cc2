#!/usr/bin/env bash
# Builds podnet-exporter and runs every test: unit tests (GoogleTest) and, as root, the
# network-namespace lab integration tests with a real Prometheus. Installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --test
cd build
ctest --output-on-failure --timeout 900 "$@"
