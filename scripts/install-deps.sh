#!/usr/bin/env bash
# Installs podnet-exporter's build dependencies (and, with --test, the real peers the test
# suite runs against) from Debian 12's packages. Idempotent: apt is skipped when all are present.
set -euo pipefail

build_pkgs=(
  cmake g++ make pkg-config
  prometheus-cpp-dev libboost-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libc-ares-dev
  nlohmann-json3-dev libssl-dev zlib1g-dev
  libgrpc++-dev  # gRPC health responder and probe (cmake -DPODNET_WITH_GRPC=OFF to build without)
)
test_pkgs=(
  libgtest-dev libgmock-dev googletest
  iproute2 iputils-ping ethtool prometheus tcpdump curl procps python3
  prometheus-smokeping-prober iperf3 prometheus-blackbox-exporter
  unbound musl-tools
  python3-yaml   # the dashboard and rule tests read the rule files
  openssl        # lab_isolation and bench/discovery_5000: the fake API server's certificate
  nodejs         # npm-pinned validators: tests/deploy (kubernetes-models), tests/dashboards (@grafana/schema)
)
# kubectl (tests/deploy: `kubectl kustomize`) is not a Debian package; the machine image has it.

pkgs=("${build_pkgs[@]}")
if [[ "${1:-}" == "--test" ]]; then
  pkgs+=("${test_pkgs[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Debian's nodejs has npm in a package of its own; other nodejs builds (e.g. NodeSource's) bundle
# it and conflict with Debian's npm package, so ask for it only when the command is missing.
if [[ "${1:-}" == "--test" ]] && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi
echo "install-deps: installing ${missing[*]}" >&2
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
