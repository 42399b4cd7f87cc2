#!/usr/bin/env bash
# Throughput bursts: podnet's burst engine (client and server) against iperf3 (client and
# server), on the same veth path in the same run. For 1 and 4 streams it prints the median of
# REPS alternating runs of each: goodput (receiver's bytes / time) and CPU per GB moved (client +
# server process CPU time / GB received), and the ratios ours / iperf3.
#
#   sudo bench/burst_vs_iperf3.sh [BUILD_DIR]      (default build/; needs podnet-burst, iperf3)
#
# Environment: REPS (3), SECONDS_PER_RUN (2), PREFIX (pnbench). Two namespaces joined by one
# veth pair, no qdisc, offloads on: traffic never leaves them; both are deleted on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
BURST="$(readlink -f "$BUILD/podnet-burst")"
REPS="${REPS:-3}"
SECS="${SECONDS_PER_RUN:-2}"
PREFIX="${PREFIX:-pnbench}"
[[ $EUID -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
[[ -x "$BURST" ]] || { echo "no $BURST: build first" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 not installed" >&2; exit 1; }

A="$PREFIX-a" B="$PREFIX-b"
cleanup() {
  for ns in "$A" "$B"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  done
  sleep 0.3
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
ip netns add "$A"; ip netns add "$B"
ip link add eth0 netns "$A" type veth peer name eth0 netns "$B"
ip -n "$A" addr add 10.214.0.1/24 dev eth0; ip -n "$B" addr add 10.214.0.2/24 dev eth0
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; ip -n "$ns" link set eth0 up; done

python3 - "$A" "$B" "$BURST" "$REPS" "$SECS" <<'PY'
import json, os, resource, signal, statistics, subprocess, sys, time
A, B, BURST, REPS, SECS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
TICK = os.sysconf("SC_CLK_TCK")

def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime

def server(cmd, port):
    p = subprocess.Popen(["ip", "netns", "exec", B] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(0.5)
    return p

def run_client(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(["ip", "netns", "exec", A] + cmd, capture_output=True, text=True,
                       timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.stdout, cpu

def one(tool, streams, srv):
    s0 = proc_cpu(srv.pid)
    if tool == "ours":
        out, ccpu = run_client([BURST, "client", "10.214.0.2", "--port", "5401", "--time",
                                str(SECS), "--parallel", str(streams)])
        j = json.loads(out)
        assert j["error"] == "", j
        bps, nbytes = j["throughput_bytes_per_second"] * 8, j["bytes_received"]
    else:
        out, ccpu = run_client(["iperf3", "-c", "10.214.0.2", "-p", "5402", "-t", str(SECS),
                                "-P", str(streams), "-J"])
        j = json.loads(out)["end"]["sum_received"]
        bps, nbytes = j["bits_per_second"], j["bytes"]
    time.sleep(0.3)  # the server's accounting of this run settles
    scpu = proc_cpu(srv.pid) - s0
    return bps, (ccpu + scpu) / (nbytes / 1e9), ccpu, scpu

ours_srv = server([BURST, "server", "--listen", "0.0.0.0:5401"], 5401)
iperf_srv = server(["iperf3", "-s", "-p", "5402"], 5402)
try:
    rows = []
    for streams in (1, 4):
        res = {"ours": [], "iperf3": []}
        for _ in range(REPS):
            for tool, srv in (("ours", ours_srv), ("iperf3", iperf_srv)):
                res[tool].append(one(tool, streams, srv))
                time.sleep(0.3)
        med = {t: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v),
                   statistics.median(r[2] / (r[1] and (r[2] + r[3])) * r[1] for r in v),
                   statistics.median(r[3] / (r[1] and (r[2] + r[3])) * r[1] for r in v))
               for t, v in res.items()}
        rows.append((streams, med))
    print("| streams | ours Gbit/s | iperf3 Gbit/s | throughput ours/iperf3 | ours CPU s/GB | "
          "iperf3 CPU s/GB | CPU/GB ours/iperf3 |")
    print("|---|---|---|---|---|---|---|")
    for streams, med in rows:
        (ob, oc, _, _), (ib, ic, _, _) = med["ours"], med["iperf3"]
        print("| %d | %.2f | %.2f | %.3f | %.3f | %.3f | %.3f |" % (
            streams, ob / 1e9, ib / 1e9, ob / ib, oc, ic, oc / ic))
    print()
    print("| streams | ours client CPU s/GB | iperf3 client CPU s/GB | ours server CPU s/GB | "
          "iperf3 server CPU s/GB |")
    print("|---|---|---|---|---|")
    for streams, med in rows:
        o, i = med["ours"], med["iperf3"]
        print("| %d | %.3f | %.3f | %.3f | %.3f |" % (streams, o[2], i[2], o[3], i[3]))
finally:
    for p in (ours_srv, iperf_srv):
        os.killpg(p.pid, signal.SIGTERM)
PY
