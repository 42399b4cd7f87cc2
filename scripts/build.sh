#!/usr/bin/env bash
# Configures and builds podnet-exporter (and its tests) in ./build. Installs build dependencies
# first. Usage: scripts/build.sh [--test]   (--test also installs the test-time peers)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh "$@"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [[ -f build/CMakeCache.txt ]]; then
  cmake -S . -B build >/dev/null
else
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build --parallel "$(nproc)"
