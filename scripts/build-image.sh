#!/usr/bin/env bash
# Builds podnet-exporter's OCI image from Debian 12 packages, with no registry, base image or
# container engine, for this machine's architecture and, given --binary-arm64 (the exporter
# cross-built by scripts/build-arm64.sh), for arm64 too, and writes it as an OCI archive whose
# one reference is an image index (one manifest per architecture) that `skopeo copy --all`
# pushes:
#   skopeo copy --all oci-archive:build/podnet-exporter-0.2.0.oci.tar \
#     docker://REGISTRY/podnet-exporter:0.2.0
# (deploy/image/README.md: how to use it, what is in it, how it is tested).
#   1. the Debian packages that own the shared libraries the binary loads (`ldd`, `dpkg -S`; the
#      same packages serve arm64: Debian names a library's package alike on every architecture);
#   For each architecture (arm64: the packages' arm64 builds, from Debian's arm64 lists):
#   2. mmdebstrap --variant=extract: those packages, their library dependencies and
#      ca-certificates, unpacked (no shell, no dpkg, no apt, no maintainer script run), from this
#      machine's Debian sources (scripts/lib/debian-sources.sh, as scripts/fresh-root-check.sh);
#      package lists and .deb files come from this machine's apt lists and cache where they are
#      there (no `apt-get update`), the downloads are added to the cache;
#   3. in that root: the certificate bundle /etc/ssl/certs/ca-certificates.crt (what
#      update-ca-certificates writes) and OpenSSL's default paths to it; /var/lib/dpkg/status
#      naming the packages and versions (for image scanners); /etc/passwd and /etc/group with
#      root and podnet (65532); /etc/ld.so.cache (this machine's architecture only: arm64's
#      loader finds its libraries in its default directories, /usr/lib/aarch64-linux-gnu); every
#      library the binary needs (ELF DT_NEEDED, transitively) checked to be in the root; the
#      binary (debug sections stripped) as
#      /usr/bin/podnet-exporter and config/podnet.yaml as /etc/podnet-exporter/podnet.yaml, as
#      deploy/docker/Dockerfile; docs (but each copyright file), manual pages, locales, the
#      programs only maintainer scripts use (openssl's, debconf's) and /dev's nodes left out;
#   4. umoci: an image with that root as one layer and the image configuration of the
#      Dockerfile (user 65532:65532, ENTRYPOINT the binary with --config.file, ports, the
#      architecture);
#   5. the OCI layout's one reference podnet-exporter:VERSION (the binary's; the image the
#      DaemonSet names): an image index (OCI image-spec image-index.md) of the images, each
#      with its platform (linux/amd64, linux/arm64), in a tar.
# Root only (mmdebstrap --mode=root). Timestamps are SOURCE_DATE_EPOCH's (default: the commit
# time of HEAD). Prints the image's packages with their sizes, and the archive's size.
# Usage: scripts/build-image.sh [--binary build/podnet-exporter] [--binary-arm64 FILE]
#                               [--output FILE] [--root DIR]
#   --binary-arm64  also the arm64 image, of this aarch64 binary (build-arm64/podnet-exporter;
#                   its --version must be the same as --binary's)
#   --output        the OCI archive (default build/podnet-exporter-VERSION.oci.tar)
#   --root          also leave the image's root file system in DIR (for a look; this machine's
#                   architecture)
# Packages it needs: mmdebstrap umoci, and for arm64 binutils-aarch64-linux-gnu (strip; with
# g++-aarch64-linux-gnu) (scripts/install-deps.sh --test installs them).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

# The extract hook (mmdebstrap runs this script again as `build-image.sh --extract-hook ROOT`,
# with the apt cache in PODNET_IMAGE_APT_CACHE): the part of step 3 that needs the .deb files,
# which mmdebstrap removes after it.
if [[ "${1:-}" == "--extract-hook" ]]; then
  root=$2
  archives=$root/var/cache/apt/archives
  # The .deb files extracted: of the packages whose copyright file is in the root (Debian
  # policy: every package has one), the highest version in the cache of the image's
  # architecture (PODNET_IMAGE_ARCH) or `all` (the cache also has other packages, other
  # architectures' and older versions, from this machine's apt cache).
  declare -A deb_of version_of
  for doc in "$root"/usr/share/doc/*/copyright; do
    pkg=${doc%/copyright}
    pkg=${pkg##*/}
    for deb in "$archives/${pkg}_"*"_$PODNET_IMAGE_ARCH.deb" "$archives/${pkg}_"*_all.deb; do
      [[ -e "$deb" ]] || continue
      ver=$(dpkg-deb -f "$deb" Version)
      if [[ -z "${version_of[$pkg]:-}" ]] || dpkg --compare-versions "$ver" gt "${version_of[$pkg]}"
      then
        deb_of[$pkg]=$deb
        version_of[$pkg]=$ver
      fi
    done
  done
  # The cache keeps this build's files; apt's own cache gets what was downloaded.
  cache=$PODNET_IMAGE_APT_CACHE
  for pkg in "${!deb_of[@]}"; do
    deb=${deb_of[$pkg]}
    [[ -e "$cache/${deb##*/}" ]] || ln "$deb" "$cache/" 2>/dev/null || cp "$deb" "$cache/" || true
  done
  # /var/lib/dpkg/status: what the image holds, for `dpkg --root`-style readers and scanners.
  mkdir -p "$root/var/lib/dpkg"
  for pkg in $(printf '%s\n' "${!deb_of[@]}" | sort); do
    dpkg-deb -f "${deb_of[$pkg]}" | awk -v status="Status: install ok installed" \
      'NR == 1 { print; print status; next } { print }'
    echo
  done >"$root/var/lib/dpkg/status"
  exit 0
fi

binary=$repo/build/podnet-exporter
binary_arm64=
output=
keep_root=
while (($#)); do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --binary-arm64) binary_arm64=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    --root) keep_root=$2; shift 2 ;;
    *) echo "usage: $0 [--binary FILE] [--binary-arm64 FILE] [--output FILE] [--root DIR]" >&2
       exit 2 ;;
  esac
done
if [[ $(id -u) -ne 0 ]]; then
  echo "build-image: needs root (mmdebstrap --mode=root)" >&2
  exit 1
fi
for tool in mmdebstrap umoci; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build-image: $tool is missing (scripts/install-deps.sh --test installs it)" >&2
    exit 1
  fi
done
binary=$(realpath "$binary")
host_arch=$(dpkg --print-architecture)
arches=("$host_arch")
declare -A binary_of=([$host_arch]=$binary)
if [[ -n "$binary_arm64" ]]; then
  if [[ $host_arch == arm64 ]]; then
    echo "build-image: --binary-arm64 on an arm64 machine: give it as --binary" >&2
    exit 2
  fi
  if ! command -v aarch64-linux-gnu-strip >/dev/null 2>&1; then
    echo "build-image: aarch64-linux-gnu-strip is missing (scripts/install-deps.sh --test)" >&2
    exit 1
  fi
  binary_of[arm64]=$(realpath "$binary_arm64")
  arches+=(arm64)
fi
# The tag: the binary's version ("podnet-exporter, version 0.2.0 (revision ...)").
version=$("$binary" --version | sed -n '1s/.*version \([^ ]*\).*/\1/p')
if [[ ! "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]]; then
  echo "build-image: no version from $binary --version" >&2
  exit 1
fi
# The other architecture's binary cannot run here (without qemu): its read-only data must hold
# the version string, and it must be an ELF of that architecture.
if [[ -n "$binary_arm64" ]] &&
   ! { grep -aqF "$version" "$binary_arm64" &&
       readelf -h "$binary_arm64" 2>/dev/null | grep -q 'Machine: *AArch64'; }; then
  echo "build-image: $binary_arm64 is not an AArch64 build of version $version" >&2
  exit 1
fi
output=$(realpath -m "${output:-$repo/build/podnet-exporter-$version.oci.tar}")
revision=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
: "${SOURCE_DATE_EPOCH:=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
image=podnet-exporter:$version  # the OCI reference name: podman and containerd name it so
started=$SECONDS

# Step 1: the packages of the libraries the binary loads (usrmerge: dpkg may know a library as
# /lib/... or /usr/lib/...).
mapfile -t libs < <(ldd "$binary" |
                      awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
if ldd "$binary" | grep -q 'not found'; then
  echo "build-image: ldd: a library of $binary is not found" >&2
  exit 1
fi
declare -A owner_of
while IFS= read -r line; do  # "pkg[:arch][, pkg...]: path"
  owner_of[${line#*: }]=${line%%[:,]*}
done < <(for lib in "${libs[@]}"; do
           real=$(realpath "$lib")
           printf '%s\n' "$lib" "$real" "${lib#/usr}" "${real#/usr}" "/usr$lib" "/usr$real"
         done | sort -u | xargs dpkg -S 2>/dev/null || true)
packages=()
for lib in "${libs[@]}"; do
  real=$(realpath "$lib")
  owner=
  for p in "$lib" "$real" "${lib#/usr}" "${real#/usr}" "/usr$lib" "/usr$real"; do
    owner=${owner_of[$p]:-} && [[ -n "$owner" ]] && break
  done
  if [[ -z "$owner" ]]; then
    echo "build-image: no Debian package owns $lib" >&2
    exit 1
  fi
  packages+=("$owner")
done
mapfile -t packages < <(printf '%s\n' "${packages[@]}" ca-certificates | sort -u)
echo "build-image: packages: ${packages[*]}" >&2

source "$repo/scripts/lib/debian-sources.sh"
work=$(mktemp -d /var/tmp/podnet-image.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT
export PODNET_IMAGE_APT_CACHE=/var/cache/apt/archives
# Hard links, in one command (none when the cache is elsewhere or empty: then apt downloads).
seed='mkdir -p "$1/var/cache/apt/archives" &&
  { ln -t "$1/var/cache/apt/archives" /var/cache/apt/archives/*.deb 2>/dev/null || true; }'
hook="\"$repo/scripts/build-image.sh\" --extract-hook \"\$1\""
oci=$work/oci
umoci init --layout "$oci"
declare -A took_s

# needed_in_root ROOT BINARY: every shared library BINARY needs (DT_NEEDED, transitively) is in
# ROOT's library directories; prints the first one missing and fails otherwise.
needed_in_root() {
  local root=$1 todo=("$2") seen=" " file lib dir found
  while ((${#todo[@]})); do
    file=${todo[0]}
    todo=("${todo[@]:1}")
    for lib in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ $seen == *" $lib "* ]] && continue
      seen+="$lib "
      found=
      for dir in "$root"/usr/lib/*-linux-gnu "$root"/lib/*-linux-gnu "$root"/usr/lib "$root"/lib
      do
        if [[ -e "$dir/$lib" ]]; then found=$dir/$lib && break; fi
      done
      if [[ -z "$found" ]]; then
        echo "build-image: $lib (needed by ${file#"$root"}) is not in the image" >&2
        return 1
      fi
      todo+=("$(realpath "$found")")
    done
  done
}

debstrap() {  # debstrap USE_HOST_LISTS: the root of $arch in $root
  local extra=()
  if [[ $1 == true ]]; then
    extra=(--skip=update --setup-hook='mkdir -p "$1/var/lib/apt/lists" &&
             cp -p /var/lib/apt/lists/*_dists_bookworm* "$1/var/lib/apt/lists/"')
  fi
  rm -rf "$root"
  mmdebstrap --quiet --variant=extract --mode=root --architectures="$arch" \
    "${debian_aptopts[@]}" --include="$(IFS=,; echo "${packages[*]}")" --setup-hook="$seed" \
    "${extra[@]}" --extract-hook="$hook" bookworm "$root" "${debian_sources[@]}" \
    2> >(tee "$work/mmdebstrap.log" >&2)
}

for arch in "${arches[@]}"; do
arch_started=$SECONDS
root=$work/root-$arch
export PODNET_IMAGE_ARCH=$arch

# Step 2: mmdebstrap. Sources as scripts/fresh-root-check.sh's; this machine's package lists
# when it has them for every source and this architecture (no `apt-get update`; if they are too
# old for the mirror, one retry with the update), and its apt cache.
lists_ok=true
for s in "${debian_sources[@]}"; do
  read -r _ uri suite _ <<<"$s"
  prefix=$(sed -E 's|^[a-z]+://||; s|/+$||; s|/|_|g' <<<"$uri")_dists_${suite}_
  compgen -G "/var/lib/apt/lists/${prefix}*binary-${arch}_Packages*" >/dev/null || lists_ok=false
done
if ! debstrap "$lists_ok"; then
  # This machine's lists name a version the mirror no longer has: once more with fresh lists.
  [[ $lists_ok == true ]] && grep -q 'Failed to fetch' "$work/mmdebstrap.log" || exit 1
  echo "build-image: retrying with apt-get update (this machine's package lists are too old)" >&2
  debstrap false
fi
mmdebstrap_s=$((SECONDS - arch_started))

# Step 3 (the rest): what the image has besides the packages' files, and less.
# The certificate bundle, as update-ca-certificates writes it with ca-certificates.conf's
# default (every certificate the package ships), and OpenSSL's default paths to it (the
# symbolic links the openssl package ships; the binary itself is not needed).
mkdir -p "$root/etc/ssl/certs" "$root/usr/lib/ssl"
find "$root/usr/share/ca-certificates" -name '*.crt' -print0 | sort -z |
  xargs -0 cat >"$root/etc/ssl/certs/ca-certificates.crt"
ln -sfn /etc/ssl/certs "$root/usr/lib/ssl/certs"
ln -sfn /etc/ssl/certs/ca-certificates.crt "$root/usr/lib/ssl/cert.pem"
# What only a shell, dpkg, a reader of manuals or a package's maintainer scripts use; the
# copyright files stay.
find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
rm -rf "${root:?}"/usr/share/{man,locale,lintian,bash-completion,gdb,pixmaps,perl5,debconf} \
  "${root:?}"/usr/share/ca-certificates "${root:?}"/usr/{bin,sbin,lib/ssl/misc} \
  "$root"/etc/{apt,dpkg,ca-certificates,debconf.conf,fstab,hostname,resolv.conf} \
  "$root"/var/lib/apt "$root"/var/cache/apt "$root"/var/cache/debconf
find "$root/usr/share/doc" -depth -type d -empty -delete
# Mount points (the root is read-only at run time) and the runtime's files.
mkdir -p "$root"/{dev,proc,sys,run,etc/podnet-exporter,usr/bin}
install -d -m 1777 "$root/tmp"
printf '%s\n' root:x:0:0:root:/root:/usr/sbin/nologin \
  podnet:x:65532:65532:podnet-exporter:/nonexistent:/usr/sbin/nologin >"$root/etc/passwd"
printf 'root:x:0:\npodnet:x:65532:\n' >"$root/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
strip=strip
if [[ $arch == "$host_arch" ]]; then
  ldconfig -r "$root"  # /etc/ld.so.cache, as libc6's trigger would
else
  strip=aarch64-linux-gnu-strip
fi
$strip --strip-debug -o "$root/usr/bin/podnet-exporter" "${binary_of[$arch]}"
install -m 0644 "$repo/config/podnet.yaml" "$root/etc/podnet-exporter/podnet.yaml"
needed_in_root "$root" "$root/usr/bin/podnet-exporter"

# Step 4: the image, tagged with its architecture in the layout: one layer, the image
# configuration. /dev's nodes (mmdebstrap's) stay out: /dev is the runtime's.
tar -C "$root" --sort=name --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime \
  --exclude='./dev/*' -cf "$work/layer-$arch.tar" .
umoci new --image "$oci:$arch"
umoci raw add-layer --image "$oci:$arch" --history.created="$created" \
  --history.created_by="scripts/build-image.sh (mmdebstrap --variant=extract: ${packages[*]})" \
  "$work/layer-$arch.tar"
umoci config --image "$oci:$arch" --created="$created" --history.created="$created" \
  --history.created_by="scripts/build-image.sh (user, entrypoint, ports)" \
  --architecture="$arch" --os=linux \
  --config.user=65532:65532 --config.workingdir=/ \
  --config.env=PATH=/usr/bin \
  --config.entrypoint=/usr/bin/podnet-exporter \
  --config.entrypoint=--config.file=/etc/podnet-exporter/podnet.yaml \
  --config.exposedports=9479/tcp --config.exposedports=9479/udp \
  --config.exposedports=5201/tcp --config.exposedports=9480/tcp \
  --config.label=org.opencontainers.image.title=podnet-exporter \
  --config.label=org.opencontainers.image.version="$version" \
  --config.label=org.opencontainers.image.revision="$revision" \
  --config.label=org.opencontainers.image.created="$created"

# What is in it: each package's installed size (as dpkg counts it, before the removals above)
# and the image's own sizes.
echo "build-image: image $image ($arch), packages:" >&2
awk -F': ' '/^Package: /{p=$2} /^Version: /{v=$2} /^Installed-Size: /{s=$2}
            /^$/ && p { printf "build-image:   %-28s %-24s %6d KiB\n", p, v, s; p="" }' \
  "$root/var/lib/dpkg/status" >&2
printf 'build-image: %s: root file system %s KiB (binary %s KiB); mmdebstrap %d s, in all %d s\n' \
  "$arch" "$(du -sk "$root" | cut -f1)" "$(du -k "$root/usr/bin/podnet-exporter" | cut -f1)" \
  "$mmdebstrap_s" $((SECONDS - arch_started)) >&2
done
umoci gc --layout "$oci"

# Step 5: one reference, an image index of the architectures' manifests with their platforms
# (what `docker buildx` and `skopeo copy --all` write), in place of the per-architecture tags.
python3 - "$oci" "$image" "${arches[@]}" <<'PY'
import hashlib, json, os, sys
oci, ref, arches = sys.argv[1], sys.argv[2], sys.argv[3:]
path = os.path.join(oci, "index.json")
with open(path) as f:
    layout = json.load(f)
tagged = {m["annotations"]["org.opencontainers.image.ref.name"]: m for m in layout["manifests"]}
manifests = []
for arch in arches:
    m = {k: v for k, v in tagged[arch].items() if k != "annotations"}
    m["platform"] = {"architecture": arch, "os": "linux"}
    manifests.append(m)
blob = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                   "manifests": manifests}, indent=None, separators=(",", ":")).encode()
digest = hashlib.sha256(blob).hexdigest()
with open(os.path.join(oci, "blobs", "sha256", digest), "wb") as f:
    f.write(blob)
layout["manifests"] = [{"mediaType": "application/vnd.oci.image.index.v1+json",
                        "digest": "sha256:" + digest, "size": len(blob),
                        "annotations": {"org.opencontainers.image.ref.name": ref}}]
with open(path, "w") as f:
    json.dump(layout, f, separators=(",", ":"))
PY
mkdir -p "$(dirname "$output")"
tar -C "$oci" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$SOURCE_DATE_EPOCH" \
  -cf "$output.tmp" oci-layout index.json blobs
mv "$output.tmp" "$output"

if [[ -n "$keep_root" ]]; then
  rm -rf "$keep_root"
  mkdir -p "$keep_root"
  tar -C "$keep_root" -xf "$work/layer-$host_arch.tar"
fi
printf 'build-image: wrote %s (%s KiB): %s as an index of %s; in all %d s\n' "$output" \
  "$(du -k "$output" | cut -f1)" "$image" "${arches[*]}" $((SECONDS - started)) >&2
