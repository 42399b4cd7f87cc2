#!/usr/bin/env bash
# Cross-builds the exporter for arm64 (build-arm64/podnet-exporter, an aarch64 ELF) on a Debian 12
# amd64 machine, for the arm64 image of scripts/build-image.sh --binary-arm64; no test, no tool,
# only the exporter. No multiarch change to this machine (no `dpkg --add-architecture`):
#   1. the sysroot, build-arm64/sysroot: mmdebstrap --variant=extract --arch=arm64 unpacks the
#      arm64 -dev packages of scripts/install-deps.sh's libraries (and their dependencies,
#      libstdc++-12-dev, metrics.proto's package, and protobuf-compiler-grpc, whose files
#      Debian's gRPC CMake package asks for) from this machine's Debian sources (scripts/lib/debian-sources.sh); nothing
#      is run in it. Kept and reused while its package list is the same (sysroot/.packages);
#      the .deb files it downloads are added to this machine's apt cache, where
#      scripts/build-image.sh finds the arm64 image's packages;
#   2. CMake with cmake/aarch64-linux-gnu.cmake (g++-aarch64-linux-gnu against the sysroot;
#      this machine's protoc, the same Debian version), PODNET_BUILD_TESTS=OFF, a unity build
#      (as scripts/sanitize.sh: fewer, larger units; nothing cached across CI runs; no
#      precompiled headers: GCC drops a PCH whose macros differ from a module's, as they do
#      here, -Winvalid-pch), RelWithDebInfo as build/; without GCC's -Wsubobject-linkage,
#      which a unity build sets off (a file's anonymous-namespace types are then in an
#      included file: grpc_health.cc's Impl), not the code;
#   3. the exporter target only.
# Root only (mmdebstrap --mode=root), for step 1; a build with the sysroot present needs none.
# Usage: scripts/build-arm64.sh [--jobs N]   (default: nproc). Prints each step's seconds.
# Packages it needs: mmdebstrap g++-aarch64-linux-gnu (scripts/install-deps.sh --test).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
if [[ "${1:-}" == "--jobs" ]]; then jobs=$2; fi
dir=$repo/build-arm64
sysroot=$dir/sysroot
started=$SECONDS

# The arm64 -dev packages: scripts/install-deps.sh's libraries (build_pkgs), and what the host
# compiler brings with it natively (libc6-dev, libstdc++-12-dev).
packages=(libc6-dev libstdc++-12-dev
          prometheus-cpp-dev libboost-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libc-ares-dev
          nlohmann-json3-dev libssl-dev zlib1g-dev libcrypt-dev libgrpc++-dev libprotobuf-dev
          golang-github-prometheus-client-model-dev protobuf-compiler-grpc)
want=$(printf '%s\n' "${packages[@]}")
if [[ ! -f "$sysroot/.packages" || "$(cat "$sysroot/.packages")" != "$want" ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "build-arm64: making the sysroot needs root (mmdebstrap --mode=root)" >&2
    exit 1
  fi
  source "$repo/scripts/lib/debian-sources.sh"
  rm -rf --one-file-system "$sysroot"
  mkdir -p "$dir"
  # This machine's arm64 (and all) .deb files seed mmdebstrap's cache (hard links); what it
  # downloads goes back to this machine's cache. The package lists: arm64's are not on an amd64
  # machine, so mmdebstrap runs `apt-get update` (~10 MB).
  seed='mkdir -p "$1/var/cache/apt/archives" &&
        for d in /var/cache/apt/archives/*_arm64.deb /var/cache/apt/archives/*_all.deb; do
          [ -e "$d" ] && ln "$d" "$1/var/cache/apt/archives/" 2>/dev/null; done; true'
  keep='for d in "$1"/var/cache/apt/archives/*.deb; do
          [ -e "/var/cache/apt/archives/${d##*/}" ] || cp "$d" /var/cache/apt/archives/ || true
        done'
  mmdebstrap --quiet --variant=extract --mode=root --architectures=arm64 "${debian_aptopts[@]}" \
    --include="$(IFS=,; echo "${packages[*]}")" --setup-hook="$seed" --extract-hook="$keep" \
    bookworm "$sysroot" "${debian_sources[@]}"
  # Absolute symbolic links point into this machine's /: made relative, inside the sysroot.
  find "$sysroot" -type l -lname '/*' -print0 | while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot$target")" "$link"
  done
  printf '%s\n' "$want" >"$sysroot/.packages"
  echo "build-arm64: sysroot in $((SECONDS - started)) s ($(du -sm "$sysroot" | cut -f1) MB)" >&2
fi
sysroot_s=$((SECONDS - started))

generator=()
if [[ ! -f "$dir/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi
werror=(${PODNET_WERROR:+-DPODNET_WERROR="$PODNET_WERROR"})
debuginfo=(${PODNET_DEBUG_INFO:+-DPODNET_DEBUG_INFO="$PODNET_DEBUG_INFO"})  # as scripts/build.sh
cmake -S "$repo" -B "$dir" "${generator[@]}" --toolchain "$repo/cmake/aarch64-linux-gnu.cmake" \
  -DPODNET_SYSROOT="$sysroot" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODNET_BUILD_TESTS=OFF \
  -DPODNET_UNITY=ON -DPODNET_PCH=OFF "${werror[@]}" "${debuginfo[@]}" \
  -DCMAKE_CXX_FLAGS=-Wno-subobject-linkage >/dev/null
nice cmake --build "$dir" --parallel "$jobs" --target podnet-exporter
echo "build-arm64: $dir/podnet-exporter; sysroot $sysroot_s s, build $((SECONDS - started - \
sysroot_s)) s" >&2
