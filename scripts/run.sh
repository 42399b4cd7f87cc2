#!/usr/bin/env bash
# Builds podnet-exporter and runs it on config/podnet.yaml (or the config given as $1).
# Extra arguments go to the exporter, e.g. scripts/run.sh config/podnet.yaml --log.level=debug
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
config=${1:-config/podnet.yaml}
shift || true
exec ./build/podnet-exporter --config.file="$config" "$@"
