"""Shared helpers of the podnet-exporter benches (python3 standard library only).

Process lifecycle: every process a bench starts goes through Procs.start(), runs in its own
session (so the whole tree can be signalled) and, where it could outlive the bench, under
`timeout`, so it stops by itself even if the bench is killed with SIGKILL. Procs.stop_all() runs
from a `finally:`; SIGTERM, SIGINT and SIGHUP are turned into SystemExit so that it also runs when
the bench is interrupted.
"""
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchBroken(Exception):
    """The bench itself could not run (not a missed target)."""


def log(msg=""):
    print(msg, flush=True)


def note(msg):
    print("# " + msg, flush=True)


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)


def install_signal_handlers():
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _raise_exit)


def require_root():
    if os.geteuid() != 0:
        raise BenchBroken("must run as root (network namespaces, ICMP sockets)")


def require_tools(*names):
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        raise BenchBroken("missing tools: %s" % " ".join(missing))


def exporter_binary(path=None):
    """Copies the exporter to a private temp dir so a concurrent rebuild cannot swap it mid-run.

    Retries for a while when the copy does not run (the linker may be writing the file).
    """
    src = path or os.environ.get("PODNET_EXPORTER") or os.path.join(REPO, "build", "podnet-exporter")
    d = tempfile.mkdtemp(prefix="podnet-bench-bin-")
    dst = os.path.join(d, "podnet-exporter")
    last = ""
    for _attempt in range(30):
        if os.access(src, os.X_OK):
            try:
                shutil.copyfile(src, dst)
                os.chmod(dst, 0o755)
                r = subprocess.run([dst, "--version"], capture_output=True, text=True, timeout=10)
                lines = r.stdout.strip().splitlines()
                if r.returncode == 0 and lines:
                    return dst, lines[0], d
                last = "rc=%d %s" % (r.returncode, r.stderr.strip()[:200])
            except (OSError, subprocess.SubprocessError) as e:
                last = str(e)
        else:
            last = "not found or not executable"
        time.sleep(2)
    shutil.rmtree(d, ignore_errors=True)
    raise BenchBroken("exporter binary %s: %s (run scripts/build.sh)" % (src, last))


def git_describe():
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "exporter"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head + (" (exporter/ has uncommitted changes)" if dirty else "")
    except Exception:  # not a git checkout
        return "?"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_busy_fraction(seconds=3.0):
    """Fraction of all CPUs busy over `seconds` (from /proc/stat), as others see the machine."""
    def read():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v), idle
    t0, i0 = read()
    time.sleep(seconds)
    t1, i1 = read()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(max_seconds=None, busy=0.10):
    """Waits (bounded) until the machine is quiet: at most `busy` of the CPUs in use over 3 s.

    max_seconds defaults to $BENCH_WAIT_QUIET (0: do not wait). Returns the last busy fraction.
    """
    if max_seconds is None:
        max_seconds = float(os.environ.get("BENCH_WAIT_QUIET", "0"))
    deadline = time.monotonic() + max_seconds
    frac = cpu_busy_fraction()
    while frac > busy and time.monotonic() < deadline:
        note("machine busy (%.0f %% of the CPUs), waiting up to %.0f s more for quiet"
             % (frac * 100, deadline - time.monotonic()))
        time.sleep(10)
        frac = cpu_busy_fraction()
    return frac


def busy_warning(busy=0.10):
    """Waits for quiet if asked ($BENCH_WAIT_QUIET seconds), then a warning line if the CPUs are
    still busy with something else (the figures would be noisy), else None."""
    frac = wait_quiet(busy=busy)
    if frac > busy:
        return ("WARNING: %.0f %% of the CPUs busy with other work before the bench (load average"
                " %s): figures will be noisy" % (frac * 100, loadavg()))
    return None


def machine_line():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    kernel = os.uname().release
    return "%d CPUs (%s), kernel %s, load average %s" % (os.cpu_count(), model, kernel, loadavg())


# ---------------------------------------------------------------------------------------------
# Processes

class Procs:
    def __init__(self):
        self.procs = []  # (name, Popen, logfile handle)

    def start(self, name, cmd, logpath, ns=None, max_seconds=None, env=None):
        argv = list(cmd)
        if max_seconds is not None:
            argv = ["timeout", "-k", "5", str(int(max_seconds))] + argv
        if ns is not None:
            argv = ["ip", "netns", "exec", ns] + argv
        f = open(logpath, "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=env)
        self.procs.append((name, p, f))
        return p

    def stop(self, p, grace=5.0):
        """SIGTERM to the process group, then SIGKILL after `grace` seconds."""
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    note("pid %d did not die" % p.pid)
        else:
            # The leader is gone; make sure nothing of its group is left.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for name, q, f in self.procs:
            if q is p and not f.closed:
                f.close()

    def stop_all(self):
        for _name, p, _f in reversed(self.procs):
            self.stop(p)
        self.procs = []


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


def wait_for(pred, timeout, what, step=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except Exception as e:  # not up yet
            last = e
        time.sleep(step)
    raise BenchBroken("timed out after %.0f s waiting for %s%s"
                      % (timeout, what, (" (%s)" % last) if last else ""))


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------
# Network namespaces (for the loopback benches: a private loopback, isolated from other ICMP
# traffic of the host, which a raw ICMP socket would otherwise see)

def run(cmd, timeout=30, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise BenchBroken("%s: rc=%d %s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def netns_add(ns):
    if ns in netns_list():
        netns_del(ns)
    run(["ip", "netns", "add", ns])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])


def netns_list():
    r = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def netns_del(ns):
    if ns not in netns_list():
        return
    r = run(["ip", "netns", "pids", ns], check=False)
    for pid in r.stdout.split():
        note("killing leftover pid %s in %s" % (pid, ns))
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    run(["ip", "netns", "del", ns], check=False)


def free_port(ns=None):
    """A free TCP+UDP port on 127.0.0.1 (in `ns` if given)."""
    code = ("import socket\n"
            "for _ in range(50):\n"
            "  t=socket.socket(); t.bind(('127.0.0.1',0)); p=t.getsockname()[1]\n"
            "  u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
            "  try:\n"
            "    u.bind(('127.0.0.1',p)); print(p); break\n"
            "  except OSError: pass\n"
            "  finally: t.close(); u.close()\n")
    cmd = [sys.executable, "-c", code]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    out = run(cmd).stdout.strip()
    if not out.isdigit():
        raise BenchBroken("no free port")
    return int(out)


def http_get(url, ns=None, timeout=10):
    """(status, body) via curl, in `ns` if given."""
    cmd = ["curl", "-s", "-m", str(timeout), "-o", "-", "-w", "\n%{http_code}", url]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 5)
    body, _, code = r.stdout.rpartition("\n")
    return int(code or 0), body


def curl_timing(url, ns=None, timeout=30, gzip=False):
    """(time_total seconds, size_download bytes, http code) of one fetch, body discarded.

    gzip: ask for gzip (curl --compressed; the size is then the compressed one)."""
    cmd = ["curl", "-s", "-m", str(timeout), "-o", "/dev/null", "-w",
           "%{time_total} %{size_download} %{http_code}", url]
    if gzip:
        cmd.insert(1, "--compressed")
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 5)
    parts = r.stdout.split()
    if len(parts) != 3:
        raise BenchBroken("curl %s: %r %r" % (url, r.stdout, r.stderr))
    return float(parts[0]), int(float(parts[1])), int(parts[2])


# ---------------------------------------------------------------------------------------------
# /proc sampling

def proc_sample(pid):
    """CPU (utime+stime ticks of all threads; per-thread schedstat ns) and memory of `pid`."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of proc(5))
    sched_ns = 0
    ctxsw = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    sched_ns += int(f.read().split()[0])
                with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt_switches",
                                            "nonvoluntary_ctxt_switches")):
                            ctxsw += int(line.split()[1])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    mem = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads", "RssAnon", "RssFile"):
                mem[k] = int(v.split()[0])
    return {"t": time.monotonic(), "ticks": ticks, "sched_ns": sched_ns, "ctxsw": ctxsw,
            "rss_kib": mem.get("VmRSS", 0), "hwm_kib": mem.get("VmHWM", 0),
            "anon_kib": mem.get("RssAnon", 0), "threads": mem.get("Threads", 0)}


def reset_peak_rss(pid):
    """Resets VmHWM to the current RSS (proc(5): clear_refs "5")."""
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
    except OSError as e:
        note("could not reset the peak RSS of %d: %s" % (pid, e))


def cpu_window(s0, s1):
    """CPU % of one core between two samples: from utime+stime ticks and from schedstat."""
    wall = s1["t"] - s0["t"]
    by_ticks = (s1["ticks"] - s0["ticks"]) / CLK_TCK / wall * 100.0
    by_sched = (s1["sched_ns"] - s0["sched_ns"]) / 1e9 / wall * 100.0
    return {"wall_s": wall, "cpu_pct": by_ticks, "cpu_pct_schedstat": by_sched,
            "ctxsw_per_s": (s1["ctxsw"] - s0["ctxsw"]) / wall,
            "cpu_s": (s1["ticks"] - s0["ticks"]) / CLK_TCK}


# ---------------------------------------------------------------------------------------------
# Prometheus text format

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, float)] of every sample line."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group(3) or ""))
        try:
            v = float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), labels, v))
    return out


def sum_by(samples, name, label, where=None):
    """{label value: sum of `name`} (optionally only samples whose labels contain `where`)."""
    acc = {}
    for n, labels, v in samples:
        if n != name:
            continue
        if where and any(labels.get(k) != w for k, w in where.items()):
            continue
        key = labels.get(label, "")
        acc[key] = acc.get(key, 0.0) + v
    return acc


def buckets_by(samples, name, label):
    """{label value: {le float: cumulative count}} of histogram `name`_bucket."""
    acc = {}
    for n, labels, v in samples:
        if n != name + "_bucket":
            continue
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        d = acc.setdefault(labels.get(label, ""), {})
        d[le] = d.get(le, 0.0) + v
    return acc


def bucket_delta(b1, b0):
    return {le: c - b0.get(le, 0.0) for le, c in b1.items()}


def histogram_quantile(q, cum):
    """Prometheus's histogram_quantile over {le: cumulative count} (linear in the bucket)."""
    bounds = sorted(cum)
    if not bounds or cum[bounds[-1]] <= 0:
        return float("nan")
    total = cum[bounds[-1]]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le in bounds:
        c = cum[le]
        if c >= rank:
            if math.isinf(le):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return float("nan")


def to_cumulative(values, bounds):
    """Bins raw `values` into the cumulative buckets `bounds` (the exporter's layout)."""
    bounds = sorted(bounds)
    cum = {}
    vs = sorted(values)
    i = 0
    for le in bounds:
        while i < len(vs) and vs[i] <= le:
            i += 1
        cum[le] = float(i)
    return cum


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------------------------------------
# Output

def table(headers, rows):
    cols = [[str(h)] + [str(r[i]) for r in rows] for i, h in enumerate(headers)]
    widths = [max(len(c) for c in col) for col in cols]
    def fmt(cells):
        return "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in rows]
    log("\n".join(lines))


def verdict(ok):
    return "PASS" if ok else "MISS"


def main_wrapper(main):
    """Runs main(): exit 2 with a message if the bench itself broke, its own code otherwise."""
    try:
        sys.exit(main())
    except BenchBroken as e:
        print("BENCH BROKEN: %s" % e, file=sys.stderr, flush=True)
        sys.exit(2)
    except SystemExit:
        raise
    except Exception:  # a bug in the bench: still exit non-zero, with the traceback
        import traceback
        traceback.print_exc()
        print("BENCH BROKEN (unexpected error)", file=sys.stderr, flush=True)
        sys.exit(2)
