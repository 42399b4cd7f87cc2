#!/usr/bin/env node
// deploy/prometheus/scrape-config.example.yaml in a real Prometheus. Debian's prometheus is built
// without kubernetes_sd, so the job's kubernetes_sd_configs is replaced by a file_sd_configs whose
// targets are shaped as kubernetes_sd (role: pod) finds the rendered DaemonSet's Pods: one target
// per container port (address podIP:port) with the __meta_kubernetes_* labels it sets. The job's
// own relabel rules must then keep exactly one target per running Pod — its HTTP port — with the
// namespace, pod and node labels. Prometheus listens on 127.0.0.1; the "Pods" are 127.0.0.1 with
// ports nothing listens on (the targets are only discovered and relabelled; a failed scrape of
// them is expected).
//
// Usage: node scrape_config_test.cjs --kubectl KUBECTL --deploy DEPLOY_DIR --modules NPM_DIR
//                                    --prometheus PROMETHEUS --promtool PROMTOOL
"use strict";

const fs = require("fs");
const net = require("net");
const os = require("os");
const path = require("path");
const http = require("http");
const { spawn, spawnSync } = require("child_process");

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
for (const k of ["kubectl", "deploy", "modules", "prometheus", "promtool"]) {
  if (!args[k]) { console.error(`usage: missing --${k}`); process.exit(2); }
}
require("./kubectl.cjs").requireKubectl(args.kubectl);
const YAML = require(require.resolve("yaml", { paths: [path.resolve(args.modules)] }));

let passed = 0;
let failed = 0;
function check(ok, what) {
  console.log((ok ? "ok     " : "FAILED ") + what);
  ok ? passed++ : failed++;
  return ok;
}
function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}
function getJson(url) {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: 2000 }, (res) => {
      let body = "";
      res.on("data", (d) => { body += d; });
      res.on("end", () => { try { resolve(JSON.parse(body)); } catch { resolve(null); } });
    });
    req.on("error", () => resolve(null));
    req.on("timeout", () => { req.destroy(); resolve(null); });
  });
}

async function main() {
  const r = spawnSync(args.kubectl, ["kustomize", path.join(args.deploy, "kubernetes")], { encoding: "utf8", timeout: 60000 });
  if (!check(r.status === 0, "kubectl kustomize deploy/kubernetes renders" + (r.status ? `: ${r.stderr || r.error}` : ""))) finish();
  const objects = YAML.parseAllDocuments(r.stdout).map((d) => d.toJS()).filter((o) => o);
  const ds = objects.find((o) => o.kind === "DaemonSet");
  const ns = ds.metadata.namespace;
  const podLabels = ds.spec.template.metadata.labels;
  const container = ds.spec.template.spec.containers[0];

  const example = YAML.parse(fs.readFileSync(path.join(args.deploy, "prometheus", "scrape-config.example.yaml"), "utf8"));
  const jobs = example.scrape_configs || [];
  check(jobs.length === 1, "the example has one scrape job");
  const job = jobs[0];
  const sd = (job.kubernetes_sd_configs || [])[0] || {};
  check(sd.role === "pod" && ((sd.namespaces || {}).names || []).includes(ns),
    `kubernetes_sd_configs: role pod in namespace ${ns}`);
  const selector = ((sd.selectors || [])[0] || {}).label || "";
  check(selector.split(",").every((kv) => { const [k, v] = kv.split("="); return podLabels[k] === v; }) && selector,
    `its label selector (${selector}) selects the DaemonSet's Pods`);

  // kubernetes_sd's targets for two running Pods and one pending Pod of the DaemonSet.
  const ports = {};
  for (const p of container.ports) ports[`${p.containerPort}/${p.protocol}`] = await freePort();
  const pods = [
    { name: "podnet-exporter-aaaaa", node: "node-a", phase: "Running" },
    { name: "podnet-exporter-bbbbb", node: "node-b", phase: "Running" },
    { name: "podnet-exporter-ccccc", node: "node-c", phase: "Pending" },
  ];
  const groups = [];
  for (const pod of pods) {
    for (const p of container.ports) {
      groups.push({
        targets: [`127.0.0.1:${ports[`${p.containerPort}/${p.protocol}`]}`],
        labels: {
          __meta_kubernetes_namespace: ns,
          __meta_kubernetes_pod_name: pod.name,
          __meta_kubernetes_pod_node_name: pod.node,
          __meta_kubernetes_pod_phase: pod.phase,
          __meta_kubernetes_pod_ip: "127.0.0.1",
          __meta_kubernetes_pod_container_name: container.name,
          __meta_kubernetes_pod_container_port_name: p.name,
          __meta_kubernetes_pod_container_port_number: String(p.containerPort),
          __meta_kubernetes_pod_container_port_protocol: p.protocol,
          ...Object.fromEntries(Object.entries(podLabels).map(([k, v]) =>
            [`__meta_kubernetes_pod_label_${k.replace(/[^a-zA-Z0-9_]/g, "_")}`, v])),
        },
      });
    }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "podnet-scrape-"));
  const targetsFile = path.join(dir, "targets.json");
  fs.writeFileSync(targetsFile, JSON.stringify(groups, null, 1));
  const testJob = { ...job, scrape_interval: "1h", file_sd_configs: [{ files: [targetsFile] }] };
  delete testJob.kubernetes_sd_configs;
  const config = { ...example, scrape_configs: [testJob] };
  const configFile = path.join(dir, "prometheus.yml");
  fs.writeFileSync(configFile, YAML.stringify(config));
  const pc = spawnSync(args.promtool, ["check", "config", configFile], { encoding: "utf8", timeout: 60000 });
  check(pc.status === 0, "promtool check config accepts the job (with file_sd in place of kubernetes_sd)" +
    (pc.status ? `:\n${pc.stdout}${pc.stderr}` : ""));

  const webPort = await freePort();
  const prom = spawn(args.prometheus, [`--config.file=${configFile}`, `--storage.tsdb.path=${path.join(dir, "data")}`,
    `--web.listen-address=127.0.0.1:${webPort}`, "--log.level=warn"], { stdio: ["ignore", "ignore", "pipe"] });
  let promErr = "";
  prom.stderr.on("data", (d) => { promErr += d; });
  const killer = setTimeout(() => prom.kill("SIGKILL"), 90000);
  let active = null;
  let dropped = null;
  for (let i = 0; i < 60; i++) { // at most ~60 s
    const t = await getJson(`http://127.0.0.1:${webPort}/api/v1/targets`);
    if (t && t.status === "success") {
      active = t.data.activeTargets.filter((x) => x.scrapePool === job.job_name);
      dropped = t.data.droppedTargets;
      if (active.length + dropped.length >= groups.length) break;
    }
    await sleep(1000);
  }
  prom.kill("SIGTERM");
  clearTimeout(killer);
  if (!check(active !== null, "Prometheus came up and lists its targets" + (active ? "" : `:\n${promErr}`))) finish();
  const running = pods.filter((p) => p.phase === "Running");
  check(active.length === running.length,
    `one target per running Pod: ${active.length} kept of ${groups.length}, ${dropped.length} dropped`);
  const httpPort = ports[`${container.ports.find((p) => p.name === "http").containerPort}/TCP`];
  for (const pod of running) {
    const t = active.find((x) => x.labels.pod === pod.name);
    check(t && t.labels.namespace === ns && t.labels.node === pod.node && t.labels.instance === `127.0.0.1:${httpPort}` &&
      t.labels.job === job.job_name && t.scrapeUrl.endsWith(`:${httpPort}/metrics`),
      `${pod.name}: namespace, pod and node labels, scraped on the HTTP port's /metrics` +
      (t ? ` (${JSON.stringify(t.labels)})` : ""));
  }
  fs.rmSync(dir, { recursive: true, force: true });
  finish();
}

main();
