#!/usr/bin/env bash
# Configures and builds podnet-exporter in ./build, installing what the build needs first.
# Usage: scripts/build.sh          the exporter only (build dependencies)
#        scripts/build.sh --test   also the unit tests and lab tools (and the test-time peers)
#        scripts/build.sh --test --configure-only   installs and configures, builds nothing
set -euo pipefail
cd "$(dirname "$0")/.."
tests=OFF
if [[ "${1:-}" == "--test" ]]; then tests=ON; fi
configure_only=false
if [[ "${2:-}" == "--configure-only" ]]; then configure_only=true; fi
scripts/install-deps.sh "${1:-}"
generator=()
if [[ ! -f build/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# PODNET_WERROR=ON (environment) makes every compiler warning an error (CI sets it).
# Unset: whatever build/ was configured with (a CI build stays -Werror, a user's stays without).
werror=(${PODNET_WERROR:+-DPODNET_WERROR="$PODNET_WERROR"})
# PODNET_FAST_TESTS=ON (environment) compiles the unit tests in unity batches with a PCH:
# faster from scratch, slower after an edit (CMakeLists.txt; CI sets it).
fast=(${PODNET_FAST_TESTS:+-DPODNET_FAST_TESTS="$PODNET_FAST_TESTS"})
# PODNET_DEBUG_INFO=lines (environment) compiles with line tables only (-g1), not full debug
# information: a quarter less compile time (CMakeLists.txt; CI sets it).
debuginfo=(${PODNET_DEBUG_INFO:+-DPODNET_DEBUG_INFO="$PODNET_DEBUG_INFO"})
# PODNET_REVISION (environment) names the revision where there is no git checkout (image builds).
revision=()
if [[ -n "${PODNET_REVISION:-}" ]]; then revision=(-DPODNET_REVISION="$PODNET_REVISION"); fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPODNET_BUILD_TESTS="$tests" "${werror[@]}" "${fast[@]}" "${debuginfo[@]}" "${revision[@]}" >/dev/null
if $configure_only; then exit 0; fi
if [[ $tests == OFF ]]; then
  cmake --build build --parallel "$(nproc)" --target podnet-exporter
else
  cmake --build build --parallel "$(nproc)"
fi
