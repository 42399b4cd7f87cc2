#!/usr/bin/env bash
# podnet-exporter network-namespace lab: four "Pods" on one L2 segment, with user-space delay
# lines standing in for the distance between nodes and zones (this kernel has no netem).
#
#   lab.sh up | down | status
#   lab.sh delay zone|cross US   sets that delay line's one-way delay at run time (a latency step:
#                                RTT moves by 2 x the change); frames already queued keep theirs
#
# Environment:
#   PODNET_LAB_PREFIX          namespace prefix (default pnlab)
#   PODNET_DELAYLINE           path to the podnet-lab-delayline binary (required for up)
#   PODNET_LAB_ZONE_DELAY_US   one-way delay to the same-zone peer (default 160)
#   PODNET_LAB_CROSS_DELAY_US  one-way delay to the cross-zone peer (default 260)
#   PODNET_LAB_MAX_SECONDS     delay lines exit by themselves after this long (default 3600)
#   PODNET_LAB_OFFLOADS        on (default): leave veth offloads alone, the delay line passes
#                              GSO frames and partial checksums through; off: turn tso/gso/gro
#                              off on every lab interface with ethtool (needs the ethtool package)
#   PODNET_LAB_RT_PRIORITY     SCHED_FIFO priority of the delay lines (default 10; 0 = normal
#                              scheduling).  Keeps the delays exact while the machine is busy
#                              (a parallel build); each delay line only spins while a frame is due.
#   PODNET_LAB_STATE_DIR       pid files and logs (default /run/podnet-lab/$PODNET_LAB_PREFIX)
#
# Safety: the Pods get only connected routes for 10.213.0.0/24 and fd00:213::/64, so no lab
# traffic can leave the namespaces the lab creates.  Every wait below is bounded.
set -euo pipefail

PREFIX="${PODNET_LAB_PREFIX:-pnlab}"
ZONE_DELAY_US="${PODNET_LAB_ZONE_DELAY_US:-160}"
CROSS_DELAY_US="${PODNET_LAB_CROSS_DELAY_US:-260}"
MAX_SECONDS="${PODNET_LAB_MAX_SECONDS:-3600}"
OFFLOADS="${PODNET_LAB_OFFLOADS:-on}"
RT_PRIORITY="${PODNET_LAB_RT_PRIORITY:-10}"

die() { echo "lab.sh: $*" >&2; exit 1; }
note() { echo "lab.sh: $*" >&2; }

[[ "$PREFIX" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,23}$ ]] || die "bad PODNET_LAB_PREFIX '$PREFIX'"
STATE_DIR="${PODNET_LAB_STATE_DIR:-/run/podnet-lab/$PREFIX}"

# Namespaces.  Pods: client and same on node-a (bridge, no delay); zone behind node-b's delay
# line; cross behind node-c's delay line.
NS_CLIENT="$PREFIX-client"
NS_SAME="$PREFIX-same"
NS_ZONE="$PREFIX-zone"
NS_CROSS="$PREFIX-cross"
NS_NODE_A="$PREFIX-node-a"
NS_NODE_B="$PREFIX-node-b"
NS_NODE_C="$PREFIX-node-c"
POD_NS=("$NS_CLIENT" "$NS_SAME" "$NS_ZONE" "$NS_CROSS")
INFRA_NS=("$NS_NODE_A" "$NS_NODE_B" "$NS_NODE_C")

V4_NET=10.213.0
V6_NET=fd00:213:
declare -A POD_INDEX=(["$NS_CLIENT"]=1 ["$NS_SAME"]=2 ["$NS_ZONE"]=3 ["$NS_CROSS"]=4)

need_root() { [[ $EUID -eq 0 ]] || die "must run as root"; command -v ip >/dev/null || die "ip (iproute2) not found"; }

lab_namespaces() {  # every namespace carrying the prefix, whether this script knows it or not
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX//./\\.}-" | sort || true
}

pid_alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }

# Sends TERM, waits up to ~3 s, then KILL.  Only for pids the lab owns.
stop_pid() {
  local pid="$1" i
  pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 30; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.1
  done
  note "pid $pid ignored SIGTERM, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 20; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.1
  done
  note "pid $pid still alive"
}

is_our_delayline() {  # pid's command line must be a delay line (guards against pid reuse)
  local pid="$1"
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- ' --delay-us '
}

cmd_down() {
  need_root
  local f pid ns
  if [[ -d "$STATE_DIR" ]]; then
    for f in "$STATE_DIR"/*.pid; do
      [[ -e "$f" ]] || continue
      pid="$(cat "$f" 2>/dev/null || true)"
      if [[ "$pid" =~ ^[0-9]+$ ]] && is_our_delayline "$pid"; then
        stop_pid "$pid"
        local log="${f%.pid}.log"
        [[ -r "$log" ]] && { tail -n 1 "$log" | sed 's/^/lab.sh: /' >&2 || true; }
      fi
      rm -f "$f"
    done
  fi
  # Anything else still running inside a lab namespace would keep it alive after `ip netns del`.
  for ns in $(lab_namespaces); do
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
      pid_alive "$pid" || continue
      note "stopping pid $pid ($({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | cut -c1-60)) in $ns"
      stop_pid "$pid"
    done
  done
  for ns in $(lab_namespaces); do
    ip netns del "$ns" 2>/dev/null || note "could not delete namespace $ns"
  done
  local left
  left="$(lab_namespaces)"
  [[ -z "$left" ]] || die "namespaces left over: $left"
  return 0
}

set_sysctl() {  # ns key=value...  (best effort: some keys do not exist on every kernel)
  local ns="$1"; shift
  local kv
  for kv in "$@"; do
    ip netns exec "$ns" sysctl -q -w "$kv" >/dev/null 2>&1 || note "$ns: could not set $kv"
  done
}

offloads_off() {  # ns ifname
  ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1 ||
    note "$1: ethtool -K $2 failed"
}

start_delayline() {  # name ns iface_a iface_b delay_us
  local name="$1" ns="$2" a="$3" b="$4" delay="$5" i pid
  local log="$STATE_DIR/$name.log" pidf="$STATE_DIR/$name.pid" delayf="$STATE_DIR/$name.delay"
  : >"$log"
  echo "$delay" >"$delayf"
  ip netns exec "$ns" nohup "$DELAYLINE" --a "$a" --b "$b" --delay-us "$delay" \
    --delay-file "$delayf" --max-seconds "$MAX_SECONDS" --rt-priority "$RT_PRIORITY" </dev/null >>"$log" 2>&1 &
  pid=$!
  echo "$pid" >"$pidf"
  for ((i = 0; i < 50; i++)); do
    grep -q ': ready ' "$log" && return 0
    pid_alive "$pid" || { cat "$log" >&2; die "delay line $name exited at start"; }
    sleep 0.1
  done
  cat "$log" >&2
  die "delay line $name not ready after 5 s"
}

cmd_up() {
  need_root
  [[ -n "${PODNET_DELAYLINE:-}" ]] || die "set PODNET_DELAYLINE to the podnet-lab-delayline binary"
  DELAYLINE="$(readlink -f -- "$PODNET_DELAYLINE")" || die "PODNET_DELAYLINE: not found"
  [[ -x "$DELAYLINE" ]] || die "PODNET_DELAYLINE=$PODNET_DELAYLINE is not executable"
  [[ "$ZONE_DELAY_US" =~ ^[0-9]+$ ]] || die "bad PODNET_LAB_ZONE_DELAY_US"
  [[ "$CROSS_DELAY_US" =~ ^[0-9]+$ ]] || die "bad PODNET_LAB_CROSS_DELAY_US"
  [[ "$MAX_SECONDS" =~ ^[0-9]+$ && "$MAX_SECONDS" -gt 0 ]] || die "bad PODNET_LAB_MAX_SECONDS"
  [[ "$RT_PRIORITY" =~ ^[0-9]+$ && "$RT_PRIORITY" -le 99 ]] || die "bad PODNET_LAB_RT_PRIORITY"
  case "$OFFLOADS" in
    on) ;;
    off) command -v ethtool >/dev/null || die "PODNET_LAB_OFFLOADS=off needs ethtool (apt-get install ethtool)" ;;
    *) die "PODNET_LAB_OFFLOADS must be on or off" ;;
  esac

  cmd_down
  mkdir -p "$STATE_DIR"

  local ns
  for ns in "${INFRA_NS[@]}" "${POD_NS[@]}"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
  done
  # Infra namespaces only switch frames: no IPv6 (no RS/MLD/DAD chatter), no bridge netfilter.
  for ns in "${INFRA_NS[@]}"; do
    set_sysctl "$ns" net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  done
  set_sysctl "$NS_NODE_A" net.bridge.bridge-nf-call-iptables=0 \
    net.bridge.bridge-nf-call-ip6tables=0 net.bridge.bridge-nf-call-arptables=0
  # Pods: no duplicate address detection, so addresses are usable at once; keep the v6 address
  # across a link down/up (tests take a Pod's link down and expect it back as it was).
  for ns in "${POD_NS[@]}"; do
    set_sysctl "$ns" net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
      net.ipv6.conf.all.keep_addr_on_down=1 net.ipv6.conf.default.keep_addr_on_down=1
  done

  # node-a: the bridge (one node's Pod network).
  ip -n "$NS_NODE_A" link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0
  # Pods on node-a.
  ip link add eth0 netns "$NS_CLIENT" type veth peer name client netns "$NS_NODE_A"
  ip link add eth0 netns "$NS_SAME" type veth peer name same netns "$NS_NODE_A"
  # node-b / node-c: uplink to node-a's bridge, and the Pod's veth; a delay line joins the two.
  ip link add uplink netns "$NS_NODE_B" type veth peer name to-node-b netns "$NS_NODE_A"
  ip link add pod netns "$NS_NODE_B" type veth peer name eth0 netns "$NS_ZONE"
  ip link add uplink netns "$NS_NODE_C" type veth peer name to-node-c netns "$NS_NODE_A"
  ip link add pod netns "$NS_NODE_C" type veth peer name eth0 netns "$NS_CROSS"

  local port
  for port in client same to-node-b to-node-c; do
    ip -n "$NS_NODE_A" link set "$port" mtu 1500 master br0 up
  done
  ip -n "$NS_NODE_A" link set br0 up
  for ns in "$NS_NODE_B" "$NS_NODE_C"; do
    ip -n "$ns" link set uplink mtu 1500 up
    ip -n "$ns" link set pod mtu 1500 up
  done

  local idx
  for ns in "${POD_NS[@]}"; do
    idx="${POD_INDEX[$ns]}"
    ip -n "$ns" link set eth0 mtu 1500 up
    ip -n "$ns" addr add "$V4_NET.$idx/24" dev eth0
    ip -n "$ns" -6 addr add "$V6_NET:$idx/64" dev eth0 nodad
  done

  if [[ "$OFFLOADS" == off ]]; then
    for ns in "${POD_NS[@]}"; do offloads_off "$ns" eth0; done
    for port in client same to-node-b to-node-c br0; do offloads_off "$NS_NODE_A" "$port"; done
    for ns in "$NS_NODE_B" "$NS_NODE_C"; do offloads_off "$ns" uplink; offloads_off "$ns" pod; done
  fi

  start_delayline zone "$NS_NODE_B" uplink pod "$ZONE_DELAY_US"
  start_delayline cross "$NS_NODE_C" uplink pod "$CROSS_DELAY_US"

  # Sanity check: every peer answers on v4 and v6 (bounded: a few tries of 1 s each).
  local addr ok tries failed=0
  for idx in 2 3 4; do
    for addr in "$V4_NET.$idx" "$V6_NET:$idx"; do
      ok=0
      for ((tries = 0; tries < 3; tries++)); do
        if ip netns exec "$NS_CLIENT" ping -n -q -c 1 -W 1 "$addr" >/dev/null 2>&1; then ok=1; break; fi
      done
      [[ $ok -eq 1 ]] || { note "client cannot reach $addr"; failed=1; }
    done
  done
  [[ $failed -eq 0 ]] || die "lab is up but not fully reachable (see above); 'lab.sh down' to clean up"
  note "up: prefix=$PREFIX zone_delay_us=$ZONE_DELAY_US cross_delay_us=$CROSS_DELAY_US" \
    "offloads=$OFFLOADS rt_priority=$RT_PRIORITY max_seconds=$MAX_SECONDS state=$STATE_DIR"
}

cmd_status() {
  need_root
  local nss ns f pid name
  nss="$(lab_namespaces)"
  if [[ -z "$nss" ]]; then
    echo "lab $PREFIX: down"
    return 0
  fi
  echo "lab $PREFIX: namespaces:"
  for ns in $nss; do
    if [[ -n "${POD_INDEX[$ns]:-}" ]]; then
      echo "  $ns  $(ip -n "$ns" -br addr show dev eth0 2>/dev/null | awk '{$1=$1; print}')"
    else
      echo "  $ns"
    fi
  done
  echo "delay lines:"
  for f in "$STATE_DIR"/*.pid; do
    [[ -e "$f" ]] || continue
    name="$(basename "$f" .pid)"
    pid="$(cat "$f" 2>/dev/null || true)"
    if [[ "$pid" =~ ^[0-9]+$ ]] && is_our_delayline "$pid"; then
      kill -USR1 "$pid" 2>/dev/null || true  # asks for a report line in the log
      sleep 0.2
      echo "  $name pid $pid running: $(tr '\0' ' ' </proc/"$pid"/cmdline | sed 's/^[^ ]*\/\([^ ]*\)/\1/')"
      echo "    $(tail -n 1 "$STATE_DIR/$name.log" 2>/dev/null)"
    else
      echo "  $name: not running (pid file $f)"
    fi
  done
}

# Writes the delay line's --delay-file, signals it (SIGUSR2) and waits (bounded, 5 s) for its log
# to confirm the new delay.
cmd_delay() {
  need_root
  local name="$1" us="$2" pid i log="$STATE_DIR/$1.log"
  [[ "$name" == zone || "$name" == cross ]] || die "delay: the delay lines are zone and cross"
  [[ "$us" =~ ^[0-9]+$ && "$us" -le 10000000 ]] || die "delay: microseconds, 0..10000000"
  pid="$(cat "$STATE_DIR/$name.pid" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && is_our_delayline "$pid" || die "delay: delay line $name is not running"
  local before
  before="$(grep -c -- "delay_us=$us from " "$log" || true)"
  echo "$us" >"$STATE_DIR/$name.delay"
  kill -USR2 "$pid"
  for ((i = 0; i < 50; i++)); do
    [[ "$(grep -c -- "delay_us=$us from " "$log" || true)" -gt "$before" ]] && return 0
    sleep 0.1
  done
  tail -n 3 "$log" >&2
  die "delay: $name did not confirm delay_us=$us within 5 s"
}

case "${1:-}" in
  up) cmd_up ;;
  delay) [[ $# -eq 3 ]] || die "usage: $0 delay zone|cross US"; cmd_delay "$2" "$3" ;;
  down) cmd_down; rm -rf "${STATE_DIR:?}"/*.pid 2>/dev/null || true; note "down: prefix=$PREFIX" ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|status|delay   (see the header of this file for the environment)" >&2; exit 2 ;;
esac
