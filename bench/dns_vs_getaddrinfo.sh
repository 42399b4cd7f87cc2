#!/usr/bin/env bash
# DNS lookups side by side: podnet-exporter's resolver models (c-ares on the wire, as the DNS
# probe runs them) against glibc's getaddrinfo, for the same names under the same resolv.conf,
# against one local unbound in a network namespace (nothing leaves it). Per case: questions
# per lookup, mean wall time per lookup, process CPU (user + system) per 1,000 lookups.
#
# Usage (root): bench/dns_vs_getaddrinfo.sh [BUILD_DIR] [LOOKUPS]   (defaults: build, 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
n=${2:-1000}
ours=$build/podnet-bench-dns
glibc=$build/tests/podnet-lab-getaddrinfo-glibc
for f in "$ours" "$glibc"; do
  [[ -x $f ]] || { echo "missing $f: build first (ninja -C $build)" >&2; exit 2; }
done
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespace)" >&2; exit 2; }

ns=pnbench-dns-$$
tmp=$(mktemp -d)
cleanup() {
  if [[ -n ${unbound_pid:-} ]] && kill "$unbound_pid" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$unbound_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "/etc/netns/$ns" "$tmp"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
# The lab tests' unbound (tests/lib/labkit.py start_unbound: the lab's zones, nothing forwarded),
# on 127.0.0.1:53 of the namespace; its config and log in $tmp.
unbound_pid=$(python3 -c 'import sys; sys.path.insert(0, "tests/lib"); import labkit
print(labkit.start_unbound(sys.argv[1], sys.argv[2]).pid)' "$ns" "$tmp")
mkdir -p "/etc/netns/$ns"
conf=/etc/netns/$ns/resolv.conf
cat > "$conf" <<CONF
nameserver 127.0.0.1
search podnet.svc.cluster.local svc.cluster.local cluster.local ap-northeast-2.compute.internal
options ndots:5
CONF
for _ in $(seq 50); do
  ip netns exec "$ns" "$glibc" sts.ap-northeast-2.amazonaws.com. >/dev/null 2>&1 && break
  sleep 0.1
done

# CPU of a child process (user + system, ms) and its output.
cpu_of() {
  python3 -c 'import resource,subprocess,sys
r=subprocess.run(sys.argv[1:],capture_output=True,text=True)
u=resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.stdout.strip(), "%.1f" % ((u.ru_utime+u.ru_stime)*1e3))' "$@"
}

printf '%-40s %-22s %9s %12s %16s\n' name tool questions "us/lookup" "CPU ms/1000"
for name in sts.ap-northeast-2.amazonaws.com sts.ap-northeast-2.amazonaws.com. \
            kubernetes.default; do
  # glibc: getaddrinfo in a loop (one process), questions counted by our glibc model run.
  out=$(cpu_of ip netns exec "$ns" "$glibc" -n "$n" "$name")
  g_us=$(awk '{print $(NF-1)}' <<<"$out")
  g_cpu=$(awk -v n="$n" '{printf "%.1f", $NF * 1000 / n}' <<<"$out")
  for res in glibc musl; do
    line=$(ip netns exec "$ns" "$ours" "$res" "$conf" "$n" "$name" || true)
    q=$(sed -n 's/.*questions=\([0-9.]*\).*/\1/p' <<<"$line")
    us=$(sed -n 's/.*wall_us=\([0-9.]*\).*/\1/p' <<<"$line")
    cpu=$(sed -n 's/.*cpu_ms_per_1000=\([0-9.]*\).*/\1/p' <<<"$line")
    printf '%-40s %-22s %9s %12s %16s\n' "$name" "podnet model $res" "$q" "$us" "$cpu"
    [[ $res == glibc ]] && g_q=$q
  done
  printf '%-40s %-22s %9s %12s %16s\n' "$name" "glibc getaddrinfo" "$g_q" "$g_us" "$g_cpu"
done
