"""Loopback benches: a private network namespace whose lo carries 127.0.0.0/8, N peer addresses
127.0.x.y in it, and a probing process whose CPU and memory are read from /proc over a window.

The namespace keeps the benches' ICMP away from the host's (a raw ICMP socket sees every echo
reply of its namespace) and lets each bench pick the ICMP socket kind with the namespace's
net.ipv4.ping_group_range:
  dgram: "0 2147483647" -> unprivileged ICMP datagram ("ping") sockets; the kernel hands each
         socket only its own replies (smokeping_prober without --privileged; the exporter's
         first choice)
  raw:   "1 0" (the kernel default) -> raw ICMP sockets as root; every raw socket receives a
         copy of every echo reply (smokeping_prober --privileged; the exporter's fallback)
"""
import time

import benchlib as B
import labkit as K  # (tests/lib, on the path of every bench script)

PING_GROUP_RANGE = {"dgram": "0 2147483647", "raw": "1 0"}


def peer_addresses(n):
    if n > 250 * 250:
        raise B.BenchBroken("too many peers")
    return ["127.0.%d.%d" % (1 + i // 250, 1 + i % 250) for i in range(n)]


def setup_netns(ns):
    B.netns_add(ns)


def set_socket_mode(ns, mode):
    K.in_ns(ns, "sysctl", "-q", "-w", "net.ipv4.ping_group_range=%s" % PING_GROUP_RANGE[mode])


def exporter_config(addrs, interval="1s", count=1, spacing="1s", timeout="500ms"):
    """The exporter's configuration probing `addrs`, "{port}" standing for its port
    (labkit.start_exporter)."""
    lines = ["listen_address: \"127.0.0.1:{port}\"",
             "self: { name: bench, node: bench-node, zone: bench-zone }",
             "responders:",
             "  udp_echo: { listen_address: \"127.0.0.1:{port}\" }",
             "peers:", "  static:"]
    for i, a in enumerate(addrs):
        lines.append("    - { name: lo-%d, address: %s, node: lo-node-%d, zone: bench-zone }"
                     % (i + 1, a, i + 1))
    lines.append("probes:")
    lines.append("  rtt: { protocol: icmp, interval: %s, count: %d, spacing: %s, timeout: %s }"
                 % (interval, count, spacing, timeout))
    return "\n".join(lines) + "\n"


def smokeping_config(addrs, mode, interval="1s"):
    # smokeping_prober's config file: `protocol: icmp` makes its pingers privileged (raw sockets,
    # whatever --privileged says); `protocol: udp` is pro-bing's unprivileged mode, ICMP echo on
    # datagram ("ping") sockets, not UDP packets.
    lines = ["targets:", "- hosts:"]
    lines += ["  - %s" % a for a in addrs]
    lines += ["  interval: %s" % interval, "  network: ip4",
              "  protocol: %s" % ("icmp" if mode == "raw" else "udp"), "  size: 56"]
    return "\n".join(lines) + "\n"


def wait_ready(ns, port, proc, logpath, path="/metrics", timeout=30):
    def ok():
        if proc.poll() is not None:
            raise B.BenchBroken("process exited at start:\n" + K.tail(logpath))
        return K.http(ns, "http://127.0.0.1:%d%s" % (port, path), timeout=5)[0] == 200
    K.wait_for(ok, timeout, "listener on port %d" % port, step=0.3)


def icmp_sockets(pid):
    """(raw, dgram) ICMP sockets open in pid's namespace (/proc/PID/net/{raw,icmp})."""
    def count(name):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                return max(0, len(f.readlines()) - 1)
        except OSError:
            return -1
    return count("raw"), count("icmp")


def socket_label(raw, dgram):
    if raw > 0 and dgram == 0:
        return "raw x%d" % raw
    if dgram > 0 and raw == 0:
        return "dgram x%d" % dgram
    return "raw x%d, dgram x%d" % (raw, dgram)


def measure(proc, ns, port, warmup, seconds, counters):
    """Waits `warmup`, then reads /proc and the counters over `seconds`.

    `counters(text)` -> (sent, received) totals from one scrape. Scrapes happen just outside the
    CPU window. Returns a dict with CPU %, memory and packet rates.
    """
    deadline = time.monotonic() + warmup
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise B.BenchBroken("process exited during warm-up")
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    pid = B.leaf_pid(proc.pid)
    sent0, recv0 = counters(K.scrape(port, ns, timeout=30))
    t_scrape0 = time.monotonic()
    time.sleep(0.5)  # let the scrape's own work finish outside the window
    B.reset_peak_rss(pid)  # VmHWM from here on: the window's peak, without start-up or scrapes
    s0 = B.proc_sample(pid)
    deadline = s0["t"] + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise B.BenchBroken("process exited during the window")
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    s1 = B.proc_sample(pid)
    sent1, recv1 = counters(K.scrape(port, ns, timeout=30))
    cpu = B.cpu_window(s0, s1)
    wall = time.monotonic() - t_scrape0  # between the two scrapes (each ~at its reply)
    raw, dgram = icmp_sockets(pid)
    return dict(cpu, pid=pid, sockets=socket_label(raw, dgram), raw_sockets=raw,
                dgram_sockets=dgram, rss_mib=s1["rss_kib"] / 1024.0, hwm_mib=s1["hwm_kib"] / 1024.0,
                anon_mib=s1["anon_kib"] / 1024.0, threads=s1["threads"],
                sent_pps=(sent1 - sent0) / wall, recv_pps=(recv1 - recv0) / wall)


def exporter_counters(text):
    s = K.parse_metrics(text)
    return (sum(v for n, _l, v in s if n == "podnet_rtt_packets_sent_total"),
            sum(v for n, _l, v in s if n == "podnet_rtt_packets_received_total"))


def smokeping_counters(text):
    s = K.parse_metrics(text)
    return (sum(v for n, _l, v in s if n == "smokeping_requests_total"),
            sum(v for n, _l, v in s if n == "smokeping_response_duration_seconds_count"))


def run_exporter(exe, ns, tmp, addrs, warmup, seconds, tag, after=None):
    """Starts the exporter probing `addrs`, measures it; `after(port, pid)` runs before stop."""
    p, port = K.start_exporter(exe, tmp, exporter_config(addrs), ns=ns, name="exporter-" + tag,
                               ready="/-/ready", timeout=30, max_seconds=warmup + seconds + 300)
    m = measure(p, ns, port, warmup, seconds, exporter_counters)
    m["port"] = port
    if after is not None:
        m["after"] = after(port, m["pid"])
    K.stop(p)
    return m
