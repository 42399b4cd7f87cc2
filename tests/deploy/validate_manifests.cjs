#!/usr/bin/env node
// deploy/kubernetes as a cluster would receive it: `kubectl kustomize` renders the base, the
// prometheus-operator overlay, the TLS, grafana-dashboards, report, networkpolicy and no-burst-pool overlays; every object
// (and the TLS overlay's cert-manager Certificate example) is validated offline against the
// Kubernetes, prometheus-operator and cert-manager schemas (kubernetes-models: JSON schema with
// types, enums and formats; TypeScript over the same models' types: unknown fields, as the API
// server's strict field validation rejects them); then the properties the deployment promises are
// asserted (least privilege RBAC, non-root, read-only root filesystem, no capabilities, the ping
// sysctl, probes, ports, the ConfigMap at the path the image reads; with TLS: the web
// configuration's files inside read-only Secret mounts, an HTTPS PodMonitor that verifies the
// certificate, probes still plain HTTP; the PrometheusRules equal deploy/prometheus's rule files
// and pass promtool; the dashboard ConfigMaps are dashboards/*.json for Grafana's sidecar; the
// NetworkPolicies admit exactly the probe ports, the scrape, DNS and the API server, and the
// patches their comments document apply). Every
// check is also run against mutated copies, which it must reject: a check that cannot fail would
// pass anything.
//
// The TLS overlay's web configuration is also checked by exporter-toolkit itself (`promtool check
// web-config`), with the Secret podnet-tls made by docs/deploy.md's openssl commands in place.
//
// Usage: node validate_manifests.cjs --kubectl KUBECTL --deploy DEPLOY_DIR --dockerfile FILE
//                                    --modules NPM_DIR --promtool PROMTOOL [--exporter BIN]
// NPM_DIR holds node_modules (npm ci of tests/deploy/package.json). With --exporter, only the
// rendered ConfigMap's configuration is checked, with `podnet-exporter --config.check`.
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");

const args = {};
for (let i = 2; i < process.argv.length; i += 2) {
  args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
}
for (const k of ["kubectl", "deploy", "dockerfile", "modules", "promtool"]) {
  if (!args[k]) {
    console.error(`usage: missing --${k}`);
    process.exit(2);
  }
}
require("./kubectl.cjs").requireKubectl(args.kubectl);
const modules = path.resolve(args.modules);
const req = (m) => require(require.resolve(m, { paths: [modules] }));
const YAML = req("yaml");

let passed = 0;
let failed = 0;
function check(ok, what) {
  console.log((ok ? "ok     " : "FAILED ") + what);
  ok ? passed++ : failed++;
}
const clone = (x) => JSON.parse(JSON.stringify(x));
const deepEqual = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// ---------------------------------------------------------------------------------------------
// Render.
function render(dir) {
  const r = spawnSync(args.kubectl, ["kustomize", dir], { encoding: "utf8", timeout: 60000 });
  if (r.error) return { error: String(r.error) };
  if (r.status !== 0) return { error: r.stderr };
  const docs = YAML.parseAllDocuments(r.stdout);
  const errs = docs.flatMap((d) => d.errors.map(String));
  if (errs.length) return { error: errs.join("\n") };
  const objects = docs.map((d) => d.toJS()).filter((o) => o);
  // kustomize writes a generated Secret's base64 as a block of 70-column lines; the API server's
  // decoder (Go encoding/base64) skips the line breaks, the schema's "byte" format does not.
  for (const o of objects.filter((q) => q.kind === "Secret" && q.data)) {
    for (const k of Object.keys(o.data)) o.data[k] = String(o.data[k]).replace(/[\r\n]/g, "");
  }
  return { objects };
}

const kubeDir = path.join(args.deploy, "kubernetes");
const base = render(kubeDir);
check(!base.error, `kubectl kustomize ${kubeDir} renders` + (base.error ? `: ${base.error}` : ""));
const withPm = render(path.join(kubeDir, "prometheus-operator"));
check(!withPm.error, "kubectl kustomize .../prometheus-operator renders" +
  (withPm.error ? `: ${withPm.error}` : ""));
const withTls = render(path.join(kubeDir, "tls"));
check(!withTls.error, "kubectl kustomize .../tls renders" + (withTls.error ? `: ${withTls.error}` : ""));
const withDash = render(path.join(kubeDir, "grafana-dashboards"));
check(!withDash.error, "kubectl kustomize .../grafana-dashboards renders" +
  (withDash.error ? `: ${withDash.error}` : ""));
const withReport = render(path.join(kubeDir, "report"));
check(!withReport.error, "kubectl kustomize .../report renders" +
  (withReport.error ? `: ${withReport.error}` : ""));
const withNetpol = render(path.join(kubeDir, "networkpolicy"));
check(!withNetpol.error, "kubectl kustomize .../networkpolicy renders" +
  (withNetpol.error ? `: ${withNetpol.error}` : ""));
if (base.error || withPm.error || withTls.error || withDash.error || withReport.error ||
  withNetpol.error) finish();
// The Service canary's objects (base/service-canary.yaml, labelled component: canary) are
// checked by canaryProblems; `get` and the probe Pods' promises leave them out.
const isCanary = (o) => ((o.metadata || {}).labels || {})["app.kubernetes.io/component"] === "canary";
const get = (objs, kind) => objs.find((o) => o.kind === kind && !isCanary(o));
// The probe Pods' configuration file (podnet.yaml) in the ConfigMap: [key, text].
const probeConfig = (objs) => Object.entries(get(objs, "ConfigMap").data)[0];

// The shipped Alertmanager configuration (deploy/kubernetes/alertmanager): rendered as the
// Secret an Alertmanager reads, byte for byte the file the proving ground and lab_fleet run, and
// a configuration Alertmanager itself accepts (amtool, from prometheus-alertmanager).
if (!args.exporter) {
  const amDir = path.join(kubeDir, "alertmanager");
  const withAm = render(amDir);
  check(!withAm.error, "kubectl kustomize .../alertmanager renders" +
    (withAm.error ? `: ${withAm.error}` : ""));
  if (!withAm.error) {
    const secret = withAm.objects.find((o) => o.kind === "Secret" && o.metadata.name === "alertmanager-podnet");
    const file = fs.readFileSync(path.join(amDir, "alertmanager.yaml"), "utf8");
    const data = secret && secret.data && secret.data["alertmanager.yaml"];
    check(data !== undefined && Buffer.from(data, "base64").toString("utf8") === file,
      "the Secret alertmanager-podnet carries alertmanager.yaml byte for byte");
    const am = spawnSync("amtool", ["check-config", path.join(amDir, "alertmanager.yaml")],
      { encoding: "utf8", timeout: 30000 });
    check(am.status === 0, `amtool check-config accepts it (exit ${am.status})` +
      (am.status !== 0 ? `:\n${am.stdout}${am.stderr}` : ""));
    const doc = YAML.parse(file);
    const names = (m) => (m || []).join(" ");
    const alerts = fs.readFileSync(path.join(args.deploy, "prometheus", "podnet-alert-rules.yml"), "utf8");
    const known = new Set([...alerts.matchAll(/- alert: (\w+)/g)].map((m) => m[1]));
    // Every alert name an inhibit rule matches is one the rules define (a renamed alert would
    // silently stop being held back).
    const used = new Set((doc.inhibit_rules || []).flatMap((r) =>
      [...names(r.source_matchers).concat(" ", names(r.target_matchers)).matchAll(/Podnet\w+/g)].map((m) => m[0])));
    const unknown = [...used].filter((n) => !known.has(n));
    check(used.size > 0 && unknown.length === 0,
      `the inhibit rules name ${used.size} alerts, all defined in podnet-alert-rules.yml` +
      (unknown.length ? `: unknown ${unknown.join(", ")}` : ""));
  }
}
// The report overlay's own objects (the rest is the base).
const reportOnly = withReport.objects.filter((o) => !base.objects.some((q) => deepEqual(q, o)));
// The networkpolicy overlay's own objects.
const netpolOnly = withNetpol.objects.filter((o) => !base.objects.some((q) => deepEqual(q, o)));

// ---------------------------------------------------------------------------------------------
// The configuration as deployed, checked by the exporter itself.
if (args.exporter) {  // this mode checks only the configuration
  const [key, text] = probeConfig(withPm.objects);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "podnet-deploy-"));
  const file = path.join(dir, key);
  fs.writeFileSync(file, text);
  const env = { ...process.env, POD_NAME: "podnet-exporter-abcde", NODE_NAME: "node-a", POD_ZONE: "",
    POD_IP: "10.0.0.1", POD_NAMESPACE: "podnet" };
  const r = spawnSync(args.exporter, [`--config.file=${file}`, "--config.check"],
    { encoding: "utf8", timeout: 30000, env });
  check(r.status === 0, `podnet-exporter --config.check accepts the rendered ConfigMap (exit ${r.status})` +
    (r.status !== 0 ? `:\n${r.stdout}${r.stderr}` : ""));
  // And it is a real check: the same file with an unknown key fails it.
  fs.writeFileSync(file, text + "no_such_key: 1\n");
  const bad = spawnSync(args.exporter, [`--config.file=${file}`, "--config.check"],
    { encoding: "utf8", timeout: 30000, env });
  check(bad.status === 2 && /no_such_key/.test(bad.stdout + bad.stderr),
    `--config.check rejects it with an unknown key (exit ${bad.status})`);
  // The Service canary's configuration: valid, and no probe in it.
  const canaryCm = withPm.objects.find((o) => o.kind === "ConfigMap" && isCanary(o));
  const [ckey, ctext] = Object.entries(canaryCm.data)[0];
  fs.writeFileSync(path.join(dir, ckey), ctext);
  const canaryCheck = spawnSync(args.exporter, [`--config.file=${path.join(dir, ckey)}`, "--config.check"],
    { encoding: "utf8", timeout: 30000, env });
  check(canaryCheck.status === 0 && /probes: none;/.test(canaryCheck.stdout),
    `podnet-exporter --config.check accepts the canary's ${ckey}, which runs no probe (exit ${canaryCheck.status})` +
    (canaryCheck.status !== 0 ? `:\n${canaryCheck.stdout}${canaryCheck.stderr}` : ""));
  // The report Job's command line as the exporter parses it (flags first, then --help: exit 0
  // only when every flag before it is good), and a bad --duration refused.
  const job = get(withReport.objects, "Job");
  const jc = job.spec.template.spec.containers[0];
  const jobArgs = [...jc.command.slice(1), ...jc.args];
  const parsed = spawnSync(args.exporter, [...jobArgs, "--help"], { encoding: "utf8", timeout: 30000, env });
  check(parsed.status === 0, `podnet-exporter parses the report Job's arguments ${jobArgs.join(" ")} (exit ${parsed.status})` +
    (parsed.status !== 0 ? `:\n${parsed.stdout}${parsed.stderr}` : ""));
  const badArgs = jobArgs.map((a) => (a.startsWith("--duration=") ? "--duration=60" : a));
  const refused = spawnSync(args.exporter, [...badArgs, "--help"], { encoding: "utf8", timeout: 30000, env });
  check(refused.status === 2 && /--duration/.test(refused.stderr),
    `and refuses --duration=60 (no unit) with exit 2 (exit ${refused.status})`);
  fs.rmSync(dir, { recursive: true, force: true });
  finish();
}


// ---------------------------------------------------------------------------------------------
// Schemas (kubernetes-models, JSON schema).
const kModules = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "batch/v1": "kubernetes-models/batch/v1",
  "rbac.authorization.k8s.io/v1": "kubernetes-models/rbac.authorization.k8s.io/v1",
  "networking.k8s.io/v1": "kubernetes-models/networking.k8s.io/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
  "cert-manager.io/v1": "@kubernetes-models/cert-manager/cert-manager.io/v1",
};
function modelModule(o) {
  const m = kModules[o.apiVersion];
  return m && /^[A-Za-z]+$/.test(o.kind || "") ? `${m}/${o.kind}` : null;
}
function schemaErrors(o) {
  const mod = modelModule(o);
  if (!mod) return `no schema known for ${o.apiVersion} ${o.kind}`;
  let Model;
  try {
    Model = req(mod)[o.kind];
  } catch (e) {
    return `no model ${mod}: ${e.message}`;
  }
  try {
    new Model(clone(o)).validate();
    return null;
  } catch (e) {
    return e.message;
  }
}
const objName = (o) => `${o.kind}/${o.metadata && o.metadata.name}`;
// The TLS overlay's objects that differ from the prometheus-operator overlay's, and the
// cert-manager Certificate it ships as an example (not a resource: it needs cert-manager's CRDs).
const tlsDir = path.join(kubeDir, "tls");
const certificate = YAML.parse(fs.readFileSync(path.join(tlsDir, "certificate.example.yaml"), "utf8"));
const tlsChanged = withTls.objects.filter((o) => !withPm.objects.some((q) => deepEqual(q, o)));
for (const [where, o] of [...withPm.objects.map((o) => ["", o]), ...tlsChanged.map((o) => ["tls: ", o]),
  ["tls/certificate.example.yaml: ", certificate], ...withDash.objects.map((o) => ["grafana-dashboards: ", o]),
  ...reportOnly.map((o) => ["report: ", o]), ...netpolOnly.map((o) => ["networkpolicy: ", o])]) {
  const err = schemaErrors(o);
  check(!err, `${where}${objName(o)} (${o.apiVersion}) validates against its schema` + (err ? `: ${err}` : ""));
}
const base_kinds = base.objects.map((o) => o.kind).sort();
const operatorKinds = ["PodMonitor", "PrometheusRule", "PrometheusRule"];
check(deepEqual(base_kinds, withPm.objects.filter((o) => !operatorKinds.includes(o.kind))
  .map((o) => o.kind).sort()) && deepEqual(withPm.objects.filter((o) => operatorKinds.includes(o.kind))
  .map((o) => o.kind).sort(), operatorKinds) && withPm.objects.length === base.objects.length + operatorKinds.length,
  "the prometheus-operator overlay is the base plus one PodMonitor and two PrometheusRules");
check(deepEqual(withTls.objects.filter((o) => o.kind !== "Secret").map(objName).sort(),
  withPm.objects.map(objName).sort()) && withTls.objects.length === withPm.objects.length + 1,
  "the TLS overlay is the prometheus-operator overlay plus one Secret (the web configuration)");

// Unknown fields: TypeScript's excess-property check of each object against the model's type.
// The real objects go into one file and a mutant (one misspelled field per kind of object) into
// another; tsc must report nothing in the first and every mutant in the second.
function tsSource(objects) {
  return objects.map((o, i) => `import type { I${o.kind} as T${i} } from "${modelModule(o)}";\n` +
    `export const o${i}: T${i} = ${JSON.stringify(o, null, 1)};\n`).join("");
}
{
  const dir = fs.mkdtempSync(path.join(modules, ".tscheck-"));
  const mutants = [];
  const typos = { // misspellings of real fields, as a hand edit would make them
    DaemonSet: (o) => { o.spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem = true; },
    Service: (o) => { o.spec.publishNotReadyAdresses = false; },
    Deployment: (o) => { o.spec.template.spec.topologySpreadConstraint = []; },
    ClusterRole: (o) => { o.rules[0].verb = ["get"]; },
    PodMonitor: (o) => { o.spec.podMetricsEndpoints[0].pathh = "/metrics"; },
    PrometheusRule: (o) => { o.spec.groups[0].rules[0].expresion = "vector(1)"; },
    Job: (o) => { o.spec.backofLimit = 0; },
    NetworkPolicy: (o) => { o.spec.ingress[0].form = o.spec.ingress[0].from; },
  };
  for (const kind of Object.keys(typos)) {  // the first object of each kind
    const m = clone([...withPm.objects, ...reportOnly, ...netpolOnly].find((o) => o.kind === kind));
    if (m.kind) { typos[kind](m); mutants.push(m); }
  }
  fs.writeFileSync(path.join(dir, "rendered.ts"), tsSource([...withPm.objects, ...tlsChanged, certificate,
    ...withDash.objects, ...reportOnly, ...netpolOnly]));
  fs.writeFileSync(path.join(dir, "mutants.ts"), tsSource(mutants));
  fs.writeFileSync(path.join(dir, "package.json"), '{"type": "commonjs"}\n');
  const tsc = require.resolve("typescript/bin/tsc", { paths: [modules] });
  const r = spawnSync(process.execPath, [tsc, "--noEmit", "--strict", "--skipLibCheck",
    "--module", "nodenext", "--moduleResolution", "nodenext", "rendered.ts", "mutants.ts"],
  { cwd: dir, encoding: "utf8", timeout: 300000 });
  const out = (r.stdout || "") + (r.stderr || "");
  const inRendered = out.split("\n").filter((l) => l.startsWith("rendered.ts"));
  const inMutants = out.split("\n").filter((l) => l.startsWith("mutants.ts") && l.includes("TS2353"));
  check(!r.error && inRendered.length === 0 && !/error TS(?!2353)/.test(out.replace(/^mutants\.ts.*$/mg, "")),
    "no unknown fields in any rendered object (tsc excess-property check)" +
    (inRendered.length || r.error ? `:\n${r.error || inRendered.join("\n")}` : ""));
  check(inMutants.length === mutants.length && mutants.length === Object.keys(typos).length,
    `tsc rejects each of ${mutants.length} misspelled fields (${inMutants.length} reported)` +
    (inMutants.length !== mutants.length ? `:\n${out}` : ""));
  fs.rmSync(dir, { recursive: true, force: true });
}

// The schema validator itself must reject what the API server would.
{
  const ds = clone(withPm.objects.find((o) => o.kind === "DaemonSet"));
  ds.spec.template.spec.securityContext.runAsUser = "65532";
  const bad = [ds];
  const svc = clone(withPm.objects.find((o) => o.kind === "Service"));
  svc.spec.ports[1].protocol = "udp";
  bad.push(svc);
  const pm = clone(withPm.objects.find((o) => o.kind === "PodMonitor"));
  pm.spec.podMetricsEndpoints[0].relabelings[0].action = "copy";
  bad.push(pm);
  const pr = clone(withPm.objects.find((o) => o.kind === "PrometheusRule" && o.metadata.name === "podnet-alert-rules"));
  pr.spec.groups[0].rules.find((r) => r.alert).for = "10 minutes";
  bad.push(pr);
  const dash = clone(withDash.objects[0]);
  dash.metadata.labels.grafana_dashboard = 1;
  bad.push(dash);
  const missed = bad.filter((o) => !schemaErrors(o)).map(objName);
  check(missed.length === 0, "the schemas reject a string runAsUser, protocol \"udp\", relabel action \"copy\", " +
    "an alert's for: \"10 minutes\", a number as a label value" +
    (missed.length ? `: accepted ${missed}` : ""));
}

// ---------------------------------------------------------------------------------------------
// What the deployment promises.
const dockerfile = fs.readFileSync(args.dockerfile, "utf8");
const entry = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile);
const entrypoint = entry ? JSON.parse(entry[1]) : [];
const imageConfigFlag = entrypoint.find((a) => a.startsWith("--config.file="));
const imageConfigPath = imageConfigFlag ? imageConfigFlag.slice("--config.file=".length) : null;
check(imageConfigPath !== null, `the Dockerfile's ENTRYPOINT names --config.file (${imageConfigPath})`);

function cpu(q) { // millicores
  const s = String(q);
  return s.endsWith("m") ? Number(s.slice(0, -1)) : Number(s) * 1000;
}
function bytes(q) {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?$/.exec(String(q));
  if (!m) return NaN;
  const mul = { Ki: 1024, Mi: 1 << 20, Gi: 1 << 30, k: 1e3, M: 1e6, G: 1e9 }[m[2]] || 1;
  return Number(m[1]) * mul;
}
const subset = (small, big) => small && big && Object.keys(small).length > 0 &&
  Object.entries(small).every(([k, v]) => big[k] === v);

// What every podnet Pod keeps (the probe DaemonSet's and the Service canary's): it runs as the
// ServiceAccount with its token, in no host namespace, non-root 65532, seccomp RuntimeDefault, no
// hostPath; one container with a read-only root filesystem, no privilege or capability, requests
// and limits. `what` names the Pods in the messages.
function podSecurity(pod, sa, need, what) {
  need(pod.serviceAccountName === sa.metadata.name, `${what} run as the ServiceAccount`);
  need(pod.automountServiceAccountToken !== false && sa.automountServiceAccountToken !== false,
    `${what}: the service-account token is mounted (in-cluster API client)`);
  need(!pod.hostNetwork && !pod.hostPID && !pod.hostIPC, `${what}: no host network, PID or IPC namespace`);
  const psc = pod.securityContext || {};
  need(psc.runAsNonRoot === true && psc.runAsUser === 65532, `${what} run as non-root uid 65532`);
  need((psc.seccompProfile || {}).type === "RuntimeDefault", `${what}: seccomp profile RuntimeDefault`);
  need(!(pod.volumes || []).some((v) => v.hostPath), `${what}: no hostPath volumes`);
  const containers = [...(pod.initContainers || []), ...(pod.containers || [])];
  need(pod.containers && pod.containers.length === 1, `${what}: one container`);
  for (const c of containers) {
    const sc = c.securityContext || {};
    const at = `container ${c.name}`;
    need((sc.runAsNonRoot ?? psc.runAsNonRoot) === true && (sc.runAsUser ?? psc.runAsUser) === 65532,
      `${at} runs as non-root 65532`);
    need(sc.readOnlyRootFilesystem === true, `${at} has a read-only root filesystem`);
    need(sc.allowPrivilegeEscalation === false, `${at} disallows privilege escalation`);
    need(sc.privileged !== true, `${at} is not privileged`);
    need(((sc.capabilities || {}).drop || []).includes("ALL"), `${at} drops ALL capabilities`);
    need(((sc.capabilities || {}).add || []).length === 0, `${at} adds no capability`);
    need(((sc.seccompProfile || psc.seccompProfile) || {}).type === "RuntimeDefault", `${at} seccomp RuntimeDefault`);
    const r = c.resources || {};
    const rq = r.requests || {}; const lim = r.limits || {};
    need(rq.cpu && rq.memory && lim.cpu && lim.memory, `${at} has cpu and memory requests and limits`);
    need(cpu(rq.cpu) <= cpu(lim.cpu) && bytes(rq.memory) <= bytes(lim.memory), `${at} requests <= limits`);
  }
}

// Returns the list of broken promises (empty: all kept). extraKinds: kinds an overlay may add.
function problems(objects, extraKinds = []) {
  objects = objects.filter((o) => !isCanary(o));
  const p = [];
  const need = (cond, what) => { if (!cond) p.push(what); };
  const all = (kind) => objects.filter((o) => o.kind === kind);
  const one = (kind) => { const l = all(kind); need(l.length === 1, `exactly one ${kind} (${l.length})`); return l[0]; };
  const allowed = ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
    "RoleBinding", "Service", "ConfigMap", "DaemonSet", "PodMonitor", "PrometheusRule", ...extraKinds];
  for (const o of objects) need(allowed.includes(o.kind), `unexpected object ${objName(o)}`);
  const nsObj = one("Namespace"); const sa = one("ServiceAccount"); const cr = one("ClusterRole");
  const crb = one("ClusterRoleBinding");
  const svc = one("Service"); const cm = one("ConfigMap"); const ds = one("DaemonSet");
  if (p.length) return p;
  const ns = nsObj.metadata.name;
  // Two Roles: the peers' in ns, and the cluster DNS one in kube-system (named -cluster-dns).
  const dnsName = (o) => o.metadata.name.endsWith("-cluster-dns");
  const inNs = (kind, dns) => all(kind).filter((o) => dnsName(o) === dns);
  const oneOf = (l, what) => { need(l.length === 1, `exactly one ${what} (${l.length})`); return l[0]; };
  const role = oneOf(inNs("Role", false), "Role"); const rb = oneOf(inNs("RoleBinding", false), "RoleBinding");
  const dnsRole = oneOf(inNs("Role", true), "cluster DNS Role");
  const dnsRb = oneOf(inNs("RoleBinding", true), "cluster DNS RoleBinding");
  if (p.length) return p;
  for (const o of objects) {
    if (["Namespace", "ClusterRole", "ClusterRoleBinding"].includes(o.kind)) continue;
    const want = o === dnsRole || o === dnsRb ? "kube-system" : ns;
    need(o.metadata.namespace === want, `${objName(o)} is in namespace ${want}`);
  }
  need((nsObj.metadata.labels || {})["pod-security.kubernetes.io/enforce"] === "restricted",
    "the Namespace enforces the restricted Pod Security Standard");

  // RBAC: exactly get nodes (cluster) and list + watch endpointslices, get services (namespace).
  need(deepEqual(cr.rules, [{ apiGroups: [""], resources: ["nodes"], verbs: ["get"] }]),
    `ClusterRole grants exactly get on nodes: ${JSON.stringify(cr.rules)}`);
  need(!cr.aggregationRule, "ClusterRole has no aggregationRule");
  // ... and get services (podnet_service_info of probes.service targets in this namespace).
  need(deepEqual(role.rules, [{ apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"],
    verbs: ["list", "watch"] }, { apiGroups: [""], resources: ["services"], verbs: ["get"] }]),
    `Role grants exactly list, watch on endpointslices and get on services: ${JSON.stringify(role.rules)}`);
  const subj = [{ kind: "ServiceAccount", name: sa.metadata.name, namespace: ns }];
  need(deepEqual(crb.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: cr.metadata.name }) &&
    deepEqual(crb.subjects, subj), "ClusterRoleBinding binds the ClusterRole to the ServiceAccount only");
  need(deepEqual(rb.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: role.metadata.name }) &&
    deepEqual(rb.subjects, subj), "RoleBinding binds the Role to the ServiceAccount only");
  // The cluster DNS replicas (probes.dns.cluster_dns): list + watch endpointslices in kube-system.
  need(deepEqual(dnsRole.rules, [{ apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"],
    verbs: ["list", "watch"] }]), `cluster DNS Role grants exactly list, watch on endpointslices: ${JSON.stringify(dnsRole.rules)}`);
  need(deepEqual(dnsRb.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: dnsRole.metadata.name }) &&
    deepEqual(dnsRb.subjects, subj), "cluster DNS RoleBinding binds its Role to the ServiceAccount only");

  // DaemonSet: Pod level.
  const tpl = ds.spec.template;
  const pod = tpl.spec || {};
  const podLabels = (tpl.metadata || {}).labels || {};
  need(subset(ds.spec.selector.matchLabels, podLabels), "DaemonSet selector matches its Pod labels");
  podSecurity(pod, sa, need, "Pods");
  need((pod.tolerations || []).some((t) => t.operator === "Exists" && !t.key && !t.effect),
    "tolerates every taint (operator Exists, no key, no effect)");
  // The drain (--shutdown.drain-period: not ready, still answering peers) fits the grace period
  // with 2 s to stop, and so does the longer one of an exporter whose peers come from the DNS
  // records (discovery: auto from 100 Pods on: 1.1 x dns_refresh 30s + 7 s = 40 s); the grace
  // stays short (a node drain waits for it).
  const drainArg = ((pod.containers || [])[0] || {}).args || [];
  const drain = drainArg.map((a) => /^--shutdown\.drain-period=(\d+)s$/.exec(a)).find(Boolean);
  const drainS = drain ? parseInt(drain[1], 10) : 0;
  const dnsDrainS = 40;
  need(drain && drainS >= 5 && typeof pod.terminationGracePeriodSeconds === "number" &&
    pod.terminationGracePeriodSeconds >= Math.max(drainS, dnsDrainS) + 2 &&
    pod.terminationGracePeriodSeconds <= 60,
    `a drain period of at least 5 s, and the DNS records' ${dnsDrainS} s, inside a grace period of at most 60 s (drain ${drainS} s, grace ${pod.terminationGracePeriodSeconds} s)`);
  need(drainArg.includes("--config.auto-reload-interval=30s"),
    "the ConfigMap's updates are reloaded in place (--config.auto-reload-interval=30s)");
  const us = ds.spec.updateStrategy || {};
  need(us.type === "RollingUpdate" && us.rollingUpdate && /^\d+%$/.test(String(us.rollingUpdate.maxUnavailable)) &&
    parseInt(us.rollingUpdate.maxUnavailable, 10) <= 25, "RollingUpdate with maxUnavailable a small percentage");
  const psc = pod.securityContext || {};
  need((psc.sysctls || []).some((s) => s.name === "net.ipv4.ping_group_range" && s.value === "0 2147483647"),
    "Pod sysctl net.ipv4.ping_group_range = \"0 2147483647\" (ICMP ping sockets, no NET_RAW)");

  const c = pod.containers[0];
  need(typeof c.image === "string" && c.image.length > 0, "the container has an image");
  const env = Object.fromEntries((c.env || []).map((e) => [e.name, e]));
  for (const [name, fieldPath] of [["POD_NAME", "metadata.name"], ["NODE_NAME", "spec.nodeName"],
    ["POD_IP", "status.podIP"], ["POD_NAMESPACE", "metadata.namespace"]]) {
    need(env[name] && env[name].valueFrom && env[name].valueFrom.fieldRef &&
      env[name].valueFrom.fieldRef.fieldPath === fieldPath, `env ${name} from the Downward API ${fieldPath}`);
  }
  const ports = c.ports || [];
  const portOf = (ref, proto) => ports.find((q) => (q.name === ref || q.containerPort === ref) &&
    (q.protocol || "TCP") === proto);
  for (const [num, proto] of [[9479, "TCP"], [9479, "UDP"], [5201, "TCP"], [9480, "TCP"]]) {
    need(ports.some((q) => q.containerPort === num && (q.protocol || "TCP") === proto && !q.hostPort),
      `container port ${num}/${proto} (no hostPort)`);
  }
  for (const [probe, want] of [["livenessProbe", "/-/healthy"], ["readinessProbe", "/-/ready"]]) {
    const g = (c[probe] || {}).httpGet || {};
    const port = portOf(g.port, "TCP");
    need(g.path === want && port && port.containerPort === 9479 && (g.scheme || "HTTP") === "HTTP",
      `${probe} is GET ${want} on 9479 in plain HTTP`);
  }

  // Configuration: the ConfigMap mounted where the image reads it.
  const cmVol = (pod.volumes || []).find((v) => v.configMap && v.configMap.name === cm.metadata.name);
  const mount = cmVol && (c.volumeMounts || []).find((m) => m.name === cmVol.name);
  const configFlag = (c.args || []).concat(c.command || []).find((a) => a.startsWith("--config.file="));
  const configPath = configFlag ? configFlag.slice("--config.file=".length) : imageConfigPath;
  need(mount && imageConfigPath && !c.command, "the ConfigMap is mounted and the image's ENTRYPOINT is kept");
  if (!mount || !configPath) return p;
  const key = mount.subPath || path.posix.relative(mount.mountPath, configPath);
  need(!mount.subPath ? path.posix.dirname(configPath) === mount.mountPath : mount.mountPath === configPath,
    `the ConfigMap is mounted at ${configPath}`);
  need(cm.data && typeof cm.data[key] === "string", `the ConfigMap has the key ${key}`);
  if (!cm.data || typeof cm.data[key] !== "string") return p;
  const cfg = YAML.parse(cm.data[key]) || {};
  const kube = (cfg.peers || {}).kubernetes || {};
  need(kube.namespace === ns && kube.service === svc.metadata.name,
    `config peers.kubernetes is the Service ${ns}/${svc.metadata.name}`);
  const clusterDns = ((cfg.probes || {}).dns || {}).cluster_dns;
  need(clusterDns !== false && ((clusterDns || {}).namespace || "kube-system") === dnsRole.metadata.namespace,
    `config probes.dns.cluster_dns reads the namespace the cluster DNS Role grants (${dnsRole.metadata.namespace})`);
  need(cfg.self && cfg.self.name === "${POD_NAME}" && cfg.self.node === "${NODE_NAME}" && cfg.self.zone === "${POD_ZONE}",
    "config self is ${POD_NAME}, ${NODE_NAME}, ${POD_ZONE}");
  for (const m of cm.data[key].matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}/g)) {
    need(env[m[1]] || m[2] !== undefined, `config variable ${m[1]} is set in the container's env`);
  }
  const portNum = (addr) => Number(String(addr || "").split(":").pop());
  need(portNum(cfg.listen_address) === 9479, "config listen_address is port 9479");
  const resp = cfg.responders || {};
  need(portNum((resp.udp_echo || {}).listen_address) === 9479 && portNum((resp.burst || {}).listen_address) === 5201 &&
    portNum((resp.grpc || {}).listen_address) === 9480, "config responders on 9479/udp, 5201, 9480");

  // Service: headless, ready Pods only, selects the DaemonSet's Pods, every responder port.
  need(svc.spec.clusterIP === "None", "Service is headless");
  need(svc.spec.publishNotReadyAddresses === false, "Service publishNotReadyAddresses is false");
  need(subset(svc.spec.selector, podLabels), "Service selects the DaemonSet's Pods");
  for (const [num, proto] of [[9479, "TCP"], [9479, "UDP"], [5201, "TCP"], [9480, "TCP"]]) {
    const sp = (svc.spec.ports || []).find((q) => q.port === num && (q.protocol || "TCP") === proto);
    const target = sp && portOf(sp.targetPort ?? sp.port, proto);
    need(target && target.containerPort === num, `Service port ${num}/${proto} reaches container port ${num}/${proto}`);
  }

  // PodMonitor (overlay only).
  for (const pm of all("PodMonitor")) {
    need(subset(pm.spec.selector.matchLabels, podLabels), "PodMonitor selects the DaemonSet's Pods");
    need(pm.metadata.namespace === ns, "PodMonitor is in the Pods' namespace");
    const ep = (pm.spec.podMetricsEndpoints || [])[0] || {};
    const target = portOf(ep.port, "TCP");
    need(target && target.containerPort === 9479 && ep.path === "/metrics", "PodMonitor scrapes /metrics on 9479");
    need((ep.relabelings || []).some((r) => deepEqual(r.sourceLabels, ["__meta_kubernetes_pod_node_name"]) &&
      r.targetLabel === "node" && (r.action || "replace") === "replace"), "PodMonitor adds the node label");
  }
  return p;
}

const found = problems(withPm.objects);
check(found.length === 0, "the rendered objects keep every promise" + (found.length ? ":\n  " + found.join("\n  ") : ""));

// Each promise must be able to break: mutate the rendered objects one way at a time.
const ctr = (objs) => get(objs, "DaemonSet").spec.template.spec.containers[0];
const podSpec = (objs) => get(objs, "DaemonSet").spec.template.spec;
const mutations = {
  "ClusterRole may also list nodes": (o) => get(o, "ClusterRole").rules[0].verbs.push("list"),
  "ClusterRole may read pods": (o) => get(o, "ClusterRole").rules.push({ apiGroups: [""], resources: ["pods"], verbs: ["get"] }),
  "Role may get endpointslices": (o) => get(o, "Role").rules[0].verbs.push("get"),
  "Role on all resources": (o) => { get(o, "Role").rules[0].resources = ["*"]; },
  "RoleBinding to the default ServiceAccount": (o) => { get(o, "RoleBinding").subjects[0].name = "default"; },
  "cluster DNS Role may get secrets": (o) => o.find((q) => q.kind === "Role" && q.metadata.namespace === "kube-system").rules.push({ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }),
  "cluster DNS Role in podnet": (o) => { o.find((q) => q.kind === "Role" && q.metadata.namespace === "kube-system").metadata.namespace = "podnet"; },
  "cluster DNS RoleBinding to the default ServiceAccount": (o) => { o.find((q) => q.kind === "RoleBinding" && q.metadata.namespace === "kube-system").subjects[0].name = "default"; },
  "config asks another namespace for DNS": (o) => { const cm = get(o, "ConfigMap"); const k = Object.keys(cm.data)[0]; cm.data[k] = cm.data[k].replace("namespace: kube-system", "namespace: dns"); },
  "root user": (o) => { ctr(o).securityContext.runAsUser = 0; },
  "runAsNonRoot off": (o) => { podSpec(o).securityContext.runAsNonRoot = false; delete ctr(o).securityContext.runAsNonRoot; },
  "writable root filesystem": (o) => { delete ctr(o).securityContext.readOnlyRootFilesystem; },
  "privilege escalation": (o) => { ctr(o).securityContext.allowPrivilegeEscalation = true; },
  "NET_RAW added": (o) => { ctr(o).securityContext.capabilities.add = ["NET_RAW"]; },
  "capabilities kept": (o) => { ctr(o).securityContext.capabilities.drop = ["NET_ADMIN"]; },
  "seccomp Unconfined": (o) => { ctr(o).securityContext.seccompProfile = { type: "Unconfined" }; },
  "no ping sysctl": (o) => { podSpec(o).securityContext.sysctls = []; },
  "hostNetwork": (o) => { podSpec(o).hostNetwork = true; },
  "taints not tolerated": (o) => { podSpec(o).tolerations = [{ key: "node-role.kubernetes.io/control-plane", operator: "Exists" }]; },
  "liveness on /metrics": (o) => { ctr(o).livenessProbe.httpGet.path = "/metrics"; },
  "readiness on /-/healthy": (o) => { ctr(o).readinessProbe.httpGet.path = "/-/healthy"; },
  "no memory limit": (o) => { delete ctr(o).resources.limits.memory; },
  "NODE_NAME from metadata.name": (o) => { ctr(o).env.find((e) => e.name === "NODE_NAME").valueFrom.fieldRef.fieldPath = "metadata.name"; },
  "no POD_IP": (o) => { ctr(o).env = ctr(o).env.filter((e) => e.name !== "POD_IP"); },
  "no UDP echo port": (o) => { ctr(o).ports = ctr(o).ports.filter((q) => q.protocol !== "UDP"); },
  "Service not headless": (o) => { delete get(o, "Service").spec.clusterIP; },
  "Service publishes not-ready Pods": (o) => { get(o, "Service").spec.publishNotReadyAddresses = true; },
  "Service selects other Pods": (o) => { get(o, "Service").spec.selector = { app: "other" }; },
  "ConfigMap mounted elsewhere": (o) => { ctr(o).volumeMounts[0].mountPath = "/config"; },
  "config names another Service": (o) => { const cm = get(o, "ConfigMap"); const k = Object.keys(cm.data)[0]; cm.data[k] = cm.data[k].replace("service: podnet", "service: other"); },
  "PodMonitor on the gRPC port": (o) => { get(o, "PodMonitor").spec.podMetricsEndpoints[0].port = "grpc"; },
  "a Secret": (o) => o.push({ apiVersion: "v1", kind: "Secret", metadata: { name: "s", namespace: "podnet" } }),
  "no drain period": (o) => { ctr(o).args = ctr(o).args.filter((a) => !a.startsWith("--shutdown.drain-period")); },
  "grace shorter than the drain": (o) => { podSpec(o).terminationGracePeriodSeconds = 5; },
  "no config auto-reload": (o) => { ctr(o).args = ctr(o).args.filter((a) => !a.startsWith("--config.auto-reload")); },
};
// The names of the mutations (name -> edit of a copy of objects) that problemsOf finds nothing in.
const uncaught = (mutations, objects, problemsOf) => Object.entries(mutations).filter(([, mutate]) => {
  const m = clone(objects);
  mutate(m);
  return problemsOf(m).length === 0;
}).map(([name]) => name);
const missed = uncaught(mutations, withPm.objects, problems);
check(missed.length === 0, `each of ${Object.keys(mutations).length} broken promises is caught` +
  (missed.length ? `; missed: ${missed.join(", ")}` : ""));

// The Service canary (base/service-canary.yaml): a Service with a virtual IP that asks for
// zone-local traffic (trafficDistribution: PreferClose) over a Deployment of responders spread
// over zones, the probe Pods' security, its own ConfigMap that runs no probe and learns the
// zone through the canary's own endpoints; and the probe Pods' probes.service asks it.
function canaryProblems(objects) {
  const p = [];
  const need = (cond, what) => { if (!cond) p.push(what); };
  const canary = objects.filter(isCanary);
  const of = (kind) => {
    const l = canary.filter((o) => o.kind === kind);
    need(l.length === 1, `exactly one canary ${kind} (${l.length})`);
    return l[0];
  };
  const svc = of("Service"), dep = of("Deployment"), cm = of("ConfigMap");
  need(canary.length === 3, `the canary is a Service, a Deployment and a ConfigMap (${canary.map(objName)})`);
  if (p.length) return p;
  const ns = get(objects, "Namespace").metadata.name;
  for (const o of canary) need(o.metadata.namespace === ns, `${objName(o)} is in namespace ${ns}`);
  const tpl = dep.spec.template, pod = tpl.spec || {}, labels = (tpl.metadata || {}).labels || {};
  const probeLabels = get(objects, "DaemonSet").spec.template.metadata.labels;
  need(subset(dep.spec.selector.matchLabels, labels), "the canary's selector matches its Pod labels");
  need(subset(svc.spec.selector, labels) && !subset(svc.spec.selector, probeLabels),
    "the canary Service selects the canary's Pods, not the probe Pods");
  need(svc.spec.clusterIP !== "None" && (svc.spec.type || "ClusterIP") === "ClusterIP",
    "the canary Service has a virtual IP (type ClusterIP, not headless)");
  need(svc.spec.trafficDistribution === "PreferClose",
    "the canary Service asks for zone-local traffic (trafficDistribution: PreferClose)");
  need(dep.spec.replicas >= 3, `at least 3 canary Pods, one a zone in 3 zones (${dep.spec.replicas})`);
  need((pod.topologySpreadConstraints || []).some((t) => t.topologyKey === "topology.kubernetes.io/zone" &&
    t.maxSkew === 1 && subset((t.labelSelector || {}).matchLabels, labels)), "the canary's Pods spread over zones");
  podSecurity(pod, get(objects, "ServiceAccount"), need, "the canary's Pods");
  const c = (pod.containers || [])[0] || {};
  const ports = c.ports || [];
  for (const proto of ["UDP", "TCP"]) {
    const sp = (svc.spec.ports || []).find((q) => q.port === 9479 && (q.protocol || "TCP") === proto);
    const target = sp && ports.find((q) => (q.name === sp.targetPort || q.containerPort === sp.targetPort) &&
      (q.protocol || "TCP") === proto);
    need(target && target.containerPort === 9479 && !target.hostPort,
      `the canary Service's port 9479/${proto} reaches container port 9479/${proto}`);
  }
  const ready = (c.readinessProbe || {}).httpGet || {};
  need(ready.path === "/-/ready", "the canary's readiness probe is GET /-/ready");
  // Its configuration: the file its --config.file names, in its own ConfigMap, mounted there.
  const flags = (c.args || []).filter((a) => a.startsWith("--config.file="));
  const file = flags.length ? flags[flags.length - 1].slice("--config.file=".length) : "";
  const vol = (pod.volumes || []).find((v) => v.configMap && v.configMap.name === cm.metadata.name);
  const mount = vol && (c.volumeMounts || []).find((m) => m.name === vol.name);
  const key = mount ? path.posix.relative(mount.mountPath, file) : "";
  need(mount && !c.command && key && !key.startsWith("..") && typeof (cm.data || {})[key] === "string",
    `the canary reads ${file} from its ConfigMap ${cm.metadata.name}`);
  if (p.length) return p;
  const cfg = YAML.parse(cm.data[key]) || {};
  const kube = (cfg.peers || {}).kubernetes || {};
  need(!cfg.probes, "the canary runs no probe");
  need(kube.namespace === ns && kube.service === svc.metadata.name,
    `the canary's peers.kubernetes is its own Service ${ns}/${svc.metadata.name} (it learns its zone)`);
  need(cfg.self && cfg.self.zone === "${POD_ZONE}" && cfg.self.node === "${NODE_NAME}",
    "the canary's self is ${NODE_NAME}, ${POD_ZONE}");
  need(Number(String(((cfg.responders || {}).udp_echo || {}).listen_address || "").split(":").pop()) === 9479,
    "the canary's UDP echo responder listens on 9479");
  // The probe Pods ask it: a probes.service target of its name in the cluster's DNS.
  const probe = YAML.parse(probeConfig(objects)[1]) || {};
  const targets = (((probe.probes || {}).service || {}).targets) || [];
  need(targets.some((t) => String(t.address || "").startsWith(`${svc.metadata.name}.${ns}.svc.`) &&
    (t.port ?? 9479) === 9479 && (t.protocol || "udp") === "udp"),
  `the probe Pods' probes.service asks ${svc.metadata.name}.${ns}.svc on UDP 9479`);
  return p;
}
{
  const found = canaryProblems(withPm.objects);
  check(found.length === 0, "the Service canary keeps every promise" + (found.length ? ":\n  " + found.join("\n  ") : ""));
  const canaryOf = (o, kind) => o.find((q) => q.kind === kind && isCanary(q));
  const cctr = (o) => canaryOf(o, "Deployment").spec.template.spec.containers[0];
  const editConfig = (cm, edit) => { const k = Object.keys(cm.data)[0]; cm.data[k] = edit(cm.data[k]); };
  const canaryMutations = {
    "canary Service headless": (o) => { canaryOf(o, "Service").spec.clusterIP = "None"; },
    "canary without PreferClose": (o) => { delete canaryOf(o, "Service").spec.trafficDistribution; },
    "canary Service selects the probe Pods": (o) => { canaryOf(o, "Service").spec.selector["app.kubernetes.io/component"] = "probe"; },
    "canary Service without UDP": (o) => { const sp = canaryOf(o, "Service").spec; sp.ports = sp.ports.filter((q) => q.protocol !== "UDP"); },
    "one canary Pod": (o) => { canaryOf(o, "Deployment").spec.replicas = 1; },
    "canary not spread over zones": (o) => { delete canaryOf(o, "Deployment").spec.template.spec.topologySpreadConstraints; },
    "canary as root": (o) => { cctr(o).securityContext.runAsUser = 0; },
    "canary with a writable root": (o) => { delete cctr(o).securityContext.readOnlyRootFilesystem; },
    "canary on the host network": (o) => { canaryOf(o, "Deployment").spec.template.spec.hostNetwork = true; },
    "canary reads podnet.yaml": (o) => { cctr(o).args = cctr(o).args.filter((a) => !a.startsWith("--config.file")); },
    "canary runs probes": (o) => editConfig(canaryOf(o, "ConfigMap"), (t) => t + "probes:\n  rtt: {}\n"),
    "canary learns from another Service": (o) => editConfig(canaryOf(o, "ConfigMap"), (t) => t.replace("service: podnet-canary", "service: podnet")),
    "probe Pods ask another Service": (o) => editConfig(get(o, "ConfigMap"), (t) => t.replace("podnet-canary.podnet.svc", "other.podnet.svc")),
    "no canary ConfigMap": (o) => { o.splice(o.indexOf(canaryOf(o, "ConfigMap")), 1); },
  };
  const missedCanary = uncaught(canaryMutations, withPm.objects, canaryProblems);
  check(missedCanary.length === 0, `each of ${Object.keys(canaryMutations).length} broken canary promises is caught` +
    (missedCanary.length ? `; missed: ${missedCanary.join(", ")}` : ""));
}

// ---------------------------------------------------------------------------------------------
// The PrometheusRules of the prometheus-operator overlay are deploy/prometheus's rule files: one
// per file, named after it, its spec exactly the file's parsed YAML (`groups:` and nothing else),
// and generate.py would write them as they are.
const promDir = path.join(args.deploy, "prometheus");
const ruleFiles = Object.fromEntries(["podnet-recording-rules.yml", "podnet-alert-rules.yml"].map((f) =>
  [f.replace(/\.yml$/, ""), YAML.parse(fs.readFileSync(path.join(promDir, f), "utf8"))]));
// JSON with sorted keys: equal for equal YAML whatever order kustomize writes the keys in.
const canonical = (x) => JSON.stringify(x, (k, v) => (v && typeof v === "object" && !Array.isArray(v)
  ? Object.fromEntries(Object.keys(v).sort().map((key) => [key, v[key]])) : v));

function ruleProblems(objects) {
  const p = [];
  const need = (cond, what) => { if (!cond) p.push(what); };
  const rules = objects.filter((o) => o.kind === "PrometheusRule");
  const ns = (get(objects, "Namespace") || { metadata: {} }).metadata.name;
  need(rules.length === Object.keys(ruleFiles).length, `one PrometheusRule per rule file (${rules.length})`);
  for (const [name, file] of Object.entries(ruleFiles)) {
    const pr = rules.find((o) => o.metadata.name === name);
    if (!pr) { p.push(`no PrometheusRule ${name}`); continue; }
    need(pr.metadata.namespace === ns, `PrometheusRule ${name} is in namespace ${ns}`);
    need(canonical(pr.spec) === canonical(file), `PrometheusRule ${name}'s spec is deploy/prometheus/${name}.yml`);
  }
  return p;
}
const foundRules = ruleProblems(withPm.objects);
check(foundRules.length === 0, `the PrometheusRules are the rule files (${Object.keys(ruleFiles).join(", ")})` +
  (foundRules.length ? ":\n  " + foundRules.join("\n  ") : ""));
{
  const rule = (o, name) => o.find((q) => q.kind === "PrometheusRule" && q.metadata.name === name);
  const alert = (o) => rule(o, "podnet-alert-rules").spec.groups[0].rules.find((r) => r.alert);
  const ruleMutations = {
    "an expression changed": (o) => { rule(o, "podnet-recording-rules").spec.groups[1].rules[0].expr += " * 2"; },
    "a rule dropped": (o) => { rule(o, "podnet-recording-rules").spec.groups[1].rules.pop(); },
    "a group renamed": (o) => { rule(o, "podnet-alert-rules").spec.groups[0].name += "-x"; },
    "an alert's for changed": (o) => { alert(o).for = "1m"; },
    "an alert's severity changed": (o) => { alert(o).labels.severity = "info"; },
    "a spec field added": (o) => { rule(o, "podnet-alert-rules").spec.partial_response_strategy = "warn"; },
    "the alert rules missing": (o) => { o.splice(o.indexOf(rule(o, "podnet-alert-rules")), 1); },
    "the rules in another namespace": (o) => { rule(o, "podnet-recording-rules").metadata.namespace = "monitoring"; },
  };
  const missedRules = uncaught(ruleMutations, withPm.objects, ruleProblems);
  check(missedRules.length === 0, `each of ${Object.keys(ruleMutations).length} departures from the rule files is caught` +
    (missedRules.length ? `; missed: ${missedRules.join(", ")}` : ""));

  // generate.py --check, here and in a copy whose rule file has one rule more than its output.
  const generator = path.join("kubernetes", "prometheus-operator", "generate.py");
  const gen = (deploy) => spawnSync("python3", [path.join(deploy, generator), "--check"],
    { encoding: "utf8", timeout: 30000 });
  const fresh = gen(args.deploy);
  check(fresh.status === 0, `the PrometheusRules are what ${generator} writes (--check exit ${fresh.status})` +
    (fresh.status ? `:\n${fresh.stdout}${fresh.stderr}` : ""));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "podnet-rules-"));
  fs.cpSync(args.deploy, dir, { recursive: true });
  fs.appendFileSync(path.join(dir, "prometheus", "podnet-alert-rules.yml"),
    "      - alert: PodnetExtra\n        expr: vector(1)\n");
  const stale = gen(dir);
  check(stale.status === 1 && /podnet-alert-rules\.yaml/.test(stale.stderr),
    `and --check fails when a rule file changed without it (exit ${stale.status})`);

  // promtool on the rules as prometheus-operator hands them to Prometheus (the spec as a rule
  // file), and on the same with one expression broken.
  const promtool = (objects, edit = () => {}) => {
    const files = objects.filter((o) => o.kind === "PrometheusRule").map((o) => {
      const spec = clone(o.spec);
      edit(spec);
      const f = path.join(dir, `${o.metadata.name}.rendered.yml`);
      fs.writeFileSync(f, YAML.stringify(spec));
      return f;
    });
    return spawnSync(args.promtool, ["check", "rules", ...files], { encoding: "utf8", timeout: 60000 });
  };
  const ok = promtool(withPm.objects);
  check(ok.status === 0, `promtool check rules accepts the rendered PrometheusRules' specs` +
    (ok.status ? `:\n${ok.stdout}${ok.stderr}` : ""));
  const broken = promtool(withPm.objects, (s) => { s.groups[0].rules[0].expr = "sum(rate(x[5m])"; });
  check(broken.status !== 0, `and rejects them with an unbalanced expression (exit ${broken.status})`);
  fs.rmSync(dir, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------
// The prometheus-sharded overlay: the prometheus-operator overlay with its two PrometheusRules
// replaced by one per stage (deploy/prometheus/stages, written by generate.py, labelled
// podnet.io/rule-stage), and the PodMonitor's targets labelled podnet_shard by the hash that
// prometheus-operator shards them by (hashmod of __address__).
{
  const sharded = render(path.join(kubeDir, "prometheus-sharded"));
  check(!sharded.error, "kubectl kustomize .../prometheus-sharded renders" +
    (sharded.error ? `: ${sharded.error}` : ""));
  const stageFiles = Object.fromEntries(["shard", "global"].map((stage) => [stage,
    YAML.parse(fs.readFileSync(path.join(promDir, "stages", `podnet-rules-${stage}.yml`), "utf8"))]));
  const shardedProblems = (objects) => {
    const p = [];
    const need = (cond, what) => { if (!cond) p.push(what); };
    const ns = (get(objects, "Namespace") || { metadata: {} }).metadata.name;
    const rules = objects.filter((o) => o.kind === "PrometheusRule");
    need(rules.length === 2, `two PrometheusRules, one per stage (${rules.length})`);
    for (const [stage, file] of Object.entries(stageFiles)) {
      const pr = rules.find((o) => o.metadata.name === `podnet-rules-${stage}`);
      if (!pr) { p.push(`no PrometheusRule podnet-rules-${stage}`); continue; }
      need(pr.metadata.namespace === ns, `PrometheusRule podnet-rules-${stage} is in namespace ${ns}`);
      need((pr.metadata.labels || {})["podnet.io/rule-stage"] === stage,
        `PrometheusRule podnet-rules-${stage} is labelled podnet.io/rule-stage: ${stage}`);
      need(canonical(pr.spec) === canonical(file),
        `PrometheusRule podnet-rules-${stage}'s spec is deploy/prometheus/stages/podnet-rules-${stage}.yml`);
    }
    const pm = get(objects, "PodMonitor");
    const relabel = pm ? pm.spec.podMetricsEndpoints[0].relabelings : [];
    const last = relabel[relabel.length - 1] || {};
    need(last.action === "hashmod" && deepEqual(last.sourceLabels, ["__address__"]) &&
      last.targetLabel === "podnet_shard" && Number.isInteger(last.modulus) && last.modulus >= 1,
      "the PodMonitor's last relabeling sets podnet_shard to hashmod(__address__, shards)");
    const rest = (objs) => objs.filter((o) => o.kind !== "PrometheusRule" && o.kind !== "PodMonitor")
      .map(canonical).sort();
    need(deepEqual(rest(objects), rest(withPm.objects)),
      "every other object is the prometheus-operator overlay's");
    const pmBase = clone(get(withPm.objects, "PodMonitor"));
    if (pm) pmBase.spec.podMetricsEndpoints[0].relabelings.push(last);
    need(pm && canonical(pm) === canonical(pmBase),
      "the PodMonitor is the prometheus-operator overlay's plus that relabeling");
    return p;
  };
  if (!sharded.error) {
    const found = shardedProblems(sharded.objects);
    check(found.length === 0, "the prometheus-sharded overlay is one PrometheusRule per stage and a " +
      "podnet_shard relabeling" + (found.length ? ":\n  " + found.join("\n  ") : ""));
    for (const o of sharded.objects.filter((q) => !withPm.objects.some((w) => deepEqual(w, q)))) {
      const err = schemaErrors(o);
      check(!err, `prometheus-sharded: ${objName(o)} (${o.apiVersion}) validates against its schema` +
        (err ? `: ${err}` : ""));
    }
    const rule = (o, stage) => o.find((q) => q.kind === "PrometheusRule" && q.metadata.name === `podnet-rules-${stage}`);
    const pmRelabel = (o) => get(o, "PodMonitor").spec.podMetricsEndpoints[0].relabelings;
    const mutations = {
      "the stage labels swapped": (o) => {
        rule(o, "shard").metadata.labels["podnet.io/rule-stage"] = "global";
        rule(o, "global").metadata.labels["podnet.io/rule-stage"] = "shard";
      },
      "a stage-1 rule dropped": (o) => { rule(o, "shard").spec.groups[0].rules.pop(); },
      "the single-Prometheus rules kept beside them": (o) => {
        o.push(...withPm.objects.filter((q) => q.kind === "PrometheusRule").map(clone));
      },
      "the shard hashed from another label": (o) => { pmRelabel(o).slice(-1)[0].sourceLabels = ["__meta_kubernetes_pod_name"]; },
      "the relabeling missing": (o) => { pmRelabel(o).pop(); },
      "a ConfigMap changed": (o) => { const cm = get(o, "ConfigMap"); cm.data[Object.keys(cm.data)[0]] += "#"; },
    };
    const missed = uncaught(mutations, sharded.objects, shardedProblems);
    check(missed.length === 0, `each of ${Object.keys(mutations).length} departures of the sharded overlay is caught` +
      (missed.length ? `; missed: ${missed.join(", ")}` : ""));
  }
}

// ---------------------------------------------------------------------------------------------
// The grafana-dashboards overlay: every dashboards/*.json, as written, in a ConfigMap of its own
// labelled for Grafana's dashboard sidecar (k8s-sidecar: label grafana_dashboard, value "1"),
// named without a content hash (a hashed name leaves the old ConfigMap with the same key behind
// on every change), in the deployment's namespace, and small enough for the API server: a
// ConfigMap holds at most 1 MiB (core/v1 validation, MaxSecretSize), and client-side apply copies
// the whole object into the last-applied-configuration annotation, where all annotations
// together may hold 256 KiB (apimachinery TotalAnnotationSizeLimitB).
const dashDir = path.join(args.deploy, "..", "dashboards");
const dashFiles = Object.fromEntries(fs.readdirSync(dashDir).filter((f) => f.endsWith(".json"))
  .map((f) => [f, fs.readFileSync(path.join(dashDir, f), "utf8")]));
const configMapLimit = 1 << 20;
const annotationLimit = 256 << 10;

function dashboardProblems(objects, ns) {
  const p = [];
  const need = (cond, what) => { if (!cond) p.push(what); };
  const seen = [];
  for (const o of objects) {
    const at = objName(o);
    if (o.kind !== "ConfigMap") { p.push(`unexpected object ${at}`); continue; }
    const keys = Object.keys(o.data || {});
    need(keys.length === 1 && !o.binaryData, `${at} holds one dashboard (${keys})`);
    seen.push(...keys);
    for (const k of keys) {
      need(dashFiles[k] !== undefined, `${at}: ${k} is a file of dashboards/`);
      need(o.data[k] === dashFiles[k], `${at}: ${k} is dashboards/${k} as written`);
      need(o.metadata.name === `podnet-dashboard-${k.replace(/\.json$/, "")}`,
        `${at} is named podnet-dashboard-${k.replace(/\.json$/, "")} (no hash suffix)`);
    }
    need((o.metadata.labels || {}).grafana_dashboard === "1", `${at} is labelled grafana_dashboard: "1"`);
    need(o.metadata.namespace === ns, `${at} is in namespace ${ns}`);
    const size = Buffer.byteLength(JSON.stringify(o));
    need(size < annotationLimit && size < configMapLimit,
      `${at} (${size} bytes) fits a last-applied-configuration annotation (< ${annotationLimit})`);
  }
  need(deepEqual(seen.sort(), Object.keys(dashFiles).sort()),
    `every dashboard exactly once: ${seen} vs ${Object.keys(dashFiles).sort()}`);
  return p;
}
const deployNs = get(base.objects, "Namespace").metadata.name;
const foundDash = dashboardProblems(withDash.objects, deployNs);
const dashSizes = withDash.objects.map((o) => Buffer.byteLength(JSON.stringify(o)));
check(foundDash.length === 0 && withDash.objects.length > 0,
  `the grafana-dashboards overlay is the ${Object.keys(dashFiles).length} dashboards for the sidecar ` +
  `(largest object ${Math.max(...dashSizes)} bytes)` + (foundDash.length ? ":\n  " + foundDash.join("\n  ") : ""));
{
  const first = (o) => o[0];
  const dashMutations = {
    "label value true": (o) => { first(o).metadata.labels.grafana_dashboard = "true"; },
    "label missing": (o) => { delete first(o).metadata.labels.grafana_dashboard; },
    "a dashboard missing": (o) => { o.pop(); },
    "a dashboard twice": (o) => { o.push({ ...clone(first(o)), metadata: { ...first(o).metadata, name: "copy" } }); },
    "a dashboard edited": (o) => { const k = Object.keys(first(o).data)[0]; first(o).data[k] = first(o).data[k].replace("{", "{ "); },
    "a hash suffix": (o) => { first(o).metadata.name += "-5fk2b7m8tc"; },
    "another namespace": (o) => { first(o).metadata.namespace = "default"; },
    "two dashboards in one ConfigMap": (o) => { Object.assign(first(o).data, o.pop().data); },
    "a dashboard of 300 KiB": (o) => { first(o).metadata.annotations = { pad: "x".repeat(300 << 10) }; },
    "another kind": (o) => { first(o).kind = "Secret"; },
  };
  const missedDash = uncaught(dashMutations, withDash.objects, (m) => dashboardProblems(m, deployNs));
  check(missedDash.length === 0, `each of ${Object.keys(dashMutations).length} broken dashboard ConfigMaps is caught` +
    (missedDash.length ? `; missed: ${missedDash.join(", ")}` : ""));
}

// ---------------------------------------------------------------------------------------------
// What the TLS overlay promises, besides all of the above. The Secret podnet-tls is the user's
// (openssl, or cert-manager's Certificate): its keys are the ones cert-manager writes.
const tlsSecret = "podnet-tls";
const tlsKeyOf = { cert_file: "tls.crt", key_file: "tls.key", client_ca_file: "ca.crt" };
// exporter-toolkit's top level (docs/web-configuration.md); anything else is a typo.
const webConfigKeys = ["tls_server_config", "http_server_config", "basic_auth_users"];
const ctrIn = (objs) => get(objs, "DaemonSet").spec.template.spec.containers[0];

function tlsProblems(objects, cert) {
  const p = [];
  const need = (cond, what) => { if (!cond) p.push(what); return cond; };
  const ds = get(objects, "DaemonSet");
  const pm = get(objects, "PodMonitor");
  const secrets = objects.filter((o) => o.kind === "Secret");
  if (!need(ds && pm && secrets.length === 1, "a DaemonSet, a PodMonitor and one Secret")) return p;
  const pod = ds.spec.template.spec;
  const c = pod.containers[0];
  const psc = pod.securityContext || {};

  // A file of the container: the volume mounted deepest above it, and its key in that volume.
  function fileIn(file, what) {
    const inside = (c.volumeMounts || []).map((m) => ({ m, rel: path.posix.relative(m.mountPath, String(file)) }))
      .filter(({ rel }) => rel && !rel.startsWith("..") && !path.posix.isAbsolute(rel))
      .sort((a, b) => b.m.mountPath.length - a.m.mountPath.length);
    if (!need(path.posix.isAbsolute(String(file)) && inside.length > 0, `${what} ${file} is inside a mounted volume`)) return null;
    const { m, rel } = inside[0];
    const v = (pod.volumes || []).find((q) => q.name === m.name) || {};
    need(m.readOnly === true, `${what}: ${m.mountPath} is mounted read-only`);
    // A subPath mount is never updated by the kubelet: a renewed certificate would not arrive.
    need(!m.subPath, `${what}: ${m.mountPath} is a directory mount (no subPath)`);
    return { m, v, key: rel };
  }

  const flags = (c.args || []).filter((a) => a.startsWith("--web.config.file="));
  if (!need(flags.length === 1 && !c.command, "the container's args add one --web.config.file= (the ENTRYPOINT kept)")) return p;
  const web = fileIn(flags[0].slice("--web.config.file=".length), "--web.config.file");
  if (!web) return p;
  const webSecret = secrets[0];
  need(web.v.secret && web.v.secret.secretName === webSecret.metadata.name && !web.v.secret.items,
    `--web.config.file is in the Secret ${webSecret.metadata.name}`);
  const data = (webSecret.data || {})[web.key];
  if (!need(typeof data === "string", `the Secret ${webSecret.metadata.name} has the key ${web.key}`)) return p;
  const wc = YAML.parse(Buffer.from(data, "base64").toString("utf8")) || {};
  for (const k of Object.keys(wc)) need(webConfigKeys.includes(k), `web config key ${k} is exporter-toolkit's`);
  const tsc = wc.tls_server_config || {};
  need(tsc.cert_file && tsc.key_file, "web config has tls_server_config.cert_file and key_file");
  for (const [field, key] of Object.entries(tlsKeyOf)) {
    if (tsc[field] === undefined) continue;
    const f = fileIn(tsc[field], `tls_server_config.${field}`);
    if (!f) continue;
    need(f.v.secret && f.v.secret.secretName === tlsSecret && !f.v.secret.items && f.key === key,
      `tls_server_config.${field} is the key ${key} of the Secret ${tlsSecret} (${tsc[field]})`);
    // Secret files belong to root; uid 65532 reads them through fsGroup, others not at all.
    const mode = (f.v.secret || {}).defaultMode ?? 0o644;
    const gid = (c.securityContext || {}).runAsGroup ?? psc.runAsGroup;
    need((mode & 0o004) === 0 && (mode & 0o040) !== 0 && psc.fsGroup === gid,
      `tls_server_config.${field} is readable by the container's group (fsGroup ${psc.fsGroup}, ` +
      `gid ${gid}) and not by others (mode ${mode.toString(8)})`);
  }

  // Prometheus scrapes over HTTPS and verifies the certificate by its DNS name.
  const ep = (pm.spec.podMetricsEndpoints || [])[0] || {};
  const tc = ep.tlsConfig || {};
  need(ep.scheme === "https", `PodMonitor scheme is https (${ep.scheme})`);
  need(deepEqual(tc.ca, { secret: { key: "ca.crt", name: tlsSecret } }), `PodMonitor trusts ca.crt of ${tlsSecret}`);
  need(tc.insecureSkipVerify !== true, "PodMonitor verifies the certificate (insecureSkipVerify not true)");
  const spec = (cert || {}).spec || {};
  need(cert && cert.kind === "Certificate" && spec.secretName === tlsSecret &&
    (cert.metadata || {}).namespace === pm.metadata.namespace,
    `the Certificate example writes the Secret ${tlsSecret} in ${pm.metadata.namespace}`);
  need((spec.dnsNames || []).includes(tc.serverName),
    `PodMonitor serverName ${tc.serverName} is a dnsName of the Certificate (${spec.dnsNames})`);
  need((spec.usages || ["server auth"]).includes("server auth"), "the Certificate is for server auth");

  // Options: mutual TLS and basic auth are set on both ends or on neither.
  const mtls = tsc.client_ca_file !== undefined;
  need(mtls === (tsc.client_auth_type === "RequireAndVerifyClientCert"),
    "client_ca_file goes with client_auth_type RequireAndVerifyClientCert");
  need(mtls === Boolean(tc.cert && tc.keySecret), "PodMonitor presents a client certificate exactly with client_ca_file");
  const users = wc.basic_auth_users;
  need(users === undefined || (users && typeof users === "object" && Object.keys(users).length > 0),
    "basic_auth_users is a map of users");
  const ba = ep.basicAuth;
  need((users !== undefined) === Boolean(ba), "PodMonitor sends basicAuth exactly with basic_auth_users");
  if (ba) {
    need(ba.username && ba.password && ba.username.name === ba.password.name && ba.username.name !== tlsSecret,
      "PodMonitor basicAuth reads user and password from one Secret of its own");
  }
  return p;
}

const foundTls = [...problems(withTls.objects, ["Secret"]), ...tlsProblems(withTls.objects, certificate)];
check(foundTls.length === 0, "the TLS overlay keeps every promise" + (foundTls.length ? ":\n  " + foundTls.join("\n  ") : ""));

const tlsVolume = (o, name) => get(o, "DaemonSet").spec.template.spec.volumes.find((v) => v.name === name);
const tlsMount = (o, name) => ctrIn(o).volumeMounts.find((m) => m.name === name);
const editWebConfig = (o, edit) => {
  const s = get(o, "Secret");
  const k = Object.keys(s.data)[0];
  s.data[k] = Buffer.from(edit(Buffer.from(s.data[k], "base64").toString("utf8"))).toString("base64");
};
const endpoint = (o) => get(o, "PodMonitor").spec.podMetricsEndpoints[0];
const tlsMutations = {
  "no --web.config.file": (o) => { ctrIn(o).args = []; },
  "--web.config.file outside its mount": (o) => { ctrIn(o).args = ["--web.config.file=/etc/podnet/web-config.yml"]; },
  "--web.config.file names a missing key": (o) => { ctrIn(o).args = ["--web.config.file=/etc/podnet/web/web.yml"]; },
  "web config mounted from the TLS Secret": (o) => { tlsVolume(o, "web-config").secret.secretName = tlsSecret; },
  "web config Secret mounted read-write": (o) => { delete tlsMount(o, "web-config").readOnly; },
  "TLS Secret mounted read-write": (o) => { tlsMount(o, "tls").readOnly = false; },
  "TLS Secret mounted by subPath": (o) => { tlsMount(o, "tls").subPath = "tls.crt"; },
  "TLS from another Secret": (o) => { tlsVolume(o, "tls").secret.secretName = "other-tls"; },
  "tls.key world-readable": (o) => { tlsVolume(o, "tls").secret.defaultMode = 0o444; },
  "no fsGroup": (o) => { delete podSpec(o).securityContext.fsGroup; },
  "cert_file outside the TLS mount": (o) => editWebConfig(o, (t) => t.replace("/etc/podnet/tls/tls.crt", "/etc/ssl/tls.crt")),
  "key_file names ca.crt": (o) => editWebConfig(o, (t) => t.replace("/etc/podnet/tls/tls.key", "/etc/podnet/tls/ca.crt")),
  "client_ca_file in the web config's Secret": (o) => editWebConfig(o, (t) => t.replace(/^  min_version:.*$/m,
    "$&\n  client_ca_file: /etc/podnet/web/ca.crt\n  client_auth_type: RequireAndVerifyClientCert")),
  "no tls_server_config": (o) => editWebConfig(o, (t) => t.replace("tls_server_config:", "tls_config:")),
  "basic_auth_users, no basicAuth in the PodMonitor": (o) => editWebConfig(o, (t) => t + "basic_auth_users: { prometheus: x }\n"),
  "basicAuth in the PodMonitor only": (o) => {
    endpoint(o).basicAuth = { username: { name: "a", key: "username" }, password: { name: "a", key: "password" } };
  },
  "PodMonitor scheme http": (o) => { endpoint(o).scheme = "http"; },
  "PodMonitor skips verification": (o) => { endpoint(o).tlsConfig.insecureSkipVerify = true; },
  "PodMonitor trusts tls.crt": (o) => { endpoint(o).tlsConfig.ca.secret.key = "tls.crt"; },
  "serverName not in the certificate": (o) => { endpoint(o).tlsConfig.serverName = "podnet-exporter.podnet.svc"; },
  "Certificate writes another Secret": (o, cert) => { cert.spec.secretName = "podnet-cert"; },
  "liveness probe over HTTPS": (o) => { ctrIn(o).livenessProbe.httpGet.scheme = "HTTPS"; },
  "readiness probe over HTTPS": (o) => { ctrIn(o).readinessProbe.httpGet.scheme = "HTTPS"; },
};
const missedTls = Object.entries(tlsMutations).filter(([, mutate]) => {
  const m = clone(withTls.objects);
  const cert = clone(certificate);
  mutate(m, cert);
  return problems(m, ["Secret"]).length === 0 && tlsProblems(m, cert).length === 0;
}).map(([name]) => name);
check(missedTls.length === 0, `each of ${Object.keys(tlsMutations).length} broken TLS promises is caught` +
  (missedTls.length ? `; missed: ${missedTls.join(", ")}` : ""));

// The overlay's commented-out options (mutual TLS, basic auth), all turned on, in a copy of
// deploy/kubernetes: a commented-out setting is a line "#key..." ("#" then no space), with the
// lines "#  ..." that follow it; prose is "# ...".
let withOptions = null;  // the rendered objects, for the web-config check below
{
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "podnet-tls-options-"));
  fs.cpSync(kubeDir, path.join(dir, "kubernetes"), { recursive: true });
  const optDir = path.join(dir, "kubernetes", "tls");
  let turnedOn = 0;
  for (const f of fs.readdirSync(optDir)) {
    let inSetting = false;
    const lines = fs.readFileSync(path.join(optDir, f), "utf8").split("\n").map((l) => {
      const m = /^(\s*)#(\S|  .*)/.exec(l);
      inSetting = Boolean(m) && (!m[2].startsWith(" ") || inSetting);
      if (!inSetting) return l;
      turnedOn++;
      return m[1] + l.slice(m[1].length + 1);
    });
    fs.writeFileSync(path.join(optDir, f), lines.join("\n"));
  }
  const opts = render(optDir);
  const optProblems = opts.error ? [opts.error] : [...problems(opts.objects, ["Secret"]),
    ...tlsProblems(opts.objects, certificate),
    ...opts.objects.map((o) => schemaErrors(o)).filter((e) => e)];
  const ep = opts.error ? {} : endpoint(opts.objects);
  check(optProblems.length === 0 && turnedOn > 0 && ep.basicAuth && ep.tlsConfig.keySecret,
    `with its ${turnedOn} commented-out option lines turned on (mutual TLS, basic auth) the TLS overlay ` +
    "renders, validates and keeps every promise" + (optProblems.length ? ":\n  " + optProblems.join("\n  ") : ""));
  withOptions = opts.objects || null;
  fs.rmSync(dir, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------
// The web configuration as a Pod sees it, checked by exporter-toolkit (promtool check web-config
// loads the key pair and rejects unknown keys and values). The Secret podnet-tls comes from the
// openssl commands of docs/deploy.md's "TLS and basic auth", run as written; its certificate must
// carry the PodMonitor's serverName. The Pod's Secret mounts are laid out under a temporary
// root, and the web configuration's file paths moved under it.
{
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "podnet-web-config-"));
  const deployDoc = fs.readFileSync(path.join(args.deploy, "..", "docs", "deploy.md"), "utf8");
  const section = deployDoc.split(/^### TLS and basic auth$/m)[1] || "";
  const block = (/```sh\n([\s\S]*?)```/.exec(section) || [])[1] || "";
  const openssl = block.split(/\n(?=\S)/).filter((cmd) => cmd.startsWith("openssl "));
  const certDir = path.join(dir, "certs");
  fs.mkdirSync(certDir);
  const made = spawnSync("bash", ["-euo", "pipefail", "-c", openssl.join("\n")],
    { cwd: certDir, encoding: "utf8", timeout: 60000 });
  const keys = Object.values(tlsKeyOf);
  check(made.status === 0 && openssl.length >= 3 && keys.every((k) => fs.existsSync(path.join(certDir, k))),
    `docs/deploy.md's ${openssl.length} openssl commands make ${keys.join(", ")}` + (made.status ? `:\n${made.stderr}` : ""));
  const serverName = endpoint(withTls.objects).tlsConfig.serverName;
  const verify = spawnSync("openssl", ["verify", "-CAfile", "ca.crt", "-purpose", "sslserver",
    "-verify_hostname", serverName, "tls.crt"], { cwd: certDir, encoding: "utf8", timeout: 30000 });
  check(verify.status === 0, `their tls.crt verifies against ca.crt for the PodMonitor's serverName ${serverName}` +
    (verify.status ? `:\n${verify.stdout}${verify.stderr}` : ""));

  // Lays out objects' Secret mounts under a new root; returns the web configuration's path there.
  let roots = 0;
  const mountedWebConfig = (objects, edit = (t) => t) => {
    const root = path.join(dir, `root${roots++}`);
    const pod = get(objects, "DaemonSet").spec.template.spec;
    const c = pod.containers[0];
    for (const m of c.volumeMounts || []) {
      const v = (pod.volumes || []).find((q) => q.name === m.name) || {};
      if (!v.secret) continue;
      const at = path.join(root, m.mountPath);
      fs.mkdirSync(at, { recursive: true });
      if (v.secret.secretName === tlsSecret) {
        for (const k of keys) fs.copyFileSync(path.join(certDir, k), path.join(at, k));
        continue;
      }
      const sec = objects.find((o) => o.kind === "Secret" && o.metadata.name === v.secret.secretName);
      for (const [k, b64] of Object.entries((sec || {}).data || {})) {
        fs.writeFileSync(path.join(at, k), Buffer.from(b64, "base64"));
      }
    }
    const file = path.join(root, c.args.find((a) => a.startsWith("--web.config.file=")).split("=")[1]);
    const wc = YAML.parse(edit(fs.readFileSync(file, "utf8")));
    for (const field of Object.keys(tlsKeyOf)) {
      if (wc.tls_server_config[field] !== undefined) wc.tls_server_config[field] = path.join(root, wc.tls_server_config[field]);
    }
    fs.writeFileSync(file, YAML.stringify(wc));
    return file;
  };
  const promtool = (file) => spawnSync(args.promtool, ["check", "web-config", file], { encoding: "utf8", timeout: 30000 });
  const accepted = (what, objects, edit) => {
    const r = objects ? promtool(mountedWebConfig(objects, edit)) : { status: -1, stdout: "not rendered" };
    check(r.status === 0, `promtool check web-config accepts the mounted web-config.yml${what}` +
      (r.status ? `:\n${r.stdout}${r.stderr}` : ""));
  };
  accepted("", withTls.objects);
  // With the options on, the hash is the placeholder until one is pasted in, and must not pass:
  // the exporter refuses to start rather than run with a user nobody can log in as.
  const placeholder = /\$2y\$10\$\.\.\./;
  const asWritten = withOptions ? promtool(mountedWebConfig(withOptions)) : { status: 0 };
  check(asWritten.status !== 0 && /bcrypt/.test(asWritten.stdout + asWritten.stderr),
    `with the options on, the placeholder hash is refused (exit ${asWritten.status})`);
  // And with a real bcrypt hash (libxcrypt through Python's crypt, cost 10) in its place.
  const hash = spawnSync("python3", ["-W", "ignore", "-c", "import crypt; " +
    "print(crypt.crypt('scrape-password', crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10)))"],
  { encoding: "utf8", timeout: 30000 }).stdout.trim();
  accepted(` (options on, hash ${hash.slice(0, 7)}...)`, withOptions, (t) => t.replace(placeholder, hash));
  const typo = promtool(mountedWebConfig(withTls.objects, (t) => t.replace("min_version: TLS12", "min_version: TLS1.2")));
  check(typo.status !== 0, `and rejects it with min_version: TLS1.2 (exit ${typo.status})`);
  fs.rmSync(dir, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------
// The report overlay: the base plus one Job that runs `podnet-exporter report` with the
// DaemonSet's ServiceAccount, image, configuration and security settings, not selected by the
// Service (no probe Pod probes it), and not retried (a failed probe is the result).
function reportProblems(objects) {
  const p = [];
  const need = (ok, what) => { if (!ok) p.push(what); };
  const own = objects.filter((o) => !base.objects.some((q) => deepEqual(q, o)));
  need(own.length === 1 && own[0].kind === "Job" && objects.length === base.objects.length + 1,
    "the report overlay is the base plus one Job");
  const job = get(objects, "Job");
  const ds = get(objects, "DaemonSet");
  const svc = get(objects, "Service");
  const cm = get(objects, "ConfigMap");
  if (job && ds && svc && cm) {
    const js = job.spec.template.spec, dss = ds.spec.template.spec;
    const jc = js.containers[0], dc = dss.containers[0];
    const argv = [...(jc.command || []), ...(jc.args || [])];
    need(argv[0] === entrypoint[0] && argv[1] === "report",
      `the Job runs ${entrypoint[0]} report (${argv.slice(0, 2).join(" ")})`);
    const cfg = argv.find((a) => a.startsWith("--config.file="));
    need(cfg === imageConfigFlag, `the Job reads the image's configuration path (${cfg})`);
    const vol = js.volumes.find((v) => v.configMap && v.configMap.name === cm.metadata.name);
    const mount = vol && jc.volumeMounts.find((m) => m.name === vol.name);
    need(mount && imageConfigPath && imageConfigPath === path.posix.join(mount.mountPath,
      Object.keys(cm.data)[0]), `the Job mounts the base's ConfigMap ${cm.metadata.name} at that path`);
    need(js.serviceAccountName === dss.serviceAccountName, "the Job uses the DaemonSet's ServiceAccount");
    need(jc.image === dc.image, "the Job runs the DaemonSet's image");
    need(deepEqual(jc.securityContext, dc.securityContext) && deepEqual(js.securityContext, dss.securityContext),
      "the Job has the DaemonSet's Pod and container security settings");
    const envNames = (c) => (c.env || []).map((e) => e.name).sort();
    need(deepEqual(envNames(jc), envNames(dc)), "the Job sets the environment the configuration expands");
    need(!subset(svc.spec.selector, job.spec.template.metadata.labels),
      "the Service does not select the report Pod (no probe Pod probes it)");
    need(js.restartPolicy === "Never" && job.spec.backoffLimit === 0, "the Job is not retried");
    const dur = argv.find((a) => a.startsWith("--duration="));
    const secs = dur ? Number(/^--duration=(\d+)s$/.exec(dur)?.[1]) : 60;
    need(job.spec.activeDeadlineSeconds >= 2 * secs + 60,
      `activeDeadlineSeconds (${job.spec.activeDeadlineSeconds}) leaves room for --duration, the rounds in flight and start-up`);
  }
  return p;
}
{
  const p = reportProblems(withReport.objects);
  check(p.length === 0, "the report overlay keeps its promises" + (p.length ? `: ${p.join("; ")}` : ""));
  // And each promise can be broken: a mutant of the Job per promise must be caught.
  const jobOf = (objs) => objs.find((o) => o.kind === "Job");
  const mutants = {
    "runs the daemon": (j) => { delete j.spec.template.spec.containers[0].command; },
    "another configuration": (j) => { j.spec.template.spec.containers[0].args[1] = "--config.file=/etc/x.yaml"; },
    "another ServiceAccount": (j) => { j.spec.template.spec.serviceAccountName = "default"; },
    "an untagged image": (j) => { j.spec.template.spec.containers[0].image = "podnet-exporter"; },
    "privileged": (j) => { j.spec.template.spec.containers[0].securityContext.privileged = true; },
    "no POD_NAME": (j) => { j.spec.template.spec.containers[0].env.shift(); },
    "selected by the Service": (j) => { j.spec.template.metadata.labels["app.kubernetes.io/component"] = "probe"; },
    "retried": (j) => { j.spec.backoffLimit = 3; },
    "too short a deadline": (j) => { j.spec.activeDeadlineSeconds = 60; },
  };
  const missed = Object.entries(mutants).filter(([, mutate]) => {
    const objs = clone(withReport.objects);
    mutate(jobOf(objs));
    return reportProblems(objs).length === 0;
  }).map(([what]) => what);
  check(missed.length === 0, `each of ${Object.keys(mutants).length} broken report Job promises is caught` +
    (missed.length ? `: missed ${missed.join(", ")}` : ""));
}

// ---------------------------------------------------------------------------------------------
// The networkpolicy overlay: the base plus NetworkPolicies selecting the probe Pods that admit
// exactly what they need: from and to the probe Pods the DaemonSet's containerPorts (and, with
// probes.rtt.protocol icmp, every protocol: the one way to admit ICMP), TCP 9479 from a
// Prometheus selector (a namespace and a Pod selector), egress to the CoreDNS Pods of the
// cluster_dns namespace on UDP and TCP 53 and to the API server on TCP 443 and 6443. Nothing
// else: no rule without a peer but the API server's, no ipBlock.
function netpolProblems(objects, { icmp = true } = {}) {
  const p = [];
  const need = (ok, what) => { if (!ok) p.push(what); };
  const own = objects.filter((o) => !base.objects.some((q) => deepEqual(q, o)));
  const canaryPol = own.find((o) => o.kind === "NetworkPolicy" && isCanary(o));
  const pols = own.filter((o) => o.kind === "NetworkPolicy" && !isCanary(o));
  need(pols.length + 1 === own.length && canaryPol && objects.length === base.objects.length + (icmp ? 3 : 2),
    `the networkpolicy overlay is the base plus ${icmp ? 2 : 1} NetworkPolicies of the probe Pods and ` +
    `one of the Service canary (${own.map(objName)})`);
  const ds = get(objects, "DaemonSet"), svc = get(objects, "Service"), cm = get(objects, "ConfigMap");
  if (!ds || !svc || !cm) return [...p, "no DaemonSet, Service or ConfigMap"];
  const conf = YAML.parse(Object.values(cm.data)[0]);
  const podLabels = ds.spec.template.metadata.labels;
  const probeSel = svc.spec.selector;  // the peers: what the Service (peer discovery) selects
  const isProbes = (peer) => deepEqual(Object.keys(peer), ["podSelector"]) &&
    deepEqual(peer.podSelector, { matchLabels: probeSel });
  const key = (q) => `${q.protocol || "TCP"}/${q.port}`;
  const portSet = (l) => (l || []).map(key).sort();
  const containerPorts = [...new Set(ds.spec.template.spec.containers[0].ports
    .map((q) => `${q.protocol || "TCP"}/${q.containerPort}`))].sort();
  const metricsPort = ds.spec.template.spec.containers[0].ports.find((q) => q.name === "http");
  for (const np of pols) {
    need(np.metadata.namespace === ds.metadata.namespace, `${objName(np)} is in the DaemonSet's namespace`);
    need(deepEqual(np.spec.podSelector, { matchLabels: probeSel }) && subset(probeSel, podLabels),
      `${objName(np)} selects the probe Pods`);
    need(deepEqual([...(np.spec.policyTypes || [])].sort(), ["Egress", "Ingress"]),
      `${objName(np)} restricts ingress and egress`);
  }
  const main = pols.find((o) => o.metadata.name === ds.metadata.name);
  const icmpPol = pols.find((o) => o !== main);
  need(main, `a NetworkPolicy named ${ds.metadata.name}`);
  need(!icmp === !icmpPol, icmp ? "a policy for ICMP" : "no policy for ICMP");
  need(conf.probes.rtt.protocol === "icmp" ? icmp : true,
    `probes.rtt.protocol is ${conf.probes.rtt.protocol}: ICMP between the probe Pods is admitted`);
  if (!main) return p;
  const ing = main.spec.ingress || [], eg = main.spec.egress || [];
  need(ing.every((r) => r.from && r.from.length > 0 && r.ports && r.ports.length > 0),
    "every ingress rule names its sources and ports");
  need(eg.every((r) => r.ports && r.ports.length > 0), "every egress rule names its ports");
  need([...ing, ...eg].every((r) => [...(r.from || []), ...(r.to || [])].every((q) => !q.ipBlock)),
    "no ipBlock");
  const peersIn = ing.filter((r) => (r.from || []).every(isProbes));
  need(peersIn.length === 1 && deepEqual(portSet(peersIn[0].ports), containerPorts),
    `ingress from the probe Pods on exactly the containerPorts ${containerPorts}`);
  const prom = ing.filter((r) => !(r.from || []).every(isProbes));
  need(prom.length === 1 && prom[0].from?.length === 1 &&
    Object.keys(prom[0].from[0].namespaceSelector?.matchLabels || {}).length > 0 &&
    Object.keys(prom[0].from[0].podSelector?.matchLabels || {}).length > 0 &&
    deepEqual(portSet(prom[0].ports), [`TCP/${metricsPort.containerPort}`]),
    `ingress from one Prometheus (a namespace and a Pod selector) on TCP ${metricsPort.containerPort} only`);
  const peersOut = eg.filter((r) => r.to && r.to.every(isProbes));
  need(peersOut.length === 1 && deepEqual(portSet(peersOut[0].ports), containerPorts),
    `egress to the probe Pods on exactly the containerPorts ${containerPorts}`);
  const dnsNs = conf.probes.dns.cluster_dns.namespace;
  const dns = eg.filter((r) => r.to && deepEqual(r.to, [{
    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": dnsNs } },
    podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }]));
  need(dns.length === 1 && deepEqual(portSet(dns[0].ports), ["TCP/53", "UDP/53"]),
    `egress to the CoreDNS Pods (${dnsNs}, k8s-app: kube-dns) on UDP and TCP 53`);
  const api = eg.filter((r) => !r.to);
  need(api.length === 1 && deepEqual(portSet(api[0].ports), ["TCP/443", "TCP/6443"]),
    "egress to the API server: TCP 443 and 6443 only");
  // The Service canary: its Pods' labels, the ports its Service sends to.
  const canaryDep = objects.find((o) => o.kind === "Deployment" && isCanary(o));
  const canarySel = canaryDep ? canaryDep.spec.selector.matchLabels : {};
  const isCanaryPods = (peer) => deepEqual(Object.keys(peer), ["podSelector"]) &&
    deepEqual(peer.podSelector, { matchLabels: canarySel });
  const canaryPorts = ["TCP/9479", "UDP/9479"];
  const toCanary = eg.filter((r) => r.to && r.to.every(isCanaryPods));
  need(canaryDep && toCanary.length === 1 && deepEqual(portSet(toCanary[0].ports), canaryPorts),
    `egress to the Service canary's Pods on exactly ${canaryPorts}`);
  need(eg.length === 4 && ing.length === 2, `no other rule (${ing.length} ingress, ${eg.length} egress)`);
  if (canaryPol && canaryDep) {
    const ci = canaryPol.spec.ingress || [], ce = canaryPol.spec.egress || [];
    need(deepEqual(canaryPol.spec.podSelector, { matchLabels: canarySel }) &&
      deepEqual([...(canaryPol.spec.policyTypes || [])].sort(), ["Egress", "Ingress"]),
    `${objName(canaryPol)} selects the canary's Pods and restricts ingress and egress`);
    need(ci.length === 1 && (ci[0].from || []).length > 0 && ci[0].from.every(isProbes) &&
      deepEqual(portSet(ci[0].ports), canaryPorts),
    `${objName(canaryPol)}: ingress from the probe Pods on exactly ${canaryPorts}`);
    need(ce.length === 1 && !ce[0].to && deepEqual(portSet(ce[0].ports), ["TCP/443", "TCP/6443"]),
      `${objName(canaryPol)}: egress to the API server only (TCP 443 and 6443)`);
  }
  if (icmpPol) {
    need(deepEqual(icmpPol.spec.ingress, [{ from: [{ podSelector: { matchLabels: probeSel } }] }]) &&
      deepEqual(icmpPol.spec.egress, [{ to: [{ podSelector: { matchLabels: probeSel } }] }]),
    `${objName(icmpPol)}: every protocol from and to the probe Pods only (ICMP has no port rule)`);
  }
  return p;
}
{
  const p = netpolProblems(withNetpol.objects);
  check(p.length === 0, "the networkpolicy overlay keeps its promises" + (p.length ? `: ${p.join("; ")}` : ""));
  const pol = (objs, name) => objs.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === name);
  const mutants = {
    "a probe port closed": (o) => { pol(o, "podnet-exporter").spec.ingress[0].ports.pop(); },
    "an extra ingress port": (o) => { pol(o, "podnet-exporter").spec.ingress[0].ports.push({ protocol: "TCP", port: 22 }); },
    "ingress from anywhere": (o) => { delete pol(o, "podnet-exporter").spec.ingress[0].from; },
    "scrapes from every namespace": (o) => { delete pol(o, "podnet-exporter").spec.ingress[1].from[0].namespaceSelector; },
    "DNS over UDP only": (o) => { pol(o, "podnet-exporter").spec.egress[1].ports.pop(); },
    "egress anywhere on any port": (o) => { delete pol(o, "podnet-exporter").spec.egress[2].ports; },
    "an ipBlock 0.0.0.0/0": (o) => { pol(o, "podnet-exporter").spec.egress[2].to = [{ ipBlock: { cidr: "0.0.0.0/0" } }]; },
    "ingress only": (o) => { pol(o, "podnet-exporter").spec.policyTypes = ["Ingress"]; },
    "selects other Pods": (o) => { pol(o, "podnet-exporter").spec.podSelector.matchLabels["app.kubernetes.io/component"] = "report"; },
    "ICMP from any Pod of the namespace": (o) => { pol(o, "podnet-exporter-icmp").spec.ingress[0].from[0].podSelector = {}; },
    "no ICMP policy": (o) => { o.splice(o.indexOf(pol(o, "podnet-exporter-icmp")), 1); },
    "no egress to the canary": (o) => { pol(o, "podnet-exporter").spec.egress.pop(); },
    "the canary open to every Pod": (o) => { delete pol(o, "podnet-canary").spec.ingress[0].from; },
    "the canary sends anywhere": (o) => { delete pol(o, "podnet-canary").spec.egress[0].ports; },
    "no canary policy": (o) => { o.splice(o.indexOf(pol(o, "podnet-canary")), 1); },
  };
  const missed = Object.entries(mutants).filter(([, mutate]) => {
    const objs = clone(withNetpol.objects);
    mutate(objs);
    return netpolProblems(objs).length === 0;
  }).map(([what]) => what);
  check(missed.length === 0, `each of ${Object.keys(mutants).length} broken NetworkPolicy promises is caught` +
    (missed.length ? `: missed ${missed.join(", ")}` : ""));
  // The patches the overlay documents in its comments, applied as written in an overlay of it:
  // the Prometheus selector replaced (and nothing else), the ICMP policy deleted.
  const npDir = path.join(kubeDir, "networkpolicy");
  const documented = (file, from) => {  // the commented "patches:" block after `from`
    const lines = fs.readFileSync(path.join(npDir, file), "utf8").split("\n");
    const i = lines.findIndex((l, k) => k > lines.findIndex((q) => q.includes(from)) && /^#\s+patches:/.test(l));
    const indent = /^#(\s+)/.exec(lines[i])[1].length;
    const out = [lines[i]];
    for (let k = i + 1; k < lines.length && /^#/.test(lines[k]) &&
      /^#(\s*)/.exec(lines[k])[1].length > indent; k++) out.push(lines[k]);
    return out.map((l) => l.slice(1 + indent)).join("\n");
  };
  for (const [file, from, expect] of [["kustomization.yaml", "PROMETHEUS", "prometheus"],
    ["networkpolicy.yaml", "delete this policy", "icmp"]]) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "podnet-netpol-"));
    let patches = "";
    try { patches = documented(file, from); } catch (e) { patches = ""; }
    fs.writeFileSync(path.join(dir, "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\n" +
      `kind: Kustomization\nresources:\n  - ${path.relative(dir, path.resolve(npDir))}\n${patches}\n`);
    const r = render(dir);
    fs.rmSync(dir, { recursive: true, force: true });
    let ok = !r.error && patches !== "";
    if (ok && expect === "prometheus") {
      const before = pol(withNetpol.objects, "podnet-exporter"), after = pol(r.objects, "podnet-exporter");
      const changed = clone(after); changed.spec.ingress[1] = before.spec.ingress[1];
      ok = netpolProblems(r.objects).length === 0 && deepEqual(changed, before) &&
        !deepEqual(after.spec.ingress[1], before.spec.ingress[1]);
    } else if (ok) {
      ok = netpolProblems(r.objects, { icmp: false }).length === 1 && !pol(r.objects, "podnet-exporter-icmp") &&
        r.objects.length === withNetpol.objects.length - 1;  // the one problem: rtt.protocol is icmp
    }
    check(ok, `the ${expect} patch documented in networkpolicy/${file} applies as written` +
      (r.error ? `: ${r.error}` : ""));
  }
}

// ---------------------------------------------------------------------------------------------
// The no-burst-pool overlay: the base plus one DaemonSet, podnet-exporter-no-bursts, for the
// nodes labelled podnet.io/bursts=off. It is the base's DaemonSet but for its name, one label
// more (podnet.io/pool: no-bursts) on itself, its selector and its Pods, the affinity expression
// In [off], and no `burst` container port; the base's DaemonSet gains NotIn [off], nothing else
// changes. The Service still selects both (the pool's Pods are probed), the pool's Pods name no
// `burst` port (the EndpointSlice controller then leaves the Service's `burst` port out of their
// slices: what keeps them out of coordinated bursts), and the two selectors claim disjoint Pods.
function poolProblems(objects) {
  const p = [];
  const need = (ok, what) => { if (!ok) p.push(what); };
  const dsOf = (name) => objects.find((o) => o.kind === "DaemonSet" && o.metadata.name === name);
  const baseDs = get(base.objects, "DaemonSet"), svc = get(base.objects, "Service");
  const main = dsOf("podnet-exporter"), pool = dsOf("podnet-exporter-no-bursts");
  if (!main || !pool) return ["no DaemonSet podnet-exporter or podnet-exporter-no-bursts"];
  const others = objects.filter((o) => o !== main && o !== pool);
  need(objects.length === base.objects.length + 1 &&
    others.every((o) => base.objects.some((q) => deepEqual(q, o))),
    "the overlay is the base plus one DaemonSet");
  const terms = (ds) => ds.spec.template.spec.affinity.nodeAffinity
    .requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms;
  const rule = (op) => ({ key: "podnet.io/bursts", operator: op, values: ["off"] });
  // The base's DaemonSet, as each should be.
  const wantMain = clone(baseDs);
  terms(wantMain).forEach((t) => t.matchExpressions.push(rule("NotIn")));
  need(deepEqual(main, wantMain), "podnet-exporter is the base's DaemonSet plus NotIn [off]");
  const wantPool = clone(baseDs);
  wantPool.metadata.name = "podnet-exporter-no-bursts";
  for (const labels of [wantPool.metadata.labels, wantPool.spec.selector.matchLabels,
    wantPool.spec.template.metadata.labels]) labels["podnet.io/pool"] = "no-bursts";
  terms(wantPool).forEach((t) => t.matchExpressions.push(rule("In")));
  for (const c of wantPool.spec.template.spec.containers) {
    c.ports = (c.ports || []).filter((port) => port.name !== "burst");
  }
  const sortKeys = (x) => JSON.parse(JSON.stringify(x, (k, v) =>
    v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort()) : v));
  need(deepEqual(sortKeys(pool), sortKeys(wantPool)),
    "podnet-exporter-no-bursts is the base's DaemonSet, renamed, labelled podnet.io/pool, In [off], " +
    "without the burst port");
  const podLabels = pool.spec.template.metadata.labels;
  need(Object.entries(svc.spec.selector).every(([k, v]) => podLabels[k] === v),
    "the Service selects the pool's Pods");
  need(!pool.spec.template.spec.containers.some((c) => (c.ports || []).some((q) => q.name === "burst")),
    "the pool's Pods declare no burst port");
  need(svc.spec.ports.some((q) => q.name === "burst" && q.targetPort === "burst"),
    "the Service's burst port targets the named container port (a number would be found in every Pod)");
  const mainLabels = main.spec.template.metadata.labels;
  need(!Object.entries(pool.spec.selector.matchLabels).every(([k, v]) => mainLabels[k] === v),
    "the pool's selector does not claim the base DaemonSet's Pods");
  return p;
}
if (!args.exporter) {
  const withPool = render(path.join(kubeDir, "no-burst-pool"));
  check(!withPool.error, "kubectl kustomize .../no-burst-pool renders" +
    (withPool.error ? `: ${withPool.error}` : ""));
  if (!withPool.error) {
    const found = poolProblems(withPool.objects);
    check(found.length === 0, "the no-burst-pool overlay keeps its promises" +
      (found.length ? `: ${found.join("; ")}` : ""));
    const dsOf = (o, name) => o.find((x) => x.kind === "DaemonSet" && x.metadata.name === name);
    const mutants = {
      "the pool keeps its burst port": (o) => {
        dsOf(o, "podnet-exporter-no-bursts").spec.template.spec.containers[0].ports.push(
          { name: "burst", containerPort: 5201, protocol: "TCP" });
      },
      "the base DaemonSet also on the pool": (o) => {
        dsOf(o, "podnet-exporter").spec.template.spec.affinity.nodeAffinity
          .requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions.pop();
      },
      "the pool's Pods not selected by the Service": (o) => {
        delete dsOf(o, "podnet-exporter-no-bursts").spec.template.metadata.labels["app.kubernetes.io/component"];
      },
      "overlapping selectors": (o) => {
        delete dsOf(o, "podnet-exporter-no-bursts").spec.selector.matchLabels["podnet.io/pool"];
      },
      "the pool drifted from the base (another image)": (o) => {
        dsOf(o, "podnet-exporter-no-bursts").spec.template.spec.containers[0].image = "other";
      },
    };
    const missed = Object.entries(mutants).filter(([, mutate]) => {
      const objs = clone(withPool.objects);
      mutate(objs);
      return poolProblems(objs).length === 0;
    }).map(([what]) => what);
    check(missed.length === 0, `each of ${Object.keys(mutants).length} broken no-burst-pool promises is caught` +
      (missed.length ? `: missed ${missed.join(", ")}` : ""));
  }
}

finish();

function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}
