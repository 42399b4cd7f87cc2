"""What only the podnet-exporter benches need (python3 standard library only): the machine's
load, the exporter's private copy, /proc sampling, tables and PASS/MISS lines. Waiting, processes,
ports, scraping and histogram_quantile are the tests' library, tests/lib/labkit.py (imported here
as K, and by every bench).

Process lifecycle: every process a bench starts goes through labkit.start(), runs in its own
session (so the whole tree can be signalled) and, where it could outlive the bench, under
`timeout` (max_seconds), so it stops by itself even if the bench is killed with SIGKILL.
labkit.stop_all() runs from a `finally:`; SIGTERM, SIGINT and SIGHUP are turned into SystemExit
so that it also runs when the bench is interrupted.
"""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import labkit as K  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchBroken(K.Broken):
    """The bench itself could not run (not a missed target)."""


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
# Processes (started and stopped with labkit.start and labkit.stop)

leaf_pid = K.leaf_pid  # the process under `timeout` wrappers (tests/lib/labkit.py)


# ---------------------------------------------------------------------------------------------
# Network namespaces (for the loopback benches: a private loopback, isolated from other ICMP
# traffic of the host, which a raw ICMP socket would otherwise see)

def netns_add(ns):
    if ns in netns_list():
        netns_del(ns)
    K.run("ip", "netns", "add", ns)
    K.run("ip", "-n", ns, "link", "set", "lo", "up")


def netns_list():
    r = K.run("ip", "netns", "list", check_rc=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def netns_del(ns):
    if ns not in netns_list():
        return
    r = K.run("ip", "netns", "pids", ns, check_rc=False)
    for pid in r.stdout.split():
        note("killing leftover pid %s in %s" % (pid, ns))
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    K.run("ip", "netns", "del", ns, check_rc=False)


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
# Samples of parse_metrics (labkit) and raw values

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


def quantile(q, cumulative):
    """labkit.histogram_quantile, but NaN where it says None (no observations): a bench prints
    its row and MISSes rather than breaking."""
    v = K.histogram_quantile(q, cumulative)
    return float("nan") if v is None else v


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
    K.log("\n".join(lines))


def verdict(ok):
    return "PASS" if ok else "MISS"


def main_wrapper(main):
    """Runs main(): exit 2 with a message if the bench itself broke, its own code otherwise."""
    try:
        sys.exit(main())
    except K.Broken as e:
        print("BENCH BROKEN: %s" % e, file=sys.stderr, flush=True)
        sys.exit(2)
    except SystemExit:
        raise
    except Exception:  # a bug in the bench: still exit non-zero, with the traceback
        import traceback
        traceback.print_exc()
        print("BENCH BROKEN (unexpected error)", file=sys.stderr, flush=True)
        sys.exit(2)
