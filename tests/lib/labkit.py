"""The one helper library of the Python tests (tests/lab, tests/attack, tests/integration: the
soak too) and the benches (bench/lib/*.py): python3 standard library only.

Checks are counted here and a test ends with summary(): "N passed, N failed". Processes started
with start() (or start_exporter()) run in their own session (so a process group can be
signalled) and are stopped by stop_all(), newest first. Every wait is bounded in count and time;
what cannot go on raises Broken. The stand-in Kubernetes API server is fake_apiserver.py, next to
this file; what only the benches need (/proc sampling, tables, the machine's load) is in
bench/lib/benchlib.py.
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
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

# The lab's Pods (tests/lab/lab.sh): addresses and the path class of each from the client.
ADDR = {"client": "10.213.0.1", "same": "10.213.0.2", "zone": "10.213.0.3", "cross": "10.213.0.4"}
ADDR6 = {"client": "fd00:213::1", "same": "fd00:213::2", "zone": "fd00:213::3",
         "cross": "fd00:213::4"}
PATH_OF = {"same": "same_node", "zone": "same_zone", "cross": "cross_zone"}

# A real unbound serving the lab's zones (tests/lab/unbound-zones.conf; every other name
# NXDOMAIN, nothing forwarded) on 127.0.0.1:53 of a namespace.
HERE = os.path.dirname(os.path.abspath(__file__))
UNBOUND_ZONES = os.path.normpath(os.path.join(HERE, "..", "lab", "unbound-zones.conf"))
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

class Broken(RuntimeError):
    """A test or bench could not go on (a wait timed out, a command failed, a process died):
    not a failed check. Benches report it as "BENCH BROKEN" and exit 2."""


procs = []  # every process start() ran, oldest first: stop_all() ends them, newest first
_logs = {}  # pid -> the log file start() opened for it (closed by stop())
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


def free_port(ns=None):
    """A port of 127.0.0.1 free for TCP and for UDP (the exporter's HTTP and UDP echo share
    it), in namespace `ns` if given (asked of a copy of this function run there). Raises Broken
    after 100 tries."""
    if ns is not None:
        out = in_ns(ns, sys.executable, "-c", "import sys; sys.path.insert(0, %r); import labkit; "
                    "print(labkit.free_port())" % HERE).stdout.strip()
        if not out.isdigit():
            raise Broken("no free port in %s: %r" % (ns, out))
        return int(out)
    for _ in range(100):
        with socket.socket() as s, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            try:
                u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise Broken("no loopback port free for both TCP and UDP")


def pod_namespaces(prefix):
    return {k: "%s-%s" % (prefix, k) for k in ("client", "same", "zone", "cross")}


def cpu_times(path="/proc/stat"):
    """(steal, total): the jiffies of all CPUs since boot that the hypervisor took from this
    guest (steal) and in all, from the first line of /proc/stat (proc(5): user nice system idle
    iowait irq softirq steal; guest time is already counted in user)."""
    with open(path) as f:
        fields = f.readline().split()
    v = [int(x) for x in fields[1:9]]
    v += [0] * (8 - len(v))  # kernels before 2.6.11 had no steal column
    return v[7], sum(v)


def steal_share(before, after):
    """The share (0..1) of CPU time the hypervisor took between two cpu_times() readings; 0
    when no time passed."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def log(msg=""):
    print(msg, flush=True)


def check(cond, what):
    log(("ok     " if cond else "FAILED ") + what)
    (passed if cond else failures).append(what)
    return cond


def summary():
    """The closing line ctest logs and CI reads: the counts, then each failed check's text (CI
    shows a failing test's first and last lines only)."""
    return "%d passed, %d failed%s" % (len(passed), len(failures),
                                       "".join("\nFAILED " + f for f in failures))


def exit_code():
    """Logs summary() and returns a test's exit code: 1 when a check failed, else 0."""
    log(summary())
    return 1 if failures else 0


def run(*cmd, check_rc=True, timeout=60, **kw):
    """subprocess.run(cmd) with its output captured as text; raises Broken on a non-zero exit
    unless check_rc=False (and TimeoutExpired after `timeout` s)."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check_rc and r.returncode != 0:
        raise Broken("%s: rc=%d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def in_ns(ns, *cmd, **kw):
    return run("ip", "netns", "exec", ns, *cmd, **kw)


def start(ns, args, logfile, max_seconds=None, env=None):
    """Starts `args` (in namespace `ns` unless it is None; `ip netns exec` exec()s, so the pid
    is the program's) in a session of its own, so that stop() can signal its whole process
    group; stdout and stderr to `logfile`, stdin from /dev/null. With `max_seconds`, the program
    runs under coreutils `timeout`, so it ends by itself even if its starter is SIGKILLed (the
    pid is then timeout's: leaf_pid() finds the program's).

    `args` may begin with `nice -n N`. With sched_autogroup (kernel.sched_autogroup_enabled=1,
    Debian's default), a new session is a scheduling group of its own, and a nice value only
    orders threads inside their group: against a neighbour's group, a nice -10 program would
    weigh the same as a nice 0 one. So N is also written to the session's
    /proc/PID/autogroup (sched(7), "The autogroup feature"), where the kernel has one."""
    argv = list(args)
    if max_seconds is not None:
        argv = ["timeout", "-k", "5", str(int(max_seconds))] + argv
    if ns is not None:
        argv = ["ip", "netns", "exec", ns] + argv
    f = open(logfile, "w")
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True, env=env)
    procs.append(p)
    _logs[p.pid] = f
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


def leaf_pid(pid, depth=4):
    """The process actually doing the work under `timeout` wrappers: follows single children."""
    for _ in range(depth):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
        except OSError:
            return pid
        if len(kids) != 1:
            return pid
        pid = int(kids[0])
    return pid


def terminate(p):
    """One SIGTERM to a start()ed program itself (leaf_pid: not to its `timeout` wrapper, which
    passes a signal on to the program and to its group, so the program would get it twice and
    take the second as "stop at once"), without waiting: stop() waits."""
    if p.poll() is None:
        try:
            os.kill(leaf_pid(p.pid), signal.SIGTERM)
        except ProcessLookupError:
            pass


def _signal_group(p, sig):
    if p.poll() is None:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass


def stop(p, grace=10.0):
    """Ends a start()ed program: SIGTERM to its process group (and SIGCONT, should it be
    pause()d), SIGKILL after `grace` s. When the leader has already exited, SIGKILL to what is
    left of its group. Closes the log file start() opened. Returns the exit status (None if the
    program outlived SIGKILL by 5 s, which is logged)."""
    if p.poll() is None:
        _signal_group(p, signal.SIGTERM)
        _signal_group(p, signal.SIGCONT)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log("pid %d did not die" % p.pid)
    else:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    f = _logs.pop(p.pid, None)
    if f is not None:
        f.close()
    return p.returncode


def stop_all():
    """stop() of every start()ed program, newest first."""
    for p in reversed(procs):
        stop(p)
    procs.clear()


def wait_for(pred, timeout, what, step=0.5):
    """Calls pred() every `step` s until it returns true (an exception counts as not yet);
    returns True, or raises Broken after `timeout` s (monotonic clock) naming `what` and the
    last exception."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if pred():
                return True
        except Exception as e:  # not up yet
            last = e
        time.sleep(step)
    raise Broken("timed out after %.0f s waiting for %s%s"
                 % (timeout, what, (" (%r)" % last) if last else ""))


def write_atomic(path, text):
    """Replaces the file at `path` with `text` at once: a reader (an exporter re-reading its
    resolv.conf, a server watching a file) sees the old content or the new, never half."""
    with open(path + ".new", "w") as f:
        f.write(text)
    os.replace(path + ".new", path)


def tail(path, n=20):
    """The last `n` lines of the file at `path` ("" if it cannot be read)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def http(ns, url, method="GET", timeout=10):
    """(status code, body) of one request; 0 = no answer. In namespace `ns` with curl, or,
    when `ns` is None, from this process (urllib; an error status still returns its body)."""
    if ns is None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method=method),
                                        timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")
        except OSError:
            return 0, ""
    r = in_ns(ns, "curl", "-s", "-m", str(timeout), "-X", method, "-o", "-", "-w", "\n%{http_code}",
              url, check_rc=False, timeout=timeout + 5)
    body, _, code = r.stdout.rpartition("\n")
    return int(code or 0), body


def start_exporter(exe, tmp, config, args=(), ns=None, name="exporter", stderr=None,
                   ready="/-/healthy", timeout=15, max_seconds=None):
    """An exporter whose configuration is `config` (YAML text) with every "{port}" replaced by
    a port of 127.0.0.1 free for TCP and UDP (free_port, in `ns`), written to TMP/NAME.yaml and
    run as `exe --config.file=... *args`: through start() (a session of its own, stop() or
    stop_all() ends it; in `ns`, under `timeout` with `max_seconds`), its log TMP/NAME.log; or,
    with `stderr` given (e.g. subprocess.PIPE, whose reader is the caller), with stderr there
    and stdout discarded, still in a session of its own and in `procs`.

    Returns (process, port) once GET `ready` answers 200 (every 0.05 s, for at most `timeout`
    s). Raises Broken if the process exits first (the log's tail in the message) or the time
    runs out."""
    port = free_port(ns)
    cfg = os.path.join(tmp, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(config.replace("{port}", str(port)))
    argv = [exe, "--config.file=" + cfg, *args]
    logfile = os.path.join(tmp, name + ".log")
    if stderr is None:
        p = start(ns, argv, logfile, max_seconds=max_seconds)
    else:
        if ns is not None or max_seconds is not None:
            raise ValueError("start_exporter: stderr goes with no ns and no max_seconds")
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                             start_new_session=True)
        procs.append(p)
    url = "http://127.0.0.1:%d%s" % (port, ready)
    wait_for(lambda: p.poll() is not None or http(ns, url, timeout=2)[0] == 200, timeout,
             "%s at 127.0.0.1:%d to answer %s" % (name, port, ready), step=0.05)
    if p.poll() is not None:
        raise Broken("%s exited at start (%s) with %s:\n%s"
                     % (name, p.returncode, cfg, tail(logfile) if stderr is None else ""))
    return p, port


def promql(ns, expr, at=None, port=9090):
    """An instant query to the Prometheus in `ns`; `at` (Unix time) pins the evaluation time, so
    that several queries read the same scrape."""
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (port, urllib.parse.quote(expr))
    if at is not None:
        url += "&time=%.3f" % at
    code, body = http(ns, url)
    if code != 200:
        raise Broken("prometheus query failed (%d): %s\n%s" % (code, expr, body))
    return json.loads(body)["data"]["result"]


def promql_value(ns, expr, port=9090, empty=float("nan")):
    """The value of the first series of promql(ns, expr) as a float, or `empty` when the result
    has none."""
    r = promql(ns, expr, port=port)
    return float(r[0]["value"][1]) if r else empty


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


def percentile(values, p):
    """The nearest-rank p-th percentile (0 < p <= 100) of `values`; NaN if there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


# The text exposition format (Prometheus's "Exposition formats"): a sample line is
# NAME{LABELS} VALUE [TIMESTAMP]; label values keep their escapes (\\, \", \n) as written.
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, float)] of every sample line of a /metrics body (comments,
    blank lines and lines whose value is not a number are left out)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), dict(_LABEL.findall(m.group(3) or "")), value))
    return out


def scrape(port, ns=None, path="/metrics", timeout=10):
    """The body of GET http://127.0.0.1:PORT/metrics (in namespace `ns` if given), for
    parse_metrics; raises Broken unless it answers 200."""
    code, body = http(ns, "http://127.0.0.1:%d%s" % (port, path), timeout=timeout)
    if code != 200:
        raise Broken("%s on port %d answered %d" % (path, port, code))
    return body


def buckets(samples, name, **want):
    """{le: cumulative count} of histogram `name` (parse_metrics samples), summed over the
    series whose labels include `want` (le may be math.inf)."""
    out = {}
    for n, labels, v in samples:
        if n == name + "_bucket" and all(labels.get(k) == w for k, w in want.items()):
            le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
            out[le] = out.get(le, 0.0) + v
    return out


def bucket_delta(b1, b0):
    """The observations between two buckets() readings: {le: b1[le] - b0[le]}."""
    return {le: c - b0.get(le, 0.0) for le, c in b1.items()}


def sample_delta(later, earlier):
    """What happened between two parse_metrics readings of counters and histograms: `later`'s
    samples, each less the same series' value in `earlier` (0 for a series new since). Gauges
    come out as differences too: read them from `later` itself."""
    before = {(n, tuple(sorted(l.items()))): v for n, l, v in earlier}
    return [(n, l, v - before.get((n, tuple(sorted(l.items()))), 0.0)) for n, l, v in later]


def _quantile_bucket(q, cumulative):
    """The bucket holding rank q of {le: cumulative count} (or (le, count) pairs): (lower le,
    upper le, count below it, count up to it, rank), or None if empty."""
    items = sorted(cumulative.items() if isinstance(cumulative, dict) else cumulative)
    if not items or items[-1][1] <= 0:
        return None
    rank = q * items[-1][1]
    prev_le, prev_c = 0.0, 0.0
    for le, c in items:
        if c >= rank:
            return prev_le, le, prev_c, c, rank
        prev_le, prev_c = le, c
    return None


def histogram_quantile(q, cumulative):
    """PromQL's histogram_quantile over {le: cumulative count} or (le, count) pairs (le may be
    math.inf): linear within a bucket from 0 or the bound below; rank in the +Inf bucket gives
    the largest finite bound. None if there are no observations."""
    b = _quantile_bucket(q, cumulative)
    if b is None:
        return None
    lo, hi, lo_c, hi_c, rank = b
    if math.isinf(hi):
        return lo
    return lo + (hi - lo) * (rank - lo_c) / max(hi_c - lo_c, 1e-9)


def histogram_quantile_bounds(q, cumulative):
    """(lo, hi): the bounds of the bucket that holds quantile q of {le: cumulative count} or
    (le, count) pairs, so the true quantile of the observations lies in [lo, hi] whatever their
    spread inside the bucket (hi may be math.inf). None if empty. What a check may claim without
    trusting histogram_quantile's linear interpolation."""
    b = _quantile_bucket(q, cumulative)
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
            log(tail(os.path.join(folder, name), lines))


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

    def set_delay(self, name, one_way_us):
        """Sets delay line `name` ("zone" or "cross") to `one_way_us` µs each way, at run time
        (tests/lab/lab.sh delay): frames it receives from then on take the new delay, so the
        path's RTT moves by twice the change. Returns when the delay line has confirmed it."""
        subprocess.run([self.script, "delay", name, str(int(one_way_us))], env=self.env,
                       check=True, timeout=30)

    def __exit__(self, *exc):
        stop_all()
        subprocess.run([self.script, "down"], env=self.env, timeout=120)
        return False


def start_lab_responders(ns, exporter, tmp, nodes=None):
    """The lab's usual start: the client namespace may open unprivileged ICMP sockets (as a
    DaemonSet's Pod sysctl allows), and the same, zone and cross Pods run podnet-exporter as
    responders only (no probes section). `nodes`: name -> (node, zone) for their `self`; by
    default node n-NAME in zone z."""
    run("ip", "netns", "exec", ns["client"], "sysctl", "-q", "-w",
        "net.ipv4.ping_group_range=0 2147483647")
    for name in ("same", "zone", "cross"):
        node, zone = (nodes or {}).get(name, ("n-" + name, "z"))
        cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write("self: { name: %s, node: %s, zone: %s }\n" % (name, node, zone))
        start(ns[name], [exporter, "--config.file=" + cfg], os.path.join(tmp, name + ".log"))


def run_namespace_test(ns, scenario, tmp_prefix):
    """Runs scenario(tmp_folder) for a test that made the network namespace `ns` itself, then
    stops every process started, deletes `ns` and the folder; an exception is a failed check. On
    failure the tail of every log in the folder is shown. Returns (exit code, raised): 0 when
    every check passed, after the closing "N passed, N failed" line; raised tells whether the
    scenario ended in an exception (a bench reports that as "could not run")."""
    tmp = tempfile.mkdtemp(prefix=tmp_prefix)
    raised = False
    try:
        try:
            scenario(tmp)
        except Exception as e:  # report, then clean up
            traceback.print_exc()
            check(False, "exception: %s" % e)
            raised = True
        stop_all()
        subprocess.run(["ip", "netns", "del", ns], timeout=30)
        if failures:
            dump_logs(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(summary())
    return (1 if failures else 0), raised


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
