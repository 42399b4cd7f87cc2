#!/usr/bin/env python3
"""The OCI image, built and run as deployed (issue 25).

scripts/build-image.sh builds the image from Debian packages into an OCI archive; the archive is
unpacked with umoci (image configuration and root file system, as a runtime gets them) and run
with the DaemonSet's security context, read from deploy/kubernetes (rendered by `kubectl
kustomize` where kubectl is, else base/'s files), so that the test follows the spec: the user
and group, a read-only root, every capability dropped, no privilege escalation (no_new_privs),
the Pod's sysctls (net.ipv4.ping_group_range) set in the test's own network namespace, the
ConfigMap read-only at its mount path and the emptyDir as a tmpfs of its sizeLimit.

The runner is podman where it runs (probed with `podman run --rootfs`, with its default runtime,
then runc; RLIMIT_NOFILE and RLIMIT_NPROC given, see ulimits()); elsewhere bubblewrap on the
unpacked root, started by setpriv as the spec's uid and gid, all capabilities and the
bounding set dropped, no_new_privs, in a user, PID (the exporter is PID 1, as in a Pod), IPC and
UTS namespace of its own and the test's network namespace. Which one ran is printed. (On Debian
12 with cgroup v1, podman 4.3 with crun fails: "crun: setrlimit RLIMIT_NOFILE" and, given
--ulimit, "crun: cgroups in hybrid mode not supported"; with runc and the --ulimits it runs.)
bubblewrap applies no seccomp filter: the spec's RuntimeDefault is the runtime's.

With --exporter-arm64 (an aarch64 build, scripts/build-arm64.sh) the archive is an image index
of amd64 and arm64 (the architectures the DaemonSet's node affinity selects), and every check
below runs for each: the arm64 image under bubblewrap with Debian's qemu-user-static bound into
its root and named before the entrypoint (what binfmt_misc would run; no registration needed),
with the same security context. .ci/run's "arm64 image" stage runs that; ctest's `image` test
runs the host's architecture only.

Checks: the archive's one reference is the image the DaemonSet names, an image index; skopeo
copies each architecture's image out of it by platform (as a user pushes it, digests verified);
the image's user is the spec's; the binary is of its architecture; a bad configuration exits 2 with its message;
without the Pod's sysctl no ICMP socket opens (no raw one either: no CAP_NET_RAW); with it, the
RTT probe (ICMP) reaches a peer namespace over a veth pair and /metrics answers with its replies,
while the process has no capability at all, the spec's uid/gid, no_new_privs and a read-only
root; SIGTERM ends it with exit 0 within terminationGracePeriodSeconds.

Usage: image_test.py --exporter BIN --build-script scripts/build-image.sh --deploy deploy/kubernetes
       [--exporter-arm64 build-arm64/podnet-exporter]
Needs root (mmdebstrap, network namespaces). 20-55 s, most of it mmdebstrap (arm64: +15 s);
bounded waits.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit as lab  # noqa: E402

NS = "podimg%d" % (os.getpid() % 10000)  # not "pn...": the lab's prefix
PEER_NS = NS + "p"
ADDR, PEER_ADDR = "10.213.25.1", "10.213.25.2"  # a /30 between the two namespaces
TOOLS = ("mmdebstrap", "umoci", "skopeo", "bwrap", "setpriv", "ip", "sysctl")
loaded = []  # images the test loaded into podman's store (removed at the end)


def spec(deploy):
    """(pod spec, container, image reference) of the DaemonSet: rendered by kubectl kustomize
    when kubectl is there, else base/daemonset.yaml with base/kustomization.yaml's image tag."""
    import yaml
    kubectl = shutil.which("kubectl")
    if kubectl:
        docs = list(yaml.safe_load_all(lab.run(kubectl, "kustomize", deploy).stdout))
        how = "kubectl kustomize " + deploy
    else:
        with open(os.path.join(deploy, "base", "daemonset.yaml")) as f:
            docs = list(yaml.safe_load_all(f))
        how = os.path.join(deploy, "base", "daemonset.yaml")
    ds = next(d for d in docs if d and d.get("kind") == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "podnet-exporter")
    image = container["image"]
    if not kubectl:  # kustomize's images: transformer, as it would apply it
        with open(os.path.join(deploy, "base", "kustomization.yaml")) as f:
            for i in yaml.safe_load(f).get("images", []):
                if i["name"] == image.split(":")[0]:
                    image = i.get("newName", i["name"]) + ":" + i["newTag"]
    lab.log("spec: the DaemonSet from %s, image %s" % (how, image))
    return pod, container, image


class Sandbox:
    """What the spec asks of the container, as the runner applies it."""

    def __init__(self, pod, container):
        psc, csc = pod.get("securityContext", {}), container.get("securityContext", {})
        self.uid = csc.get("runAsUser", psc.get("runAsUser"))
        self.gid = csc.get("runAsGroup", psc.get("runAsGroup"))
        self.read_only = csc.get("readOnlyRootFilesystem", False)
        self.no_new_privs = csc.get("allowPrivilegeEscalation") is False
        self.drop = csc.get("capabilities", {}).get("drop", [])
        self.add = csc.get("capabilities", {}).get("add", [])
        self.sysctls = {s["name"]: s["value"] for s in psc.get("sysctls", [])}
        self.grace = pod.get("terminationGracePeriodSeconds", 30)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        self.config_dir = self.tmpfs = None
        for m in container.get("volumeMounts", []):
            v = volumes[m["name"]]
            if "configMap" in v:
                self.config_dir = m["mountPath"]
                self.config_ro = m.get("readOnly", False)
            elif "emptyDir" in v:
                self.tmpfs = (m["mountPath"], quantity(v["emptyDir"].get("sizeLimit", "64Mi")))
        lab.log("spec: uid %s gid %s, read-only root %s, no_new_privs %s, drop %s, add %s, "
                "sysctls %s, ConfigMap at %s, emptyDir %s, grace %s s"
                % (self.uid, self.gid, self.read_only, self.no_new_privs, self.drop, self.add,
                   self.sysctls, self.config_dir, self.tmpfs, self.grace))


def quantity(q):
    """Bytes of a Kubernetes quantity such as "16Mi"."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(q))
    return int(m.group(1)) * {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}[m.group(2)]


def child_of(pid):
    """The pid whose parent is `pid` (bubblewrap's monitor -> the sandbox's PID 1), or None."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        return int(d)
            except (OSError, IndexError, ValueError):
                pass
    return None


class Bubblewrap:
    name = "bubblewrap"

    def __init__(self, sb, rootfs, process, binds=()):
        """`binds`: (host file, path in the root) pairs bound read-only (qemu-user)."""
        self.sb, self.rootfs, self.process, self.binds = sb, rootfs, process, binds

    def argv(self, config_dir):
        sb, proc = self.sb, self.process
        argv = ["setpriv", "--reuid=%d" % sb.uid, "--regid=%d" % sb.gid, "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all"]
        if sb.no_new_privs:
            argv.append("--no-new-privs")
        argv += ["bwrap", "--ro-bind" if sb.read_only else "--bind", self.rootfs, "/",
                 "--dev", "/dev", "--proc", "/proc",
                 "--ro-bind" if sb.config_ro else "--bind", config_dir, sb.config_dir,
                 *[a for host, inside in self.binds for a in ("--ro-bind", host, inside)],
                 "--size", str(sb.tmpfs[1]), "--perms", "1777", "--tmpfs", sb.tmpfs[0],
                 "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                 "--unshare-cgroup-try", "--as-pid-1", "--die-with-parent", "--new-session",
                 "--cap-drop", "ALL", "--clearenv", "--chdir", proc.get("cwd", "/")]
        for e in proc.get("env", []):
            k, _, v = e.partition("=")
            argv += ["--setenv", k, v]
        return argv + ["--"] + proc["args"]

    def start(self, config_dir, logfile, sysctls=True):
        """The container's process and its pid (None if it has ended). The sysctls are the
        test's to set in the namespace (bubblewrap sets none)."""
        p = lab.start(NS, self.argv(config_dir), logfile)
        lab.wait_for(lambda: p.poll() is not None or child_of(p.pid), 10, "bwrap's child")
        return p, (child_of(p.pid) if p.poll() is None else None)


class Podman:
    name = "podman"

    def __init__(self, sb, podman, ref):
        self.sb, self.podman, self.ref, self.n = sb, podman, ref, 0
        self.name = " ".join(podman)

    def start(self, config_dir, logfile, sysctls=True):
        """As Bubblewrap.start; podman sets the Pod's sysctls unless `sysctls` is false."""
        sb = self.sb
        self.n += 1
        name = "%s-%d" % (NS, self.n)
        argv = self.podman + ["run", "--rm", "--pull=never", "--name", name, *ulimits(),
                "--network", "ns:/run/netns/" + NS, "--user", "%d:%d" % (sb.uid, sb.gid),
                "--cap-drop=" + ",".join(sb.drop), "--read-only=%s" % str(sb.read_only).lower(),
                "--read-only-tmpfs=false",
                "--tmpfs", "%s:size=%d,mode=1777" % sb.tmpfs,
                "-v", "%s:%s:%s" % (config_dir, sb.config_dir, "ro" if sb.config_ro else "rw")]
        if sb.add:
            argv.append("--cap-add=" + ",".join(sb.add))
        if sb.no_new_privs:
            argv += ["--security-opt", "no-new-privileges"]
        for k, v in (sb.sysctls.items() if sysctls else ()):
            argv += ["--sysctl", "%s=%s" % (k, v)]
        p = lab.start(None, argv + [self.ref], logfile)

        def pid():
            r = lab.run("podman", "inspect", "--format", "{{.State.Pid}}", name, check_rc=False)
            return int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() != "0" else None
        lab.wait_for(lambda: p.poll() is not None or pid(), 30, "podman's container")
        return p, (pid() if p.poll() is None else None)


def ulimits():
    """podman --ulimit arguments: RLIMIT_NOFILE as this process's own, RLIMIT_NPROC 4096 (uid
    65532 runs a few processes). Podman's defaults (nofile 1048576, nproc this process's) can be
    above what a CI sandbox lets the runtime set: its setrlimit then fails."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ["--ulimit", "nofile=%d:%d" % (soft, hard), "--ulimit", "nproc=4096:4096"]


def podman_runs(rootfs):
    """(podman's arguments before `run`, None) when podman runs a container here, with its
    default runtime or else runc; (None, why not) otherwise."""
    if not shutil.which("podman"):
        return None, "podman is not installed"
    why = []
    for runtime in [[]] + ([["--runtime", "runc"]] if shutil.which("runc") else []):
        r = lab.run("podman", *runtime, "run", "--rm", "--network=none", *ulimits(),
                    "--rootfs", rootfs, "/usr/bin/podnet-exporter", "--version", check_rc=False,
                    timeout=120)
        if r.returncode == 0:
            return ["podman"] + runtime, None
        why.append((r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])
    return None, "; ".join(why)


def proc_status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)


def mounts(pid):
    """{mount point: (options, fs type)} of the process, from its mountinfo."""
    out = {}
    with open("/proc/%d/mountinfo" % pid) as f:
        for line in f:
            a, b = line.split(" - ", 1)
            out[a.split()[4]] = (a.split()[5], b.split()[0])
    return out


def unpack(tmp, archive, arch, sb):
    """(root file system, OCI process) of the archive's image for `arch`, picked from its image
    index by platform (as a runtime pulls it), with skopeo (which verifies every blob's digest on
    the way, as a user's push does), then unpacked with umoci."""
    layout = os.path.join(tmp, "oci-" + arch)
    lab.run("skopeo", "copy", "--quiet", "--override-os", "linux", "--override-arch", arch,
            "oci-archive:" + archive, "oci:%s:%s" % (layout, arch), timeout=120)
    cfg = json.loads(lab.run("skopeo", "inspect", "--config",
                             "oci:%s:%s" % (layout, arch)).stdout)
    lab.check(cfg.get("architecture") == arch and cfg.get("os") == "linux"
              and cfg["config"].get("User") == "%s:%s" % (sb.uid, sb.gid)
              and cfg["config"].get("Entrypoint", [""])[0] == "/usr/bin/podnet-exporter",
              "%s: skopeo copies its image out of the archive (digests verified); its config: "
              "%s/%s, user %s, entrypoint %s" % (arch, cfg.get("os"), cfg.get("architecture"),
                                                 cfg["config"].get("User"),
                                                 cfg["config"].get("Entrypoint")))
    bundle = os.path.join(tmp, "bundle-" + arch)
    lab.run("umoci", "unpack", "--image", "%s:%s" % (layout, arch), bundle, timeout=120)
    with open(os.path.join(bundle, "config.json")) as f:
        process = json.load(f)["process"]
    user = process["user"]
    lab.check((user["uid"], user["gid"]) == (sb.uid, sb.gid),
              "%s: the image's user %d:%d is the spec's runAsUser:runAsGroup %s:%s"
              % (arch, user["uid"], user["gid"], sb.uid, sb.gid))
    rootfs = os.path.join(bundle, "rootfs")
    # bubblewrap opens the paths it binds as the spec's user (a runtime does so as root).
    for d in (tmp, bundle):
        os.chmod(d, 0o755)
    lab.check(not os.path.lexists(os.path.join(rootfs, "bin/sh"))
              and os.path.getsize(os.path.join(rootfs, "etc/ssl/certs/ca-certificates.crt")) > 0,
              "%s: the root has the CA bundle and no shell (args %s)" % (arch, process["args"]))
    machine = lab.run("readelf", "-h", os.path.join(rootfs, "usr/bin/podnet-exporter")).stdout
    lab.check(ELF_MACHINE[arch] in machine, "%s: the binary is an %s ELF"
              % (arch, ELF_MACHINE[arch]))
    return rootfs, process


# The ELF machine (readelf -h) of each image architecture, and qemu-user's emulator for it.
ELF_MACHINE = {"amd64": "X86-64", "arm64": "AArch64"}
QEMU = {"arm64": "qemu-aarch64-static"}


def scenario(tmp, args):
    pod, container, image = spec(args.deploy)
    sb = Sandbox(pod, container)
    host_arch = lab.run("dpkg", "--print-architecture").stdout.strip()
    arches = [host_arch] + (["arm64"] if args.exporter_arm64 else [])

    t0 = time.time()
    archive = os.path.join(tmp, "image.oci.tar")
    extra = ["--binary-arm64", args.exporter_arm64] if args.exporter_arm64 else []
    r = lab.run(args.build_script, "--binary", args.exporter, *extra, "--output", archive,
                timeout=900)
    build_s = time.time() - t0
    lab.log(r.stderr.rstrip())
    lab.check(os.path.exists(archive), "scripts/build-image.sh wrote the OCI archive in %.1f s"
              % build_s)

    # The archive as a runtime gets it: its one reference, an image index of one image per
    # architecture.
    oci = os.path.join(tmp, "oci")
    os.mkdir(oci)
    lab.run("tar", "-C", oci, "-xf", archive)
    with open(os.path.join(oci, "index.json")) as f:
        top = json.load(f)["manifests"]
    refs = [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in top]
    lab.check(refs == [image], "the archive holds one reference, named %s as the DaemonSet's "
              "image %s" % (refs, image))
    with open(os.path.join(oci, "blobs", *top[0]["digest"].split(":"))) as f:
        platforms = [(m["platform"]["os"], m["platform"]["architecture"])
                     for m in json.load(f)["manifests"]]
    lab.check(top[0]["mediaType"] == "application/vnd.oci.image.index.v1+json"
              and platforms == [("linux", a) for a in arches],
              "it is an image index of %s" % ", ".join("/".join(p) for p in platforms))
    if sb.drop != ["ALL"] or sb.add:
        lab.check(False, "the spec drops %s and adds %s: this test applies only drop [ALL]"
                  % (sb.drop, sb.add))
    # The architectures the DaemonSet's required node affinity selects: every one must be in
    # the index (a node of another one would be left in ImagePullBackOff).
    selected = sorted(v for term in pod["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        for e in term["matchExpressions"] if e["key"] == "kubernetes.io/arch"
        and e["operator"] == "In" for v in e["values"])
    if args.exporter_arm64:
        lab.check(selected == sorted(arches), "the DaemonSet selects the index's architectures "
                  "(kubernetes.io/arch In %s)" % selected)
    else:
        lab.log("the DaemonSet selects %s; this index has %s (--exporter-arm64 adds arm64)"
                % (selected, arches))

    # The Pod's network namespace (and a peer's, over a veth pair) with the Pod's sysctls.
    lab.run("ip", "netns", "add", NS)
    lab.run("ip", "netns", "add", PEER_NS)
    lab.run("ip", "link", "add", "veth0", "netns", NS, "type", "veth", "peer", "name", "veth1",
            "netns", PEER_NS)
    for ns, dev, addr in ((NS, "veth0", ADDR), (PEER_NS, "veth1", PEER_ADDR)):
        lab.in_ns(ns, "ip", "addr", "add", addr + "/30", "dev", dev)
        lab.in_ns(ns, "ip", "link", "set", dev, "up")
        lab.in_ns(ns, "ip", "link", "set", "lo", "up")

    for arch in arches:
        t1 = time.time()
        rootfs, process = unpack(tmp, archive, arch, sb)
        if arch == host_arch:
            podman, why = podman_runs(rootfs)
            if podman:
                lab.run("podman", "load", "-i", archive, timeout=300)
                loaded.append("localhost/" + image)
                runner = Podman(sb, podman, "localhost/" + image)
            else:
                runner = Bubblewrap(sb, rootfs, process)
        else:
            # No binfmt_misc registration is assumed (a CI root has none): the emulator is
            # bound into the root and named before the entrypoint, as binfmt_misc's F flag
            # would run it.
            qemu = shutil.which(QEMU[arch])
            if qemu is None:
                lab.check(False, "%s: %s is missing (scripts/install-deps.sh --test)"
                          % (arch, QEMU[arch]))
                continue
            inside = "/usr/libexec/" + QEMU[arch]
            os.makedirs(os.path.join(rootfs, "usr/libexec"), exist_ok=True)
            open(os.path.join(rootfs, inside.lstrip("/")), "w").close()
            process = dict(process, args=[inside] + process["args"])
            runner = Bubblewrap(sb, rootfs, process, binds=[(qemu, inside)])
            why = "an arm64 image: qemu-user, %s" % qemu
        lab.log("%s: runner %s%s" % (arch, runner.name, "" if why is None else
                                     " (podman does not run here: %s)" % why
                                     if arch == host_arch else " (%s)" % why))
        run_image(tmp, arch, runner, sb, image)
        lab.log("image test: %s runs %.1f s (runner %s)" % (arch, time.time() - t1, runner.name))
    lab.log("image test: build %.1f s, in all %.1f s" % (build_s, time.time() - t0))


def run_image(tmp, arch, runner, sb, image):
    """The image of `arch` run by `runner` with the spec's security context in the test's
    namespace: a bad configuration, the ICMP socket without and with the Pod's sysctl, /metrics
    with ICMP replies from the peer namespace, the process's identity and mounts, SIGTERM."""
    def config(name, text):
        d = os.path.join(tmp, "%s-%s" % (name, arch))
        os.mkdir(d)
        with open(os.path.join(d, "podnet.yaml"), "w") as f:
            f.write(text)
        return d

    # A bad configuration: exit 2 and the message, as `kubectl logs` would show it.
    bad = config("bad", "self: { name: a, node: n }\nprobes: { rtt: { protocol: icmp, "
                 "interval: 10s, count: 0 } }\n")
    bad_log = os.path.join(tmp, "bad-%s.log" % arch)
    p, _ = runner.start(bad, bad_log)
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        rc = None
    out = lab.tail(bad_log, 5)
    want = "probes.rtt.count: must be from 1 to 10000, got 0"
    lab.check(rc == 2 and want in out and sb.config_dir + "/podnet.yaml:2:" in out,
              "%s: a bad configuration exits 2 with its file:line and key: rc=%s, %r"
              % (arch, rc, out))

    # The deployed configuration's listeners and RTT probe (ICMP) against the peer namespace.
    good = config("good", 'listen_address: "[::]:9479"\n'
                  "self: { name: image-test, node: node-a, zone: zone-a }\n"
                  'responders: { udp_echo: { listen_address: "[::]:9479" } }\n'
                  "peers:\n  static:\n"
                  "    - { name: peer, address: %s, port: 9479, node: node-b, zone: zone-b }\n"
                  "probes:\n  rtt: { protocol: icmp, interval: 1s, count: 5, spacing: 20ms, "
                  "timeout: 500ms }\n" % PEER_ADDR)
    # Without the Pod's sysctl (ping_group_range as in a new namespace, "1 0"): no ICMP socket
    # at all, neither a datagram one nor, with no CAP_NET_RAW, a raw one.
    if "net.ipv4.ping_group_range" in sb.sysctls:
        lab.in_ns(NS, "sysctl", "-qw", "net.ipv4.ping_group_range=1 0")
        no_sysctl = os.path.join(tmp, "no-sysctl-%s.log" % arch)
        p, pid = runner.start(good, no_sysctl, sysctls=False)
        said = "rtt: cannot open an ICMP socket for IPv4: datagram: Permission denied"
        try:
            lab.wait_for(lambda: said in lab.tail(no_sysctl, 50), 30, "the ICMP socket error")
            lab.check(True, "%s: without the sysctl: %r" % (arch, said))
        finally:
            if pid is not None:
                os.kill(pid, signal.SIGTERM)
            p.wait(timeout=30)
    for k, v in sb.sysctls.items():
        lab.in_ns(NS, "sysctl", "-qw", "%s=%s" % (k, v))

    log_path = os.path.join(tmp, "exporter-%s.log" % arch)
    p, pid = runner.start(good, log_path)
    lab.check(pid is not None, "%s: the exporter runs under %s (pid %s)"
              % (arch, runner.name, pid))
    if pid is None:
        return
    st = proc_status(pid)
    caps = {k: st[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    lab.check(set(caps.values()) == {"0000000000000000"},
              "%s: no capability at all, CAP_NET_RAW included: %s" % (arch, caps))
    ids = (st["Uid"].split(), st["Gid"].split(), st["Groups"].split())
    lab.check(ids[0] == [str(sb.uid)] * 4 and ids[1] == [str(sb.gid)] * 4,
              "%s: uid %s, gid %s, groups %s" % ((arch,) + ids))
    lab.check(st["NoNewPrivs"].strip() == ("1" if sb.no_new_privs else "0"),
              "%s: NoNewPrivs %s" % (arch, st["NoNewPrivs"].strip()))
    if isinstance(runner, Podman):  # seccompProfile RuntimeDefault: the runtime's filter
        lab.check(st["Seccomp"].strip() == "2", "Seccomp %s (2: a filter)" % st["Seccomp"].strip())
    m = mounts(pid)
    lab.check(("ro" in m["/"][0].split(",")) == sb.read_only
              and ("ro" in m[sb.config_dir][0].split(",")) == sb.config_ro
              and m[sb.tmpfs[0]][1] == "tmpfs",
              "%s: mounts: / %s, %s %s, %s %s" % (arch, m["/"], sb.config_dir,
                                                  m[sb.config_dir], sb.tmpfs[0], m[sb.tmpfs[0]]))

    def received():
        try:
            samples = lab.parse_metrics(lab.scrape(9479, ns=NS, timeout=5))
        except lab.Broken:
            return None
        got = [v for n, labels, v in samples if n == "podnet_rtt_packets_received_total"
               and labels.get("protocol") == "icmp" and labels.get("peer") == "peer"]
        info = [labels for n, labels, v in samples if n == "podnet_build_info"]
        rtt = {n: v for n, labels, v in samples if n in ("podnet_rtt_seconds_sum",
               "podnet_rtt_seconds_count") and labels.get("protocol") == "icmp"}
        stamps = {"%s/%s" % (labels["direction"], labels["source"]): v
                  for n, labels, v in samples if n == "podnet_rtt_timestamps_total" and v}
        if got and got[0] > 0 and info and rtt.get("podnet_rtt_seconds_count"):
            seen[:] = [got[0], info[0],
                       rtt["podnet_rtt_seconds_sum"] / rtt["podnet_rtt_seconds_count"], stamps]
        return bool(seen)
    seen = []
    t1 = time.time()
    lab.wait_for(received, 60, "ICMP replies in /metrics")
    got = seen
    # The mean RTT over a veth pair (tens of µs) and where its timestamps came from, printed to
    # compare the architectures (qemu-user's own time is in it where a stamp is user space's),
    # bounded loosely.
    lab.check(got[1].get("version") == image.rsplit(":", 1)[1] and 0 < got[2] < 0.01,
              "%s: /metrics answers in %.1f s: %g ICMP replies from the peer, mean RTT %.1f µs "
              "(timestamps %s), build_info %s" % (arch, time.time() - t1, got[0], got[2] * 1e6,
                                                  got[3], got[1]))

    lab.check("opened ICMP datagram (ping_group_range) socket" in lab.tail(log_path, 50),
              "%s: the RTT probe opened an ICMP datagram socket (ping_group_range), not a raw one"
              % arch)

    t2 = time.time()
    os.kill(pid, signal.SIGTERM)
    try:
        rc = p.wait(timeout=sb.grace)
    except subprocess.TimeoutExpired:
        rc = None
    lab.check(rc == 0, "%s: SIGTERM: exit %s in %.2f s (terminationGracePeriodSeconds %s)"
              % (arch, rc, time.time() - t2, sb.grace))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--build-script", required=True)
    ap.add_argument("--deploy", required=True)
    ap.add_argument("--exporter-arm64", help="also the arm64 image, of this aarch64 build "
                    "(scripts/build-arm64.sh: build-arm64/podnet-exporter), run under qemu-user")
    args = ap.parse_args()
    if not lab.have_root():
        return lab.skip("the image test needs root (mmdebstrap, network namespaces)")
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        return lab.skip("missing %s (scripts/install-deps.sh --test)" % " ".join(missing))

    def cleanup_and_run(tmp):
        try:
            scenario(tmp, args)
        finally:
            subprocess.run(["ip", "netns", "del", PEER_NS], timeout=30, capture_output=True)
            for ref in loaded:
                subprocess.run(["podman", "rmi", "-f", ref], timeout=60, capture_output=True)
    rc, _ = lab.run_namespace_test(NS, cleanup_and_run, "podnet-image-")
    return rc


if __name__ == "__main__":
    sys.exit(main())
