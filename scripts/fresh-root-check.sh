#!/usr/bin/env bash
# Proves the README's two commands on a minimal Debian 12 root, as a new user's machine would be:
#   1. mmdebstrap --variant=minbase bookworm (this machine's Debian apt sources; nothing else from
#      the host is copied in: no packages, no apt cache, no build tree);
#   2. a clean clone of this repository's HEAD at /src/podnet-exporter inside it;
#   3. the run command, `scripts/run.sh`, with `--config.check` appended: installs the build
#      dependencies with scripts/install-deps.sh, builds, validates the default configuration;
#   4. `scripts/run.sh` exactly as the README gives it, in a network namespace of its own (so it
#      cannot collide with anything on this machine's ports): /metrics must answer with real RTT
#      series, then SIGTERM must stop it with exit 0;
#   5. the set-up part of the test command, `scripts/test.sh --setup-only`: installs the test
#      dependencies (scripts/install-deps.sh --test) and configures the build with the tests on,
#      which finds every test package CMake asks for (GoogleTest, promtool, python3).
#      The test targets themselves are built and run by `scripts/test.sh` on the CI machine
#      (.ci/run's next stage), with the same compiler and packages: building them here again
#      proved nothing more and cost ~10 minutes.
# A package missing from scripts/install-deps.sh fails step 3 or 5.
# With PODNET_CCACHE_DIR set (.ci/run sets it), the root's compiler runs under ccache with that
# directory bind-mounted: the build in the root is done in full (an empty cache), and the CI
# machine's own build of the same files afterwards is served from it. ccache is installed in
# the root for this alone, after nothing else: its dependencies are runtime libraries that no
# build step reads, so a package missing from install-deps.sh still fails as before (a missing
# header misses the cache and fails the compile; linking and CMake's checks are not cached).
# Root only (mount, chroot,
# ip netns). Usage: scripts/fresh-root-check.sh [--keep]   (--keep leaves the root for a look)
# Exit 0 when every step passed; otherwise the step's output and exit 1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
keep=false
[[ "${1:-}" == "--keep" ]] && keep=true

if [[ $(id -u) -ne 0 ]]; then
  echo "fresh-root-check: needs root (mmdebstrap, chroot, mount, ip netns)" >&2
  exit 1
fi
if [[ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]]; then
  echo "fresh-root-check: note: uncommitted changes are not checked (the root gets a clone of HEAD)" >&2
fi

step_start=$SECONDS
step() {  # step NAME: prints the previous step's time and this step's name
  printf 'fresh-root-check: [%4ds] %s\n' $((SECONDS - step_start)) "$1" >&2
}

if ! command -v mmdebstrap >/dev/null 2>&1; then
  step "installing mmdebstrap on this machine"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap \
    >/dev/null
fi

# This machine's Debian bookworm sources and how it reaches them: debian_sources, debian_aptopts.
source "$repo/scripts/lib/debian-sources.sh"

work=$(mktemp -d /var/tmp/podnet-fresh-root.XXXXXX)
root=$work/root
ns=pnfresh$$
exporter_pid=
cleanup() {
  local rc=$?
  if [[ -n "$exporter_pid" ]] && kill -0 "$exporter_pid" 2>/dev/null; then
    kill -KILL "$exporter_pid" 2>/dev/null || true
  fi
  ip netns del "$ns" 2>/dev/null || true
  for m in "$root/ccache" "$root/dev/pts" "$root/proc" "$root/sys"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  if $keep; then
    echo "fresh-root-check: root kept at $root" >&2
  else
    rm -rf --one-file-system "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "mmdebstrap --variant=minbase bookworm (${#debian_sources[@]} sources)"
mmdebstrap --quiet --variant=minbase --mode=root "${debian_aptopts[@]}" bookworm "$root" \
  "${debian_sources[@]}"

step "cloning HEAD ($(git -C "$repo" rev-parse --short=12 HEAD)) into the root"
mkdir -p "$root/src"
git clone --quiet --no-local "$repo" "$root/src/podnet-exporter"
git -C "$root/src/podnet-exporter" -c advice.detachedHead=false checkout --quiet \
  "$(git -C "$repo" rev-parse HEAD)"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mkdir -p "$root/dev/pts"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"

rootenv=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
         PODNET_WERROR="${PODNET_WERROR:-OFF}" PODNET_DEBUG_INFO="${PODNET_DEBUG_INFO:-full}")
if [[ -n "${PODNET_CCACHE_DIR:-}" ]]; then
  mkdir -p "$PODNET_CCACHE_DIR" "$root/ccache"
  mount --bind "$PODNET_CCACHE_DIR" "$root/ccache"
  # The same settings as .ci/run's on this machine, so that both builds' keys match: paths
  # relative to the checkout, the working directory left out, the compiler known by content.
  rootenv+=(CCACHE_DIR=/ccache CCACHE_BASEDIR=/src/podnet-exporter CCACHE_NOHASHDIR=1
            CCACHE_COMPILERCHECK=content CMAKE_CXX_COMPILER_LAUNCHER=ccache
            CMAKE_C_COMPILER_LAUNCHER=ccache)
fi

in_root() {  # in_root COMMAND...: runs a shell command line in the checkout inside the root
  chroot "$root" /usr/bin/env -i "${rootenv[@]}" /bin/bash -c "cd /src/podnet-exporter && $*"
}

if [[ -n "${PODNET_CCACHE_DIR:-}" ]]; then
  step "ccache in the root (PODNET_CCACHE_DIR)"
  in_root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends ccache >/dev/null"
fi

step "README run command: scripts/run.sh config/podnet.yaml --config.check (install, build, check)"
in_root scripts/run.sh config/podnet.yaml --config.check

step "README run command: scripts/run.sh, in network namespace $ns"
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
log=$work/run.log
# ip netns exec and chroot exec in place, and run.sh execs the exporter: $! is the exporter.
ip netns exec "$ns" chroot "$root" /usr/bin/env -i "${rootenv[@]}" \
  /bin/bash -c 'cd /src/podnet-exporter && exec scripts/run.sh' >"$log" 2>&1 &
exporter_pid=$!

scrape() {  # scrape: /metrics from inside the namespace, with bash's /dev/tcp (no curl needed)
  ip netns exec "$ns" timeout 5 bash -c \
    'exec 3<>/dev/tcp/127.0.0.1/9479 && printf "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" >&3 && cat <&3' \
    2>/dev/null || true
}
received=""
for _ in $(seq 1 90); do  # at most ~90 s: the first RTT train starts within its 10 s interval
  if ! kill -0 "$exporter_pid" 2>/dev/null; then
    break
  fi
  body=$(scrape)
  # Whole-input awk and bash matching, no early-exiting reader: with pipefail, a reader that
  # stops first would fail the pipeline with SIGPIPE.
  received=$(awk '/^podnet_rtt_packets_received_total\{/ && $NF > 0 && !n++' <<<"$body")
  if [[ -n "$received" && "$body" == "HTTP/1.1 200"* && "$body" == *$'\npodnet_build_info{'* ]]; then
    break
  fi
  received=""
  sleep 1
done
if [[ -z "$received" ]]; then
  echo "fresh-root-check: FAIL: /metrics never showed a received RTT packet; the exporter said:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
echo "fresh-root-check: /metrics answers: $received" >&2
kill -TERM "$exporter_pid"
rc=0
wait "$exporter_pid" || rc=$?
exporter_pid=
if ((rc != 0)); then
  echo "fresh-root-check: FAIL: the exporter exited $rc on SIGTERM; it said:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi

step "README test command, set-up part: scripts/test.sh --setup-only (install, configure)"
in_root scripts/test.sh --setup-only

step "passed"
