#!/usr/bin/env bash
# Builds the exporter and its unit tests under sanitizers, each kind in a build directory of its
# own (clang), and runs the unit tests and the command-line test (cli: real exporter processes
# on loopback — reload, SIGHUP, the burst responder against stock iperf3) under each:
#   address  build-asan/  ASan + UBSan (and LeakSanitizer); any report fails the run
#   thread   build-tsan/  TSan
# build-asan also holds the libFuzzer targets (PODNET_FUZZ=ON) that scripts/fuzz.sh runs: run
# this script first, or the two one after the other, never both at once.
# Usage: scripts/sanitize.sh [--build-only] [address|thread]...   (default: both). Exit 0 only
# when all pass. --build-only builds and runs nothing (address: the fuzz targets too), for a
# build started early beside other work (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --sanitize

build_only=false
if [[ "${1:-}" == "--build-only" ]]; then build_only=true; shift; fi
kinds=("$@")
if ((${#kinds[@]} == 0)); then kinds=(address thread); fi
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
jobs=$(nproc)

# Reports fail the test that produced them. ASan and UBSan: no suppressions. TSan: only
# scripts/tsan.supp, races TSan sees inside gRPC's uninstrumented libraries, each with its
# written reason; never a frame of ours.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"
# Under TSan the unit tests run without GrpcProbeTest.*, GrpcHealthResponderTest.* and the
# golden-file test of every kind's families (KindFamiliesTest.NamesHelpTexts...: its gRPC peer
# probe opens a channel; TSan reported gRPC's own thread freeing an absl::Status payload that
# destroying the probe had allocated, 2026-12-03) (they run under ASan+UBSan and in the
# plain build): Debian's libgrpc is not built with -fsanitize=thread, so TSan cannot see the
# synchronization of gRPC's completion queue, and every call handed from our thread to gRPC's
# and back is reported: 227 reports in those 3 tests with scripts/tsan.supp, all in gRPC's
# C++ API inlined into our code (CallOpSet, Status, ByteBuffer) or in the callback gRPC copies
# and runs on its threads. A suppression wide enough to hide them would also hide a real race
# in our callbacks. The exporters of the cli test (gRPC responder on) run under TSan.
# Sanitized code runs several times slower: tests that wait for something to happen (the unit
# tests' Eventually) wait this many times longer. What they assert is unchanged.
export PODNET_TEST_TIME_SCALE=${PODNET_TEST_TIME_SCALE:-5}

status=0
for kind in "${kinds[@]}"; do
  case "$kind" in
    address) dir=build-asan; extra=(-DPODNET_FUZZ=ON); filter=(); also=(fuzz_targets) ;;
    thread) dir=build-tsan; extra=(); also=(); filter=(--gtest_filter=-GrpcProbeTest.*:GrpcHealthResponderTest.*:KindFamiliesTest.NamesHelpTextsLabelsAndBucketsAsTheGoldenFile) ;;
    *) echo "sanitize.sh: unknown kind $kind (address or thread)" >&2; exit 2 ;;
  esac
  start=$(date +%s)
  # PODNET_UNITY, PODNET_PCH: the same code, compiled in fewer, larger units (CMakeLists.txt).
  if [[ ! -f $dir/CMakeCache.txt ]]; then
    CC=clang CXX=clang++ cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPODNET_BUILD_TESTS=ON -DPODNET_SANITIZE="$kind" -DPODNET_UNITY=ON -DPODNET_PCH=ON \
      "${extra[@]}" >/dev/null
  fi
  targets=(podnet_unit_tests podnet-exporter)
  if $build_only; then targets+=("${also[@]}"); fi
  nice cmake --build "$dir" --parallel "$jobs" --target "${targets[@]}"
  built=$(date +%s)
  if $build_only; then
    echo "sanitize.sh: $kind: built in $((built - start)) s (--build-only)"
    continue
  fi
  echo "sanitize.sh: $kind: built in $((built - start)) s; running the unit tests"
  # The unit tests in 4 x nproc GoogleTest shards side by side (each test in one of them), and
  # the cli test beside them: under a sanitizer most of them wait on timers and sockets, scaled
  # by PODNET_TEST_TIME_SCALE (ASan, 2 cores: the unit tests 37 CPU-s in 66 s of wall with 2
  # shards, 43 s with 4, 35 s with 8; TSan 61 s with 2, 32 s with 8; cli 58 s, 15 CPU-s).
  (cd "$dir" && ctest --output-on-failure -R '^cli$') >"$dir/cli-test.log" 2>&1 &
  cli_pid=$!
  shards=$((4 * jobs))
  pids=()
  for ((shard = 0; shard < shards; shard++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard "$dir/tests/podnet_unit_tests" \
      --gtest_brief=1 "${filter[@]}" >"$dir/unit-tests-shard-$shard.log" 2>&1 &
    pids+=($!)
  done
  for shard in "${!pids[@]}"; do
    rc=0
    wait "${pids[$shard]}" || rc=$?
    echo "sanitize.sh: $kind: unit tests, shard $((shard + 1)) of $shards (exit $rc):"
    cat "$dir/unit-tests-shard-$shard.log"
    if ((rc != 0)); then
      echo "sanitize.sh: $kind: unit tests FAILED (shard $((shard + 1)) of $shards)" >&2
      status=1
    fi
  done
  rc=0
  wait "$cli_pid" || rc=$?
  cat "$dir/cli-test.log"
  if ((rc != 0)); then
    echo "sanitize.sh: $kind: cli test FAILED" >&2
    status=1
  fi
  echo "sanitize.sh: $kind: tests ran in $(($(date +%s) - built)) s (total $(($(date +%s) - start)) s)"
done
exit $status
