#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/) for a bounded time from its committed seed corpus
# (fuzz/corpus/<target>/), built with ASan + UBSan in build-asan/ (shared with
# scripts/sanitize.sh: run them one after the other, not at once).
# New inputs the fuzzer finds go to build-asan/fuzz-work/<target>/ (not committed). A crash,
# leak or timeout is copied into fuzz/corpus/<target>/ — once fixed, commit it there: it is
# replayed by the ctest regression test fuzz_<target>_regression and by every later run.
# Each target must get through its whole committed corpus within the time (libFuzzer's INITED
# line: the coverage the corpus reaches) and then fuzz on from there; the line per target gives
# both coverages. A target that did not finish its corpus fails: raise FUZZ_SECONDS.
# Usage: scripts/fuzz.sh [TARGET...]   FUZZ_SECONDS (default 10) per target, nproc targets at
# once; 10 targets ≈ 1 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --sanitize

# Every target fuzz/CMakeLists.txt builds (its PODNET_FUZZ_TARGETS list: one list, not two).
read -r -a all < <(sed -n '/^set(PODNET_FUZZ_TARGETS/,/)/p' fuzz/CMakeLists.txt |
  tr -d '()\n' | sed 's/^set *PODNET_FUZZ_TARGETS *//; s/  */ /g') || true  # no final newline: read says 1
if ((${#all[@]} == 0)); then
  echo "fuzz.sh: no PODNET_FUZZ_TARGETS in fuzz/CMakeLists.txt" >&2
  exit 2
fi
targets=("$@")
if ((${#targets[@]} == 0)); then targets=("${all[@]}"); fi
for t in "${targets[@]}"; do
  if [[ " ${all[*]} " != *" $t "* ]]; then
    echo "fuzz.sh: no target $t; the targets: ${all[*]}" >&2
    exit 2
  fi
done
seconds=${FUZZ_SECONDS:-10}
dir=build-asan
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

start=$(date +%s)
if [[ ! -f $dir/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPODNET_BUILD_TESTS=ON -DPODNET_SANITIZE=address -DPODNET_FUZZ=ON -DPODNET_UNITY=ON \
    -DPODNET_PCH=ON >/dev/null  # as scripts/sanitize.sh configures it
fi
nice cmake --build "$dir" --parallel "$(nproc)" --target "${targets[@]/#/fuzz_}"
echo "fuzz.sh: built in $(($(date +%s) - start)) s"

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# The targets run side by side, one a core (nproc at a time): each still has its own core for
# its FUZZ_SECONDS, and the stage takes half the time on CI's 2 cores.
fuzz_one() {  # fuzz_one TARGET: fuzzes it, prints its line; returns 1 on a failure
  local t=$1
  local work=$dir/fuzz-work/$t
  local artifacts=$dir/fuzz-artifacts/$t
  mkdir -p "$work" "$artifacts"
  local max_len=()
  if [[ $t == udp_echo_wire ]]; then max_len=(-max_len=65536); fi  # a whole UDP datagram
  local t0
  t0=$(date +%s)
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: one needing 2 GB is a bomb.
  if "$dir/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      "${max_len[@]}" -print_final_stats=1 -artifact_prefix="$artifacts/" \
      "$work" "fuzz/corpus/$t" >"$artifacts/log" 2>&1; then
    # "#N INITED cov: C ft: F ..." once the corpus (committed + earlier finds) has run;
    # "#N DONE cov: C ..." at the end.
    local inited done_cov units
    inited=$(grep -o 'INITED cov: [0-9]*' "$artifacts/log" | grep -o '[0-9]*$' || true)
    done_cov=$(grep -o 'DONE *cov: [0-9]*' "$artifacts/log" | grep -o '[0-9]*$' || true)
    units=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$artifacts/log" | grep -o '[0-9]*$')
    if [[ -z $inited ]]; then
      echo "fuzz.sh: $t: FAILED: the corpus did not finish in $seconds s (no INITED line)" >&2
      return 1
    fi
    echo "fuzz.sh: $t: $units inputs in $(($(date +%s) - t0)) s, no crash;" \
      "coverage: corpus $inited, end ${done_cov:-?}"
    return 0
  fi
  echo "fuzz.sh: $t: FAILED after $(($(date +%s) - t0)) s:" >&2
  grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$artifacts/log" | head -20 >&2
  local f
  for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*; do
    [[ -f $f ]] || continue
    cp "$f" "fuzz/corpus/$t/"
    echo "fuzz.sh: $t: regression input fuzz/corpus/$t/$(basename "$f") (commit it with the fix)" >&2
  done
  return 1
}
parallel=$(nproc)
status=0
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  mkdir -p "$dir/fuzz-artifacts/$t"
  rm -f "$dir/fuzz-artifacts/$t/status"
  { rc=0; fuzz_one "$t" || rc=$?; echo "$rc" >"$dir/fuzz-artifacts/$t/status"; } &
done
wait
for t in "${targets[@]}"; do  # each target's own exit status, whichever finished first
  if [[ "$(cat "$dir/fuzz-artifacts/$t/status" 2>/dev/null)" != 0 ]]; then status=1; fi
done
echo "fuzz.sh: total $(($(date +%s) - start)) s"
exit $status
