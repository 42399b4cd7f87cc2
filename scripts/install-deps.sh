#!/usr/bin/env bash
# Installs podnet-exporter's build dependencies (and, with --test, the real peers the test
# suite runs against; with --sanitize, also the sanitizer and fuzzer toolchain) from Debian 12's
# packages. Idempotent: apt is skipped when all are present.
set -euo pipefail

# What a minimal Debian 12 root (mmdebstrap --variant=minbase) lacks for the build; .ci/run proves
# this list in such a root (scripts/fresh-root-check.sh), so a package missing here fails CI.
build_pkgs=(
  cmake g++ make pkg-config
  git  # names the revision in podnet_build_info and --version
  prometheus-cpp-dev libboost-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libc-ares-dev
  nlohmann-json3-dev libssl-dev zlib1g-dev
  libcrypt-dev  # crypt_r(3): bcrypt for basic_auth_users (--web.config.file)
  # gRPC health responder and probe (cmake -DPODNET_WITH_GRPC=OFF to build without). Debian's
  # gRPC CMake package imports grpc_cpp_plugin and links protobuf, which libgrpc++-dev does not
  # pull in.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
  # /metrics in the protobuf exposition format: Prometheus' metrics.proto, compiled by protoc
  protobuf-compiler golang-github-prometheus-client-model-dev
)
test_pkgs=(
  libgtest-dev libgmock-dev googletest
  ca-certificates  # npm ci (tests/deploy, tests/dashboards) reaches the npm registry over https
  iproute2 iputils-ping ethtool prometheus tcpdump curl procps python3
  prometheus-smokeping-prober iperf3 prometheus-blackbox-exporter
  unbound musl-tools
  python3-yaml   # the dashboard and rule tests read the rule files
  openssl        # lab_isolation and bench/discovery_5000: the fake API server's certificate
  nodejs         # npm-pinned validators: tests/deploy (kubernetes-models), tests/dashboards (@grafana/schema)
  clang-format   # ctest clang_format (scripts/format.sh --check)
  iptables conntrack  # lab_service: a Service VIP as kube-proxy's iptables mode builds it
  prometheus-alertmanager  # lab_alerts, lab_fleet, alertmanager_inhibit: the shipped alerts and inhibition
  chromium python3-pil  # report_html: the HTML report in a headless browser, its screenshot's pixels
  # ctest image: scripts/build-image.sh (mmdebstrap, umoci), skopeo copy, and the image run by
  # podman (runc: Debian 12's crun cannot start it on cgroup v1), else by bubblewrap
  mmdebstrap umoci skopeo podman runc bubblewrap
  # the arm64 image (scripts/build-arm64.sh): the cross compiler; qemu-user runs its binary
  g++-aarch64-linux-gnu qemu-user-static
)
# scripts/sanitize.sh and scripts/fuzz.sh (--sanitize): clang with its runtimes (ASan, UBSan,
# TSan and libFuzzer live in libclang-rt-14-dev), on top of the test packages.
sanitize_pkgs=(clang libclang-rt-14-dev)
# kubectl (tests/deploy: `kubectl kustomize`) is not a Debian package: where it is missing, the
# three tests that render the kustomizations are skipped with that reason (they fail with CI=true).

pkgs=("${build_pkgs[@]}")
if [[ "${1:-}" == "--test" || "${1:-}" == "--sanitize" ]]; then
  pkgs+=("${test_pkgs[@]}")
fi
if [[ "${1:-}" == "--sanitize" ]]; then
  pkgs+=("${sanitize_pkgs[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Debian's nodejs has npm in a package of its own; other nodejs builds (e.g. NodeSource's) bundle
# it and conflict with Debian's npm package, so ask for it only when the command is missing.
if [[ "${1:-}" == "--test" || "${1:-}" == "--sanitize" ]] && ! command -v npm >/dev/null 2>&1; then
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
