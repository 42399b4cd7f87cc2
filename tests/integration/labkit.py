"""Shared helpers of the lab integration tests (tests/integration/lab_*_test.py).

Checks are counted here and a test ends with summary(): "N passed, N failed". Processes started
with start() run in their own session (so a process group can be signalled) and are stopped by
stop_all(), newest first. Every wait is bounded in count and time.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import traceback
import urllib.parse
import urllib.request

# The lab's Pods (tests/lab/lab.sh): addresses and the path class of each from the client.
ADDR = {"client": "10.213.0.1", "same": "10.213.0.2", "zone": "10.213.0.3", "cross": "10.213.0.4"}
ADDR6 = {"client": "fd00:213::1", "same": "fd00:213::2", "zone": "fd00:213::3",
         "cross": "fd00:213::4"}
PATH_OF = {"same": "same_node", "zone": "same_zone", "cross": "cross_zone"}

# A real unbound serving the lab's zones (tests/lab/unbound-zones.conf; every other name
# NXDOMAIN, nothing forwarded) on 127.0.0.1:53 of a namespace.
UNBOUND_ZONES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                             "lab", "unbound-zones.conf"))
UNBOUND_CONF = """server:
  interface: 127.0.0.1
  port: 53
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "{dir}"
  pidfile: ""
  use-syslog: no
  logfile: ""
  do-ip6: no
  do-tcp: yes
  access-control: 127.0.0.0/8 allow
  module-config: "iterator"
  num-threads: 1
  include: "{zones}"
"""

procs = []
failures = []
passed = []


def lab_arguments(*required):
    """The lab tests' command line: --exporter, --delayline, --lab-script and `required` (e.g.
    "--burst") are paths that must be given; --prometheus and --promtool default to the PATH's."""
    ap = argparse.ArgumentParser()
    for name in ("--exporter", "--delayline", "--lab-script") + required:
        ap.add_argument(name, required=True)
    ap.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    ap.add_argument("--promtool", default=shutil.which("promtool") or "/usr/bin/promtool")
    return ap.parse_args()


def skip(reason):
    """The exit code of a test that cannot run: 77 (ctest counts it as skipped) after saying
    SKIP and why; but with CI=true a skip would hide a broken machine, so it is a failure (1)
    that gives the same reason."""
    if os.environ.get("CI", "").lower() == "true":
        log("FAILED: cannot run with CI=true (a skip is a failure in CI): %s" % reason)
        return 1
    log("SKIP: %s" % reason)
    return 77


def have_root():
    """True when root; otherwise the caller returns skip(ROOT_NEEDED)."""
    return os.geteuid() == 0


ROOT_NEEDED = "the lab needs root (network namespaces)"


def free_port():
    """A loopback port free for TCP and for UDP (the exporter's HTTP and UDP echo share it)."""
    for _ in range(100):
        with socket.socket() as s, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            try:
                u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no loopback port free for both TCP and UDP")


def start_exporter(exe, config, port, stderr=subprocess.PIPE, timeout=10):
    """An exporter on loopback (no namespace) with `config`, whose listen_address is port `port`
    of 127.0.0.1: (process, base URL) once /-/healthy answers, or once it exited or `timeout`
    s passed (the caller looks at the process)."""
    p = subprocess.Popen([exe, "--config.file=" + config], stdout=subprocess.DEVNULL,
                         stderr=stderr, text=True)
    base = "http://127.0.0.1:%d" % port
    deadline = time.time() + timeout
    while p.poll() is None and time.time() < deadline:
        try:
            with urllib.request.urlopen(base + "/-/healthy", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.05)
    return p, base


def pod_namespaces(prefix):
    return {k: "%s-%s" % (prefix, k) for k in ("client", "same", "zone", "cross")}


def log(msg):
    print(msg, flush=True)


def check(cond, what):
    log(("ok     " if cond else "FAILED ") + what)
    (passed if cond else failures).append(what)
    return cond


def summary():
    """The closing line ctest logs and CI reads."""
    return "%d passed, %d failed" % (len(passed), len(failures))


def exit_code():
    """Logs summary() and returns a test's exit code: 1 when a check failed, else 0."""
    log(summary())
    return 1 if failures else 0


def run(*cmd, check_rc=True, timeout=60):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check_rc and r.returncode != 0:
        raise RuntimeError("%s: rc=%d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def in_ns(ns, *cmd, **kw):
    return run("ip", "netns", "exec", ns, *cmd, **kw)


def start(ns, args, logfile):
    """Starts `args` in namespace `ns` (`ip netns exec` exec()s: the pid is the program's), in a
    session of its own (so that stop() can signal its whole process group).

    `args` may begin with `nice -n N`. With sched_autogroup (kernel.sched_autogroup_enabled=1,
    Debian's default), a new session is a scheduling group of its own, and a nice value only
    orders threads inside their group: against a neighbour's group, a nice -10 program would
    weigh the same as a nice 0 one. So N is also written to the session's
    /proc/PID/autogroup (sched(7), "The autogroup feature"), where the kernel has one."""
    f = open(logfile, "w")
    p = subprocess.Popen(["ip", "netns", "exec", ns] + args, stdout=f, stderr=subprocess.STDOUT,
                         start_new_session=True)
    procs.append(p)
    if args[:2] == ["nice", "-n"]:
        try:
            with open("/proc/%d/autogroup" % p.pid, "w") as g:
                g.write(args[2])
        except OSError:
            pass  # no autogroup (a kernel without it, or the program has already exited)
    return p


def pause(p):
    """SIGSTOP to the process group of a start()ed program (it keeps its state, uses no CPU)."""
    _signal_group(p, signal.SIGSTOP)


def resume(p):
    """SIGCONT to the process group of a start()ed program."""
    _signal_group(p, signal.SIGCONT)


def _signal_group(p, sig):
    if p.poll() is None:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass


def stop(p):
    """SIGTERM to the process group (and SIGCONT, should it be pause()d), up to 10 s, then
    SIGKILL."""
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
        os.killpg(p.pid, signal.SIGCONT)
    except ProcessLookupError:
        return
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=10)


def stop_all():
    for p in reversed(procs):
        stop(p)


def wait_for(pred, timeout, what, step=0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if pred():
                return True
        except Exception:  # not up yet
            pass
        time.sleep(step)
    raise RuntimeError("timed out after %ds waiting for %s" % (timeout, what))


def http(ns, url, method="GET", timeout=10):
    """(status code, body) of one request made with curl inside namespace `ns`; 0 = no answer."""
    r = in_ns(ns, "curl", "-s", "-m", str(timeout), "-X", method, "-o", "-", "-w", "\n%{http_code}",
              url, check_rc=False, timeout=timeout + 5)
    body, _, code = r.stdout.rpartition("\n")
    return int(code or 0), body


def promql(ns, expr, at=None, port=9090):
    """An instant query to the Prometheus in `ns`; `at` (Unix time) pins the evaluation time, so
    that several queries read the same scrape."""
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (port, urllib.parse.quote(expr))
    if at is not None:
        url += "&time=%.3f" % at
    code, body = http(ns, url)
    if code != 200:
        raise RuntimeError("prometheus query failed (%d): %s\n%s" % (code, expr, body))
    return json.loads(body)["data"]["result"]


def by_label(result, label):
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def ping_rtts_ms(ns, addr, count=50):
    """iputils ping's RTTs (ms, sorted ascending) over `count` echoes, and its loss (%)."""
    flag = ["-6"] if ":" in addr else []
    r = in_ns(ns, "ping", *flag, "-n", "-c", str(count), "-i", "0.02", "-W", "1", addr,
              timeout=60)
    times = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", r.stdout))
    loss = re.search(r"([\d.]+)% packet loss", r.stdout)
    return times, float(loss.group(1))


def ping_median_ms(ns, addr, count=50):
    """iputils ping's median RTT (ms) over `count` echoes, and its loss (%). The median, not
    ping's avg: the lab's delay line has rare multi-ms stalls that move a mean of 50 by 0.1 ms."""
    times, loss = ping_rtts_ms(ns, addr, count)
    return (times[len(times) // 2] if times else float("nan")), loss


def start_loopback_exporter(exe, tmp, config, args=()):
    """An exporter on loopback (no namespace, no root): `config` with "{port}" replaced by a
    free port (labkit.free_port) is written to TMP/podnet.yaml and run with `args` besides
    --config.file, in a session of its own (stop_all() ends it), stderr to TMP/exporter.log.
    Returns (process, port) once /-/healthy answers 200 (at most 15 s)."""
    port = free_port()
    cfg = os.path.join(tmp, "podnet.yaml")
    with open(cfg, "w") as f:
        f.write(config.replace("{port}", str(port)))
    log_file = open(os.path.join(tmp, "exporter.log"), "w")
    p = subprocess.Popen([exe, "--config.file=" + cfg, *args], stdout=subprocess.DEVNULL,
                         stderr=log_file, start_new_session=True)
    procs.append(p)

    def healthy():
        with urllib.request.urlopen("http://127.0.0.1:%d/-/healthy" % port, timeout=1) as r:
            return r.status == 200

    wait_for(healthy, 15, "the exporter at 127.0.0.1:%d to answer /-/healthy" % port, step=0.1)
    return p, port


def percentile(values, p):
    """The nearest-rank p-th percentile (0 < p <= 100) of `values` (not empty)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def parse_metrics(text):
    """[(name, {labels}, value)] from the text exposition format."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^(\w+)(?:\{(.*)\})? (\S+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def _quantile_bucket(q, buckets):
    """The bucket holding rank q of (le, cumulative count) pairs (any iterable, read once):
    (lower le, upper le, count below it, count up to it, rank), or None if empty."""
    items = sorted(buckets)
    if not items or items[-1][1] <= 0:
        return None
    rank = q * items[-1][1]
    prev_le, prev_c = 0.0, 0.0
    for le, c in items:
        if c >= rank:
            return prev_le, le, prev_c, c, rank
        prev_le, prev_c = le, c
    return None


def histogram_quantile(q, buckets):
    """PromQL's histogram_quantile over (le, cumulative count) pairs (le may be math.inf):
    linear within a bucket; the +Inf bucket gives the largest finite bound. None if empty."""
    b = _quantile_bucket(q, buckets)
    if b is None:
        return None
    lo, hi, lo_c, hi_c, rank = b
    if math.isinf(hi):
        return lo
    return lo + (hi - lo) * (rank - lo_c) / max(hi_c - lo_c, 1e-9)


def histogram_quantile_bounds(q, buckets):
    """(lo, hi): the bounds of the bucket that holds quantile q of (le, cumulative count) pairs,
    so the true quantile of the observations lies in [lo, hi] whatever their spread inside the
    bucket (hi may be math.inf). None if empty. What a check may claim without trusting
    histogram_quantile's linear interpolation."""
    b = _quantile_bucket(q, buckets)
    return None if b is None else (b[0], b[1])


def start_unbound(ns, folder, address="127.0.0.1"):
    """unbound on address:53 in `ns` (answering 127.0.0.0/8 and the lab's 10.213.0.0/24), its
    config and log in `folder`."""
    conf = os.path.join(folder, "unbound.conf")
    text = UNBOUND_CONF.format(dir=folder, zones=UNBOUND_ZONES)
    text = text.replace("interface: 127.0.0.1", "interface: " + address)
    text = text.replace("access-control: 127.0.0.0/8 allow",
                        "access-control: 127.0.0.0/8 allow\n  access-control: 10.213.0.0/24 allow")
    with open(conf, "w") as f:
        f.write(text)
    return start(ns, ["unbound", "-d", "-c", conf], os.path.join(folder, "unbound.log"))


def dump_logs(folder, lines=30):
    """The tail of every *.log in `folder` (after a failure)."""
    for name in sorted(os.listdir(folder)):
        if name.endswith(".log"):
            log("---- %s (tail)" % name)
            with open(os.path.join(folder, name), errors="replace") as f:
                log("".join(f.readlines()[-lines:]))


class Lab:
    """`with Lab(lab_script, delayline, prefix):` brings tests/lab/lab.sh up under `prefix`
    (so parallel runs do not collide) and, on exit, stops every started process and takes the
    lab down."""

    def __init__(self, lab_script, delayline, prefix, max_seconds=600):
        self.script = lab_script
        self.env = dict(os.environ, PODNET_LAB_PREFIX=prefix, PODNET_DELAYLINE=delayline,
                        PODNET_LAB_MAX_SECONDS=str(max_seconds))
        self.ns = pod_namespaces(prefix)

    def __enter__(self):
        subprocess.run([self.script, "up"], env=self.env, check=True, timeout=120)
        return self

    def __exit__(self, *exc):
        stop_all()
        subprocess.run([self.script, "down"], env=self.env, timeout=120)
        return False


def run_lab_test(lab_script, delayline, prefix, scenario, tmp_prefix="podnet-lab-"):
    """Brings the lab up, runs scenario(lab, tmp_folder), takes the lab down; an exception is a
    failed check. On failure the tail of every log in the folder is shown. Returns the exit
    code (0 = every check passed) after the closing "N passed, N failed" line."""
    tmp = tempfile.mkdtemp(prefix=tmp_prefix)
    try:
        with Lab(lab_script, delayline, prefix) as lab:
            try:
                scenario(lab, tmp)
            except Exception as e:  # report, then clean up
                traceback.print_exc()
                check(False, "exception: %s" % e)
        if failures:
            dump_logs(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(summary())
    return 1 if failures else 0
