#!/usr/bin/env python3
"""A stand-in Kubernetes API server for the tests and benches: a simulated cluster of N nodes,
one probe Pod per node (a DaemonSet), behind one headless Service. HTTPS with a self-signed
certificate, bearer token required. What cannot run here is the real API server; the shapes it
serves are the real ones (discovery.k8s.io/v1 EndpointSlice, v1 Node, watch events as
newline-delimited JSON):

  GET /api/v1/nodes/NAME                       -> Node with topology.kubernetes.io/zone
  GET /apis/discovery.k8s.io/v1/namespaces/NS/endpointslices?labelSelector=
      kubernetes.io/service-name=SVC           -> EndpointSliceList (100 endpoints per slice,
                                                  as the EndpointSlice controller's default)
  ...&watch=1&resourceVersion=RV               -> a chunked watch: every 1/churn s a MODIFIED
                                                  slice (a random Pod goes unready, the next
                                                  event brings it back), a
                                                  BOOKMARK every 5 s; ends after timeoutSeconds
                                                  (or, while --gone-file exists, once open 1 s,
                                                  with an ERROR event 410 Expired: a relist;
                                                  with --gone-bookmark, a BOOKMARK first, so a
                                                  client whose backoff an event resets relists
                                                  at once each time instead of backing off);
                                                  while --pause-file exists, no churn (a Pod
                                                  that is out is put back first)

Pod i runs on node-i in zone-(a + i % zones) with address 127.1.(i // 250).(1 + i % 250): every
peer address is loopback, so an exporter fed this cluster only ever probes its own namespace.

--extra-service NS/SVC=FILE (repeatable) serves one more Service, e.g. kube-system/kube-dns: one
EndpointSlice whose `endpoints` are FILE's JSON list (as the API writes them), re-read when FILE
changes (replace it atomically); its watch sends that slice as MODIFIED within 0.2 s of a
change, and a BOOKMARK every 5 s.
--forged-slice NS/SVC=FILE adds to that --extra-service's list a slice of FILE's endpoints that
the EndpointSlice controller does not manage (a forgery a client must ignore). Every other slice
carries the controller's managed-by label and the Service as its controller owner.
--service-file FILE serves the probe Pods' own Service (--namespace/--service) from FILE instead
of the simulated cluster: one EndpointSlice whose `endpoints` are FILE's JSON list, re-read and
sent as MODIFIED as --extra-service does (the proving ground's Pods join, leave and roll out this
way). --node-zones FILE (JSON: node name -> zone) answers GET /api/v1/nodes/NAME for those
names, re-read at each request. --listen ADDRESS (default 127.0.0.1) is where it listens.
--object PATH=FILE (repeatable) answers GET PATH (the URL's path, any query) with FILE's bytes
as they are when asked (a Service, say /api/v1/namespaces/shop/services/api; tests put hostile
ones there).
--rollout-file FILE: once FILE exists, a DaemonSet rolling update of the simulated cluster
(class Rollout), broadcast as the API server does: one stream of slice versions, every watch of
the Service sent each version after its resourceVersion, a BOOKMARK a minute; no churn. With
--stats-file the bytes and events sent to watchers, the slice writes and the connections are
written there (JSON) every second and at the end.
Run by start() below (the tests, bench/lib/discovery_5000.py,
bench/lib/api_watch_cost.py); prints "listening PORT" when ready, and with --log-lists "list T"
(T: Unix time, s) when a LIST of the Service's slices begins; with --log-requests "GET PATH"
(path and query) for every request.
"""
import argparse
import http.server
import json
import os
import random
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

import labkit

PER_SLICE = 100
STATS_LOCK = threading.Lock()  # the counts of --stats-file, added to by many watch threads


class Cluster:
    def __init__(self, nodes, zones, namespace, service):
        self.lock = threading.Lock()
        self.rv = 1000
        self.namespace, self.service = namespace, service
        self.zones = ["zone-%s" % chr(ord("a") + z) for z in range(zones)]
        self.slices = []
        for s in range(0, nodes, PER_SLICE):
            eps = [self.endpoint(i) for i in range(s, min(nodes, s + PER_SLICE))]
            self.slices.append(self.slice(s // PER_SLICE, eps))
        self.nodes = nodes
        self.down = None  # (slice, endpoint) taken out of service by the last odd event

    def endpoint(self, i):
        return {
            "addresses": ["127.1.%d.%d" % (i // 250, 1 + i % 250)],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "targetRef": {"kind": "Pod", "namespace": self.namespace, "name": "podnet-%05d" % i,
                          "uid": "00000000-0000-4000-8000-%012d" % i},
            "nodeName": "node-%d" % i,
            "zone": self.zones[i % len(self.zones)],
        }

    def slice(self, k, endpoints):
        self.rv += 1
        return {
            "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {
                "name": "%s-%05x" % (self.service, k * 7919), "namespace": self.namespace,
                "uid": "11111111-0000-4000-8000-%012d" % k, "resourceVersion": str(self.rv),
                "generation": 1, "creationTimestamp": "2026-11-30T00:00:00Z",
                "labels": {"kubernetes.io/service-name": self.service,
                           "endpointslice.kubernetes.io/managed-by":
                               "endpointslice-controller.k8s.io",
                           "service.kubernetes.io/headless": ""},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": self.service,
                                     "uid": "22222222-0000-4000-8000-000000000000",
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "http", "protocol": "TCP", "port": 9479},
                      {"name": "echo", "protocol": "UDP", "port": 9479},
                      {"name": "burst", "protocol": "TCP", "port": 5201}],
        }

    def churn(self, rng, paused=False):
        """One MODIFIED event: a Pod restarting. Odd events take a random endpoint out of
        service, even ones put it back, so the cluster stays at N or N-1 ready Pods. `paused`:
        only the event that puts a Pod back, if one is out; None when all are in service."""
        with self.lock:
            if self.down is None and paused:
                return None
            if self.down is None:
                sl = rng.choice(self.slices)
                ep = rng.choice(sl["endpoints"])
                self.down = (sl, ep)
            else:
                sl, ep = self.down
                self.down = None
            ready = not ep["conditions"]["ready"]
            ep["conditions"]["ready"] = ready
            ep["conditions"]["serving"] = ready
            self.rv += 1
            sl["metadata"]["resourceVersion"] = str(self.rv)
            return json.dumps({"type": "MODIFIED", "object": sl})

    def list_body(self):
        with self.lock:
            return json.dumps({"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
                               "metadata": {"resourceVersion": str(self.rv)},
                               "items": self.slices})

    def node(self, name):
        i = int(name.split("-")[1])
        return json.dumps({
            "kind": "Node", "apiVersion": "v1",
            "metadata": {"name": name, "uid": "33333333-0000-4000-8000-%012d" % i,
                         "resourceVersion": "77", "labels": {
                             "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                             "topology.kubernetes.io/zone": self.zones[i % len(self.zones)],
                             "topology.kubernetes.io/region": "bench-1"}},
            "spec": {"podCIDR": "10.244.%d.0/24" % (i % 256)},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        })


class Rollout:
    """A rolling update of every Pod of `cluster`, `wave` Pods at a time (the DaemonSet's
    maxUnavailable), one wave every `wave_s` seconds, once `trigger` exists. Each Pod passes the
    EndpointSlice controller's four steps, at random moments of its wave in this order: the old
    Pod terminating (ready false, serving true, terminating true), the old Pod deleted (its
    endpoint leaves the slice), the new Pod created with its address (ready false), the new Pod
    ready. Each step is one slice write, or with `batch_s` > 0 the steps of one slice within
    `batch_s` s of its last write are one write (kube-controller-manager's
    --endpointslice-updates-batch-period).

    Every write is one MODIFIED event in one log that every watch reads from its own
    resourceVersion on (the watch cache's fan-out): `events_after(rv, wait_s)`."""

    def __init__(self, cluster, trigger, wave, wave_s, batch_s, stats, seed=1):
        self.cluster, self.trigger = cluster, trigger
        self.wave, self.wave_s, self.batch_s = max(1, wave), wave_s, batch_s
        self.stats, self.rng = stats, random.Random(seed)
        self.cond = threading.Condition()
        self.log = []  # (resourceVersion, event line as bytes)
        stats.update({"writes": 0, "rollout_start": None, "rollout_end": None})

    def events_after(self, rv, wait_s):
        """The events after resourceVersion `rv` ([(rv, bytes)]), waiting at most `wait_s` s
        for one."""
        with self.cond:
            if not self.log or self.log[-1][0] <= rv:
                self.cond.wait(wait_s)
            i = len(self.log)
            while i > 0 and self.log[i - 1][0] > rv:
                i -= 1
            return self.log[i:]

    def publish(self, sl):
        c = self.cluster
        with c.lock:
            c.rv += 1
            sl["metadata"]["resourceVersion"] = str(c.rv)
            line = (json.dumps({"type": "MODIFIED", "object": sl}) + "\n").encode()
            rv = c.rv
        with self.cond:
            self.log.append((rv, line))
            self.cond.notify_all()
        with STATS_LOCK:
            self.stats["writes"] += 1
            by_s = self.stats.setdefault("writes_by_second", {})
            sec = str(int(time.time()))
            by_s[sec] = by_s.get(sec, 0) + 1

    def step(self, sl, pod, k):
        """Step k (0..3) of Pod number `pod`, whose endpoints live in slice `sl`."""
        c = self.cluster
        with c.lock:
            eps = sl["endpoints"]
            if k == 0:
                ep = next(e for e in eps if e["nodeName"] == "node-%d" % pod)
                ep["conditions"] = {"ready": False, "serving": True, "terminating": True}
            elif k == 1:
                sl["endpoints"] = [e for e in eps if e["nodeName"] != "node-%d" % pod]
            elif k == 2:
                ep = c.endpoint(pod)
                ep["targetRef"]["name"] = "podnet-%05d-v2" % pod
                ep["targetRef"]["uid"] = "00000000-0000-4000-9000-%012d" % pod
                ep["conditions"] = {"ready": False, "serving": False, "terminating": False}
                sl["endpoints"].append(ep)
            else:
                ep = next(e for e in eps if e["nodeName"] == "node-%d" % pod)
                ep["conditions"] = {"ready": True, "serving": True, "terminating": False}

    def run(self):
        while not os.path.exists(self.trigger):
            if self.stats["stop"]:
                return
            time.sleep(0.1)
        c = self.cluster
        start = time.monotonic()
        self.stats["rollout_start"] = time.time()
        plan = []  # (seconds from start, pod, step)
        for pod in range(c.nodes):
            t0 = (pod // self.wave) * self.wave_s
            for k, t in enumerate(sorted(self.rng.uniform(0, self.wave_s) for _ in range(4))):
                plan.append((t0 + t, pod, k))
        plan.sort()
        dirty, last_write = {}, {}  # slice index -> first unwritten change (s); last write (s)
        i = 0
        while (i < len(plan) or dirty) and not self.stats["stop"]:
            now = time.monotonic() - start
            while i < len(plan) and plan[i][0] <= now:
                _, pod, k = plan[i]
                i += 1
                s = pod // PER_SLICE
                self.step(c.slices[s], pod, k)
                if self.batch_s <= 0:  # each step its own write, however late the loop runs
                    self.publish(c.slices[s])
                    continue
                dirty.setdefault(s, now)
            for s in sorted(dirty):
                if now - last_write.get(s, -1e9) >= self.batch_s:
                    self.publish(c.slices[s])
                    last_write[s] = now
                    del dirty[s]
            time.sleep(0.005)
        self.stats["rollout_end"] = time.time()


class FileSlice:
    """One EndpointSlice of Service namespace/service whose endpoints are the JSON list in
    `path`, re-read when the file's mtime or size changes."""

    def __init__(self, namespace, service, path, ports=None):
        self.namespace, self.service, self.path = namespace, service, path
        self.ports = ports or [{"name": "dns", "protocol": "UDP", "port": 53}]
        self.lock = threading.Lock()
        self.rv, self.stamp, self.slice = 1, None, None
        self.forged = None  # --forged-slice: a slice the controller did not write
        self.refresh()

    def forge(self, path):
        """Adds to the list a second slice labelled with the Service's name, endpoints from
        `path` (read once), that the EndpointSlice controller does not manage: what anyone who
        may write EndpointSlices in the namespace can make (issue 42). Lists only."""
        with open(path) as f:
            endpoints = json.load(f)
        self.forged = {
            "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": self.service + "-forged", "namespace": self.namespace,
                         "resourceVersion": "1",
                         "labels": {"kubernetes.io/service-name": self.service,
                                    "endpointslice.kubernetes.io/managed-by": "someone-else"}},
            "addressType": "IPv4", "endpoints": endpoints, "ports": self.ports}

    def refresh(self):
        """Re-reads the file if it changed; True when it did (the slice has a new version)."""
        with self.lock:
            try:
                st = os.stat(self.path)
                stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
                if stamp == self.stamp:
                    return False
                with open(self.path) as f:
                    endpoints = json.load(f)
            except (OSError, ValueError):
                return False  # mid-replace, or not there yet: keep what we had
            self.stamp = stamp
            self.rv += 1
            self.slice = {
                "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"name": self.service + "-x7k2p", "namespace": self.namespace,
                             "resourceVersion": str(self.rv),
                             "labels": {"kubernetes.io/service-name": self.service,
                                        "endpointslice.kubernetes.io/managed-by":
                                            "endpointslice-controller.k8s.io"},
                             "ownerReferences": [{
                                 "apiVersion": "v1", "kind": "Service", "name": self.service,
                                 "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, "%s/%s" % (
                                     self.namespace, self.service))),
                                 "controller": True, "blockOwnerDeletion": True}]},
                "addressType": "IPv4", "endpoints": endpoints, "ports": self.ports,
            }
            return True

    def list_body(self):
        with self.lock:
            return json.dumps({"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
                               "metadata": {"resourceVersion": str(self.rv)},
                               "items": [x for x in (self.slice, self.forged) if x]})

    def event(self, type_):
        with self.lock:
            if type_ == "BOOKMARK":
                return bookmark(self.rv)
            return json.dumps({"type": type_, "object": self.slice})


def bookmark(rv):
    """A watch's BOOKMARK event line at resourceVersion `rv`."""
    return json.dumps({"type": "BOOKMARK", "object": {
        "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"resourceVersion": str(rv)}}})


def write_stats(path, stats):
    """Replaces `path` with `stats` as JSON (atomically: a reader sees the old or the new)."""
    tmp = path + ".tmp"
    with STATS_LOCK:
        text = json.dumps(stats)
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def listening_port(log_path):
    """The port from the "listening PORT" line this server prints when ready, or None while the
    log at `log_path` has none yet (for a wait_for loop)."""
    with open(log_path) as f:
        for line in f:
            if line.startswith("listening "):
                return int(line.split()[1])
    return None


def make_cert(folder, address="127.0.0.1"):
    """A self-signed certificate for `address` (an IPv4 literal; openssl, RSA 2048, valid one
    day) and its key, written to folder/api.crt and folder/api.key; returns (crt, key). Raises
    CalledProcessError when openssl fails."""
    crt, key = os.path.join(folder, "api.crt"), os.path.join(folder, "api.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", crt, "-days", "1", "-subj", "/CN=" + address, "-addext",
                    "subjectAltName=IP:" + address], check=True, capture_output=True, timeout=60)
    return crt, key


def write_kubeconfig(path, port, ca_file, token, name="fake", address="127.0.0.1"):
    """Writes a kubeconfig at `path` whose current context reaches this server on address:port
    over TLS (CA `ca_file`) with bearer `token`; returns `path`."""
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: %(n)s\n"
                "clusters:\n- name: %(n)s\n  cluster:\n    server: https://%(a)s:%(p)d\n"
                "    certificate-authority: %(ca)s\n"
                "users:\n- name: %(n)s\n  user:\n    token: %(t)s\n"
                "contexts:\n- name: %(n)s\n  context: {cluster: %(n)s, user: %(n)s}\n"
                % {"n": name, "p": port, "ca": ca_file, "t": token, "a": address})
    return path


def start(tmp, token, args=(), ns=None, name="fake", max_seconds=None, address="127.0.0.1"):
    """Runs this server through labkit.start (in namespace `ns` if given; under `timeout` with
    `max_seconds`; stop_all() or labkit.stop ends it) with a new certificate in folder `tmp`,
    bearer `token` and the further command-line `args` (say ["--nodes", "12", "--churn", "0"]),
    its output in TMP/apiserver.log. Waits at most 30 s for its port, then writes
    TMP/kubeconfig (cluster, user and context `name`). `address`: where it listens (in `ns`),
    and what its certificate and the kubeconfig name. Returns (process, kubeconfig path);
    raises labkit.Broken if it exits or does not listen in time."""
    crt, key = make_cert(tmp, address)
    log = os.path.join(tmp, "apiserver.log")
    p = labkit.start(ns, [sys.executable, os.path.abspath(__file__), "--cert", crt, "--key", key,
                          "--token", token, "--listen", address, *args], log,
                    max_seconds=max_seconds)
    labkit.wait_for(lambda: p.poll() is not None or listening_port(log), 30, "fake API server")
    if p.poll() is not None:
        raise labkit.Broken("fake API server exited (%s):\n%s" % (p.returncode, labkit.tail(log)))
    return p, write_kubeconfig(os.path.join(tmp, "kubeconfig"), listening_port(log), crt, token,
                               name=name, address=address)


def make_handler(cluster, token, churn_per_s, stats, gone_file=None, pause_file=None, extra=(),
                 gone_bookmark=False, log_lists=False, objects=None, node_zones=None,
                 rollout=None, log_requests=False):
    def count(**kv):
        with STATS_LOCK:
            for k, v in kv.items():
                stats[k] = stats.get(k, 0) + v

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            count(connections=1)

        def log_message(self, *_args):
            pass

        def send_json(self, code, body):
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (http.server's name)
            count(requests=1)
            if log_requests:
                print("GET %s" % self.path, flush=True)
            if self.headers.get("Authorization") != "Bearer " + token:
                self.send_json(401, json.dumps({"kind": "Status", "apiVersion": "v1",
                                                "status": "Failure", "reason": "Unauthorized",
                                                "code": 401}))
                return
            url = urllib.parse.urlsplit(self.path)
            q = urllib.parse.parse_qs(url.query)
            parts = url.path.strip("/").split("/")
            if objects and url.path in objects:
                with open(objects[url.path]) as f:
                    self.send_json(200, f.read())
                return
            if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
                if node_zones:
                    self.send_node_from_file(parts[3])
                else:
                    self.send_json(200, cluster.node(parts[3]))
                return
            for fs in extra:
                if (url.path == "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices"
                        % fs.namespace and q.get("labelSelector")
                        == ["kubernetes.io/service-name=" + fs.service]):
                    if q.get("watch") in (["1"], ["true"]):
                        self.watch_file(fs, float(q.get("timeoutSeconds", ["300"])[0]),
                                        q.get("resourceVersion", [""])[0])
                    else:
                        fs.refresh()
                        self.send_json(200, fs.list_body())
                    return
            want = "kubernetes.io/service-name=" + cluster.service
            if (url.path == "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices"
                    % cluster.namespace and q.get("labelSelector") == [want]):
                if q.get("watch") in (["1"], ["true"]) and rollout:
                    since = q.get("resourceVersion", [""])[0]
                    self.watch_rollout(float(q.get("timeoutSeconds", ["300"])[0]),
                                       int(since) if since.isdigit() else cluster.rv)
                elif q.get("watch") in (["1"], ["true"]):
                    self.watch(float(q.get("timeoutSeconds", ["300"])[0]))
                else:
                    count(lists=1)
                    if log_lists:
                        print("list %.3f" % time.time(), flush=True)
                    body = cluster.list_body()
                    count(list_bytes=len(body))
                    self.send_json(200, body)
                return
            self.send_json(404, json.dumps({"kind": "Status", "code": 404}))

        def send_node_from_file(self, name):
            try:
                with open(node_zones) as f:
                    zone = json.load(f).get(name)
            except (OSError, ValueError):
                zone = None
            if zone is None:
                self.send_json(404, json.dumps({"kind": "Status", "code": 404,
                                                "reason": "NotFound"}))
                return
            self.send_json(200, json.dumps({
                "kind": "Node", "apiVersion": "v1",
                "metadata": {"name": name, "resourceVersion": "77", "labels": {
                    "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                    "topology.kubernetes.io/zone": zone,
                    "topology.kubernetes.io/region": "bench-1"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))

        def start_chunked(self):
            """The 200 header of a watch: a chunked stream of JSON lines follows."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

        def chunk(self, line):
            data = (line + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def watch_file(self, fs, timeout, since=""):
            """The watch of an --extra-service: MODIFIED when its file changes."""
            self.start_chunked()
            end = time.monotonic() + min(timeout, 600)
            next_bookmark = time.monotonic() + 5
            # Each watcher sends each version after the one it asked from once, whoever re-read
            # the file.
            sent = int(since) if since.isdigit() else fs.rv
            try:
                while time.monotonic() < end and not stats["stop"]:
                    time.sleep(0.2)
                    fs.refresh()
                    if fs.rv != sent:
                        sent = fs.rv
                        self.chunk(fs.event("MODIFIED"))
                    if time.monotonic() >= next_bookmark:
                        next_bookmark += 5
                        self.chunk(fs.event("BOOKMARK"))
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass

        def watch_rollout(self, timeout, since):
            """A watch of the Service's slices from resourceVersion `since`, fed by `rollout`:
            each slice version after it once, a BOOKMARK a minute (the watch cache's
            frequency); the bytes and events sent counted in stats, by second."""
            count(watches=1)
            self.start_chunked()
            end = time.monotonic() + min(timeout, 600)
            next_bookmark = time.monotonic() + 60
            sent = since
            try:
                while time.monotonic() < end and not stats["stop"]:
                    events = rollout.events_after(sent, min(1.0, end - time.monotonic()))
                    out = []
                    for rv, line in events:
                        out.append(b"%x\r\n%s\r\n" % (len(line), line))
                        sent = rv
                    if time.monotonic() >= next_bookmark:
                        next_bookmark += 60
                        line = (bookmark(max(sent, cluster.rv)) + "\n").encode()
                        out.append(b"%x\r\n%s\r\n" % (len(line), line))
                        count(bookmarks=1, bookmark_bytes=len(out[-1]))
                    if events:
                        data = b"".join(out)
                        with STATS_LOCK:
                            stats["watch_events"] = stats.get("watch_events", 0) + len(events)
                            stats["watch_bytes"] = stats.get("watch_bytes", 0) + len(data)
                            sec = str(int(time.time()))
                            by_s = stats.setdefault("watch_bytes_by_second", {})
                            by_s[sec] = by_s.get(sec, 0) + len(data)
                    if out:
                        self.wfile.write(b"".join(out))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass

        def watch(self, timeout):
            stats["watches"] += 1
            self.start_chunked()
            rng = random.Random(stats["watches"])
            end = time.monotonic() + min(timeout, 600)
            next_bookmark = time.monotonic() + 5
            started = time.monotonic()
            try:
                while time.monotonic() < end and not stats["stop"]:
                    if (gone_file and time.monotonic() - started >= 1
                            and os.path.exists(gone_file)):
                        # As the API server answers a watch from a compacted resourceVersion.
                        stats["gone"] = stats.get("gone", 0) + 1
                        if gone_bookmark:
                            self.chunk(bookmark(cluster.rv))
                        data = (json.dumps({"type": "ERROR", "object": {
                            "kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": "too old resource version", "reason": "Expired",
                            "code": 410}}) + "\n").encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        break
                    time.sleep(1.0 / churn_per_s if churn_per_s > 0 else 1.0)
                    lines = []
                    event = cluster.churn(rng, pause_file is not None
                                          and os.path.exists(pause_file)) if churn_per_s > 0 else None
                    if event:
                        lines.append(event)
                        stats["events"] += 1
                    if time.monotonic() >= next_bookmark:
                        next_bookmark += 5
                        lines.append(bookmark(cluster.rv))
                    for line in lines:
                        data = (line + "\n").encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass

    return Handler


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--zones", type=int, default=5)
    ap.add_argument("--namespace", default="podnet")
    ap.add_argument("--service", default="podnet")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--churn", type=float, default=10, help="MODIFIED events per second")
    ap.add_argument("--max-seconds", type=float, default=900, help="exit after this long")
    ap.add_argument("--gone-file", help="while this file exists, watches end after 1 s with 410")
    ap.add_argument("--gone-bookmark", action="store_true",
                    help="a gone watch sends a BOOKMARK before its 410 (a client relists at once)")
    ap.add_argument("--log-lists", action="store_true", help='print "list T" when a LIST begins')
    ap.add_argument("--log-requests", action="store_true",
                    help='print "GET PATH" (path and query) for every request')
    ap.add_argument("--pause-file", help="while this file exists, no churn: every Pod in service")
    ap.add_argument("--extra-service", action="append", default=[], metavar="NS/SVC=FILE",
                    help="one more Service whose one slice's endpoints are FILE's JSON list")
    ap.add_argument("--service-file", help="the probe Pods' Service: its endpoints are FILE's list")
    ap.add_argument("--forged-slice", action="append", default=[], metavar="NS/SVC=FILE",
                    help="the --extra-service NS/SVC lists one more slice, endpoints FILE's list, "
                         "not managed by the EndpointSlice controller")
    ap.add_argument("--node-zones", help="JSON node name -> zone for GET /api/v1/nodes/NAME")
    ap.add_argument("--listen", default="127.0.0.1", help="the address to listen on")
    ap.add_argument("--object", action="append", default=[], metavar="PATH=FILE",
                    help="GET PATH answers FILE's contents (read at each request)")
    ap.add_argument("--rollout-file", help="once this file exists, a rolling update of every "
                    "Pod, broadcast to every watch (no churn)")
    ap.add_argument("--rollout-wave", type=int, default=1,
                    help="Pods replaced at once (the DaemonSet's maxUnavailable)")
    ap.add_argument("--rollout-wave-seconds", type=float, default=15,
                    help="the time one wave of Pods takes to be replaced")
    ap.add_argument("--rollout-batch-seconds", type=float, default=0,
                    help="a slice's changes within this long after a write are one write")
    ap.add_argument("--stats-file", help="write the counts here (JSON) every second")
    args = ap.parse_args()
    if args.nodes > 250 * 250:
        sys.exit("at most 62,500 nodes (127.1.0.0/16)")
    cluster = Cluster(args.nodes, args.zones, args.namespace, args.service)
    stats = {"requests": 0, "lists": 0, "watches": 0, "events": 0, "stop": False}
    extra = []
    for spec in args.extra_service:
        name, _, path = spec.partition("=")
        ns, _, svc = name.partition("/")
        if not (ns and svc and path):
            sys.exit("--extra-service wants NS/SVC=FILE, got %r" % spec)
        extra.append(FileSlice(ns, svc, path))
    if args.service_file:
        extra.append(FileSlice(args.namespace, args.service, args.service_file, ports=[
            {"name": "http", "protocol": "TCP", "port": 9479},
            {"name": "echo", "protocol": "UDP", "port": 9479},
            {"name": "burst", "protocol": "TCP", "port": 5201}]))
    for spec in args.forged_slice:
        name, _, path = spec.partition("=")
        target = [fs for fs in extra if "%s/%s" % (fs.namespace, fs.service) == name]
        if not target or not path:
            sys.exit("--forged-slice wants NS/SVC=FILE of an --extra-service, got %r" % spec)
        target[0].forge(path)
    objects = dict(spec.partition("=")[::2] for spec in args.object)
    rollout = None
    if args.rollout_file:
        rollout = Rollout(cluster, args.rollout_file, args.rollout_wave,
                          args.rollout_wave_seconds, args.rollout_batch_seconds, stats)
        threading.Thread(target=rollout.run, daemon=True).start()
    srv = Server((args.listen, 0), make_handler(cluster, args.token, args.churn, stats,
                                                       args.gone_file, args.pause_file, extra,
                                                       args.gone_bookmark, args.log_lists,
                                                       objects, args.node_zones, rollout,
                                                       args.log_requests))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("listening %d" % srv.server_address[1], flush=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    end = time.monotonic() + args.max_seconds  # bounded: a forgotten server ends by itself
    while time.monotonic() < end:
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))
        if args.stats_file:
            write_stats(args.stats_file, stats)
    stats["stop"] = True
    srv.shutdown()
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    main()
