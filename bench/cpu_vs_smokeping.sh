#!/usr/bin/env bash
# CPU and memory: podnet-exporter vs smokeping_prober probing the same 200 loopback addresses at
# 1 packet/s each for the same 60 s (one after the other), with dgram and raw ICMP sockets.
# As root, after scripts/build.sh. Options: see --help (PEERS, SECONDS_WINDOW, MODES may also come
# from the environment). Exit 0 even on a MISS; non-zero only if the bench itself broke.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
if [[ ! -x /usr/bin/prometheus-smokeping-prober ]]; then
  echo "# installing prometheus-smokeping-prober" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus-smokeping-prober >&2
  # The package's service is not wanted running next to the bench.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus-smokeping-prober 2>/dev/null; then
    systemctl stop prometheus-smokeping-prober || true
  fi
fi
exec python3 "$(dirname "$(readlink -f "$0")")/lib/cpu_vs_smokeping.py" "$@"
